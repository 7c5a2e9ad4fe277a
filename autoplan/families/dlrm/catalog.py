"""The built-in recommendation models: MLPerf's DLRM and DLRM-DCNv2 on Criteo 1TB, and HugeCTR's synthetic 100B."""

from __future__ import annotations

from autoplan.families.dlrm.spec import DLRMSpec, EmbeddingTable, dlrm_from_data
from autoplan.specs.model import ModelSpec

_CRITEO_1TB_ROWS = (39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10, 2208,
                    11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36)
"""Criteo 1TB table sizes at --max-ind-range 40M (MLPerf DLRM reference dlrm_s_pytorch.py, terabyte dataset)."""
_CRITEO_MULTIHOT_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209,
                         11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
_CRITEO_MULTIHOT_POOLING = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)
"""MLPerf Training recommendation_v2 (TorchRec DLRM-DCNv2): --num_embeddings_per_feature, --multi_hot_sizes."""
_SYNTH_GROUPS = ((10, 100, 1, 128), (10, 1000, 1, 128), (10, 1000, 5, 128), (10, 10000, 20, 128), (20, 10000, 100, 128),
                 (10, 10000, 1, 128), (10, 100000, 1, 128), (10, 1000000, 1, 128), (10, 2000000, 1, 128),
                 (10, 2000000, 1, 128), (10, 4000000, 1, 128), (20, 4000000, 1, 128), (20, 2000000, 10, 64),
                 (10, 4000000, 20, 128), (10, 4000000, 30, 128), (10, 4000000, 50, 128), (10, 50000000, 100, 128))
"""(tables, rows, pooling, dim) groups of HugeCTR's embedding-collection benchmark config 200table_100B_hotness20
(NVIDIA-Merlin HugeCTR, synthetic data with Zipf alpha 1.1)."""


def _dlrm(name: str, tables: tuple[EmbeddingTable, ...], source: str, **kw: object) -> ModelSpec:
    """A DLRM with MLPerf's bottom (13-512-256-128) and top (1024-1024-512-256-1) MLPs unless ``kw`` says else."""
    spec = DLRMSpec(**{"tables": tables, "dense_features": 13, "bottom_mlp": (512, 256, 128),
                       "top_mlp": (1024, 1024, 512, 256, 1), **kw})
    widths = spec.bottom_mlp + spec.top_mlp
    # the transformer-shaped fields only name the MLPs: a DLRM "token" is a sample (seq_len 1)
    return ModelSpec(name=name, layers=len(widths), hidden=spec.bottom_mlp[-1], heads=1, ffn_hidden=max(widths),
                     vocab=1, seq_len=1, position="rope", bias=True, tied_embeddings=False, dropout=False,
                     source=source, family="dlrm", structure=spec)


_MLPERF_DLRM = "MLPerf Training DLRM reference (mlcommons/training recommendation/dlrm, Criteo 1TB, max-ind-range 40M)"
_MLPERF_DCNV2 = "MLPerf Training recommendation_v2 (mlcommons/training, TorchRec DLRM-DCNv2, Criteo 1TB multi-hot)"
_CRITEO_SKEW = 1.05
"""Zipf exponent standing in for Criteo's long-tailed ids (an assumption: Lin et al. 2022, arXiv 2201.07821, model
the measured per-table distribution, which this catalog does not ship)."""

MODELS: tuple[ModelSpec, ...] = (
    _dlrm("dlrm-criteo", tuple(EmbeddingTable(name=f"cat_{i}", rows=r, dim=128, skew=_CRITEO_SKEW)
                               for i, r in enumerate(_CRITEO_1TB_ROWS)), _MLPERF_DLRM, global_batch=65536),
    _dlrm("dlrm-dcnv2", tuple(EmbeddingTable(name=f"cat_{i}", rows=r, dim=128, pooling=p)
                              for i, (r, p) in enumerate(zip(_CRITEO_MULTIHOT_ROWS, _CRITEO_MULTIHOT_POOLING))),
          _MLPERF_DCNV2 + "; --multi_hot_distribution_type uniform (skew 0)", interaction="dcn", cross_layers=3,
          cross_rank=512, global_batch=65536),
    _dlrm("dlrm-synthetic-100b", tuple(EmbeddingTable(name=f"g{g}_t{i}", rows=r, dim=d, pooling=p, skew=1.1)
                                       for g, (n, r, p, d) in enumerate(_SYNTH_GROUPS) for i in range(n)),
          "HugeCTR embedding-collection benchmark 200table_100B_hotness20 (tables, rows, hotness, dims, Zipf 1.1); "
          f"MLPs and DCN-v2 cross layers as {_MLPERF_DCNV2}", interaction="dcn", cross_layers=3, cross_rank=512,
          global_batch=65536),
)


ALIASES = {"dlrm": "dlrm-criteo", "dlrm-mlperf": "dlrm-criteo", "dcnv2": "dlrm-dcnv2"}
"""Short names accepted for these models."""

def model_from_table(table: object, where: str) -> dict:
    """The ModelSpec fields of a model file's ``[dlrm]`` table: its structure, the family, and the transformer-shaped
    fields a DLRM does not use."""
    return {"structure": dlrm_from_data(table, where), "family": "dlrm",
            **dict(layers=1, hidden=1, heads=1, ffn_hidden=1, vocab=1, seq_len=1)}


FILE_TABLES = {"dlrm": model_from_table}
"""Model-file tables this family reads (``[dlrm]``)."""
