"""Fixtures of the calibration tests: the public-log excerpts' folder and a synthetic measurement generator."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from autoplan.calibrate.measurements import Collective, Inputs, Kernel, Step
from autoplan.calibrate.model import ClusterSpec, Strategy, get_model, load_cluster
from autoplan.calibrate.params import all_params, apply
from autoplan.calibrate.predict import best_plan, collective_seconds, kernel_seconds

FIXTURES = Path(__file__).parent / "fixtures"

TRUTH = {"gpu.gemm_efficiency": 0.81, "gpu.gemm_half_k": 96.0, "gpu.fp8_gemm_efficiency": 0.60,
         "gpu.attention_efficiency": 0.44, "gpu.memory_efficiency": 0.86, "gpu.kernel_overhead_us": 6.0,
         "gpu.clock_ratio": 0.90, "tiers.nvlink.efficiency": 0.78, "tiers.nvlink.latency_us": 1.7,
         "tiers.ib-leaf.efficiency": 0.88, "tiers.ib-leaf.latency_us": 7.0}
"""Planted parameter values (the H100 spec's are 0.75, 64, 0.656, 0.5, 0.8, 4, 0.85, 0.822, 1, 0.94, 5)."""


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """The folder of public-log excerpts (each names its source in its header)."""
    return FIXTURES


@pytest.fixture(scope="session")
def truth() -> dict[str, float]:
    """Planted parameter values."""
    return dict(TRUTH)


@pytest.fixture(scope="session")
def synthetic():
    """The synthetic measurement generator ``make_synthetic``."""
    return make_synthetic


def make_synthetic(truth: dict[str, float], noise: float = 0.005, seed: int = 0,
                   base: ClusterSpec | None = None) -> tuple[Inputs, ClusterSpec]:
    """Measurements the cost model predicts at ``truth`` (on the H100 spec), each times 1 + N(0, noise)."""
    base = base or load_cluster("dgx-h100-80g")
    known = all_params(base)
    true = apply(base, [known[n] for n in truth], list(truth.values()))
    rng = random.Random(seed)
    jitter = lambda: 1 + rng.gauss(0, noise)  # noqa: E731
    out = Inputs()
    for kind in ("gemm", "gemm_fp8"):
        for m in (1024, 8192):
            for n in (2048, 8192):
                for k in (64, 256, 1024, 8192):
                    probe = Kernel(kind=kind, shape=(m, n, k, 1), seconds=1.0, where="synthetic")
                    out.kernels.append(Kernel(kind=kind, shape=probe.shape, where="synthetic",
                                              seconds=kernel_seconds(true, probe) * jitter()))
    for s in (1024, 4096, 8192):
        for kind in ("attention", "attention_bwd"):
            probe = Kernel(kind=kind, shape=(1, 32, s, s, 128), seconds=1.0, where="synthetic")
            out.kernels.append(Kernel(kind=kind, shape=probe.shape, where="synthetic",
                                      seconds=kernel_seconds(true, probe) * jitter()))
    for nbytes in (2**12, 2**16, 2**20, 2**24, 2**28):
        probe = Kernel(kind="memory", shape=(nbytes,), seconds=1.0, where="synthetic")
        out.kernels.append(Kernel(kind="memory", shape=(nbytes,), where="synthetic",
                                  seconds=kernel_seconds(true, probe) * jitter()))
    out.kernels.append(Kernel(kind="launch", shape=(), where="synthetic",
                              seconds=true.gpu.kernel_overhead * jitter()))
    for op in ("all_reduce", "all_gather"):
        for ranks in (8, 16):
            for nbytes in (2**10, 2**16, 2**22, 2**28):
                probe = Collective(op=op, ranks=ranks, per_node=8, nbytes=nbytes, seconds=1.0, where="synthetic")
                out.collectives.append(Collective(op=op, ranks=ranks, per_node=8, nbytes=nbytes, where="synthetic",
                                                  seconds=collective_seconds(true, probe) * jitter()))
    model = get_model("llama3-8b")
    for gpus, tp, pp in ((8, 1, 1), (8, 2, 1), (16, 2, 2)):
        plan = Strategy(dp=gpus // (tp * pp), tp=tp, pp=pp, micro_batch=1, global_batch=32,
                        sequence_parallel=tp > 1, recompute="full")
        step = Step(name=f"llama3-8b-{plan.short()}", model=model, plans=(plan,), gpus=gpus, seconds=1.0,
                    where=f"synthetic step {gpus} GPUs")
        _, seconds = best_plan(true, step)
        out.steps.append(Step(name=step.name, model=model, plans=(plan,), gpus=gpus, seconds=seconds * jitter(),
                              where=step.where))
    return out, base
