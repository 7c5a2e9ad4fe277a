"""TP-comm overlap on NVIDIA's H100 recipes: each public case with tp > 1, predicted with the overlap off and on
(what the recipes run, e.g. the GPT-3 175B recipe's gpt3_175b_hydra.yaml ub_tp_comm_overlap, and what `autoplan
validate` applies where a case sets it), and its error against the published step time. Nothing else about the
cases changes.

Run: python benchmarks/bench_tp_overlap.py [--quick]     (--quick: the cases on at most 64 GPUs only)
"""

from __future__ import annotations

import argparse
import copy

from autoplan.validate import load, run_case

QUICK_GPUS = 64
"""--quick keeps the cases on at most this many GPUs (Llama 3.1 70B on 64 H100s, BF16 and FP8)."""


def _with_overlap(case: dict, on: bool) -> dict:
    out = copy.deepcopy(case)
    out["strategy"]["tp_comm_overlap"] = on
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only the cases on at most {QUICK_GPUS} GPUs")
    quick = ap.parse_args().quick
    print(f"{'case':36s} {'measured':>8s}  {'overlap off':>17s}  {'overlap on':>17s}")
    for case in load()["cases"]:
        if "H100" not in str(case["hardware"].get("gpu")) or (case["strategy"].get("tp") or 1) == 1:
            continue
        if quick and case["hardware"]["num_gpus"] > QUICK_GPUS:
            continue
        off, on = (run_case(_with_overlap(case, flag)) for flag in (False, True))
        cells = [f"{r.predicted:6.2f} ({r.error_pct:+5.1f} %)" if r.predicted else "no plan" for r in (off, on)]
        print(f"{case['id']:36s} {off.measured:8.2f}  {cells[0]:>17s}  {cells[1]:>17s}")


if __name__ == "__main__":
    main()
