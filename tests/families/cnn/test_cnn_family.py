"""The CNN family: halo exchange, spatial/filter/channel splits, validity and what they cost."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoplan.families.cnn import family as cnn
from autoplan.search.codec import specs_from_data, specs_to_data
from autoplan.search.space import enumerate_plans, load_space
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.cnn.spec import Layer, as_model, resnet
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations as dense_violations

SMALL = as_model(resnet("small-resnet", (1, 1, 1, 1), 64, 10))


@pytest.fixture(scope="module")
def node():
    return load_cluster("dgx-a100-80g", 8)


def _fwd(model, cluster, s):
    return cnn.pass_costs(model, cluster, s)[(True, True, True)]


@pytest.mark.parametrize("size,face", [((56, 40), 40), ((16, 12, 10), 120)])
def test_halo_is_two_faces_of_k_over_2_rows(size, face):
    layer = Layer("c", "conv", 32, 64, size, size, kernel=3)
    # stride 1: 2 neighbours × ⌊3/2⌋ rows × face × C × b × bytes (Kahira et al. 2021 §3.2)
    assert cnn.halo_bytes(layer, 4, 4, 1, 2) == 2 * 1 * face * 32 * 4 * 2
    assert cnn.halo_bytes(layer, 4, 4, 2, 2) == 2 * 1 * face * 16 * 4 * 2      # channel split: half the channels
    five = replace(layer, kernel=5)
    assert cnn.halo_bytes(five, 1, 2, 1, 4) == 2 * 2 * face * 32 * 4


def test_strided_layers_exchange_k_minus_s_rows():
    down = Layer("c", "conv", 32, 64, (56, 56), (28, 28), kernel=3, stride=2)
    pool = Layer("p", "pool", 32, 32, (56, 56), (28, 28), kernel=2, stride=2)
    assert cnn.halo_bytes(down, 1, 4, 1, 2) == 1 * 56 * 32 * 2
    assert cnn.halo_bytes(pool, 1, 4, 1, 2) == 0


def test_no_halo_for_pointwise_layers_unsplit_layers_or_one_gpu():
    pointwise = Layer("c", "conv", 32, 64, (56, 56), (56, 56), kernel=1)
    narrow = Layer("c", "conv", 32, 64, (7, 7), (7, 7), kernel=3)
    wide = Layer("c", "conv", 32, 64, (56, 56), (56, 56), kernel=3)
    assert cnn.halo_bytes(pointwise, 8, 4, 1, 2) == 0
    assert cnn.halo_bytes(narrow, 8, 8, 1, 2) == 0 and not cnn.is_split(narrow, 8)
    assert cnn.halo_bytes(wide, 8, 1, 1, 2) == 0


def test_spatial_split_is_valid_up_to_the_input_rows():
    model = SMALL
    assert cnn.violations(model, 64, Strategy(dp=1, spatial=64, global_batch=8)) == []
    reasons = cnn.violations(model, 128, Strategy(dp=1, spatial=128, global_batch=8))
    assert any("more than the input's 64 rows" in r for r in reasons)


def test_filter_and_channel_are_bounded_by_the_narrowest_layer_and_exclusive():
    s = Strategy(filter=128, global_batch=8)
    assert any("filters of the narrowest layer" in r for r in cnn.violations(SMALL, 128, s))
    assert any("input channels of the narrowest layer" in r
               for r in cnn.violations(SMALL, 128, Strategy(channel=128, global_batch=8)))
    both = cnn.violations(SMALL, 4, Strategy(filter=2, channel=2, global_batch=8))
    assert any("use one of filter or channel" in r for r in both)


def test_transformer_knobs_are_refused_and_cnn_knobs_refused_for_transformers(tiny_gpt):
    reasons = cnn.violations(SMALL, 8, Strategy(dp=4, tp=2, global_batch=8))
    assert any("tensor parallelism is for transformers" in r for r in reasons)
    assert any("spatial parallelism is for CNNs" in r
               for r in dense_violations(tiny_gpt, 8, Strategy(dp=4, spatial=2, global_batch=8)))


@pytest.mark.parametrize("knob", [{"ep": 2}, {"etp": 2}, {"ep_overlap": True}, {"precision": "fp8"},
                                  {"fp8_param_gather": True}, {"tp_comm_overlap": True}, {"cp_comm": "a2a"},
                                  {"sharding": "row_wise"}])
def test_other_families_knobs_are_refused_not_ignored(knob):
    (name, value), = knob.items()
    reasons = cnn.violations(SMALL, 8, Strategy(dp=8, global_batch=8, **knob))
    assert any(r.startswith(f"{name} {value!r} is not modelled for CNNs") for r in reasons), reasons


@pytest.mark.parametrize("schedule", ["zb-h1", "zbv", "dualpipev"])
def test_split_backward_schedules_and_recompute_modules_are_refused(schedule):
    reasons = cnn.violations(SMALL, 8, Strategy(dp=4, pp=2, schedule=schedule, global_batch=8, micro_batch=1))
    assert any(f"the {schedule} schedule splits the backward" in r for r in reasons), reasons
    assert any("recompute modules is MoE-specific" in r
               for r in cnn.violations(SMALL, 8, Strategy(dp=8, recompute="modules", global_batch=8)))


def test_spatial_splits_compute_and_adds_halo_time(node):
    one = _fwd(SMALL, node, Strategy(micro_batch=32))
    four = _fwd(SMALL, node, Strategy(spatial=4, micro_batch=32))
    parts = dict(four.parts)
    assert parts["compute"] < dict(one.parts)["compute"]
    assert parts["cp"] > 0 and "cp" not in dict(one.parts)


def test_filter_and_channel_add_model_parallel_collectives_and_shrink_weights(node):
    base = cnn.memory(SMALL, node, Strategy(micro_batch=8))[0]
    for knob in ("filter", "channel"):
        s = Strategy(micro_batch=8, **{knob: 4})
        assert dict(_fwd(SMALL, node, s).parts)["tp"] > 0
        assert cnn.memory(SMALL, node, s)[0].weights < base.weights
        assert {c.group for c in cnn.collectives(SMALL, node, replace(s, dp=2))} >= {knob, "dp"}


def test_spatial_shrinks_activation_memory(node):
    one = cnn.memory(SMALL, node, Strategy(micro_batch=64))[0].activations
    four = cnn.memory(SMALL, node, Strategy(micro_batch=64, spatial=4))[0].activations
    assert four < one


def test_pipeline_stages_cover_every_layer_once(node):
    for pp in (1, 2, 3, 4):
        stages = cnn._stages(SMALL, node, Strategy(pp=pp, micro_batch=4))
        assert len(stages) == pp and stages[0][0] == 0 and stages[-1][1] == len(SMALL.structure.layers)
        assert all(a < b for a, b in stages) and all(b == c for (_, b), (c, _) in zip(stages, stages[1:]))


def test_data_parallel_resnet50_runs_near_published_throughput():
    model, cluster = get_model("resnet50"), load_cluster("dgx-h100-80g", 8)
    e = evaluate(model, cluster, Strategy(dp=8, micro_batch=64, global_batch=512))
    assert e.feasible
    per_gpu = e.metrics.samples_per_s / 8
    # NVIDIA DL examples, ResNet-50 v1.5 PyTorch AMP on H100: ~3,000 images/s per GPU; a factor-2 band
    assert 1500 < per_gpu < 6000


def test_search_space_plans_use_every_gpu():
    model = get_model("resnet50")
    plans, _ = enumerate_plans(model, 64, load_space("cnn"), 2048)
    assert plans and all(s.gpus == 64 for s in plans)
    assert {s.spatial for s in plans} >= {1, 2, 4} and {s.filter for s in plans} >= {1, 2}


def test_a_cnn_model_round_trips_through_run_folder_json(node):
    model, cluster = specs_from_data(specs_to_data(SMALL, node))
    assert model == SMALL and cluster == node and model.structure.params() == SMALL.structure.params()


def test_cnn_knobs_at_one_leave_plans_as_before():
    s = Strategy(dp=8, global_batch=8)
    assert not {"spatial", "channel", "filter"} & set(s.to_dict())
    assert s.short() == "tp1 pp1 dp8 mb1 1f1b" and s.gpus == 8
    assert Strategy(dp=2, spatial=2, filter=2, global_batch=8).gpus == 8


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 64), rows=st.integers(1, 3), spatial=st.sampled_from([2, 4, 8]))
def test_halo_bytes_grow_linearly_with_the_micro_batch(batch, rows, spatial):
    layer = Layer("c", "conv", 16, 16, (64, 48), (64, 48), kernel=2 * rows + 1)
    one = cnn.halo_bytes(layer, 1, spatial, 1, 2)
    assert one == 2 * rows * 48 * 16 * 2
    assert cnn.halo_bytes(layer, batch, spatial, 1, 2) == batch * one


@settings(max_examples=15, deadline=None)
@given(scale=st.floats(1.0, 8.0), spatial=st.sampled_from([1, 2, 4]), filter_=st.sampled_from([1, 2]))
def test_faster_network_never_slows_a_cnn_step(node, scale, spatial, filter_):
    cluster = load_cluster("dgx-a100-80g", 16)
    faster = replace(cluster, tiers=tuple(replace(t, bandwidth=t.bandwidth * scale) for t in cluster.tiers))
    s = Strategy(dp=16 // (spatial * filter_), spatial=spatial, filter=filter_, micro_batch=4, global_batch=64)
    slow, fast = evaluate(SMALL, cluster, s), evaluate(SMALL, faster, s)
    assert fast.metrics.step_time <= slow.metrics.step_time * (1 + 1e-9)


def test_the_first_layer_computes_no_input_gradient(node):
    # the data needs no gradient: the first conv's backward is its wgrad (k×m)·(m×n) alone, the next one's also dgrad
    model, b = SMALL, 4
    net = model.structure
    costs = cnn.layer_costs(model, node, b, 1, 1, 1)
    first, second = [i for i, layer in enumerate(net.layers) if layer.kind in ("conv", "fc")][:2]
    gpu = node.gpu
    for i, with_dgrad in ((first, False), (second, True)):
        layer = net.layers[i]
        m, n, k = b * math.prod(layer.out_size), layer.out_channels, layer.in_channels * layer.taps
        expected = cnn._gemm(gpu, k, n, m) + (cnn._gemm(gpu, m, k / layer.taps, n * layer.taps) if with_dgrad else 0)
        assert costs[i].backward == pytest.approx(max(expected, costs[i].forward))
    assert cnn.first_weighted(net) == first


def test_parameter_arrays_are_weights_biases_and_norm_pairs():
    from autoplan.families.cnn.spec import vgg16
    vgg, r50 = vgg16(), resnet("r", (3, 4, 6, 3))
    assert cnn.param_arrays(vgg, 0, len(vgg.layers)) == 16 * 2                     # 13 conv + 3 FC, each W and b
    assert cnn.param_arrays(r50, 0, len(r50.layers)) == 53 + 2 * 53 + 2             # convs, BN γ/β, FC W and b


def test_chainermn_all_reduces_one_packed_buffer_after_the_backward():
    from autoplan.hardware import network
    from autoplan.hardware.compute import memory_time
    from autoplan.families.cnn.spec import build
    model, cluster = build("vgg16", 226, 4, "chainer"), load_cluster("abci-v100", 64)
    s = Strategy(dp=64, micro_batch=32, global_batch=2048, overlap_grad_reduce=False)
    costs = cnn.step_costs(model, cluster, s)
    params, arrays = model.structure.params(), 32
    grads = cnn._shapes(cluster, s)["grads"]
    # pure_nccl: one all-reduce of the fp32 buffer + pack, divide and unpack (3 read-write passes, a copy per array)
    expected = network.all_reduce(cluster, grads, 4 * params) + memory_time(cluster.gpu, 24 * params,
                                                                            kernels=2 * arrays + 1)
    assert costs.segments == 0 and costs.reduce_all == pytest.approx((expected,))
    assert cnn.violations(model, 64, replace(s, overlap_grad_reduce=True)) == [
        "ChainerMN's pure_nccl communicator all-reduces gradients after the backward; use overlap_grad_reduce false"]


def test_a_ring_all_reduce_on_abci_costs_the_same_inside_a_rack_and_across_racks():
    # Patarasuk & Yuan 2009: a ring over rack-contiguous nodes crosses each rack boundary once, so the 1:3 uplinks
    # do not bind it: the per-node time at 64 GPUs (one rack) and 256 (two) differs only by 2(n−1)/n
    from autoplan.hardware import network
    times = {}
    for n in (64, 256):
        cluster = load_cluster("abci-v100", n)
        times[n] = network.all_reduce(cluster, network.group_shape(4, n, 1), 1e9) / (2 * (n - 1) / n)
    assert times[256] == pytest.approx(times[64], rel=0.01)
