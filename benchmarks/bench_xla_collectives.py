"""The NVLink tiers against a public collective sweep: XLA's measured collective table (cluster_specs/calibration/
xla-collective-table.json: NCCL all-gathers, reduce-scatters, all-to-alls and all-reduces of 1 KiB-2 GiB in groups of
2, 4 and 8 on an H100 and a B200 node, and of up to 32 GiB in groups of 4-72 on 64- and 72-GPU GB200 and GB300 NVLink
domains). The H100's tier comes from nccl-tests; the B200's, GB200's and GB300's were the H100's efficiency, assumed.
Each now keeps the speed relative to the H100's that the table measured on the collectives both timed
(``microbenchmarks.nvlink_speedup_error``): XLA's own overheads, the same on both, cancel.

This prints, per GPU, the network model's time over the measured one for each bandwidth-bound collective (256 MiB and
up) by operation and group size, then each Blackwell spec's speed error relative to the H100 and the efficiency that
removes it, beside the shipped one. All-reduces are printed, not used: on NVSwitch NCCL may run them as NVLS
(``allreduce_busbw``), and XLA's H100 table shows no NVLS rate.

Run: python benchmarks/bench_xla_collectives.py [--quick]     (--quick: the same; the table is small)
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from autoplan.hardware import network
from autoplan.hardware.microbenchmarks import collective_errors, nvlink_speedup_error
from autoplan.specs import load_cluster

FILE = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration" / "xla-collective-table.json"
GPUS = {"sm_90": ("dgx-h100-80g", 8), "sm_100_B200": ("dgx-b200", 8), "sm_100_GB200": ("gb200-nvl72", 72),
        "sm_103": ("gb300-nvl72", 72)}
BANDWIDTH_BOUND = 2 ** 28


def by_group(errors: dict[tuple, float], op: str) -> dict[int, float]:
    """Group size → the geometric mean of ``op``'s errors (``collective_errors``' keys: op, group size, bytes)."""
    logs: dict[int, list[float]] = {}
    for (o, size, _), v in errors.items():
        if o == op:
            logs.setdefault(size, []).append(math.log(v))
    return {size: math.exp(sum(v) / len(v)) for size, v in sorted(logs.items())}


def cells(by_size: dict[int, float]) -> str:
    return "  ".join(f"{size}: {v:.2f}" for size, v in by_size.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the same (the table is small)")
    ap.parse_args()
    rows = json.loads(FILE.read_text())["rows"]
    errors = {}
    for arch, (spec, gpus) in GPUS.items():
        cluster = load_cluster(spec).with_gpus(gpus)
        e = errors[arch] = collective_errors(cluster, rows[arch], BANDWIDTH_BOUND)
        print(f"{spec} (NVLink efficiency {cluster.tiers[0].efficiency}): model time over measured, >= 256 MiB")
        for op in ("AG", "RS", "A2A"):
            print(f"  {op:3s} by group size  " + cells(by_group(e, op)))
        all_reduces = collective_errors(cluster, rows[arch], BANDWIDTH_BOUND, {"AR": network.all_reduce})
        print("  AR  by group size  " + cells(by_group(all_reduces, "AR")))
    reference = errors["sm_90"]
    print("speed relative to the H100's, priced over measured (shared AG, RS, A2A shapes):")
    for arch, (spec, gpus) in list(GPUS.items())[1:]:
        tier = load_cluster(spec).tiers[0]
        ratio = nvlink_speedup_error(reference, errors[arch])
        print(f"  {spec}: {ratio:.3f} -> efficiency {tier.efficiency / ratio:.3f} (shipped {tier.efficiency})")


if __name__ == "__main__":
    main()
