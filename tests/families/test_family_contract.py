"""The contract every model family meets (``autoplan.families.registry``), checked on each registered family and on
a toy family that the simulator and search use without any change to the engine."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import pytest

from autoplan.families import registry as families
from autoplan.hardware.compute import Op
from autoplan.families.costs import COMM_OPS, PART_KINDS, CommNeed, PassCost, StepCosts
from autoplan.families.registry import FAMILIES, ModelFamily, family_of
from autoplan.families.costs import StageMemory
from autoplan.errors import SpecError
from autoplan.sim.simulate import evaluate
from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.families.cnn.spec import as_model, resnet
from autoplan.specs.model import ModelSpec
from autoplan.families.dlrm.spec import DLRMSpec, EmbeddingTable
from autoplan.families.strategy import Strategy

TINY = ModelSpec(name="tiny-gpt", layers=8, hidden=256, heads=8, ffn_hidden=1024, vocab=1024, seq_len=256)


@dataclass(frozen=True)
class ToyFamily:
    """A family of fixed per-micro-batch costs: data and pipeline parallelism only."""

    name: str = "toy"
    axes: tuple[str, ...] = ("dp", "pp")
    forward: float = 1e-3
    backward: float = 2e-3
    optimizer: float = 5e-4
    reduce: float = 3e-4

    def violations(self, model: ModelSpec, gpus: int, s: Strategy) -> list[str]:
        out = [] if s.dp * s.pp == gpus else [f"dp·pp = {s.dp * s.pp}, not {gpus}"]
        return out + [f"{k} must be 1" for k in ("tp", "cp") if getattr(s, k) != 1]

    def step_costs(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> StepCosts:
        times = ((True, self.forward), (False, self.backward))
        passes = {(f, a, b): PassCost(t / s.pp, (("compute", t / s.pp),))
                  for f, t in times for a in (False, True) for b in (False, True)}
        return StepCosts(passes=passes, optimizer=(self.optimizer,) * s.pp, hop=1e-5 if s.pp > 1 else 0.0, segments=0,
                         segment_reduce=None, param_gather=None, shard_gather=0.0, shard_reduce=0.0,
                         reduce_all=(self.reduce,) * s.pp if s.dp > 1 else None, final_gather=None, tied=None)

    def lower_bound(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
        return s.micro_batches * (self.forward + self.backward) / s.pp + self.optimizer

    def memory(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> list[StageMemory]:
        return [StageMemory(stage=i, weights=1e9 / s.pp, gradients=0.0, optimizer=0.0, activations=1e8, embedding=0.0,
                            buffers=0.0, reserve=0.0) for i in range(s.pp)]

    def peak_memory(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
        return max(m.total for m in self.memory(model, cluster, s))

    def collectives(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> list[CommNeed]:
        return []

    def block_ops(self, model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict[str, tuple[Op, ...]]:
        return {"forward": (Op("toy", 1e9, 0.0, self.forward),), "backward": (Op("toy.bwd", 2e9, 0.0, self.backward),),
                "recompute": ()}


def _plans(gpus: int, **kw: object) -> list[Strategy]:
    shapes = [dict(dp=gpus), dict(dp=gpus // 4, pp=4), dict(dp=gpus // 2, pp=2, zero=1),
              dict(dp=gpus // 4, pp=2, tp=2, sequence_parallel=True, recompute="selective"),
              dict(dp=gpus // 8, pp=2, tp=2, cp=2, schedule="interleaved", virtual_stages=2),
              dict(dp=gpus // 2, tp=2, zero=3, overlap_param_gather=False, gradient_accumulation_fusion=False),
              dict(dp=gpus // 4, tp=2, cp=2, overlap_grad_reduce=False, recompute="full"),
              # expert parallelism (MoE families; invalid for the others)
              dict(dp=gpus // 4, pp=2, tp=2, sequence_parallel=True, ep=4, zero=1),
              dict(dp=gpus // 2, tp=2, sequence_parallel=True, ep=2, etp=2, recompute="full", overlap_grad_reduce=False,
                   gradient_accumulation_fusion=False, overlap_param_gather=False, zero=1),
              dict(dp=gpus // 4, pp=4, schedule="zb-h1"), dict(dp=gpus // 2, pp=2, schedule="zbv", zero=1),
              dict(dp=gpus // 4, pp=2, tp=2, sequence_parallel=True, schedule="dualpipev")]
    return [Strategy(global_batch=64, **{**s, **kw}) for s in shapes]


TINY_MOE = replace(TINY, name="tiny-moe", experts=8, top_k=2, moe_ffn_hidden=512, shared_experts=1, dense_layers=1,
                   family="moe")
TINY_DLRM = replace(TINY, name="tiny-dlrm", family="dlrm", structure=DLRMSpec(
    tables=tuple(EmbeddingTable(name=f"t{i}", rows=10 ** (i + 2), dim=64, pooling=1 + 3 * i, skew=0.5 * i)
                 for i in range(5)), dense_features=13, bottom_mlp=(128, 64), top_mlp=(256, 1)))
EXAMPLES: dict[str, tuple[ModelSpec, int]] = {"dense": (TINY, 64), "toy": (replace(TINY, family="toy"), 64),
                                              "moe": (TINY_MOE, 64),
                                              "cnn": (as_model(resnet("tiny-resnet", (1, 1, 1, 1), 64, 10)), 64),
                                              "dlrm": (TINY_DLRM, 64)}
"""A small model of each family and the GPU count its plans run on; a new family adds its line here."""


@pytest.fixture(params=sorted({*FAMILIES, "toy"}))
def case(request, monkeypatch) -> tuple[ModelFamily, ModelSpec, ClusterSpec, list[Strategy]]:
    if request.param == "toy":
        monkeypatch.setitem(FAMILIES, "toy", ToyFamily())
    fam = FAMILIES[request.param]
    model, gpus = EXAMPLES[fam.name]
    plans = [s for s in _plans(gpus) if not fam.violations(model, gpus, s)]
    return fam, model, load_cluster("dgx-a100-80g", gpus), plans


def test_every_registered_family_has_an_example():
    assert set(FAMILIES) <= set(EXAMPLES)


def test_family_declares_its_name_and_strategy_axes(case):
    fam, model, _, plans = case
    assert isinstance(fam, ModelFamily)
    assert family_of(model) is fam
    assert fam.axes and set(fam.axes) <= {f.name for f in fields(Strategy)}
    assert plans, "the example needs at least one valid plan"


def test_default_space_names_a_space_that_loads(case):
    """Every family's search space (its own, or ``default`` when it brings none: the dense family's ``None`` and a
    family without the attribute alike) loads; a benchmark once passed ``None`` on to ``load_space``."""
    from autoplan.search.space import load_space

    fam, model, _, _ = case
    name = families.default_space(model)
    assert name == (getattr(fam, "default_space", None) or "default")
    assert load_space(name).axes


def test_invalid_plans_give_reasons(case):
    fam, model, cluster, _ = case
    assert fam.violations(model, cluster.gpus, Strategy(dp=cluster.gpus + 1)) != []
    assert all(isinstance(r, str) and r for r in fam.violations(model, cluster.gpus, Strategy(dp=3)))


def _finite(x: float) -> bool:
    return math.isfinite(x) and x >= 0


def test_pass_costs_are_positive_and_a_backward_outweighs_its_forward(case):
    fam, model, cluster, plans = case
    for s in plans:
        c = fam.step_costs(model, cluster, s)
        assert set(c.passes) == {(f, a, b) for f in (True, False) for a in (False, True) for b in (False, True)}
        for (fwd, first, last), p in c.passes.items():
            assert p.seconds > 0 and math.isfinite(p.seconds)
            assert {k for k, _ in p.parts} <= set(PART_KINDS)
            assert p.seconds == pytest.approx(sum(x for _, x in p.parts), rel=1e-12)
            if not fwd:
                assert p.seconds >= c.passes[(True, first, last)].seconds
        for (first, last), w in (c.weight_grad or {}).items():    # zero-bubble: the W part of a backward
            assert 0 < w.seconds <= dict(c.passes[(False, first, last)].parts)["compute"]


def test_step_communication_is_finite_and_per_stage_where_it_says_so(case):
    fam, model, cluster, plans = case
    for s in plans:
        c = fam.step_costs(model, cluster, s)
        assert len(c.optimizer) == s.pp and all(x > 0 for x in c.optimizer)
        assert _finite(c.hop) and (c.hop > 0) == (s.pp > 1)
        assert c.segments >= 0 and _finite(c.shard_gather) and _finite(c.shard_reduce)
        for x in (c.segment_reduce, c.param_gather, c.tied):
            assert x is None or _finite(x)
        for per_stage in (c.reduce_all, c.final_gather):
            assert per_stage is None or (len(per_stage) == s.pp and all(map(_finite, per_stage)))


def test_memory_has_one_entry_per_stage_and_its_peak(case):
    fam, model, cluster, plans = case
    for s in plans:
        mem = fam.memory(model, cluster, s)
        assert [m.stage for m in mem] == list(range(s.pp))
        assert all(m.total > 0 for m in mem)
        assert fam.peak_memory(model, cluster, s) == pytest.approx(max(m.total for m in mem), rel=1e-12)


def test_collectives_have_known_kinds_and_groups(case):
    fam, model, cluster, plans = case
    for s in plans:
        for c in fam.collectives(model, cluster, s):
            assert c.op in COMM_OPS and c.group in fam.axes
            assert _finite(c.nbytes) and _finite(c.seconds) and c.shape.size > 1 and c.when


def test_block_ops_cover_the_three_passes(case):
    fam, model, cluster, plans = case
    ops = fam.block_ops(model, cluster, plans[0])
    assert set(ops) == {"forward", "backward", "recompute"}
    assert ops["forward"] and all(_finite(op.seconds) and _finite(op.flops) for v in ops.values() for op in v)


def test_bound_never_exceeds_the_simulated_step(case):
    fam, model, cluster, plans = case
    for s in plans:
        e = evaluate(model, cluster, s)
        assert e.feasible, e.violations
        assert fam.lower_bound(model, cluster, s) <= e.metrics.step_time * (1 + 1e-9)


def test_a_quick_bound_never_exceeds_the_lower_bound(case):
    fam, model, cluster, plans = case
    quick = getattr(fam, "quick_bound", None)
    for s in plans if quick is not None else ():
        assert 0.0 < quick(model, cluster, s) <= fam.lower_bound(model, cluster, s)


def test_violation_groups_in_order_are_the_familys_violations(case):
    # a space's enumeration reads a family's reasons from its groups (registry.violation_checker)
    fam, model, cluster, _ = case
    groups = getattr(fam, "violation_groups", ())
    for s in _plans(cluster.gpus) + [Strategy(dp=cluster.gpus + 1), Strategy(dp=3, tp=3, pp=5)] if groups else ():
        grouped = [r for _, rules in groups for r in rules(model, cluster.gpus, s)]
        assert grouped == fam.violations(model, cluster.gpus, s)


def test_a_new_family_runs_through_evaluate_unchanged(monkeypatch, a100_8):
    toy = ToyFamily()
    monkeypatch.setitem(FAMILIES, "toy", toy)
    model = replace(TINY, family="toy")
    s = Strategy(dp=8, global_batch=32)
    e = evaluate(model, a100_8, s)
    # one stage: every micro-batch's forward and backward, then the gradient reduction, then the optimizer
    assert e.metrics.step_time == pytest.approx(s.micro_batches * (toy.forward + toy.backward) + toy.reduce
                                                + toy.optimizer, rel=1e-12)
    assert e.metrics.breakdown["dp"] == pytest.approx(toy.reduce, rel=1e-12)
    assert evaluate(model, a100_8, replace(s, tp=2)).violations == ("tp must be 1",)
    assert families.lower_bound(model, a100_8, s) <= e.metrics.step_time


def test_an_unknown_family_is_a_user_error(a100_8):
    with pytest.raises(SpecError, match="family 'rnn' is not one of .*dense"):
        evaluate(replace(TINY, family="rnn"), a100_8, Strategy(dp=8, global_batch=8))


def test_symbolic_score_is_positive_and_free_of_hardware_rates(case):
    """The symbolic cost (families/symbolic.py) works for every family and ignores every rate: the same on a GPU twice
    as fast with slower, more efficient links."""
    from autoplan.families.symbolic import symbolic_score

    fam, model, cluster, plans = case
    faster = replace(cluster, gpu=replace(cluster.gpu, peak_flops=2 * cluster.gpu.peak_flops, gemm_efficiency=0.5,
                                          kernel_overhead=1e-3),
                     tiers=tuple(replace(t, bandwidth=t.bandwidth / 3, efficiency=1.0, latency=1e-3)
                                 for t in cluster.tiers))
    for s in plans:
        score = symbolic_score(model, cluster, s, "shape")
        assert score.score > 0 and math.isfinite(score.score)
        assert symbolic_score(model, faster, s, "shape").score == pytest.approx(score.score, rel=1e-9)
