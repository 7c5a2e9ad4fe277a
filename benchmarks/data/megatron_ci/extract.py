"""Build the Megatron-LM CI calibration sets (cluster_specs/calibration/megatron-ci-dgx-{a100,h100}.yaml) from a
Megatron-LM checkout: every GPT functional test of the CI's 12-layer test model whose golden values log an
iteration time on the platform, as a run of `autoplan validate`'s schema (model and plan from its model_config.yaml,
the step time the median of the golden values' logged iteration times from step 5 on).

Left out, each with its reason in the file's header: checkpoint-resume runs (their golden values time a resumed job),
test cases whose arguments the plan cannot state (FP8, FSDP, MLA, uneven or hierarchical layouts, ...), and every
test case a row of `autoplan validate` (autoplan/data/*.yaml) comes from, so that the calibration never sees a
counted run.

Run: python benchmarks/data/megatron_ci/extract.py MEGATRON_LM_CHECKOUT   (writes both files)
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
CASES = "tests/functional_tests/test_cases/gpt"
PLATFORMS = {"dgx_a100": ("dgx-a100-80g", "A100-SXM4-80GB (DGX A100)"),
             "dgx_h100": ("dgx-h100-80g", "H100-SXM5-80GB (DGX H100)")}
GPUS = 8
"""tests/test_utils/recipes/h100/gpt.yaml: nodes 1, gpus 8 (every case kept here runs on one node)."""
MAPPED = {
    "--num-layers", "--hidden-size", "--num-attention-heads", "--micro-batch-size", "--global-batch-size",
    "--seq-length", "--max-position-embeddings", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
    "--context-parallel-size", "--num-layers-per-virtual-pipeline-stage", "--sequence-parallel",
    "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
    "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--position-embedding-type",
    "--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--no-gradient-accumulation-fusion",
    "--bf16", "--attention-backend", "--transformer-impl", "--hidden-dropout", "--attention-dropout", "--vocab-size",
    "--cross-entropy-loss-fusion", "--cp-comm-type"}
"""Arguments that set the model or the plan, each mapped below."""
NEUTRAL = re.compile(
    r"--(log-.*|no-ckpt-.*|tensorboard-dir|train-iters|timing-log-level|lr.*|min-lr|save.*|load|data-path|"
    r"data-cache-path|"
    r"vocab-file|merge-file|split|distributed-backend|weight-decay|clip-grad|eval-.*|use-mcore-models|ckpt-.*|"
    r"dist-ckpt-.*|async-save|use-persistent-ckpt-worker|deterministic-mode|attention-softmax-in-fp32|"
    r"use-checkpoint-opt_param-scheduler|no-mmap-bin-files|tokenizer-type|apply-query-key-layer-scaling|"
    r"calculate-per-token-loss|decoupled-lr|ddp-average-in-collective|no-create-attention-mask-in-dataloader|"
    r"verify-integrity|mock-data|exit-interval|no-rope-fusion|rotary-interleaved|no-persist-layer-norm|"
    r"no-masked-softmax-fusion|disable-gloo-process-groups|check-weight-hash-across-dp-replicas-interval|"
    r"defer-embedding-wgrad-compute|wgrad-deferral-limit|overlap-p2p-communication-warmup-flush|"
    r"async-strategy|async-ckpt-use-cpu-shm|fim-.*|object-storage-.*)$")
"""Arguments that change neither the model's shape nor the plan's communication (logging, data, optimizer
hyper-parameters, checkpointing, numerics switches); the step time keeps what they cost."""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def counted_test_cases() -> set[str]:
    """Test cases a row of `autoplan validate` names in its sources."""
    names: set[str] = set()
    for f in (ROOT / "autoplan" / "data").glob("*.yaml"):
        names |= set(re.findall(r"test_cases/gpt/([\w.-]+)/", f.read_text()))
    return names


def run_of(name: str, args: dict, seconds: float, span: tuple[float, float], platform: str, shas: tuple[str, str]):
    tp = args.get("--tensor-model-parallel-size", 1)
    pp = args.get("--pipeline-model-parallel-size", 1)
    cp = args.get("--context-parallel-size", 1)
    layers = args["--num-layers"]
    per_chunk = args.get("--num-layers-per-virtual-pipeline-stage")
    te = args.get("--transformer-impl", "transformer_engine") == "transformer_engine"
    backend = args.get("--attention-backend", "auto")
    cluster, gpu = PLATFORMS[platform]
    full = args.get("--recompute-granularity") == "full"
    return {
        "id": f"ci-{platform.replace('_', '')}-{name}",
        "group": f"Megatron-LM CI, {platform.replace('_', ' ').upper()} (calibration)",
        "source": {"paper": None, "repo_files": [
            f"NVIDIA/Megatron-LM: {CASES}/{name}/model_config.yaml @{shas[0]}",
            f"NVIDIA/Megatron-LM: {CASES}/{name}/golden_values_dev_{platform}.json @{shas[1]}"]},
        "hardware": {"gpu": gpu, "gpus_per_node": GPUS, "cluster_spec": cluster, "num_gpus": GPUS,
                     # TE picks flash or fused attention unless told "unfused"; the local implementation has neither
                     "flash_attention": te and backend != "unfused"},
        "model": {"name": "GPT test model (Megatron CI, 12 layers, h 512)",
                  "dropout": not (args.get("--hidden-dropout") == 0 and args.get("--attention-dropout") == 0),
                  "layers": layers, "hidden": args["--hidden-size"], "heads": args["--num-attention-heads"],
                  "ffn_hidden": 4 * args["--hidden-size"], "vocab": args.get("--vocab-size", 50257),
                  "seq_len": args["--seq-length"], "activation": "gelu",
                  "position": "rope" if args.get("--position-embedding-type") == "rope" else "learned",
                  "norm": "layernorm", "bias": not args.get("--disable-bias-linear", False),
                  "tied_embeddings": not args.get("--untie-embeddings-and-output-weights", False)},
        "strategy": {"tp": tp, "pp": pp, "dp": GPUS // (tp * pp * cp), "cp": cp,
                     "microbatch": args["--micro-batch-size"], "global_batch": args["--global-batch-size"],
                     "virtual_stages_per_rank": layers // pp // per_chunk if per_chunk else 1,
                     "recompute": "full" if full else "none",
                     "sequence_parallel": bool(args.get("--sequence-parallel", False)),
                     "distributed_optimizer": bool(args.get("--use-distributed-optimizer", False)),
                     "precision": "bf16", "grad_reduce_in_fp32": True,
                     "overlap_grad_reduce": bool(args.get("--overlap-grad-reduce", False)),
                     "overlap_param_gather": bool(args.get("--overlap-param-gather", False)),
                     "gradient_accumulation_fusion": not args.get("--no-gradient-accumulation-fusion", False),
                     "cross_entropy_fusion": bool(args.get("--cross-entropy-loss-fusion", False)),
                     "tp_comm_overlap": False},
        "measured": {"iteration_time_s": round(seconds, 5)},
        "verified": True,
        "verification": f"median of the golden values' iteration-time from step 5 on ({span[0]}-{span[1]} s)",
    }


def why_not(name: str, cfg: dict, counted: set[str]) -> str:
    args = cfg.get("MODEL_ARGS") or {}
    if name in counted:
        return "a row of autoplan validate"
    if cfg.get("TEST_TYPE") != "regular":
        return f"test type {cfg.get('TEST_TYPE')} (a resumed job)"
    if args.get("--num-layers") != 12 or args.get("--hidden-size") != 512:
        return "not the 12-layer CI model"
    other = sorted(k for k in args if k not in MAPPED and not NEUTRAL.match(k))
    if other:
        return "arguments the plan cannot state: " + " ".join(other)
    if args.get("--recompute-granularity") not in (None, "full") or (
            args.get("--recompute-granularity") == "full" and args.get("--recompute-method") != "uniform"):
        return "a recompute the plan cannot state"
    if args.get("--cp-comm-type", "p2p") != "p2p":
        return f"--cp-comm-type {args['--cp-comm-type']}"
    return ""


def build(repo: Path, platform: str) -> tuple[list[dict], list[str]]:
    counted = counted_test_cases()
    runs, left = [], []
    for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD", CASES + "/").split():
        if not path.endswith(f"/golden_values_dev_{platform}.json"):
            continue
        folder = path.rsplit("/", 1)[0]
        name = folder.rsplit("/", 1)[1]
        cfg = yaml.safe_load(git(repo, "show", f"HEAD:{folder}/model_config.yaml"))
        times = json.loads(git(repo, "show", f"HEAD:{path}")).get("iteration-time", {}).get("values", {})
        steady = [float(v) for k, v in times.items() if int(k) >= 5 and isinstance(v, (int, float))]
        reason = why_not(name, cfg, counted) or ("" if steady else "no iteration time logged")
        if reason:
            left.append(f"{name}: {reason}")
            continue
        shas = (git(repo, "log", "-1", "--format=%h", "--", f"{folder}/model_config.yaml").strip(),
                git(repo, "log", "-1", "--format=%h", "--", path).strip())
        runs.append(run_of(name, cfg["MODEL_ARGS"], statistics.median(steady), (min(steady), max(steady)),
                           platform, shas))
    return runs, left


def main() -> None:
    repo = Path(sys.argv[1])
    head = git(repo, "rev-parse", "--short", "HEAD").strip()
    for platform in PLATFORMS:
        runs, left = build(repo, platform)
        out = ROOT / "cluster_specs" / "calibration" / f"megatron-ci-{platform.replace('_', '-')}.yaml"
        header = [f"Calibration set: Megatron-LM's CI functional tests on {platform} (NVIDIA/Megatron-LM @{head},",
                  f"{CASES}), written by benchmarks/data/megatron_ci/extract.py. Never a row of autoplan validate:",
                  "the test cases validate counts are left out. Left out:"] + [f"  {x}" for x in left]
        text = "".join(f"# {line}\n" for line in header)
        text += yaml.safe_dump({"title": f"Megatron-LM CI calibration set, {platform}", "cases": runs},
                               sort_keys=False, width=118, allow_unicode=True)
        out.write_text(text)
        print(f"{out.relative_to(ROOT)}: {len(runs)} runs, {len(left)} left out")


if __name__ == "__main__":
    main()
