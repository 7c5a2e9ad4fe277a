"""Fuzz what autoplan reads, at scale: run folders, spec files, names and flags (tests/cli/test_fuzz_inputs.py,
every input in a forked child with a memory limit and a time bound), and print the counts: inputs per kind and
subcommand, tracebacks, hangs, errors over 3 lines, writes by read-only commands or through links.

    python benchmarks/fuzz_inputs.py            # 3,021 generated inputs (scale 53), 30-60 min on 2 cores
    python benchmarks/fuzz_inputs.py --quick    # 57 (scale 1, what CI runs), about 1 min
    python benchmarks/fuzz_inputs.py --scale 5  # any multiple of CI's examples

Failures are counted, not fatal (AUTOPLAN_FUZZ_TALLY=1); the first few of each kind are printed with their
inputs. Set PYTHONPATH to another checkout to fuzz that version with the same inputs (the fuzzer uses only the
command line).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI's examples (scale 1)")
    parser.add_argument("--scale", type=float, default=53.0, help="multiple of CI's examples (default 53)")
    parser.add_argument("--limit-s", type=float, default=60.0, help="seconds after which an input is a hang")
    parser.add_argument("-k", default=None, help="only these tests (pytest -k)")
    args = parser.parse_args()
    scale = 1.0 if args.quick else args.scale
    report = Path(tempfile.mkdtemp()) / "fuzz.json"
    env = {**os.environ, "AUTOPLAN_FUZZ_SCALE": str(scale), "AUTOPLAN_FUZZ_TALLY": "1",
           "AUTOPLAN_FUZZ_REPORT": str(report), "AUTOPLAN_FUZZ_LIMIT_S": str(args.limit_s)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "tests/cli/test_fuzz_inputs.py")]
    cmd += ["-k", args.k] if args.k else []
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if not report.exists():
        print(proc.stdout[-4000:], proc.stderr[-4000:])
        sys.exit(1)
    data = json.loads(report.read_text())
    total: Counter = Counter()
    print(f"{'kind':<36} {'inputs':>7} {'failed':>7} {'traceback':>9} {'hang':>5} {'s/input':>7}  exits")
    for kind, counts in sorted(data["counts"].items()):
        total.update(counts)
        exits = ", ".join(f"{k[5:]}:{n}" for k, n in sorted(counts.items()) if k.startswith("exit "))
        per = counts.get("ms", 0) / 1000 / max(1, counts.get("inputs", 0))
        print(f"{kind:<36} {counts.get('inputs', 0):>7} {counts.get('failed inputs', 0):>7} "
              f"{counts.get('traceback', 0):>9} {counts.get('hang', 0):>5} {per:>7.2f}  {exits}")
    others = {k: n for k, n in total.items() if k not in ("inputs", "failed inputs", "traceback", "hang", "ms")
              and not k.startswith("exit ")}
    print(f"{'total':<36} {total['inputs']:>7} {total['failed inputs']:>7} {total['traceback']:>9} "
          f"{total['hang']:>5}  other problems: {others or 'none'}")
    print(f"scale {scale:g}, {wall:.0f} s wall, {wall / max(1, total['inputs']):.2f} s per input")
    for kind, failures in sorted(data["failures"].items()):
        for f in failures[:3]:
            print(f"\n[{kind}] {'; '.join(f['problems'])}: autoplan {' '.join(map(repr, f['args']))}")
            tail = (f["traceback"] or f["stderr"]).strip().splitlines()[-3:]
            print("   " + "\n   ".join(line[:300] for line in tail))
    sys.exit(0 if total["failed inputs"] == 0 else 1)


if __name__ == "__main__":
    main()
