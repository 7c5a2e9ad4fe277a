"""autoplan's step breakdown beside SimuMax's, per component, on the SimuMax B200 runs that validate counts.

SimuMax (MooreThreads/SimuMax, release v1.2) is a simulator whose own predictions of these runs are within a few
percent of their measured step times. Its component times (benchmarks/data/simumax/b200_components.json, produced by
running SimuMax @4dcaae5 on a CPU; the file says how) are its predictions, not measurements: they say where
autoplan's step differs from a second model built from the same kernel measurements, component by component, and
never serve as a target. Columns, in ms per step: measured, autoplan (ap) and SimuMax (sm) step; compute (forward +
backward + recompute); exposed TP (SimuMax: its intra-node exposed time, TP or EP); DP (autoplan: exposed DP plus the
rest of a pp = 1 step, where the DP collectives it runs after the backward land); optimizer. With pp > 1 only the
step is comparable (SimuMax lists its first stage's compute).

Run: python benchmarks/bench_simumax_components.py [--quick]     (--quick: six representative rows)
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from autoplan.sim.simulate import evaluate
from autoplan.validate.files import load_default
from autoplan.validate.transformer import cluster_of, model_of, run_case

DATA = Path(__file__).resolve().parent / "data" / "simumax" / "b200_components.json"
QUICK = ("llama3-70b-l12-tp8-pp1-dp1-mbc4", "llama3-70b-tp2-pp1-dp4-l12-mbc4", "llama3-70b-l12-tp1-pp2-dp4-mbc4",
         "llama3-405b-l4-tp4-pp1-dp2-mbc8", "deepseekv2-tp1-ep8-pp1-dp8-l4-mbc4", "deepseekv2-tp1-ep4-pp2-dp4-l4-mbc4")


def simumax_key(run_id: str) -> str | None:
    """SimuMax's case key of a validate run id (None: no SimuMax breakdown stored for it)."""
    m = re.search(r"(llama3-70b|llama3-405b|deepseekv2).*?tp(\d).*?(?:ep(\d)-)?pp(\d).*?mbc(\d+)", run_id)
    if not m or "-cp" in run_id:
        return None
    model, tp, ep, pp, mbc = m.groups()
    if model == "deepseekv2":
        return f"deepseekv2_tp1_ep{ep}_pp{pp}_dp{8 // int(pp)}_l4_mbc{mbc}"
    return f"{'llama3_70b_l12' if model == 'llama3-70b' else 'llama3_405b_l4'}_tp{tp}_pp{pp}_mbc{mbc}"


def rows(quick: bool) -> list[tuple]:
    """(run, measured, autoplan parts, SimuMax parts) per SimuMax B200 run with a stored SimuMax breakdown."""
    sm = json.loads(DATA.read_text())["cases"]
    out = []
    for case in load_default()["cases"]:
        key = simumax_key(case["id"]) if case["id"].startswith("simumax-b200") else None
        if key not in sm or (quick and not any(q in case["id"] for q in QUICK)):
            continue
        r = run_case(case)
        b = evaluate(model_of(case["model"]), cluster_of(case["hardware"], 8), r.plan).metrics.breakdown
        ap = {"step": r.predicted, "compute": b["compute"] + b["recompute"], "tp": b["tp"] + b["ep"] + b["a2a"],
              "dp": b["dp"] + (b["bubble"] if case["strategy"]["pp"] == 1 else 0.0), "opt": b["optimizer"]}
        s = sm[key]
        ref = {"step": s["step_ms"], "compute": s["fwd_compute_ms"] + s["bwd_compute_ms"] + s["recompute_ms"],
               "tp": s["tp_ep_exposed_ms"], "dp": s["dp_exposed_ms"], "opt": s["optimizer_ms"]}
        out.append((case["id"][len("simumax-b200-"):], r.measured * 1e3, {k: v * 1e3 for k, v in ap.items()}, ref))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="six representative rows")
    args = parser.parse_args()
    print(f"{'run':40s} {'measured':>8s} | {'step ap':>7s} {'sm':>7s} | {'compute ap':>10s} {'sm':>7s} | "
          f"{'TP/EP ap':>8s} {'sm':>6s} | {'DP ap':>6s} {'sm':>6s} | {'opt ap':>6s} {'sm':>5s}   (ms)")
    for run, measured, ap, sm in rows(args.quick):
        pp1 = "-pp1-" in run
        cells = [f"{ap[k]:{w}.1f} {sm[k] if pp1 or k == 'step' else float('nan'):{v}.1f}"
                 for k, w, v in (("step", 7, 7), ("compute", 10, 7), ("tp", 8, 6), ("dp", 6, 6), ("opt", 6, 5))]
        print(f"{run[:40]:40s} {measured:8.1f} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
