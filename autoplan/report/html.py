"""report.html: one self-contained page about a search run (plotly.js inlined once, nothing from the network),
and the files written beside it (best_plan.json, the best plans' Chrome traces)."""

from __future__ import annotations

import html
import json
import math
from functools import lru_cache
from pathlib import Path
from string import Template

from autoplan.errors import SpecError
from autoplan.report.export import launch_section
from autoplan.report.leaderboard import rows, unproven_note
from autoplan.search.analysis import Analysis, Neighbour, Run
from autoplan.search.folder import trace_name
from autoplan.search.totals import costing_of
from autoplan.sim.metrics import BREAKDOWN_KINDS
from autoplan.sim.simulate import CriticalPath, Evaluation, Simulation

GIB = 1024**3
MAX_BARS = 3000
"""Timeline bars drawn at most; a longer step shows its beginning (the trace file has all of it)."""
CONFIG = {"displaylogo": False, "responsive": True}
KIND_LABELS = {"compute": "compute", "recompute": "recompute", "tp": "exposed TP comm", "cp": "exposed CP comm",
               "ep": "exposed EP all-to-all", "pp": "exposed PP comm", "dp": "exposed DP comm",
               "a2a": "exposed embedding all-to-all", "optimizer": "optimizer", "bubble": "bubble / idle"}
KIND_COLORS = {"compute": "#2ca02c", "recompute": "#98df8a", "tp": "#17becf", "cp": "#1f77b4", "ep": "#ff7f0e",
               "pp": "#9467bd", "dp": "#bcbd22", "a2a": "#e377c2", "optimizer": "#7f7f7f", "bubble": "#d62728"}
TASK_COLORS = {"forward": "#1f77b4", "backward": "#ff7f0e", "PP send": "#9467bd", "DP collective": "#bcbd22",
               "optimizer": "#7f7f7f"}
STREAM_ORDER = ("compute", "pp_send_fwd", "pp_send_bwd", "dp")

Figure = dict
"""A plotly figure as plotly.js takes it: {"data": [traces], "layout": {...}} (plotly.py's objects validate every
property on the way, most of a report's time; plotly.js draws these dicts as it draws theirs)."""


@lru_cache(maxsize=1)
def _plotly_dir() -> Path:
    """plotly's package data (plotly.js and the templates), found without importing plotly."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise SpecError("plotly is not installed: the report needs its plotly.js (pip install plotly)")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"


@lru_cache(maxsize=1)
def _plotlyjs() -> str:
    return (_plotly_dir() / "plotly.min.js").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _template() -> str:
    """plotly's ``plotly_white`` template (as plotly.py's ``template="plotly_white"`` sets it), as JSON."""
    return (_plotly_dir() / "templates" / "plotly_white.json").read_text(encoding="utf-8")


def _layout(fig: Figure, height: int, **kw: object) -> Figure:
    fig["layout"] = {"height": height, "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
                     "legend": {"orientation": "h", "y": -0.18}, **fig.get("layout", {}), **kw}
    return fig


def _title(text: str) -> dict:
    return {"title": {"text": text}}


def pareto_figure(run: Run, front: list[Evaluation]) -> Figure:
    """Throughput against peak memory of every evaluated plan, the Pareto front and the HBM capacity."""
    feasible = run.ranked
    top = set(id(e) for e in run.leaderboard)
    data: list[dict] = []

    def points(evals: list[Evaluation], name: str, **marker: object) -> None:
        data.append({"type": "scatter", "x": [e.peak_memory / GIB for e in evals],
                     "y": [e.metrics.tokens_per_s for e in evals], "mode": "markers", "name": name, "marker": marker,
                     "customdata": [[e.strategy.short(), e.metrics.step_time, 100 * e.metrics.mfu] for e in evals],
                     "hovertemplate": "%{customdata[0]}<br>%{y:,.0f} tokens/s, %{customdata[1]:.3f} s/step, "
                                      "MFU %{customdata[2]:.1f} %<br>peak %{x:.1f} GiB<extra></extra>"})

    points([e for e in feasible if id(e) not in top], "evaluated plans", color="#9fb3d9", size=7)
    points(run.leaderboard[1:], f"top {run.top_k}", color="#1f77b4", size=9)
    data.append({"type": "scatter", "x": [e.peak_memory / GIB for e in front],
                 "y": [e.metrics.tokens_per_s for e in front], "mode": "lines",
                 "line": {"shape": "hv", "color": "#ff7f0e"}, "name": "Pareto front", "hoverinfo": "skip"})
    points(run.leaderboard[:1], "best", color="#d62728", size=16, symbol="star")
    oom = [e for e in run.evaluations if not e.feasible and e.peak_memory > 0]
    if oom:
        data.append({"type": "scatter", "x": [e.peak_memory / GIB for e in oom], "y": [0] * len(oom),
                     "mode": "markers", "name": "does not fit", "marker": {"symbol": "x", "color": "#7f7f7f", "size": 7},
                     "customdata": [[e.strategy.short(), "; ".join(e.violations)] for e in oom],
                     "hovertemplate": "%{customdata[0]}<br>%{customdata[1]}<extra></extra>"})
    capacity = (feasible[0].metrics.memory_capacity if feasible else
                run.cluster.gpu.hbm_bytes if run.cluster else 0.0) / GIB
    xs = [e.peak_memory / GIB for e in run.evaluations if e.peak_memory > 0]
    shapes, notes = [], []
    if capacity:
        # plotly.py's add_vline: a dashed line across the plot, its note at the top left
        shapes.append({"type": "line", "x0": capacity, "x1": capacity, "xref": "x", "y0": 0, "y1": 1,
                       "yref": "y domain", "line": {"dash": "dash", "color": "#d62728"}})
        notes.append({"text": f"HBM {capacity:.0f} GiB", "x": capacity, "xref": "x", "xanchor": "right", "y": 1,
                      "yref": "y domain", "yanchor": "top", "showarrow": False})
        xs.append(capacity)
    span = (max(xs) - min(xs)) if xs else 1.0
    xrange = [min(xs) - 0.05 * span, max(xs) + 0.05 * span] if xs else None
    return _layout({"data": data}, 460, xaxis={**_title("peak memory per GPU (GiB)"), "range": xrange},
                   yaxis={**_title("tokens/s"), "rangemode": "tozero"}, shapes=shapes, annotations=notes)


def _rank_labels(board: list[Evaluation]) -> list[str]:
    return [f"#{i} {e.strategy.short()}" for i, e in enumerate(board, 1)]


def breakdown_figure(board: list[Evaluation]) -> Figure:
    """Where each top plan's step goes: compute, exposed communication per kind, bubble."""
    labels = _rank_labels(board)
    data = []
    for kind in BREAKDOWN_KINDS:
        sec = [e.metrics.breakdown.get(kind, 0.0) for e in board]
        if any(sec):
            data.append({"type": "bar", "y": labels, "x": sec, "orientation": "h", "name": KIND_LABELS[kind],
                         "marker": {"color": KIND_COLORS[kind]},
                         "hovertemplate": f"%{{y}}<br>{KIND_LABELS[kind]}: %{{x:.3f}} s<extra></extra>"})
    return _layout({"data": data}, 120 + 28 * len(board), barmode="stack",
                   xaxis=_title("seconds per step (mean over stages)"),
                   yaxis={"autorange": "reversed", "automargin": True})


def _task_kind(sim: Simulation, i: int) -> tuple[str, str]:
    meta = sim.lowered.meta.get(i)
    if meta is not None:
        _, forward, mb, chunk, part = meta
        label = f"{'F' if forward else 'F&B' if part == '&' else part or 'B'}{mb}" + (f".c{chunk}" if chunk else "")
        return ("forward" if forward else "backward"), label
    kind = sim.lowered.tasks.kind[i]
    name = {"pp": "PP send", "dp": "DP collective", "optimizer": "optimizer"}.get(kind, kind)
    return name, name


def _row(resource: str) -> tuple[int, int, str]:
    stage, stream = resource.split(".", 1)
    n = int(stage.removeprefix("stage"))
    order = STREAM_ORDER.index(stream) if stream in STREAM_ORDER else len(STREAM_ORDER)
    return n, order, f"stage {n} · {stream}"


def timeline_figure(sim: Simulation, title: str) -> tuple[Figure, str]:
    """The best plan's step: one row per (stage, stream), one bar per task; and a caption."""
    tasks, tl = sim.lowered.tasks, sim.timeline
    shown = sorted((i for i, d in enumerate(tasks.duration) if d > 0), key=lambda i: (tl.start[i], i))
    total = len(shown)
    caption = f"{title}: the whole step, {total} events, {tl.makespan:.3f} s."
    if total > MAX_BARS:
        shown = shown[:MAX_BARS]
        cut = tl.start[shown[-1]]
        caption = (f"{title}: the first {cut:.3f} s of the {tl.makespan:.3f} s step ({MAX_BARS} of {total} events); "
                   f"{trace_name(1)} holds every event (open it in https://ui.perfetto.dev).")
    rows_ = sorted({_row(r) for r in tasks.resources})
    by_kind: dict[str, tuple[list, list, list, list]] = {}
    for i in shown:
        kind, label = _task_kind(sim, i)
        b, x, y, c = by_kind.setdefault(kind, ([], [], [], []))
        b.append(tl.start[i])
        x.append(tasks.duration[i])
        y.append(_row(tasks.resources[tasks.resource[i]])[2])
        c.append(label)
    data = []
    for kind in sorted(by_kind, key=lambda k: list(TASK_COLORS).index(k) if k in TASK_COLORS else 99):
        b, x, y, c = by_kind[kind]
        data.append({"type": "bar", "base": b, "x": x, "y": y, "customdata": c, "orientation": "h", "name": kind,
                     "marker": {"color": TASK_COLORS.get(kind, "#333"), "line": {"width": 0}},
                     "hovertemplate": "%{customdata} (%{y})<br>start %{base:.4f} s, %{x:.5f} s<extra></extra>"})
    fig = _layout({"data": data}, max(320, 110 + 16 * len(rows_)), barmode="overlay", bargap=0.15,
                  xaxis=_title("seconds"),
                  yaxis={"categoryorder": "array", "categoryarray": [r[2] for r in rows_], "autorange": "reversed",
                         "automargin": True})
    return fig, caption


def _grid(rows_: int, cols: int, h_space: float, v_space: float) -> list[tuple[list[float], list[float]]]:
    """(x domain, y domain) of each cell of a rows × cols grid, row by row from the top (plotly's
    ``make_subplots`` with these spacings)."""
    width = (1 - h_space * (cols - 1)) / cols
    height = (1 - v_space * (rows_ - 1)) / rows_
    def clamp(x: float) -> float:                   # rounding may leave the bottom row at -5e-17
        return min(1.0, max(0.0, x))
    return [([clamp(c * (width + h_space)), clamp(c * (width + h_space) + width)],
             [clamp(1 - r * (height + v_space) - height), clamp(1 - r * (height + v_space))])
            for r in range(rows_) for c in range(cols)]


def sensitivity_figure(nbrs: dict[str, list[Neighbour]], best: Evaluation) -> Figure:
    """Throughput of the best plan with one axis changed at a time; missing values carry the reason on hover."""
    axes = list(nbrs)
    cols = min(4, len(axes))
    nrows = math.ceil(len(axes) / cols)
    cells = _grid(nrows, cols, 0.05, 0.16)
    data: list[dict] = []
    layout: dict = {}
    notes, lines = [], []
    ref = best.metrics.tokens_per_s
    top = max([n.evaluation.metrics.tokens_per_s for row in nbrs.values() for n in row
               if n.evaluation is not None and n.evaluation.feasible] + [ref])
    for k, axis in enumerate(axes):
        suffix = "" if k == 0 else str(k + 1)
        xa, ya = f"x{suffix}", f"y{suffix}"
        ok = [n for n in nbrs[axis] if n.evaluation is not None and n.evaluation.feasible]
        bad = [n for n in nbrs[axis] if n not in ok]
        data.append({
            "type": "bar", "x": [n.value for n in ok], "y": [n.evaluation.metrics.tokens_per_s for n in ok],
            "showlegend": False, "xaxis": xa, "yaxis": ya,
            "marker": {"color": ["#d62728" if n.best else "#2ca02c" if n.evaluation.metrics.tokens_per_s > ref
                                 else "#9fb3d9" for n in ok]},
            "customdata": [[n.evaluation.strategy.short(), n.evaluation.metrics.step_time,
                            n.evaluation.peak_memory / GIB, 100 * (n.evaluation.metrics.tokens_per_s / ref - 1)]
                           for n in ok],
            "hovertemplate": "%{customdata[0]}<br>%{y:,.0f} tokens/s (%{customdata[3]:+.1f} %), "
                             "%{customdata[1]:.3f} s/step<br>peak %{customdata[2]:.1f} GiB<extra></extra>"})
        if bad:
            data.append({"type": "scatter", "x": [n.value for n in bad], "y": [0] * len(bad), "mode": "markers",
                         "showlegend": False, "xaxis": xa, "yaxis": ya,
                         "marker": {"symbol": "x", "size": 10, "color": "#7f7f7f"},
                         "customdata": [_wrap(n.reason) for n in bad],
                         "hovertemplate": "not run: %{customdata}<extra></extra>"})
        xdom, ydom = cells[k]
        layout[f"xaxis{suffix}"] = {"anchor": ya, "domain": xdom, "type": "category", "categoryorder": "array",
                                    "categoryarray": [n.value for n in nbrs[axis]]}
        layout[f"yaxis{suffix}"] = {"anchor": xa, "domain": ydom, "range": [0, 1.08 * top],
                                    "showticklabels": k % cols == 0,
                                    **(_title("tokens/s") if k % cols == 0 else {})}
        notes.append({"text": axis.replace("_", " "), "x": (xdom[0] + xdom[1]) / 2, "xref": "paper",
                      "xanchor": "center", "y": ydom[1], "yref": "paper", "yanchor": "bottom", "showarrow": False,
                      "font": {"size": 16}})
        lines.append({"type": "line", "xref": f"{xa} domain", "yref": ya, "x0": 0, "x1": 1,
                      "y0": ref, "y1": ref, "line": {"dash": "dot", "color": "#d62728", "width": 1}})
    return _layout({"data": data, "layout": layout}, 70 + 250 * nrows, shapes=lines, annotations=notes)


def _wrap(text: str, width: int = 70) -> str:
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + len(w) > width:
            lines.append(line)
            line = ""
        line = f"{line} {w}".strip()
    return "<br>".join(lines + [line])


def importance_figure(values: dict[str, float]) -> Figure:
    """Parameter importances (PED-ANOVA), largest on top."""
    items = sorted(values.items(), key=lambda kv: kv[1])
    return _layout({"data": [{"type": "bar", "x": [v for _, v in items], "y": [k for k, _ in items],
                              "orientation": "h", "marker": {"color": "#1f77b4"},
                              "hovertemplate": "%{y}: %{x:.3f}<extra></extra>"}]},
                   80 + 30 * len(items), xaxis=_title("importance (sums to 1)"), yaxis={"automargin": True})


def _json(value: object) -> str:
    # inside a <script>: "</" would end it early
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _div(fig: Figure, div_id: str) -> str:
    """The figure's div and the script that draws it with plotly.js (loaded once in the page's head), in the
    ``plotly_white`` template."""
    layout = _json(fig["layout"])[:-1] + ',"template":' + _template().strip() + "}"
    height = f'{fig["layout"]["height"]}px' if "height" in fig["layout"] else "100%"
    return (f'<div id="{div_id}" class="plotly-graph-div" style="height:{height}; width:100%;"></div>'
            f'<script>if (document.getElementById("{div_id}")) {{ Plotly.newPlot("{div_id}", '
            f'{_json(fig["data"])}, {layout}, {_json(CONFIG)}); }}</script>')


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def top_table(run: Run) -> str:
    """The leaderboard as an HTML table."""
    if not run.leaderboard:
        return _note("No plan fits in memory: try more GPUs, recompute, ZeRO or a smaller micro-batch.")
    from autoplan.report.terminal import TOTAL_LABELS, total_texts

    ref = run.leaderboard[0].metrics.tokens_per_s
    costing = _costing(run)
    head = ("#", "plan", "step s", "tokens/s", "vs best", "MFU %", "bubble %", "exposed comm %", "peak GiB") + (
        tuple(label for _, label in TOTAL_LABELS) if costing is not None else ()) + ("launch with",)
    body = []
    batches = "global_batch" in run.inputs.get("space", {})
    for r, e in zip(rows(run.leaderboard, costing, run.model, batches, rounded=False), run.leaderboard):
        cells = (r["rank"], r["plan"], f"{r['step_s']:.3f}", f"{r['tokens_per_s']:,}",
                 f"{100 * (e.metrics.tokens_per_s / ref - 1):+.1f} %", f"{r['mfu_pct']:.1f}", f"{r['bubble_pct']:.1f}",
                 f"{r['exposed_comm_pct']:.1f}", f"{r['peak_gib']:.1f} / {r['capacity_gib']:.0f}") + (
            total_texts(r) if costing is not None else ()) + (r.get("launch_with", "?"),)
        body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>" + legend_html())


def legend_html() -> str:
    """What each part of a plan's label means (Strategy.legend, from the knobs' definitions)."""
    from autoplan.families.strategy import Strategy

    items = "".join(f"<tr><th>{html.escape(a)}</th><td>{html.escape(b)}</td></tr>" for a, b in Strategy.legend())
    return f'<details id="legend"><summary>Plan labels</summary><table class="kv">{items}</table></details>'



def _costing(run: Run) -> object | None:
    """The run's whole-run Costing (its inputs' ``run_budget``), or None; an unreadable budget is left out."""
    try:
        return costing_of(run.inputs, run.model, run.cluster)
    except SpecError:
        return None


def _cells(row: tuple, tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in row) + "</tr>"


def critical_table(path: CriticalPath | None, rows: int = 14) -> str:
    """The chain of tasks that sets the best plan's step, by segment, and the other streams' slack."""
    if path is None:
        return _note("No plan fits in memory, so there is no step to explain.")
    segs = path.segments
    keep = set(range(len(segs))) if len(segs) <= rows else (
        {0, 1, len(segs) - 2, len(segs) - 1} | set(sorted(range(len(segs)), key=lambda i: -segs[i].seconds)[:rows - 4]))
    body, skipped = [], 0
    for i, seg in enumerate(segs):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            body.append(_cells(("", f"… {skipped} more segments", "", "", "", "")))
            skipped = 0
        what = seg.first if seg.first == seg.last else f"{seg.first} .. {seg.last}"
        body.append(_cells((seg.stage, seg.stream, f"{what} ({seg.tasks} tasks)", seg.kind, f"{seg.seconds * 1e3:,.2f}",
                            f"{100 * seg.share:.1f} %")))
    head = _cells(("stage", "stream", "tasks", "kind", "ms", "share of the step"), "th")
    kinds = ", ".join(f"{KIND_LABELS.get(k, k).replace('exposed ', '')} {100 * x / path.step:.1f} %"
                      for k, x in sorted(path.kinds.items(), key=lambda kv: -kv[1]))
    idle = sorted((x for x in path.streams if not x.critical), key=lambda x: x.slack)[:rows]
    slack = ("<table><thead>" + _cells(("stage", "stream", "busy ms", "slack ms"), "th") + "</thead><tbody>"
             + "".join(_cells((x.stage, x.stream, f"{x.busy * 1e3:,.2f}", f"{x.slack * 1e3:,.2f}")) for x in idle)
             + "</tbody></table>") if idle else ""
    return ("<table><thead>" + head + "</thead><tbody>" + "".join(body) + "</tbody></table>"
            + _note(f"On the chain: {kinds}. The trace (trace_rank1.json.gz) draws it as its own track.")
            + (_note("Slack: how much later each other stream's work could end without moving the step.") + slack
               if slack else ""))


def whatif_html(elasticity: list[dict], whatifs: dict | None, folder: object) -> str:
    """The best plan's elasticity to each hardware parameter, and the what-ifs ``autoplan whatif`` answered."""
    if not elasticity and not whatifs:
        return _note("No plan fits in memory, or the run's model or cluster cannot be rebuilt.")
    out = ""
    if elasticity:
        rows = "".join(_cells((x["parameter"], x["meaning"], f"{x['elasticity']:+.3f}",
                               f"{x['step_time_higher_s']:.3f}" + (f" ({x['plan']})" if x["plan"] else "")))
                       for x in elasticity)
        out += ("<table><thead>" + _cells(("parameter", "what", "elasticity", "step s with 10 % more"), "th")
                + "</thead><tbody>" + rows + "</tbody></table>"
                + _note("Elasticity: d ln(step time) / d ln(parameter) of the best plan, from ±10 % (−1: the step "
                        "scales with it; 0: it does not matter). HBM capacity: the best plan that only fits with 10 % "
                        "more memory."))
    if whatifs:
        step = whatifs["baseline"]["step_time_s"]
        rows = ""
        for w in whatifs["whatifs"]:
            same, best = w["baseline_plan"], w["best"]
            same_s = same["step_time_s"] if same and same["feasible"] else None
            rows += _cells((w["change"], f"{same_s:.3f}" if same_s else "—",
                            best["plan"] if best else "no plan fits",
                            f"{best['step_time_s']:.3f} ({100 * (best['step_time_s'] / step - 1):+.1f} %)" if best else ""))
        out += ("<table><thead>" + _cells(("change", "best plan's step s", "best plan under the change", "its step s"),
                                          "th") + "</thead><tbody>" + rows + "</tbody></table>"
                + _note(f"autoplan whatif {folder} --vary … answered these ({whatifs['baseline']['plan']}, "
                        f"{step:.3f} s/step, as the baseline)."))
    return out


def inputs_table(run: Run) -> str:
    """The run's inputs, its search counts and the model's shape."""
    i = run.inputs
    items = [(k, i[k]) for k in ("model", "cluster", "gpu", "gpus", "global_batch", "sampler", "budget", "seed", "top")
             if k in i]
    items += [(f"space: {k}", ", ".join(map(str, v))) for k, v in i.get("space", {}).items()]
    items += [(f"search: {k}", v) for k, v in run.summary.items() if k != "rejected"]
    if run.model is not None:
        m = run.model
        items.append(("model shape", f"{m.layers} layers, hidden {m.hidden}, {m.heads} heads ({m.kv_heads} kv), "
                                     f"ffn {m.ffn_hidden}, vocab {m.vocab}, sequence {m.seq_len}, {m.activation}"))
    costing = _costing(run)
    if costing is not None:
        items.append(("whole run", costing.describe()))
    items.append(("run folder", str(run.folder)))
    return "<table class=\"kv\">" + "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in items) + "</table>"


PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>autoplan: $title</title>
<script>
window.jsErrors = [];
function showJsErrors() {
  var box = document.getElementById("js-errors");
  if (box && window.jsErrors.length) { box.textContent = window.jsErrors.join("\\n"); box.hidden = false; }
}
function noteJsError(message) { window.jsErrors.push(String(message)); showJsErrors(); }
window.addEventListener("error", function (e) {
  noteJsError("Uncaught " + (e.message || e.type) + " (" + (e.filename || "") + ":" + (e.lineno || "") + ")");
}, true);
window.addEventListener("unhandledrejection", function (e) {
  noteJsError("Unhandled rejection: " + ((e.reason && e.reason.message) || e.reason));
});
document.addEventListener("DOMContentLoaded", showJsErrors);
</script>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 0 24px 40px;
       max-width: 1500px; color: #222; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 17px; margin: 0 0 6px; }
.sub { color: #555; margin: 0 0 12px; }
nav a { margin-right: 14px; color: #1f77b4; text-decoration: none; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(640px, 1fr)); gap: 16px; }
section { border: 1px solid #e3e3e3; border-radius: 6px; padding: 12px 14px; margin: 14px 0 0; }
.grid section { margin: 0; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f6f6f6; } td:nth-child(2) { text-align: left; font-family: ui-monospace, monospace; }
tbody tr:first-child { background: #fff4e5; font-weight: 600; }
table.kv th { text-align: left; background: none; font-weight: 600; }
table.kv td { text-align: left; white-space: normal; }
table.kv tbody tr:first-child { background: none; font-weight: normal; }
.note { color: #555; font-size: 13px; margin: 4px 0; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12.5px; }
#js-errors { color: #b00; background: #fee; }
</style>
<script>$plotlyjs</script>
</head>
<body>
<pre id="js-errors" hidden></pre>
<h1>$title</h1>
<p class="sub">$subtitle</p>
<nav><a href="#top-plans">top plans</a><a href="#pareto">throughput vs memory</a><a href="#breakdown">time breakdown</a>
<a href="#timeline">timeline</a><a href="#critical">critical path</a><a href="#whatif">what-ifs</a><a href="#sensitivity">around the best plan</a><a href="#importance">importances</a>
<a href="#launch">launch</a><a href="#inputs">inputs</a></nav>
<section id="top-plans"><h2>Top plans</h2>$table</section>
<div class="grid">
<section id="pareto"><h2>Throughput vs peak memory</h2>$pareto
<p class="note">Every plan the search simulated; the Pareto front keeps the plans no other beats on both throughput
and memory. The dashed line is the GPU's memory.</p></section>
<section id="breakdown"><h2>Where the step goes (top plans)</h2>$breakdown</section>
</div>
<section id="timeline"><h2>Timeline of the best plan</h2>$timeline</section>
<section id="critical"><h2>Why this step time: the critical path of the best plan</h2>$critical</section>
<section id="whatif"><h2>What would change it: hardware elasticities and what-ifs</h2>$whatif</section>
<section id="sensitivity"><h2>Around the best plan: one axis at a time</h2>$sensitivity
<p class="note">The best plan (red) with one axis changed to each other value of the run's space
(dp = GPUs / (tp·pp·cp)); green beats it, × did not run (hover for why); the dotted line is the best plan's
throughput.</p></section>
<section id="importance"><h2>Parameter importances</h2>$importance</section>
<section id="launch"><h2>Launch the best plan$launch_title</h2>$launch</section>
<section id="inputs"><h2>Inputs</h2>$inputs</section>
</body>
</html>
""")


def _subtitle(run: Run) -> str:
    s = run.summary
    parts = [f"{len(run.evaluations)} plans evaluated, {len(run.ranked)} fit in memory"]
    if s:
        parts.append(f"{s.get('valid', '?')} valid plans in the space, {s.get('out_of_memory', '?')} do not fit, "
                     f"{s.get('pruned_by_bound', '?')} skipped by the search, {s.get('seconds', 0):.1f} s")
        if s.get("unproven"):
            parts.append(unproven_note(s["unproven"], run.inputs.get("budget")))
    if run.leaderboard:
        m = run.leaderboard[0].metrics
        parts.append(f"best: {run.leaderboard[0].strategy.short()}, {m.step_time:.3f} s/step, "
                     f"{m.tokens_per_s:,.0f} tokens/s, MFU {100 * m.mfu:.1f} %")
        costing = _costing(run)
        if costing is not None:
            from autoplan.report.terminal import total_texts
            days, gpu_h, energy, cost = total_texts(rows(run.leaderboard[:1], costing)[0])
            parts.append(f"the whole run: {days} days, {gpu_h} GPU-hours, {energy}, {cost}")
    if run.model is not None and run.cluster is not None:
        from autoplan.report.fidelity import line
        parts.append(f"measured accuracy: {line(run.cluster.gpu.name, run.model.family)}")
    return "; ".join(parts) + "."


def _timeline_html(run: Run, sim: Simulation | None) -> str:
    if sim is None or not run.leaderboard:
        return _note(run.missing or "No plan fits in memory, so there is no step to show.")
    fig, caption = timeline_figure(sim, run.leaderboard[0].strategy.short())
    return _div(fig, "fig-timeline") + _note(caption)


def _sensitivity_html(run: Run, nbrs: dict[str, list[Neighbour]]) -> str:
    if not run.leaderboard:
        return _note("No plan fits in memory.")
    if not nbrs:
        return _note(run.missing or "Every axis of the run's space has one value: there is no neighbour to show.")
    return _div(sensitivity_figure(nbrs, run.leaderboard[0]), "fig-sensitivity")


def _importance_html(values: dict[str, float], note: str) -> str:
    return (_div(importance_figure(values), "fig-importance") if values else "") + _note(note)


def _launch_html(run: Run) -> tuple[str, str]:
    """The section's title suffix and body: the best plan's launch by the first framework that runs it as planned
    (report/export.py, the code ``autoplan export`` prints), or why none does."""
    if not run.leaderboard:
        return "", _note("No plan fits in memory.")
    try:
        title, text = launch_section(run.leaderboard[0].strategy, run.model, run.cluster)
    except SpecError as err:
        return "", _note(str(err))
    return (f" ({html.escape(title)})", f"<pre>{html.escape(text)}</pre>"
            + _note(f"autoplan export {run.folder} --rank N --format FORMAT prints any rank's launch."))


def page(run: Run, analysis: Analysis) -> str:
    """The whole report page: ``run`` and what ``analysis`` derived from it."""
    board = run.leaderboard
    sim = analysis.sims[0] if analysis.sims else None
    launch = _launch_html(run)
    return PAGE.substitute(
        title=html.escape(run.title), subtitle=html.escape(_subtitle(run)), plotlyjs=_plotlyjs(),
        table=top_table(run), pareto=_div(pareto_figure(run, analysis.pareto), "fig-pareto"),
        breakdown=_div(breakdown_figure(board), "fig-breakdown") if board else _note("No plan fits in memory."),
        timeline=_timeline_html(run, sim), critical=critical_table(analysis.critical),
        whatif=whatif_html(analysis.elasticity, analysis.whatifs, run.folder), sensitivity=_sensitivity_html(run, analysis.neighbours),
        importance=_importance_html(analysis.importances, analysis.importance_note),
        launch=launch[1], launch_title=launch[0], inputs=inputs_table(run))


# ------------------------------------------------------------------------------------------------ sweep reports

def scaling_figure(c: object, unit: str = "tokens/s") -> Figure:
    """The scaling curve of a sweep (``search/sweep.py`` Curve): the best plan's throughput against GPUs with the
    ideal line (the smallest count's throughput per GPU, scaled), the cost per million tokens with its ideal (flat)
    line when there is a price, and the counts whose efficiency falls below the threshold in red. Drawn as
    plotly.py's ``make_subplots(rows, 1, shared_xaxes=True, vertical_spacing=0.1)`` lays it out."""
    priced = any(v is not None for v in c.usd_per_mtok)
    nrows = 2 if priced else 1
    cells = _grid(nrows, 1, 0.0, 0.1)
    titles = [f"Throughput ({unit})"] + ([f"Cost per million {unit.split('/')[0]}"] if priced else [])
    low = [e < c.threshold for e in c.efficiency]
    colors = ["#d62728" if b else "#1f77b4" for b in low]
    info = [[100 * e, 100 * m] for e, m in zip(c.efficiency, c.mfu or [0.0] * len(c.gpus))]
    data: list[dict] = [
        {"type": "scatter", "x": c.gpus, "y": c.ideal, "mode": "lines", "name": "ideal (linear from the smallest "
         "count)", "line": {"dash": "dash", "color": "#7f7f7f"}, "hoverinfo": "skip", "xaxis": "x", "yaxis": "y"},
        {"type": "scatter", "x": c.gpus, "y": c.throughput, "mode": "lines+markers", "name": "best plan",
         "line": {"color": "#1f77b4"}, "marker": {"color": colors, "size": 10}, "customdata": info,
         "hovertemplate": "%{x} GPUs<br>%{y:,.0f} " + unit + "<br>efficiency %{customdata[0]:.1f} %, "
                          "MFU %{customdata[1]:.1f} %<extra></extra>", "xaxis": "x", "yaxis": "y"}]
    if priced:
        data += [{"type": "scatter", "x": c.gpus, "y": [c.usd_per_mtok[0]] * len(c.gpus), "mode": "lines",
                  "showlegend": False, "line": {"dash": "dash", "color": "#7f7f7f"}, "hoverinfo": "skip",
                  "xaxis": "x2", "yaxis": "y2"},
                 {"type": "scatter", "x": c.gpus, "y": c.usd_per_mtok, "mode": "lines+markers",
                  "name": "cost per million", "line": {"color": "#2ca02c"}, "marker": {"color": colors, "size": 10},
                  "customdata": info, "hovertemplate": "%{x} GPUs<br>$%{y:.3f} per million<br>efficiency "
                                                       "%{customdata[0]:.1f} %<extra></extra>",
                  "xaxis": "x2", "yaxis": "y2"}]
    layout: dict = {}
    notes = [{"text": title, "x": 0.5, "xref": "paper", "xanchor": "center", "y": cells[r][1][1], "yref": "paper",
              "yanchor": "bottom", "showarrow": False, "font": {"size": 16}} for r, title in enumerate(titles)]
    shapes = []
    for r in range(nrows):
        suffix = "" if r == 0 else str(r + 1)
        # log-log: linear scaling is a straight line of slope 1, and the gap to it is the lost efficiency
        layout[f"xaxis{suffix}"] = {"anchor": f"y{suffix}", "domain": cells[r][0], "type": "log",
                                    "tickvals": c.gpus, "ticktext": [f"{g:,}" for g in c.gpus],
                                    **({"matches": f"x{nrows}", "showticklabels": False} if r < nrows - 1
                                       else _title("GPUs"))}
        layout[f"yaxis{suffix}"] = {"anchor": f"x{suffix}", "domain": cells[r][1]}
        if c.first_below is not None:
            shapes.append({"type": "line", "x0": c.first_below, "x1": c.first_below, "xref": f"x{suffix}", "y0": 0,
                           "y1": 1, "yref": f"y{suffix} domain", "line": {"dash": "dot", "color": "#d62728"}})
    # ticks at the smallest count's throughput times powers of two, like the GPU axis
    layout["yaxis"] |= {"type": "log", "dtick": math.log10(2), "tick0": math.log10(c.throughput[0]),
                        "tickformat": ".3~s"}
    if priced:
        layout["yaxis2"]["rangemode"] = "tozero"
    if c.first_below is not None:
        notes.append({"x": math.log10(c.first_below), "xref": "x", "y": 0.04, "yref": "y domain", "xanchor": "left",
                      "showarrow": False, "font": {"color": "#d62728"},
                      "text": f" efficiency < {100 * c.threshold:.0f} % from {c.first_below:,} GPUs"})
    return _layout({"data": data, "layout": layout}, 640 if priced else 380, shapes=shapes, annotations=notes)


SWEEP_PAGE = Template("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>autoplan sweep: $title</title>
<style>$style</style>
<script>$plotlyjs</script>
</head>
<body>
<h1>$title</h1>
<p class="sub">$subtitle</p>
<section id="curve"><h2>Scaling curve</h2>$curve
<p class="note">The best plan at each GPU count (an exact search per count). Dashed: ideal linear scaling from the
smallest count (throughput) and its constant cost per token; red points: scaling efficiency below the threshold.</p>
</section>
<section id="counts"><h2>Best plan per GPU count</h2>$table</section>
<section id="choice"><h2>Deadline and budget</h2>$choice</section>
<section id="inputs"><h2>Inputs</h2>$inputs</section>
</body>
</html>
""")
"""A sweep's report page: the scaling curve, the table of counts, the choice under constraints, the inputs."""


def _style() -> str:
    """The run report's style sheet (one look for both pages)."""
    return PAGE.template.split("<style>", 1)[1].split("</style>", 1)[0]


def sweep_page(title: str, subtitle: str, curve: object | None, table: list[list[str]], head: list[str],
               choice: str, inputs: dict, unit: str = "tokens/s") -> str:
    """The whole sweep report page from plain data: the Curve (None: no count ran), table rows and head, the
    choice's message and the inputs."""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table)
    table_html = ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"
                  + body + "</tbody></table>")
    kv = "<table class=\"kv\">" + "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                                           for k, v in inputs.items()) + "</table>"
    figure = (_div(scaling_figure(curve, unit), "fig-scaling") if curve is not None and curve.gpus
              else _note("No GPU count of the sweep has a plan that runs."))
    return SWEEP_PAGE.substitute(title=html.escape(title), subtitle=html.escape(subtitle), style=_style(),
                                 plotlyjs=_plotlyjs(), curve=figure, table=table_html, choice=_note(choice),
                                 inputs=kv)
