"""What `autoplan check` reports about one plan: validity, memory per stage, layer and collective times."""

from __future__ import annotations

from autoplan.hardware import network
from autoplan.families.transformer.layer import LayerCompute
from autoplan.families.costs import CommNeed
from autoplan.families.registry import block_ops, collectives, memory_per_stage, violations
from autoplan.families.symbolic import WEIGHTS, symbolic_cost, symbolic_volumes
from autoplan.hardware.support import hardware_violations
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

GIB = 1024**3


def capacity_text(hbm_bytes: float) -> str:
    """The memory a GPU offers tensors against its nominal size, e.g. "79.6 GiB usable of 80" (an H100 80GB)."""
    return f"{hbm_bytes / GIB:.1f} GiB usable of {round(hbm_bytes / GIB):d}"


def plan_report(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict:
    """A JSON-ready report: valid?, reasons, per-stage memory (GiB), one layer's times, each collective."""
    reasons = violations(model, cluster.gpus, s) + hardware_violations(model, cluster, s)
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
    ops = block_ops(model, cluster, s)
    report["layer_ms"] = {
        "forward": 1e3 * LayerCompute.seconds(ops["forward"]), "backward": 1e3 * LayerCompute.seconds(ops["backward"]),
        "recompute": 1e3 * LayerCompute.seconds(ops["recompute"]),
        "ops": [{"pass": name, "op": op.name, "gflop": op.flops / 1e9, "mb": op.bytes / 1e6, "us": op.seconds * 1e6}
                for name in ("forward", "backward") for op in ops[name]]}
    report["collectives"] = [_entry(c) for c in collectives(model, cluster, s)]
    report["symbolic"] = _symbolic(model, cluster, s)
    return report


def _symbolic(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> dict:
    """The plan's hardware-free volumes per GPU per step (families/symbolic.py) and its two symbolic scores."""
    vol = symbolic_volumes(model, cluster, s)
    return {"tflop": vol.flops / 1e12, "tier_gb": {name: b / 1e9 for name, b in vol.tier_bytes},
            "bubble": vol.bubble, **{f"score_{w}": symbolic_cost(model, cluster, s, w) for w in WEIGHTS}}


def _entry(c: CommNeed) -> dict:
    shape = c.shape
    measurable = c.seconds > 0 and c.op != "send_recv"
    busbw = network.bus_bandwidth(c.op, shape.size, c.nbytes, c.seconds) if measurable else 0.0
    return {"group": c.group, "op": c.op, "when": c.when, "size": shape.size, "per_node": shape.per_node,
            "nodes": shape.nodes, "mb": c.nbytes / 1e6, "ms": c.seconds * 1e3, "busbw_gb_per_s": busbw / 1e9}
