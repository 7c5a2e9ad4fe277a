"""CNN family figures: search time for ResNet-50 on 256 GPUs and accuracy against the CNN oracle's measured runs.

    python benchmarks/bench_cnn.py
"""

from __future__ import annotations

import time

from autoplan.families.registry import FAMILIES
from autoplan.search.exhaustive import search
from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster
from autoplan.validate import Report, validate


def main() -> None:
    model, cluster = get_model("resnet50"), load_cluster("dgx-h100-80g", 256)
    start = time.perf_counter()
    plans, _ = enumerate_plans(model, 256, load_space(FAMILIES["cnn"].default_space), 1536)
    result = search(model, cluster, plans, top_k=10)
    seconds = time.perf_counter() - start
    best = result.leaderboard[0]
    print(f"resnet50 on 256 H100s, global batch 1536: {len(plans)} valid plans searched in {seconds:.2f} s; "
          f"best {best.strategy.short()} {best.metrics.step_time * 1e3:.2f} ms/step, "
          f"{best.metrics.samples_per_s:,.0f} samples/s")
    report = validate()
    s = Report.summary(report.cnn)
    print(f"CNN oracle runs: {s['n']} cases, mean |error| {s['mean_abs_pct']:.2f} % "
          f"(accuracy {100 - s['mean_abs_pct']:.1f} %; the oracle paper reports 86.7 %), max {s['max_abs_pct']:.2f} %")
    for c in report.cnn:
        print(f"  {c.id:28s} measured {c.measured:<10.5g} predicted {c.predicted:<10.4g} {c.error_pct:+6.1f} %")


if __name__ == "__main__":
    main()
