"""Full-iteration CUDA graphs (``TransformerPlan.cuda_graphs``): each kernel at the graph's replay cost, no host
issue time; Megatron-Core's flag, and no other framework's."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.export import megatron_args
from autoplan.families.transformer.frameworks import (deepspeed_violations, megatron_violations,
                                                      torchtitan_violations)
from autoplan.families.transformer.graphs import graphed
from autoplan.families.transformer.passes import layer_ops
from autoplan.sim.simulate import score
from autoplan.specs.cluster import load_cluster

H100 = load_cluster("dgx-h100-80g").with_gpus(64)
GPT3 = get_model("gpt3")
PLAN = Strategy(tp=8, pp=8, dp=1, micro_batch=1, global_batch=16, sequence_parallel=True, zero=1)


def test_graphed_kernels_cost_the_replay_and_the_host_nothing():
    gpu = graphed(H100, replace(PLAN, cuda_graphs=True)).gpu
    assert gpu.kernel_overhead == pytest.approx(1.18e-6) and gpu.host_launch == 0.0
    assert graphed(H100, PLAN) is H100
    # a GPU whose replay cost is unmeasured keeps its eager cost per kernel
    a100 = load_cluster("dgx-a100-80g")
    assert graphed(a100, replace(PLAN, cuda_graphs=True)).gpu.kernel_overhead == a100.gpu.kernel_overhead


def test_every_kernel_saves_the_launch_difference():
    # one layer's ops: each op's time falls by (eager − graphed) per kernel, never more; no op gets slower
    eager, graph = (layer_ops(GPT3, H100, replace(PLAN, cuda_graphs=g)) for g in (False, True))
    saved = H100.gpu.kernel_overhead - H100.gpu.graph_kernel_overhead
    for kind in eager:
        for e, g in zip(eager[kind], graph[kind], strict=True):
            drop = e.seconds - g.seconds
            assert drop >= -1e-15 and drop / saved == pytest.approx(round(drop / saved), abs=1e-6)
    assert sum(o.seconds for o in eager["forward"]) > sum(o.seconds for o in graph["forward"])


def test_a_graphed_step_is_faster_by_at_most_the_launches_it_saves():
    eager, graph = (score(GPT3, H100, replace(PLAN, cuda_graphs=g)).step_time for g in (False, True))
    assert graph < eager < graph * 1.1


def test_only_megatron_captures_the_iteration():
    s = replace(PLAN, cuda_graphs=True)
    assert "--cuda-graph-impl full_iteration" in megatron_args(s, GPT3)
    assert "--cuda-graph-impl full_iteration" not in megatron_args(PLAN, GPT3)
    assert not any("cuda_graphs" in r for r in megatron_violations(GPT3, s))
    for rules in (torchtitan_violations, deepspeed_violations):
        assert any("full-iteration CUDA graph" in r for r in rules(GPT3, s))
        assert not any("full-iteration CUDA graph" in r for r in rules(GPT3, PLAN))
    assert "cg" in s.short().split() and "cg" not in PLAN.short().split()
