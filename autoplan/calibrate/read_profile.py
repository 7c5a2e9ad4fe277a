"""``autoplan profile``'s measurements file (schema ``autoplan-measurements/1``): kernels and collectives."""

from __future__ import annotations

from pathlib import Path

from autoplan.calibrate.measurements import Collective, Kernel, count, positive
from autoplan.calibrate.model import SpecError
from autoplan.specs.files import parse_json

SCHEMA = "autoplan-measurements/1"
"""The version this reader understands (``autoplan profile`` writes it)."""
_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


def looks_like(text: str) -> bool:
    """An autoplan measurements file."""
    return '"autoplan-measurements/' in text[:2048]


def parse(text: str, path: Path) -> tuple[list[Kernel], list[Collective], dict]:
    """The kernels and collectives of a measurements file, and its header (device, software, host)."""
    data = parse_json(text, f"measurements file {str(path)!r}")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else None
        raise SpecError(f"measurements file {str(path)!r}: schema {got!r}, this autoplan reads {SCHEMA!r}")
    rows = data.get("measurements")
    if not isinstance(rows, list):
        raise SpecError(f"measurements file {str(path)!r}: no 'measurements' list")
    kernels, colls = [], []
    for i, row in enumerate(rows):
        where = f"{path}: measurement #{i + 1}"
        if not isinstance(row, dict):
            raise SpecError(f"{where} must be an object, got {row!r}")
        kind = row.get("kind")
        seconds = positive(row.get("seconds"), where, "seconds")
        sustained = row.get("sustained", data.get("sustained", False))
        if not isinstance(sustained, bool):
            raise SpecError(f"{where}: sustained must be true or false, got {sustained!r}")
        if kind == "gemm":
            fp8 = row.get("dtype") == "fp8"
            shape = tuple(count(row.get(k), where, k) for k in ("m", "n", "k", "batch"))
            out_bytes = positive(row.get("out_bytes", 2), where, "out_bytes")
            kernels.append(Kernel(kind="gemm_fp8" if fp8 else "gemm", shape=shape, seconds=seconds, where=where,
                                  sustained=sustained, out_bytes=out_bytes))
        elif kind == "attention":
            back = row.get("direction") == "backward"
            shape = tuple(count(row.get(k), where, k) for k in ("batch", "heads", "seq_q", "seq_kv", "head_dim"))
            kernels.append(Kernel(kind="attention_bwd" if back else "attention", shape=shape, seconds=seconds,
                                  where=where))
        elif kind == "elementwise":
            kernels.append(Kernel(kind="memory", shape=(count(row.get("bytes"), where, "bytes"),), seconds=seconds,
                                  where=where))
        elif kind == "launch":
            kernels.append(Kernel(kind="launch", shape=(), seconds=seconds, where=where))
        elif kind == "collective":
            op = row.get("op")
            if op not in _COLLECTIVES:
                raise SpecError(f"{where}: op must be one of {', '.join(_COLLECTIVES)}, got {op!r}")
            ranks = count(row.get("ranks"), where, "ranks")
            per_node = count(row.get("per_node"), where, "per_node", high=ranks)
            colls.append(Collective(op=op, ranks=ranks, per_node=per_node,
                                    nbytes=float(count(row.get("bytes"), where, "bytes")), seconds=seconds,
                                    where=where))
        else:
            raise SpecError(f"{where}: kind must be gemm, attention, elementwise, launch or collective, got {kind!r}")
    return kernels, colls, {k: data.get(k) for k in ("device", "software", "host", "distributed", "created")}
