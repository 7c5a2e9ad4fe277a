"""What `autoplan check` reports about one plan: validity, memory per stage, layer and collective times."""

from __future__ import annotations

from autoplan.cost import compute, network
from autoplan.cost.compute import LayerCompute
from autoplan.cost.memory import memory_per_stage
from autoplan.sim.workload import BUCKET_PARAMS, PARAM_BYTES, grad_bytes, stage_params
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import Strategy, violations

GIB = 1024**3
_OPS = network.COLLECTIVES


def capacity_text(hbm_bytes: float) -> str:
    """The memory a GPU offers tensors against its nominal size, e.g. "79.6 GiB usable of 80" (an H100 80GB)."""
    return f"{hbm_bytes / GIB:.1f} GiB usable of {round(hbm_bytes / GIB):d}"


def plan_report(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict:
    """A JSON-ready report: valid?, reasons, per-stage memory (GiB), one layer's times, each collective."""
    reasons = violations(model, cluster.gpus, s)
    report: dict = {"valid": not reasons, "violations": reasons, "plan": s.to_dict(), "model": model.name,
                    "cluster": cluster.name, "gpus": cluster.gpus}
    if reasons:
        return report
    mem = memory_per_stage(model, cluster, s)
    report["memory_gib"] = [{"stage": m.stage, "weights": m.weights / GIB, "gradients": m.gradients / GIB,
                             "optimizer": m.optimizer / GIB, "activations": m.activations / GIB,
                             "embedding": m.embedding / GIB, "buffers": m.buffers / GIB, "reserve": m.reserve / GIB,
                             "total": m.total / GIB} for m in mem]
    peak = max(m.total for m in mem)
    report["peak_memory_gib"] = peak / GIB
    report["capacity_gib"] = cluster.gpu.hbm_bytes / GIB
    report["capacity"] = capacity_text(cluster.gpu.hbm_bytes)
    report["fits"] = peak <= cluster.gpu.hbm_bytes
    if not report["fits"]:
        report["valid"] = False
        report["violations"] = [f"needs {peak / GIB:.1f} GiB per GPU, more than the {report['capacity']}"]
    layer = compute.layer_compute(model, cluster, s.tp, s.cp, s.sequence_parallel, s.micro_batch, s.recompute)
    backward = layer.backward
    if not s.gradient_accumulation_fusion:
        backward += (compute.grad_accumulation(cluster.gpu, model.layer_params() / s.tp, grad_bytes(s),
                                               compute.layer_tensors(model)),)
    report["layer_ms"] = {
        "forward": 1e3 * LayerCompute.seconds(layer.forward), "backward": 1e3 * LayerCompute.seconds(backward),
        "recompute": 1e3 * LayerCompute.seconds(layer.recompute),
        "ops": [{"pass": name, "op": op.name, "gflop": op.flops / 1e9, "mb": op.bytes / 1e6, "us": op.seconds * 1e6}
                for name, ops in (("forward", layer.forward), ("backward", backward)) for op in ops]}
    report["collectives"] = _collectives(model, cluster, s, layer)
    return report


def _entry(group: str, op: str, shape: network.GroupShape, nbytes: float, seconds: float, when: str) -> dict:
    busbw = network.bus_bandwidth(op, shape.size, nbytes, seconds) if seconds > 0 and op != "send_recv" else 0.0
    return {"group": group, "op": op, "when": when, "size": shape.size, "per_node": shape.per_node,
            "nodes": shape.nodes, "mb": nbytes / 1e6, "ms": seconds * 1e3, "busbw_gb_per_s": busbw / 1e9}


def _collectives(model: ModelSpec, cluster: ClusterSpec, s: Strategy, layer: LayerCompute) -> list[dict]:
    out = []
    if s.tp > 1:
        tp = network.shape_of(cluster, s, "tp")
        for c in layer.forward_collectives[:2]:
            out.append(_entry("tp", c.kind, tp, c.nbytes, _OPS[c.kind](cluster, tp, c.nbytes),
                              f"{len(layer.forward_collectives) // 2}× per layer and pass"))
    if s.cp > 1:
        cp = network.shape_of(cluster, s, "cp")
        kv = 2 * compute.BF16 * s.micro_batch * (model.seq_len // s.cp) * model.kv_dim // s.tp
        out.append(_entry("cp", "send_recv", cp, kv, network.send_recv(cluster, cp.nodes == 1, kv),
                          f"{s.cp - 1}× per layer (ring K/V)"))
    if s.pp > 1:
        pp = network.shape_of(cluster, s, "pp")
        act = compute.BF16 * s.micro_batch * (model.seq_len // s.cp) * model.hidden / s.tp
        out.append(_entry("pp", "send_recv", pp, act, network.send_recv(cluster, pp.nodes == 1, act),
                          "per micro-batch and chunk" + (", blocks the sender's compute" if s.synchronous_p2p else "")))
        if s.tp > 1 and not s.sequence_parallel:
            tp = network.shape_of(cluster, s, "tp")
            out.append(_entry("tp", "all_gather", tp, act * s.tp, network.all_gather(cluster, tp, act * s.tp),
                              "after each PP receive (scatter/gather)"))
    if s.dp * s.cp > 1:
        grads = network.group_shape(cluster.gpus_per_node, s.dp * s.cp, network.stride(s, "cp"))
        params = max(stage_params(model, s, i) for i in (0, s.pp - 1))
        bucket = min(params, max(BUCKET_PARAMS, 1e6 * s.dp * s.cp))
        op = "reduce_scatter" if s.zero >= 1 else "all_reduce"
        nbytes = grad_bytes(s) * bucket
        out.append(_entry("dp", op, grads, nbytes, _OPS[op](cluster, grads, nbytes),
                          f"per bucket, {params / bucket:.0f} buckets"))
        if s.zero >= 1:
            out.append(_entry("dp", "all_gather", grads, PARAM_BYTES * bucket,
                              network.all_gather(cluster, grads, PARAM_BYTES * bucket), "per bucket, params"))
    return out
