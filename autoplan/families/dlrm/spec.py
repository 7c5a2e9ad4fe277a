"""DLRMSpec: the structure of a deep learning recommendation model (embedding tables, bottom and top MLPs, the
feature interaction), kept beside ``ModelSpec`` in its ``dlrm`` field (Naumov et al. 2019, arXiv 1906.00091)."""

from __future__ import annotations

from dataclasses import dataclass

from autoplan.errors import SpecError

SHARDINGS = ("table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel")
"""How one embedding table is split over GPUs (TorchRec's ShardingType values, lower case)."""
BOTTOM_MLP_PLACEMENTS = ("data_parallel", "rank0")
"""Where the bottom MLP runs: data-parallel on every GPU (TorchRec), or on GPU 0 alone over the global batch with its
output sent in the all-to-all (NVIDIA DeepLearningExamples PyTorch DLRM, dlrm/model/distributed.py DistributedDlrm)."""
TABLE_PLACEMENTS = ("planner", "memory_balanced")
"""How whole tables go to GPUs when every table is table-wise: the planner's choice (families/dlrm/sharding_search.py), or
distributed-embeddings' ``memory_balanced`` strategy (largest first, dealt to the GPUs forth and back; NVIDIA-Merlin
distributed-embeddings dist_model_parallel.py DistEmbeddingStrategy.apply_stragety, as the NVIDIA DeepLearningExamples
TensorFlow 2 DLRM runs it: nn/sparse_model.py, main.py --dist_strategy default). A ``rank0`` bottom MLP places the
tables by NVIDIA's PyTorch get_device_mapping instead."""
FRAMEWORKS = ("pytorch", "horovod")
"""How the training code issues its collectives: straight to NCCL from the training loop (PyTorch, TorchRec), or as
Horovod operations, which its background thread negotiates across ranks once per cycle before running them (the
NVIDIA DeepLearningExamples TensorFlow 2 DLRM: hvd.alltoall in NVIDIA-Merlin distributed-embeddings, hvd.allreduce of
the dense gradients; sharding.horovod_round_wait)."""
INTERACTIONS = ("dot", "dcn")
"""Feature interaction: pairwise dot products (DLRM) or DCN-v2 low-rank cross layers (Wang et al. 2021)."""
MAX_ROWS = 2**40
"""Largest accepted table (rows): far beyond any production table, small enough to stay a finite float."""


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True, kw_only=True)
class EmbeddingTable:
    """One embedding table and the distribution of its lookups."""

    name: str
    """Feature name, e.g. ``cat_0``."""
    rows: int
    """Rows (hash size of the categorical feature)."""
    dim: int
    """Embedding width (values per row)."""
    pooling: float = 1.0
    """Mean lookups per sample (1 for one-hot features), summed into one pooled vector."""
    skew: float = 0.0
    """Zipf exponent of the row popularity (0: uniform; ~1: long-tailed click logs)."""
    sharding: str = ""
    """A sharding this table must use (one of SHARDINGS); empty: the planner chooses."""

    def __post_init__(self) -> None:
        if not _positive_int(self.rows) or self.rows > MAX_ROWS:
            raise SpecError(f"table {self.name!r}: rows must be a positive integer up to {MAX_ROWS:,}, got {self.rows!r}")
        if not _positive_int(self.dim) or self.dim > 2**16:
            raise SpecError(f"table {self.name!r}: dim must be a positive integer up to 65536, got {self.dim!r}")
        for key, low in (("pooling", 1e-6), ("skew", 0.0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 1e6:
                raise SpecError(f"table {self.name!r}: {key} must be a number in [{low:g}, 1e6], got {value!r}")
            object.__setattr__(self, key, float(value))
        if self.sharding and self.sharding not in SHARDINGS:
            raise SpecError(f"table {self.name!r}: sharding {self.sharding!r} is not one of {', '.join(SHARDINGS)}")

    @property
    def params(self) -> int:
        """Values in the table (rows × dim)."""
        return self.rows * self.dim


def _mlp_flops(widths: tuple[int, ...]) -> float:
    # 2 FLOPs per multiply-add of each (in × out) weight, per sample (Naumov et al. 2019, §2)
    return 2.0 * sum(a * b for a, b in zip(widths, widths[1:]))


def _mlp_params(widths: tuple[int, ...]) -> int:
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


@dataclass(frozen=True, kw_only=True)
class DLRMSpec:
    """Embedding tables, the MLPs and the interaction of a DLRM."""

    tables: tuple[EmbeddingTable, ...]
    """The sparse features' embedding tables."""
    dense_features: int
    """Continuous input features (the bottom MLP's input width)."""
    bottom_mlp: tuple[int, ...]
    """Widths of the bottom MLP's layers; the last must equal the tables' dim."""
    top_mlp: tuple[int, ...]
    """Widths of the top MLP's layers (its input width follows from the interaction)."""
    interaction: str = "dot"
    """``dot`` (pairwise dot products, DLRM) or ``dcn`` (DCN-v2 cross layers)."""
    cross_layers: int = 0
    """DCN-v2 cross layers (``dcn`` only)."""
    cross_rank: int = 0
    """DCN-v2 low rank of each cross layer's weight (``dcn`` only)."""
    embedding_bytes: int = 4
    """Bytes per embedding value (4: fp32 tables, as the MLPerf reference trains them)."""
    global_batch: int = 65536
    """Samples per step when the command line gives none."""
    bottom_mlp_placement: str = "data_parallel"
    """One of BOTTOM_MLP_PLACEMENTS; ``rank0`` also places the tables by NVIDIA's get_device_mapping when every
    table is table-wise (families/dlrm/sharding_search.py nvidia_buckets)."""
    table_placement: str = "planner"
    """One of TABLE_PLACEMENTS (applies when every table is table-wise and the bottom MLP is data-parallel)."""
    pooled_comm_bytes: int = 4
    """Bytes per pooled-embedding value (and its gradient) in the all-to-all and reduce-scatters: 4, TorchRec's fp32
    default (no quantised comms); 2 where the code casts the pooled embeddings to the AMP dtype before the all-to-all
    (NVIDIA DeepLearningExamples DLRMs: PyTorch dlrm/nn/parts.py DlrmBottom.forward ``.half()`` before BottomToTop's
    all_to_all; TF2 distributed-embeddings dist_model_parallel.py ``_call_base`` casts to compute_dtype before
    hvd.alltoall). The cast itself stays priced at the interaction input on the receiving GPU (families/dlrm/sharding.py
    interaction_input_times): the owner's cast of its tables' global batch moves about as many bytes."""

    framework: str = "pytorch"
    """One of FRAMEWORKS: how the code issues its all-to-alls and the dense all-reduce."""

    def __post_init__(self) -> None:
        if not self.tables:
            raise SpecError("a DLRM needs at least one embedding table")
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise SpecError(f"DLRM table names must be unique, got {names}")
        for key in ("bottom_mlp", "top_mlp"):
            widths = getattr(self, key)
            if not widths or not all(_positive_int(w) for w in widths):
                raise SpecError(f"DLRM {key} must be a non-empty list of positive widths, got {widths!r}")
        dims = {t.dim for t in self.tables}
        if self.interaction not in INTERACTIONS:
            raise SpecError(f"DLRM interaction {self.interaction!r} is not one of {', '.join(INTERACTIONS)}")
        if self.interaction == "dot" and dims != {self.bottom_mlp[-1]}:
            raise SpecError(f"DLRM dot interaction needs every table dim equal to the bottom MLP's last width "
                            f"{self.bottom_mlp[-1]}, got dims {sorted(dims)}")
        if self.interaction == "dcn" and not (_positive_int(self.cross_layers) and _positive_int(self.cross_rank)):
            raise SpecError("DLRM dcn interaction needs positive cross_layers and cross_rank")
        if self.bottom_mlp_placement not in BOTTOM_MLP_PLACEMENTS:
            raise SpecError(f"DLRM bottom_mlp_placement {self.bottom_mlp_placement!r} is not one of "
                            f"{', '.join(BOTTOM_MLP_PLACEMENTS)}")
        if self.framework not in FRAMEWORKS:
            raise SpecError(f"DLRM framework {self.framework!r} is not one of {', '.join(FRAMEWORKS)}")
        if self.table_placement not in TABLE_PLACEMENTS:
            raise SpecError(f"DLRM table_placement {self.table_placement!r} is not one of {', '.join(TABLE_PLACEMENTS)}")
        if self.table_placement != "planner" and self.bottom_mlp_placement == "rank0":
            raise SpecError(f"DLRM table_placement {self.table_placement!r} needs a data-parallel bottom MLP: a rank0 "
                            "bottom MLP places the tables by NVIDIA's get_device_mapping")
        for key in ("dense_features", "embedding_bytes", "global_batch", "pooled_comm_bytes"):
            if not _positive_int(getattr(self, key)):
                raise SpecError(f"DLRM {key} must be a positive integer, got {getattr(self, key)!r}")

    @property
    def features(self) -> int:
        """Vectors entering the interaction: the bottom MLP's output and one pooled vector per table."""
        return len(self.tables) + 1

    @property
    def interaction_width(self) -> int:
        """Width of the interaction's output, the top MLP's input."""
        if self.interaction == "dot":
            # DLRM: the bottom output concatenated with the F(F-1)/2 pairwise dot products (Naumov et al. §2)
            return self.bottom_mlp[-1] + self.features * (self.features - 1) // 2
        return self.bottom_mlp[-1] + sum(t.dim for t in self.tables)

    def bottom_widths(self) -> tuple[int, ...]:
        """Input and layer widths of the bottom MLP."""
        return (self.dense_features, *self.bottom_mlp)

    def top_widths(self) -> tuple[int, ...]:
        """Input and layer widths of the top MLP."""
        return (self.interaction_width, *self.top_mlp)

    def interaction_flops(self) -> float:
        """Forward FLOPs of the interaction for one sample."""
        if self.interaction == "dot":
            # a batched (F×D)·(D×F) GEMM per sample (DLRM reference interact_features)
            return 2.0 * self.features ** 2 * self.bottom_mlp[-1]
        # DCN-v2 low-rank cross layer: x0 ⊙ (U·(Vᵀ·x)) + x, two (W×r) GEMVs per layer (Wang et al. 2021, eq. 2)
        return self.cross_layers * 4.0 * self.interaction_width * self.cross_rank

    def bottom_params(self) -> int:
        """Weights and biases of the bottom MLP."""
        return _mlp_params(self.bottom_widths())

    def dense_params(self) -> int:
        """Parameters of the MLPs and cross layers (trained data-parallel)."""
        cross = self.cross_layers * (2 * self.interaction_width * self.cross_rank + self.interaction_width)
        return _mlp_params(self.bottom_widths()) + _mlp_params(self.top_widths()) + cross

    def embedding_params(self) -> int:
        """Values in all embedding tables."""
        return sum(t.params for t in self.tables)

    def params(self) -> int:
        """Every trainable parameter: the dense part and the tables (``ModelSpec.params`` asks this)."""
        return self.dense_params() + self.embedding_params()

    def model_flops_per_sample(self) -> float:
        """Model FLOPs of one trained sample: forward and backward (3× the forward) of the MLPs and interaction."""
        return 3 * self.forward_flops_per_sample()

    def forward_flops_per_sample(self) -> float:
        """Forward FLOPs of the MLPs and the interaction for one sample (lookups are memory traffic, not FLOPs)."""
        return _mlp_flops(self.bottom_widths()) + _mlp_flops(self.top_widths()) + self.interaction_flops()


def dlrm_from_data(data: object, where: str) -> DLRMSpec:
    """A DLRMSpec from a model file's ``[model.dlrm]`` table (``tables`` an array of tables); SpecError naming
    ``where`` and the key if it does not fit."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: dlrm must be a table, got {data!r:.60}")
    allowed = {"tables", "dense_features", "bottom_mlp", "top_mlp", "interaction", "cross_layers", "cross_rank",
               "embedding_bytes", "global_batch", "pooled_comm_bytes", "table_placement", "framework"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(f"{where}: unknown dlrm key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    tables = data.get("tables")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise SpecError(f"{where}: dlrm.tables must be an array of tables ([[model.dlrm.tables]])")
    keys = {"name", "rows", "dim", "pooling", "skew", "sharding"}
    built = []
    for i, t in enumerate(tables):
        if set(t) - keys or not {"rows", "dim"} <= set(t):
            raise SpecError(f"{where}: dlrm table {i} needs rows and dim and may have {', '.join(sorted(keys))}; "
                            f"got {', '.join(sorted(t))}")
        built.append(EmbeddingTable(**{"name": f"table_{i}", **t}))
    rest = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "tables"}
    try:
        return DLRMSpec(tables=tuple(built), **rest)
    except TypeError as err:
        raise SpecError(f"{where}: {err}") from None


def dlrm_of(model: object) -> DLRMSpec | None:
    """The DLRMSpec a ModelSpec carries in its ``structure``, or None for any other model."""
    structure = getattr(model, "structure", None)
    return structure if isinstance(structure, DLRMSpec) else None
