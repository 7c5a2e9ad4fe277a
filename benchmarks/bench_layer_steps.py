"""autoplan's layer model against one transformer layer measured on a GPU: forward + backward of a TP shard (no
communication, no recompute), its GEMMs alone and its attention core alone.

The measurements (cluster_specs/calibration/{h100,h200}-layer-steps.json) were taken by
benchmarks/device/layer_step.py in eager PyTorch 2.11 (cuBLAS GEMMs, SDPA attention, unfused layer norm, GELU/SwiGLU
and residual adds): Megatron-LM with Transformer Engine fuses more of the element-wise work and runs cuDNN attention,
so the measured layer is, if anything, slower than Megatron's. Predicted with dgx-h100-80g (the H200 rows with its
HBM scaled to the H200's 4.8 TB/s, NVIDIA H200 datasheet; same SMs and clocks as the H100 SXM).

The same layer under torch.compile (h100-layer-steps-compiled.json) has its norms, activations and residual adds
fused, as Megatron-LM's Transformer Engine layers have them.

Every file was taken with each step's gradients cleared (``grads_cleared``), as Megatron's wgrad GEMMs write them in
place, and records an 8192³ GEMM's rate before and after the layers (the clock the GPU ran at).

Run: python benchmarks/bench_layer_steps.py [--quick]     (--quick: the H100 files only)
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path

from autoplan.families.catalog import get_model
from autoplan.families.transformer.layer import layer_compute
from autoplan.specs import load_cluster

CALIBRATION = Path(__file__).resolve().parents[1] / "cluster_specs" / "calibration"
GEMMS = ("qkv", "proj", "fc1", "fc2")
H200_HBM = 4.8 / 3.35
"""H200 over H100 SXM HBM bandwidth (NVIDIA H200 datasheet 4.8 TB/s; H100 SXM datasheet 3.35 TB/s)."""


def predicted(row: dict, hbm_scale: float) -> dict:
    """Seconds autoplan's layer model gives one measured row: the layer, its GEMMs, its attention core."""
    cluster = load_cluster("dgx-h100-80g", 8).scaled(hbm_bandwidth=hbm_scale)
    # one GPU timed alone: no slower GPU of a job sets its pace (GPUSpec.pace)
    cluster = replace(cluster, gpu=replace(cluster.gpu, speed_variability=0.0))
    model = get_model(row["model"])
    model = replace(model, seq_len=row["seq"]) if model.seq_len != row["seq"] else model
    layer = layer_compute(model, cluster, row["tp"], 1, False, row["mb"], "none")
    ops = layer.forward + layer.backward
    return {"layer": sum(o.seconds for o in ops),
            "gemms": sum(o.seconds for o in ops if o.name.split(".")[0] in GEMMS),
            "attention": sum(o.seconds for o in ops if o.name.startswith("attention"))}


def table(path: Path, hbm_scale: float) -> list[float]:
    data = json.loads(path.read_text())
    print(f"\n{data['gpu']} ({path.name}; {data['measured']})")
    if "reference_gemm_tflops" in data:
        ref = data["reference_gemm_tflops"]
        print(f"8192^3 BF16 GEMM before / after the layers: {ref['before']:.0f} / {ref['after']:.0f} TFLOP/s")
    print(f"{'model':11s} {'tp':>3s} {'mb':>3s} {'seq':>5s} | {'layer ms':>8s} {'pred':>7s} {'error':>7s} | "
          f"{'GEMMs ms':>8s} {'pred':>7s} {'error':>7s} | {'attn ms':>7s} {'pred':>6s} | {'other ms':>8s} {'pred':>6s}")
    errors = []
    for row in data["rows"]:
        p = predicted(row, hbm_scale)
        m = {"layer": row["layer_fwd_bwd_s"], "gemms": row["gemms_alone_s"], "attention": row["attention_fwd_bwd_alone_s"]}
        err = 100 * (p["layer"] / m["layer"] - 1)
        errors.append(err)
        other_m, other_p = (x["layer"] - x["gemms"] - x["attention"] for x in (m, p))
        print(f"{row['model']:11s} {row['tp']:3d} {row['mb']:3d} {row['seq']:5d} | {1e3 * m['layer']:8.2f} "
              f"{1e3 * p['layer']:7.2f} {err:+6.1f}% | {1e3 * m['gemms']:8.2f} {1e3 * p['gemms']:7.2f} "
              f"{100 * (p['gemms'] / m['gemms'] - 1):+6.1f}% | {1e3 * m['attention']:7.2f} {1e3 * p['attention']:6.2f} | "
              f"{1e3 * other_m:8.2f} {1e3 * other_p:6.2f}")
    print(f"layer fwd+bwd: mean |error| {statistics.mean(map(abs, errors)):.2f} %, max {max(map(abs, errors)):.2f} %, "
          f"signed {statistics.mean(errors):+.2f} % ({len(errors)} layers)")
    return errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the H100 files only")
    args = parser.parse_args()
    table(CALIBRATION / "h100-layer-steps.json", 1.0)
    table(CALIBRATION / "h100-layer-steps-compiled.json", 1.0)
    if not args.quick:
        table(CALIBRATION / "h200-layer-steps.json", H200_HBM)


if __name__ == "__main__":
    main()
