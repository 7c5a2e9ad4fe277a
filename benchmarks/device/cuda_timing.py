"""Timing shared by the device scripts (layer_step.py, kernel_times.py, moe_dispatch.py): seconds of back-to-back
calls, by CUDA events around the whole batch on a GPU (what the GPU spent, the host's launches included where they
bind), by the wall clock on a CPU (the scripts' smoke tests)."""
from __future__ import annotations

import time

import torch


def batch_seconds(fn, n: int, cuda: bool = True) -> float:
    """Seconds of ``n`` back-to-back calls of ``fn``."""
    if not cuda:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def mean_seconds(fn, n: int = 20, warmup: int = 5, cuda: bool = True) -> float:
    """Mean seconds of ``fn`` over ``n`` back-to-back calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    return batch_seconds(fn, n, cuda) / n


def graph_seconds(fn, n: int = 50, warmup: int = 3) -> float:
    """Mean seconds of one replay of ``fn`` captured as a CUDA graph: the GPU's time alone, no host launches
    (PyTorch "CUDA Graphs" notes: warm-up on a side stream, then capture; gradients that are None at capture are
    written anew by every replay)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return mean_seconds(graph.replay, n, warmup)
