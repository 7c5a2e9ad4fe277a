"""``autoplan profile``: time, on this machine's devices, the kernels and collectives the cost model prices, and write
them as one measurements file (schema ``autoplan-measurements/1``). The only module that imports ``torch``, and
only when a profile runs."""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from autoplan.calibrate.model import SpecError, get_model, layer_gemm_shapes, write_atomic
from autoplan.calibrate.read_profile import SCHEMA


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise SpecError("autoplan profile needs PyTorch: pip install 'autoplan[profile]'") from None
    return torch


class Timer:
    """Seconds of a callable on one device: the median of CUDA-event timings on a GPU; on a CPU the fastest
    wall-clock repeat (a shared host's other work only ever adds time)."""

    def __init__(self, torch: Any, device: Any, repeats: int, warmup: int) -> None:
        self.torch, self.device, self.repeats, self.warmup = torch, device, repeats, warmup
        self.cuda = device.type == "cuda"

    def __call__(self, fn: Callable[[], Any], setup: Callable[[], Any] | None = None) -> float:
        times = []
        for i in range(self.warmup + self.repeats):
            arg = setup() if setup else None
            if self.cuda:
                start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                fn() if arg is None else fn(arg)
                end.record()
                end.synchronize()
                seconds = start.elapsed_time(end) / 1e3
            else:
                t0 = time.perf_counter()
                fn() if arg is None else fn(arg)
                seconds = time.perf_counter() - t0
            if i >= self.warmup:
                times.append(seconds)
        return statistics.median(times) if self.cuda else min(times)


def gemm_shapes(model_name: str | None, tps: tuple[int, ...], micro_batches: tuple[int, ...],
                quick: bool) -> list[tuple[int, int, int]]:
    """(m, n, k) to time: a model's four linear layers forward, dgrad and wgrad over the TP and micro-batch values
    (every size cut to 256 with --quick), else a sweep of sizes."""
    if model_name:
        model = get_model(model_name)
        out = set()
        for tp in tps:
            if model.heads % tp or model.ffn_hidden % tp:
                continue
            for mb in micro_batches:
                for m, n, k in layer_gemm_shapes(model, tp, 1, mb).values():
                    if quick:
                        m, n, k = min(m, 256), min(n, 256), min(k, 256)
                    out |= {(m, n, k), (m, k, n), (k, n, m)}          # forward, dgrad, wgrad
        if not out:
            raise SpecError(f"--tp {','.join(map(str, tps))}: none divides {model.name}'s heads and FFN")
        return sorted(out)[:12] if quick else sorted(out)
    sizes = (64, 128, 256) if quick else (1024, 2048, 4096, 8192)
    ks = (32, 64, 256) if quick else (64, 256, 1024, 4096, 8192)
    return [(m, n, k) for m in sizes for n in sizes[-2:] for k in ks]


def _gemms(torch: Any, dev: Any, timer: Timer, shapes: list, fp8: bool) -> list[dict]:
    out = []
    for m, n, k in shapes:
        # BF16 operands token-major, as a wgrad's (input[k, m]ᵀ · grad[k, n]): on a GPU the same GEMM also adds
        # into an FP32 main_grad, as gradient-accumulation fusion does; its epilogue hides less in other layouts
        a = torch.randn(k, m, device=dev, dtype=torch.bfloat16).t()
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        row = {"kind": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "batch": 1}
        out.append(row | {"seconds": timer(lambda: torch.mm(a, b))})
        if dev.type == "cuda":
            buf = torch.zeros(m, n, device=dev, dtype=torch.float32)
            out.append(row | {"out_bytes": 8, "seconds": timer(
                lambda: torch.addmm(buf, a, b, out_dtype=torch.float32, out=buf))})
        if fp8 and m % 16 == 0 and n % 16 == 0 and k % 16 == 0:
            a8 = a.contiguous().to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()      # cuBLASLt FP8 takes TN layouts only
            one = torch.ones((), device=dev)
            out.append(row | {"dtype": "fp8", "seconds": timer(
                lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))})
    return out


def _attention(torch: Any, dev: Any, timer: Timer, quick: bool) -> list[dict]:
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out = []
    # 16k tokens a case, as a training micro-batch has: smaller calls are bound by the host's launches, which the
    # attention model does not price
    cases = [(1, 4, s, 64) for s in (64, 128)] if quick else [(16384 // s, 32, s, d) for s in (1024, 2048, 4096, 8192)
                                                              for d in (64, 128)]
    for b, h, s, d in cases:
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        fwd = timer(lambda: sdpa(q, k, v, is_causal=True))
        grad = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16)
        bwd = timer(lambda o: o.backward(grad), setup=lambda: sdpa(q, k, v, is_causal=True))
        row = {"kind": "attention", "batch": b, "heads": h, "seq_q": s, "seq_kv": s, "head_dim": d, "causal": True,
               "dtype": "bf16"}
        out += [row | {"direction": "forward", "seconds": fwd}, row | {"direction": "backward", "seconds": bwd}]
    return out


def _elementwise(torch: Any, dev: Any, timer: Timer, quick: bool) -> list[dict]:
    out = []
    for n in ((2**12, 2**16, 2**18) if quick else (2**16, 2**20, 2**24, 2**27)):
        x, y = (torch.randn(n, device=dev, dtype=torch.bfloat16) for _ in range(2))
        rows = torch.randn(n // 1024, 1024, device=dev, dtype=torch.bfloat16)
        w = torch.ones(1024, device=dev, dtype=torch.bfloat16)
        # bytes moved: add reads two and writes one, copy and GELU read one and write one, layer norm reads and
        # writes the rows once (Megatron-LM's fused kernels; the roofline's memory side, Williams et al. 2009)
        for op, nbytes, fn in (("add", 6 * n, lambda: x + y), ("copy", 4 * n, lambda: x.clone()),
                               ("gelu", 4 * n, lambda: torch.nn.functional.gelu(x)),
                               ("layer_norm", 4 * n, lambda: torch.nn.functional.layer_norm(rows, (1024,), w))):
            out.append({"kind": "elementwise", "op": op, "bytes": nbytes, "seconds": timer(fn)})
    return out


def _launch(torch: Any, dev: Any, timer: Timer) -> list[dict]:
    x = torch.zeros(1, device=dev)
    n = 100
    seconds = timer(lambda: [x.add_(1) for _ in range(n)]) / n
    return [{"kind": "launch", "seconds": seconds}]


def _collectives(torch: Any, dev: Any, timer: Timer, quick: bool) -> list[dict]:
    dist = torch.distributed
    world, rank = dist.get_world_size(), dist.get_rank()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    sizes = (2**10, 2**14, 2**18) if quick else tuple(2**p for p in range(10, 31, 2))
    out = []
    # NCCL moves BF16 gradients; gloo (CPU) reduces float32 only
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    size = 2 if dev.type == "cuda" else 4
    for nbytes in sizes:
        n = max(world, nbytes // size // world * world)           # elements, a multiple of the ranks
        x = torch.ones(n, device=dev, dtype=dtype)
        part = torch.empty(n // world, device=dev, dtype=dtype)
        full = torch.empty(n, device=dev, dtype=dtype)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor   # renamed in 2.13
        ops = {"all_reduce": lambda: dist.all_reduce(x),
               "all_gather": lambda: dist.all_gather_into_tensor(full, part),
               "reduce_scatter": lambda: scatter(part, x),
               "all_to_all": lambda: dist.all_to_all_single(full, x)}
        for op, fn in ops.items():
            try:
                dist.barrier()
                seconds = timer(fn)
            except (RuntimeError, NotImplementedError, ValueError):
                continue                                           # e.g. gloo without reduce_scatter
            out.append({"kind": "collective", "op": op, "bytes": size * n, "ranks": world, "per_node": local,
                        "seconds": seconds})
        if world >= 2:
            def sendrecv() -> None:
                if rank == 0:
                    dist.send(x, 1)
                elif rank == 1:
                    dist.recv(x, 0)
            dist.barrier()
            seconds = timer(sendrecv)
            out.append({"kind": "collective", "op": "send_recv", "bytes": size * n, "ranks": 2,
                        "per_node": 2 if local >= 2 else 1, "seconds": seconds})
    return out


def _header(torch: Any, dev: Any, quick: bool, settings: dict) -> dict:
    device: dict[str, Any] = {"type": dev.type, "name": platform.processor() or platform.machine()}
    software = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        device |= {"name": props.name, "count": torch.cuda.device_count(), "capability": list(
            torch.cuda.get_device_capability(dev)), "memory_bytes": props.total_memory,
                   "sm_count": props.multi_processor_count}
        try:
            software["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError, TypeError):
            pass
        device |= _nvml()
    else:
        device["threads"] = torch.get_num_threads()
    return {"schema": SCHEMA, "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": {"hostname": socket.gethostname(), "platform": platform.platform(),
                     "python": platform.python_version()},
            "device": device, "software": software, "settings": settings | {"quick": quick}}


def _nvml() -> dict:
    """Driver version and SM clocks (current and maximum) where NVML is installed."""
    try:
        import pynvml                                                # nvidia-ml-py, optional
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return {"driver": pynvml.nvmlSystemGetDriverVersion(), "clocks": {
            "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_sm_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)}}
    except Exception:                                                # no NVML: the file says less, nothing breaks
        return {}


def run(out: Path, *, model_name: str | None, tps: tuple[int, ...], micro_batches: tuple[int, ...], quick: bool,
        repeats: int = 0) -> Path | None:
    """Time everything and write ``out`` (rank 0 writes under torchrun); the path written, or None on other ranks."""
    torch = _torch()
    shapes = gemm_shapes(model_name, tps, micro_batches, quick)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend)
    if torch.cuda.is_available():
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
        if quick:
            torch.set_num_threads(1)       # a shared CI host: one thread never waits for a descheduled sibling
    timer = Timer(torch, dev, repeats or (7 if quick else 20), 1 if quick else 5)
    fp8 = dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= (8, 9)
    rows: list[dict] = []
    with torch.no_grad():
        rows += _gemms(torch, dev, timer, shapes, fp8)
        rows += _elementwise(torch, dev, timer, quick)
        rows += _launch(torch, dev, timer)
    rows += _attention(torch, dev, timer, quick)
    settings = {"model": model_name, "tp": list(tps), "micro_batch": list(micro_batches),
                "repeats": timer.repeats, "warmup": timer.warmup}
    if distributed:
        rows += _collectives(torch, dev, timer, quick)
        world = torch.distributed.get_world_size()
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        settings["distributed"] = {"world_size": world, "local_world_size": local, "nodes": world // local,
                                   "backend": torch.distributed.get_backend()}
        rank = torch.distributed.get_rank()
        torch.distributed.destroy_process_group()
        if rank != 0:
            return None
    data = _header(torch, dev, quick, settings) | {"measurements": rows}
    write_atomic(out, json.dumps(data, indent=1) + "\n")
    return out
