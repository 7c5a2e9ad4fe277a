"""One transformer layer forward+backward in eager PyTorch (BF16, SDPA attention), at the shapes of one TP shard on
one GPU (no communication): the layer's time, and its GEMMs and attention core timed alone (CUDA events, the mean of
20 after 5 warm-ups). Needs a CUDA GPU; what it wrote on an H100 and an H200 is in cluster_specs/calibration/
(*-layer-steps.json), compared with autoplan's layer model by benchmarks/bench_layer_steps.py.

Run: python benchmarks/device/layer_step.py OUT.json
"""
import json, sys, torch
F = torch.nn.functional
dev = "cuda"
def t(fn, n=20, w=5):
    for _ in range(w): fn()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    torch.cuda.synchronize(); s.record()
    for _ in range(n): fn()
    e.record(); e.synchronize(); return s.elapsed_time(e) / n / 1e3
out = []
for name, h, heads, kv, ffn, seq, tp, mb, swiglu in [
        ("gpt3", 12288, 96, 96, 49152, 2048, 8, 1, False), ("gpt3", 12288, 96, 96, 49152, 2048, 4, 1, False),
        ("gpt3", 12288, 96, 96, 49152, 2048, 4, 2, False), ("llama3-8b", 4096, 32, 8, 14336, 8192, 1, 1, True),
        ("llama3-70b", 8192, 64, 8, 28672, 8192, 8, 1, True), ("llama3-70b", 8192, 64, 8, 28672, 4096, 4, 1, True)]:
    hd = h // heads; hq, hk = heads // tp, max(kv // tp, 1); f = ffn // tp; T = seq * mb
    P = lambda *s: torch.randn(*s, device=dev, dtype=torch.bfloat16, requires_grad=True) * 0.02
    wqkv = P((hq + 2 * hk) * hd, h).detach().requires_grad_(); wo = P(h, hq * hd).detach().requires_grad_()
    w1 = P(f * (2 if swiglu else 1), h).detach().requires_grad_(); w2 = P(h, f).detach().requires_grad_()
    x = torch.randn(mb, seq, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    def layer():
        y = F.layer_norm(x, (h,))
        q, k, v = F.linear(y, wqkv).split([hq * hd, hk * hd, hk * hd], -1)
        q = q.view(mb, seq, hq, hd).transpose(1, 2); k = k.view(mb, seq, hk, hd).transpose(1, 2)
        v = v.view(mb, seq, hk, hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != hq)
        z = x + F.linear(a.transpose(1, 2).reshape(mb, seq, hq * hd), wo)
        u = F.linear(F.layer_norm(z, (h,)), w1)
        u = F.silu(u[..., :f]) * u[..., f:] if swiglu else F.gelu(u)
        return z + F.linear(u, w2)
    g = torch.randn(mb, seq, h, device=dev, dtype=torch.bfloat16)
    fwd = t(lambda: layer())
    step = t(lambda: layer().backward(g))
    gem = 0.0
    for n_, k_ in (((hq + 2 * hk) * hd, h), (h, hq * hd), (f * (2 if swiglu else 1), h), (h, f)):
        A = torch.randn(T, k_, device=dev, dtype=torch.bfloat16); B = torch.randn(k_, n_, device=dev, dtype=torch.bfloat16)
        Gm = torch.randn(T, n_, device=dev, dtype=torch.bfloat16)
        gem += t(lambda: A @ B) + t(lambda: Gm @ B.t()) + t(lambda: A.t() @ Gm)
    qq = torch.randn(mb, hq, seq, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
    kk = torch.randn(mb, hk, seq, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
    vv = torch.randn(mb, hk, seq, hd, device=dev, dtype=torch.bfloat16, requires_grad=True)
    go = torch.randn(mb, hq, seq, hd, device=dev, dtype=torch.bfloat16)
    att = t(lambda: F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=hk != hq).backward(go))
    flops = 2 * 3 * T * h * ((hq + 2 * hk) * hd + hq * hd + f * (3 if swiglu else 2))
    r = dict(model=name, tp=tp, mb=mb, seq=seq, layer_fwd_s=fwd, layer_fwd_bwd_s=step, gemms_alone_s=gem,
             attention_fwd_bwd_alone_s=att, gemm_tflops=flops / gem / 1e12)
    out.append(r); print(json.dumps(r), flush=True)
    del wqkv, wo, w1, w2, x, A, B, Gm; torch.cuda.empty_cache()
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=out), open(sys.argv[1], "w"), indent=1)
