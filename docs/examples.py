#!/usr/bin/env python3
"""Run the examples of README.md and docs/**/*.md and write their output below them, so no shown output goes stale.

    python docs/examples.py                  rewrite every example's output block
    python docs/examples.py --check          exit 1, with a unified diff per example, where an output differs
    python docs/examples.py --only-fast F.md only the examples not marked slow, only in F.md

An example is a marker line followed by the block the runner owns:

    <!-- example: autoplan search --model gpt3 --gpus 1024 -->
    ```text
    $ autoplan search --model gpt3 --gpus 1024
    …output…
    ```

``<!-- example slow: … -->`` marks an example too slow for CI (``--only-fast`` leaves it alone; the nightly test runs
it). ``<!-- example markdown: … -->`` takes output that is itself markdown (tables), written as it is up to the line
``<!-- end example -->``. ``<!-- example timing: … -->`` marks a benchmark whose output is measured seconds: it is
rewritten like the others, but ``--check`` only requires it to run (exit status 0), never compares it. Flags
combine (``example slow timing:``). A marker with no block below it gets one.

Each command runs in ``bash`` from a scratch folder whose entries link to the repository's top-level files (so
``tests/…`` and ``cluster_specs/…`` resolve and ``results/`` is the scratch folder's own), with stdout and stderr
merged in the order written, no colour, no terminal (rich draws 132 columns) and no Ray address. ``$RUN`` is the
run folder of the last search above in the same file. Only volatile text is masked, the same way in the output and
in the file: the elapsed seconds at the end of a search's summary, the time stamp of run folder names, the scratch
folder's path, and search progress lines on stderr. Every model figure is compared exactly.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository: the commands see its top-level entries."""

MARKER = re.compile(r"^<!-- example(?P<flags>(?: (?:slow|markdown|timing))*): (?P<command>.+?) -->$")
END_MARKDOWN = "<!-- end example -->"
FENCE = "```"

ENV = {"COLUMNS": "110", "LINES": "50", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1",
       "PYTHONHASHSEED": "0"}
"""Set for every command: a fixed terminal, no colour, writes in order; RAY_ADDRESS and FORCE_COLOR are removed."""

ELAPSED = re.compile(r";\s+\d+\.\d s\.$", re.MULTILINE)
"""A search summary's last words, its wall time ("…; 2.4 s.")."""
RUN_STAMP = re.compile(r"\b\d{8}-\d{6}(?=-)")
"""The time stamp that starts a run folder's name (20261123-174936-gpt3-175b-1024gpu)."""
RUN_COPY = re.compile(r"(YYYYMMDD-HHMMSS-\S+?(?:gpu|sweep))-\d+\b")
"""A run folder's name with the count ``RunFolder.create`` adds when a search of the same model and GPUs started in
the same second (``…-1024gpu-2``): which one an example gets depends on how fast the one before it ran."""
PROGRESS = re.compile(r"^autoplan: \d+/\d+ .*plans/s.*\n?", re.MULTILINE)
"""A search's progress line, printed to a non-terminal stderr every 5 s."""
CPU_TIME = re.compile(r"\(\d+\.\d s CPU\)")
"""A benchmark's CPU seconds ("(0.1 s CPU)"), which vary between runs at the last digit."""


def mask(text: str) -> str:
    """``text`` with its volatile parts replaced by stable placeholders and trailing blanks dropped."""
    text = "\n".join(line.rstrip() for line in text.splitlines())
    text = PROGRESS.sub("", text)
    text = ELAPSED.sub("; <elapsed> s.", text)
    text = CPU_TIME.sub("(<cpu> s CPU)", text)
    text = RUN_STAMP.sub("YYYYMMDD-HHMMSS", text)
    text = RUN_COPY.sub(r"\1", text)
    return text.strip("\n")


@dataclass
class Example:
    """One marked example of a file: where its block is and what it holds now."""

    path: Path
    line: int               # the marker's line, 0-based
    command: str
    slow: bool
    markdown: bool
    timing: bool
    start: int              # first line of the block the runner owns (its opening fence for text)
    end: int                # one past the block's last line (its closing fence or end marker)
    current: str            # the block's content today (for text: without the fences)


def find_examples(path: Path, lines: list[str]) -> list[Example]:
    """Every marked example of a file, in order; a marker with no block gets an empty one (start == end). Markers
    inside other fenced blocks (a page showing what a marker looks like) are text, not examples."""
    found = []
    fence = ""                      # the backticks that opened the fenced block we are in, if any
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        if fence:
            if line.strip() == fence[0] * len(line.strip()) and len(line.strip()) >= len(fence):
                fence = ""
            i += 1
            continue
        m = MARKER.match(line)
        if not m:
            opening = re.match(r"^(`{3,}|~{3,})", line)
            fence = opening.group(1) if opening else ""
            i += 1
            continue
        flags = m["flags"].split()
        markdown = "markdown" in flags
        start = end = i + 1
        current = ""
        if markdown:
            for j in range(i + 1, len(lines)):
                if lines[j].rstrip("\n") == END_MARKDOWN:
                    end, current = j + 1, "".join(lines[i + 1:j])
                    break
                if MARKER.match(lines[j].rstrip("\n")):
                    break
        elif start < len(lines) and lines[start].rstrip("\n") == FENCE + "text":
            for j in range(start + 1, len(lines)):
                if lines[j].rstrip("\n") == FENCE:
                    end, current = j + 1, "".join(lines[start + 1:j])
                    break
            else:
                raise SystemExit(f"{path}:{start + 1}: the example's ```text block is never closed")
        found.append(Example(path, i, m["command"], "slow" in flags, markdown, "timing" in flags, start, end, current))
        i = end
    return found


def render(example: Example, output: str) -> str:
    """The block the runner writes below ``example``'s marker."""
    if example.markdown:       # blank lines around it: the comments must not swallow a table
        return "\n" + output + "\n\n" + END_MARKDOWN + "\n"
    return f"{FENCE}text\n$ {example.command}\n{output}\n{FENCE}\n"


def expected(example: Example) -> str:
    """What the block holds today, in the form ``run`` returns output (the command line dropped)."""
    if example.markdown:
        return example.current
    lines = example.current.splitlines()
    if lines and lines[0] == f"$ {example.command}":
        lines = lines[1:]
    return "\n".join(lines)


class Runner:
    """Runs commands, each file's in its own scratch folder; remembers outputs, so a command shown twice runs once."""

    def __init__(self) -> None:
        self.base = os.path.realpath(tempfile.mkdtemp(prefix="autoplan-docs-"))
        self.env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FORCE_COLOR", "CLICOLOR_FORCE")}
        self.env |= ENV
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.lock = threading.Lock()
        self.cache: dict[tuple[str, str], Future] = {}
        self.seconds: list[tuple[float, Example]] = []
        self.folders = 0

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def scratch(self) -> Path:
        """A new scratch folder whose entries link to the repository's top-level files (results/ its own)."""
        with self.lock:
            self.folders += 1
            folder = Path(self.base) / str(self.folders)
        folder.mkdir()
        for entry in ROOT.iterdir():
            if not entry.name.startswith(".") and entry.name != "results":
                os.symlink(entry, folder / entry.name)
        return folder

    def mask(self, text: str) -> str:
        """``mask`` with the scratch folders' paths dropped too."""
        return mask(re.sub(re.escape(self.base) + r"/\d+/", "", text))

    def run(self, example: Example, scratch: Path, run_folder: str) -> tuple[str, str | None]:
        """The masked output of ``example``'s command run in ``scratch``, and the run folder it left (or None)."""
        key = (example.command, run_folder if "RUN" in example.command else "")
        with self.lock:
            future = self.cache.get(key)
            mine = future is None
            if mine:
                future = self.cache[key] = Future()
        if not mine:
            return future.result()
        try:
            results = scratch / "results"
            before = set(results.iterdir()) if results.is_dir() else set()
            t0 = time.perf_counter()
            proc = subprocess.run(["bash", "-c", example.command], cwd=scratch, env=self.env | {"RUN": run_folder},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
            with self.lock:
                self.seconds.append((time.perf_counter() - t0, example))
            output = self.mask(proc.stdout)
            if proc.returncode:
                output += f"\n(exit status {proc.returncode})"
            new = sorted(set(results.iterdir()) - before) if results.is_dir() else []
            future.set_result((output, str(new[-1]) if new else None))
        except BaseException as err:
            future.set_exception(err)
        return future.result()


def process(path: Path, runner: Runner, check: bool, only_fast: bool) -> tuple[int, int, str]:
    """Run ``path``'s examples; rewrite their blocks (or, with ``check``, make a diff for each stale one).
    Returns (examples run, stale, the diffs)."""
    lines = path.read_text().splitlines(keepends=True)
    examples = [ex for ex in find_examples(path, lines) if not (ex.slow and only_fast)]
    scratch = runner.scratch() if examples else Path()
    run_folder, ran, stale, diffs = "", 0, 0, []
    replacements = []
    for ex in examples:
        output, new_folder = runner.run(ex, scratch, run_folder)
        run_folder = new_folder or run_folder
        ran += 1
        if mask(expected(ex)) == output:
            continue
        if ex.timing and check and "(exit status" not in output.rsplit("\n", 1)[-1]:
            continue                    # a measurement: it ran, and its figures are not compared
        stale += 1
        if check:
            name = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{ex.line + 1}"
            diff = difflib.unified_diff(mask(expected(ex)).splitlines(), output.splitlines(),
                                        f"{name} (in the file)", f"{name} (running: {ex.command})", lineterm="")
            diffs.append("\n".join(diff) + "\n\n")
        replacements.append((ex, render(ex, output)))
    if replacements and not check:
        for ex, block in reversed(replacements):
            lines[ex.start:ex.end] = [block]
        path.write_text("".join(lines))
    return ran, stale, "".join(diffs)


def doc_files() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="markdown files (default: README.md and docs/**/*.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff per stale example")
    parser.add_argument("--only-fast", action="store_true", help="skip the examples marked slow")
    parser.add_argument("--jobs", type=int, default=1, help="files run at once (default 1)")
    parser.add_argument("--times", action="store_true", help="print each command's seconds (stderr)")
    args = parser.parse_args(argv)
    runner = Runner()
    t0 = time.perf_counter()
    try:
        paths = [p.resolve() for p in args.files] or doc_files()
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            results = list(pool.map(lambda p: process(p, runner, args.check, args.only_fast), paths))
    finally:
        runner.close()
    print("".join(diffs for _, _, diffs in results), end="")
    ran, stale = sum(r[0] for r in results), sum(r[1] for r in results)
    if args.times:
        for seconds, ex in sorted(runner.seconds, key=lambda t: -t[0]):
            print(f"{seconds:7.1f} s  {'slow ' if ex.slow else ''}{ex.path.name}:{ex.line + 1}  {ex.command}",
                  file=sys.stderr)
    verb = "stale" if args.check else "rewritten"
    print(f"{ran} examples run ({len(runner.seconds)} commands, {time.perf_counter() - t0:.0f} s); {stale} {verb}",
          file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
