"""The Blackwell mixture-of-experts rows of Megatron-Bridge's performance summary (26.02 to 26.08) and the settings
each release's performance preset runs them with: Qwen3 30B-A3B and 235B-A22B, GPT-OSS 120B and DeepSeek-V3 on
DGX-GB200, DGX-GB300, DGX-B200 and DGX-B300 (``make_runs.py`` writes them with the dense and H100 rows).

Input: the tables of docs/performance-summary-archive.md and docs/performance-summary.md (26.08) at
NVIDIA-NeMo/Megatron-Bridge @c335a9954 (``ROWS``, tokens per second per GPU as printed) and the presets at each
release's tag: scripts/performance/configs/{qwen,gpt_oss,deepseek}/*_workload_base_configs.py and *_llm_pretrain.py,
scripts/performance/utils/overrides.py up to v0.5.1; src/megatron/bridge/perf_recipes/<model>/<gpu>/ at v0.6.0.
26.06.01 is v0.5.1 and 26.08 v0.6.0 (docs/versions1.json: "0.5.1 · 26.06.01", "0.6.0 · 26.08").

Every preset's parallel degrees and batches equal its table row, except GPT-OSS's 26.02.01 B200 and B300 rows and Qwen3
235B's 26.02.01 B300 row (``LEFT_OUT``).
From 26.06 the GB200/GB300 presets capture the whole iteration in one CUDA graph (the plan's ``cuda_graphs``), run
the experts through the CuTe-DSL fused grouped MLP (``fused_grouped_mlp``) and, for DeepSeek-V3 and GPT-OSS, the LM
head in MXFP8 (``fp8_output_proj``: ``fp8_output_layer``), and FP8 attention where a preset sets it
(``fp8_dot_product_attention``: ``fp8_attention``). What a preset runs that autoplan cannot describe is the row's
``needs``: Transformer Engine's per-layer CUDA graphs of some modules, 26.06's paged stash of the experts' activations with a per-rank capacity of 1.5
(``moe_paged_stash``, ``moe_expert_rank_capacity_factor``), and recompute module lists other than autoplan's
``modules`` (norms, MLA up-projections and expert activations together).
"""
from __future__ import annotations

ARCHIVE = "NVIDIA-NeMo/Megatron-Bridge: docs/performance-summary-archive.md @c335a9954"
SUMMARY = "NVIDIA-NeMo/Megatron-Bridge: docs/performance-summary.md @c335a9954"
TAGS = {"26.06.01": "v0.5.1", "26.08": "v0.6.0"}
"""The releases the dense rows do not have (docs/versions1.json @c335a9954, lines 7 and 13)."""

LATE_RELEASES = ("26.06", "26.06.01", "26.08")
"""Releases whose GB200/GB300 presets run full-iteration CUDA graphs, EP overlap and the 26.06 MoE knobs (``LATE``;
v0.6.0 perf_recipes alike)."""

MODELS = {
    # deepseek-ai/DeepSeek-V3 as the recipe loads it (AutoBridge.from_hf_pretrained, recipes/deepseek/deepseek_v3.py;
    # v0.3.0 models/deepseek/deepseek_provider.py:166-191): MLA, 3 dense layers, 1 shared expert, one MTP layer
    # (mtp_num_layers 1, deepseek_v3.py:84 @v0.3.1); the catalog's deepseek-v3 supplies the MLA ranks and MTP
    "deepseek-v3": dict(name="DeepSeek-V3", layers=61, hidden=7168, heads=128, kv_heads=128, head_dim=128,
                        ffn_hidden=18432, vocab=129280, seq_len=4096, experts=256, top_k=8, params_b=671,
                        force_balanced_routing=True, router_fusion=True),
    # openai/gpt-oss-120b (v0.3.0 models/gpt_oss/gpt_oss_provider.py:44-98; later the HF config): as public.yaml's
    # H100 rows; the catalog's gpt-oss-120b supplies the sliding window on every other layer and the clamped GLU
    "gpt-oss-120b": dict(name="GPT OSS 120B", layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64,
                         ffn_hidden=2880, vocab=201088, seq_len=4096, experts=128, top_k=4, params_b=116.8,
                         force_balanced_routing=True, router_fusion=True, aux_loss=False),
}

ROWS = (
    # release, system, model, precision, GPUs, GBS, MBS, TP, PP, CP, VP, EP, tokens/s/GPU, file:line @c335a9954
    ("26.02", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 2, 1, 2, 1, 8, 32, 4612, "archive:507"),
    ("26.02", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 3955, "archive:508"),
    ("26.02", "B200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 16, 1, 1, 8, 2689, "archive:510"),
    ("26.02", "GB300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 19412, "archive:516"),
    ("26.02", "GB200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 15784, "archive:517"),
    ("26.02", "B200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 8047, "archive:519"),
    ("26.02", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 30376, "archive:526"),
    ("26.02", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 26084, "archive:527"),
    ("26.02", "B200", "qwen3-30b-a3b", "MXFP8", 8, 512, 1, 1, 1, 1, 1, 8, 9691, "archive:529"),
    ("26.02", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 1, 32, 6583, "archive:536"),
    ("26.02", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 1, 32, 5448, "archive:537"),
    ("26.02", "B200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 1, 8, 3805, "archive:539"),
    ("26.02.01", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 2, 1, 2, 1, 8, 32, 4691, "archive:422"),
    ("26.02.01", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 4021, "archive:423"),
    ("26.02.01", "B200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 16, 1, 1, 8, 2790, "archive:425"),
    ("26.02.01", "GB300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 19366, "archive:431"),
    ("26.02.01", "GB200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 15754, "archive:432"),
    ("26.02.01", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 30411, "archive:441"),
    ("26.02.01", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 26373, "archive:442"),
    ("26.02.01", "B200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 26695, "archive:444"),
    ("26.02.01", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 1, 32, 6583, "archive:451"),
    ("26.02.01", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 1, 32, 5530, "archive:452"),
    ("26.04", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 2, 1, 2, 1, 8, 32, 4965, "archive:325"),
    ("26.04", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 4193, "archive:326"),
    ("26.04", "B200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 16, 1, 1, 8, 2815, "archive:328"),
    ("26.04", "GB300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 19275, "archive:334"),
    ("26.04", "GB200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 15938, "archive:335"),
    ("26.04", "B200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 8, 13045, "archive:337"),
    ("26.04", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 31470, "archive:344"),
    ("26.04", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 26032, "archive:345"),
    ("26.04", "B200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 26859, "archive:347"),
    ("26.04", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 12, 32, 6994, "archive:354"),
    ("26.04", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 3, 32, 5672, "archive:355"),
    ("26.04.01", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 2, 1, 2, 1, 8, 32, 4992, "archive:225"),
    ("26.04.01", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 4256, "archive:226"),
    ("26.04.01", "B200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 8, 1, 2, 32, 3328, "archive:228"),
    ("26.04.01", "GB300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 19200, "archive:234"),
    ("26.04.01", "GB200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 16640, "archive:235"),
    ("26.04.01", "B200", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 8, 13568, "archive:237"),
    ("26.04.01", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 31744, "archive:244"),
    ("26.04.01", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 26112, "archive:245"),
    ("26.04.01", "B200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 27136, "archive:247"),
    ("26.04.01", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 12, 32, 6944, "archive:254"),
    ("26.04.01", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 3, 32, 5680, "archive:255"),
    ("26.04.01", "B200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 1, 8, 3776, "archive:257"),
    ("26.06", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 2, 1, 8, 32, 6338, "archive:112"),
    ("26.06", "GB300", "deepseek-v3", "MXFP8", 256, 15360, 1, 1, 2, 1, 8, 32, 6422, "archive:113"),
    ("26.06", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 4969, "archive:114"),
    ("26.06", "GB300", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 16, 33166, "archive:121"),
    ("26.06", "GB200", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 64, 28947, "archive:122"),
    ("26.06", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 45275, "archive:129"),
    ("26.06", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 40706, "archive:130"),
    ("26.06", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 12, 32, 9015, "archive:138"),
    ("26.06", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 3, 32, 7376, "archive:139"),
    ("26.06.01", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 2, 1, 8, 32, 6304, "archive:50"),
    ("26.06.01", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 4928, "archive:51"),
    ("26.06.01", "GB300", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 16, 20288, "archive:57"),
    ("26.06.01", "GB200", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 64, 18304, "archive:58"),
    ("26.06.01", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 44544, "archive:64"),
    ("26.06.01", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 40960, "archive:65"),
    ("26.06.01", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 12, 32, 9008, "archive:71"),
    ("26.06.01", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 3, 32, 7360, "archive:72"),
    ("26.08", "GB300", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 2, 1, 8, 32, 6288, "summary:45"),
    ("26.08", "GB200", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 4, 1, 4, 64, 4912, "summary:46"),
    ("26.08", "GB300", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 16, 33024, "summary:59"),
    ("26.08", "GB200", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 64, 28672, "summary:60"),
    ("26.08", "GB300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 44544, "summary:66"),
    ("26.08", "GB200", "qwen3-30b-a3b", "MXFP8", 8, 512, 4, 1, 1, 1, 1, 8, 39936, "summary:67"),
    ("26.08", "GB300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 4, 1, 12, 32, 8816, "summary:73"),
    ("26.08", "GB200", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 3, 32, 7280, "summary:74"),
    # DGX-B300 (26.06.01 and 26.08 print none)
    ("26.02", "B300", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 16, 1, 1, 8, 2983, "archive:509"),
    ("26.02", "B300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 64, 8359, "archive:518"),
    ("26.02", "B300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 29521, "archive:528"),
    ("26.02", "B300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 1, 1, 8, 1, 4, 8, 2691, "archive:538"),
    ("26.02.01", "B300", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 16, 1, 1, 8, 3099, "archive:424"),
    ("26.02.01", "B300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 29454, "archive:443"),
    ("26.04", "B300", "deepseek-v3", "MXFP8", 256, 4096, 1, 1, 16, 1, 1, 8, 3131, "archive:327"),
    ("26.04", "B300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 8, 15114, "archive:336"),
    ("26.04", "B300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 30553, "archive:346"),
    ("26.04", "B300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 8, 1, 1, 8, 4865, "archive:356"),
    ("26.04.01", "B300", "deepseek-v3", "MXFP8", 256, 4096, 2, 1, 8, 1, 1, 8, 3456, "archive:227"),
    ("26.04.01", "B300", "gpt-oss-120b", "BF16", 64, 1280, 4, 1, 1, 1, 1, 8, 15232, "archive:236"),
    ("26.04.01", "B300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 30720, "archive:246"),
    ("26.04.01", "B300", "qwen3-235b-a22b", "MXFP8", 256, 8192, 2, 1, 8, 1, 1, 8, 5936, "archive:256"),
    ("26.06", "B300", "deepseek-v3", "MXFP8", 256, 4096, 2, 1, 8, 1, 1, 8, 3541, "archive:115"),
    ("26.06", "B300", "gpt-oss-120b", "MXFP8", 64, 1280, 4, 1, 1, 1, 1, 8, 18534, "archive:123"),
    ("26.06", "B300", "qwen3-30b-a3b", "MXFP8", 8, 512, 8, 1, 1, 1, 1, 8, 40769, "archive:131"),
)
"""Every GB200, GB300, B200 and B300 row of these four models from 26.02 to 26.08, but ``LEFT_OUT``'s."""

LEFT_OUT = {
    "26.02.01 B200 GPT OSS 120B (13722)":
        "the table prints EP 8; v0.3.1's preset (GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2, identical to v0.3.0's) "
        "runs EP 64, and EP 8 with HybridEP entered the presets after the tag (commit 7260d6214, PR #2906): which "
        "dispatcher ran is not determinable",
    "26.02.01 B300 GPT OSS 120B (15031)":
        "as on B200: the table prints EP 8, v0.3.1's preset (GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2) runs EP 64 "
        "with the all-to-all; EP 8 with HybridEP came after the tag (PR #2906)",
    "26.02.01 B300 Qwen3 235B-A22B (2644)":
        "the table prints VP 4 (26.02's layout, and nearly 26.02's 2691 tokens/s); v0.3.1's preset runs no VP and no "
        "EP overlap (qwen3_workload_base_configs.py): which ran is not determinable",
}

REGRESSION = (
    "The 26.06.01 table's footnote: \"Performance regression in GPT-OSS 120B pre-training is a known issue "
    "(NVIDIA/cudnn-frontend issue 256). It will be resolved with the next container release.\" The preset is 26.06's "
    "(v0.5.1's gpt_oss presets equal v0.5.0's); v0.5.1 moved cudnn-frontend 1.23.0 to 1.24.0 and cutlass-dsl 4.4.1 "
    "to 4.5.0 (pyproject.toml), and the row runs 37-39 % below 26.06 and 26.08. A software regression the model does "
    "not price. Counted.")

# Megatron-Bridge's MoE presets on Blackwell (every row): TP 1 (so no sequence parallelism and no TP-comm overlap,
# comm_overlap.py), ETP 1, no activation offloading, the distributed optimizer with overlapped gradient reduction and
# parameter gathers, 16-bit gradient reduction, Transformer Engine's fused cross entropy, router fusion and
# permute fusion, forced load balancing (qwen3_llm_pretrain.py:31-45 @v0.5.0; gpt_oss_llm_pretrain.py;
# deepseek_llm_pretrain.py; perf_recipes/_common.py @v0.6.0)
COMMON = {"distributed_optimizer": True, "overlap_grad_reduce": True, "overlap_param_gather": True,
          "grad_reduce_in_fp32": False, "cross_entropy_fusion": True, "etp": 1, "tp_comm_overlap": False}

LATE = {"cuda_graphs": True, "ep_overlap": True, "moe_dispatcher": "flex", "fused_grouped_mlp": True}
"""What every 26.06+ GB200/GB300 MoE preset runs: a full-iteration CUDA graph (cuda_graph_impl "full_iteration"),
EP overlap with delayed weight gradients, HybridEP, the CuTe-DSL fused grouped MLP (cutedsl_fused_grouped_mlp:
use_transformer_engine_op_fuser, GLU interleave 32, NVTE_CUTEDSL_FUSED_GROUPED_MLP=1; v0.5.0 overrides.py:238-243,
perf_plugins.py:308-309) (v0.5.0 qwen3_workload_base_configs.py:202-237, 358-398; gpt_oss and deepseek likewise)."""
LATE_NEEDS = ["moe_paged_stash"]
"""What they run beyond autoplan: the paged stash with a per-rank capacity factor of 1.5 (moe_paged_stash,
moe_expert_rank_capacity_factor; v0.5.0 overrides.py set_full_iter_cg)."""


def _qwen3(release: str, system: str, model: str) -> tuple[dict, list[str]]:
    """Qwen3 30B-A3B and 235B-A22B: no recompute at any tag (set_qwen3_common_configs, qwen3_llm_pretrain.py:33-35);
    HybridEP (flex, 32 SMs) on GB200/GB300 and on B200 30B from 26.02.01, the all-to-all on B200 30B at 26.02 and
    B200 235B (qwen3_workload_base_configs.py @v0.3.0:397-402, 146-153; @v0.3.1:380-387); Transformer Engine's
    per-layer CUDA graphs but on B200 235B; from 26.06 on GB200/GB300 full-iteration graphs, EP overlap and FP8
    attention (@v0.5.0:202-237, 358-398); 235B counts the embedding and the loss as a layer in its pipeline split
    (recipes/qwen/qwen3_moe.py:166-167 @v0.3.1)."""
    b200_a2a = system == "B200" and (model == "qwen3-235b-a22b" or release == "26.02")
    knobs = {"recompute": "none", "moe_dispatcher": "alltoall" if b200_a2a else "flex", "ep_overlap": False}
    needs = [] if system == "B200" and model == "qwen3-235b-a22b" else ["cuda_graphs"]
    if system != "B200" and release in LATE_RELEASES:
        knobs, needs = {**knobs, **LATE, "fp8_attention": True}, [*LATE_NEEDS]
    return {**knobs, "account_for_ends": model == "qwen3-235b-a22b"}, needs


def _gpt_oss(release: str, system: str) -> tuple[dict, list[str]]:
    """GPT-OSS 120B (gpt_oss_workload_base_configs.py, gpt_oss_llm_pretrain.py at each tag): BF16 to 26.04.01 (GB300:
    no recompute, CUDA graphs of attn, router and preprocessing, the all-to-all; GB200 and B200: recompute of the
    norms and the experts' activation, autoplan's ``modules``; GB200 26.04 HybridEP with EP overlap, 26.04.01 the
    all-to-all with EP overlap, PR #3561; B200 26.04 EP 8 with HybridEP, 26.04.01 the all-to-all, PR #3614); MXFP8
    from 26.06 (full-iteration graphs, HybridEP, EP overlap, FP8 attention, the LM head in MXFP8; GB200's recompute
    list empty)."""
    if release in LATE_RELEASES:
        return {"recompute": "none", **LATE, "fp8_output_layer": True, "fp8_attention": True}, [*LATE_NEEDS]
    if system == "GB300":
        return {"recompute": "none", "moe_dispatcher": "alltoall", "ep_overlap": False}, ["cuda_graphs"]
    flex = release == "26.04"
    return {"recompute": "modules", "moe_dispatcher": "flex" if flex else "alltoall",
            "ep_overlap": system == "GB200" and release in ("26.04", "26.04.01")}, []


def _deepseek(release: str, system: str) -> tuple[dict, list[str]]:
    """DeepSeek-V3 (deepseek_workload_base_configs.py, deepseek_llm_pretrain.py at each tag; perf_recipes/deepseek
    @v0.6.0): HybridEP everywhere but B200 26.04.01 (DeepEP; both flex); recompute of the MLA up-projections
    (``mla_up_proj``: autoplan's ``modules`` recomputes the norms and expert activations too) but GB200 26.04 and
    26.04.01 (``mlp``: the three dense layers' MLP), GB300 from 26.06 (none) and B200 26.04.01 (``mla_up_proj`` and
    ``mlp``); Transformer Engine's per-layer CUDA graphs on GB200 to 26.04.01 and B200 26.04.01, none on GB300 to
    26.04.01 (a scope without an impl, overrides.py:105-121) or B200 before; EP overlap on B200 26.04.01 and from
    26.06; from 26.06 the LM head in MXFP8 and, on GB300, FP8 attention."""
    late = release in LATE_RELEASES
    mla_up = not ((system == "GB200" and release in ("26.04", "26.04.01")) or (system == "GB300" and late))
    knobs = {"recompute": "modules" if mla_up else "none", "moe_dispatcher": "flex",
             "ep_overlap": system == "B200" and release == "26.04.01",
             **({**LATE, "fp8_output_layer": True, "fp8_attention": system == "GB300"} if late else {})}
    needs = ["recompute_modules_subset"] if mla_up else []
    if system == "GB200" and release in ("26.04", "26.04.01"):
        needs = ["recompute_modules_dense"]
    if late:
        needs = [*needs, *LATE_NEEDS]
    elif system == "GB200" or (system == "B200" and release == "26.04.01"):
        needs = [*needs, "cuda_graphs"]
    return knobs, needs


def deepseek_stage_layers(pp: int) -> tuple[int, int]:
    """Decoder layers on the first and last pipeline rank of DeepSeek-V3's 16 virtual stages
    ("Et*4|(t*4|)*14tmL": the embedding and 4 layers, fourteen stages of 4, 1 layer with the MTP block and the loss;
    deepseek_v3.py layout_map, the GB300 presets' pp_layout): stage i sits on rank i mod pp (Megatron-Core
    pipeline_parallel_layer_layout.py)."""
    stages = [4] * 15 + [1]
    return sum(stages[0::pp]), sum(stages[pp - 1::pp])


def _b300(release: str, model: str) -> tuple[dict, list[str]]:
    """DGX B300 (EP 8 in one NVLink domain of 8; perf_plugins.py: NVLINK_DOMAIN_SIZE 8, USE_MNNVL 0): Qwen3 30B-A3B
    HybridEP with Transformer Engine graphs of the router, from 26.06 the GB presets' full-iteration graph, EP overlap
    and the 26.06 MoE knobs (qwen3_workload_base_configs.py @v0.5.0:432-439); Qwen3 235B-A22B the all-to-all with EP
    overlap at 26.02 (VP 4, @v0.3.0:121-129), without from 26.04 (micro-batch 2), HybridEP from 26.04.01; GPT-OSS
    Transformer Engine graphs of attention and router, the all-to-all at EP 64 (26.02), HybridEP at EP 8 from 26.04,
    MXFP8 at 26.06 (an alias of the BF16 preset, gpt_oss_workload_base_configs.py @v0.5.0:222); DeepSeek-V3 HybridEP
    and the MLA up-projections' recompute, PP 16 to 26.04, PP 8 at micro-batch 2 with Transformer Engine graphs from
    26.04.01 (deepseek_workload_base_configs.py @v0.4.2:180-194)."""
    if model == "qwen3-30b-a3b":
        if release in LATE_RELEASES:
            return {"recompute": "none", **LATE, "fp8_attention": True}, [*LATE_NEEDS]
        return {"recompute": "none", "moe_dispatcher": "flex", "ep_overlap": False}, ["cuda_graphs"]
    if model == "qwen3-235b-a22b":
        return {"recompute": "none", "moe_dispatcher": "flex" if release == "26.04.01" else "alltoall",
                "ep_overlap": release == "26.02", "account_for_ends": True}, []
    if model == "gpt-oss-120b":
        return {"recompute": "none", "moe_dispatcher": "alltoall" if release == "26.02" else "flex",
                "ep_overlap": False}, ["cuda_graphs"]
    graphs = release in ("26.04.01", "26.06")
    return ({"recompute": "modules", "moe_dispatcher": "flex", "ep_overlap": False},
            ["recompute_modules_subset", *(["cuda_graphs"] if graphs else [])])


def preset(release: str, system: str, model: str) -> tuple[dict, list[str]]:
    """The row's knobs beyond its degrees, batches and precision, and what it runs that autoplan cannot describe."""
    if system == "B300":
        knobs, needs = _b300(release, model)
    elif model.startswith("qwen3"):
        knobs, needs = _qwen3(release, system, model)
    elif model == "gpt-oss-120b":
        knobs, needs = _gpt_oss(release, system)
    else:
        knobs, needs = _deepseek(release, system)
    return {**COMMON, **knobs}, needs


def known_gap(release: str, model: str) -> str:
    """The row's known gap, if its table says it regressed."""
    return REGRESSION if (release, model) == ("26.06.01", "gpt-oss-120b") else ""
