"""CNN family figures: search time for ResNet-50 on 256 GPUs and accuracy against the CNN oracle's measured runs.

    python benchmarks/bench_cnn.py [--quick]     (--quick: the search on 8 GPUs, global batch 256)
"""

from __future__ import annotations

import argparse
import time

from autoplan.families.registry import FAMILIES
from autoplan.search.exhaustive import search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.validate import Report, load, run_cnn_case

FULL, QUICK = (256, 1536), (8, 256)
"""(GPUs, global batch) of the search; --quick's is the smallest DGX H100 node."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"search on {QUICK[0]} GPUs, global batch {QUICK[1]}")
    gpus, batch = QUICK if ap.parse_args().quick else FULL
    model, cluster = get_model("resnet50"), load_cluster("dgx-h100-80g", gpus)
    start = time.perf_counter()
    plans, _ = enumerate_plans(model, gpus, load_space(FAMILIES["cnn"].default_space), batch)
    result = search(model, cluster, plans, top_k=10)
    seconds = time.perf_counter() - start
    best = result.leaderboard[0]
    print(f"resnet50 on {gpus} H100s, global batch {batch}: {len(plans)} valid plans searched in {seconds:.2f} s; "
          f"best {best.strategy.short()} {best.metrics.step_time * 1e3:.2f} ms/step, "
          f"{best.metrics.samples_per_s:,.0f} samples/s")
    # the CNN runs of `autoplan validate` (validate.validate runs them so, after the transformer cases)
    cnn = [run_cnn_case(c) for c in load().get("cnn_cases", [])]
    s = Report.summary(cnn)
    print(f"CNN oracle runs: {s['n']} cases, mean |error| {s['mean_abs_pct']:.2f} % "
          f"(accuracy {100 - s['mean_abs_pct']:.1f} %; the oracle paper reports 86.7 %), max {s['max_abs_pct']:.2f} %")
    for c in cnn:
        print(f"  {c.id:28s} measured {c.measured:<10.5g} predicted {c.predicted:<10.4g} {c.error_pct:+6.1f} %")


if __name__ == "__main__":
    main()
