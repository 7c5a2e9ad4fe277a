"""The built-in transformers: GPT sizes of the Megatron-LM papers, Llama 3, Nemotron-4, BLOOM, OPT, and the
mixture-of-experts models (Mixtral, DeepSeek-V3, Qwen3, GPT-OSS)."""

from __future__ import annotations

from autoplan.specs.model import ModelSpec

_GPT = dict(vocab=51200, seq_len=2048, activation="gelu", position="learned", norm="layernorm", bias=True,
            tied_embeddings=True)
_SC21 = "Narayanan et al., SC'21 (arXiv 2104.04473), Table 1"
_SP22 = "Korthikanti et al. 2022 (arXiv 2205.05198), Table 3"
_LLAMA3 = dict(vocab=128256, seq_len=8192, kv_heads=8, activation="swiglu", position="rope", norm="rmsnorm",
               bias=False, tied_embeddings=False, dropout=False)


def _gpt(name: str, layers: int, hidden: int, heads: int, source: str, **kw: object) -> ModelSpec:
    return ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, source=source,
                     **{**_GPT, **kw})


_DENSE: tuple[ModelSpec, ...] = (
    _gpt("gpt-1.7b", 24, 2304, 24, _SC21),
    _gpt("gpt-3.6b", 30, 3072, 32, _SC21),
    _gpt("gpt-7.5b", 36, 4096, 32, _SC21),
    _gpt("gpt-18.4b", 40, 6144, 48, _SC21),
    _gpt("gpt-22b", 48, 6144, 64, _SP22),
    _gpt("gpt-39.1b", 48, 8192, 64, _SC21),
    _gpt("gpt-76.1b", 60, 10240, 80, _SC21),
    _gpt("gpt-145.6b", 80, 12288, 96, _SC21),
    _gpt("gpt3-175b", 96, 12288, 96, f"Brown et al. 2020 (GPT-3), Table 2.1; {_SP22}"),
    _gpt("gpt-310.1b", 96, 16384, 128, _SC21),
    _gpt("gpt-530b", 105, 20480, 128, f"{_SC21} (529.6B); {_SP22}; same shape as MT-NLG 530B"),
    _gpt("gpt-1t", 128, 25600, 160, f"{_SC21} (1008B); {_SP22}"),
    ModelSpec(name="llama3-8b", layers=32, hidden=4096, heads=32, ffn_hidden=14336,
              source="Llama 3 herd paper (arXiv 2407.21783), Table 3; HF meta-llama/Meta-Llama-3.1-8B config.json",
              **_LLAMA3),
    ModelSpec(name="llama3-70b", layers=80, hidden=8192, heads=64, ffn_hidden=28672,
              source="Llama 3 herd paper (arXiv 2407.21783), Table 3; HF meta-llama/Meta-Llama-3.1-70B config.json",
              **_LLAMA3),
    ModelSpec(name="llama3-405b", layers=126, hidden=16384, heads=128, ffn_hidden=53248,
              source="Llama 3 herd paper (arXiv 2407.21783), Table 3; HF meta-llama/Meta-Llama-3.1-405B config.json",
              **_LLAMA3),
    ModelSpec(name="nemotron4-340b", layers=96, hidden=18432, heads=96, kv_heads=8, ffn_hidden=73728, vocab=256000,
              seq_len=4096, activation="relu2", position="rope", norm="layernorm", bias=False,
              tied_embeddings=False, dropout=False, source="Nemotron-4 340B technical report (arXiv 2406.11704), Table 1"),
    ModelSpec(name="bloom-176b", layers=70, hidden=14336, heads=112, ffn_hidden=57344, vocab=250880, seq_len=2048,
              activation="gelu", position="alibi", norm="layernorm", bias=True, tied_embeddings=True,
              source="BLOOM paper (arXiv 2211.05100), Table 3; HF bigscience/bloom config.json"),
    ModelSpec(name="opt-175b", layers=96, hidden=12288, heads=96, ffn_hidden=49152, vocab=50272, seq_len=2048,
              activation="gelu", position="learned", norm="layernorm", bias=True, tied_embeddings=True,
              source="Zhang et al. 2022 (OPT, arXiv 2205.01068), Table 1"),
)


_MOE = dict(activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False, dropout=False)
_MOE_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000,
              seq_len=4096, experts=8, top_k=2, moe_ffn_hidden=14336,
              source="Jiang et al. 2024 (Mixtral of Experts, arXiv 2401.04088), Table 1 (46.7B total, 12.9B active); "
                     "HF mistralai/Mixtral-8x7B-v0.1 config.json; seq_len 4096 as NeMo's Mixtral recipes", **_MOE),
    ModelSpec(name="mixtral-8x22b", layers=56, hidden=6144, heads=48, kv_heads=8, ffn_hidden=16384, vocab=32768,
              seq_len=4096, experts=8, top_k=2, moe_ffn_hidden=16384,
              source="Mistral AI, Mixtral 8x22B announcement (141B total, 39B active); HF "
                     "mistralai/Mixtral-8x22B-v0.1 config.json; seq_len 4096 as NeMo's Mixtral recipes", **_MOE),
    ModelSpec(name="deepseek-v3", layers=61, hidden=7168, heads=128, head_dim=128, ffn_hidden=18432, vocab=129280,
              seq_len=4096, experts=256, top_k=8, moe_ffn_hidden=2048, shared_experts=1, dense_layers=3,
              q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128, route_nodes=4,
              mtp_layers=1,
              source="DeepSeek-V3 technical report (arXiv 2412.19437) §4.2 (671B total, 37B active, 4K pre-training "
                     "length); HF deepseek-ai/DeepSeek-V3 config.json (topk_group 4 of n_group 8: node-limited "
                     "routing to M = 4 nodes, §2.1.2, §3.2.2); multi-token prediction depth 1 (§2.2, §4.2: one "
                     "more MoE block and projection on the last stage, sharing embedding and head; "
                     "num_nextn_predict_layers 1; its 14B are beside the 671B)", **_MOE),
    ModelSpec(name="qwen3-30b-a3b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144,
              vocab=151936, seq_len=4096, experts=128, top_k=8, moe_ffn_hidden=768, qk_norm=True,
              source="Qwen3 technical report (arXiv 2505.09388), Table 2 (30.5B total, 3.3B active); HF "
                     "Qwen/Qwen3-30B-A3B config.json; per-head q/k norms (qk_norm; 128 weights "
                     "each, not counted)", **_MOE),
    ModelSpec(name="qwen3-235b-a22b", layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn_hidden=12288,
              vocab=151936, seq_len=4096, experts=128, top_k=8, moe_ffn_hidden=1536, qk_norm=True,
              source="Qwen3 technical report (arXiv 2505.09388), Table 2 (235B total, 22B active); HF "
                     "Qwen/Qwen3-235B-A22B config.json; per-head q/k norms (qk_norm; 128 weights "
                     "each, not counted)", **_MOE),
    ModelSpec(name="gpt-oss-120b", layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880,
              vocab=201088, seq_len=4096, experts=128, top_k=4, moe_ffn_hidden=2880,
              source="OpenAI gpt-oss model card (arXiv 2508.10925), Table 1 (116.8B total, 5.1B active); HF "
                     "openai/gpt-oss-120b config.json (sliding_window 128 on every other layer, swiglu_limit 7.0); "
                     "Megatron-Bridge GPTOSSProvider (window_size (128, 0), window_attn_skip_freq 2, "
                     "activation_func_clamp_value 7.0); attention sinks are costed as plain softmax",
              window=128, window_layers=18, glu_clamp=7.0, **{**_MOE, "bias": True}),
)

MODELS: tuple[ModelSpec, ...] = _DENSE + _MOE_MODELS
"""Every built-in transformer, dense first, smallest first."""

ALIASES = {
    "gpt3": "gpt3-175b", "gpt-175b": "gpt3-175b", "gpt3-175B": "gpt3-175b", "mt-nlg-530b": "gpt-530b",
    "gpt-529.6b": "gpt-530b", "gpt-1008b": "gpt-1t", "llama3.1-8b": "llama3-8b", "llama3.1-70b": "llama3-70b",
    "llama3.1-405b": "llama3-405b", "nemotron-4-340b": "nemotron4-340b", "bloom": "bloom-176b",
    "mixtral": "mixtral-8x7b", "deepseek-v3-671b": "deepseek-v3", "qwen3-235b": "qwen3-235b-a22b",
    "qwen3-30b": "qwen3-30b-a3b", "gpt-oss": "gpt-oss-120b",
}
"""Short names accepted for these models."""
