"""autoplan against the FP8-Flow-MoE artifact's measured MoE runs (arXiv 2511.02302, MLSys 2026; github.com/021ai/
FP8-FLOW-MOE-AE @5402dc8): DeepSeek-V3 671B, DeepSeek-V2 236B and Qwen3-235B-A22B on 256 Hopper GPUs, Megatron-LM
with Transformer Engine 2.8, each in BF16, blockwise FP8 and tensor-wise FP8 at EP 8, 16 and 32. None of these runs
is in `autoplan validate`, and no constant was fitted to them.

What it prints, per run: the measured tokens/s/GPU, autoplan's, and the error, and the peak memory per GPU the artifact
measured (outside the process, so with the CUDA context, NCCL's and DeepEP's buffers and the allocator's cache) beside
autoplan's fullest GPU. For each model and EP it also prints FP8's speed-up over BF16 and the memory FP8 adds, measured
and predicted. The cluster is an assumption: the artifact names only
"NVIDIA Hopper GPUs, intra-node NVLink, inter-node RoCE". The logged MFU (29.7 % at 294 TFLOP/s/GPU) puts the peak
at 989 TFLOP/s, an H100- or H800-class part, so the runs are predicted on dgx-h800-80g. The FP8 / BF16 ratio of two
runs on the same machine does not depend on that assumption.

The plans are the launch scripts' (tests/e2e_efficiency_evaluation/run_dlc_e2e.sh and pretrain_ds.sh /
pretrain_qwen3.sh): TP 1, DP = 256 / PP, micro-batch 1, sequence 4096, the distributed optimizer with every optimizer
state offloaded to the host (OFFLOAD_OPTIMIZER=true: --optimizer-cpu-offload, --overlap-cpu-optimizer-d2h-h2d),
gradients in bf16 (PAO=grads: --main-grads-dtype bf16), --overlap-grad-reduce and --overlap-param-gather, no
TP-comm or all-to-all overlap, grouped GEMMs, DeepEP's flex dispatcher (BF16 dispatch: Megatron-Core has no FP8
dispatch), FlashAttention-2 (NVTE_FLASH_ATTN=1, NVTE_FUSED_ATTN=0), full recomputation of every layer ("full":
--recompute-method uniform --recompute-num-layers 1).
Left out: FP8-Flow-MoE's own runs (its fused FP8 dataflow is not modelled); the "sel" runs (the fork's
--recompute-modules "attn layernorm moe_expert" has no autoplan counterpart); the runs whose pipeline layout autoplan
cannot express (DeepSeek-V3 at EP 8: an embedding-only first stage, "E|(tt|)*30,tL"; DeepSeek-V2 at EP 32: a
per-chunk layout string); and the runs that ran out of memory.

Run: python benchmarks/bench_fp8_flow_moe.py [--quick]     (--quick: Qwen3 at EP 8 only)
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from dataclasses import replace
from pathlib import Path

from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.sim.simulate import score
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec

DATA = Path(__file__).resolve().parent / "data" / "fp8_flow_moe" / "expected_results.csv"
GPUS = 256
SEQ = 4096
PRECISION = {"bf16": "bf16", "blockwise": "fp8-blockwise", "tensorwise": "fp8-current"}
"""Megatron-LM --fp8-recipe blockwise (1x128 activation, 128x128 weight scales) and tensorwise (per-tensor current
scaling, Transformer Engine's Float8CurrentScaling)."""


def _models() -> dict[str, ModelSpec]:
    """The three models as the launch scripts build them (pretrain_ds.sh MODEL_SIZE 600B and 200B, pretrain_qwen3.sh
    qwen_A22B)."""
    # 600B: DeepSeek-V3's shapes, no multi-token prediction (MTP_NUM_LAYERS unset), no group-limited routing
    v3 = replace(get_model("deepseek-v3"), mtp_layers=0, route_nodes=0, seq_len=SEQ)
    # 200B: hidden 5120, 128 heads, 60 layers, FFN 12288, 160 experts of 1536 (top 6), 2 shared, 1 dense layer
    v2 = replace(v3, name="deepseek-v2", layers=60, hidden=5120, ffn_hidden=12288, moe_ffn_hidden=1536, experts=160,
                 top_k=6, shared_experts=2, dense_layers=1, vocab=102400)
    qwen3 = replace(get_model("qwen3-235b-a22b"), seq_len=SEQ)
    return {"deepseekv3": v3, "deepseekv2": v2, "qwen3": qwen3}


GLOBAL_BATCH = {"deepseekv3": 15360, "deepseekv2": 8192, "qwen3": 8192}
LAYOUTS = {  # (model, EP): (PP, first-stage layers, last-stage layers), run_dlc_e2e.sh
    ("deepseekv3", "ep16"): (16, 0, 1), ("deepseekv3", "ep32"): (8, 0, 5),
    ("deepseekv2", "ep8"): (16, 2, 2), ("deepseekv2", "ep16"): (8, 0, 4),
    ("qwen3", "ep8"): (8, 0, 10), ("qwen3", "ep16"): (8, 0, 10), ("qwen3", "ep32"): (8, 0, 10)}


def rows(quick: bool) -> list[dict]:
    """The measured runs autoplan can express (module docstring), in the file's order."""
    with open(DATA) as f:
        data = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    keep = [r for r in data if r["tgs"] != "OOM" and r["method"] in PRECISION and r["ac_mode"] == "full"
            and (r["model"], r["ep"]) in LAYOUTS]
    return [r for r in keep if r["model"] == "qwen3" and r["ep"] == "ep8"] if quick else keep


def plan_of(r: dict) -> Strategy:
    pp, first, last = LAYOUTS[(r["model"], r["ep"])]
    return Strategy(tp=1, pp=pp, dp=GPUS // pp, ep=int(r["ep"][2:]), etp=1, micro_batch=1,
                    global_batch=GLOBAL_BATCH[r["model"]], recompute="full", zero=1, optimizer_offload_pct=100,
                    precision=PRECISION[r["method"]], grad_reduce_in_fp32=False, overlap_grad_reduce=True,
                    overlap_param_gather=True, overlap_p2p_comm=False, first_stage_layers=first,
                    last_stage_layers=last)


def cluster():
    """dgx-h800-80g at 256 GPUs, with FlashAttention-2 (the scripts' attention backend)."""
    c = load_cluster("dgx-h800-80g", GPUS)
    return replace(c, gpu=c.gpu.with_flash2_attention())


def predicted(r: dict, models: dict[str, ModelSpec]) -> tuple[float, float]:
    """autoplan's tokens/s/GPU and peak GiB on the fullest GPU for the row's plan."""
    m = score(models[r["model"]], cluster(), plan_of(r))
    return GLOBAL_BATCH[r["model"]] * SEQ / m.step_time / GPUS, m.peak_memory / 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="Qwen3 at EP 8 only")
    args = parser.parse_args()
    models, t0 = _models(), time.process_time()
    runs = rows(args.quick)
    print(f"{'':26s} | {'tokens/s/GPU':^25s} | {'peak memory':^17s}")
    print(f"{'model':10s} {'EP':>4s} {'precision':10s} | {'measured':>8s} {'autoplan':>8s} {'error':>7s} | "
          f"{'GB':>6s} {'GiB':>8s}")
    pred, memory, errors = {}, {}, []
    for r in runs:
        key = (r["model"], r["ep"], r["method"])
        p, memory[key] = predicted(r, models)
        pred[key] = p
        # error in step time, as validate reports it: measured / predicted throughput - 1
        errors.append(100 * (float(r["tgs"]) / p - 1))
        print(f"{r['model']:10s} {r['ep'][2:]:>4s} {r['method']:10s} | {float(r['tgs']):8.0f} {p:8.0f} {errors[-1]:+6.1f}% | "
              f"{float(r['mem']):6.0f} {memory[key]:8.1f}")
    bf16 = [e for r, e in zip(runs, errors) if r["method"] == "bf16"]
    fp8 = [e for r, e in zip(runs, errors) if r["method"] != "bf16"]
    print(f"step time: mean |error| {statistics.mean(map(abs, errors)):.1f} % over {len(errors)} runs "
          f"(BF16 {statistics.mean(map(abs, bf16)):.1f} %, signed {statistics.mean(bf16):+.1f} %; FP8 "
          f"{statistics.mean(map(abs, fp8)):.1f} %, signed {statistics.mean(fp8):+.1f} %) ({time.process_time() - t0:.1f} s CPU)")
    print("\nFP8 over BF16 on the same plan: throughput ratio, and the peak memory FP8 adds (GB measured, GiB autoplan):")
    measured = {(r["model"], r["ep"], r["method"]): (float(r["tgs"]), float(r["mem"])) for r in runs}
    gains, adds = [], []
    for (model, ep, method), (tgs, mem) in measured.items():
        base = measured.get((model, ep, "bf16"))
        if method != "bf16" and base:
            gains.append((tgs / base[0], pred[(model, ep, method)] / pred[(model, ep, "bf16")]))
            added = memory[(model, ep, method)] - memory[(model, ep, "bf16")]
            adds.append((mem - base[1], added))
            print(f"  {model:10s} EP{ep[2:]:<3s} {method:10s} measured {gains[-1][0]:.2f}x, autoplan "
                  f"{gains[-1][1]:.2f}x; memory {mem - base[1]:+.0f} GB, autoplan {added:+.1f} GiB")
    if gains:
        print(f"  mean: measured {statistics.mean(m for m, _ in gains):.2f}x, autoplan "
              f"{statistics.mean(p for _, p in gains):.2f}x ({len(gains)} pairs); memory added: measured "
              f"{statistics.mean(m for m, _ in adds):+.1f} GB, autoplan {statistics.mean(p for _, p in adds):+.1f} GiB")


if __name__ == "__main__":
    main()
