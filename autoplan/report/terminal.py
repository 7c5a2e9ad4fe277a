"""Rich renderings for the terminal: plan summaries, time breakdown bars, memory tables."""

from __future__ import annotations

from typing import Any, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text

GIB = 1024**3
COLORS = {"compute": "green", "recompute": "dark_green", "tp": "cyan", "cp": "blue", "ep": "orange3", "pp": "magenta",
          "dp": "yellow", "a2a": "bright_magenta", "optimizer": "white", "bubble": "red"}
LABELS = {"compute": "compute", "recompute": "recompute", "tp": "exposed TP comm", "cp": "exposed CP comm",
          "ep": "exposed EP all-to-all", "pp": "exposed PP comm", "dp": "exposed DP comm",
          "a2a": "exposed embedding all-to-all", "optimizer": "optimizer",
          "bubble": "bubble / idle"}


def plain(value: Any) -> Text:
    """``value`` as text that rich never parses for markup: names and labels that come from the user's files."""
    return Text(str(value))


def breakdown_bar(breakdown: dict[str, float], width: int = 60) -> Text:
    """A one-line stacked bar of where the step's time goes."""
    total = sum(breakdown.values()) or 1.0
    bar = Text()
    for kind, sec in breakdown.items():
        n = round(width * sec / total)
        if n:
            bar.append("█" * n, style=COLORS.get(kind, "white"))
    return bar


def breakdown_table(breakdown: dict[str, float]) -> Table:
    """Seconds and share of each kind of time."""
    total = sum(breakdown.values()) or 1.0
    t = Table(title="Where the step goes (mean over pipeline stages)", title_justify="left")
    t.add_column("kind")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    digits = 3 if total >= 0.1 else 6                      # a DLRM step takes milliseconds
    for kind, sec in breakdown.items():
        if sec > 0:
            t.add_row(Text(LABELS.get(kind, kind), style=COLORS.get(kind, "")), f"{sec:.{digits}f}",
                      f"{100 * sec / total:.1f} %")
    return t


def memory_table(stages: Iterable[Any], capacity: float) -> Table:
    """Per-stage memory in GiB, with the total against HBM capacity."""
    stages = list(stages)
    shown = stages if len(stages) <= 8 else stages[:3] + stages[-2:]
    t = Table(title=f"Memory per GPU (GiB, capacity {capacity / GIB:.1f})", title_justify="left")
    for col in ("stage", "weights", "grads", "optimizer", "activations", "embed/logits", "buffers", "reserve", "total"):
        t.add_column(col, justify="right")
    for m in shown:
        style = "" if m.total <= capacity else "bold red"
        t.add_row(str(m.stage), *(f"{x / GIB:.1f}" for x in (m.weights, m.gradients, m.optimizer, m.activations,
                                                              m.embedding, m.buffers, m.reserve)),
                  Text(f"{m.total / GIB:.1f}", style=style))
    return t


def summary_table(m: Any, gpus: int) -> Table:
    """Headline figures of a simulated step."""
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    verdict = Text("fits", style="green") if m.fits else Text("does NOT fit", style="bold red")
    rows = [
        ("step time", f"{m.step_time:.3f} s" if m.step_time >= 0.1 else f"{m.step_time * 1e3:.3f} ms"),
        ("throughput", f"{m.tokens_per_s:,.0f} tokens/s  ({m.samples_per_s:,.1f} samples/s, {gpus} GPUs)"),
        ("model TFLOP/s per GPU", f"{m.model_tflops_per_gpu:.1f}  (MFU {100 * m.mfu:.1f} %)"),
        ("hardware TFLOP/s per GPU", f"{m.hardware_tflops_per_gpu:.1f}  (HFU {100 * m.hfu:.1f} %)"),
        ("peak memory", f"{m.peak_memory / GIB:.1f} of {m.memory_capacity / GIB:.1f} GiB"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    t.add_row("verdict", verdict)
    return t


def simulation_view(title: str, m: Any, gpus: int) -> Group:
    """The whole `autoplan simulate` screen."""
    return Group(Text(title, style="bold"), summary_table(m, gpus), Text(""), breakdown_bar(m.breakdown),
                 breakdown_table(m.breakdown), memory_table(m.memory, m.memory_capacity))


def check_view(report: dict, model: Any, cluster: Any, s: Any) -> Group:
    """The `autoplan check` screen."""
    head = Text(f"{model.name} on {cluster.gpus} × {cluster.gpu.name} ({cluster.name}): {s.short()}, "
                f"global batch {s.global_batch}", style="bold")
    if not report["valid"] and "memory_gib" not in report:
        reasons = Text("invalid plan:\n", style="bold red")
        for r in report["violations"]:
            reasons.append(f"  • {r}\n")
        return Group(head, reasons)
    fits = f"valid plan: peak {report['peak_memory_gib']:.1f} GiB per GPU fits in the {report['capacity']}"
    verdict = Text(fits if report["valid"] else "invalid plan: " + "; ".join(report["violations"]),
                   style="green" if report["valid"] else "bold red")
    mem = Table(title=f"Memory per GPU (GiB, {report['capacity']})", title_justify="left")
    cols = ("stage", "weights", "gradients", "optimizer", "activations", "embedding", "buffers", "reserve", "total")
    for c in cols:
        mem.add_column(c, justify="right")
    rows = report["memory_gib"]
    for r in (rows if len(rows) <= 8 else rows[:3] + rows[-2:]):
        mem.add_row(str(r["stage"]), *(f"{r[c]:.1f}" for c in cols[1:]))
    lay = report["layer_ms"]
    layer = Table(title=f"One layer, one micro-batch, per GPU: forward {lay['forward']:.3f} ms, backward "
                        f"{lay['backward']:.3f} ms, recompute {lay['recompute']:.3f} ms", title_justify="left")
    for c in ("pass", "op", "GFLOP", "MB moved", "µs", "TFLOP/s"):
        layer.add_column(c, justify="right" if c not in ("pass", "op") else "left")
    for op in lay["ops"]:
        rate = op["gflop"] / op["us"] * 1e3 if op["us"] else 0.0
        layer.add_row(plain(op["pass"]), plain(op["op"]), f"{op['gflop']:.1f}", f"{op['mb']:.1f}", f"{op['us']:.1f}",
                      f"{rate:.0f}" if op["gflop"] else "")
    coll = Table(title="Collectives", title_justify="left")
    for c in ("group", "op", "members", "per node × nodes", "MB", "ms", "bus GB/s", "when"):
        coll.add_column(c, justify="right" if c in ("MB", "ms", "bus GB/s", "members") else "left")
    for c in report["collectives"]:
        coll.add_row(plain(c["group"]), plain(c["op"]), str(c["size"]), f"{c['per_node']} × {c['nodes']}", f"{c['mb']:.1f}",
                     f"{c['ms']:.3f}", f"{c['busbw_gb_per_s']:.0f}" if c["busbw_gb_per_s"] else "", plain(c["when"]))
    sym = report["symbolic"]
    volumes = ", ".join([f"{sym['tflop']:,.1f} TFLOP"] + [f"{gb:,.2f} GB over {name}" for name, gb in sym["tier_gb"].items()])
    symbolic = Text(f"Symbolic, per GPU per step (the slowest stage; hardware-free): {volumes}; bubble "
                    f"{100 * sym['bubble']:.1f} %")
    return Group(head, verdict, mem, layer, coll, symbolic)


def leaderboard_table(rows: list[dict], title: str, throughput: str = "tokens/s") -> Table:
    """The ranked plans (``throughput`` names the unit of the tokens_per_s column: samples/s for CNNs)."""
    t = Table(title=plain(title), title_justify="left")
    for col, label in (("rank", "#"), ("plan", "plan"), ("step_s", "step s"), ("tokens_per_s", throughput),
                       ("mfu_pct", "MFU %"), ("bubble_pct", "bubble %"), ("exposed_comm_pct", "exposed comm %"),
                       ("peak_gib", "peak GiB")):
        t.add_column(label, justify="left" if col == "plan" else "right")
    for r in rows:
        step = f"{r['step_s']:.3f}" if r["step_s"] >= 0.1 else f"{r['step_s']:.4f}"    # CNN steps last milliseconds
        t.add_row(str(r["rank"]), plain(r["plan"]), step, f"{r['tokens_per_s']:,}", f"{r['mfu_pct']:.1f}",
                  f"{r['bubble_pct']:.1f}", f"{r['exposed_comm_pct']:.1f}", f"{r['peak_gib']:.1f}/{r['capacity_gib']:.0f}")
    return t


def space_view(c: dict, title: str) -> Group:
    """A space's funnel (combinations → valid → distinct → fit) and its rejection reasons."""
    axes = Table(show_header=False, box=None)
    axes.add_column(style="bold")
    axes.add_column()
    for name, values in c["axes"].items():
        axes.add_row(plain(name), plain(", ".join(str(v).lower() for v in values)))
    funnel = Table(title="What reaches the simulator", title_justify="left")
    funnel.add_column("plans", justify="right")
    funnel.add_column("")
    funnel.add_row(f"{c['raw']:,}", "combinations of the axes (dp = gpus / (tp·pp·cp))")
    funnel.add_row(f"{c['valid']:,}", "valid")
    funnel.add_row(f"{c['distinct']:,}", f"distinct ({c['equivalent']:,} the same as another plan on this cluster)")
    funnel.add_row(Text(f"{c['fit']:,}", style="bold green"),
                   f"fit in {c['memory_capacity_gib']:g} GiB ({c['out_of_memory']:,} do not)")
    reasons = Table(title=f"Why {c['rejected']:,} combinations are invalid (a plan may have several reasons)",
                    title_justify="left")
    reasons.add_column("plans", justify="right")
    reasons.add_column("reason (N stands for a number)")
    for reason, n in c["reasons"].items():
        reasons.add_row(f"{n:,}", plain(reason))
    return Group(Text(title, style="bold"), axes, Text(), funnel, Text(), reasons)
