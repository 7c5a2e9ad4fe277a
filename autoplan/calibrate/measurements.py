"""What calibration fits to: timed kernels, timed collectives and measured training steps, each naming where it
was read (``file:line``), and the guarded reading of untrusted input files."""

from __future__ import annotations

import hashlib
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autoplan.calibrate.model import ModelSpec, SpecError, Strategy

MAX_INPUT_BYTES = 256 * 2**20
"""Largest input file read (256 MiB: a profiler trace of a few steps fits; a runaway log does not)."""
KERNEL_KINDS = ("gemm", "gemm_fp8", "attention", "attention_bwd", "memory", "launch")
"""Kernel kinds the cost model prices (``model.py``)."""
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
"""Collectives the network model prices, named as nccl-tests' binaries name them (``sendrecv`` → ``send_recv``)."""


@dataclass(frozen=True, kw_only=True)
class Kernel:
    """One kernel's measured time at one shape.

    ``shape`` by kind: gemm/gemm_fp8 (m, n, k, batch); attention/attention_bwd (batch, heads, seq_q, seq_kv,
    head_dim); memory (bytes moved,); launch ()."""

    kind: str
    shape: tuple[int, ...]
    seconds: float
    where: str
    sustained: bool = False
    """Timed inside training (a profiler trace): at the sustained clock; False for a microbenchmark's bursts, which
    run at the clock the peak is quoted at (``clock_ratio`` 1)."""
    out_bytes: float = 2.0
    """A GEMM's HBM bytes per output value: 2 for a 16-bit write; a wgrad GEMM accumulating into its output reads
    and writes it (8 into fp32, 4 into bf16: ``compute.wgrad_output_bytes``)."""


@dataclass(frozen=True, kw_only=True)
class Collective:
    """One collective's measured time (nccl-tests' size convention: all-gather's output, reduce-scatter's input)."""

    op: str
    ranks: int
    per_node: int
    nbytes: float
    seconds: float
    where: str


@dataclass(frozen=True, kw_only=True)
class Step:
    """One measured training step: the model, the plan(s) it may have run (the fastest is simulated) and its time."""

    name: str
    model: ModelSpec
    plans: tuple[Strategy, ...]
    gpus: int
    seconds: float
    where: str
    gpu_overrides: tuple[tuple[str, float], ...] = ()
    """GPU fields the run's hardware differs in from the calibrated cluster's (e.g. a 40 GB A100's ``hbm_bytes``)."""
    flash_attention: bool | None = None
    """The run's software had a fused attention kernel (None: as the calibrated cluster says)."""
    flash2_attention: bool = False
    """The run's attention kernel was FlashAttention-2 (``GPUSpec.with_flash2_attention``)."""
    deterministic_attention: bool = False
    """The attention kernel's deterministic backward (validate's ``attention_kernel: fused-deterministic`` or
    ``flash2-deterministic``)."""
    nvls: bool = True
    """NCCL could all-reduce by NVLink SHARP (validate's ``nccl_algo``; ``ClusterSpec.without_nvls``)."""
    group: str = ""
    """The reference group it belongs to (a validation file's group), for benchmarks."""


@dataclass
class Inputs:
    """Everything read from the input files, and what was read (for the provenance table)."""

    kernels: list[Kernel] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    files: list[dict] = field(default_factory=list)
    """One record per file: path, sha256, bytes, kind, measurements."""
    notes: list[str] = field(default_factory=list)
    """What was read but not used, and why (printed once)."""

    def count(self) -> int:
        """Measurements of every kind."""
        return len(self.kernels) + len(self.collectives) + len(self.steps)


def read_text(path: str | Path, what: str) -> tuple[str, str]:
    """(text, sha256) of an untrusted input file: a regular file, at most ``MAX_INPUT_BYTES``, UTF-8 text."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise SpecError(f"{what} {str(p)!r} does not exist") from None
    except OSError as err:
        raise SpecError(f"cannot read {what} {str(p)!r}: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(f"{what} {str(p)!r} is not a regular file")
    if st.st_size > MAX_INPUT_BYTES:
        raise SpecError(f"{what} {str(p)!r} is {st.st_size / 2**20:,.0f} MiB, more than the "
                        f"{MAX_INPUT_BYTES // 2**20} MiB read; cut it to the part that matters")
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as err:
        raise SpecError(f"cannot read {what} {str(p)!r}: {err.strerror or err}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise SpecError(f"{what} {str(p)!r} grew past {MAX_INPUT_BYTES // 2**20} MiB while being read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise SpecError(f"{what} {str(p)!r} line {line}: not UTF-8 text (byte {err.start})") from None
    return text, hashlib.sha256(data).hexdigest()


def positive(value: object, where: str, what: str) -> float:
    """``value`` as a finite positive float, else a SpecError naming ``where`` and ``what``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise SpecError(f"{where}: {what} must be a positive number, got {value!r}")
    return float(value)


def count(value: object, where: str, what: str, high: int = 2**40) -> int:
    """``value`` as a positive integer no larger than ``high``, else a SpecError naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= high:
        raise SpecError(f"{where}: {what} must be a positive integer (at most {high:,}), got {value!r}")
    return value
