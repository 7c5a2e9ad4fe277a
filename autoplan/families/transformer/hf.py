"""A model from a HuggingFace ``config.json`` (``--model path/to/config.json``, or the folder holding it).

Reads the architectures autoplan can cost: Llama, Mistral, Qwen2/3 (dense), GPT-2, GPT-NeoX, and the MoE and
MLA models Mixtral, Qwen3-MoE and DeepSeek-V2/V3, whose expert and latent-attention fields map to ModelSpec's
MoE fields (``MOE_FIELDS``, ``MLA_FIELDS``; a model with experts is costed by the ``moe`` family). Field meanings: the ``transformers`` configuration
classes (``LlamaConfig``, ``MixtralConfig``, ``DeepseekV3Config``, ``GPT2Config``, ``GPTNeoXConfig`` docs).

Not modelled, and so ignored: rope_theta and the RoPE scaling itself (only its pre-training length is read),
sliding_window, Qwen2's QKV bias and Qwen3's QK norm, GPT-NeoX's parallel residual and partial rotary, router
details (groups, scoring, aux losses). DeepSeek-V3's multi-token-prediction depth (num_nextn_predict_layers) is
``mtp_layers``.
"""

from __future__ import annotations

from autoplan.specs.files import excerpt, read_json
from pathlib import Path
from typing import Any

from autoplan.errors import SpecError
from autoplan.specs.model import ModelSpec

MOE_FIELDS = ("experts", "top_k", "moe_ffn_hidden", "shared_experts", "dense_layers", "capacity_factor")
"""ModelSpec fields of a mixture-of-experts model."""
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")
"""ModelSpec fields of DeepSeek's multi-head latent attention."""

_LLAMA_LIKE = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3")
"""Decoder-only models with Llama's layer: RMSNorm, RoPE, a gated (SwiGLU) MLP, no biases."""
MODEL_TYPES = _LLAMA_LIKE + ("gpt2", "gpt_neox")
"""The ``model_type`` values this reader maps."""
_GATED_ACTS = ("silu", "swish")
_GELU_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "quick_gelu")


class _Config:
    """The keys of one config.json: typed reads whose errors name the file and the key."""

    def __init__(self, data: dict, path: Path) -> None:
        self.data, self.path = data, path

    def fail(self, message: str) -> SpecError:
        return SpecError(f"HF config {str(self.path)!r}: {message}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def count(self, *keys: str, default: int | None = None, zero_ok: bool = False) -> int:
        """The first of ``keys`` present (a JSON null counts as absent), as a positive integer."""
        for key in keys:
            if self.has(key):
                value = self.data[key]
                if not isinstance(value, int) or isinstance(value, bool) or value < (0 if zero_ok else 1):
                    raise self.fail(f"{key} must be a {'non-negative' if zero_ok else 'positive'} integer, "
                                    f"got {excerpt(value)}")
                return value
        if default is None:
            raise self.fail(f"missing key {' or '.join(keys)}")
        return default

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{key} must be true or false, got {excerpt(value)}")
        return value

    def text(self, key: str, default: str) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise self.fail(f"{key} must be a string, got {excerpt(value)}")
        return value


def read_config(path: Path) -> dict:
    """The JSON object of a config.json; a missing, unreadable or malformed file is a one-line SpecError."""
    data = read_json(path, "HF config")
    if not isinstance(data, dict):
        raise SpecError(f"HF config {str(path)!r} must hold a JSON object, got {type(data).__name__}")
    return data


def _model_type(c: _Config) -> str:
    kind = c.text("model_type", "")
    if kind not in MODEL_TYPES:
        arch = c.data.get("architectures")
        arch = f" ({str(arch[0])[:60]})" if isinstance(arch, list) and arch else ""
        shown = (f"model_type {excerpt(kind)}{arch} is not one autoplan reads" if kind
                 else f"it gives no model_type{arch}")
        raise c.fail(f"{shown}; supported: {', '.join(MODEL_TYPES)}")
    return kind


def _seq_len(c: _Config, *keys: str) -> int:
    """The pre-training sequence length: before RoPE scaling stretched the context if it did, else the context."""
    # Llama 3.1 and DeepSeek-V3 keep their pre-training length in rope_scaling.original_max_position_embeddings
    # (8192 and 4096; transformers rope_utils, "llama3" and "yarn" rope types) and give the extended context
    # (131072, 163840) as max_position_embeddings
    scaling = c.data.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("original_max_position_embeddings") is not None:
        return _Config(scaling, c.path).count("original_max_position_embeddings")
    context = c.count(*keys)
    return context if context <= LONG_CONTEXT else PRETRAIN_SEQ


LONG_CONTEXT = 32768
"""The longest context taken as a config's pre-training length (Mixtral pre-trains at 32K, Jiang et al. 2024 §2)."""
PRETRAIN_SEQ = 8192
"""The sequence length planned for a longer context without rope_scaling: models pre-train at 4K-8K tokens and reach
a long context in a short last stage with context parallelism (Llama 3: 8,192, then 128K over the last 800B tokens,
Dubey et al. 2024 §3.4; Qwen2.5: 4,096, then 32,768, Qwen Team 2024 §4), so a 131,072-token
max_position_embeddings says nothing of the pre-training length. ``--seq-len`` sets any length."""


def _activation(c: _Config, kind: str) -> str:
    act = c.text("hidden_act", c.text("activation_function", "silu" if kind in _LLAMA_LIKE else "gelu"))
    if kind in _LLAMA_LIKE and act in _GATED_ACTS:
        return "swiglu"                  # Llama's MLP: down(silu(gate(x)) · up(x)) (Shazeer 2020, arXiv 2002.05202)
    if kind not in _LLAMA_LIKE and act in _GELU_ACTS:
        return "gelu"
    raise c.fail(f"hidden_act {excerpt(act)} with model_type {excerpt(kind)} is not an MLP autoplan models "
                 f"({'silu' if kind in _LLAMA_LIKE else 'gelu'} is)")


def _dense(c: _Config, kind: str) -> dict[str, Any]:
    """The dense transformer's ModelSpec fields."""
    if kind == "gpt2":
        hidden = c.count("n_embd", "hidden_size")
        dropout = any(isinstance(c.data.get(k), (int, float)) and c.data[k] > 0
                      for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"))
        # GPT-2 (Radford et al. 2019): learned positions, LayerNorm, biases everywhere, tied output, 4h MLP
        return dict(layers=c.count("n_layer", "num_hidden_layers"), hidden=hidden,
                    heads=c.count("n_head", "num_attention_heads"), ffn_hidden=c.count("n_inner", default=4 * hidden),
                    vocab=c.count("vocab_size"), seq_len=c.count("n_positions", "max_position_embeddings"),
                    activation=_activation(c, kind), position="learned", norm="layernorm", bias=True,
                    tied_embeddings=c.flag("tie_word_embeddings", True), dropout=dropout)
    norm = "rmsnorm" if c.has("rms_norm_eps") or kind in _LLAMA_LIKE else "layernorm"
    if kind == "gpt_neox":
        # GPT-NeoX (Black et al. 2022): rotary positions, LayerNorm, biased linears, untied output
        bias, tied, drop = c.flag("attention_bias", True), c.flag("tie_word_embeddings", False), "hidden_dropout"
    else:
        # Llama-style layers have no biases (attention_bias / mlp_bias false); Qwen2's QKV bias is not modelled
        bias = c.flag("attention_bias", False) and c.flag("mlp_bias", False)
        tied, drop = c.flag("tie_word_embeddings", False), "attention_dropout"
    rate = c.data.get(drop, 0.0)
    # transformers' Qwen3Attention / Qwen3MoeAttention: q_norm and k_norm (RMSNorm over head_dim) on every layer
    qk = {"qk_norm": True} if kind in ("qwen3", "qwen3_moe") else {}
    return qk | dict(layers=c.count("num_hidden_layers"), hidden=c.count("hidden_size"),
                heads=c.count("num_attention_heads"), kv_heads=c.count("num_key_value_heads", default=0),
                head_dim=c.count("head_dim", default=0), ffn_hidden=c.count("intermediate_size"),
                vocab=c.count("vocab_size"), seq_len=_seq_len(c, "max_position_embeddings"),
                activation=_activation(c, kind), position="rope", norm=norm, bias=bias, tied_embeddings=tied,
                dropout=isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0)


def _moe(c: _Config, kind: str) -> dict[str, Any]:
    """The MoE and MLA fields (empty for a dense model)."""
    out: dict[str, Any] = {}
    experts = c.count("num_local_experts", "n_routed_experts", "num_experts", default=0, zero_ok=True)
    if experts:
        # Mixtral's experts are intermediate_size wide (Jiang et al. 2024, arXiv 2401.04088 Table 1); DeepSeek's
        # and Qwen-MoE's are moe_intermediate_size, their dense layers intermediate_size (arXiv 2412.19437 §4.2)
        out.update(experts=experts, top_k=c.count("num_experts_per_tok"),
                   moe_ffn_hidden=c.count("moe_intermediate_size", "intermediate_size"),
                   shared_experts=c.count("n_shared_experts", default=0, zero_ok=True),
                   dense_layers=c.count("first_k_dense_replace", default=0, zero_ok=True),
                   # DeepseekV3Config num_nextn_predict_layers: the MTP depth D (arXiv 2412.19437 §2.2)
                   mtp_layers=c.count("num_nextn_predict_layers", default=0, zero_ok=True),
                   capacity_factor=0.0)           # dropless routing (Megablocks; DeepSeek-V3 drops no tokens, §3.2)
        groups = c.count("n_group", default=1, zero_ok=True)
        if kind == "deepseek_v3" and groups > 1:
            # DeepSeek-V3 (arXiv 2412.19437) §2.1.2, §3.2.2: its n_group expert groups are the nodes and a token
            # reaches topk_group of them (4 of 8: node-limited routing, M = 4); DeepSeek-V2's groups are devices
            out.update(route_nodes=min(c.count("topk_group", default=groups), groups))
    if c.has("kv_lora_rank"):
        # DeepSeek-V2 (arXiv 2405.04434) §2.1 MLA: the non-rotary query/key width is the head width
        out.update(q_lora_rank=c.count("q_lora_rank", default=0, zero_ok=True), kv_lora_rank=c.count("kv_lora_rank"),
                   qk_rope_head_dim=c.count("qk_rope_head_dim"), v_head_dim=c.count("v_head_dim"),
                   head_dim=c.count("qk_nope_head_dim"))
    return out


def config_fields(data: dict, path: Path | str = "config.json") -> dict[str, Any]:
    """ModelSpec keyword arguments of a parsed config.json (MoE and MLA fields included), without name or source."""
    c = _Config(data, Path(path))
    kind = _model_type(c)
    return {**_dense(c, kind), **_moe(c, kind)}


def _name(path: Path) -> str:
    """``llama-3.1-8b`` for ``.../llama-3.1-8b/config.json``; the file's stem for any other name."""
    return path.parent.name if path.name == "config.json" and path.parent.name else path.stem


def load_hf_model(path: Path | str) -> ModelSpec:
    """A ModelSpec from a HuggingFace config.json (or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    data = read_config(path)
    kw = config_fields(data, path)
    arch = data.get("architectures")
    arch = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else data["model_type"]
    source = f"HF config.json {str(path)!r} ({arch})"
    given = data.get("max_position_embeddings")
    if isinstance(given, int) and given > kw["seq_len"] and not isinstance(data.get("rope_scaling"), dict):
        source += (f"; seq {kw['seq_len']:,} of its {given:,}-token context (pre-training length, "
                   "autoplan/families/transformer/hf.py PRETRAIN_SEQ; --seq-len to change)")
    try:
        return ModelSpec(name=_name(path), source=source, **kw)
    except SpecError as err:
        raise SpecError(f"HF config {str(path)!r}: {err}") from None
