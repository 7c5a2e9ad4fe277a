"""Megatron-Core's combined 1F1B (``ep_overlap``) on the host: the measured A/B that sets
``moe_layer.COMBINED_1F1B_NODE_LAUNCHES``, its second A/B as a check, and every validate run that overlaps.

Megatron-Bridge PR #1760 (a6e92de5f, "Improving Qwen3-235B-A22B B200 performance", 2026-01-09) turned
``moe_a2a_overlap`` off in the 64-GPU DGX B200 Qwen3 235B-A22B presets "due to CPU overhead" and gave both step times:
BF16 17.2 s with it, 16.0 s without (PP 8, VP 4, EP 8, MBS 1, GBS 1024, the alltoall dispatcher; only the overlap
changed), and MXFP8 20.1 s before, 16.9 s after (the overlap and VP 4 both dropped). Neither run is in validate.
The BF16 pair is the calibration: the node cost is bisected so that autoplan's with/without ratio equals the
measured 17.2 / 16.0. The MXFP8 pair checks it.

Run: python benchmarks/bench_ep_overlap.py [--quick]     (--quick: the A/Bs only, no bisection or validate rows)
"""

from __future__ import annotations

import argparse
import copy
import sys
from unittest import mock

from autoplan import validate
from autoplan.families.transformer import moe_layer

BASE_ROW = "bridge-b200-mxfp8-qwen3-235b-a22b-256gpu-26.02"
"""The validate row whose Megatron-Bridge preset (model, dispatcher, fusions) the PR's runs share; only the
layout, GPU count, precision and overlap differ."""
BF16 = {True: 17.2, False: 16.0}
"""PR #1760's BF16 step seconds with and without moe_a2a_overlap (the calibration pair)."""
MXFP8 = {"before": 20.1, "after": 16.9}
"""PR #1760's MXFP8 step seconds before (VP 4, overlap on) and after (no VP, overlap off): the check."""


def _case(overlap: bool, precision: str, vp: int) -> dict:
    cases = {c["id"]: c for c in validate.load_default()["cases"]}
    case = copy.deepcopy(cases[BASE_ROW])
    case["hardware"]["num_gpus"] = 64
    case["strategy"].update(precision=precision, pp=8, virtual_stages_per_rank=vp, interleaved_schedule=vp > 1,
                            ep=8, microbatch=1, global_batch=1024, ep_overlap=overlap)
    if precision == "bf16":
        case["strategy"].pop("fp8_param_gather", None)
    else:   # qwen3_llm_pretrain.py (a6e92de5f^): MXFP8 turns overlap_param_gather off ("NaN grad norm")
        case["strategy"]["overlap_param_gather"] = False
    case.pop("calibration", None)
    case["id"] = f"PR 1760 {precision} vp{vp} {'overlap' if overlap else 'no overlap'}"
    return case


def _forget() -> None:
    """Empty every memoised cost of autoplan's modules (they hold layers priced at the old node cost)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("autoplan."):
            for value in list(vars(module).values()):
                if not isinstance(value, type) and callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def _step(case: dict, launches: float) -> float:
    with mock.patch.object(moe_layer, "COMBINED_1F1B_NODE_LAUNCHES", launches):
        _forget()
        try:
            return validate.run_case(case).predicted
        finally:
            _forget()


def fit(lo: float = 0.0, hi: float = 10.0, steps: int = 24) -> float:
    """The node cost (host launches) at which autoplan's BF16 with/without ratio equals the measured one."""
    on, off = _case(True, "bf16", 4), _case(False, "bf16", 4)
    target = BF16[True] / BF16[False]
    base = _step(off, 0.0)
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _step(on, mid) / base < target else (lo, mid)
    return (lo + hi) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the A/Bs only, no bisection or validate rows")
    quick = ap.parse_args().quick
    shipped = moe_layer.COMBINED_1F1B_NODE_LAUNCHES
    print(f"COMBINED_1F1B_NODE_LAUNCHES = {shipped} host launches per schedule node, "
          f"{sum(moe_layer.COMBINED_1F1B_NODES)} nodes per layer (forward + backward)")
    pairs = [("BF16 overlap on  (calibration)", _case(True, "bf16", 4), BF16[True]),
             ("BF16 overlap off (calibration)", _case(False, "bf16", 4), BF16[False]),
             ("MXFP8 before: VP 4, overlap on", _case(True, "mxfp8", 4), MXFP8["before"]),
             ("MXFP8 after: no VP, overlap off", _case(False, "mxfp8", 1), MXFP8["after"])]
    print(f"{'PR #1760, 64 B200s, Qwen3 235B-A22B':36s} {'measured':>9s} {'no node cost':>13s} {'shipped':>9s}")
    rows = {}
    for name, case, measured in pairs:
        rows[name] = (_step(case, 0.0), _step(case, shipped))
        print(f"{name:36s} {measured:8.1f}s {rows[name][0]:12.2f}s {rows[name][1]:8.2f}s")
    for what, (a, b), meas in (("BF16 on/off", (pairs[0][0], pairs[1][0]), BF16[True] / BF16[False]),
                               ("MXFP8 before/after", (pairs[2][0], pairs[3][0]), MXFP8["before"] / MXFP8["after"])):
        print(f"  {what:20s} ratio measured {meas:.3f}, without the node cost {rows[a][0] / rows[b][0]:.3f}, "
              f"shipped {rows[a][1] / rows[b][1]:.3f}")
    if quick:
        return
    print(f"bisected on the BF16 pair: {fit():.3f} host launches per node (shipped {shipped})")
    runs = [c for c in validate.load_default()["cases"] if c.get("strategy", {}).get("ep_overlap")]
    print(f"validate runs with ep_overlap ({len(runs)}; a full-iteration CUDA graph replays the nodes' kernels "
          "without the host, so those do not move):")
    for case in runs:
        measured = validate.run_case(case).measured
        errs = [100 * (_step(case, n) / measured - 1) for n in (0.0, shipped)]
        print(f"  {case['id'][:64]:64s} {errs[0]:+6.1f} % -> {errs[1]:+6.1f} %"
              f"{'  (calibration run)' if case.get('calibration') else ''}")


if __name__ == "__main__":
    main()
