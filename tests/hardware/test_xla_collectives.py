"""The Blackwell specs' NVLink tiers keep the speed relative to the H100's that XLA's collective table measured
(cluster_specs/calibration/xla-collective-table.json: NCCL all-gathers, reduce-scatters and all-to-alls on an H100
node, a B200 node and 64-GPU GB200 and GB300 NVLink domains)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoplan.hardware.microbenchmarks import collective_errors, nvlink_speedup_error
from autoplan.specs.cluster import load_cluster

ROWS = json.loads((Path(__file__).resolve().parents[2] / "cluster_specs" / "calibration"
                   / "xla-collective-table.json").read_text())["rows"]
BANDWIDTH_BOUND = 2 ** 28
SPECS = {"dgx-b200": ("sm_100_B200", 8), "gb200-nvl72": ("sm_100_GB200", 72), "gb300-nvl72": ("sm_103", 72)}


def _errors(spec: str, arch: str, gpus: int) -> dict:
    return collective_errors(load_cluster(spec).with_gpus(gpus), ROWS[arch], BANDWIDTH_BOUND)


@pytest.mark.parametrize("spec", list(SPECS))
def test_each_spec_keeps_the_measured_speed_relative_to_the_h100(spec):
    arch, gpus = SPECS[spec]
    reference = _errors("dgx-h100-80g", "sm_90", 8)
    errors = _errors(spec, arch, gpus)
    assert len([k for k in errors if k in reference]) >= 24
    assert nvlink_speedup_error(reference, errors) == pytest.approx(1.0, abs=0.002)


def test_the_h100_tier_prices_the_table_within_its_own_spread():
    # the reference itself: the H100's tier (nccl #1455) against XLA's H100 node, 8-GPU groups, when written 0.89-0.95
    errors = _errors("dgx-h100-80g", "sm_90", 8)
    eight = [v for (op, size, _), v in errors.items() if size == 8]
    assert len(eight) == 12 and all(0.8 <= v <= 1.05 for v in eight)
