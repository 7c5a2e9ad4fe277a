"""Writes autoplan/data/bridge_runs.yaml: the pre-training rows of NVIDIA Megatron-Bridge's performance summary for the
NeMo 25.09 to 26.08 containers on DGX-H100, B200, B300, GB200 and GB300 that public.yaml does not hold, each with the
configuration its release's performance preset runs.

Input: the tables of docs/performance-summary-archive.md (NVIDIA-NeMo/Megatron-Bridge @4ab94dfad, ``ROWS``, tokens per
second per GPU as printed) and the presets of scripts/performance at each release's tag (``TAGS``, ``PRESETS``; every
setting with the file and line that sets it). Entered: every DGX-H100, B200, GB200 and GB300 pre-training row of a
model autoplan describes (Llama 3 8B and 70B, Llama 3.1 405B, Qwen3 30B-A3B and 235B-A22B) in FP8 (current scaling)
or MXFP8; and, from blackwell_moe.py (the archive and the 26.08 summary @c335a9954), every B200, B300, GB200 and
GB300 row of Qwen3 30B-A3B and 235B-A22B, GPT-OSS 120B and DeepSeek-V3 from 26.02 to 26.08.
Left out, with the reason (``LEFT_OUT``, ``blackwell_moe.LEFT_OUT``): rows already in public.yaml; NVFP4 (not
modelled); Megatron-FSDP runs (FSDP > 0); Nemotron 3 (hybrid Mamba), Kimi-K2 (the Muon optimizer) and DeepSeek-V4;
the supervised fine-tuning and LoRA tables; GPT-OSS 120B on H100 (the same model, GPU and plan as the H100
calibration run, which would test the host constant on its own run); 25.11's GB200 and GB300 Llama 3.1 405B rows
(no preset of v0.2.0 runs their layout); three 26.02.01 B200/B300 MoE rows (their tables and presets disagree).

Run: python benchmarks/data/bridge/make_runs.py   (rewrites autoplan/data/bridge_runs.yaml)
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

HERE = Path(__file__).parent


def _sibling(name: str):
    """benchmarks/data/bridge/<name>.py as a module (this script runs from anywhere, and tests load it by path)."""
    spec = importlib.util.spec_from_file_location(f"bridge_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MOE = _sibling("blackwell_moe")
ROOT = HERE.parents[2]
OUT = ROOT / "autoplan" / "data" / "bridge_runs.yaml"
REPO = "NVIDIA-NeMo/Megatron-Bridge"
ARCHIVE = f"{REPO}: docs/performance-summary-archive.md @4ab94dfad"

TAGS = {"25.09": "v0.1.0rc3", "25.11": "v0.2.0", "26.02": "v0.3.0", "26.02.01": "v0.3.1", "26.04": "v0.4.0",
        "26.04.01": "v0.4.2", "26.06": "v0.5.0"}
"""Release tag of each container: docs/releases/software-versions.md and known-issues.md ("26.02.01 (r0.3.1)");
26.04.01 is v0.4.2 (docs/fern/docs.yml "0.4.2 · 26.04.01", the tag that holds the 26.04.01 summary commit #3997;
its scripts/performance equal v0.4.0's for these rows). 25.09 is v0.1.0rc3 (its yaml perf_matrix; the table was
drafted on main before rc4's cherry-pick of 2025-10-15, which is not what ran)."""

_LLAMA = {"activation": "swiglu", "position": "rope", "norm": "rmsnorm", "bias": False, "tied_embeddings": False,
          "dropout": False}
MODELS = {
    # Llama 3 8B (models/llama/llama_provider.py:173-259 @v0.1.0rc3; the HuggingFace config from v0.2.0)
    "llama3-8b": dict(name="Llama 3 8B", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                      vocab=128256, seq_len=8192, **_LLAMA),
    # the recipes load the HuggingFace configs (AutoBridge.from_hf_pretrained, recipes/llama/llama3.py:665, :1110
    # @v0.3.1): meta-llama/Meta-Llama-3-70B and Meta-Llama-3.1-405B; vocabulary unpadded (setup.py:177)
    "llama3-70b": dict(name="Llama 3 70B", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                       vocab=128256, seq_len=8192, **_LLAMA),
    "llama31-405b": dict(name="Llama 3.1 405B", layers=126, hidden=16384, heads=128, kv_heads=8, ffn_hidden=53248,
                         vocab=128256, seq_len=8192, **_LLAMA),
    # Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B config.json (as public.yaml's 26.02 rows); router fusion on
    # (qwen3_llm_pretrain.py:36 @v0.3.1), forced load balancing (:44): every expert the mean load
    "qwen3-30b-a3b": dict(name="Qwen3 30B-A3B", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128,
                          ffn_hidden=6144, seq_len=4096, vocab=151936, experts=128, top_k=8, params_b=30.5,
                          force_balanced_routing=True, router_fusion=True),
    "qwen3-235b-a22b": dict(name="Qwen3 235B-A22B", layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128,
                            ffn_hidden=12288, seq_len=4096, vocab=151936, experts=128, top_k=8, params_b=235,
                            force_balanced_routing=True, router_fusion=True),
}

ROWS = (
    # release, system, model, precision, GPUs, GBS, MBS, TP, PP, CP, VP, EP, tokens/s/GPU, archive line
    # 25.09 and 25.11 print MXFP8 in parentheses beside FP8 (the footnote, archive line 635); 25.09 names no recipe
    # for the other figure (``TABLE_READINGS``)
    ("25.09", "H100", "llama3-70b", "FP8", 64, 128, 1, 4, 8, 1, 5, 1, 1619, 629),
    ("25.09", "H100", "llama31-405b", "FP8", 1024, 512, 1, 8, 8, 2, 8, 1, 302, 630),
    ("25.09", "GB200", "llama3-8b", "FP8", 8, 128, 2, 1, 1, 1, 1, 1, 31357, 607),
    ("25.09", "GB200", "llama3-8b", "MXFP8", 8, 128, 2, 1, 1, 1, 1, 1, 29925, 607),
    ("25.09", "GB200", "llama3-70b", "MXFP8", 64, 128, 1, 2, 4, 1, 5, 1, 3546, 608),
    ("25.09", "GB200", "llama31-405b", "MXFP8", 128, 64, 1, 4, 8, 2, 8, 1, 578, 609),
    ("25.09", "B200", "llama3-8b", "FP8", 8, 128, 2, 1, 1, 1, 1, 1, 29994, 618),
    ("25.09", "B200", "llama3-8b", "MXFP8", 8, 128, 2, 1, 1, 1, 1, 1, 29388, 618),
    ("25.09", "B200", "llama31-405b", "FP8", 128, 64, 1, 4, 8, 2, 8, 1, 664, 619),
    ("25.09", "B200", "llama31-405b", "MXFP8", 128, 64, 1, 4, 8, 2, 8, 1, 622, 619),
    ("25.11", "H100", "llama3-70b", "FP8", 64, 128, 1, 4, 8, 1, 5, 1, 1602, 590),
    ("25.11", "H100", "llama31-405b", "FP8", 1024, 512, 1, 8, 8, 2, 8, 1, 292, 591),
    ("25.11", "GB200", "llama3-8b", "FP8", 8, 128, 2, 1, 1, 1, 1, 1, 31508, 565),
    ("25.11", "GB200", "llama3-8b", "MXFP8", 8, 128, 2, 1, 1, 1, 1, 1, 29789, 565),
    ("25.11", "B200", "llama3-8b", "FP8", 8, 128, 2, 1, 1, 1, 1, 1, 30624, 578),
    ("25.11", "B200", "llama3-8b", "MXFP8", 8, 128, 2, 1, 1, 1, 1, 1, 29521, 578),
    ("25.11", "B200", "llama31-405b", "FP8", 128, 64, 1, 4, 8, 2, 8, 1, 661, 579),
    ("25.11", "B200", "llama31-405b", "MXFP8", 128, 64, 1, 4, 8, 2, 8, 1, 624, 579),
    # the table prints MBS 2; the GB300 preset of v0.2.0 runs MBS 4 (``TABLE_READINGS``)
    ("25.11", "GB300", "llama3-8b", "FP8", 8, 128, 4, 1, 1, 1, 1, 1, 37556, 552),
    ("25.11", "GB300", "llama3-8b", "MXFP8", 8, 128, 4, 1, 1, 1, 1, 1, 36108, 552),
    ("26.02", "H100", "llama3-70b", "FP8", 64, 256, 1, 4, 8, 1, 5, 1, 1621, 489),
    ("26.02.01", "H100", "llama3-70b", "FP8", 64, 256, 1, 4, 8, 1, 5, 1, 1639, 405),
    ("26.04", "H100", "llama3-70b", "FP8", 64, 256, 1, 4, 8, 1, 5, 1, 1633, 308),
    ("26.04.01", "H100", "llama3-70b", "FP8", 64, 256, 1, 4, 8, 1, 5, 1, 1664, 207),
    ("26.02", "H100", "llama31-405b", "FP8", 1024, 1536, 1, 8, 8, 2, 8, 1, 311, 501),
    ("26.04.01", "H100", "llama31-405b", "FP8", 1024, 1536, 1, 8, 8, 2, 8, 1, 328, 219),
    ("26.06", "H100", "llama31-405b", "FP8", 1024, 1536, 1, 8, 8, 2, 8, 1, 326, 106),
    # 26.02.01's row prints 26.02's TP1 PP2 VP12 EP8; its preset ran PP1 EP16 (``PRESETS``)
    ("26.02.01", "H100", "qwen3-30b-a3b", "FP8", 16, 1024, 1, 1, 1, 1, 1, 16, 9058, 445),
    ("26.04", "H100", "qwen3-30b-a3b", "FP8", 16, 1024, 1, 1, 1, 1, 1, 16, 8901, 348),
    ("26.04.01", "H100", "qwen3-30b-a3b", "FP8", 16, 1024, 1, 1, 1, 1, 1, 16, 8960, 248),
    ("26.06", "H100", "qwen3-30b-a3b", "FP8", 16, 1024, 1, 1, 1, 1, 1, 16, 8826, 132),
    ("26.02.01", "H100", "qwen3-235b-a22b", "FP8", 256, 8192, 1, 2, 8, 1, 4, 32, 1611, 454),
    ("26.04", "H100", "qwen3-235b-a22b", "FP8", 256, 8192, 1, 2, 8, 1, 4, 32, 1686, 357),
    ("26.04.01", "H100", "qwen3-235b-a22b", "FP8", 256, 8192, 1, 2, 8, 1, 4, 32, 1712, 258),
    ("26.02", "GB200", "llama3-70b", "MXFP8", 64, 256, 1, 2, 4, 1, 5, 1, 3613, 486),
    ("26.02.01", "GB200", "llama3-70b", "MXFP8", 64, 256, 1, 2, 4, 1, 5, 1, 3837, 402),
    ("26.04", "GB200", "llama3-70b", "MXFP8", 64, 256, 1, 2, 4, 1, 5, 1, 3828, 305),
    ("26.04.01", "GB200", "llama3-70b", "MXFP8", 64, 256, 1, 2, 4, 1, 5, 1, 3712, 205),
    ("26.02", "GB200", "llama31-405b", "FP8", 256, 1536, 1, 4, 16, 1, 4, 1, 793, 500),
    ("26.02.01", "GB200", "llama31-405b", "FP8", 256, 1536, 1, 4, 16, 1, 4, 1, 818, 416),
    ("26.04", "GB200", "llama31-405b", "FP8", 256, 1536, 1, 4, 16, 1, 4, 1, 842, 319),
    ("26.04.01", "GB200", "llama31-405b", "FP8", 256, 1536, 1, 4, 16, 1, 4, 1, 864, 216),
    ("26.06", "GB200", "llama31-405b", "FP8", 256, 1536, 1, 4, 16, 1, 4, 1, 843, 103),
    ("26.02", "GB200", "llama31-405b", "MXFP8", 256, 1536, 1, 4, 16, 1, 8, 1, 786, 498),
    ("26.02.01", "GB200", "llama31-405b", "MXFP8", 256, 1536, 1, 4, 16, 1, 8, 1, 775, 414),
    ("26.04", "GB200", "llama31-405b", "MXFP8", 256, 1536, 1, 4, 16, 1, 8, 1, 793, 317),
    ("26.04.01", "GB200", "llama31-405b", "MXFP8", 256, 1536, 1, 4, 16, 1, 8, 1, 800, 217),
    ("26.06", "GB200", "llama31-405b", "MXFP8", 256, 1536, 1, 4, 16, 1, 8, 1, 783, 104),
    # GB300: 26.02.01's 405B FP8 row prints the MXFP8 layout (TP2 CP2) and its 70B row MBS 2 without VP, which no
    # preset of that tag sets (``TABLE_READINGS``)
    ("26.02", "GB300", "llama3-70b", "MXFP8", 64, 256, 1, 1, 4, 1, 5, 1, 4596, 485),
    ("26.02.01", "GB300", "llama3-70b", "MXFP8", 64, 256, 1, 1, 4, 1, 5, 1, 4798, 401),
    ("26.04", "GB300", "llama3-70b", "MXFP8", 64, 256, 1, 1, 4, 1, 5, 1, 4742, 304),
    ("26.04.01", "GB300", "llama3-70b", "MXFP8", 64, 256, 1, 1, 4, 1, 5, 1, 4864, 202),
    ("26.02", "GB300", "llama31-405b", "FP8", 256, 1536, 1, 4, 8, 1, 4, 1, 988, 499),
    ("26.02.01", "GB300", "llama31-405b", "FP8", 256, 1536, 1, 4, 8, 1, 4, 1, 1024, 415),
    ("26.04", "GB300", "llama31-405b", "FP8", 256, 1536, 1, 4, 8, 1, 4, 1, 1036, 318),
    ("26.04.01", "GB300", "llama31-405b", "FP8", 256, 1536, 1, 4, 8, 1, 4, 1, 1024, 213),
    ("26.06", "GB300", "llama31-405b", "FP8", 256, 1536, 1, 4, 8, 1, 4, 1, 1048, 100),
    ("26.02", "GB300", "llama31-405b", "MXFP8", 256, 1536, 1, 2, 8, 2, 4, 1, 931, 497),
    ("26.02.01", "GB300", "llama31-405b", "MXFP8", 256, 1536, 1, 2, 8, 2, 4, 1, 949, 413),
    ("26.04", "GB300", "llama31-405b", "MXFP8", 256, 1536, 1, 2, 8, 2, 4, 1, 968, 316),
    ("26.04.01", "GB300", "llama31-405b", "MXFP8", 256, 1536, 1, 2, 8, 2, 4, 1, 960, 214),
    ("26.06", "GB300", "llama31-405b", "MXFP8", 256, 1536, 1, 2, 8, 2, 4, 1, 952, 101),
)
"""The entered rows of the archive's tables (line numbers @4ab94dfad), each with the layout its release's preset
runs."""

TABLE_READINGS = {
    # 25.09's unbracketed figures name no recipe, and v0.1.0rc3's fp8_cs and fp8_ds presets are identical
    # (configs/llama3/llama3_70b_llm_pretrain.yaml:56-77): current scaling is entered (dgxc-benchmarking's Llama
    # launcher for nemo:25.09 defaults to FP8_RECIPE=cs, llama3.1/launch.sh:47 @v25.10), delayed scaling (the
    # script's --fp8_recipe default ds, argument_parser.py:106) is the variant
    **{("25.09", system, model, "FP8"): ("delayed scaling (the script's default recipe)", {"precision": "fp8"})
       for system, model in (("H100", "llama3-70b"), ("H100", "llama31-405b"), ("GB200", "llama3-8b"),
                             ("B200", "llama3-8b"), ("B200", "llama31-405b"))},
    # GB300 Llama 3 8B at v0.2.0: MBS 4, GA 4 (configs/llama3/workload_base_configs.py:158-165)
    ("25.11", "GB300", "llama3-8b"): ("the table's MBS 2", {"microbatch": 2}),
    # the table prints PP2 VP12 EP8, 26.02's preset; v0.3.1's runs PP1 EP16 (commit f29a269f8)
    ("26.02.01", "H100", "qwen3-30b-a3b"): ("the table's TP1 PP2 VP12 EP8", {
        "pp": 2, "ep": 8, "virtual_stages_per_rank": 12, "interleaved_schedule": True, "overlap_p2p_comm": True}),
    # GB300_FP8_CS_V2 is TP4 PP8 CP1 VP4 at every tag (llama31_workload_base_configs.py:225-235); TP2 CP2 is the
    # MXFP8 preset's layout
    ("26.02.01", "GB300", "llama31-405b", "FP8"): ("the table's TP2 CP2", {"tp": 2, "cp": 2}),
    # GB300_FP8_MX_V2 is MBS 1 PP4 VP5 at every tag (llama3_workload_base_configs.py:219-223)
    ("26.02.01", "GB300", "llama3-70b"): ("the table's MBS 2 without VP", {
        "microbatch": 2, "virtual_stages_per_rank": 1, "interleaved_schedule": False, "overlap_p2p_comm": False}),
}
"""Rows whose table prints another layout than the preset of their release: that reading as a variant (not
counted), by (release, system, model[, precision])."""

LEFT_OUT = {
    "H100 GPT OSS 120B, 26.02.01 / 26.04 / 26.04.01 (5984, 5810, 5824)":
        "the model, GPU and plan of the H100 calibration run (public.yaml bridge-h100-bf16-gpt-oss-120b-64gpu-26.02)",
    "NVFP4 rows": "NVFP4 GEMMs are not modelled",
    "GB200 Llama 3 70B FP8, GB300 Llama 3 70B FP8": "Megatron-FSDP (FSDP 64), not modelled",
    "25.11 GB200 / GB300 Llama 3.1 405B (813, 999)": "no preset of v0.2.0-v0.2.2 runs their 256-GPU layout (its presets "
                                                     "are FSDP at 128 GPUs); the settings are not determinable",
    "25.09 / 25.11 H100 Llama 3 8B": "Megatron-FSDP (FSDP 8)",
    "Nemotron 3 Nano / Super, Kimi-K2, DeepSeek-V4 Flash": "hybrid Mamba layers; the Muon optimizer; a new attention "
                                                            "not modelled",
    "26.06 Llama 3 70B": "supervised fine-tuning and LoRA tables, not pre-training",
    "H100 Qwen3 and GPT OSS, 26.02": "already in public.yaml",
}

_DENSE = {
    # the dense rows (llama3_llm_pretrain.py, llama31_llm_pretrain.py, recipes/llama/llama3.py; v0.1.0rc3's output-
    # layer deferral in ``RELEASE_KNOBS``, the Llama 3 8B presets' CUDA graphs in ``NEEDS``):
    # no recompute (llama3.py:705, :1156 @v0.3.1); no CUDA graphs (cuda_graph_impl "none", :697, :1148); the
    # distributed optimizer with overlapped gradient reduction and parameter gathers (:727-734, :1178-1184);
    # 16-bit gradient reduction (llama3_llm_pretrain.py:43-44); cross-entropy fusion, impl te (:702-703;
    # scripts/performance/utils/overrides.py:64); no embedding-wgrad deferral (training/comm_overlap.py:433-434)
    "recompute": "none", "distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True,
    "grad_reduce_in_fp32": False, "cross_entropy_fusion": True,
    # tp_comm_overlap with the userbuffers config the script picks (llama3_llm_pretrain.py:203, 209;
    # llama31_llm_pretrain.py:188, 194 @v0.3.0): proj's and fc2's reduce-scatters are ring exchanges, no FP8
    # buffer (comm_overlap.py:108-198: userbuffers_fp8_{h100,b200}_h*_tp*)
    "tp_comm_overlap": True, "tp_overlap_rs": "r/r",
}
_MOE = {
    # qwen3_llm_pretrain.py @v0.3.1: no recompute (:33-35), 16-bit gradient reduction (:41-42); the distributed
    # optimizer with overlapped reduction and gathers; cross-entropy fusion, impl te (overrides.py:65)
    "recompute": "none", "distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True,
    "grad_reduce_in_fp32": False, "cross_entropy_fusion": True, "etp": 1,
}
PRESETS = {
    # LLAMA3_70B_PRETRAIN_CONFIG_H100_FP8_CS_V2 (llama3_workload_base_configs.py:339-344, the v2 default)
    ("H100", "llama3-70b"): _DENSE,
    # LLAMA31_405B_PRETRAIN_CONFIG_H100_FP8_CS_V2 (llama31_workload_base_configs.py:297-300); the embedding and the
    # loss each count as a layer in the pipeline split (llama3.py:1132-1133 @v0.3.1)
    ("H100", "llama31-405b"): {**_DENSE, "account_for_ends": True},
    # LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_MX_V2 (llama3_workload_base_configs.py:249-254)
    ("GB200", "llama3-70b"): _DENSE,
    # LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2 / _FP8_MX_V2 (llama31_workload_base_configs.py:262-281)
    ("GB200", "llama31-405b"): {**_DENSE, "account_for_ends": True},
    # Llama 3 8B on one node at TP1 (v0.1.0rc3 configs/llama3/llama3_8b_llm_pretrain.yaml:78-115, v0.2.0
    # configs/llama3/workload_base_configs.py:158-215): no TP-comm overlap, no pipeline
    **{(system, "llama3-8b"): _DENSE for system in ("GB200", "B200", "GB300")},
    # B200 Llama 3.1 405B (v0.1.0rc3 configs/llama31/llama31_405b_llm_pretrain.yaml:75-93, v0.2.0
    # workload_base_configs.py:125-136): userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192
    ("B200", "llama31-405b"): {**_DENSE, "account_for_ends": True},
    # GB300_FP8_MX_V2 of Llama 3 70B (llama3_workload_base_configs.py:219-223: TP1, so no TP-comm overlap);
    # GB300_FP8_CS_V2 / _FP8_MX_V2 of Llama 3.1 405B (llama31_workload_base_configs.py:225-243), the userbuffers
    # config userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 at TP 4 and TP 2 (llama31_llm_pretrain.py:63)
    ("GB300", "llama3-70b"): _DENSE,
    ("GB300", "llama31-405b"): {**_DENSE, "account_for_ends": True},
    # QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V2 from v0.3.1 (qwen3_workload_base_configs.py:408-415; commit
    # f29a269f8, #2477): PP1, EP16, the flex dispatcher with HybridEP (qwen3_llm_pretrain.py:314-315,
    # hybridep_num_sms 32: overrides.py:70), no EP overlap
    ("H100", "qwen3-30b-a3b"): {**_MOE, "ep_overlap": False, "moe_dispatcher": "flex"},
    # QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2 (qwen3_workload_base_configs.py:259-262 @v0.3.1, 273-276
    # @v0.4.0): the all-to-all dispatcher, EP overlap with delayed wgrad (:179), no TP-comm overlap
    # (qwen3_llm_pretrain.py:183), the embedding and loss counted in the pipeline split
    # (recipes/qwen/qwen3_moe.py:166-167)
    ("H100", "qwen3-235b-a22b"): {**_MOE, "ep_overlap": True, "tp_comm_overlap": False, "account_for_ends": True},
}
NEEDS = {("25.09", system, "llama3-8b"): ["cuda_graphs"] for system in ("GB200", "B200", "GB300")}
"""What a preset runs that autoplan cannot describe, by (release, system, model): Llama 3 8B's Blackwell presets at
v0.1.0rc3 capture CUDA graphs per layer (utils/helpers.py:114-120); v0.2.0's capture the whole iteration
(``RELEASE_KNOBS``)."""

RELEASE_KNOBS = {
    # v0.1.0rc3's recipes defer the output layer's weight gradient (recipes/llama/llama3_70b.py:219-227: limit 22;
    # llama31_405b.py:235-243: limit 50), where a pipeline carries it
    ("25.09", "llama3-70b"): {"embedding_wgrad_deferral": 22},
    ("25.09", "llama31-405b"): {"embedding_wgrad_deferral": 50},
    # v0.2.0's B200 405B MXFP8 preset turns the parameter gathers' overlap off (llama31_llm_pretrain.py:140-143)
    ("25.11", "B200", "llama31-405b", "MXFP8"): {"overlap_param_gather": False},
    # v0.2.0's Llama 3 8B presets on B200, GB200 and GB300 capture the whole iteration in one CUDA graph
    # (configs/llama3/workload_base_configs.py:158-215: cuda_graph_impl "local", cuda_graph_scope "full_iteration")
    ("25.11", "llama3-8b"): {"cuda_graphs": True},
}
"""Settings of one release's preset beyond ``PRESETS``, by (release, model) or (release, system, model, precision)."""

PRECISION = {
    # scripts/performance/utils/precision.py:28-34: "FP8" is fp8_cs, Transformer Engine's tensor-wise current
    # scaling with FP8 weights (recipes mixed_precision.py:284-289 @v0.3.0); MXFP8 is fp8_mx (:249-252)
    "FP8": {"precision": "fp8-current", "fp8_param_gather": True},
    "MXFP8": {"precision": "mxfp8", "fp8_param_gather": True},
}
HARDWARE = {
    "H100": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "cluster": "NVIDIA DGX H100"},
    "GB200": {"gpu": "B200 (GB200 NVL72 superchip)", "gpus_per_node": 4, "cluster_spec": "gb200-nvl72",
              "cluster": "NVIDIA DGX GB200 NVL72"},
    "GB300": {"gpu": "B300 (GB300 NVL72 superchip)", "gpus_per_node": 4, "cluster_spec": "gb300-nvl72",
              "cluster": "NVIDIA DGX GB300 NVL72"},
    "B200": {"gpu": "B200-SXM-180GB", "gpus_per_node": 8, "cluster_spec": "dgx-b200", "cluster": "NVIDIA DGX B200"},
    "B300": {"gpu": "B300-SXM-270GB", "gpus_per_node": 8, "cluster_spec": "dgx-b300", "cluster": "NVIDIA DGX B300"},
}


def strategy(release: str, system: str, model: str, precision: str, gbs: int, mbs: int, tp: int, pp: int, cp: int,
             vp: int, ep: int) -> dict:
    """The row's plan: the table's degrees and batches, its preset's knobs."""
    knobs = {**PRESETS[(system, model)], **RELEASE_KNOBS.get((release, model), {}),
             **RELEASE_KNOBS.get((release, system, model, precision), {})}
    deferral = knobs.pop("embedding_wgrad_deferral", 0)
    ends = knobs.pop("account_for_ends", False)
    st = {"tp": tp, "pp": pp, "cp": cp, "microbatch": mbs, "global_batch": gbs, "virtual_stages_per_rank": vp,
          "interleaved_schedule": vp > 1, "sequence_parallel": tp > 1, **PRECISION[precision], **knobs}
    if ep > 1:
        st["ep"] = ep
    if tp == 1:
        st["tp_comm_overlap"] = False          # comm_overlap.py:440-442: switched off below TP 2
        st.pop("tp_overlap_rs", None)
    st |= _pipeline(MODELS[model]["layers"], pp, vp, ends)
    if deferral and pp > 1:
        st["embedding_wgrad_deferral"] = deferral
    return st


def _pipeline(layers: int, pp: int, vp: int, ends: bool) -> dict:
    """The pipeline's transfers overlapped under VP (comm_overlap.py:451-457) and, where the embedding and the loss
    each count as a layer in the split, the end ranks' layers: (layers + 2) / (pp·vp) a virtual stage, the first and
    last one less."""
    if pp == 1:
        return {}
    st: dict = {"overlap_p2p_comm": vp > 1}
    if ends:
        per_chunk = (layers + 2) // (pp * vp)
        st["first_stage_layers"] = st["last_stage_layers"] = per_chunk - 1 + (vp - 1) * per_chunk
    return st


def _entry(case_id: str, release: str, system: str, gpus: int, model: dict, st: dict, tokens: int,
           sources: list[str]) -> dict:
    """A row of the file: its source, hardware, model and plan, and the step time its tokens/s/GPU give."""
    seq = model["seq_len"]
    return {
        "id": case_id,
        "group": f"NVIDIA Megatron-Bridge performance summary, {release} container, {system}",
        "source": {"repo_files": sources},
        "hardware": {**HARDWARE[system], "num_gpus": gpus},
        "model": model,
        "strategy": st,
        "measured": {"tokens_per_s_per_gpu": tokens},
        "derived": {"iteration_time_s": round(st["global_batch"] * seq / (tokens * gpus), 4)},
        "held_out": True,
        "verification": "iteration_time_s = GBS x sequence length / (tokens/s/GPU x GPUs); entered with the settings "
                        "of the release's performance preset, never tuned to the row",
    }


def case(row: tuple) -> dict:
    release, system, model, precision, gpus, gbs, mbs, tp, pp, cp, vp, ep, tokens, line = row
    tag = TAGS[release]
    st = strategy(release, system, model, precision, gbs, mbs, tp, pp, cp, vp, ep)
    c = _entry(f"bridge-{system.lower()}-{precision.lower()}-{model}-{gpus}gpu-{release}", release, system, gpus,
               {**MODELS[model], "dtype": precision.lower()}, st, tokens,
               [f"{ARCHIVE} (line {line}: \"{release} NeMo Container\", DGX-{system})",
                f"{REPO}: scripts/performance @{tag}"])
    if (release, system, model) in NEEDS:
        c["needs"] = NEEDS[(release, system, model)]
    reading = TABLE_READINGS.get((release, system, model), TABLE_READINGS.get((release, system, model, precision)))
    if reading:
        c["variants"] = [{"label": reading[0], "strategy": reading[1]}]
    return c


def moe_case(row: tuple) -> dict:
    """A Blackwell MoE row of blackwell_moe.ROWS with its release's preset (blackwell_moe.preset)."""
    release, system, model, precision, gpus, gbs, mbs, tp, pp, cp, vp, ep, tokens, where = row
    models = {**MODELS, **MOE.MODELS}
    knobs, needs = MOE.preset(release, system, model)
    ends = knobs.pop("account_for_ends", False)
    st = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "microbatch": mbs, "global_batch": gbs, "virtual_stages_per_rank": vp,
          "interleaved_schedule": vp > 1, "sequence_parallel": False, **knobs}
    st |= PRECISION[precision] if precision in PRECISION else {"precision": "bf16"}
    st |= _pipeline(models[model]["layers"], pp, vp, ends)
    if model == "deepseek-v3" and pp > 1:
        st["first_stage_layers"], st["last_stage_layers"] = MOE.deepseek_stage_layers(pp)
    table, line = where.split(":")
    label = f"\"{release} NeMo Container\", DGX-{system}"
    source = f"{MOE.ARCHIVE if table == 'archive' else MOE.SUMMARY} (line {line}: {label})"
    tag = {**TAGS, **MOE.TAGS}[release]
    path = "src/megatron/bridge/perf_recipes" if tag == "v0.6.0" else "scripts/performance"
    suffix = f"-gbs{gbs}" if (model, gbs) == ("deepseek-v3", 15360) else ""     # 26.06 has two GB300 rows
    c = _entry(f"bridge-{system.lower()}-{precision.lower()}-{model}-{gpus}gpu-{release}{suffix}", release, system,
               gpus, {**models[model], "dtype": precision.lower()}, st, tokens, [source, f"{REPO}: {path} @{tag}"])
    if needs:
        c["needs"] = needs
    gap = MOE.known_gap(release, model)
    if gap:
        c["known_gap"] = gap
    return c


HOST_CALIBRATION = {
    "dgx-b200": ("B200", ("bridge-b200-mxfp8-qwen3-30b-a3b-8gpu-26.02", "bridge-b200-mxfp8-qwen3-30b-a3b-8gpu-26.02.01")),
    "gb200-nvl72": ("GB200", ("bridge-gb200-mxfp8-qwen3-30b-a3b-8gpu-26.02",
                              "bridge-gb200-mxfp8-qwen3-30b-a3b-8gpu-26.02.01")),
}
"""The host calibration sets: for each host, the two earliest releases' rows (26.02, 26.02.01) of the smallest MoE
model (Qwen3 30B-A3B on 8 GPUs, whose small experts leave the host the most to issue per GPU second: the runs that
identify the host's time best), chosen by that rule before fitting. ``autoplan calibrate`` fits the spec's
``host_launch_us`` to them (``host_calibration_text``); validate leaves them out of its figures and names them."""


def host_calibration_file(spec: str) -> Path:
    """The file ``host_calibration_text`` writes for ``spec``."""
    return ROOT / "cluster_specs" / "calibration" / f"bridge-{HOST_CALIBRATION[spec][0].lower()}-host.yaml"


def _calibrates(case_id: str) -> str | None:
    """What a host calibration run calibrates (None for a counted run)."""
    for spec, (system, ids) in HOST_CALIBRATION.items():
        if case_id in ids:
            return (f"{system} hosts' host_launch_us (cluster_specs/{spec}.toml); left out of validate's figures")
    return None


HEADER = ("# Generated by benchmarks/data/bridge/make_runs.py: NVIDIA Megatron-Bridge's performance summary, NeMo\n"
          "# 25.09 to 26.08 containers, DGX-H100, B200, B300, GB200 and GB300 pre-training rows not in public.yaml\n"
          "# (tokens/s/GPU as printed), each with its release's performance preset. Do not edit by hand.\n")


def build() -> tuple[str, int]:
    cases = [case(r) for r in ROWS] + [moe_case(r) for r in MOE.ROWS]
    for c in cases:
        what = _calibrates(c["id"])
        if what:
            c["calibration"] = what
    body = yaml.safe_dump({"title": "NVIDIA Megatron-Bridge performance summary, NeMo 25.09-26.08 (measured)",
                           "cases": cases}, sort_keys=False, width=120)
    return HEADER + body, len(cases)


def host_calibration_text(spec: str) -> str:
    """A host calibration set (``HOST_CALIBRATION``) as a validation file (``autoplan calibrate`` reads it)."""
    system, ids = HOST_CALIBRATION[spec]
    rows = yaml.safe_load(build()[0])["cases"]
    cases = [{k: v for k, v in c.items() if k != "calibration"} for c in rows if c["id"] in ids]
    header = (f"# Generated by benchmarks/data/bridge/make_runs.py: the {system} host calibration set (HOST_CALIBRATION),\n"
              f"# two runs of autoplan/data/bridge_runs.yaml that validate leaves out. Fitted with:\n"
              f"#   autoplan calibrate {host_calibration_file(spec).relative_to(ROOT)} --base {spec} --fit host_launch_us\n")
    return header + yaml.safe_dump({"title": f"Megatron-Bridge {system} host calibration set", "cases": cases},
                                   sort_keys=False, width=120)


def main() -> None:
    text, n = build()
    OUT.write_text(text)
    for spec in HOST_CALIBRATION:
        host_calibration_file(spec).write_text(host_calibration_text(spec))
    print(f"{n} runs written to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
