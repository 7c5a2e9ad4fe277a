"""BLOOM 176B's measured runs on Jean Zay against the one constant they hinge on: the Omni-Path tier's efficiency.

`cluster_specs/jean-zay-a100.toml` prices Jean Zay's inter-node network at the one NCCL measurement of that fabric: a
4-node all-reduce at 5.1 GB/s whose log routes each node's traffic through one of its 4 links each way, 0.407 of a
link (read as a share of the node's four links it would be 0.101). This prints each BLOOM run of validate
(`autoplan/data/measured_runs.yaml`) re-scored with its plan at other efficiencies, and whether the TP 4 / TP 8 pair
of the 64-head benchmarks ranks as measured. The one-node runs cross no network: they do not move. Nothing here is
fitted; the spec keeps the measured value.

Run: python benchmarks/bench_jean_zay_network.py [--quick]   (--quick: the measured efficiency and 0.81 only)
"""
from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from autoplan.calibrate import params
from autoplan.validate import validate

PAIR = ("bloom-176b-64heads-tp4-pp12-dp8-384gpu", "bloom-176b-64heads-tp8-pp12-dp4-384gpu")
"""The same model at TP 4 (measured 102.03 s) and TP 8 (121.63 s): TP 4 is the faster."""


def at_efficiency(efficiency: float):
    """A change of a cluster: its Omni-Path tier at ``efficiency``."""
    return lambda cluster: params.apply(cluster, [params.tier_param("omni-path", "efficiency")], [efficiency])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the measured efficiency and 0.81 only")
    args = ap.parse_args()
    report = validate(Path(str(resources.files("autoplan") / "data" / "measured_runs.yaml")), calibrate=False)
    runs = [r for r in report.runs if r.id.startswith("bloom-")]
    levels = (0.407, 0.81) if args.quick else (0.101, 0.2, 0.3, 0.407, 0.5, 0.81)
    print((f"{'run':42} {'measured':>9}  " + "  ".join(f"eff {e:<5}" for e in levels)).rstrip())
    errors: dict[float, list[float]] = {e: [] for e in levels}
    seconds: dict[tuple[str, float], float] = {}
    for r in runs:
        cells = []
        for e in levels:
            t = r.rerun(at_efficiency(e))
            seconds[(r.id, e)] = t
            errors[e].append(100 * (t / r.measured - 1))
            cells.append(f"{errors[e][-1]:+8.1f}%")
        print(f"{r.id:42} {r.measured:8.2f}s  " + "  ".join(cells))
    print(f"{'mean |error|':42} {'':9}  " + "  ".join(f"{sum(map(abs, errors[e])) / len(runs):8.1f}%" for e in levels))
    print(f"{'TP 4 faster than TP 8 (as measured)':42} {'':9}  "
          + "  ".join(f"{'yes' if seconds[(PAIR[0], e)] < seconds[(PAIR[1], e)] else 'no':>9}" for e in levels))


if __name__ == "__main__":
    main()
