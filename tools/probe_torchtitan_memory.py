"""GPU probe (needs torch and a CUDA GPU; not run by the tests): bytes torchtitan's activation checkpointing keeps
per Llama-3.1-8B layer, and the peak of its loss, per logit.

The block and the per-op SAC policy are copied from pytorch/torchtitan @9dec370 (parallelisms/parallelize_llama.py
``_save_list`` and ``_apply_ac_to_transformer_block``; models/llama/model.py). One GPU, no FSDP; run with
``python3 tools/probe_torchtitan_memory.py`` (B=2 by default). It checks the closed forms of
``families/transformer/memory.py`` (``op_sac_bytes_per_layer``, ``logit_bytes``); it sets no constant.

Seen on one H200 (this code, its loops then run as two scripts), torch 2.11.0+cu130, B=2, seq 8192 (16384
tokens), bytes kept per token and layer: none 297612 (eager, unfused), op 63616.06 with flash attention forced (op_sac_bytes_per_layer: 63616), 55296 with
cuDNN attention (torch 2.11's default there; not on the @9dec370 save list, so recomputed), full 8192 (= 2h);
loss, bytes per logit: eager held 4.0 after the forward, forward peak 10.0, backward peak 12.0; compiled held 2.0,
backward peak 4.0.
"""
import json
import os
from collections import defaultdict
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, CheckpointPolicy, create_selective_checkpoint_contexts

dev = "cuda"
H, NH, NKV, HD, FF, V = 4096, 32, 8, 128, 14336, 128256
B, S, L = int(os.environ.get("B", 2)), 8192, 4
_save_list = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
              torch.ops.aten._scaled_dot_product_flash_attention.default,
              torch.ops._c10d_functional.reduce_scatter_tensor.default, torch.ops.aten.abs.default,
              torch.ops.aten.max.default}

def policy(meta):
    def _p(ctx, func, *a, **k):
        mode = "recompute" if ctx.is_recompute else "forward"
        key = f"{mode}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        save = func in _save_list and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return _p

class RMSNorm(nn.Module):
    def __init__(s, d): super().__init__(); s.weight = nn.Parameter(torch.ones(d))
    def forward(s, x):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * s.weight

def rope(xq, xk, f):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = f.view(1, xq_.shape[1], 1, xq_.shape[-1])
    return torch.view_as_real(xq_ * f).flatten(3).type_as(xq), torch.view_as_real(xk_ * f).flatten(3).type_as(xk)

class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.wq, s.wk, s.wv = nn.Linear(H, NH * HD, bias=False), nn.Linear(H, NKV * HD, bias=False), nn.Linear(H, NKV * HD, bias=False)
        s.wo = nn.Linear(NH * HD, H, bias=False)
        s.w1, s.w2, s.w3 = nn.Linear(H, FF, bias=False), nn.Linear(FF, H, bias=False), nn.Linear(H, FF, bias=False)
        s.n1, s.n2 = RMSNorm(H), RMSNorm(H)
    def attn(s, x, f):
        b, sl, _ = x.shape
        xq, xk, xv = s.wq(x), s.wk(x), s.wv(x)
        xq, xk, xv = xq.view(b, sl, -1, HD), xk.view(b, sl, -1, HD), xv.view(b, sl, -1, HD)
        xq, xk = rope(xq, xk, f)
        r = NH // NKV
        xk = xk.unsqueeze(3).expand(b, sl, NKV, r, HD).reshape(b, sl, NH, HD)
        xv = xv.unsqueeze(3).expand(b, sl, NKV, r, HD).reshape(b, sl, NH, HD)
        o = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2), is_causal=True)
        return s.wo(o.transpose(1, 2).contiguous().view(b, sl, -1))
    def forward(s, x, f):
        h = x + s.attn(s.n1(x), f)
        return h + s.w2(F.silu(s.w1(s.n2(h))) * s.w3(s.n2(h)))

def run_layers(blocks, x, f, mode):
    for blk in blocks:
        if mode == "none":
            x = blk(x, f)
        elif mode == "full":
            x = checkpoint(blk, x, f, use_reentrant=False, preserve_rng_state=False)
        else:
            meta = defaultdict(int)
            x = checkpoint(blk, x, f, use_reentrant=False, preserve_rng_state=False,
                           context_fn=lambda m=meta: create_selective_checkpoint_contexts(policy(m)))
    return x

out = {"B": B, "S": S, "tokens": B * S, "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
blocks = nn.ModuleList(Block() for _ in range(L)).to(dev, torch.bfloat16)
freqs = torch.polar(torch.ones(S, HD // 2, device=dev), torch.outer(torch.arange(S, device=dev).float(),
        1.0 / (500000 ** (torch.arange(0, HD, 2, device=dev).float() / HD))))
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

for mode in ("none", "op", "op_flash", "full"):
    backends = [SDPBackend.FLASH_ATTENTION] if mode == "op_flash" else [b for b in SDPBackend if b.name != "ERROR"]
    with sdpa_kernel(backends):
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
        x = torch.randn(B, S, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
        y = run_layers(blocks, x, f=freqs, mode=mode[:2] if mode.startswith("op") else mode)
        torch.cuda.synchronize(); kept = torch.cuda.memory_allocated() - base - y.numel() * 2
        fpeak = torch.cuda.max_memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        y.backward(torch.ones_like(y)); torch.cuda.synchronize()
        bpeak = torch.cuda.max_memory_allocated() - base
        out[f"{mode}_bytes_per_token_layer"] = kept / L / (B * S)
        out[f"{mode}_fwd_peak_gib"], out[f"{mode}_bwd_peak_gib"] = fpeak / 2**30, bpeak / 2**30
        del x, y; blocks.zero_grad(set_to_none=True); torch.cuda.empty_cache()
del blocks; torch.cuda.empty_cache()

def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
W = torch.randn(V, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
cfn = torch.compile(loss_fn)
for name, fn in (("eager", loss_fn), ("compiled_first", cfn), ("compiled", cfn)):
    h = torch.randn(B, S, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (B, S), device=dev)
    torch.cuda.synchronize(); base = torch.cuda.memory_allocated(); torch.cuda.reset_peak_memory_stats()
    pred = h @ W.t()
    loss = fn(pred, labels); del pred
    torch.cuda.synchronize(); held = torch.cuda.memory_allocated() - base
    fpk = torch.cuda.max_memory_allocated() - base; torch.cuda.reset_peak_memory_stats()
    loss.backward(); torch.cuda.synchronize()
    bpk = torch.cuda.max_memory_allocated() - base
    n = B * S * V
    out[f"loss_{name}"] = {"held_after_fwd_B_per_logit": held / n, "fwd_peak_B_per_logit": fpk / n,
                           "bwd_peak_B_per_logit": bpk / n}
    del h, loss; W.grad = None; torch.cuda.empty_cache()
print(json.dumps(out, indent=1))
open(os.path.join(os.environ.get("OUT", "."), "probe.json"), "w").write(json.dumps(out, indent=1))
