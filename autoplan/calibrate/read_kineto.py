"""PyTorch profiler (Kineto) Chrome traces: GPU kernels (``cat: kernel``) classified by name into GEMM, attention,
element-wise and NCCL; each linked to the operator that launched it (the shared ``External id``), whose recorded
input shapes (``record_shapes=True``) give the kernel's size, so that its time feeds the same fits as a profile."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

from autoplan.calibrate.measurements import Collective, Kernel
from autoplan.calibrate.model import SpecError
from autoplan.specs.files import parse_json

CLASSES = ("nccl", "attention", "gemm", "elementwise", "other")
_NAME_RULES = (
    ("nccl", re.compile(r"nccl", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa|cudnn.*(fprop|bprop|dgrad)", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|xmma|wgmma|cublas|s\d+gemm|sm\d+_.*_tn|_nt_|_tn_|hmma|mma_", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|reduce|norm|softmax|copy|fill|cat|index|gelu|silu|"
                               r"swiglu|dropout|adam|cast|transpose", re.I)),
)
_DTYPE_BYTES = {"float": 4, "float32": 4, "c10::BFloat16": 2, "c10::Half": 2, "bfloat16": 2, "half": 2,
                "float16": 2, "double": 8, "int": 4, "long int": 8, "int64": 8, "c10::Float8_e4m3fn": 1,
                "c10::Float8_e5m2": 1, "unsigned char": 1, "bool": 1, "BFloat16": 2, "Float": 4, "Half": 2,
                "Double": 8, "Long": 8, "Int": 4, "Byte": 1}
_COLL = {"allreduce": "all_reduce", "all_reduce": "all_reduce", "allgather": "all_gather",
         "all_gather": "all_gather", "_allgather_base": "all_gather", "reduce_scatter": "reduce_scatter",
         "reducescatter": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter", "all_to_all": "all_to_all",
         "alltoall": "all_to_all", "alltoall_base": "all_to_all", "send": "send_recv", "recv": "send_recv"}


def classify(name: str) -> str:
    """The class of a kernel by its name: nccl, attention, gemm, elementwise or other."""
    for cls, rule in _NAME_RULES:
        if rule.search(name):
            return cls
    return "other"


def looks_like(text: str) -> bool:
    """A Chrome trace with Kineto's kernel events."""
    head = text[:4096]
    return "traceEvents" in head or ('"ph"' in head and '"cat"' in head)


def _events(text: str, path: Path) -> list[dict]:
    data = parse_json(text, f"trace {str(path)!r}")
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise SpecError(f"trace {str(path)!r}: no traceEvents list")
    return [e for e in events if isinstance(e, dict)]


def _dims(op: dict) -> list[list[int]]:
    dims = op.get("args", {}).get("Input Dims") or []
    return [d if isinstance(d, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in d) else []
            for d in dims]


def _gemm_shape(op: dict) -> tuple[int, int, int, int] | None:
    """(m, n, k, batch) of a matmul operator from its input shapes."""
    name, d = op.get("name", ""), _dims(op)
    d = [x for x in d if x]
    if name in ("aten::mm",) and len(d) >= 2 and len(d[0]) == 2 and len(d[1]) == 2:
        return d[0][0], d[1][1], d[0][1], 1
    if name == "aten::addmm" and len(d) >= 3 and len(d[1]) == 2 and len(d[2]) == 2:
        return d[1][0], d[2][1], d[1][1], 1
    if name in ("aten::bmm", "aten::baddbmm") and len(d) >= 2 and len(d[-2]) == 3 and len(d[-1]) == 3:
        a, b = d[-2], d[-1]
        return a[1], b[2], a[2], a[0]
    if name == "aten::linear" and len(d) >= 2 and len(d[1]) == 2 and d[0]:
        return math.prod(d[0][:-1]), d[1][0], d[0][-1], 1
    return None


def _attention_shape(op: dict) -> tuple[str, tuple[int, ...]] | None:
    name, d = op.get("name", ""), _dims(op)
    if "scaled_dot_product" not in name and "flash_attention" not in name or len(d) < 3:
        return None
    backward = "backward" in name
    q, k = (d[1], d[2]) if backward else (d[0], d[1])   # the backward's first input is the output gradient
    if len(q) != 4 or len(k) != 4:
        return None
    b, h, sq, dh = q
    return ("attention_bwd" if backward else "attention"), (b, h, sq, k[2], dh)


def _element_bytes(op: dict) -> float | None:
    d, types = _dims(op), op.get("args", {}).get("Input type") or []
    sizes = [math.prod(x) * _DTYPE_BYTES.get(t, 2) for x, t in zip(d, types) if x]
    if not sizes:
        return None
    return float(sum(sizes) + max(sizes))          # the inputs read, an output the size of the largest written


def parse(text: str, path: Path, gpus_per_node: int) -> tuple[list[Kernel], list[Collective], dict[str, float]]:
    """Kernels with known shapes, NCCL collectives with known sizes, and every kernel class's share of GPU time."""
    events = _events(text, path)
    ops: dict[int, dict] = {}
    comms: dict[int, dict] = {}
    kernels = []
    for e in events:
        cat, args = str(e.get("cat", "")).lower(), e.get("args") if isinstance(e.get("args"), dict) else {}
        ext = args.get("External id")
        if cat == "kernel" and e.get("ph") == "X":
            kernels.append(e)
        elif cat in ("cpu_op", "operator") and isinstance(ext, int):
            if "Collective name" in args:
                comms[ext] = e
            elif _dims(e):
                # the innermost operator with shapes (aten::mm inside aten::linear) is the one that launched it
                old = ops.get(ext)
                if old is None or float(e.get("dur", 0)) <= float(old.get("dur", 0)):
                    ops[ext] = e
    if not kernels:
        raise SpecError(f"trace {str(path)!r}: no GPU kernel events (cat 'kernel'); profile with "
                        "activities=[ProfilerActivity.CUDA] and record_shapes=True")
    share: dict[str, float] = defaultdict(float)
    grouped: dict[tuple, float] = defaultdict(float)
    for e in kernels:
        dur = e.get("dur")
        if not isinstance(dur, (int, float)) or not math.isfinite(dur) or dur < 0:
            raise SpecError(f"trace {str(path)!r}: kernel {str(e.get('name'))[:60]!r} has no valid 'dur'")
        cls = classify(str(e.get("name", "")))
        share[cls] += dur
        ext = e.get("args", {}).get("External id")
        grouped[(cls, ext if isinstance(ext, int) else id(e))] += dur * 1e-6
    out_k: list[Kernel] = []
    out_c: list[Collective] = []
    for (cls, ext), seconds in grouped.items():
        where = f"{path} (External id {ext})"
        if cls == "nccl" and ext in comms:
            c = _collective(comms[ext], seconds, gpus_per_node, where)
            if c:
                out_c.append(c)
        elif ext in ops and seconds > 0:
            k = _kernel(cls, ops[ext], seconds, where)
            if k:
                out_k.append(k)
    total = sum(share.values()) or 1.0
    return out_k, out_c, {c: share.get(c, 0.0) / total for c in CLASSES}


def _kernel(cls: str, op: dict, seconds: float, where: str) -> Kernel | None:
    if cls == "gemm":
        shape = _gemm_shape(op)
        types = op.get("args", {}).get("Input type") or []
        fp8 = any("Float8" in str(t) for t in types)
        return Kernel(kind="gemm_fp8" if fp8 else "gemm", shape=shape, seconds=seconds, where=where,
                      sustained=True) if shape else None
    if cls == "attention":
        found = _attention_shape(op)
        return Kernel(kind=found[0], shape=found[1], seconds=seconds, where=where, sustained=True) if found else None
    if cls == "elementwise":
        nbytes = _element_bytes(op)
        return Kernel(kind="memory", shape=(int(nbytes),), seconds=seconds, where=where,
                      sustained=True) if nbytes else None
    return None


def _collective(op: dict, seconds: float, gpus_per_node: int, where: str) -> Collective | None:
    args = op.get("args", {})
    kind = _COLL.get(str(args.get("Collective name", "")).lower().strip("_"))
    ranks = args.get("Group size")
    if kind is None or not isinstance(ranks, int) or ranks < 2:
        return None
    size = _DTYPE_BYTES.get(str(args.get("dtype", "")), 2)
    key = "Out msg nelems" if kind == "all_gather" else "In msg nelems"
    nelems = args.get(key)
    if not isinstance(nelems, int) or nelems <= 0 or seconds <= 0:
        return None
    return Collective(op=kind, ranks=ranks, per_node=min(ranks, gpus_per_node), nbytes=float(nelems * size),
                      seconds=seconds, where=where)
