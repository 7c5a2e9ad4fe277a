"""The documented Ray job (docs/commands/search.md), as written, against `ray start --head` with token authentication (Ray ≥ 2.52), and the
two ways attaching can fail told apart within seconds (slow: starts Ray).

The head runs in a temporary HOME holding its token (~/.ray/auth_token), so nothing of the user's Ray is touched;
the job address comes from RAY_API_SERVER_ADDRESS (what `ray job submit` reads when --address is not given).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _readme_job() -> list[str]:
    """The search page's `export RAY_AUTH_MODE=…` and `ray job submit …` lines."""
    text = (REPO / "docs" / "commands" / "search.md").read_text()
    found = re.search(r"^export (RAY_AUTH_MODE=\w+).*\n(ray job submit .*)$", text, re.M)
    assert found, "docs/commands/search.md's Ray job is gone"
    return [found.group(1), found.group(2)]


def _wait_for(port: int, seconds: float = 120.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on port {port} after {seconds:.0f} s")


@pytest.fixture(scope="module")
def token_head(tmp_path_factory):
    """`ray start --head --block` in its own process group (ended by that group only, never `ray stop`, which
    would end every Ray on the machine)."""
    home = tmp_path_factory.mktemp("rayhome")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": str(home)}
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=60)
    port, dash = _free_port(), _free_port()
    head = subprocess.Popen([RAY, "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
                             "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash), "--include-dashboard",
                             "true", "--disable-usage-stats"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(port)
        _wait_for(dash)
        yield env, f"127.0.0.1:{port}", f"http://127.0.0.1:{dash}"
    finally:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue


def test_readme_ray_job_runs_as_written_with_token_auth(token_head, tmp_path):
    env, _, dashboard = token_head
    auth, submit = _readme_job()
    out = (tmp_path / "results").resolve()
    args = [str(out) if a == "/shared/autoplan-results" else a for a in shlex.split(submit)]
    args[0] = RAY
    at = args.index("autoplan")
    args[at:at + 1] = [sys.executable, "-m", "autoplan"]
    key, value = auth.split("=")
    job = subprocess.run(args, cwd=REPO, env=env | {key: value, "RAY_API_SERVER_ADDRESS": dashboard},
                         capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    [folder] = out.iterdir()
    assert json.loads((folder / "leaderboard.json").read_text())["leaderboard"]


@pytest.mark.parametrize("mode, token, says", [(None, None, "refused authentication"),
                                                ("disabled", None, "refused authentication"),
                                                (None, "0" * 64, "refused authentication")])
def test_auth_failure_is_told_apart_from_unreachable_in_seconds(token_head, tmp_path, monkeypatch, mode, token,
                                                                says):
    env, address, _ = token_head
    monkeypatch.setenv("HOME", str(tmp_path))                 # no token file here: only what the case gives
    for k in {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", *(k for k in os.environ if k.startswith("RAY_"))}:
        monkeypatch.delenv(k, raising=False)          # restored afterwards, also what the search itself sets
    if mode:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    if token:
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)
    began = time.perf_counter()
    r = CliRunner().invoke(main, ["search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64",
                                  "--ray-address", address, "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and says in r.output and "cannot reach" not in r.output, r.output
    assert time.perf_counter() - began < 10
    free = _free_port()
    r = CliRunner().invoke(main, ["search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64",
                                  "--ray-address", f"127.0.0.1:{free}", "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "cannot reach" in r.output
