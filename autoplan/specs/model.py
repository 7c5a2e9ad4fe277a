"""ModelSpec: the shape of a dense decoder-only transformer, its parameter count and FLOPs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from autoplan.errors import SpecError

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
    """The model family that costs it (``autoplan.cost.families``): ``dense`` for a dense transformer."""
    structure: Any = None
    """A family's own description of the model (e.g. a CNN's layer list, ``specs/cnn.py``); None for a transformer.
    When set, it answers ``params()`` and ``model_flops_per_sample()`` and one sample counts as one token."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecError(f"model name must be a non-empty string, got {self.name!r}")
        for name in SIZES:
            value = getattr(self, name)
            if not _is_int(value) or value <= 0:
                raise SpecError(f"model {self.name!r}: {name} must be a positive integer, got {value!r}")
            if value > MAX_SIZE:
                raise SpecError(f"model {self.name!r}: {name} {value} is larger than {MAX_SIZE:,} (a typo?)")
        for name in ("kv_heads", "head_dim"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0 or value > MAX_SIZE:
                raise SpecError(f"model {self.name!r}: {name} must be a positive integer (or 0 for the default), "
                                f"got {value!r}")
        for name in ("bias", "tied_embeddings", "dropout"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"model {self.name!r}: {name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.family, str) or not self.family:
            raise SpecError(f"model {self.name!r}: family must be a non-empty string, got {self.family!r}")
        if not isinstance(self.source, str):
            raise SpecError(f"model {self.name!r}: source must be a string, got {self.source!r}")
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
                raise SpecError(f"model {self.name!r}: {what} {value!r} is not one of {', '.join(allowed)}")

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
        return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden

    def mlp_matmul_params(self) -> int:
        """Weights of the MLP matrices of one layer."""
        return (3 if self.gated else 2) * self.hidden * self.ffn_hidden

    def layer_params(self) -> int:
        """All parameters of one transformer layer: matrices, biases and two norms."""
        biases = 0
        if self.bias:
            biases = (self.q_dim + 2 * self.kv_dim) + self.hidden + (2 if self.gated else 1) * self.ffn_hidden + self.hidden
        norms = 2 * (2 if self.norm == "layernorm" else 1) * self.hidden
        return self.attention_matmul_params() + self.mlp_matmul_params() + biases + norms

    def embedding_params(self) -> int:
        """Input token embedding, plus the position table when positions are learned."""
        return self.vocab * self.hidden + (self.seq_len * self.hidden if self.position == "learned" else 0)

    def output_params(self) -> int:
        """Final norm, plus the output projection when it is not tied to the input embedding."""
        final_norm = (2 if self.norm == "layernorm" else 1) * self.hidden
        return final_norm + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def params(self) -> int:
        """Total trainable parameters."""
        if self.structure is not None:
            return self.structure.params()
        return self.layers * self.layer_params() + self.embedding_params() + self.output_params()

    def layer_forward_flops_per_token(self, causal: bool = False) -> float:
        """Forward FLOPs of one layer for one token: 2 per weight, plus QK^T and AV over s keys.

        Narayanan et al. SC'21 §5.1 (GEMMs only); causal=True halves the score/context GEMMs.
        """
        attention = 4 * self.seq_len * self.q_dim * (0.5 if causal else 1.0)
        return 2 * (self.attention_matmul_params() + self.mlp_matmul_params()) + attention

    def logits_forward_flops_per_token(self) -> float:
        """Forward FLOPs of the output projection for one token (2·h·V)."""
        return 2 * self.hidden * self.vocab

    def model_flops_per_token(self) -> float:
        """Model FLOPs per trained token: 3× forward (fwd + 2× bwd), full (non-causal) attention, no recompute.

        For GPT this is 72·l·h²·(1 + s/6h + V/12lh) per token (Korthikanti et al. 2022, §6 MFU);
        it is also NVIDIA's recipe convention (GQA-aware QKV, full s² attention, 6·V·h).
        """
        return 3 * (self.layers * self.layer_forward_flops_per_token() + self.logits_forward_flops_per_token())

    def hardware_flops_per_token(self, recompute: str = "full") -> float:
        """Model FLOPs plus the forward work that activation recomputation repeats.

        full: Megatron SC'21 eq. 3, 96·l·h²·(1 + s/6h + V/16lh) for GPT (every layer's forward twice).
        selective: adds the attention core's forward (QK^T, AV) once more (Korthikanti et al. 2022, §5).
        """
        extra = 0.0
        if recompute == "full":
            extra = self.layers * self.layer_forward_flops_per_token()
        elif recompute == "selective":
            extra = self.layers * 4 * self.seq_len * self.q_dim
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
