"""ModelSpec: the shape of a dense decoder-only transformer, its parameter count and FLOPs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoplan.errors import SpecError
from autoplan.specs.files import excerpt
from autoplan.specs.hashing import cache_hash

MOE_COUNTS = ("experts", "top_k", "moe_ffn_hidden", "shared_experts", "dense_layers", "q_lora_rank", "kv_lora_rank",
              "qk_rope_head_dim", "v_head_dim", "route_nodes", "mtp_layers")
"""Mixture-of-experts and multi-head-latent-attention counts (0: not used)."""
SIZES = ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")
"""The shape fields a model must give (positive integers)."""
MAX_SIZE = 2**24
"""Largest accepted value of a shape field (16.7 million): far beyond any model, small enough that every
product of sizes the cost models form stays a finite float."""
ACTIVATIONS = ("gelu", "swiglu", "relu2")
POSITIONS = ("learned", "rope", "alibi")
NORMS = ("layernorm", "rmsnorm")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@cache_hash
@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A dense decoder-only transformer. Sizes are counts; bytes and seconds live elsewhere."""

    name: str
    """Catalog name, e.g. ``gpt3-175b``."""
    layers: int
    """Number of transformer layers (l)."""
    hidden: int
    """Model width (h)."""
    heads: int
    """Attention (query) heads (a)."""
    ffn_hidden: int
    """Width of the MLP's hidden layer (4h for GPT)."""
    vocab: int
    """Vocabulary size (V), before any padding."""
    seq_len: int
    """Training sequence length (s)."""
    kv_heads: int = 0
    """Key/value heads for grouped-query attention; 0 means ``heads`` (multi-head attention)."""
    head_dim: int = 0
    """Width of one head; 0 means ``hidden // heads``."""
    activation: str = "gelu"
    """MLP activation: ``gelu`` or ``relu2`` (two matrices) or ``swiglu`` (three, gated)."""
    position: str = "learned"
    """Position encoding: ``learned`` (an s×h table), ``rope`` or ``alibi`` (no parameters)."""
    norm: str = "layernorm"
    """``layernorm`` (scale and bias) or ``rmsnorm`` (scale only)."""
    bias: bool = True
    """Linear layers carry biases (GPT-2/3, BLOOM, OPT) or not (Llama, Nemotron)."""
    tied_embeddings: bool = True
    """The output layer reuses the input embedding matrix."""
    dropout: bool = True
    """Training applies dropout (GPT-3, Megatron GPT) and so stores dropout masks; Llama and Nemotron do not."""
    source: str = ""
    """Where the numbers come from."""
    family: str = "dense"
    """The model family that costs it (``autoplan.families.registry``): ``dense`` for a dense transformer, ``moe`` for a
    mixture of experts (set by default when ``experts`` > 0), ``cnn`` for a convolutional network."""
    structure: Any = None
    """A family's own description of the model (e.g. a CNN's layer list, ``families/cnn/spec.py``); None for a transformer.
    When set, it answers ``params()`` and ``model_flops_per_sample()`` and one sample counts as one token."""
    experts: int = 0
    """Routed experts per MoE layer; 0 means a dense model (Shazeer et al. 2017; Fedus et al. 2021)."""
    top_k: int = 0
    """Routed experts each token is sent to (Mixtral 2, DeepSeek-V3 8)."""
    moe_ffn_hidden: int = 0
    """Width of one expert's FFN hidden layer (DeepSeek ``moe_intermediate_size``)."""
    shared_experts: int = 0
    """Always-on experts per MoE layer, each ``moe_ffn_hidden`` wide (DeepSeekMoE, arXiv 2401.06066 §3.2)."""
    dense_layers: int = 0
    """Leading layers with a dense FFN of ``ffn_hidden`` (DeepSeek ``first_k_dense_replace``)."""
    capacity_factor: float = 0.0
    """Expert capacity over the balanced load (Fedus et al. 2021 §2.1); 0 means dropless."""
    pad_to_capacity: bool = False
    """Drop-and-pad routing (Megatron-Core --moe-pad-expert-input-to-capacity, needs a ``capacity_factor``): every
    expert gets exactly its capacity, so the token dispatcher knows all split sizes on the host and never syncs."""
    padded_permute_syncs: bool = False
    """With ``pad_to_capacity``, the dispatcher still syncs the host every layer: Megatron-Core 0.10's all-to-all
    dispatcher permutes through ``moe_utils.permute``, whose ``masked_select`` sizes its output on the host (and
    ``unpermute`` the routing probabilities alike); 0.9 had a padded path, and 0.12 one again (``drop_and_pad``)."""
    force_balanced_routing: bool = False
    """Megatron-Core --moe-router-force-load-balancing (NVIDIA's MoE benchmarks): routing stays dropless and every
    expert gets the mean load; a ``capacity_factor`` of 1.0 then describes that load, not a router capacity."""
    aux_loss: bool = True
    """Training computes the load-balancing loss (Switch Transformer, Fedus et al. 2021 §2.2; Megatron-Core
    --moe-router-load-balancing-type aux_loss with a coefficient > 0): its kernels and an all-reduce of the token
    counts over TP×CP every MoE layer (``router.router_kernels``); False: type "none" (GPT-OSS's recipe)."""
    router_fusion: bool = False
    """Megatron-Core --moe-router-fusion (core 0.14 on): Transformer Engine's fused top-k, score and aux-loss kernels
    in place of the router's chain of small PyTorch kernels (``router.router_kernels``)."""
    q_lora_rank: int = 0
    """Rank of the low-rank query compression of multi-head latent attention; 0: a full query projection."""
    kv_lora_rank: int = 0
    """Rank of the compressed KV latent; > 0 means multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1)."""
    qk_rope_head_dim: int = 0
    """MLA: width of the decoupled RoPE part of each query/key head (the non-RoPE part is ``head_dim``)."""
    v_head_dim: int = 0
    """MLA: width of each value head (0: ``head_dim``)."""
    route_nodes: int = 0
    """Node-limited routing: each token reaches experts on at most this many nodes, crossing the inter-node network
    once per node and fanning out over NVLink there (DeepSeek-V3, arXiv 2412.19437 §2.1.2 and §3.2.2: M = 4);
    0 means unlimited (every routed copy travels on its own, Megatron-Core's alltoall dispatcher)."""
    mtp_layers: int = 0
    """Multi-token-prediction depth D (DeepSeek-V3, arXiv 2412.19437 §2.2; HF ``num_nextn_predict_layers``): D
    sequential modules after the last layer, on the last pipeline stage, each one more MoE transformer block, a
    projection of the 2h-wide [hidden; next-token embedding] to h and two RMSNorms, sharing the main model's
    embedding and output head; 0 means none. Costed by the ``moe`` family (a dense model's plans name it as a
    violation)."""
    window: int = 0
    """Sliding-window attention: each query attends to at most this many preceding keys (0: full causal attention;
    Beltagy et al. 2020, Longformer, arXiv 2004.05150 §3.1)."""
    window_layers: int = 0
    """Layers that use the sliding window (the rest attend fully); 0 with ``window`` > 0 means every layer."""
    glu_clamp: float = 0.0
    """GPT-OSS's clamped SwiGLU: gate and linear inputs clipped to ±this before the activation (0: no clamp)."""
    qk_norm: bool = False
    """Queries and keys are RMS-normalised per head before RoPE and the attention (Qwen3: HF ``q_norm`` / ``k_norm``
    over ``head_dim``; Megatron-Core ``qk_layernorm``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 200 or not self.name.isprintable():
            raise SpecError(f"model name must be a non-empty string of at most 200 printable characters (no line "
                            f"breaks or control characters), got {excerpt(self.name)}")
        for name in SIZES:
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise SpecError(f"model {self.name!r}: {name} must be a positive integer, got {excerpt(value)}")
            if value > MAX_SIZE:
                raise SpecError(f"model {self.name!r}: {name} {value} is larger than {MAX_SIZE:,} (a typo?)")
        for name in ("kv_heads", "head_dim", *MOE_COUNTS):
            value = getattr(self, name)
            if not _is_int(value) or value < 0 or value > MAX_SIZE:
                raise SpecError(f"model {self.name!r}: {name} must be a positive integer (or 0 for the default), "
                                f"got {excerpt(value)}")
        for name in ("bias", "tied_embeddings", "dropout", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"model {self.name!r}: {name} must be true or false, got {excerpt(getattr(self, name))}")
        if not isinstance(self.family, str) or not self.family:
            raise SpecError(f"model {self.name!r}: family must be a non-empty string, got {excerpt(self.family)}")
        if not isinstance(self.source, str):
            raise SpecError(f"model {self.name!r}: source must be a string, got {excerpt(self.source)}")
        self._check_moe()
        self._check_window()
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise SpecError(f"model {self.name!r}: hidden {self.hidden} is not divisible by heads {self.heads}; give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.heads % self.kv_heads:
            raise SpecError(f"model {self.name!r}: heads {self.heads} must be a multiple of kv_heads {self.kv_heads}")
        for value, allowed, what in ((self.activation, ACTIVATIONS, "activation"),
                                     (self.position, POSITIONS, "position"), (self.norm, NORMS, "norm")):
            if value not in allowed:
                raise SpecError(f"model {self.name!r}: {what} {excerpt(value)} is not one of {', '.join(allowed)}")

    def _check_window(self) -> None:
        for name in ("window", "window_layers"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0 or value > MAX_SIZE:
                raise SpecError(f"model {self.name!r}: {name} must be a positive integer (or 0 for none), got {excerpt(value)}")
        if self.window_layers > self.layers:
            raise SpecError(f"model {self.name!r}: window_layers {self.window_layers} exceeds layers {self.layers}")
        if self.window_layers and not self.window:
            raise SpecError(f"model {self.name!r}: window_layers {self.window_layers} needs a window > 0")
        clamp = self.glu_clamp
        if isinstance(clamp, bool) or not isinstance(clamp, (int, float)) or not 0 <= clamp <= 1e6:
            raise SpecError(f"model {self.name!r}: glu_clamp must be 0 (none) or a positive number, got {excerpt(clamp)}")

    @property
    def windowed_share(self) -> float:
        """Share of the layers that attend through the sliding window (0 for full attention)."""
        if not self.window:
            return 0.0
        return (self.window_layers or self.layers) / self.layers

    def _check_moe(self) -> None:
        cf = self.capacity_factor
        if isinstance(cf, bool) or not isinstance(cf, (int, float)) or not 0 <= cf <= 1e3:
            raise SpecError(f"model {self.name!r}: capacity_factor must be 0 (dropless) or a positive number, "
                            f"got {excerpt(cf)}")
        if not isinstance(self.pad_to_capacity, bool):
            raise SpecError(f"model {self.name!r}: pad_to_capacity must be true or false, got {excerpt(self.pad_to_capacity)}")
        for flag in ("padded_permute_syncs", "force_balanced_routing", "aux_loss", "router_fusion"):
            if not isinstance(getattr(self, flag), bool):
                raise SpecError(f"model {self.name!r}: {flag} must be true or false, got {excerpt(getattr(self, flag))}")
        if self.pad_to_capacity and not cf:
            raise SpecError(f"model {self.name!r}: pad_to_capacity needs a capacity_factor > 0 (the capacity to pad to)")
        if self.experts == 0:
            if self.family == "moe":
                raise SpecError(f"model {self.name!r}: family 'moe' needs experts > 0")
            extra = [n for n in ("top_k", "moe_ffn_hidden", "shared_experts", "dense_layers", "route_nodes")
                     if getattr(self, n)]
            if extra:
                raise SpecError(f"model {self.name!r}: {', '.join(extra)} need experts > 0")
        else:
            if self.family == "dense":
                object.__setattr__(self, "family", "moe")
            if not 1 <= self.top_k <= self.experts:
                raise SpecError(f"model {self.name!r}: top_k {self.top_k} must be between 1 and experts {self.experts}")
            if self.moe_ffn_hidden == 0:
                raise SpecError(f"model {self.name!r}: experts {self.experts} need moe_ffn_hidden > 0")
            if self.dense_layers >= self.layers:
                raise SpecError(f"model {self.name!r}: dense_layers {self.dense_layers} must be fewer than "
                                f"layers {self.layers}")
        if self.kv_lora_rank and not self.qk_rope_head_dim:
            raise SpecError(f"model {self.name!r}: MLA (kv_lora_rank {self.kv_lora_rank}) needs qk_rope_head_dim > 0")
        if not self.kv_lora_rank and (self.q_lora_rank or self.qk_rope_head_dim):
            raise SpecError(f"model {self.name!r}: q_lora_rank and qk_rope_head_dim need kv_lora_rank > 0 (MLA)")

    @property
    def moe(self) -> bool:
        """A mixture of experts: MoE layers after ``dense_layers`` dense ones."""
        return self.experts > 0

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 §2.1)."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return self.layers - self.dense_layers if self.moe else 0

    @property
    def value_dim(self) -> int:
        """Width of one value head (MLA's ``v_head_dim``, else ``head_dim``)."""
        return self.v_head_dim or self.head_dim

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head (MLA: the non-RoPE plus the RoPE part)."""
        return self.head_dim + self.qk_rope_head_dim

    @property
    def attention_core_dim(self) -> int:
        """heads × the mean of the query/key and value head widths: the attention core's FLOPs are 4·s²·this."""
        # QK^T over qk_head_dim, AV over value_dim (DeepSeek-V2 §2.1.3); equal to q_dim without MLA
        return self.heads * (self.qk_head_dim + self.value_dim) // 2

    def expert_params(self) -> int:
        """Weights of one expert's FFN (gated: three matrices)."""
        return (3 if self.gated else 2) * self.hidden * self.moe_ffn_hidden

    def moe_layer_params(self) -> int:
        """All parameters of one MoE layer: attention, norms, router, routed and shared experts."""
        # Fedus et al. 2021 §2.1: a router matrix h×E in place of the dense MLP; DeepSeekMoE (arXiv 2401.06066) §3:
        # shared experts beside the routed ones
        return (self.layer_params() - self.mlp_matmul_params() + self.hidden * self.experts
                + (self.experts + self.shared_experts) * self.expert_params())

    def moe_active_layer_params(self) -> int:
        """Parameters of one MoE layer that one token uses: attention, router, top_k routed and the shared experts."""
        return (self.moe_layer_params() - (self.experts - self.top_k) * self.expert_params())

    def mla_norm_params(self) -> int:
        """RMSNorms of MLA's compressed query and KV latents (DeepSeek-V2 config: q_a_layernorm, kv_a_layernorm)."""
        return (self.q_lora_rank + self.kv_lora_rank) if self.mla else 0

    def active_params(self) -> int:
        """Parameters one token uses (all of a dense model; MoE: top_k routed plus shared experts)."""
        return self.params() - self.moe_layers * (self.experts - self.top_k) * self.expert_params()

    @property
    def q_dim(self) -> int:
        """Width of the query projection (heads × head_dim)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projections (kv_heads × head_dim)."""
        return self.kv_heads * self.head_dim

    @property
    def gated(self) -> bool:
        """The MLP has a gate matrix (SwiGLU: three matrices instead of two)."""
        return self.activation == "swiglu"

    def attention_matmul_params(self) -> int:
        """Weights of Q, K, V and the output projection of one layer."""
        if self.mla:
            return self._mla_params()
        return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden

    def _mla_params(self) -> int:
        # DeepSeek-V2 (arXiv 2405.04434) §2.1.2-2.1.3, eqs. 9-14: W_DQ (h×r_q), W_UQ (r_q × heads·(d+d_R)) or W_Q,
        # W_DKV and the shared RoPE key W_KR (h × (r_kv + d_R)), W_UK, W_UV (r_kv × heads·(d + d_v)), W_O
        h, a = self.hidden, self.heads
        q_up = a * self.qk_head_dim
        q = h * self.q_lora_rank + self.q_lora_rank * q_up if self.q_lora_rank else h * q_up
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * a * (self.head_dim + self.value_dim)
        return q + kv + a * self.value_dim * h

    def mlp_matmul_params(self) -> int:
        """Weights of the MLP matrices of one layer."""
        return (3 if self.gated else 2) * self.hidden * self.ffn_hidden

    def layer_tensors(self) -> tuple[tuple[int, ...], ...]:
        """Elements of each parameter tensor of one transformer layer, grouped by sub-module in forward order."""
        h, q, kv, f = self.hidden, self.q_dim, self.kv_dim, self.ffn_hidden
        norm = (h, h) if self.norm == "layernorm" else (h,)
        up = (2 if self.gated else 1) * f
        bias = self.bias
        # Megatron-LM ParallelTransformerLayer: input norm, QKV, output projection, post-attention norm, fc1, fc2
        qkv = self.attention_matmul_params() - q * h
        return (norm, (qkv,) + ((q + 2 * kv,) if bias else ()), (q * h,) + ((h,) if bias else ()), norm,
                (h * up,) + ((up,) if bias else ()), (f * h,) + ((h,) if bias else ()))

    def layer_params(self) -> int:
        """All parameters of one transformer layer: matrices, biases and two norms."""
        cached = self.__dict__.get("_layer_params")        # the search asks tens of thousands of times
        if cached is None:
            cached = self._layer_params()
            object.__setattr__(self, "_layer_params", cached)
        return cached

    def _layer_params(self) -> int:
        biases = 0
        if self.bias:
            biases = (self.q_dim + 2 * self.kv_dim) + self.hidden + (2 if self.gated else 1) * self.ffn_hidden + self.hidden
        norms = 2 * (2 if self.norm == "layernorm" else 1) * self.hidden
        return self.attention_matmul_params() + self.mlp_matmul_params() + biases + norms + self.mla_norm_params()

    def embedding_params(self) -> int:
        """Input token embedding, plus the position table when positions are learned."""
        return self.vocab * self.hidden + (self.seq_len * self.hidden if self.position == "learned" else 0)

    def output_params(self) -> int:
        """Final norm, plus the output projection when it is not tied to the input embedding."""
        final_norm = (2 if self.norm == "layernorm" else 1) * self.hidden
        return final_norm + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def mtp_module_params(self) -> int:
        """Weights of one multi-token-prediction module of its own: an MoE block, the projection M_k (h × 2h) and the
        RMSNorms of its two inputs and of the shared output head (DeepSeek-V3 §2.2, eq. 21; HF checkpoint layer 61:
        enorm, hnorm, eh_proj, shared_head.norm); the embedding and output head are the main model's."""
        norm = (2 if self.norm == "layernorm" else 1) * self.hidden
        return self.moe_layer_params() + 2 * self.hidden * self.hidden + 3 * norm

    def mtp_params(self) -> int:
        """Weights of the ``mtp_layers`` multi-token-prediction modules beyond the main model's ``params()``. The
        DeepSeek-V3 report's 14B (685B = 671B + 14B, §2.2 and HF model card) counts the shared embedding and
        output head once more, as the checkpoint stores them: 11.6B + 2·V·h = 13.5B."""
        return self.mtp_layers * self.mtp_module_params()

    def params(self) -> int:
        """Total trainable parameters of the main model (the multi-token-prediction modules: ``mtp_params``)."""
        if self.structure is not None:
            return self.structure.params()
        if self.moe:
            return (self.dense_layers * self.layer_params() + self.moe_layers * self.moe_layer_params()
                    + self.embedding_params() + self.output_params())
        return self.layers * self.layer_params() + self.embedding_params() + self.output_params()

    def layer_matmuls(self) -> tuple[tuple[str, int, int], ...]:
        """The dense layer's linear layers in the order a PyTorch forward runs them, as (name, in, out) widths:
        torchtitan's Llama ``Attention.forward`` (wq, wk, wv, then wo) and ``FeedForward.forward``
        (``w2(F.silu(w1(x)) * w3(x))``: w1, w3, w2; no w3 without a gate)."""
        h, q, kv, f = self.hidden, self.q_dim, self.kv_dim, self.ffn_hidden
        mlp = (("w1", h, f),) + ((("w3", h, f),) if self.gated else ()) + (("w2", f, h),)
        return (("wq", h, q), ("wk", h, kv), ("wv", h, kv), ("wo", q, h)) + mlp

    def layer_forward_flops_per_token(self, causal: bool = False) -> float:
        """Forward FLOPs of one layer for one token: 2 per weight, plus QK^T and AV over s keys.

        Narayanan et al. SC'21 §5.1 (GEMMs only); causal=True halves the score/context GEMMs.
        """
        attention = 4 * self.seq_len * self.attention_core_dim * (0.5 if causal else 1.0)
        return 2 * (self.attention_matmul_params() + self.mlp_matmul_params()) + attention

    def moe_layer_forward_flops_per_token(self, causal: bool = False) -> float:
        """Forward FLOPs of one MoE layer for one token: attention, the router and the top_k routed and shared
        experts the token runs through (2 per active weight; Fedus et al. 2021 §2)."""
        dense = self.layer_forward_flops_per_token(causal) - 2 * self.mlp_matmul_params()
        return dense + 2 * (self.hidden * self.experts + (self.top_k + self.shared_experts) * self.expert_params())

    def layers_forward_flops_per_token(self, causal: bool = False) -> float:
        """Forward FLOPs of all transformer layers for one token (dense and MoE layers)."""
        if self.moe:
            return (self.dense_layers * self.layer_forward_flops_per_token(causal)
                    + self.moe_layers * self.moe_layer_forward_flops_per_token(causal))
        return self.layers * self.layer_forward_flops_per_token(causal)

    def logits_forward_flops_per_token(self) -> float:
        """Forward FLOPs of the output projection for one token (2·h·V)."""
        return 2 * self.hidden * self.vocab

    def model_flops_per_token(self) -> float:
        """Model FLOPs per trained token: 3× forward (fwd + 2× bwd), full (non-causal) attention, no recompute.

        For GPT this is 72·l·h²·(1 + s/6h + V/12lh) per token (Korthikanti et al. 2022, §6 MFU);
        it is also NVIDIA's recipe convention (GQA-aware QKV, full s² attention, 6·V·h).
        """
        return 3 * (self.layers_forward_flops_per_token() + self.logits_forward_flops_per_token())

    def hardware_flops_per_token(self, recompute: str = "full") -> float:
        """Model FLOPs plus the forward work that activation recomputation repeats.

        full: Megatron SC'21 eq. 3, 96·l·h²·(1 + s/6h + V/16lh) for GPT (every layer's forward twice).
        selective: adds the attention core's forward (QK^T, AV) once more (Korthikanti et al. 2022, §5).
        op: adds every second matmul of each layer (torchtitan's per-op SAC recomputes the 2nd, 4th, ... mm).
        """
        extra = 0.0
        if recompute == "full":
            extra = self.layers_forward_flops_per_token()
        elif recompute == "selective":
            extra = self.layers * 4 * self.seq_len * self.attention_core_dim
        elif recompute == "op":
            # torchtitan parallelize_llama.py _apply_ac_to_transformer_block: mm outputs saved except every second
            extra = self.layers * sum(2 * k * n for _, k, n in self.layer_matmuls()[1::2])
        return self.model_flops_per_token() + extra

    def model_flops_per_iteration(self, global_batch: int) -> float:
        """Model FLOPs of one optimizer step over ``global_batch`` sequences."""
        if self.structure is not None:
            return global_batch * self.structure.model_flops_per_sample()
        return global_batch * self.seq_len * self.model_flops_per_token()

    def hardware_flops_per_iteration(self, global_batch: int, recompute: str = "full") -> float:
        """Hardware FLOPs (with recompute) of one optimizer step over ``global_batch`` sequences."""
        if self.structure is not None:
            # full recompute repeats the forward: 4/3 of the model FLOPs (Chen et al. 2016, arXiv 1604.06174)
            return self.model_flops_per_iteration(global_batch) * (4 / 3 if recompute == "full" else 1.0)
        return global_batch * self.seq_len * self.hardware_flops_per_token(recompute)
