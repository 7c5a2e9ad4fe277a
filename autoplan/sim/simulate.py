"""Simulate one training step of a plan and score it; ``evaluate`` is the search's single entry point."""

from __future__ import annotations

from dataclasses import dataclass, replace

from autoplan.families.registry import memory_per_stage, violations
from autoplan.families.costs import StageMemory
from autoplan.sim import metrics as met
from autoplan.sim import bounds, flows, pipeline
from autoplan.sim.contention import contend, inert
from autoplan.sim.critical import CriticalPath, analyse_path
from autoplan.sim.engine import Timeline, run
from autoplan.sim.workload import Lowered, lower
from autoplan.specs.cluster import ClusterSpec
from autoplan.hardware.support import hardware_violations
from autoplan.specs.model import ModelSpec
from autoplan.specs.layout import BIDIRECTIONAL, V_SHAPE
from autoplan.specs.plan import FUSED_PAIRS
from autoplan.families.strategy import Strategy


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """A plan's score, or the reasons it cannot run (invalid, or does not fit in memory)."""

    strategy: Strategy
    metrics: met.Metrics | None
    violations: tuple[str, ...] = ()
    peak_memory: float = 0.0
    """Bytes on the fullest GPU (also for plans that do not fit)."""

    @property
    def feasible(self) -> bool:
        """Valid and fits in memory."""
        return self.metrics is not None and not self.violations


@dataclass(frozen=True, slots=True)
class Simulation:
    """A simulated step: its task graph and timeline (one pipeline), and the micro-batches it covered."""

    lowered: Lowered
    timeline: Timeline
    micro_batches: int


def simulate_step(model: ModelSpec, cluster: ClusterSpec, s: Strategy, why: bool = False) -> Simulation:
    """Every event of one step of plan ``s`` (all micro-batches; for traces and tests), transfers slowed where
    they share links (``sim/contention.py``); with ``why`` the timeline records what set each task's start (for
    ``critical_path``)."""
    lowered = lower(model, cluster, s)
    timeline = contend(lowered, cluster, s, run(lowered.tasks, lowered.plan, why), why)
    return Simulation(lowered, timeline, s.micro_batches)


def critical_path(sim: Simulation) -> CriticalPath:
    """The chain of tasks that sets ``sim``'s step and every stream's slack (``simulate_step(..., why=True)``)."""
    return analyse_path(sim.lowered, sim.timeline)


def _steady_state_points(s: Strategy) -> tuple[int, int, int] | None:
    """Two micro-batch counts in the periodic regime, congruent to the real count, and the period between them;
    None if simulating every micro-batch is as cheap.

    When PP transfers are not negligible next to a pass, 1F1B's increments repeat with period pp rather than 1
    (measured: pp 2, 4, 8 give cyclicity 2, 4, 8), as the interleaved schedule's do; so both use period pp.
    The first point is 2·pp: from there the split of idle time into PP waits and bubble repeats too; 3·pp for the
    interleaved schedule, whose warm-up is longer (Megatron-Core: (v − 1)·pp more forward chunks; measured on the
    tiny GPT, pp 4, v 2, dp 2: the step's increments are constant from 8 micro-batches, the first stage's split
    into PP waits and bubble only from 12). ZB-H1 keeps 1F1B's shape and period (tests check it against the full
    simulation). ZB-V's and DualPipeV's transients have
    no such bound (GPT-3, pp 8, B longer than F: increments settle only from 40 micro-batches on); ``_extrapolated``
    samples them until the increments settle.
    """
    period = s.pp
    m = s.micro_batches
    start = (3 if s.schedule == "interleaved" else 2) * s.pp
    first = start + (m - start) % period
    if m <= first + 2 * period:
        return None
    return first, first + period, period


def _long_transient(s: Strategy) -> bool:
    """Interleaved with synchronous p2p: a send on the compute stream adds a circuit whose delay can overtake the
    schedule's own only after many periods (measured on the tiny GPT, pp 4, v 2, CP 2: increments constant from
    4 to 32 micro-batches, then 0.9% larger from 40 on), so no two or three sample runs can be trusted; such plans
    are simulated in full (they are outside the search spaces, which keep Megatron-Core's overlapped p2p)."""
    return s.schedule == "interleaved" and s.synchronous_p2p


def _with_micro_batches(s: Strategy, m: int) -> Strategy:
    return replace(s, global_batch=m * s.dp * s.micro_batch)


def score(model: ModelSpec, cluster: ClusterSpec, s: Strategy,
          memory: tuple[StageMemory, ...] | None = None) -> met.Metrics:
    """Metrics of plan ``s`` (assumed valid) from its simulated step.

    Long steps are simulated at two micro-batch counts in the steady state and extended linearly: a pipeline
    schedule is a max-plus linear system, periodic after a transient (Baccelli et al. 1992, cyclicity
    theorem), so time and every breakdown term grow by the same amount per period. Tests check this
    against simulating every micro-batch. Steps of fewer than ``extended_from_passes()`` chunk passes are
    simulated whole. ``memory`` is ``memory_per_stage``'s answer, if already known.
    """
    long = s.micro_batches * s.pp * s.chunks >= extended_from_passes()
    step, stages, acts = (long and _extrapolated(model, cluster, s)) or _totals(model, cluster, s)
    mem = tuple(memory_per_stage(model, cluster, s)) if memory is None else memory
    return _metrics(model, cluster, s, step, stages, acts, mem)


EXTENDED_FROM_PASSES = 8192
"""With the C runner, steps of fewer chunk passes (micro-batches × stages × chunks) are simulated whole rather than
extended from steady-state samples: a pass then costs well under a microsecond, less than each sample's own
program, flows and link sharing (measured on GPT-3's default and zero-bubble spaces on 1024 H100s, cold: whole
runs 20-30 % cheaper below 8,000 passes (on 590 of 760 such plans), dearer above, up to twice beyond 32,000)."""


def extended_from_passes() -> int:
    """The fewest chunk passes a step is extended from samples at: ``EXTENDED_FROM_PASSES`` with the C runner;
    with the Python one every step that has samples (``_steady_state_points``)."""
    return EXTENDED_FROM_PASSES if pipeline.compiled() else 0


_Totals = tuple[float, list[dict[str, float]], list[dict[str, float]]]
"""Step time, per-stage breakdowns and per-stage activities of one simulated step."""


def _totals(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> _Totals:
    """Step time, stage breakdowns and activities of a step with every micro-batch: the step graph run stage by
    stage without building it (``pipeline``), transfers slowed where they share links (``flows``), to the same
    floats as ``_graph_totals``."""
    return flows.totals(model, cluster, s)


def _graph_totals(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> _Totals:
    """``_totals`` from the step's task graph and the engine's timeline (the reference the fast path is tested
    against)."""
    sim = simulate_step(model, cluster, s)
    return (sim.timeline.makespan, met.stage_breakdowns(sim.lowered, sim.timeline),
            met.activities(sim.lowered, sim.timeline))


def _extrapolated(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> _Totals | None:
    """Step time, stage breakdowns and activities extended from two steady-state runs; None where simulating
    every micro-batch is as cheap. Where the sample runs may not be periodic yet (``_long_transient``) or are
    not in the step's last regime (``_backlogged``), the full simulation's answer unless the extension agrees with
    it."""
    points = _steady_state_points(s)
    if points is None:
        return None
    a, b, period = points
    if s.schedule in V_SHAPE or s.schedule == BIDIRECTIONAL:
        return _extrapolated_once_settled(model, cluster, s, a, period)
    shared = not inert(cluster, s)
    if shared and a + b >= s.micro_batches:
        # with shared links the two samples run apart (no shared prefix): more micro-batches than the step itself
        return None
    sa, sb = _with_micro_batches(s, a), _with_micro_batches(s, b)
    def before_tails() -> tuple[pipeline.Ends, pipeline.Ends]:
        return flows.totals(model, cluster, sa, tails=True), flows.totals(model, cluster, sb, tails=True)

    ends = None
    if shared:
        ends = before_tails()
        ta, tb = pipeline.finish_ends(ends[0]), pipeline.finish_ends(ends[1])
    else:
        ta, tb = pipeline.totals_pair(model, cluster, sa, sb)
    k = (s.micro_batches - a) / period
    out = (_extend(ta[0], tb[0], k), _extend_dicts(ta[1], tb[1], k), _extend_dicts(ta[2], tb[2], k))
    backlogged = _backlogged(ta, tb)
    if backlogged and s.schedule in BEFORE_TAILS and not _long_transient(s):
        tails = _extended_before_tails(*(ends or before_tails()), k)
        if tails is not None:
            return tails
    if _long_transient(s) or backlogged:
        # checked against the full run: kept where it agrees (to rounding), so that only wrong answers change
        full = _totals(model, cluster, s)
        if not _agrees(out, full):
            return full
    return out


def _backlogged(a: _Totals, b: _Totals) -> bool:
    """Some stream of the samples gets busier per period than the step gets longer: it is using up its idle time,
    and once that is gone it sets the step's pace, a regime the samples have not reached. Measured with link
    contention on GPT-3's 1,024 H100s (ZeRO-2's reduce-scatter per micro-batch, slowed by the PP sends sharing
    its links: a DP stream 0.3-0.9 % busier per period than the step): the extension up to 0.63 % short in 28
    of the 306 extended plans of the default space, every one of them flagged here (66 flagged)."""
    more = b[0] - a[0]
    return any(y[k] - x[k] > more * (1 + 1e-9) for x, y in zip(a[2], b[2]) for k in y)


BEFORE_TAILS = ("1f1b", "interleaved")
"""Schedules whose backlogged steps are extended before their tails (``_extended_before_tails``): checked against
the full simulation on every such plan of GPT-3's default and zero-bubble spaces on 1024 H100s, GPT-3 on 512 A100s,
GPT-22B on 64 A100s and Llama 3 70B on 256 H100s (272 plans, to 3e-12). ZB-H1's split of idle time into PP waits
and bubble settles later under a backlog (extensions up to 1.5 % of the step apart)."""


def _extended_before_tails(a: pipeline.Ends, b: pipeline.Ends, k: float) -> _Totals | None:
    """A step whose DP streams fall behind (``_backlogged``), extended from two sample runs stopped before their
    stages' tails: every stream's state there grows by the same amount per period (the max-plus periodic regime),
    and so does a DP stream's end once its queue never empties, which the samples show (it ends as much later as
    its collectives take longer: no idle time added); then each stage's tail is run on the extended state, where
    the DP stream can set the step. None if a stream other than DP falls behind, or one that does still idles."""
    longer = max(sb[0] for sb in b.states) - max(sa[0] for sa in a.states)
    for p, q, sa, sb in zip(a.acts, b.acts, a.states, b.states):
        for kind in q:
            if q[kind] - p[kind] > longer * (1 + 1e-9):
                # a DP stream's end (state 4) against its busy seconds
                if kind != "dp" or abs((sb[4] - sa[4]) - (q[kind] - p[kind])) > 1e-9 * sb[4]:
                    return None
    states = [tuple(_extend(x, y, k) for x, y in zip(sa, sb)) for sa, sb in zip(a.states, b.states)]
    return pipeline.finish_ends(b, states, _extend_dicts(a.accs, b.accs, k), _extend_dicts(a.acts, b.acts, k))


SAMPLED_FROM_PERIODS = 32
"""ZB-V plans with fewer micro-batches than this many periods (pp each) are simulated in full."""

FUSED_SAMPLED_FROM_PERIODS = 16
"""DualPipe and DualPipeV plans (fused forward-backward pairs) with fewer micro-batches than this many periods are
simulated in full. Their increments settle by the 4th to 7th period (measured: all 246 such plans of GPT-3's
zero-bubble space on 1024 H100s, the extension then the full simulation's answer to 1e-9 in every one); samples up
to the 5th period cost 14 periods of micro-batches, a full run of 16 more."""

FUSED_SAMPLED_FROM_PASSES = 8192
"""... and with fewer stage passes (micro-batches × stages) than this: each sample is a step of its own (its own
program, flows and link sharing, about 1 ms cold), which a short step's full run does not repay (measured on the
same space: sampling pp 4-8 plans of 24 periods took 4-13 ms more per plan, pp 32 ones 35 ms less)."""

SETTLED_TO = {"zbv": 1e-12, "dualpipev": 1e-9, "dualpipe": 1e-9}
"""How closely two consecutive increments must agree (of the step time) for the samples to count as settled. A fused
pair's breakdown sums differ between samples in their last digits (about 1e-11 of the step: rounding), so
DualPipe's rarely agree to 1e-12 (17 of the 138 DualPipe plans above never do) and fall back to the full run after
paying for the samples. ZB-V keeps 1e-12 and its 32 periods: its increments can agree for a few periods and change
later (on the same space, 13 of its plans would settle by the 4th to 11th period on a split of idle time into PP
waits and bubble up to 0.07 % of the step off, the step time exact)."""


def _extrapolated_once_settled(model: ModelSpec, cluster: ClusterSpec, s: Strategy, a: int,
                               period: int) -> _Totals:
    """V-shape schedules and DualPipe: runs of a, a + period, a + 2·period, … micro-batches until two consecutive
    increments agree in step time and every breakdown and activity term (``SETTLED_TO``), extended from the last
    two; the full simulation instead below SAMPLED_FROM_PERIODS (FUSED_SAMPLED_FROM_PERIODS) periods (GPT-3's ZB-V
    transient lasts 5 (measured): runs of 2, 3, …, 7 periods add up to 27, more than a full run of fewer periods)
    or once the samples would cost more (their micro-batches together) than it."""
    m = s.micro_batches
    fused = s.schedule in FUSED_PAIRS
    if m < (FUSED_SAMPLED_FROM_PERIODS if fused else SAMPLED_FROM_PERIODS) * period or (
            fused and m * s.pp < FUSED_SAMPLED_FROM_PASSES):
        return _totals(model, cluster, s)
    rel = SETTLED_TO[s.schedule]
    runs = [_totals(model, cluster, _with_micro_batches(s, n)) for n in (a, a + period)]
    spent, n = 2 * a + period, a + 2 * period
    while n < m and spent + n < m:
        runs.append(_totals(model, cluster, _with_micro_batches(s, n)))
        spent += n
        x, y, z = runs[-3:]
        # settled: equal increments, and no stream busier per period than the step (``_backlogged``: a stream
        # using up its idle time sets the pace later, as ZB-V's first stage does from 12 micro-batches on with
        # pp 2: increments equal at 4-10, then larger)
        if _agrees(_difference(y, x), _difference(z, y), rel=rel, scale=z[0]) and not _backlogged(y, z):
            k = (m - (n - period)) / period
            return _extend(y[0], z[0], k), _extend_dicts(y[1], z[1], k), _extend_dicts(y[2], z[2], k)
        n += period
    return _totals(model, cluster, s)


def _difference(b: _Totals, a: _Totals) -> _Totals:
    return (b[0] - a[0], [{k: y[k] - x[k] for k in y} for x, y in zip(a[1], b[1])],
            [{k: y[k] - x[k] for k in y} for x, y in zip(a[2], b[2])])


def _agrees(a: _Totals, b: _Totals, rel: float = 1e-12, scale: float | None = None) -> bool:
    """Step times and every breakdown and activity term equal to ``rel`` of the step time (or of ``scale``)."""
    tol = rel * (b[0] if scale is None else scale)
    return abs(a[0] - b[0]) <= tol and all(abs(x[k] - y[k]) <= tol for xs, ys in zip(a[1:], b[1:])
                                           for x, y in zip(xs, ys) for k in y)


def _extend(a: float, b: float, k: float) -> float:
    return a + k * (b - a)


def _extend_dicts(a: list[dict[str, float]], b: list[dict[str, float]], k: float) -> list[dict[str, float]]:
    return [{key: _extend(x[key], y[key], k) for key in x} for x, y in zip(a, b)]


def _metrics(model: ModelSpec, cluster: ClusterSpec, s: Strategy, step: float, stages: list[dict[str, float]],
             acts: list[dict[str, float]], mem: tuple[StageMemory, ...]) -> met.Metrics:
    tokens = s.global_batch * model.seq_len
    model_flops = model.model_flops_per_iteration(s.global_batch)
    hw_flops = model.hardware_flops_per_iteration(s.global_batch, s.recompute)
    per_gpu = step * cluster.gpus
    peak = max(m.total for m in mem)
    mean = {k: sum(st[k] for st in stages) / len(stages) for k in met.BREAKDOWN_KINDS}
    return met.Metrics(
        step_time=step, tokens_per_s=tokens / step, samples_per_s=s.global_batch / step,
        model_tflops_per_gpu=model_flops / per_gpu / 1e12, hardware_tflops_per_gpu=hw_flops / per_gpu / 1e12,
        mfu=model_flops / per_gpu / cluster.gpu.peak_flops, hfu=hw_flops / per_gpu / cluster.gpu.peak_flops,
        breakdown=mean, stage_breakdown=tuple(stages), activity=tuple(acts), memory=mem, peak_memory=peak,
        memory_capacity=cluster.gpu.hbm_bytes, fits=peak <= cluster.gpu.hbm_bytes)


def step_bound(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
    """Seconds no simulation of valid plan ``s`` can be shorter than, from its task durations alone
    (``sim/bounds``: pipeline fill and drain, DP streams); what the exhaustive search holds a plan against."""
    return bounds.step_bound(model, cluster, s)


def release_bound(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> float:
    """A second bound for ZeRO-2/3 plans with a pipeline: each stage's reduce-scatters after the backwards that
    release them (``sim/bounds.release_bound``); it compiles the plan's program, so it is asked last."""
    return bounds.release_bound(model, cluster, s)


def evaluate(model: ModelSpec, cluster: ClusterSpec, s: Strategy) -> Evaluation:
    """Score plan ``s``: reasons if invalid or out of memory (never simulated), else its metrics. Never raises
    for a valid model and cluster."""
    reasons = violations(model, cluster.gpus, s) + hardware_violations(model, cluster, s)
    if reasons:
        return Evaluation(strategy=s, metrics=None, violations=tuple(reasons))
    mem = tuple(memory_per_stage(model, cluster, s))
    worst = max(mem, key=lambda m: m.total)
    if worst.total > cluster.gpu.hbm_bytes:
        gib = 1024**3
        return Evaluation(strategy=s, metrics=None, peak_memory=worst.total, violations=(
            f"needs {worst.total / gib:.1f} GiB per GPU on stage {worst.stage}, more than the "
            f"{cluster.gpu.hbm_bytes / gib:.0f} GiB of a {cluster.gpu.name}",))
    m = score(model, cluster, s, mem)
    return Evaluation(strategy=s, metrics=m, peak_memory=m.peak_memory)
