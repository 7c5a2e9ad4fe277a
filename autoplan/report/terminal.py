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


def summary_table(m: Any, gpus: int, gpu: Any = None, precision: str = "bf16", accuracy: str | None = None) -> Table:
    """Headline figures of a simulated step (``gpu``: the cluster's GPU, whose job-size pace is shown when below 1;
    ``precision``: the plan's, whose FP8 peak the MFU is also given against; ``accuracy``: how close validate's
    measured runs on that GPU come out, ``report/fidelity.py``)."""
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    verdict = Text("fits", style="green") if m.fits else Text("does NOT fit", style="bold red")
    rows = [
        ("step time", f"{m.step_time:.3f} s" if m.step_time >= 0.1 else f"{m.step_time * 1e3:.3f} ms"),
        ("throughput", f"{m.tokens_per_s:,.0f} tokens/s  ({m.samples_per_s:,.1f} samples/s, {gpus} GPUs)"),
        ("model TFLOP/s per GPU",
         f"{m.model_tflops_per_gpu:.1f}  (MFU {100 * m.mfu:.1f} %{_fp8_mfu(m, gpu, precision)})"),
        ("hardware TFLOP/s per GPU", f"{m.hardware_tflops_per_gpu:.1f}  (HFU {100 * m.hfu:.1f} %)"),
        ("peak memory", f"{m.peak_memory / GIB:.1f} of {m.memory_capacity / GIB:.1f} GiB"),
    ]
    if gpu is not None and gpu.pace < 1:
        rows.append(("slowest GPU", f"computes at {100 * gpu.pace:.1f} % of a median GPU's pace (the slowest of {gpus}, "
                                    f"speed spread {100 * gpu.speed_variability:.1f} %)"))
    for k, v in rows:
        t.add_row(k, v)
    t.add_row("verdict", verdict)
    if accuracy:
        t.add_row("measured accuracy", Text(accuracy, style="dim"))
    return t


def totals_view(t: Any, budget: str) -> Group:
    """The whole run of one plan: steps, days, GPU-hours, energy, cost (``search/totals.py`` RunTotals)."""
    from autoplan.search.totals import short_amount

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    d = t.to_dict()
    _, _, energy, cost = total_texts(d)
    goodput = f" ({t.train_s / 86400:,.1f} training)" if t.wall_s > t.train_s else ""
    power = f", {t.power_kw / 1e3:,.2f} MW while training" if t.power_kw is not None else ""
    for k, v in (("steps", f"{t.steps:,} ({short_amount(t.tokens)} tokens or samples)"),
                 ("days", f"{t.days:,.1f}{goodput}"),
                 ("GPU-hours", f"{t.gpu_hours:,.0f} on {t.gpus:,} GPUs"), ("energy", f"{energy}{power}"),
                 ("cost", cost + (f" at ${t.gpu_hour_usd:g} per GPU-hour" if t.gpu_hour_usd else
                                  " (no price: give --gpu-hour-price)"))):
        table.add_row(k, v)
    return Group(Text("The whole run", style="bold"), Text(budget, style="dim"), table)


def _fp8_mfu(m: Any, gpu: Any, precision: str) -> str:
    """Under an FP8 precision, the MFU against the 16-bit peak (the one MFU is quoted against) named as such, and
    against the FP8 peak (as NVIDIA's benchmark tables quote FP8 runs)."""
    if precision == "bf16" or gpu is None or not gpu.fp8_peak_flops:
        return ""
    return f" of the 16-bit peak, {100 * m.mfu * gpu.peak_flops / gpu.fp8_peak_flops:.1f} % of the FP8 peak"


def simulation_view(title: str, m: Any, gpus: int, gpu: Any = None, precision: str = "bf16",
                    accuracy: str | None = None) -> Group:
    """The whole `autoplan simulate` screen."""
    return Group(Text(title, style="bold"), summary_table(m, gpus, gpu, precision, accuracy), Text(""),
                 breakdown_bar(m.breakdown), breakdown_table(m.breakdown), memory_table(m.memory, m.memory_capacity))


def _ms(x: float) -> str:
    return f"{x * 1e3:,.2f}"


def critical_path_view(path: dict, rows: int = 12) -> Group:
    """The chain of tasks that sets the step (``sim.critical.path_dict``), by segment, and the other streams'
    slack; a long chain shows its first and last segments and its longest ones."""
    segs = path["segments"]
    t = Table(title="Critical path: the chain of tasks that sets the step", title_justify="left")
    for col in ("stage", "stream", "tasks", "kind", "ms", "share"):
        t.add_column(col, justify="left" if col in ("stream", "tasks", "kind") else "right")
    keep = set(range(len(segs))) if len(segs) <= rows else (
        {0, 1, len(segs) - 2, len(segs) - 1}
        | set(sorted(range(len(segs)), key=lambda i: -segs[i]["seconds"])[:rows - 4]))
    skipped = 0
    for i, seg in enumerate(segs):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            t.add_row("", Text(f"… {skipped} more", style="dim"), "", "", "", "")
            skipped = 0
        what = seg["first"] if seg["first"] == seg["last"] else f"{seg['first']} .. {seg['last']}"
        t.add_row(str(seg["stage"]), seg["stream"], f"{what} ({seg['tasks']})", seg["kind"], _ms(seg["seconds"]),
                  f"{100 * seg['share']:.1f} %")
    step = path["step_time_s"] or 1.0
    kinds = ", ".join(f"{LABELS.get(k, k).replace('exposed ', '')} {100 * x / step:.1f} %"
                      for k, x in sorted(path["by_kind_s"].items(), key=lambda kv: -kv[1]))
    idle = [x for x in path["streams"] if not x["critical"]]
    slack = Table()
    for col in ("stage", "stream", "busy ms", "slack ms"):
        slack.add_column(col, justify="left" if col == "stream" else "right")
    for x in sorted(idle, key=lambda x: x["slack_s"])[:rows]:
        slack.add_row(str(x["stage"]), x["stream"], _ms(x["busy_s"]), _ms(x["slack_s"]))
    parts: list[Any] = [t, Text(f"on the chain: {kinds}")]
    if idle:
        parts += [Text("Slack of the other streams: how much later their work could end without moving the step",
                       style="italic"), slack]
    return Group(*parts)


def check_view(report: dict, model: Any, cluster: Any, s: Any) -> Group:
    """The `autoplan check` screen."""
    from autoplan.specs.batch import heading

    head = Text(f"{heading(model.name, cluster.gpus, cluster.gpu.name, cluster.name, model.seq_len, s.global_batch, model.structure is not None)}: "
                f"{s.short()}", style="bold")
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
    """The ranked plans (``throughput`` names the unit of the tokens_per_s column: samples/s for CNNs), with the
    whole run's days, GPU-hours, energy and cost when the rows have them."""
    t = Table(title=plain(title), title_justify="left")
    totals = bool(rows) and "days" in rows[0]
    for col, label in (("rank", "#"), ("plan", "plan"), ("step_s", "step s"), ("tokens_per_s", throughput),
                       ("mfu_pct", "MFU %"), ("bubble_pct", "bubble %"), ("exposed_comm_pct", "exposed comm %"),
                       ("peak_gib", "peak GiB")) + (TOTAL_LABELS if totals else ()):
        t.add_column(label, justify="left" if col == "plan" else "right")
    launch = bool(rows) and "launch_with" in rows[0]
    if launch:
        t.add_column("launch with")
    for r in rows:
        step = f"{r['step_s']:.3f}" if r["step_s"] >= 0.1 else f"{r['step_s']:.4f}"    # CNN steps last milliseconds
        t.add_row(str(r["rank"]), plain(r["plan"]), step, f"{r['tokens_per_s']:,}", f"{r['mfu_pct']:.1f}",
                  f"{r['bubble_pct']:.1f}", f"{r['exposed_comm_pct']:.1f}",
                  f"{r['peak_gib']:.1f}/{r['capacity_gib']:.0f}", *(total_texts(r) if totals else ()),
                  *([plain(r["launch_with"])] if launch else []))
    return t


TOTAL_LABELS = (("days", "days"), ("gpu_hours", "GPU-h"), ("energy_mwh", "energy"), ("cost_usd", "cost"))
"""Labels of the whole-run columns (``report/leaderboard.py`` TOTAL_COLUMNS)."""


def si(x: float) -> str:
    """3 significant figures with K, M, B: 20600000 → ``20.6M``."""
    for suffix, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def total_texts(r: dict) -> tuple[str, str, str, str]:
    """Days, GPU-hours, energy and cost of a row, for people (— where unknown)."""
    if r["days"] is None:
        return ("—", "—", "—", "—")
    mwh = r["energy_mwh"]
    energy = "—" if mwh is None else f"{mwh / 1e3:.3g} GWh" if mwh >= 1e3 else f"{mwh:.3g} MWh" if mwh >= 1 \
        else f"{mwh * 1e3:.3g} kWh"
    days = r["days"]
    when = f"{days:.1f}" if days >= 1 else f"{days * 24:.1f} h" if days >= 1 / 24 else f"{days * 1440:.1f} min"
    return (when, si(r["gpu_hours"]), energy,
            "—" if r["cost_usd"] is None else "$" + si(r["cost_usd"]))


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


def _delta(x: float | None, ref: float) -> str:
    return "" if x is None or not ref else f"{100 * (x / ref - 1):+.1f} %"


def whatif_view(out: dict) -> Group:
    """The `autoplan whatif` screen: each change's step time for the baseline plan and its best plan, then the
    elasticities (``search.whatif.answer``'s JSON)."""
    base = out["baseline"]
    step = base["step_time_s"]
    head = Text(f"What if: {out['title']}\nbaseline: {base['plan']}, {step:.3f} s/step ({out['source']})",
                style="bold")
    t = Table(title="Under each change", title_justify="left")
    for col in ("change", "this plan s", "Δ", "best plan under the change", "step s", "Δ ", "simulated"):
        t.add_column(col, justify="left" if col in ("change", "best plan under the change") else "right")
    for row in out["whatifs"]:
        same, best = row["baseline_plan"], row["best"]
        same_s = same["step_time_s"] if same and same["feasible"] else None
        best_s = best["step_time_s"] if best else None
        plan = best["plan"] if best else Text("no plan fits", style="red")
        if best and best["plan"] == base["plan"]:
            plan = Text(best["plan"] + " (same)", style="dim")
        t.add_row(row["change"], f"{same_s:.3f}" if same_s else Text("—" if same is None else "cannot run",
                                                                    style="dim"),
                  _delta(same_s, step), plan, f"{best_s:.3f}" if best_s else "", _delta(best_s, step),
                  str(row["simulated"]))
    parts: list[Any] = [head, t]
    if "elasticity" in out:
        e = Table(title="Elasticity of the best plan's step time (d ln t / d ln x, from ±10 %)", title_justify="left")
        notes = any(x["plan"] for x in out["elasticity"])
        for col in ("parameter", "what", "elasticity", "10 % less", "10 % more") + (("plan",) if notes else ()):
            e.add_column(col, justify="left" if col in ("parameter", "what", "plan") else "right")
        for x in out["elasticity"]:
            less = "" if x["parameter"] == "memory" else _delta(x["step_time_lower_s"], step)
            e.add_row(x["parameter"], x["meaning"], f"{x['elasticity']:+.3f}", less,
                      _delta(x["step_time_higher_s"], step), *((x["plan"],) if notes else ()))
        parts += [e, Text("−1: the step scales with it (it is the bottleneck); 0: it does not matter here.",
                          style="italic")]
    return Group(*parts)
