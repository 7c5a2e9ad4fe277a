"""The plan labels' legend that ``autoplan --help`` (and search, show and space) end with, kept here as text so that
--help imports no family: ``options.legend_text()`` builds it from the knobs' definitions, and
tests/cli/test_cli.py checks that the two agree (``python -m autoplan.cli.legend`` rewrites ROWS after a knob
changes)."""

from __future__ import annotations

import sys
from pathlib import Path

ROWS: tuple[tuple[str, str], ...] = (
    ('tpN ppN dpN', 'tensor-, pipeline- and data-parallel degrees'),
    ('cpN', 'context-parallel degree'),
    ('sdN', 'Spatial (domain) parallel degree: each GPU holds a slab of every sample (CNNs)'),
    ('chN', 'Channel parallel degree: input channels of each layer split across GPUs (CNNs)'),
    ('flN', 'Filter parallel degree: output channels of each layer split across GPUs (CNNs)'),
    ('mbN', 'Sequences per micro-batch'),
    ('intV', 'interleaved 1F1B schedule, V model chunks per pipeline rank'),
    ('gpipe', 'pipeline schedule gpipe'),
    ('1f1b', 'pipeline schedule 1f1b'),
    ('zb-h1', 'pipeline schedule zb-h1'),
    ('zbv', 'pipeline schedule zbv'),
    ('dualpipev', 'pipeline schedule dualpipev'),
    ('dualpipe', 'pipeline schedule dualpipe'),
    ('sp', 'Sequence parallelism: norms and dropout split along the sequence over the TP group (needs tp > 1)'),
    ('sel', 'recompute selective (Activation recomputation)'),
    ('full', 'recompute full (Activation recomputation)'),
    ('rmod', 'recompute modules (Activation recomputation)'),
    ('opsac', 'recompute op (Activation recomputation)'),
    ('rlN', 'With --recompute full: layers of each model chunk that recompute, the rest keeping their activations '
            '(0: every layer)'),
    ('aolN', 'Layers whose activations go to host memory after the forward and come back for the backward (no '
             'pipeline, no recompute)'),
    ('z1', 'zero 1 (Optimizer sharding)'),
    ('z2', 'zero 2 (Optimizer sharding)'),
    ('z3', 'zero 3 (Optimizer sharding)'),
    ('oo25', 'optimizer offload pct 25 (Percent of the optimizer state kept on the host and updated by CPU Adam '
             '(needs the distributed optimizer))'),
    ('oo50', 'optimizer offload pct 50 (Percent of the optimizer state kept on the host and updated by CPU Adam '
             '(needs the distributed optimizer))'),
    ('oo75', 'optimizer offload pct 75 (Percent of the optimizer state kept on the host and updated by CPU Adam '
             '(needs the distributed optimizer))'),
    ('oo100', 'optimizer offload pct 100 (Percent of the optimizer state kept on the host and updated by CPU Adam '
              '(needs the distributed optimizer))'),
    ('dewN', "Micro-batches whose output layer's weight-gradient GEMM waits for the pipeline flush (0: none; needs "
             'pp > 1)'),
    ('LF/L', 'uneven pipeline: F layers on the first stage, L on the last (-: an even share)'),
    ('baseline', 'collective policy baseline (Model of the DP/CP/TP collectives spanning network dimensions)'),
    ('themis', 'collective policy themis (Model of the DP/CP/TP collectives spanning network dimensions)'),
    ('fp8', 'precision fp8 (GEMM precision)'),
    ('fp8-current', 'precision fp8-current (GEMM precision)'),
    ('fp8-blockwise', 'precision fp8-blockwise (GEMM precision)'),
    ('mxfp8', 'precision mxfp8 (GEMM precision)'),
    ('fp8pg', 'Keep the weights in FP8 and all-gather them in FP8 (needs an FP8 precision)'),
    ('adam-bf16', "optimizer moments bf16 (Dtype of Adam's first and second moments)"),
    ('a8', "Keep the MLP activation's (SwiGLU's) input for the backward in FP8"),
    ('tpo', 'Overlap the TP all-gathers and reduce-scatters with the GEMMs they feed (Transformer Engine '
            'userbuffers; needs sequence parallelism)'),
    ('rs24/16', 'tp overlap rs 24/16 (Reduce-scatters after proj / fc2 under TP-comm overlap)'),
    ('rs24/8', 'tp overlap rs 24/8 (Reduce-scatters after proj / fc2 under TP-comm overlap)'),
    ('rs32/8', 'tp overlap rs 32/8 (Reduce-scatters after proj / fc2 under TP-comm overlap)'),
    ('rs16/16', 'tp overlap rs 16/16 (Reduce-scatters after proj / fc2 under TP-comm overlap)'),
    ('rsr/24', 'tp overlap rs r/24 (Reduce-scatters after proj / fc2 under TP-comm overlap)'),
    ('rsr/r', 'tp overlap rs r/r (Reduce-scatters after proj / fc2 under TP-comm overlap)'),
    ('rs8', "With TP-comm overlap and an FP8 precision, proj's and fc2's GEMMs write FP8 into the reduce-scatter's "
            'buffer, which carries FP8 (userbuffers fp8_buf)'),
    ('a2a', 'cp comm a2a (Context-parallel exchange)'),
    ('a2a+p2p', 'cp comm a2a+p2p (Context-parallel exchange)'),
    ('epN', 'Expert-parallel degree (MoE): each rank holds experts / ep experts; ep·etp divides tp·cp·dp '
            '(Megatron-Core)'),
    ('etpN', "Expert tensor-parallel degree (MoE): each expert's FFN split over etp ranks"),
    ('epo', "Hide the EP all-to-alls behind another micro-batch's compute (MoE, ep > 1)"),
    ('flex', 'moe dispatcher flex (MoE token dispatcher (ep > 1))'),
    ('fgm', "Transformer Engine's CuTe-DSL fused grouped MLP for the experts (MoE, mxfp8, etp 1, a gated MLP; "
            'Megatron-Core --use-transformer-engine-op-fuser with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): the '
            "activation, the prob scaling, the biases and fc2's input cast run in the GEMMs' epilogues"),
    ('dsfp8', "DeepSeek-V3's own FP8 kernels for fp8-blockwise MoE plans (ep > 1): the dispatch in FP8, the GEMMs "
              'at the tensor-wise rate'),
    ('cef', 'Fused cross-entropy loss: no fp32 copy of the logits, one pass over them (Megatron-Core '
            '--cross-entropy-loss-fusion)'),
    ('tce', 'loss impl torch (Whose cross-entropy loss)'),
    ('tcec', 'loss impl torch-compiled (Whose cross-entropy loss)'),
    ('cg', 'Capture each training iteration as one CUDA graph (Megatron-Core --cuda-graph-impl full_iteration): '
           "kernels replay at the graph's launch cost and the host issues none of them"),
    ('fp8head', 'Run the output layer (LM head) in MXFP8 too (Megatron-Core --fp8-output-proj; mxfp8 only): its '
                "input and the logits' gradient cast, the GEMMs at the FP8 rate"),
    ('fp8attn', 'Run the fused attention in FP8 too (Megatron-Core --fp8-dot-product-attention; an FP8 precision): '
                "the GPU's measured FP8/BF16 attention time ratios"),
    ('rem', "The optimizer keeps only the 16 bits the BF16 weights lack of each fp32 master weight (NeMo's "
            'distributed Adam; needs zero ≥ 1 and BF16 weights)'),
    ('TW', 'sharding table_wise (DLRM embedding sharding)'),
    ('RW', 'sharding row_wise (DLRM embedding sharding)'),
    ('CW', 'sharding column_wise (DLRM embedding sharding)'),
    ('TWRW', 'sharding table_row_wise (DLRM embedding sharding)'),
    ('DPemb', 'sharding data_parallel (DLRM embedding sharding)'),
)
"""(label, meaning) of each plan label, as ``Strategy.legend()`` lists them."""

LEGEND = "\b\nPlan labels (e.g. tp4 pp8 dp32 mb2 int12 sp z1):\n" + "\n".join(f"  {label:<14} {meaning}"
                                                                          for label, meaning in ROWS)
"""The legend as ``options.legend_text()`` writes it (click keeps a paragraph opened with \\b as it is)."""


def _literal(text: str, indent: int, width: int = 116) -> str:
    """``text`` as adjacent string literals of at most ``width`` columns, starting at column ``indent``."""
    words, lines, cur = text.split(" "), [], ""
    for w in words:
        if cur and indent + len(cur) + len(w) + 4 > width:
            lines.append(cur + " ")
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return ("\n" + " " * indent).join(repr(x) for x in lines)


def _write() -> None:
    """Rewrite ROWS in this file from the knobs' definitions."""
    from autoplan.families.strategy import Strategy

    body = "".join(f"    ({label!r}, {_literal(meaning, 7 + len(repr(label)))}),\n"
                   for label, meaning in Strategy.legend())
    path = Path(__file__)
    text = path.read_text()
    head, rest = text.split("ROWS: tuple[tuple[str, str], ...] = (\n", 1)
    tail = "\n" + rest[rest.index(')\n"""(label'):]
    path.write_text(head + "ROWS: tuple[tuple[str, str], ...] = (\n" + body.rstrip("\n") + tail)


if __name__ == "__main__":
    _write()
    sys.exit(0)
