"""Writes autoplan/data/dgxc_runs.yaml: NVIDIA dgxc-benchmarking's measured pre-training step times of the NeMo 1.x
recipes on H100 (Llama 3.1 8B/70B/405B, Nemotron-4 15B/340B, GPT-3 175B, the Grok-1 314B mixture of experts) and of
the NeMo 2.0 recipes of releases v25.04 to v25.05.02 (Llama 3 8B/70B and Llama 3.1 405B, Nemotron-4 15B/340B on H100
and GB200, Grok-1 on H100), each with its recipe's configuration.

Input: inventory.yaml beside this file, every measured training figure of the repository's history as printed, with
the settings read from the recipe's files at the same commit (compiled from a clone of NVIDIA/dgxc-benchmarking, git
only). The NeMo 1.x recipes (releases v24.11.1 and v25.02) state every knob in their hydra yaml and configure.sh.
The NeMo 2.0 ones take the rest from NVIDIA/NeMo at the commit their setup.sh checks out (``NEMO2_COMMITS``) and the
container's NeMo-Run callbacks: ``NEMO2`` below, each knob with the line that sets it. Left out: the other NeMo 2.0
models (DeepSeek-V3, Llama 4, Nemotron-H).
Rows that public.yaml already holds (the same run: model, precision, GPUs and step time) are skipped, and so are
later releases' rows that repeat a kept row's numbers (v25.04.01 reprints v25.04's Nemotron-4 step times).

Run: python benchmarks/data/dgxc/make_runs.py   (rewrites autoplan/data/dgxc_runs.yaml)
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
OUT = ROOT / "autoplan" / "data" / "dgxc_runs.yaml"
REPO = "NVIDIA/dgxc-benchmarking"

# Model shapes as the recipes' yaml gives them at v24.11.1 (35a9aec) and v25.02 (8f5cbb3), identical at both:
# llama3.1/llama3.1_{8b,70b,405b}.yaml, nemotron/nemotron4-{15b,340b}-synth.yaml, nemo_megatron/gpt3_175b_hydra.yaml.
_LLAMA = {"activation": "swiglu", "position": "rope", "norm": "rmsnorm", "bias": False, "tied_embeddings": False,
          "dropout": False}
_NEMOTRON = {"activation": "relu2", "position": "rope", "norm": "layernorm", "bias": False, "tied_embeddings": False,
             "dropout": False}
MODELS = {
    ("Llama 3.1", "8b"): dict(name="Llama 3.1 8B", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                              vocab=128256, seq_len=8192, **_LLAMA),
    ("Llama 3.1", "70b"): dict(name="Llama 3.1 70B", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                               vocab=128256, seq_len=8192, **_LLAMA),
    # num_query_groups: 16 in the recipe's yaml; synthetic data through the GPT-2 tokenizer (configure.sh:
    # model.tokenizer.type=/megatron-gpt2-345m), vocabulary 50257
    ("Llama 3.1", "405b"): dict(name="Llama 3.1 405B (dgxc recipe)", layers=126, hidden=16384, heads=128, kv_heads=16,
                                ffn_hidden=53248, vocab=50257, seq_len=8192, **_LLAMA),
    # normalization: layernorm1p (a LayerNorm with zero-centred gamma), squared-relu, 256k sentencepiece vocabulary
    ("Nemotron4", "15b"): dict(name="Nemotron-4 15B", layers=32, hidden=6144, heads=48, kv_heads=8, ffn_hidden=24576,
                               vocab=256000, seq_len=4096, **_NEMOTRON),
    ("Nemotron4", "340b"): dict(name="Nemotron-4 340B", layers=96, hidden=18432, heads=96, kv_heads=8,
                                ffn_hidden=73728, vocab=256000, seq_len=4096, **_NEMOTRON),
    ("GPT-3 (NeMo Megatron)", "175b"): dict(name="GPT-3 175B (NeMo)", layers=96, hidden=12288, heads=96,
                                            ffn_hidden=49152, vocab=51200, seq_len=2048),
    # grok1/grok1_314b.yaml: 8 experts of 32768, top-2, fast-geglu (a gated MLP of SwiGLU's shapes and FLOPs; the
    # activation's element-wise function differs), the Llama-3 tokenizer, token drop with each expert's input padded
    # to capacity 1.0 (moe_pad_expert_input_to_capacity, moe_expert_capacity_factor)
    ("Grok1", "314b"): dict(name="Grok-1 314B (dgxc recipe)", layers=64, hidden=6144, heads=48, kv_heads=8,
                            ffn_hidden=32768, moe_ffn_hidden=32768, experts=8, top_k=2, vocab=128256, seq_len=8192,
                            capacity_factor=1.0, pad_to_capacity=True, **_LLAMA),
}
SLUG = {"Llama 3.1": "llama31", "Nemotron4": "nemotron4", "GPT-3 (NeMo Megatron)": "gpt3", "Grok1": "grok1"}
HARDWARE = {"gpu": "H100-SXM5-80GB HBM3 (700W)", "gpus_per_node": 8,
            "cluster": "NVIDIA DGX Cloud (dgxc-benchmarking's reference H100 cluster)"}
FLASH2 = {("GPT-3 (NeMo Megatron)", "175b", "v24.11.1"), ("Grok1", "314b", "v24.11.1"), ("Grok1", "314b", "v25.02"),
          ("Nemotron4", "340b", "v24.11.1"), ("Nemotron4", "340b", "v25.02")}
"""Recipes whose launch scripts turn Transformer Engine's cuDNN attention off (export NVTE_FUSED_ATTN=0), so that TE
runs FlashAttention-2: nemo_megatron/launch.sh:55 @35a9aec (GPT-3's configure.sh sets it to 1 @8f5cbb3),
grok1/configure.sh:29 and nemotron/configure.sh:65 @35a9aec, :71 @8f5cbb3 (the 340B branch; 15B sets 1). Llama 3.1
sets NVTE_FUSED_ATTN=1 and NVTE_FLASH_ATTN=0 (llama3.1/configure.sh:47-48) at both."""


PADDED_PERMUTE_SYNCS = {("Grok1", "314b"): ("24.12",)}
"""NeMo 1.x containers whose Megatron-Core syncs the host in a padded MoE dispatch (``ModelSpec.padded_permute_syncs``):
NeMo 24.12 is NeMo v2.1.0, whose Dockerfile.ci builds Megatron-Core core_r0.10.0 (MCORE_TAG; v2.0.0, NeMo 24.09, builds
core_r0.9.0); core_v0.10.0's MoEAlltoAllTokenDispatcher.token_permutation calls moe_utils.permute, which permutes
through ``token_indices.masked_select(routing_map)``, and unpermute selects the probabilities the same way."""


def _container(r: dict) -> str:
    """The run's NeMo container version: the image's tag, or the FW_VERSION launch.sh names a digest-pinned image by
    (Grok-1 at v24.11.1)."""
    return re.search(r"(?:nemo:|FW_VERSION=)(\d+\.\d+)", str(r["container"])).group(1)


NEMO2_COMMITS = {"v25.04": "NVIDIA/NeMo@d2b21556 (+ dgxc gsw_nemo.patch)",
                 "v25.04.01": "NVIDIA/NeMo@d2b21556 (+ dgxc gsw_nemo.patch)",
                 "v25.05": "NVIDIA/NeMo@7a8f1cc7", "v25.05.01": "NVIDIA/NeMo@6f2c6fda", "v25.05.02": "NVIDIA/NeMo@6f2c6fda"}
"""The NeMo source each NeMo 2.0 release's Llama and Grok-1 recipes are built from: v25.04's setup.sh checks out
d2b21556 and applies the repository's gsw_nemo.patch (llama3.1/setup.sh and nemotron/setup.sh:37-50 @741c886); from
v25.05 an unpatched checkout (llama3.1/ and grok1/setup.sh @68eaf7e, @85d9284)."""
NEMOTRON_COMMIT_FROM_V25_05 = "NVIDIA/NeMo@b4148d21"
"""Nemotron-4's NeMo commit from v25.05 on (nemotron/setup.sh @68eaf7e, unchanged through @f041145)."""


def nemo2_commit(r: dict) -> str:
    """The NeMo commit a NeMo 2.0 run's recipe was built from."""
    if r["model"] == "Nemotron4" and not r["release"].startswith("v25.04"):
        return NEMOTRON_COMMIT_FROM_V25_05
    return NEMO2_COMMITS[r["release"]]

NEMO2_GPUS = {"H100": HARDWARE, "GB200": {
    "gpu": "B200 (GB200 NVL72 superchip, 1200 W)", "gpus_per_node": 4, "cluster_spec": "gb200-nvl72",
    # --gpus_per_node 4 and sbatch --segment 16: each 16-node block (64 GPUs) in one NVL72 rack (the launch scripts
    # @68eaf7e, NeMo scripts/performance/utils.py:114-120); the spec's NVLink domain is the rack's 72
    "cluster": "NVIDIA DGX Cloud GB200 NVL72 (dgxc-benchmarking's reference GB200 cluster)"}}
"""The hardware of a NeMo 2.0 run by GPU type."""

NEMO2_MODELS = {
    # NeMo recipes llama3_8b / llama3_70b (the Llama 3 configs: gpt/model/llama.py Llama3Config8B/70B) and
    # llama31_405b (Llama31Config405B: 8 query groups, seq_length set to 8192 at recipes/llama31_405b.py:61); the
    # Hugging Face tokenizer of each (pretrain_llama31.py:74-90): 128256 tokens
    ("Llama 3.1", "8b"): dict(name="Llama 3 8B (NeMo 2.0 recipe)", layers=32, hidden=4096, heads=32, kv_heads=8,
                              ffn_hidden=14336, vocab=128256, seq_len=8192, **_LLAMA),
    ("Llama 3.1", "70b"): dict(name="Llama 3 70B (NeMo 2.0 recipe)", layers=80, hidden=8192, heads=64, kv_heads=8,
                               ffn_hidden=28672, vocab=128256, seq_len=8192, **_LLAMA),
    ("Llama 3.1", "405b"): dict(name="Llama 3.1 405B (NeMo 2.0 recipe)", layers=126, hidden=16384, heads=128,
                                kv_heads=8, ffn_hidden=53248, vocab=128256, seq_len=8192, **_LLAMA),
    # gpt/model/nemotron.py Nemotron4Config15B/340B; the scripts' null tokenizer of 256000 ids reports 256001
    # (common/tokenizers/null_tokenizer.py:28,46-47; gsw_nemo.patch pretrain_nemotron4_*.py:80-86)
    ("Nemotron4", "15b"): dict(name="Nemotron-4 15B (NeMo 2.0 recipe)", layers=32, hidden=6144, heads=48, kv_heads=8,
                               ffn_hidden=24576, vocab=256001, seq_len=4096, **_NEMOTRON),
    ("Nemotron4", "340b"): dict(name="Nemotron-4 340B (NeMo 2.0 recipe)", layers=96, hidden=18432, heads=96,
                                kv_heads=8, ffn_hidden=73728, vocab=256001, seq_len=4096, **_NEMOTRON),
    # scripts/performance/llm/pretrain_grok1_314b.py:80-94 (@7a8f1cc7, @6f2c6fda): Mixtral 8x7B's config (RMSNorm,
    # SwiGLU, no bias, untied) at Grok-1's shapes, 8 experts top-2 (mixtral.py:61), the Llama 3 70B tokenizer (:337);
    # MegatronTokenDropCallback: capacity 1.0, each expert's input padded to it (moe_token_drop.py:36-49)
    ("Grok1", "314b"): dict(name="Grok-1 314B (NeMo 2.0 recipe)", layers=64, hidden=6144, heads=48, kv_heads=8,
                            ffn_hidden=32768, moe_ffn_hidden=32768, experts=8, top_k=2, vocab=128256, seq_len=8192,
                            capacity_factor=1.0, pad_to_capacity=True, **_LLAMA),
}

NEMO2 = {
    # (model, size): the knobs the recipe and its script set, the same in BF16 and FP8 and in every release.
    # Every recipe: Megatron-Core's distributed optimizer (recipes/optim/adam.py:37-49), no activation recompute
    # (recompute_granularity unset), grad_reduce_in_fp32 False (each recipe's performance optimizations, e.g.
    # llama3_70b.py:246; pretrain_llama31.py:131 again for FP8), cross_entropy_loss_fusion True (GPTConfig default,
    # gpt/model/base.py:184), sequence parallel where tp > 1 (scripts/performance/utils.py:235), the gradient
    # reduce-scatter and parameter all-gather overlapped where DP > 1 and the pipeline sends overlapped where
    # interleaved (MegatronCommOverlapCallback, megatron_comm_overlap.py:153-195)
    ("Llama 3.1", "8b"): dict(tp_comm_overlap=False),             # recipes/llama3_8b.py:229-232; tp 1
    # userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192 (pretrain_llama31.py:80-86,137-140)
    ("Llama 3.1", "70b"): dict(tp_comm_overlap=True),
    # userbuffers_{bf16,fp8}_h100_h16384_tp8_cp2_mbs1_seqlen8192; the embedding and the loss each count as a layer
    # of the pipeline split (recipes/llama31_405b.py:72-73: account_for_embedding/loss_in_pipeline_split)
    ("Llama 3.1", "405b"): dict(tp_comm_overlap=True, account_for_ends=True),
    # tp_comm_overlap with Transformer Engine's default userbuffers config (recipes/nemotron4_*.py:211-218; the
    # scripts set a config for B200 only, gsw_nemo.patch)
    ("Nemotron4", "15b"): dict(tp_comm_overlap=True),
    ("Nemotron4", "340b"): dict(tp_comm_overlap=True),
    # tp_comm_overlap (pretrain_grok1_314b.py:206); the all-to-all dispatcher without expert-parallel overlap; expert
    # TP 1 on H100 (grok1/launch.sh @85d9284: ET=1 with the H100 plan); on GB200 4, as the README's configuration
    # table gives it beside the measurements, where the launch script @68eaf7e defaults to 8 (ET=${ET:-8}; 4 from
    # @85d9284, the GB200 figures not measured again): the case shows the other reading as a variant
    ("Grok1", "314b"): dict(tp_comm_overlap=True, etp={"H100": 1, "GB200": 4}),
}


def nemo2_strategy(r: dict, layers: int) -> dict:
    """A NeMo 2.0 run's plan and knobs (``NEMO2``; the degrees, batches and layers from the inventory's reading of the
    release's launch scripts: llama3.1/llama31_utils.py at v25.04, each workload's launch.sh from v25.05)."""
    fp8 = r["dtype"] == "FP8"
    knobs = dict(NEMO2[(r["model"], r["model_size"])])
    tp, pp, cp, vp = _int(r["tp"]), _int(r["pp"]), _int(r["cp"]), _vp(r["vp"])
    if r["model"] == "Nemotron4" and r["model_size"] == "340b":
        vp = 12     # nemotron/launch.sh:62-71 passes -vp 12 (the README's table says NA)
    dp = int(r["num_gpus"]) // (tp * pp * cp)
    st = {"tp": tp, "pp": pp, "cp": cp, "microbatch": _int(r["micro_batch_size"]),
          "global_batch": _int(r["global_batch_size"]), "virtual_stages_per_rank": vp, "interleaved_schedule": vp > 1,
          "recompute": "none", "sequence_parallel": tp > 1, "tp_comm_overlap": knobs["tp_comm_overlap"] and tp > 1,
          "distributed_optimizer": True, "overlap_grad_reduce": dp > 1, "overlap_param_gather": dp > 1,
          "cross_entropy_fusion": True, "grad_reduce_in_fp32": False}
    if pp > 1:
        st["overlap_p2p_comm"] = vp > 1
    if knobs.get("account_for_ends") and pp > 1:
        # (layers + 2) / (pp·vp) a virtual stage, the first and last one less (they hold the embedding, the loss)
        per_chunk = (layers + 2) // (pp * vp)
        st["first_stage_layers"] = st["last_stage_layers"] = per_chunk - 1 + (vp - 1) * per_chunk
    if fp8:
        # bf16_with_fp8_mixed (recipes/precision/mixed_precision.py:46-54): hybrid delayed scaling, fp8_params
        st["fp8_param_gather"] = True
    elif r["release"].startswith("v25.05"):
        # BF16 from v25.05: use_precision_aware_optimizer (scripts/performance/utils.py:422-423 @7a8f1cc7, the same
        # at b4148d21 and 6f2c6fda), for which Megatron-Core hands Transformer Engine's FusedAdam
        # store_param_remainders=True (megatron/core/optimizer/__init__.py:338-350 @7094270c, TE >= 2.1)
        st["param_remainders"] = True
    if st["tp_comm_overlap"]:
        configs = NEMO2_RS[(r["model"], r["model_size"], r["gpu_type"], "fp8" if fp8 else "bf16")]
        rs, fp8_rs = configs["v25.04" if r["release"].startswith("v25.04") else "v25.05"]
        st["tp_overlap_rs"] = rs
        if fp8_rs:
            st["tp_overlap_fp8_rs"] = True
    if "etp" in knobs:
        st |= {"ep": _int(r["ep"]), "etp": knobs["etp"][r["gpu_type"]], "ep_overlap": False}
    return st | _deferral(r, pp)


def _int(text: object) -> int:
    return int(re.match(r"\s*(\d+)", str(text)).group(1))


def _vp(text: object) -> int:
    m = re.match(r"\s*(\d+)", str(text))
    return int(m.group(1)) if m else 1


def _on(text: object) -> bool:
    return str(text).strip().lower().startswith(("true", "model.ub_tp_comm_overlap=true"))


def strategy(r: dict) -> dict:
    """The run's plan and software knobs, each from the inventory's reading of the recipe at that commit."""
    fp8 = r["dtype"] == "FP8"
    vp = _vp(r["vp"])
    st = {"tp": _int(r["tp"]), "pp": _int(r["pp"]), "cp": _int(r["cp"]), "microbatch": _int(r["micro_batch_size"]),
          "global_batch": _int(r["global_batch_size"]), "virtual_stages_per_rank": vp,
          "interleaved_schedule": vp > 1,
          "recompute": "selective" if "selective" in str(r["activation_recompute"]) else "none",
          "sequence_parallel": _on(r["sequence_parallel"]), "tp_comm_overlap": _on(r["tp_comm_overlap"]),
          "distributed_optimizer": True,
          # both optimizers overlap the gradient reduce-scatter and the parameter all-gather (overlap_grad_sync,
          # overlap_param_sync: true)
          "overlap_grad_reduce": True, "overlap_param_gather": True,
          # cross_entropy_loss_fusion: true in the Llama 3.1 and Nemotron-4 recipes' yaml (not GPT-3's, not Grok-1's)
          "cross_entropy_fusion": r["model"] in ("Llama 3.1", "Nemotron4")}
    if r["model"] == "Grok1":
        # expert parallelism over the all-to-all dispatcher; the recipe sets no overlap of its communication
        st["ep"] = _int(r["ep"])
        st["ep_overlap"] = False
    optimizer = str(r["distributed_optimizer"])
    if "grad_sync_dtype bf16" in optimizer:
        # Apex distributed_fused_adam keeps its gradient buckets in grad_sync_dtype; NeMo 1.x hands it to
        # mcore_distributed_optim as grad_reduce_in_fp32 (below)
        st["grad_reduce_in_fp32"] = False
    elif optimizer.startswith("mcore_distributed_optim"):
        # NeMo v2.0.0/v2.1.0 megatron_gpt_model.py setup_mcore_distributed_parallel: grad_reduce_in_fp32 =
        # (optim.grad_sync_dtype, default 'fp32') == 'fp32'; nemotron4-15b-synth.yaml @8f5cbb3 states none
        st["grad_reduce_in_fp32"] = True
    if (str(r["distributed_optimizer"]).startswith("distributed_fused_adam") and not fp8
            and r["model"] != "GPT-3 (NeMo Megatron)"):
        # NeMo megatron_base_model.py setup_optimization: an fp32 distributed Adam over BF16 weights stores only
        # the master weights' 16-bit remainders (store_param_remainders); GPT-3's yaml sets fp8_params, for which
        # newer NeMo stores whole master weights, so its BF16 runs are left at the default
        st["param_remainders"] = True
    if st["tp_comm_overlap"]:
        st |= nemo1_tp_overlap(r, fp8)
    if st["pp"] > 1:
        # overlap_p2p_comm: true (GPT-3 and Llama yaml, Nemotron-4 340B configure.sh)
        st["overlap_p2p_comm"] = True
    if fp8:
        # fp8_params: true (the recipes' configure.sh +model.fp8_params, GPT-3's yaml): FP8 weights all-gathered
        st["fp8_param_gather"] = True
    return st | _deferral(r, st["pp"])


NEMO1_RS = {("Llama 3.1", "405b"): "24/8", ("Llama 3.1", "70b"): "24/16", ("Nemotron4", "15b"): "16/16",
            ("Nemotron4", "340b"): "16/16", ("Grok1", "314b"): "16/16"}
"""The forward reduce-scatters' userbuffers settings after proj / fc2 (num_sm of their pipelined overlaps) where a NeMo
1.x recipe does not use GPT-3's 24 / 20 (gpt3_175b_hydra.yaml ``ub_tp_comm_overlap_cfg``): llama3.1/llama3.1_405b.yaml
and llama3.1_70b.yaml ``ub_tp_comm_overlap_cfg`` (@35a9aec, @8f5cbb3); Nemotron-4's and Grok-1's yaml give no config
(grok1_314b.yaml ``ub_tp_comm_overlap_cfg: null``; configure.sh turns the overlap on), so Transformer Engine's default
(module/base.py ``get_default_config``: pipeline, num_sm 16; TE 1.x without set_sm_margin, which autoplan does not
tell apart)."""


def nemo1_tp_overlap(r: dict, fp8: bool) -> dict:
    """A NeMo 1.x run's reduce-scatter overlap settings (``NEMO1_RS``); Llama 3.1 405B's configure.sh writes proj's
    and fc2's GEMM output into the buffer in FP8 (``ub_tp_comm_overlap_cfg.{proj,fc2}_fprop.fp8_buf=$FP8_ENABLED``,
    llama3.1/configure.sh:84-85 @35a9aec, :92-93 @8f5cbb3)."""
    out = {}
    rs = NEMO1_RS.get((r["model"], r["model_size"]))
    if rs:
        out["tp_overlap_rs"] = rs
    if fp8 and (r["model"], r["model_size"]) == ("Llama 3.1", "405b"):
        out["tp_overlap_fp8_rs"] = True
    return out


NEMO2_RS = {
    # (model, size, gpu, precision): (reduce-scatter overlaps after proj / fc2, fp8_buf) of the userbuffers config the
    # performance script passes (nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py), at v25.04's NeMo
    # (d2b21556) and from v25.05 (7a8f1cc7, b4148d21, 6f2c6fda: the same configs); the Llama rows of v25.04 run
    # dgxc's llama3.1/pretrain_llama31.py:78-99 @741c886, later ones NeMo's scripts/performance/llm/pretrain_*.py
    ("Llama 3.1", "70b", "H100", "bf16"): {"v25.04": ("24/16", False), "v25.05": ("24/16", False)},
    ("Llama 3.1", "70b", "H100", "fp8"): {"v25.04": ("24/16", True), "v25.05": ("r/r", False)},
    ("Llama 3.1", "405b", "H100", "bf16"): {"v25.04": ("24/8", False), "v25.05": ("24/8", False)},
    ("Llama 3.1", "405b", "H100", "fp8"): {"v25.04": ("24/8", True), "v25.05": ("r/r", False)},
    ("Llama 3.1", "405b", "GB200", "bf16"): {"v25.05": ("32/8", False)},
    ("Llama 3.1", "405b", "GB200", "fp8"): {"v25.05": ("r/r", False)},
    # the Nemotron-4 scripts pass a config on B200 only (pretrain_nemotron4_340b.py:103-110 @7a8f1cc7), so on H100
    # Transformer Engine's default: pipeline, num_sm 16, set_sm_margin (TE 2.x module/base.py get_default_config)
    ("Nemotron4", "15b", "H100", "bf16"): {"v25.04": ("16/16", False), "v25.05": ("16/16", False)},
    ("Nemotron4", "15b", "H100", "fp8"): {"v25.04": ("16/16", False), "v25.05": ("16/16", False)},
    ("Nemotron4", "340b", "H100", "bf16"): {"v25.04": ("16/16", False), "v25.05": ("16/16", False)},
    ("Nemotron4", "340b", "H100", "fp8"): {"v25.04": ("16/16", False), "v25.05": ("16/16", False)},
    ("Nemotron4", "340b", "GB200", "bf16"): {"v25.05": ("r/24", False)},
    ("Nemotron4", "340b", "GB200", "fp8"): {"v25.05": ("r/r", False)},
    # Grok-1's script passes userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192 on every GPU and precision
    # (pretrain_grok1_314b.py:347 @7a8f1cc7, @6f2c6fda): proj's a ring exchange (an MoE layer overlaps qkv and proj)
    ("Grok1", "314b", "H100", "bf16"): {"v25.05": ("r/r", False)},
    ("Grok1", "314b", "H100", "fp8"): {"v25.05": ("r/r", False)},
    ("Grok1", "314b", "GB200", "bf16"): {"v25.05": ("r/r", False)},
    ("Grok1", "314b", "GB200", "fp8"): {"v25.05": ("r/r", False)},
}


DEFERRAL = {("Llama 3.1", "70b"): 22, ("Llama 3.1", "405b"): 50, ("Nemotron4", "340b"): 22}
"""wgrad_deferral_limit where a recipe sets defer_embedding_wgrad_compute: true: NeMo 1.x
llama3.1/llama3.1_70b.yaml:118-119, llama3.1_405b.yaml:124-125, nemotron/nemotron4-340b-synth.yaml:214-215 (@35a9aec
and @8f5cbb3; configure.sh turns it off for the 32-GPU 405B proxy, which has no pipeline); NeMo 2.0
recipes/llama3_70b.py:234-235, llama31_405b.py:241-242, nemotron4_340b.py:214-215 (@d2b21556). Megatron-Core defers
only with a pipeline (pp > 1)."""


def _deferral(r: dict, pp: int) -> dict:
    """The run's ``embedding_wgrad_deferral`` where its recipe defers and it has a pipeline (``DEFERRAL``)."""
    limit = DEFERRAL.get((r["model"], r["model_size"]))
    return {"embedding_wgrad_deferral": limit} if limit and pp > 1 else {}


def case(r: dict) -> dict:
    key = (r["model"], r["model_size"])
    nemo2 = _is_nemo2(r)
    model = dict((NEMO2_MODELS if nemo2 else MODELS)[key])
    layers = _int(r["num_layers"])
    if layers != model["layers"]:
        model["layers"] = layers
        model["name"] += f", {layers} layers"
    model["seq_len"] = _int(r["sequence_length"])
    if key in PADDED_PERMUTE_SYNCS and not nemo2:
        model["padded_permute_syncs"] = _container(r) in PADDED_PERMUTE_SYNCS[key]
    dtype = r["dtype"].lower()
    gpus = int(r["num_gpus"])
    container = _container(r)
    files = [f"{REPO}: {p} @{r['content_commit']}" for p in r["config_files"]]
    if nemo2:
        files.append(nemo2_commit(r))
    gpu = r["gpu_type"]
    # the Nemotron-4 340B GB200 table of a fixed global batch (STRONG_SCALING=true, nemotron/launch.sh:113-115)
    strong = "-strong" if "Strong Scaling" in str(r["table_header"]) else ""
    return {
        "id": f"dgxc-{r['release']}-{gpu.lower()}-{dtype}-{SLUG[r['model']]}-{r['model_size']}-{gpus}gpu{strong}",
        "group": f"NVIDIA DGX Cloud benchmarking, NeMo {container}{' (NeMo 2.0)' if nemo2 else ''}, {gpu} {r['dtype']}",
        "source": {"repo_files": files,
                   "table": f"{r['file']} @{r['content_commit']} ({r['release']}): {r['table_header'][:200].strip()}",
                   "measured_as": str(r["measurement_method"])[:300]},
        "hardware": {**(NEMO2_GPUS[gpu] if nemo2 else HARDWARE), "num_gpus": gpus,
                     **({"attention_kernel": "flash2"} if (*key, r["release"]) in FLASH2 else {})},
        "model": {**model, "dtype": dtype},
        "strategy": nemo2_strategy(r, layers) if nemo2 else strategy(r),
        **({"variants": [{"label": "expert TP 8, launch.sh's default", "strategy": {"etp": 8}}]}
           if nemo2 and key == ("Grok1", "314b") and gpu == "GB200" else {}),
        "measured": {"iteration_time_s": float(str(r["measured"]["step_time_s_per_step"]).replace(" ", ""))},
    }


CALIBRATION_RUNS = tuple(f"dgxc-v25.05-gb200-{d}-llama31-405b-{n}gpu" for d in ("bf16", "fp8") for n in (128, 256))
"""The GB200 calibration set: the first GB200 model's two smallest scales in each precision (``autoplan calibrate``
wants two measurements a parameter, for its uncertainty and leave-one-out error). It fits gb200-nvl72's sustained
clock and FP8 GEMM efficiency to them (CALIBRATION_FILE); validate leaves them out of its figures and names them."""
CALIBRATION_FILE = ROOT / "cluster_specs" / "calibration" / "dgxc-gb200-llama31-405b.yaml"
CALIBRATES = ("GB200 clock_ratio and fp8_gemm_efficiency (cluster_specs/gb200-nvl72.toml); left out of validate's "
              "figures")


def _is_nemo2(r: dict) -> bool:
    """A NeMo 2.0 run of a release whose NeMo commit ``NEMO2`` was read at, of a model it describes."""
    return (str(r["framework"]).startswith("NeMo 2.0") and r["release"] in NEMO2_COMMITS
            and (r["model"], r["model_size"]) in NEMO2_MODELS)


def _published() -> set:
    """(model name stem, precision, GPUs, step time) of the runs public.yaml already holds."""
    data = yaml.safe_load((ROOT / "autoplan" / "data" / "public.yaml").read_text())
    out = set()
    for c in data["cases"]:
        if str(c["id"]).startswith("dgxc-h100-") and "iteration_time_s" in c["measured"]:
            out.add((str(c["id"]).split("-")[2], c["hardware"]["num_gpus"], float(c["measured"]["iteration_time_s"])))
    return out


HEADER = ("# Generated by benchmarks/data/dgxc/make_runs.py from benchmarks/data/dgxc/inventory.yaml: NVIDIA\n"
          "# dgxc-benchmarking's measured pre-training step times of its NeMo 1.x (H100) and NeMo 2.0 (H100, GB200)\n"
          "# recipes (the last step of a 50-step run; from v25.05 the mean of steps 11-44), each with the settings its\n"
          "# recipe files state at that commit. Do not edit by hand.\n")


def build() -> tuple[str, int]:
    """The file's text and its number of runs."""
    rows = yaml.safe_load((HERE / "inventory.yaml").read_text())
    seen = _published()
    repeated: set = set()
    cases = []
    for r in rows:
        if r["training_type"] != "pre-training" or (r["model"], r["model_size"]) not in MODELS:
            continue
        if not ((str(r["framework"]).startswith("NeMo 1") and r["gpu_type"] == "H100") or _is_nemo2(r)):
            continue
        c = case(r)
        if r["gpu_type"] == "H100" and (r["dtype"].lower(), c["hardware"]["num_gpus"],
                                        c["measured"]["iteration_time_s"]) in seen:
            continue
        again = (r["framework"][:8], r["gpu_type"], r["model"], r["model_size"], r["dtype"], c["hardware"]["num_gpus"],
                 c["strategy"]["global_batch"], c["measured"]["iteration_time_s"])
        if again in repeated:
            continue
        repeated.add(again)
        if c["id"] in CALIBRATION_RUNS:
            c["calibration"] = CALIBRATES
        cases.append(c)
    body = yaml.safe_dump({"title": "NVIDIA dgxc-benchmarking NeMo 1.x and NeMo 2.0 recipes (measured)", "cases": cases},
                          sort_keys=False, width=120)
    return HEADER + body, len(cases)


def calibration_text() -> str:
    """The GB200 calibration set as a validation file (``autoplan calibrate`` reads it)."""
    rows = yaml.safe_load(build()[0])["cases"]
    cases = [{k: v for k, v in c.items() if k != "calibration"} for c in rows if c["id"] in CALIBRATION_RUNS]
    header = ("# Generated by benchmarks/data/dgxc/make_runs.py: the GB200 calibration set (CALIBRATION_RUNS), four runs\n"
              "# of autoplan/data/dgxc_runs.yaml that validate leaves out. Fitted with:\n"
              "#   autoplan calibrate cluster_specs/calibration/dgxc-gb200-llama31-405b.yaml --base gb200-nvl72 \\\n"
              "#     --fit clock_ratio,fp8_gemm_efficiency\n")
    return header + yaml.safe_dump({"title": "dgxc-benchmarking GB200 calibration set", "cases": cases},
                                   sort_keys=False, width=120)


def main() -> None:
    text, n = build()
    OUT.write_text(text)
    CALIBRATION_FILE.write_text(calibration_text())
    print(f"{n} runs written to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
