"""report.html in a real headless Chromium: it loads with no JavaScript error and every plot renders.

Chromium comes from Debian's ``chromium`` package, which ``.ci/run`` installs; a test never changes the system, so
without it the test skips, saying how to install it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--virtual-time-budget=10000")


def _find() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@pytest.fixture(scope="module")
def chromium() -> str:
    path = _find()
    if path is None:
        pytest.skip("chromium not installed (`apt-get install chromium`; .ci/run installs it)")
    return path


def _browse(chromium: str, page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                           *extra, page.resolve().as_uri()], capture_output=True, text=True, timeout=180)


class _Plots(HTMLParser):
    """Which plot divs (``id="fig-…"``) hold a rendered ``<svg class="main-svg">``, and the js-errors text."""

    def __init__(self) -> None:
        super().__init__()
        self.rendered: dict[str, bool] = {}
        self.errors: str | None = None
        self._plot: str | None = None
        self._depth = 0
        self._in_errors = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "div":
            if self._plot:
                self._depth += 1
            elif (a.get("id") or "").startswith("fig-"):
                self._plot, self._depth = a["id"], 1
                self.rendered[self._plot] = False
        elif tag == "svg" and self._plot and "main-svg" in (a.get("class") or "").split():
            self.rendered[self._plot] = True
        elif tag == "pre" and a.get("id") == "js-errors":
            self._in_errors, self.errors = True, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._plot:
            self._depth -= 1
            if self._depth == 0:
                self._plot = None
        elif tag == "pre":
            self._in_errors = False

    def handle_data(self, data: str) -> None:
        if self._in_errors:
            self.errors += data


def _dom(chromium: str, page: Path, tmp: Path) -> tuple[_Plots, str]:
    r = _browse(chromium, page, tmp, "--dump-dom")
    assert r.returncode == 0, r.stderr[-2000:]
    parsed = _Plots()
    parsed.feed(r.stdout)
    return parsed, r.stderr


def test_report_renders_without_errors(chromium, small_run, tmp_path):
    page = small_run / "report.html"
    expected = {"fig-pareto", "fig-breakdown", "fig-timeline", "fig-sensitivity", "fig-importance"}
    assert expected <= set(re.findall(r'<div id="(fig-[a-z]+)"', page.read_text()))
    dom, stderr = _dom(chromium, page, tmp_path)
    assert set(dom.rendered) == expected
    assert all(dom.rendered.values()), f"plots not rendered: {[k for k, v in dom.rendered.items() if not v]}"
    assert dom.errors == "", dom.errors
    assert "Uncaught" not in stderr, [line for line in stderr.splitlines() if "Uncaught" in line]


def test_the_error_check_sees_errors(chromium, small_run, tmp_path):
    page = tmp_path / "broken.html"
    page.write_text((small_run / "report.html").read_text().replace(
        "</body>", "<script>throw new Error('planted failure');</script></body>"))
    dom, stderr = _dom(chromium, page, tmp_path)
    assert "planted failure" in dom.errors
    assert "Uncaught Error: planted failure" in stderr
    assert all(dom.rendered.values())


def test_screenshot(chromium, small_run, tmp_path):
    shot = tmp_path / "report.png"
    r = _browse(chromium, small_run / "report.html", tmp_path, f"--screenshot={shot}", "--window-size=1400,2400")
    assert r.returncode == 0 and shot.stat().st_size > 50_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
