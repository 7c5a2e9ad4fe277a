"""DeepSeek-V3's multi-token-prediction (MTP) modules (arXiv 2412.19437 §2.2, eqs. 21-25): what each module runs
beside its MoE block and the output head it shares with the main model, on the stage that holds the output layer.

Module k takes the previous depth's hidden states and the embeddings of the tokens k ahead, RMS-normalises both,
concatenates them and projects 2h → h with M_k (eq. 21), runs one transformer block (eq. 22) and the shared output
head and cross-entropy (eqs. 23-24). Megatron-Core (multi_token_prediction.py) builds M_k as a column-parallel
linear layer ``eh_proj`` whose output is gathered over the TP group."""

from __future__ import annotations

from functools import lru_cache

from autoplan.hardware.compute import (BF16, Collective, Op, gemm_op as _gemm, linear_backward as _linear_backward,
                                       memory_op as _mem)
from autoplan.families.transformer.layer import embedding_compute
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec


@lru_cache(maxsize=1024)
def module_extras(model: ModelSpec, cluster: ClusterSpec, tp: int, cp: int, sp: bool,
                  micro_batch: int) -> tuple[tuple[Op, ...], tuple[Op, ...], tuple[Collective, ...]]:
    """Forward ops, backward ops and TP collectives of one MTP module besides its block and output head: the
    embedding lookup of the shifted tokens, the two input RMSNorms and the projection M_k (BF16: DeepSeek-V3 §3.3.1
    keeps the embedding and the normalisations in higher precision; M_k is left in BF16 with them)."""
    gpu, h = cluster.gpu, model.hidden
    tokens = micro_batch * model.seq_len // cp
    emb_f, emb_b, emb_c = embedding_compute(model, cluster, tp, cp, sp, micro_batch)
    # two RMSNorms over b·s·h (read and write), as the layer's norms (Korthikanti et al. 2022 §4.2.2, ÷t with SP)
    norm_bytes = 2 * BF16 * (tokens // tp if sp else tokens) * h * 2
    fwd = (*emb_f, _mem(gpu, "mtp.norms", norm_bytes, 2), _gemm(gpu, "mtp.eh_proj", tokens, h // tp, 2 * h))
    bwd = (*emb_b, *_linear_backward(gpu, "mtp.eh_proj", tokens, h // tp, 2 * h),
           _mem(gpu, "mtp.norms.bwd", 2 * norm_bytes, 2))
    # the column-parallel projection's output gathered over TP (its gradient reduce-scattered back)
    coll = emb_c + ((Collective("all_gather", BF16 * tokens * h),) if tp > 1 else ())
    return fwd, bwd, coll


def extras_activation_bytes(model: ModelSpec, micro_batch: int, tp: int, cp: int, sp: bool) -> float:
    """Bytes one MTP module keeps for its backward besides its block and output head, per micro-batch: the two
    norm inputs (2sbh each) and the projection's 2h-wide input (4sbh), BF16 (Korthikanti et al. 2022 §4.1)."""
    sbh = model.seq_len / cp * micro_batch * model.hidden
    return 8 * sbh / (tp if sp else 1)
