"""Convolutional networks (ResNet, VGG, CosmoFlow, 3D U-Net) under data, spatial, channel, filter and pipeline
parallelism and their hybrids, after the CNN oracle of Kahira et al. (HPDC'21, arXiv 2104.09075, §3-4).

Each layer is an implicit GEMM (convolution lowered to matrix multiply: Chetlur et al. 2014, cuDNN, arXiv
1410.0759 §3) or a memory-bound kernel, timed with ``hardware/compute.py``'s efficiency model. What each split costs:

* data (dp): weights replicated; gradients all-reduced over dp·spatial, in PyTorch DDP buckets overlapped with
  the backward (Li et al. 2020, VLDB 13(12) §3.2).
* spatial: every sample's first spatial axis (H, or D in 3D) split in slabs; each convolution/pooling exchanges
  k − s halo rows with its two neighbours (⌊k/2⌋ each for stride 1), forward and backward (Dryden et al. IPDPS'19 §III-B; Kahira et al. §3.2);
  layers narrower than the split run whole on every GPU after an all-gather.
* filter: each layer's output channels split; forward all-gathers the layer's input, backward all-reduces its
  input gradient (Kahira et al. §3.4: 3·(p−1)/p·|x| per layer; Dryden et al. SC'19 §III).
* channel: input channels split; forward all-reduces the partial outputs, backward all-gathers the output
  gradient (Kahira et al. §3.4, the same 3·(p−1)/p volume).
* pipeline (pp): contiguous layer ranges balanced by compute time, GPipe/1F1B micro-batches (Huang et al. 2019).

Breakdown kinds: halo exchanges and spatial gathers are reported as ``cp`` (a split of the sample, like context
parallelism), filter/channel collectives as ``tp`` (a split of the weights, like tensor parallelism).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from autoplan.hardware import network
from autoplan.hardware.compute import Op, gemm_time, memory_time
from autoplan.families.costs import CommNeed, PassCost, StepCosts, pass_cost
from autoplan.families.base import family_of_functions
from autoplan.families.costs import StageMemory
from autoplan.specs.layout import inflight_layer_chunks
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.cnn.spec import WEIGHTED, CNNSpec, Layer
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import SPLIT_BACKWARD, Plan

WEIGHT_BYTES = 4        # PyTorch AMP keeps fp32 weights (Micikevicius et al. 2018, mixed precision §3.1)
GRADIENT_BYTES = 4      # fp32 gradients, all-reduced in fp32 by PyTorch DDP
OPTIMIZER_BYTES = 4     # SGD momentum buffer, fp32 (Goyal et al. 2017, arXiv 1706.02677, the ResNet-50 recipe)
SGD_BYTES = 20          # the SGD-momentum step reads weight, gradient and buffer and writes weight and buffer (fp32)
BUCKET_BYTES = 25 * 2**20   # PyTorch DDP bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel docs)
MAX_BUCKETS = 8         # as the dense family: finer buckets change the overlap by less than one bucket's reduce


def spec_of(model: ModelSpec) -> CNNSpec:
    """The CNN a ``cnn`` model carries."""
    return model.structure


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One layer for one micro-batch on one GPU: compute seconds, communication seconds, work and bytes."""

    forward: float
    backward: float
    halo: float
    """Seconds of one halo exchange (forward; the backward exchanges gradient halos of the same size)."""
    gather: float
    """Spatial all-gather of the input before a layer too narrow to split (forward only)."""
    model_forward: float
    """Filter/channel collective of the forward."""
    model_backward: float
    flops: float
    """Forward FLOPs on this GPU."""
    nbytes: float
    """Forward bytes moved on this GPU (memory-bound layers; GEMM operand traffic otherwise)."""
    stored: float
    """Activation bytes kept for the backward."""
    params: float
    """Parameters this GPU holds."""
    out_bytes: float
    """Bytes of this GPU's share of the output (what a pipeline stage boundary sends)."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def is_split(layer: Layer, spatial: int) -> bool:
    """The layer's first spatial axis is split over ``spatial`` GPUs (each holds at least one row of it)."""
    return spatial > 1 and bool(layer.in_size) and bool(layer.out_size) and min(layer.in_size[0],
                                                                                 layer.out_size[0]) >= spatial


def halo_bytes(layer: Layer, micro_batch: int, spatial: int, channel_split: int, dtype_bytes: int) -> float:
    """Bytes one GPU sends in one halo exchange of ``layer``: k − s rows of its input over its two neighbours
    (⌊k/2⌋ to each for a stride-1 convolution).

    (k − s)·(W·…)·C·b values (Kahira et al. 2021 §3.2, halo exchange; Dryden et al. IPDPS'19 §III-B).
    """
    if not is_split(layer, spatial) or not layer.halo_rows():
        return 0.0
    face = math.prod(layer.in_size[1:])
    channels = _ceil_div(layer.in_channels, channel_split)
    return float(layer.halo_rows() * face * channels * micro_batch * dtype_bytes)


@dataclass(frozen=True)
class _Splits:
    """The degrees a layer's group shapes read: one data-parallel replica of one pipeline stage."""

    spatial: int
    channel: int
    filter: int
    dp: int = 1
    pp: int = 1


def _shapes(cluster: ClusterSpec, s: Plan | _Splits) -> dict[str, network.GroupShape]:
    """Group shapes, ranks ordered model split (filter/channel) fastest, then spatial, dp and pp."""
    model_split = s.filter * s.channel
    g = cluster.domain_gpus  # members of a group on one NVLink domain (one node unless nvlink_domain_gpus)
    return {"model": network.group_shape(g, model_split, 1),
            "spatial": network.group_shape(g, s.spatial, model_split),
            "grads": network.group_shape(g, s.dp * s.spatial, model_split),
            "pp": network.group_shape(g, s.pp, model_split * s.spatial * s.dp)}


def first_weighted(cnn: CNNSpec) -> int:
    """Index of the first conv/FC layer: the one that reads the data, whose input gradient nobody needs."""
    return next((i for i, layer in enumerate(cnn.layers) if layer.kind in WEIGHTED), -1)


SPLIT_K = (2, 4, 8, 16, 32, 64)
"""Split-K factors tried for GEMMs whose output fills few SMs."""


def _gemm(gpu, m: float, n: float, k: float) -> float:
    """Seconds of an (m×k)·(k×n) GEMM: the best of cuBLAS's plain and split-K forms. Split-K cuts the reduction
    into pieces computed in parallel, then sums them (CUTLASS "parallel split-K" GEMMs, for small m·n and large k:
    a convolution's weight gradient reduces over every output pixel of the batch)."""
    m, n, k = max(1, round(m)), max(1, round(n)), max(1, round(k))
    best = gemm_time(gpu, m, n, k)
    tiles = math.ceil(m / gpu.gemm_tile[0]) * math.ceil(n / gpu.gemm_tile[1])
    for split in SPLIT_K:
        if tiles * split > 2 * gpu.sm_count or k < 64 * split:
            break
        # the partial products are summed in fp32: read `split` of them, write one (memory-bound)
        best = min(best, gemm_time(gpu, m, n, -(-k // split), split) + memory_time(gpu, 4.0 * m * n * (split + 1)))
    return best


@lru_cache(maxsize=256)
def layer_costs(model: ModelSpec, cluster: ClusterSpec, micro_batch: int, spatial: int, channel: int,
                filter_: int) -> tuple[LayerCost, ...]:
    """Per-layer costs of one micro-batch on one GPU under the given splits."""
    cnn, b = spec_of(model), micro_batch
    dt = cnn.dtype_bytes
    s = _Splits(spatial=spatial, channel=channel, filter=filter_)
    shapes = _shapes(cluster, s)
    same_node = shapes["spatial"].nodes == 1
    out: list[LayerCost] = []
    was_split = False
    first = first_weighted(cnn)
    for i, layer in enumerate(cnn.layers):
        split = is_split(layer, spatial)
        rows = (lambda n: _ceil_div(n, spatial) / n) if split else (lambda n: 1.0)
        out_pix = math.prod(layer.out_size) * (rows(layer.out_size[0]) if layer.out_size else 1.0)
        in_pix = math.prod(layer.in_size) * (rows(layer.in_size[0]) if layer.in_size else 1.0)
        gather = 0.0
        if was_split and not split and spatial > 1:
            full = b * layer.in_elements * dt / (filter_ * channel)
            gather = network.all_gather(cluster, shapes["spatial"], full)
        was_split = split
        if layer.kind in WEIGHTED:
            cost = _weighted(layer, cluster, shapes["model"], b, dt, in_pix, out_pix, channel, filter_,
                             first_layer=i == first, has_input_layer=i > 0)
        else:
            cost = _element_wise(layer, cluster, b, dt, in_pix, out_pix, filter_ * channel)
        hb = halo_bytes(layer, b, spatial, channel if layer.kind in WEIGHTED else filter_ * channel, dt)
        halo = network.send_recv(cluster, same_node, hb) if hb else 0.0
        out.append(replace(cost, halo=halo, gather=gather))
    return tuple(out)


def _weighted(layer: Layer, cluster: ClusterSpec, model_shape: network.GroupShape, b: int, dt: int, in_pix: float,
              out_pix: float, channel: int, filter_: int, first_layer: bool, has_input_layer: bool) -> LayerCost:
    """A convolution, up-convolution or fully connected layer as implicit GEMMs, with its filter/channel
    collectives (no halo or gather: ``layer_costs`` adds them)."""
    gpu = cluster.gpu
    f = filter_ if layer.out_channels >= filter_ else 1
    c = channel if layer.in_channels >= channel else 1
    cout, cin = _ceil_div(layer.out_channels, f), _ceil_div(layer.in_channels, c)
    if layer.kind == "upconv":
        m, n, k = b * in_pix, cout * layer.taps, cin
    elif layer.kind == "fc":
        m, n, k = b, cout, cin * (math.prod(layer.in_size) or 1)
    else:
        m, n, k = b * out_pix, cout, cin * layer.taps
    fwd = _gemm(gpu, m, n, k)
    # backward, 2× the forward (Narayanan et al. SC'21 §5.1): wgrad (k×m)·(m×n), and dgrad a convolution of
    # dy with the flipped filters, inner dimension Cout·k^d (cuDNN implicit-GEMM dgrad; Chetlur et al. 2014
    # §3). The first layer's input is the data, which needs no gradient: autograd skips its dgrad
    # (PyTorch computes grad_input only for inputs that require grad: torch.autograd docs, "requires_grad";
    # Chainer wraps input arrays as variables with requires_grad=False: chainer.as_variable docs)
    taps = layer.taps if layer.kind == "conv" else 1
    dgrad = _gemm(gpu, m, k / taps, n * taps) if not first_layer else 0.0
    bwd = dgrad + _gemm(gpu, k, n, m)
    # two GEMMs of the forward's FLOPs: never faster than the forward (the tile model's wave quantization
    # can favour their shorter inner dimensions on tiny outputs, where cuBLAS would split k instead); the
    # first layer's lone wgrad has the forward's FLOPs: never faster than it either
    bwd = max(bwd, fwd)
    in_full = b * layer.in_elements * dt * in_pix / max(1, math.prod(layer.in_size))
    out_full = b * layer.out_channels * out_pix * dt
    model_f = model_b = 0.0
    if f > 1 and has_input_layer:
        # Kahira et al. §3.4 (filter): all-gather the input forward, all-reduce its gradient backward
        model_f = network.all_gather(cluster, model_shape, in_full)
        model_b = network.all_reduce(cluster, model_shape, in_full)
    if c > 1:
        # Kahira et al. §3.4 (channel): all-reduce the partial outputs forward, all-gather dy backward
        model_f = network.all_reduce(cluster, model_shape, out_full)
        model_b = network.all_gather(cluster, model_shape, out_full)
    stored = dt * b * (layer.out_channels / f) * out_pix + (in_full if f > 1 else 0.0)
    return LayerCost(fwd, bwd, 0.0, 0.0, model_f, model_b, 2.0 * m * n * k, dt * (m * k + k * n + m * n), stored,
                     layer.params() / (f * c), dt * b * cout * out_pix)


def _element_wise(layer: Layer, cluster: ClusterSpec, b: int, dt: int, in_pix: float, out_pix: float,
                  shard: int) -> LayerCost:
    """A norm, activation or pooling layer over its 1/``shard`` of the channels (no halo or gather)."""
    nbytes = dt * b * (layer.in_channels * in_pix + layer.out_channels * out_pix) / shard
    # element-wise and pooling kernels: one read and one write (roofline's memory side, Williams et al.
    # 2009); backward reads the saved tensor and the gradient and writes one (2× for a batch norm)
    fwd = memory_time(cluster.gpu, nbytes)
    bwd = memory_time(cluster.gpu, nbytes * (2.0 if layer.kind == "norm" else 1.5))
    stored = dt * b * layer.out_channels * out_pix / shard
    return LayerCost(fwd, bwd, 0.0, 0.0, 0.0, 0.0, 0.0, nbytes, stored, layer.params() / shard, stored)


def _stages(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[tuple[int, int], ...]:
    """Layer ranges [start, end) of the pipeline stages, balanced by compute time (contiguous layers)."""
    return _stage_ranges(model, cluster, s.micro_batch, s.spatial, s.channel, s.filter, s.pp)


@lru_cache(maxsize=1024)
def _stage_ranges(model: ModelSpec, cluster: ClusterSpec, micro_batch: int, spatial: int, channel: int,
                  filter_: int, p: int) -> tuple[tuple[int, int], ...]:
    costs = layer_costs(model, cluster, micro_batch, spatial, channel, filter_)
    weights = [c.forward + c.backward + c.halo * 2 + c.model_forward + c.model_backward for c in costs]
    total, n = sum(weights), len(weights)
    bounds, acc, k = [0], 0.0, 1
    for i, w in enumerate(weights):
        acc += w
        # cut where the running sum passes the next p-quantile, leaving every later stage at least one layer
        while k < p and (acc >= total * k / p or n - (i + 1) <= p - k) and i + 1 > bounds[-1]:
            bounds.append(i + 1)
            k += 1
    bounds.append(n)
    return tuple(zip(bounds, bounds[1:]))


def _costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> tuple[LayerCost, ...]:
    return layer_costs(model, cluster, s.micro_batch, s.spatial, s.channel, s.filter)


def _stage_pass(costs: tuple[LayerCost, ...], start: int, end: int, forward: bool, recompute: bool) -> PassCost:
    part = costs[start:end]
    halo = sum(c.halo for c in part)
    fwd_compute = sum(c.forward for c in part)
    fwd_cp = halo + sum(c.gather for c in part)
    fwd_tp = sum(c.model_forward for c in part)
    if forward:
        return pass_cost(("compute", fwd_compute), ("cp", fwd_cp), ("tp", fwd_tp))
    extra = (("recompute", fwd_compute), ("cp", fwd_cp), ("tp", fwd_tp)) if recompute else ()
    return pass_cost(("compute", sum(c.backward for c in part)), ("cp", halo),
                     ("tp", sum(c.model_backward for c in part)), *extra)


def _merge(p: PassCost) -> PassCost:
    """Parts of one kind added together (the contract lists each kind once)."""
    acc: dict[str, float] = {}
    for k, x in p.parts:
        acc[k] = acc.get(k, 0.0) + x
    return PassCost(p.seconds, tuple(acc.items()))


def pass_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict:
    """A stage pass's cost by (forward, first stage, last stage); middle stages take the slowest middle one."""
    costs, stages = _costs(model, cluster, s), _stages(model, cluster, s)
    full = s.recompute == "full"
    passes = {fwd: [_merge(_stage_pass(costs, a, b, fwd, full)) for a, b in stages] for fwd in (True, False)}
    total = [f.seconds + b.seconds for f, b in zip(passes[True], passes[False])]
    slowest = max(range(len(stages)), key=total.__getitem__)
    middle = max(range(1, len(stages) - 1), key=total.__getitem__, default=slowest)
    out = {}
    for first in (False, True):
        for last in (False, True):
            # (first and last) with pp > 1 never occurs; it gets the slowest stage
            pick = slowest if first and last else 0 if first else len(stages) - 1 if last else middle
            for fwd in (True, False):
                out[(fwd, first, last)] = passes[fwd][pick]
    return out


def stage_params(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[float]:
    """Parameters one GPU of each stage holds."""
    costs = _costs(model, cluster, s)
    return [sum(c.params for c in costs[a:b]) for a, b in _stages(model, cluster, s)]


def _optimizer(cluster: ClusterSpec, params: float) -> float:
    # PyTorch SGD with momentum: SGD_BYTES per parameter, a few fused (foreach) kernels
    return memory_time(cluster.gpu, SGD_BYTES * params, kernels=3)


def _hop(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    if s.pp == 1:
        return 0.0
    costs = _costs(model, cluster, s)
    nbytes = max(costs[b - 1].out_bytes for _, b in _stages(model, cluster, s)[:-1])
    return network.send_recv(cluster, _shapes(cluster, s)["pp"].nodes == 1, nbytes)


def param_arrays(cnn: CNNSpec, start: int, end: int) -> int:
    """Parameter arrays of layers [start, end): a weight (and a bias) per conv/FC layer, γ and β per batch norm."""
    return sum((1 + layer.bias) if layer.kind in WEIGHTED else 2 if layer.kind == "norm" else 0
               for layer in cnn.layers[start:end])


def chainermn_reduce(cluster: ClusterSpec, grads: network.GroupShape, params: float, arrays: int) -> float:
    """Seconds of ChainerMN's pure_nccl gradient all-reduce of one stage, after its backward (no overlap).

    PureNcclCommunicator.allreduce_grad (chainer/chainermn/communicators/pure_nccl_communicator.py): copy every
    gradient array into one buffer (a device copy per array), one NCCL all-reduce of the whole buffer in the
    gradients' dtype (fp32 unless allreduce_grad_dtype is set), a kernel dividing it by the group size into a second
    buffer, and a copy per array back: three passes that each read and write every gradient."""
    copies = memory_time(cluster.gpu, 3 * 2 * GRADIENT_BYTES * params, kernels=2 * arrays + 1)
    return network.all_reduce(cluster, grads, GRADIENT_BYTES * params) + copies


def step_costs(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> StepCosts:
    """Seconds of every task kind of one step of plan ``s`` (which must be valid)."""
    grads = _shapes(cluster, s)["grads"]
    params = stage_params(model, cluster, s)
    group = s.dp * s.spatial
    segments, segment_reduce, reduce_all = 0, None, None
    cnn = spec_of(model)
    if group > 1 and cnn.framework == "chainer":
        # a filter/channel split shards every array: each GPU still copies as many arrays
        reduce_all = tuple(chainermn_reduce(cluster, grads, x, param_arrays(cnn, a, b))
                           for x, (a, b) in zip(params, _stages(model, cluster, s)))
    elif group > 1:
        if s.overlap_grad_reduce:
            # Li et al. 2020 §3.2.3: a bucket's all-reduce starts as soon as its gradients are ready
            chunk = max(params)
            segments = min(MAX_BUCKETS, max(1, math.ceil(GRADIENT_BYTES * chunk / BUCKET_BYTES)))
            segment_reduce = network.all_reduce(cluster, grads, GRADIENT_BYTES * chunk / segments)
        else:
            counts = [max(1, math.ceil(GRADIENT_BYTES * x / BUCKET_BYTES)) for x in params]
            reduce_all = tuple(n * network.all_reduce(cluster, grads, GRADIENT_BYTES * x / n)
                               for x, n in zip(params, counts))
    return StepCosts(passes=pass_costs(model, cluster, s), optimizer=tuple(_optimizer(cluster, x) for x in params),
                     hop=_hop(model, cluster, s), segments=segments, segment_reduce=segment_reduce,
                     param_gather=None, shard_gather=0.0, shard_reduce=0.0, reduce_all=reduce_all,
                     final_gather=None, tied=None)


def lower_bound(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """The busiest stage's compute stream (its passes and optimizer step): never above the step time."""
    costs, stages = _costs(model, cluster, s), _stages(model, cluster, s)
    full = s.recompute == "full"
    params = stage_params(model, cluster, s)
    # a stream's busy time bounds the critical path from below (Graham 1969, list-scheduling bounds)
    return max(s.micro_batches * (_stage_pass(costs, a, b, True, full).seconds
                                  + _stage_pass(costs, a, b, False, full).seconds) + _optimizer(cluster, p)
               for (a, b), p in zip(stages, params))


def memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[StageMemory]:
    """Bytes per GPU of every pipeline stage: fp32 weights, gradients and momentum, and stored activations."""
    costs = _costs(model, cluster, s)
    out = []
    for i, ((a, b), params) in enumerate(zip(_stages(model, cluster, s), stage_params(model, cluster, s))):
        inflight = inflight_layer_chunks(s, i)
        part = costs[a:b]
        if s.recompute == "full":
            # Chen et al. 2016 (arXiv 1604.06174): keep each in-flight micro-batch's stage input, recompute one
            stage_input = costs[a - 1].out_bytes if a else part[0].stored
            acts = inflight * stage_input + sum(c.stored for c in part)
        else:
            # Narayanan et al. SC'21 §2.2: each in-flight micro-batch holds its activations until its backward
            acts = inflight * sum(c.stored for c in part)
        out.append(StageMemory(stage=i, weights=WEIGHT_BYTES * params, gradients=GRADIENT_BYTES * params,
                               optimizer=OPTIMIZER_BYTES * params, activations=acts, embedding=0.0, buffers=0.0,
                               reserve=cluster.gpu.memory_reserve_bytes))
    return out


def peak_memory(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> float:
    """The fullest stage's bytes per GPU."""
    return max(m.total for m in memory(model, cluster, s))


def collectives(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[CommNeed]:
    """The halo exchanges, gathers, filter/channel collectives, pipeline sends and gradient all-reduce of ``s``."""
    cnn, costs, shapes = spec_of(model), _costs(model, cluster, s), _shapes(cluster, s)
    out = []
    b, dt = s.micro_batch, cnn.dtype_bytes
    if s.spatial > 1:
        halos = [(halo_bytes(layer, b, s.spatial, s.channel, dt), c.halo) for layer, c in zip(cnn.layers, costs)]
        nbytes, seconds = max(halos)
        count = sum(1 for h, _ in halos if h)
        if nbytes:
            out.append(CommNeed(group="spatial", op="send_recv", shape=shapes["spatial"], nbytes=nbytes,
                                seconds=seconds, when=f"{count} layers × (forward + backward), largest shown"))
    if s.filter * s.channel > 1:
        group = "filter" if s.filter > 1 else "channel"
        worst = max(range(len(costs)), key=lambda i: costs[i].model_forward + costs[i].model_backward)
        layer = cnn.layers[worst]
        nbytes = b * dt * (layer.in_elements if s.filter > 1 else layer.out_elements) / s.spatial
        fwd, bwd = (("all_gather", "all_reduce") if s.filter > 1 else ("all_reduce", "all_gather"))
        for op, seconds in ((fwd, costs[worst].model_forward), (bwd, costs[worst].model_backward)):
            out.append(CommNeed(group=group, op=op, shape=shapes["model"], nbytes=nbytes, seconds=seconds,
                                when=f"per weighted layer and micro-batch ({'forward' if op == fwd else 'backward'}),"
                                     f" largest ({layer.name}) shown"))
    if s.pp > 1:
        hop = _hop(model, cluster, s)
        nbytes = max(costs[e - 1].out_bytes for _, e in _stages(model, cluster, s)[:-1])
        out.append(CommNeed(group="pp", op="send_recv", shape=shapes["pp"], nbytes=nbytes, seconds=hop,
                            when="per micro-batch and stage boundary"))
    if s.dp * s.spatial > 1:
        nbytes = GRADIENT_BYTES * max(stage_params(model, cluster, s))
        out.append(CommNeed(group="dp", op="all_reduce", shape=shapes["grads"], nbytes=nbytes,
                            seconds=network.all_reduce(cluster, shapes["grads"], nbytes),
                            when=f"once per step over dp·spatial = {s.dp * s.spatial} "
                                 + ("(ChainerMN pure_nccl: one packed buffer)" if cnn.framework == "chainer"
                                    else f"(in {BUCKET_BYTES >> 20} MiB DDP buckets)")))
    return out


def block_ops(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> dict[str, tuple[Op, ...]]:
    """Kernels of the first stage's layers for one micro-batch, by pass."""
    cnn, costs = spec_of(model), _costs(model, cluster, s)
    a, b = _stages(model, cluster, s)[0]
    fwd = tuple(Op(layer.name, c.flops, c.nbytes, c.forward) for layer, c in zip(cnn.layers[a:b], costs[a:b]))
    bwd = tuple(Op(f"{layer.name}.bwd", 2 * c.flops, 2 * c.nbytes, c.backward)
                for layer, c in zip(cnn.layers[a:b], costs[a:b]) if c.backward > 0)
    return {"forward": fwd, "backward": bwd, "recompute": fwd if s.recompute == "full" else ()}


def violations(model: ModelSpec, gpus: int, s: Plan) -> list[str]:
    """Every reason ``s`` cannot train the CNN on ``gpus`` GPUs; [] if valid."""
    cnn = spec_of(model)
    out: list[str] = []
    if s.gpus != gpus:
        out.append(f"dp·pp·spatial·channel·filter = {s.dp}·{s.pp}·{s.spatial}·{s.channel}·{s.filter} = "
                   f"{s.dp * s.pp * s.spatial * s.channel * s.filter}, not the {gpus} GPUs of the cluster")
    if s.tp != 1:
        out.append(f"tp {s.tp}: tensor parallelism is for transformers; split a CNN's weights with filter or channel")
    if s.cp != 1:
        out.append(f"cp {s.cp}: context parallelism is for transformers; split a CNN's samples with spatial")
    if s.filter > 1 and s.channel > 1:
        out.append(f"filter {s.filter} and channel {s.channel}: use one of filter or channel parallelism")
    weighted = [layer for layer in cnn.layers if layer.kind in WEIGHTED]
    if s.spatial > cnn.input_size[0]:
        out.append(f"spatial {s.spatial} is more than the input's {cnn.input_size[0]} rows")
    # Kahira et al. §4 (oracle constraints): p ≤ the fewest filters, resp. input channels, of a split layer
    fewest_filters = min((layer.out_channels for layer in weighted[:-1]), default=1)
    if s.filter > fewest_filters:
        out.append(f"filter {s.filter} is more than the {fewest_filters} filters of the narrowest layer")
    fewest_channels = min((layer.in_channels for layer in weighted[1:]), default=1)
    if s.channel > fewest_channels:
        out.append(f"channel {s.channel} is more than the {fewest_channels} input channels of the narrowest layer")
    if s.pp > len(weighted):
        out.append(f"pp {s.pp} is more than the {len(weighted)} conv/FC layers")
    if s.global_batch % (s.dp * s.micro_batch):
        out.append(f"global batch {s.global_batch} is not divisible by dp·micro_batch = {s.dp}·{s.micro_batch}")
    if s.schedule == "interleaved" or s.virtual_stages != 1:
        out.append("the interleaved schedule is not modelled for CNNs; use gpipe or 1f1b")
    if s.sequence_parallel:
        out.append("sequence parallelism is for transformers")
    if s.recompute == "selective":
        out.append("selective recomputation is transformer-specific; use recompute none or full")
    if s.zero != 0:
        out.append(f"ZeRO stage {s.zero} is not modelled for CNNs (PyTorch DDP); use zero 0")
    if s.uneven:
        out.append("uneven first/last pipeline stages are for transformers; CNN stages are balanced by time")
    if cnn.framework == "chainer" and s.overlap_grad_reduce and s.dp * s.spatial > 1:
        out.append("ChainerMN's pure_nccl communicator all-reduces gradients after the backward; use "
                   "overlap_grad_reduce false")
    return out + _other_family_knobs(s)


_OTHER_FAMILY_KNOBS = ("ep", "etp", "ep_overlap", "moe_dispatcher", "deepseek_fp8", "precision", "fp8_param_gather",
                       "tp_comm_overlap", "cp_comm", "sharding", "optimizer_moments", "fp8_activation_store")
"""Knobs of the transformer, MoE and DLRM families that this module does not model: a CNN plan keeps their defaults."""


def _other_family_knobs(s: Plan) -> list[str]:
    """Reasons a CNN plan sets a knob this module would silently ignore (it must be refused, not priced wrongly)."""
    defaults = type(s).defaults()
    out = [f"{k} {getattr(s, k)!r} is not modelled for CNNs (use {defaults[k]!r})" for k in _OTHER_FAMILY_KNOBS
           if k in defaults and getattr(s, k) != defaults[k]]
    if s.recompute == "modules":
        out.append("recompute modules is MoE-specific; use recompute none or full")
    if s.schedule in SPLIT_BACKWARD:
        out.append(f"the {s.schedule} schedule splits the backward into input and weight gradients, not modelled "
                   "for CNNs; use gpipe or 1f1b")
    return out


CNN = family_of_functions(globals(), "cnn", ("dp", "pp", "spatial", "channel", "filter"), default_space="cnn")
"""The CNN family: costs and validity from this module."""

FAMILIES = (CNN,)
"""The families this package registers."""
