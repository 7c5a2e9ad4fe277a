"""Bounded least squares of a cluster's physical parameters to measurements, with uncertainties and the
leave-one-out error on the measured steps.

Residuals are log(predicted / measured): relative, so a 10 µs kernel and a 10 s step weigh alike (for small errors
the log ratio is the relative error). With ``weigh="time"`` each residual weighs in proportion to its measured
seconds: the fit then minimises Σ tᵢ·log²(pᵢ/mᵢ), whose optimum in a rate constant sets the time-weighted mean log
error to zero, so a sum of the measured kernels (a step's compute) is predicted without bias even where the model
cannot fit every size at once (the error of a sum is the time-weighted mean of its terms' relative errors). The fit
is scipy's trust-region reflective least squares inside each parameter's physical bounds (Branch, Coleman & Li 1999,
SIAM J. Sci. Comput. 21(1)). Uncertainties are the Gauss-Newton covariance s²(JᵀJ)⁻¹ at the optimum, s² the residual
variance over n − p degrees of freedom (Bates & Watts 1988, Nonlinear Regression Analysis, §2.3).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from autoplan.calibrate.measurements import Inputs
from autoplan.calibrate.model import ClusterSpec, SpecError
from autoplan.calibrate.params import Param, all_params, apply, value_of
from autoplan.calibrate.predict import best_plan, collective_seconds, kernel_seconds, step_seconds

MAX_RESIDUAL = 0.25
"""Default limit of the fit's rms relative error: above it the measurements and the model disagree (wrong base
cluster, mixed hardware, a broken measurement) and no spec is written."""
CONFLICT = 1.5
"""Two measurements of the same thing differing by more than this factor are inconsistent."""
MODEL_ERROR = 0.035
"""Typical relative error of one prediction at the right constants (autoplan validate: 3.5 % mean on the public set):
the weight of a measurement against the prior (``--prior``)."""
WEIGHS = ("equal", "time")
"""How measurements weigh in the fit: alike (relative error of each), or by their measured seconds."""
SENSITIVE = 1e-3
"""A measurement informs a parameter when moving it across its range changes the prediction by more than this."""


@dataclass(frozen=True, kw_only=True)
class Obs:
    """One aggregated measurement and how the model predicts it."""

    label: str
    where: str
    measured: float
    kind: str
    """``kernel``, ``collective`` or ``step``."""
    predict: Callable[[ClusterSpec], float]


@dataclass(kw_only=True)
class Residual:
    """One measurement against the calibrated prediction."""

    label: str
    where: str
    kind: str
    measured: float
    predicted: float

    @property
    def error_pct(self) -> float:
        """Signed error of the prediction in % of the measurement."""
        return 100 * (self.predicted - self.measured) / self.measured


@dataclass(kw_only=True)
class Fit:
    """A calibration: fitted values with their standard deviations, residuals and leave-one-out errors."""

    base: ClusterSpec
    cluster: ClusterSpec
    params: list[Param]
    values: list[float]
    sds: list[float]
    base_values: list[float]
    residuals: list[Residual]
    loo: list[Residual] = field(default_factory=list)
    at_bound: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def rms_pct(self) -> float:
        """Root-mean-square relative error of the calibrated predictions (%)."""
        return 100 * math.sqrt(statistics.fmean(math.log(r.predicted / r.measured) ** 2 for r in self.residuals))

    @property
    def max_pct(self) -> float:
        """Largest |error| of the calibrated predictions (%)."""
        return max(abs(r.error_pct) for r in self.residuals)


def observations(inputs: Inputs, base: ClusterSpec) -> list[Obs]:
    """The measurements as observations: repeated kernels by their median, repeated collectives by the fastest
    (nccl-tests' in-place and out-of-place rows; a trace's NCCL kernels also wait for late peers), steps each with
    the plan the base cluster finds fastest (held while fitting)."""
    out: list[Obs] = []
    kernels: dict[tuple, list] = defaultdict(list)
    for k in inputs.kernels:
        kernels[(k.kind, k.shape, k.sustained, k.out_bytes)].append(k)
    for (kind, shape, _, out_bytes), ks in kernels.items():
        times = [k.seconds for k in ks]
        k0 = ks[0]
        wide = f" into {out_bytes:g} B" if out_bytes != 2 else ""
        more = f" (+{len(ks) - 1})" if len(ks) > 1 else ""
        out.append(Obs(label=f"{kind} {'x'.join(map(str, shape)) or '-'}{wide}", where=k0.where + more,
                       measured=statistics.median(times), kind="kernel", predict=lambda c, k=k0: kernel_seconds(c, k)))
    colls: dict[tuple, list] = defaultdict(list)
    for c in inputs.collectives:
        colls[(c.op, c.ranks, c.per_node, c.nbytes)].append(c)
    for (op, ranks, per_node, nbytes), cs in colls.items():
        c0 = min(cs, key=lambda c: c.seconds)
        out.append(Obs(label=f"{op} {ranks}x ({per_node}/node) {nbytes:.4g} B", where=c0.where, measured=c0.seconds,
                       kind="collective", predict=lambda cl, c=c0: collective_seconds(cl, c)))
    for s in inputs.steps:
        plan, _ = best_plan(base, s)
        out.append(Obs(label=f"step {s.name} {plan.short()}", where=s.where, measured=s.seconds, kind="step",
                       predict=lambda cl, s=s, plan=plan: step_seconds(cl, s, plan)))
    _check_steps(inputs)
    return out


def _check_steps(inputs: Inputs) -> None:
    seen: dict[tuple, object] = {}
    for s in inputs.steps:
        key = (s.model, s.plans, s.gpus, s.gpu_overrides)
        other = seen.setdefault(key, s)
        if other is not s and max(s.seconds, other.seconds) > CONFLICT * min(s.seconds, other.seconds):
            raise SpecError(f"inconsistent measurements: the same run took {other.seconds:.4g} s at {other.where} "
                            f"and {s.seconds:.4g} s at {s.where}; drop one")


def default_params(inputs: Inputs, base: ClusterSpec, obs: list[Obs]) -> list[Param]:
    """The parameters the measurements determine (docs/calibrate.md, "What is fitted")."""
    known = all_params(base)
    names: list[str] = []
    gemm_k = {k.shape[2] for k in inputs.kernels if k.kind == "gemm"}
    if gemm_k:
        names.append("gpu.gemm_efficiency")
        if len(gemm_k) >= 3 and min(gemm_k) <= 512:
            names.append("gpu.gemm_half_k")
    if any(k.kind == "gemm_fp8" for k in inputs.kernels) and "gpu.fp8_gemm_efficiency" in known:
        names.append("gpu.fp8_gemm_efficiency")
    plain = {(k.kind, k.shape) for k in inputs.kernels if k.kind.startswith("gemm") and k.out_bytes <= 2}
    if any(k.kind.startswith("gemm") and k.out_bytes > 2 and (k.kind, k.shape) in plain for k in inputs.kernels):
        names.append("gpu.epilogue_exposure")           # a GEMM timed both plain and adding into a wider buffer
    if any(k.kind.startswith("attention") for k in inputs.kernels):
        names.append("gpu.attention_efficiency")
    mem_sizes = {k.shape[0] for k in inputs.kernels if k.kind == "memory"}
    if mem_sizes:
        names.append("gpu.memory_efficiency")
    if any(k.kind == "launch" for k in inputs.kernels) or len(mem_sizes) >= 3:
        names.append("gpu.kernel_overhead_us")
    by_tier: dict[str, set[float]] = defaultdict(set)
    for c in inputs.collectives:
        nodes = -(-c.ranks // c.per_node)
        tier = base.tiers[0] if nodes == 1 or len(base.tiers) == 1 else (
            base.tiers[-1] if c.op == "send_recv" else base.tier_spanning(nodes * base.gpus_per_node))
        by_tier[tier.name].add(c.nbytes)
    for tier in base.tiers:
        sizes = by_tier.get(tier.name)
        if sizes:
            names.append(f"tiers.{tier.name}.efficiency")
            if len(sizes) >= 2 and min(sizes) <= 64 * 2**10:
                names.append(f"tiers.{tier.name}.latency_us")
    steps = [o for o in obs if o.kind == "step"]
    if steps:
        names += _step_params(base, steps, names)
    return [known[n] for n in names]


def _step_params(base: ClusterSpec, steps: list[Obs], taken: list[str]) -> list[str]:
    """What measured steps fit: the sustained clock, unless the steps depend more on the HBM bandwidth (memory-bound
    models such as DLRMs; not once the kernels have set the memory efficiency) or on the host's time per op
    (host-bound steps of small models, where the base spec has one); host-bound steps also fit the step's own host
    time when there are three or more of them (two parameters, one degree of freedom left)."""
    names = ["gpu.clock_ratio", "gpu.host_launch_us"]
    if "gpu.memory_efficiency" not in taken:
        names.append("gpu.memory_efficiency")
    sens, known = {}, all_params(base)
    for name in names:
        p = known[name]
        v = value_of(base, p)
        moved = apply(base, [p], [v * 0.99])
        sens[name] = statistics.fmean(abs(math.log(o.predict(moved) / o.predict(base))) for o in steps)
    best = max(sens, key=lambda n: (sens[n], n == "gpu.clock_ratio"))
    if best == "gpu.host_launch_us" and len(steps) >= 3:
        return [best, "gpu.host_step_ms"]
    return [best]


def weights(obs: list[Obs], weigh: str = "equal") -> np.ndarray:
    """Each measurement's weight on its squared log residual: 1, or its seconds over the mean (``weigh="time"``)."""
    if weigh not in WEIGHS:
        raise SpecError(f"weigh must be one of {', '.join(WEIGHS)}, got {weigh!r}")
    t = np.array([o.measured for o in obs], dtype=float)
    return t / t.mean() if weigh == "time" and len(t) else np.ones(len(t))


def _residuals(obs: list[Obs], base: ClusterSpec, params: list[Param],
               prior: float | None = None, weigh: str = "equal") -> Callable[[np.ndarray], np.ndarray]:
    """log(predicted / measured) of each measurement (times √weight, ``weights``); with a ``prior`` (relative sd of the
    base values), the measurements in units of MODEL_ERROR followed by each parameter's distance from its base value
    in units of the prior (maximum a posteriori with a Gaussian prior: Bates & Watts 1988 §2.8; ridge
    regression)."""
    centre = np.array([value_of(base, p) for p in params])
    scale = np.array([prior * max(abs(c), 0.01 * (p.high - p.low)) for c, p in zip(centre, params)]) if prior else None
    root = np.sqrt(weights(obs, weigh))

    def fun(x: np.ndarray) -> np.ndarray:
        cluster = apply(base, params, list(x))
        r = root * np.array([math.log(o.predict(cluster) / o.measured) for o in obs])
        return r if scale is None else np.concatenate([r / MODEL_ERROR, (x - centre) / scale])
    return fun


def _jacobian(fun: Callable, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Central differences, one-sided at a bound; steps of 1e-4 of each parameter's range."""
    h = (hi - lo) * 1e-4
    cols = []
    for j in range(len(x)):
        up, down = x.copy(), x.copy()
        up[j] = min(hi[j], x[j] + h[j])
        down[j] = max(lo[j], x[j] - h[j])
        cols.append((fun(up) - fun(down)) / (up[j] - down[j]))
    return np.column_stack(cols)


def _check_determined(obs: list[Obs], params: list[Param], jac: np.ndarray, minimum: int = 2) -> None:
    """SpecError unless every parameter rests on ``minimum`` measurements, there are more measurements than
    parameters (``minimum`` 2: an uncertainty needs a degree of freedom) and no two parameters move alike."""
    ranges = np.array([p.high - p.low for p in params])
    informs = np.abs(jac) * ranges > SENSITIVE
    for j, p in enumerate(params):
        n = int(informs[:, j].sum())
        if n == 0:
            raise SpecError(f"too few measurements: none depends on {p.name} ({p.doc}); drop it from --fit or add "
                            "measurements that exercise it")
        if n < minimum:
            where = obs[int(np.argmax(informs[:, j]))].where
            raise SpecError(f"too few measurements: {p.name} rests on one measurement ({where}); give at least two, "
                            "so that its uncertainty and a leave-one-out error exist")
    if len(obs) < len(params) + minimum - 1:
        raise SpecError(f"too few measurements: {len(obs)} for {len(params)} parameters "
                        f"({', '.join(p.name for p in params)}); give at least {len(params) + 1}")
    scaled = jac * ranges
    norms = np.linalg.norm(scaled, axis=0)
    unit = scaled / norms
    gram = unit.T @ unit
    if len(params) > 1 and np.linalg.cond(gram) > 1e10:
        off = np.abs(gram - np.eye(len(params)))
        i, j = np.unravel_index(int(np.argmax(off)), off.shape)
        raise SpecError(f"too few measurements: {params[i].name} and {params[j].name} change every measurement "
                        "alike, so they cannot be told apart; fix one (leave it out of --fit) or add measurements "
                        "that separate them")


def solve(obs: list[Obs], base: ClusterSpec, params: list[Param], x0: list[float] | None = None,
          prior: float | None = None, weigh: str = "equal") -> np.ndarray:
    """The bounded least-squares optimum of the parameters (file units)."""
    from scipy.optimize import least_squares

    lo = np.array([p.low for p in params])
    hi = np.array([p.high for p in params])
    start = np.clip(np.array(x0 if x0 is not None else [value_of(base, p) for p in params]), lo, hi)
    fun = _residuals(obs, base, params, prior, weigh)
    if x0 is None:
        start = _scanned_start(fun, params, start, lo, hi)
    result = least_squares(fun, start, bounds=(lo, hi), x_scale=hi - lo, diff_step=1e-4, method="trf",
                           xtol=1e-10, ftol=1e-10, gtol=1e-10, max_nfev=200 * (len(params) + 1))
    return result.x


SCAN_POINTS = 31
"""Points of the geometric grid over a parameter's range (from 1/1000 of it to all of it above its low bound, and the
low bound) tried as the solver's start (``_scanned_start``)."""
THRESHOLD_PARAMS = frozenset({"gpu.host_launch_us"})
"""Parameters that change a prediction only past a threshold: the host's time per op binds where it exceeds the
GPU's (max(0, host − GPU), compute.host_exposed), so below that the residuals are flat and a local solver started
at the base value (often 0) finds no gradient to follow."""


def _scanned_start(fun: Callable, params: list[Param], start: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> np.ndarray:
    """``start`` with each threshold parameter (``THRESHOLD_PARAMS``) moved to the point of a grid over its range
    (the others held) where the residuals are least, if that beats it."""
    x = start.copy()
    best = float(np.sum(fun(x) ** 2))
    for j, p in enumerate(params):
        if p.name not in THRESHOLD_PARAMS:
            continue
        for v in (lo[j], *(lo[j] + (hi[j] - lo[j]) * np.geomspace(1e-3, 1.0, SCAN_POINTS))):
            trial = x.copy()
            trial[j] = v
            cost = float(np.sum(fun(trial) ** 2))
            if cost < best:
                best, x = cost, trial
    return x


def calibrate(inputs: Inputs, base: ClusterSpec, params: list[Param] | None = None,
              max_residual: float = MAX_RESIDUAL, loo: bool = True, prior: float | None = None,
              weigh: str = "equal") -> Fit:
    """Fit ``params`` (default: what the inputs determine) of ``base`` to the inputs; SpecError when the measurements
    are too few or inconsistent. ``weigh``: ``equal`` or ``time`` (``weights``). ``prior``: hold each parameter near
    its base value with this relative standard deviation (few measurements then move it only as far as they outweigh
    the base spec's sources)."""
    if not inputs.count():
        raise SpecError("too few measurements: the inputs hold none the model can use")
    obs = observations(inputs, base)
    params = params if params is not None else default_params(inputs, base, obs)
    if not params:
        raise SpecError("too few measurements: nothing to fit (no kernel, collective or step the model prices)")
    lo = np.array([p.low for p in params])
    hi = np.array([p.high for p in params])
    fun = _residuals(obs, base, params)
    base_values = [value_of(base, p) for p in params]
    _check_determined(obs, params, _jacobian(fun, np.clip(base_values, lo, hi), lo, hi))
    x = solve(obs, base, params, prior=prior, weigh=weigh)
    wfun = _residuals(obs, base, params, prior, weigh)
    jac = _jacobian(wfun, x, lo, hi)
    r = wfun(x)
    dof = len(r) - len(params)
    s2 = float(r @ r) / dof
    try:
        cov = s2 * np.linalg.inv(jac.T @ jac)
        sds = [math.sqrt(max(0.0, c)) for c in np.diag(cov)]
    except np.linalg.LinAlgError:
        raise SpecError("too few measurements: the parameters cannot be told apart from them") from None
    cluster = apply(base, params, list(x))
    residuals = [Residual(label=o.label, where=o.where, kind=o.kind, measured=o.measured,
                          predicted=o.predict(cluster)) for o in obs]
    fit = Fit(base=base, cluster=cluster, params=params, values=[float(v) for v in x], sds=sds,
              base_values=base_values, residuals=residuals)
    fit.at_bound = [p.name for p, v in zip(params, x) if math.isclose(v, p.low, abs_tol=1e-9 * (p.high - p.low))
                    or math.isclose(v, p.high, abs_tol=1e-9 * (p.high - p.low))]
    if fit.rms_pct > 100 * max_residual:
        worst = max(residuals, key=lambda q: abs(math.log(q.predicted / q.measured)))
        bound = f"; {', '.join(fit.at_bound)} at a physical bound" if fit.at_bound else ""
        raise SpecError(f"inconsistent measurements: after the best fit the model is still {fit.rms_pct:.1f} % off "
                        f"(rms; limit {100 * max_residual:g} %, --max-residual), worst {worst.label} at "
                        f"{worst.where}: measured {worst.measured:.4g} s, model {worst.predicted:.4g} s{bound}; "
                        "check the base cluster (--base) and that every input comes from one cluster")
    if prior:
        fit.notes.append(f"prior: each parameter held near its base value (relative sd {100 * prior:g} %), each "
                         f"measurement weighted as {100 * MODEL_ERROR:g} % model error")
    if weigh == "time":
        fit.notes.append("measurements weighted by their measured seconds (a sum of them predicted without bias)")
    if loo:
        fit.loo = leave_one_out(obs, base, params, x, prior, weigh)
    return fit


def leave_one_out(obs: list[Obs], base: ClusterSpec, params: list[Param], x: np.ndarray,
                  prior: float | None = None, weigh: str = "equal") -> list[Residual]:
    """Each measured step predicted by a fit to everything else (skipped where the rest leaves a parameter
    undetermined)."""
    out = []
    lo = np.array([p.low for p in params])
    hi = np.array([p.high for p in params])
    for i, o in enumerate(obs):
        if o.kind != "step":
            continue
        rest = obs[:i] + obs[i + 1:]
        try:
            _check_determined(rest, params, _jacobian(_residuals(rest, base, params), x, lo, hi), minimum=1)
        except SpecError:
            continue
        xi = solve(rest, base, params, list(x), prior, weigh)
        out.append(Residual(label=o.label, where=o.where, kind=o.kind, measured=o.measured,
                            predicted=o.predict(apply(base, params, list(xi)))))
    return out
