"""Megatron-Core 0.9's MoE token routing, as NeMo 1.x ran it (alltoall dispatcher, dropless, no fused permute), in
plain PyTorch on one GPU: the router, the permute before the all-to-all, the sort of the gathered tokens into local
experts' order, and the unpermute after it, forward and backward, at Grok-1's shapes on an H100 recipe's plans. No
communication: the all-to-all and the expert-TP all-gather are left out (the model prices them apart).

The ops are core_v0.9.0's (megatron/core/transformer/moe/router.py, moe_utils.py, token_dispatcher.py):
- router: ``x @ W_r^T``, ``topk`` of the logits, ``softmax`` of the top-k in fp32 (post-softmax), the switch
  load-balancing loss (softmax of all logits, token counts per expert), the per-expert counts (``histc``) copied to
  the host (``.cpu()``: the dispatcher's sync);
- permute: ``argsort`` of the flattened expert indices, then ``torch.gather`` with the index expanded to
  [tokens·top_k, hidden] (``moe_gather``; its backward a zero-fill and ``scatter_add_``);
- sort_chunks_by_idxs (only with more than one local expert): ``split`` of the gathered tokens by expert and
  ``cat`` in local-expert order;
- unpermute: zero-fill, ``scatter_add_`` with the expanded index (``moe_scatter``; backward ``gather``), times the
  probabilities, summed over top-k.

Each piece is timed by wall clock over back-to-back calls (CUDA events: what the GPU waited, the host's launches
included) and by its kernels' own GPU time (torch.profiler): on a small routing kernel the host sets the pace.

Run: python benchmarks/device/moe_dispatch.py OUT.json [--cpu]
"""
from __future__ import annotations

import json
import sys

import torch

from cuda_timing import mean_seconds

BF16 = torch.bfloat16
HIDDEN, EXPERTS, TOP_K = 6144, 8, 2
CASES = [  # tokens per GPU after SP and CP (seq 8192 / cp / tp), expert TP, local experts
    (1024, 4, 1), (2048, 4, 1), (2048, 4, 2), (2048, 4, 4), (1024, 4, 2), (1024, 4, 4)]


class Gather(torch.autograd.Function):
    """core_v0.9.0 moe_utils.moe_gather."""

    @staticmethod
    def forward(ctx, input_, map_):
        ctx.input_size, ctx.map = input_.size(), map_
        return torch.gather(input_, 0, map_)

    @staticmethod
    def backward(ctx, grad_output):
        out = torch.zeros(ctx.input_size, dtype=grad_output.dtype, device=grad_output.device)
        out.scatter_add_(0, ctx.map, grad_output)
        return out, None


class Scatter(torch.autograd.Function):
    """core_v0.9.0 moe_utils.moe_scatter."""

    @staticmethod
    def forward(ctx, input_, map_, output_size):
        ctx.map = map_
        out = torch.zeros(output_size, dtype=input_.dtype, device=input_.device)
        out.scatter_add_(0, map_, input_)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        return torch.gather(grad_output, 0, ctx.map), None, None


def router(x, w):
    logits = x @ w.t()
    scores, top = torch.topk(logits, k=TOP_K, dim=1)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    # switch_load_balancing_loss_func: sum over experts of (mean router prob · token share)
    full = torch.softmax(logits, dim=-1, dtype=torch.float32)
    counts = torch.histc(top.float(), bins=EXPERTS, min=0, max=EXPERTS)
    aux = torch.sum(full.sum(dim=0) * counts) * (EXPERTS * 1e-2 / (x.size(0) ** 2 * TOP_K))
    host_counts = counts.cpu()
    return probs, top, aux, host_counts


def permute(x, top):
    flat = top.view(-1)
    sorted_indices = torch.argsort(flat, stable=True)
    index = (sorted_indices // TOP_K).unsqueeze(1).expand(-1, x.size(-1))
    return Gather.apply(x, index), sorted_indices


def sort_chunks(x, sizes, order):
    parts = torch.split(x, sizes, dim=0)
    return torch.cat([parts[i] for i in order], dim=0)


def unpermute(y, sorted_indices, probs):
    index = sorted_indices.unsqueeze(1).expand(-1, y.size(-1))
    out = Scatter.apply(y, index, [probs.numel(), y.size(-1)])
    return (out.reshape(-1, TOP_K, y.size(-1)) * probs.unsqueeze(-1)).sum(dim=1)


def kernel_time(fn, dev: str, n: int = 10) -> tuple[float, float]:
    """GPU seconds of the kernels one call of ``fn`` launches and their count (torch.profiler, mean of ``n``): the
    device's share of a call whose wall time the host's launch rate may set."""
    if dev == "cpu":
        return 0.0, 0.0
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    events = prof.events()
    on_device = [e for e in events if e.device_type.name == "CUDA"]
    if on_device:
        return sum(e.device_time for e in on_device) / 1e6 / n, len(on_device) / n
    launched = [k for e in events for k in e.kernels]
    return sum(k.duration for k in launched) / 1e6 / n, len(launched) / n


def measure(tokens: int, etp: int, local: int, dev: str) -> dict:
    x = torch.randn(tokens, HIDDEN, device=dev, dtype=BF16, requires_grad=True)
    w = (torch.randn(EXPERTS, HIDDEN, device=dev, dtype=BF16) * 0.02).requires_grad_()
    gathered = torch.randn(etp * tokens * TOP_K, HIDDEN, device=dev, dtype=BF16, requires_grad=True)
    # the gathered tokens arrive ordered by source rank then expert: ep·etp chunks, re-sorted into local experts
    chunks = etp * local
    sizes = [gathered.size(0) // chunks] * chunks
    order = [r * local + e for e in range(local) for r in range(etp)]
    probs0, top0, _, _ = router(x.detach(), w.detach())
    y = torch.randn(tokens * TOP_K, HIDDEN, device=dev, dtype=BF16, requires_grad=True)
    g_x = torch.randn(tokens * TOP_K, HIDDEN, device=dev, dtype=BF16)
    g_out = torch.randn(tokens, HIDDEN, device=dev, dtype=BF16)

    def router_step(backward: bool):
        x.grad = w.grad = None
        probs, top, aux, _ = router(x, w)
        if backward:
            torch.autograd.backward([probs, aux], [torch.ones_like(probs), torch.ones_like(aux)])

    def permute_step(backward: bool):
        x.grad = None
        out, _ = permute(x, top0)
        if backward:
            out.backward(g_x)

    g_sorted = torch.randn_like(gathered)

    def sort_step(backward: bool):
        gathered.grad = None
        out = sort_chunks(gathered, sizes, order)
        if backward:
            out.backward(g_sorted)

    _, sorted0 = permute(x.detach(), top0)

    def unpermute_step(backward: bool):
        y.grad = None
        out = unpermute(y, sorted0, probs0)
        if backward:
            out.backward(g_out)

    row = {"tokens": tokens, "etp": etp, "local_experts": local, "hidden": HIDDEN, "experts": EXPERTS, "top_k": TOP_K}
    for name, fn in (("router", router_step), ("permute", permute_step), ("unpermute", unpermute_step)) + (
            (("sort_chunks", sort_step),) if local > 1 else ()):
        row[name + "_fwd_s"] = mean_seconds(lambda: fn(False), cuda=dev == "cuda")
        row[name + "_fwd_bwd_s"] = mean_seconds(lambda: fn(True), cuda=dev == "cuda")
        row[name + "_fwd_bwd_kernel_s"], row[name + "_fwd_bwd_kernels"] = kernel_time(lambda: fn(True), dev)
    return row


def main() -> None:
    dev = "cpu" if "--cpu" in sys.argv or not torch.cuda.is_available() else "cuda"
    cases = CASES[:1] if dev == "cpu" else CASES
    rows = []
    for case in cases:
        rows.append(measure(*case, dev=dev))
        print(json.dumps(rows[-1]), flush=True)
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    with open(sys.argv[1], "w") as out:
        json.dump(dict(gpu=name, torch=torch.__version__, rows=rows), out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
