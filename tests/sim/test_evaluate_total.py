"""`evaluate` is total: for any valid model, cluster and plan it returns metrics or violations, never raises.

Half the plans are built to be valid (the model's shape is derived from the plan's degrees), so the simulator
itself runs; the other half are random and mostly rejected by the validity rules.
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import HealthCheck, given, settings, strategies as st

from autoplan.sim.simulate import Evaluation, evaluate
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.specs.model import MAX_SIZE, ModelSpec
from autoplan.specs.plan import RECOMPUTE, SCHEDULES
from autoplan.families.strategy import Strategy

CLUSTERS = {name: load_cluster(name) for name in ("dgx-a100-80g", "dgx-h100-80g", "dgx-h800-80g")}
POW2 = st.sampled_from([1, 2, 4, 8])
EXAMPLES = 400
DENSE_RECOMPUTE = tuple(r for r in RECOMPUTE if r not in ("modules", "op"))
"""Recompute modes of these dense models (``modules`` is MoE's, ``op`` torchtitan's under its own conditions)."""


@st.composite
def problems(draw: st.DrawFn) -> tuple[ModelSpec, object, Strategy]:
    """A model, a cluster sized to the plan (whole nodes) and a plan; valid by construction unless ``wild``."""
    wild = draw(st.booleans())
    tp, pp, cp = draw(POW2), draw(st.sampled_from([1, 2, 3, 4, 8, 16, 32])), draw(st.sampled_from([1, 2]))
    schedule = draw(st.sampled_from(SCHEDULES))
    v = draw(st.sampled_from([2, 3, 4])) if schedule == "interleaved" else 1
    chunks = 2 if schedule in ("zbv", "dualpipev") else v          # V shapes: two chunks per rank
    if schedule not in ("gpipe", "1f1b") and pp == 1:
        pp = 2
    mb = draw(st.sampled_from([1, 2, 4]))
    heads = tp * draw(st.integers(1, 8))
    kv_heads = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0 and d % tp == 0] or [heads]))
    head_dim = draw(st.sampled_from([16, 32, 64, 128]))
    # Llama-style q_dim == hidden, or an explicit head width unrelated to hidden (q_dim != hidden)
    hidden = heads * head_dim if draw(st.booleans()) else 64 * draw(st.integers(1, 128))
    model = ModelSpec(
        name="fuzz", layers=pp * chunks * draw(st.integers(1, 6)), hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=head_dim,
        ffn_hidden=tp * draw(st.integers(1, 512)) * 8, vocab=draw(st.integers(1, 70000)),
        seq_len=2 * cp * draw(st.integers(1, 2048)), activation=draw(st.sampled_from(("gelu", "swiglu", "relu2"))),
        position=draw(st.sampled_from(("learned", "rope", "alibi"))),
        norm=draw(st.sampled_from(("layernorm", "rmsnorm"))),
        bias=draw(st.booleans()), tied_embeddings=draw(st.booleans()), dropout=draw(st.booleans()))
    cluster_name = draw(st.sampled_from(sorted(CLUSTERS)))
    per_node = CLUSTERS[cluster_name].gpus_per_node
    dp = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 64]))
    gpus = dp * tp * pp * cp
    if gpus % per_node:
        dp *= per_node // math.gcd(gpus, per_node)
        gpus = dp * tp * pp * cp
    micro_batches = draw(st.one_of(st.integers(1, 40), st.integers(1000, 200_000)))  # long: steady-state extension
    micro_batches = min(micro_batches, MAX_SIZE // (dp * mb))
    if schedule == "interleaved":
        micro_batches = pp * max(1, micro_batches // pp)
    if schedule == "dualpipev":
        micro_batches = max(micro_batches, 2 * pp)
    plan = dict(dp=dp, tp=tp, pp=pp, cp=cp, micro_batch=mb, global_batch=dp * mb * micro_batches, schedule=schedule,
                virtual_stages=v, sequence_parallel=tp > 1 and draw(st.booleans()),
                recompute=draw(st.sampled_from(DENSE_RECOMPUTE)),
                zero=draw(st.sampled_from([0, 1] if pp > 1 else [0, 1, 2, 3])),
                overlap_grad_reduce=draw(st.booleans()), overlap_param_gather=draw(st.booleans()))
    if wild:
        # anything goes: the rules, not the simulator, must reject what is invalid
        plan.update(tp=draw(st.integers(1, 16)), pp=draw(st.integers(1, 16)), cp=draw(st.integers(1, 4)),
                    dp=draw(st.integers(1, 64)), micro_batch=draw(st.integers(1, 16)),
                    global_batch=draw(st.integers(1, 4096)), virtual_stages=draw(st.integers(1, 6)),
                    sequence_parallel=draw(st.booleans()), zero=draw(st.integers(0, 3)))
    return model, draw(variants(CLUSTERS[cluster_name])).with_gpus(gpus), Strategy(**plan)


@st.composite
def variants(draw: st.DrawFn, base: ClusterSpec) -> ClusterSpec:
    """A built-in cluster, or the same with unfused attention, fewer network tiers, or a single switch."""
    tiers = base.tiers
    if draw(st.booleans()):
        tiers = tiers[: draw(st.integers(1, len(tiers)))]
        tiers = tiers[:-1] + (replace(tiers[-1], gpus=0),)   # the outermost tier spans the cluster
    return replace(base, tiers=tiers, flash_attention=draw(st.booleans()))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_evaluate_never_raises(problem):
    model, cluster, plan = problem
    e = evaluate(model, cluster, plan)
    assert isinstance(e, Evaluation) and e.strategy == plan
    if e.metrics is None:
        assert e.violations, "no metrics and no reason"
    else:
        m = e.metrics
        assert math.isfinite(m.step_time) and m.step_time > 0
        assert 0 < m.mfu and math.isfinite(m.tokens_per_s)
        assert m.peak_memory > 0 and all(math.isfinite(x) for x in m.breakdown.values())
        assert abs(sum(m.breakdown.values()) - m.step_time) <= 1e-6 * m.step_time


def test_valid_half_really_simulates():
    """Guard against a generator that only ever produces rejected plans."""
    simulated = []

    @settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(problems())
    def run(problem):
        simulated.append(evaluate(*problem).metrics is not None)

    run()
    assert sum(simulated) >= 10, f"only {sum(simulated)} of {len(simulated)} plans were simulated"
