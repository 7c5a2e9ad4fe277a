"""Writes autoplan/data/dgxc_runs.yaml: NVIDIA dgxc-benchmarking's measured H100 pre-training step times of the NeMo
1.x recipes (Llama 3.1 8B/70B/405B, Nemotron-4 15B/340B, GPT-3 175B, the Grok-1 314B mixture of experts), each with
its recipe's configuration.

Input: inventory.yaml beside this file, every measured training figure of the repository's history as printed, with
the settings read from the recipe's files at the same commit (compiled from a clone of NVIDIA/dgxc-benchmarking, git
only). The NeMo 1.x recipes (releases v24.11.1 and v25.02) state every knob in their hydra yaml and configure.sh;
the NeMo 2.0 ones (v25.04 on) take most from a NeMo commit outside that repository and are left out here.
Rows that public.yaml already holds (the same run: model, precision, GPUs and step time) are skipped.

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
    if "grad_sync_dtype bf16" in str(r["distributed_optimizer"]):
        # Apex distributed_fused_adam keeps its gradient buckets in grad_sync_dtype
        st["grad_reduce_in_fp32"] = False
    if str(r["distributed_optimizer"]).startswith("distributed_fused_adam") and not fp8 and r["model"] != "GPT-3 (NeMo Megatron)":
        # NeMo megatron_base_model.py setup_optimization: an fp32 distributed Adam over BF16 weights stores only
        # the master weights' 16-bit remainders (store_param_remainders); GPT-3's yaml sets fp8_params, for which
        # newer NeMo stores whole master weights, so its BF16 runs are left at the default
        st["param_remainders"] = True
    if st["pp"] > 1:
        # overlap_p2p_comm: true (GPT-3 and Llama yaml, Nemotron-4 340B configure.sh)
        st["overlap_p2p_comm"] = True
    if fp8:
        # fp8_params: true (the recipes' configure.sh +model.fp8_params, GPT-3's yaml): FP8 weights all-gathered
        st["fp8_param_gather"] = True
    return st


def case(r: dict) -> dict:
    key = (r["model"], r["model_size"])
    model = dict(MODELS[key])
    layers = _int(r["num_layers"])
    if layers != model["layers"]:
        model["layers"] = layers
        model["name"] += f", {layers} layers"
    model["seq_len"] = _int(r["sequence_length"])
    dtype = r["dtype"].lower()
    gpus = int(r["num_gpus"])
    # the image's tag, or the FW_VERSION launch.sh names a digest-pinned image by (Grok-1 at v24.11.1)
    container = re.search(r"(?:nemo:|FW_VERSION=)(\d+\.\d+)", str(r["container"])).group(1)
    files = [f"{REPO}: {p} @{r['content_commit']}" for p in r["config_files"]]
    return {
        "id": f"dgxc-{r['release']}-h100-{dtype}-{SLUG[r['model']]}-{r['model_size']}-{gpus}gpu",
        "group": f"NVIDIA DGX Cloud benchmarking, NeMo {container}, H100 {r['dtype']}",
        "source": {"repo_files": files,
                   "table": f"{r['file']} @{r['content_commit']} ({r['release']}): {r['table_header'][:200].strip()}",
                   "measured_as": str(r["measurement_method"])[:300]},
        "hardware": {**HARDWARE, "num_gpus": gpus,
                     **({"attention_kernel": "flash2"} if (*key, r["release"]) in FLASH2 else {})},
        "model": {**model, "dtype": dtype},
        "strategy": strategy(r),
        "measured": {"iteration_time_s": float(str(r["measured"]["step_time_s_per_step"]).replace(" ", ""))},
    }


def _published() -> set:
    """(model name stem, precision, GPUs, step time) of the runs public.yaml already holds."""
    data = yaml.safe_load((ROOT / "autoplan" / "data" / "public.yaml").read_text())
    out = set()
    for c in data["cases"]:
        if str(c["id"]).startswith("dgxc-h100-") and "iteration_time_s" in c["measured"]:
            out.add((str(c["id"]).split("-")[2], c["hardware"]["num_gpus"], float(c["measured"]["iteration_time_s"])))
    return out


HEADER = ("# Generated by benchmarks/data/dgxc/make_runs.py from benchmarks/data/dgxc/inventory.yaml: NVIDIA\n"
          "# dgxc-benchmarking's measured H100 pre-training step times of its NeMo 1.x recipes (the last step\n"
          "# of a 50-step run), each with the settings its recipe files state at that commit. Do not edit by hand.\n")


def build() -> tuple[str, int]:
    """The file's text and its number of runs."""
    rows = yaml.safe_load((HERE / "inventory.yaml").read_text())
    seen = _published()
    cases = []
    for r in rows:
        if (r["gpu_type"], r["training_type"]) != ("H100", "pre-training") or (r["model"], r["model_size"]) not in MODELS:
            continue
        if not str(r["framework"]).startswith("NeMo 1"):
            continue
        c = case(r)
        if (r["dtype"].lower(), c["hardware"]["num_gpus"], c["measured"]["iteration_time_s"]) in seen:
            continue
        cases.append(c)
    body = yaml.safe_dump({"title": "NVIDIA dgxc-benchmarking H100 NeMo 1.x recipes (measured)", "cases": cases},
                          sort_keys=False, width=120)
    return HEADER + body, len(cases)


def main() -> None:
    text, n = build()
    OUT.write_text(text)
    print(f"{n} runs written to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
