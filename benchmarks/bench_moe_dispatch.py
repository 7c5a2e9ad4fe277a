"""autoplan's MoE routing kernels against Megatron-Core 0.9's routing code timed on one H100.

benchmarks/device/moe_dispatch.py ran core_v0.9.0's router, permute, sort_chunks_by_idxs and unpermute in plain
PyTorch at Grok-1's shapes (cluster_specs/calibration/h100-moe-dispatch.json): each piece's forward + backward by
wall clock over back-to-back calls and by its kernels' own GPU time (torch.profiler). This sets beside the kernel
time the seconds of the same ops in ``moe_layer.moe_layer`` for the dgxc Grok-1 H100 plans with as many tokens a GPU
and local experts (dgx-h100-80g, one GPU alone). The wall clock is the host's: one H100 VM's launches and sync.

Run: python benchmarks/bench_moe_dispatch.py [--quick]     (--quick: the same; it takes about a second)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from autoplan.families.transformer import moe_layer as moe
from autoplan.validate import files
from autoplan.validate.transformer import model_of, run_case
from autoplan.specs import load_cluster

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "cluster_specs" / "calibration" / "h100-moe-dispatch.json"
PIECES = {"router": ("router", "router.routing", "router.dgrad", "router.wgrad", "router.routing.bwd"),
          "permute": ("permute", "permute.bwd"), "unpermute": ("unpermute", "unpermute.bwd"),
          "sort_chunks": ("sort_chunks", "sort_chunks.bwd")}
"""Each timed piece and the model's ops for it (forward and backward); one sort of the two a layer has each way."""


def grok_plan(tokens: int, local: int):
    """Grok-1's model and its dgxc H100 plan on 32 GPUs (TP 4, SP, expert TP 4; 1,024 tokens a GPU, as on every
    Grok-1 H100 run), with the sequence and EP set to route ``tokens`` a GPU to ``local`` experts."""
    path = files.default_files()[2]
    case = next(c for c in files.load(path)["cases"] if c["id"] == "dgxc-v24.11.1-h100-bf16-grok1-314b-32gpu")
    model, plan = model_of(case["model"], path), run_case(case, path).plan
    # the script's routing: dropless (no capacity), as NeMo 1.x's Megatron-Core 0.9 ran it
    model = replace(model, seq_len=tokens * plan.tp, capacity_factor=0.0, pad_to_capacity=False)
    return model, replace(plan, cp=1, ep=model.experts // local, etp=4)


def model_seconds(tokens: int, local: int) -> dict[str, float]:
    cluster = load_cluster("dgx-h100-80g", 64)
    cluster = replace(cluster, gpu=replace(cluster.gpu, speed_variability=0.0))
    model, plan = grok_plan(tokens, local)
    lay = moe.moe_layer(model, cluster, moe.layer_key(plan)).compute
    ops = {op.name: op.seconds for op in lay.forward + lay.backward}
    return {piece: sum(ops.get(name, 0.0) for name in names) for piece, names in PIECES.items()}


def rows() -> list[dict]:
    out = []
    for r in json.loads(FILE.read_text())["rows"]:
        modelled = model_seconds(r["tokens"], r["local_experts"])
        for piece in PIECES:
            if f"{piece}_fwd_bwd_s" in r:
                out.append({"tokens": r["tokens"], "local": r["local_experts"], "piece": piece,
                            "wall_s": r[f"{piece}_fwd_bwd_s"], "kernel_s": r[f"{piece}_fwd_bwd_kernel_s"],
                            "kernels": r[f"{piece}_fwd_bwd_kernels"], "model_s": modelled[piece]})
    return out


def main() -> None:
    data = json.loads(FILE.read_text())
    print(f"{data['gpu']} ({FILE.name}, torch {data['torch']}; {data['measured']}): Grok-1 routing, forward + "
          "backward, ms a layer and micro-batch")
    print(f"note: {data['note']}")
    print("tokens local piece        kernels  wall ms  kernel ms  model ms  model/kernel")
    table = rows()
    for r in table:
        print(f"{r['tokens']:6d} {r['local']:5d} {r['piece']:12s} {r['kernels']:7.0f} {r['wall_s'] * 1e3:8.3f} "
              f"{r['kernel_s'] * 1e3:10.3f} {r['model_s'] * 1e3:9.3f}  {r['model_s'] / r['kernel_s']:6.2f}")
    moved = [r for r in table if r["piece"] != "router"]
    kernel, model = sum(r["kernel_s"] for r in moved), sum(r["model_s"] for r in moved)
    print(f"permute, unpermute and sorts: kernels {kernel * 1e3:.2f} ms, model {model * 1e3:.2f} ms "
          f"({model / kernel - 1:+.1%}); wall clock {sum(r['wall_s'] for r in moved) * 1e3:.2f} ms")
    router = [r for r in table if r["piece"] == "router"]
    kernel, model = sum(r["kernel_s"] for r in router), sum(r["model_s"] for r in router)
    print(f"router: kernels {kernel * 1e3:.2f} ms, model {model * 1e3:.2f} ms ({model / kernel - 1:+.1%}: each small "
          "kernel priced at the launch-and-tail overhead, which the profiler's kernel time leaves out)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the same (about a second)")
    parser.parse_args()
    main()
