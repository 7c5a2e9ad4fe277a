"""The documentation cannot go stale: every shown output is what its command prints today, and the site builds.

``docs/examples.py --check`` reruns the marked examples of README.md and docs/ and fails with a diff where a block
differs (only run-folder time stamps, paths, progress lines and a search's elapsed seconds are masked). The slow
examples run only with ``pytest --nightly``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "docs" / "examples.py"


def _runner_module():
    if "docs_examples" not in sys.modules:          # registered first: its dataclasses look their module up
        spec = importlib.util.spec_from_file_location("docs_examples", RUNNER)
        sys.modules["docs_examples"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["docs_examples"])
    return sys.modules["docs_examples"]


def _check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUNNER), "--check", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)


def test_fast_examples_are_current():
    r = _check("--only-fast", "--jobs", "2")
    assert r.returncode == 0, f"stale examples (run `python docs/examples.py` to rewrite them):\n{r.stdout}{r.stderr}"


@pytest.mark.nightly
def test_every_example_is_current():
    r = _check("--jobs", "2")
    assert r.returncode == 0, f"stale examples (run `python docs/examples.py` to rewrite them):\n{r.stdout}{r.stderr}"


def test_every_file_an_example_names_exists():
    # a moved fixture turns an example into "does not exist", which --check then keeps as the expected output
    runner = _runner_module()
    tree = re.compile(r"(?<![\w/.$-])(?:tests|docs|cluster_specs|search_spaces|benchmarks|autoplan)/[\w./+-]+")
    missing = []
    for path in runner.doc_files():
        for example in runner.find_examples(path, path.read_text().splitlines(keepends=True)):
            missing += [f"{path.relative_to(ROOT)}:{example.line + 1}: {name}"
                        for name in tree.findall(example.command) if not (ROOT / name.rstrip(".")).exists()]
    assert not missing, "examples name files that are not in the repository:\n" + "\n".join(missing)


def test_no_shown_output_is_a_python_error():
    # --check compares a block with what its command prints today, so a benchmark that broke before the block was
    # rewritten shows its own error as the expected output
    runner = _runner_module()
    error = re.compile(r"Traceback \(most recent call last\)|positional arguments? but \d+ (?:was|were) given"
                       r"|unexpected keyword argument|object has no attribute|is not defined")
    shown = []
    for path in runner.doc_files():
        for example in runner.find_examples(path, path.read_text().splitlines(keepends=True)):
            shown += [f"{path.relative_to(ROOT)}:{example.line + 1}: {line.strip()[:120]}"
                      for line in example.current.splitlines() if error.search(line)]
    assert not shown, "examples show a Python error as their output:\n" + "\n".join(shown[:20])


def test_a_planted_stale_number_is_caught(tmp_path):
    page = tmp_path / "check.md"
    text = (ROOT / "docs" / "commands" / "check.md").read_text()
    # the invalid plan's GPU count, inside the block the runner owns: 1008 → 1009
    assert text.count("= 1008, not the 1024 GPUs") == 1
    page.write_text(text.replace("= 1008, not the 1024 GPUs", "= 1009, not the 1024 GPUs"))
    r = _check(str(page))
    assert r.returncode == 1
    assert "-  • dp·tp·pp·cp = 48·3·7·1 = 1009, not the 1024 GPUs of the cluster" in r.stdout
    assert "+  • dp·tp·pp·cp = 48·3·7·1 = 1008, not the 1024 GPUs of the cluster" in r.stdout
    assert "1 stale" in r.stderr


def test_rewriting_fills_a_new_marker_and_then_checks_clean(tmp_path):
    page = tmp_path / "new.md"
    page.write_text("# A page\n\n<!-- example: autoplan check --model gpt3 --gpus 1024 --tp 3 --pp 7 --dp 48 -->\n\n"
                    "<!-- example markdown: printf '| a |\\n|---|\\n| 1 |\\n' -->\n\ntext after\n")
    assert subprocess.run([sys.executable, str(RUNNER), str(page)], cwd=ROOT, capture_output=True).returncode == 0
    text = page.read_text()
    assert "```text\n$ autoplan check --model gpt3 --gpus 1024 --tp 3 --pp 7 --dp 48\n" in text
    assert "(exit status 1)\n```\n" in text
    assert "<!-- example markdown: printf '| a |\\n|---|\\n| 1 |\\n' -->\n\n| a |\n|---|\n| 1 |\n\n<!-- end example -->" in text
    assert text.endswith("\ntext after\n")
    assert _check(str(page)).returncode == 0


def test_masks_only_volatile_text():
    mask = _runner_module().mask
    out = ("37632 combinations, 8580 valid, 188 simulated, 2651 skipped by bound (cannot enter\n"
           "the top 10); 2.4 s.   \nrun folder: results/20261123-174936-gpt3-175b-1024gpu\n"
           "autoplan: 132/300 of budget (5844 valid), 26 plans/s, 5.0 s; best tp4 pp8 6.565 s\n"
           "│  1 │ tp4 pp4 dp64 mb2 int12 sp z2     │  6.469 │  486,265 │  51.7 │")
    assert mask(out) == ("37632 combinations, 8580 valid, 188 simulated, 2651 skipped by bound (cannot enter\n"
                         "the top 10); <elapsed> s.\nrun folder: results/YYYYMMDD-HHMMSS-gpt3-175b-1024gpu\n"
                         "│  1 │ tp4 pp4 dp64 mb2 int12 sp z2     │  6.469 │  486,265 │  51.7 │")
    # a step time ending a line is a model figure, not the search's elapsed time
    assert mask("step time 20.370 s.") == "step time 20.370 s."
    # a benchmark's CPU seconds, not its figures
    assert mask("mean |error| 14.5 % over 21 runs (0.1 s CPU)") == "mean |error| 14.5 % over 21 runs (<cpu> s CPU)"
    # a second search started in the same second gets a numbered folder: the same example either way
    assert mask("run folder: results/20261123-174936-gpt3-175b-1024gpu-2/report.html") == \
        "run folder: results/YYYYMMDD-HHMMSS-gpt3-175b-1024gpu/report.html"
    assert mask("results/20261123-174936-llama3-405b-sweep-3 done") == "results/YYYYMMDD-HHMMSS-llama3-405b-sweep done"


def test_markers_inside_other_fences_are_text():
    runner = _runner_module()
    lines = ["````markdown\n", "<!-- example: autoplan models -->\n", "```text\n", "```\n", "````\n",
             "<!-- example slow: autoplan clusters -->\n"]
    found = runner.find_examples(Path("x.md"), lines)
    assert [(e.command, e.slow) for e in found] == [("autoplan clusters", True)]


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r'^pip install -e "\.\[test\]" && (python -m pytest -q)\s', readme, re.MULTILINE)
    assert command, "README's set-up block no longer shows the test command"
    assert re.search(r'^python -m pip install -q -e "\.\[test\]"$', ci, re.MULTILINE)
    assert re.search(rf"^{re.escape(command.group(1))}$", ci, re.MULTILINE)
    assert len(readme.splitlines()) <= 300, "the README is the front door: keep it under 300 lines, move detail to docs/"


@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (pip install -e '.[test]')")
def test_site_builds_without_warnings(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "fidelity" / "index.html").is_file()
