"""One transformer layer forward+backward in eager PyTorch (BF16, SDPA attention), at the shapes of one TP shard on
one GPU (no communication): the layer's time, and its GEMMs and attention core timed alone (CUDA events, the mean of
20 after 5 warm-ups), each step's gradients written anew (``.grad`` cleared), and an 8192³ GEMM's rate before and
after the layers (the clock the GPU ran at). Needs a CUDA GPU; what it wrote on an H100 and an H200 is in
cluster_specs/calibration/ (*-layer-steps.json), compared with autoplan's layer model by
benchmarks/bench_layer_steps.py.

Run: python benchmarks/device/layer_step.py OUT.json [--compile]
(--compile: the layer under torch.compile, which fuses the norms, activations and residual adds as Transformer
Engine's kernels do; the GEMMs and attention stay cuBLAS and SDPA)
"""
import json
import sys

import torch

from cuda_timing import graph_seconds, mean_seconds

F = torch.nn.functional
DEV = "cuda"
BF16 = torch.bfloat16
CASES = [  # model, hidden, heads, kv heads, ffn, sequence, tp, micro-batch, swiglu
    ("gpt3", 12288, 96, 96, 49152, 2048, 8, 1, False), ("gpt3", 12288, 96, 96, 49152, 2048, 4, 1, False),
    ("gpt3", 12288, 96, 96, 49152, 2048, 4, 2, False), ("llama3-8b", 4096, 32, 8, 14336, 8192, 1, 1, True),
    ("llama3-70b", 8192, 64, 8, 28672, 8192, 8, 1, True), ("llama3-70b", 8192, 64, 8, 28672, 4096, 4, 1, True)]


def weight(*shape: int) -> torch.Tensor:
    return (torch.randn(*shape, device=DEV, dtype=BF16) * 0.02).requires_grad_()


def measure(name: str, h: int, heads: int, kv: int, ffn: int, seq: int, tp: int, mb: int, swiglu: bool,
            compiled: bool = False, graphed: bool = False) -> dict:
    """One layer of a TP shard (heads/tp, ffn/tp) forward and forward+backward, its GEMMs alone (forward, dgrad,
    wgrad of the four linear layers) and its attention core alone (``graphed``: each replayed as a CUDA graph, the
    GPU's time without the host's launches)."""
    seconds = graph_seconds if graphed else mean_seconds
    hd, hq, hk, f, tokens = h // heads, heads // tp, max(kv // tp, 1), ffn // tp, seq * mb
    fc1_out = f * (2 if swiglu else 1)
    wqkv, wo, w1, w2 = weight((hq + 2 * hk) * hd, h), weight(h, hq * hd), weight(fc1_out, h), weight(h, f)
    x = torch.randn(mb, seq, h, device=DEV, dtype=BF16, requires_grad=True)

    def layer() -> torch.Tensor:
        q, k, v = F.linear(F.layer_norm(x, (h,)), wqkv).split([hq * hd, hk * hd, hk * hd], -1)
        q, k, v = (t.view(mb, seq, -1, hd).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != hq)
        z = x + F.linear(a.transpose(1, 2).reshape(mb, seq, hq * hd), wo)
        u = F.linear(F.layer_norm(z, (h,)), w1)
        u = F.silu(u[..., :f]) * u[..., f:] if swiglu else F.gelu(u)
        return z + F.linear(u, w2)

    if compiled:
        layer = torch.compile(layer, dynamic=False)
    grad = torch.randn(mb, seq, h, device=DEV, dtype=BF16)

    def fresh_step() -> None:
        # each step's gradients written anew, as Megatron's wgrad GEMMs accumulate in place: autograd would add
        # them into the last step's .grad (3 x 2 bytes per weight and input element of extra HBM traffic)
        for t in (x, wqkv, wo, w1, w2):
            t.grad = None
        layer().backward(grad)

    forward, step = seconds(layer), seconds(fresh_step)
    gemms = 0.0
    for n, k in (((hq + 2 * hk) * hd, h), (h, hq * hd), (fc1_out, h), (h, f)):
        a = torch.randn(tokens, k, device=DEV, dtype=BF16)
        b = torch.randn(k, n, device=DEV, dtype=BF16)
        g = torch.randn(tokens, n, device=DEV, dtype=BF16)
        gemms += seconds(lambda: a @ b) + seconds(lambda: g @ b.t()) + seconds(lambda: a.t() @ g)
    q = torch.randn(mb, hq, seq, hd, device=DEV, dtype=BF16, requires_grad=True)
    k, v = (torch.randn(mb, hk, seq, hd, device=DEV, dtype=BF16, requires_grad=True) for _ in range(2))
    go = torch.randn(mb, hq, seq, hd, device=DEV, dtype=BF16)

    def attention_step() -> None:
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != hq).backward(go)

    attention = seconds(attention_step)
    flops = 2 * 3 * tokens * h * ((hq + 2 * hk) * hd + hq * hd + f * (3 if swiglu else 2))
    return dict(model=name, hidden=h, heads=heads, ffn=ffn, swiglu=swiglu, tp=tp, mb=mb, seq=seq,
                compiled=compiled, graphed=graphed, grads_cleared=True, layer_fwd_s=forward,
                layer_fwd_bwd_s=step,
                gemms_alone_s=gemms, attention_fwd_bwd_alone_s=attention, gemm_tflops=flops / gemms / 1e12)


def reference_tflops(size: int = 8192) -> float:
    """BF16 TFLOP/s of a size³ GEMM: the clock the GPU ran at, read through cuBLAS (the file records it before and
    after the layers)."""
    a, b = torch.randn(size, size, device=DEV, dtype=BF16), torch.randn(size, size, device=DEV, dtype=BF16)
    return 2 * size**3 / mean_seconds(lambda: a @ b) / 1e12


def main() -> None:
    compiled = "--compile" in sys.argv[2:]
    rows = []
    before = reference_tflops()
    for case in CASES:
        rows.append(measure(*case, compiled=compiled))
        print(json.dumps(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    with open(sys.argv[1], "w") as out:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                       reference_gemm_tflops=dict(before=before, after=reference_tflops()), rows=rows), out, indent=1)


if __name__ == "__main__":
    main()
