"""nccl-tests output (``all_reduce_perf`` and its siblings, as printed): the size/count/type/time/algbw/busbw table,
out-of-place and in-place, and the ``#  Rank`` lines that say how many GPUs ran on how many hosts."""

from __future__ import annotations

import re
from pathlib import Path

from autoplan.calibrate.measurements import Collective
from autoplan.calibrate.model import SpecError

_BINARIES = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
             "alltoall": "all_to_all", "all_to_all": "all_to_all", "sendrecv": "send_recv"}
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_THREADS = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([A-Za-z0-9_]+)\s+(.*)$")


def looks_like(text: str) -> bool:
    """The text holds an nccl-tests table."""
    return "busbw" in text and "algbw" in text and any(k in text for k in ("nThread", "out-of-place", "(elements)"))


def op_of(text: str, path: Path) -> str:
    """The collective: the '# Collective test starting' line (nccl-tests ≥ 2.13), else the file's name."""
    m = re.search(r"Collective test starting:\s*(\w+?)_perf", text)
    for name in ((m.group(1),) if m else ()) + (path.name.lower(),):
        for key, op in _BINARIES.items():
            if key in name.replace("-", "_"):
                return op
    raise SpecError(f"nccl-tests file {str(path)!r}: cannot tell which collective it timed; keep its "
                    "'# Collective test starting' line or name the file after the binary (all_reduce_perf.txt, ...)")


def _group(lines: list[str], path: Path) -> tuple[int, int]:
    """(ranks, GPUs per host) from the '#  Rank N ... on HOST' lines, else one process's nThread × nGpus."""
    hosts: dict[str, int] = {}
    for line in lines:
        m = _RANK.match(line.strip())
        if m:
            hosts[m.group(2)] = hosts.get(m.group(2), 0) + 1
    if hosts:
        ranks = sum(hosts.values())
        per = set(hosts.values())
        if len(per) != 1:
            raise SpecError(f"nccl-tests file {str(path)!r}: uneven GPUs per host {sorted(hosts.items())}; "
                            "the network model needs the same count on every host")
        return ranks, per.pop()
    for line in lines:
        m = _THREADS.search(line)
        if m:
            n = int(m.group(1)) * int(m.group(2))
            if n > 1:
                return n, n
    raise SpecError(f"nccl-tests file {str(path)!r}: no '#  Rank ... on HOST' lines, so the GPU count is unknown; "
                    "keep those lines of the output")


def _numbers(tail: str) -> list[float] | None:
    out = []
    for tok in tail.split():
        try:
            out.append(float(tok))
        except ValueError:
            if tok.upper() == "N/A":
                out.append(float("nan"))
            else:
                out.append(None)  # type: ignore[arg-type]
    return out


def parse(text: str, path: Path) -> list[Collective]:
    """Every row of the table: the out-of-place and in-place time of each size (nccl-tests' size convention)."""
    op = op_of(text, path)
    lines = text.splitlines()
    ranks, per_node = _group(lines, path)
    out = []
    for no, line in enumerate(lines, 1):
        m = _ROW.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        size = int(m.group(1))
        nums = [x for x in _numbers(m.group(4)) if x is not None]
        # trailing columns: time algbw busbw #wrong (or error) for out-of-place, then the same for in-place
        if len(nums) < 4:
            raise SpecError(f"{path}:{no}: an nccl-tests row needs time, algbw and busbw after the type, got {line!r}")
        groups = [nums[-8:-4], nums[-4:]] if len(nums) >= 8 else [nums[-4:]]
        for g in groups:
            t_us = g[0]
            if not t_us > 0 or size <= 0:
                continue
            out.append(Collective(op=op, ranks=ranks, per_node=per_node, nbytes=float(size), seconds=t_us * 1e-6,
                                  where=f"{path}:{no}"))
    if not out:
        raise SpecError(f"nccl-tests file {str(path)!r}: no table rows (size count type ... time algbw busbw)")
    return out
