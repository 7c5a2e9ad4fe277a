"""TP-comm overlap on NVIDIA's H100 recipes: each public case with tp > 1, predicted with the overlap off (what
`autoplan validate` models) and on (what the GPT-3 175B recipe's gpt3_175b_hydra.yaml runs: ub_tp_comm_overlap),
and its error against the published step time. Nothing else about the cases changes.

Run: python benchmarks/bench_tp_overlap.py
"""

from __future__ import annotations

import copy

from autoplan.validate import load, run_case


def main() -> None:
    print(f"{'case':36s} {'measured':>8s}  {'overlap off':>17s}  {'overlap on':>17s}")
    for case in load()["cases"]:
        if "H100" not in str(case["hardware"].get("gpu")) or (case["strategy"].get("tp") or 1) == 1:
            continue
        off = run_case(case)
        on_case = copy.deepcopy(case)
        on_case["strategy"]["tp_comm_overlap"] = True
        on = run_case(on_case)
        cells = [f"{r.predicted:6.2f} ({r.error_pct:+5.1f} %)" if r.predicted else "no plan" for r in (off, on)]
        print(f"{case['id']:36s} {off.measured:8.2f}  {cells[0]:>17s}  {cells[1]:>17s}")


if __name__ == "__main__":
    main()
