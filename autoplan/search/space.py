"""Search spaces: the axes of a plan and their allowed values, enumerated into valid plans with reasons."""

from __future__ import annotations

import difflib
import functools
import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoplan.errors import SpecError
from autoplan.specs.model import MAX_SIZE, ModelSpec
from autoplan.families.registry import FRAMEWORKS, framework_violations, peak_memory, violation_checker
from autoplan.specs.layout import V_SHAPE, balanced_layout, balanced_v_layout
from autoplan.families.strategy import AXES, Strategy, knob_of
from autoplan.specs.plan import data_parallel

_ALLOWED: dict[str, tuple] = {name: knob_of(name).choices for name in AXES if knob_of(name).choices}
_INNER = tuple(a for a in AXES if a not in ("tp", "pp", "cp", "virtual_stages"))
"""Axes enumerated for each (tp, pp, cp), in order; virtual stages only for the interleaved schedule."""


BATCH = "global_batch"
"""The space key holding the global batches a search ranks (``--global-batch LOW-HIGH``); absent for one batch."""
FRAMEWORK = "framework"
"""The space key naming the framework its plans must launch with (``any``: every valid plan; kept among the axes as
a one-value entry so that every derived space carries it, and left out for ``any``)."""


@dataclass(frozen=True)
class Space:
    """Allowed values per axis (an axis left out holds Strategy's default), and, under ``framework``, the one
    framework its plans must launch with."""

    axes: dict[str, tuple]

    def __post_init__(self) -> None:
        missing = [name for name in AXES if name not in self.axes]
        if missing:                                    # an axis not given holds Strategy's default
            defaults = Strategy.defaults()
            object.__setattr__(self, "axes", {**self.axes, **{name: (defaults[name],) for name in missing}})

    def raw_size(self) -> int:
        """Combinations before any rule is applied (virtual stages count only for the interleaved schedule)."""
        per_schedule = sum(len(self.axes["virtual_stages"]) if s == "interleaved" else 1 for s in self.axes["schedule"])
        rest = 1
        for name, values in self.axes.items():
            if name not in ("schedule", "virtual_stages"):
                rest *= len(values)
        return per_schedule * rest

    @property
    def framework(self) -> str:
        """The framework the space's plans must launch with (``any``: no restriction)."""
        return self.axes.get(FRAMEWORK, ("any",))[0]


def spaces_dir() -> Path:
    """The folder of built-in search spaces."""
    return Path(__file__).resolve().parents[2] / "search_spaces"


def load_space(name_or_path: str = "default", fixed: dict[str, Any] | None = None,
               framework: str | None = None) -> Space:
    """A space from ``search_spaces/NAME.toml`` or a file, with ``fixed`` axes pinned to one value and its
    ``framework`` key replaced by ``framework`` when given."""
    from autoplan.specs.files import check_path, read_toml

    path = Path(check_path(name_or_path, "search space name or file"))
    if not (name_or_path.endswith(".toml") or path.is_file()):
        path = spaces_dir() / f"{name_or_path}.toml"
        if "/" in name_or_path or not path.is_file():
            known = ", ".join(sorted(p.stem for p in spaces_dir().glob("*.toml")))
            raise SpecError(f"search space {name_or_path!r} not found (built-in: {known}; or pass a .toml file)")
    data = read_toml(path, "search space")
    chosen = _framework(framework or data.get(FRAMEWORK, "any"), f"search space {str(path)!r}: framework")
    unknown = sorted(set(data) - set(AXES) - {FRAMEWORK})
    if unknown:
        near = {u: difflib.get_close_matches(u, AXES, n=1) for u in unknown}
        hint = "".join(f" (did you mean {near[u][0]}?)" for u in unknown if near[u])
        raise SpecError(f"search space {str(path)!r}: unknown axis {', '.join(unknown)}{hint}; "
                        f"axes are {', '.join(AXES)}")
    axes: dict[str, tuple] = {}
    defaults = Strategy.defaults()
    for name in AXES:
        values = data.get(name, [defaults[name]])
        if fixed and fixed.get(name) is not None:
            values = [fixed[name]]
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise SpecError(f"search space {str(path)!r}: axis {name} has no values; give at least one "
                            f"(e.g. {name} = [{_toml(defaults[name])}])")
        pinned = bool(fixed and fixed.get(name) is not None)
        where = f"--{name.replace('_', '-')}" if pinned else f"search space {str(path)!r}: axis {name}"
        _check_values(name, values, where)
        axes[name] = tuple(dict.fromkeys(values))       # a repeated value would repeat plans
    return Space(axes | ({FRAMEWORK: (chosen,)} if chosen != "any" else {}))


def _framework(value: object, where: str) -> str:
    if value not in FRAMEWORKS:
        raise SpecError(f"{where} {value!r} is not one of {', '.join(FRAMEWORKS)}")
    return str(value)


def space_from_axes(axes: dict[str, list], where: str) -> Space:
    """The space whose axes a run folder's inputs.json recorded (checked like a space file's)."""
    unknown = sorted(set(axes) - set(AXES) - {FRAMEWORK, BATCH})
    if unknown:
        raise SpecError(f"{where}: unknown axis {', '.join(unknown)}; axes are {', '.join(AXES)}")
    defaults = Strategy.defaults()
    out: dict[str, tuple] = {}
    if BATCH in axes:
        _check_values(BATCH, axes[BATCH] if isinstance(axes[BATCH], list) else [axes[BATCH]], f"{where}: {BATCH}")
        out[BATCH] = tuple(axes[BATCH])
    if FRAMEWORK in axes:
        given = axes[FRAMEWORK]
        out[FRAMEWORK] = (_framework(given[0] if isinstance(given, list) and len(given) == 1 else given,
                                     f"{where}: framework"),)
    for name in AXES:
        values = axes.get(name, [defaults[name]])
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}: axis {name} must be a non-empty list, got {values!r:.60}")
        _check_values(name, values, f"{where}: axis {name}")
        out[name] = tuple(dict.fromkeys(values))
    return Space(out)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def _check_values(name: str, values: list, where: str) -> None:
    allowed = _ALLOWED.get(name)
    for v in values:
        if allowed is not None:
            # type as well as value: TOML's 1 is not true, and 1.0 is not the ZeRO stage 1
            if not any(type(v) is type(a) and v == a for a in allowed):
                raise SpecError(f"{where}: value {v!r} is not one of {', '.join(_toml(a) for a in allowed)}")
        elif not isinstance(v, int) or isinstance(v, bool) or v < (0 if name in Strategy.UNSET_ZERO else 1):
            kind = "a non-negative" if name in Strategy.UNSET_ZERO else "a positive"
            raise SpecError(f"{where}: value {v!r} must be {kind} integer")
        elif v > MAX_SIZE:
            raise SpecError(f"{where}: value {v} is larger than {MAX_SIZE:,} (a typo?)")


@functools.lru_cache(maxsize=4096)
def reason_key(reason: str) -> str:
    """A rejection reason without its numbers (but with its thresholds: "pp > 1", and names: "gpt-1.7b", "fp8"),
    to count reasons of one kind."""
    return re.sub(r"(?<![>≥] )(?<![\w.-])\d+(?:\.\d+)?(?![\w.])", "N", reason)


def enumerate_plans(model: ModelSpec, gpus: int, space: Space, global_batch: int,
                    limit: int | None = None) -> tuple[list[Strategy], Counter]:
    """Every valid plan of ``space`` (deterministic order) and the count of each rejection reason; with ``limit``,
    stop after that many valid plans. A space with several global batches (``BATCH``) holds the plans of each."""
    if BATCH in space.axes:
        return _each_batch(model, gpus, space, limit)
    a = space.axes
    framework = space.framework
    plans: list[Strategy] = []
    rejected: Counter = Counter()
    # every field in field order (Strategy.checked): the defaults with each inner combination over them
    defaults = Strategy.defaults()
    inner = [defaults | dict(zip(_INNER, combo)) for combo in itertools.product(*(a[name] for name in _INNER))]
    checked = False
    check = violation_checker(model, gpus)
    for tp, pp, cp in itertools.product(a["tp"], a["pp"], a["cp"]):
        if gpus % (tp * pp * cp):
            rejected[f"tp·pp·cp does not divide the GPU count {gpus}"] += _rest(space)
            continue
        if not checked:
            # each value once through Strategy's checks (a bad one raises its SpecError), then plans without them
            _check_axis_values(space, global_batch)
            checked = True
        first, last, v_first = _end_stages(model, pp)
        for kw in inner:
            # the CNN degrees (spatial·channel·filter, 1 for transformers) take their share of the GPUs too
            split = kw["spatial"] * kw["channel"] * kw["filter"]
            if (gpus // (tp * pp * cp)) % split:
                rejected[f"tp·pp·cp·spatial·channel·filter does not divide the GPU count {gpus}"] += 1
                continue
            dp = data_parallel(gpus, tp, pp, cp) // split
            for v in (a["virtual_stages"] if kw["schedule"] == "interleaved" else (1,)):
                ends = (v_first, 0) if kw["schedule"] in V_SHAPE else (first, last)
                values = kw.copy()
                values.update(dp=dp, tp=tp, pp=pp, cp=cp, global_batch=global_batch, virtual_stages=v,
                              first_stage_layers=ends[0], last_stage_layers=ends[1])
                s = Strategy.checked(values)
                reasons = check(s, values)
                if not reasons and framework != "any":
                    reasons = framework_violations(model, s, framework)
                if reasons:
                    for r in reasons:
                        rejected[reason_key(r)] += 1
                else:
                    plans.append(s)
                    if limit is not None and len(plans) >= limit:
                        return plans, rejected
    return plans, rejected


def _each_batch(model: ModelSpec, gpus: int, space: Space, limit: int | None) -> tuple[list[Strategy], Counter]:
    """``enumerate_plans`` of a space with several global batches: each batch's plans in turn."""
    plans: list[Strategy] = []
    rejected: Counter = Counter()
    one = Space({k: v for k, v in space.axes.items() if k != BATCH})
    for batch in space.axes[BATCH]:
        found, why = enumerate_plans(model, gpus, one, batch, None if limit is None else limit - len(plans))
        plans += found
        rejected.update(why)
        if limit is not None and len(plans) >= limit:
            break
    return plans, rejected


def _end_stages(model: ModelSpec, pp: int) -> tuple[int, int, int]:
    """Layers of the first and the last stage when the model's layers do not split evenly over ``pp``, and of a V
    shape's rank 0 (0: even stages)."""
    if model.structure is not None:
        return 0, 0, 0              # a model with its own structure (a CNN) balances its stages itself
    # the balanced uneven layout (Megatron-LM first/last stage layers; MoE end stages may give up to 3 layers:
    # DeepSeek-V3's 61; all of them the last stage when it also runs MTP modules)
    most = 3 if model.moe else 2
    first, last = balanced_layout(model.layers, pp, most, bool(model.mtp_layers))
    # a V shape's rank 0 holds both ends: its own layer count (layout.balanced_v_layout)
    return first, last, balanced_v_layout(model.layers, pp, most)


def _check_axis_values(space: Space, global_batch: int) -> None:
    """Every value of every axis, and the global batch, through Strategy's checks (SpecError for a bad one)."""
    Strategy(global_batch=global_batch)
    for name, values in space.axes.items():
        if name in (FRAMEWORK, BATCH):            # not plan fields: the framework is checked when read
            continue
        for value in values:
            Strategy(**{name: value})


def _rest(space: Space) -> int:
    a = space.axes
    per_schedule = sum(len(a["virtual_stages"]) if s == "interleaved" else 1 for s in a["schedule"])
    return per_schedule * math.prod(len(a[name]) for name in _INNER if name != "schedule")


# ------------------------------------------------------------------------------------ a space with no valid plan

_RELAXABLE = ("tp", "pp", "cp", "micro_batch", "schedule", "virtual_stages", "sequence_parallel", "zero")
"""Axes the validity rules read (recompute and the overlap flags never make a plan invalid)."""
_TRIES = 8
"""Nearest values tried per axis (and GPU counts tried), so that explaining stays well under a second."""


@dataclass(frozen=True)
class Relaxation:
    """One change to the search inputs, and how many valid plans the space then holds."""

    flags: str
    """The change as command-line flags, e.g. ``--tp 4`` or ``--global-batch 1024``."""
    plans: int


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _flag(name: str, value: object) -> str:
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else flag.replace("--", "--no-", 1)
    return f"{flag} {value}"


def _distance(value: object, current: tuple) -> float:
    """How far a new axis value is from the current ones: the log of the ratio for numbers, 1 for a category."""
    ints = [c for c in current if isinstance(c, int) and not isinstance(c, bool) and c > 0]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or not ints:
        return 1.0
    return min(abs(math.log(value / c)) for c in ints)


def _axis_changes(model: ModelSpec, gpus: int, space: Space, global_batch: int) -> list[tuple[float, dict]]:
    """Single-value changes to each axis, nearest first (with the virtual stages the interleaved schedule needs)."""
    a = space.axes
    pools = {"tp": _divisors(gpus), "pp": _divisors(gpus), "cp": _divisors(gpus),
             "micro_batch": _divisors(global_batch), "virtual_stages": [v for v in _divisors(model.layers) if v > 1]}
    changes: list[tuple[float, dict]] = []
    for name in _RELAXABLE:
        pool = pools[name] if name in pools else list(_ALLOWED[name])
        fresh = sorted((v for v in pool if v not in a[name] and (isinstance(v, str) or v <= MAX_SIZE)),
                       key=lambda v: (_distance(v, a[name]), str(v)))[:_TRIES]
        for v in fresh:
            change = {name: (v,)}
            if (name == "schedule" and v == "interleaved" and max(a["virtual_stages"]) < 2) or (
                    name == "virtual_stages" and "interleaved" not in a["schedule"]):
                change = {"schedule": ("interleaved",), "virtual_stages": change.get("virtual_stages", (2,))}
            changes.append((_distance(v, a[name]), change))
    return changes


def _count(model: ModelSpec, gpus: int, space: Space, global_batch: int, limit: int | None = None) -> int:
    return len(enumerate_plans(model, gpus, space, global_batch, limit)[0])


def _probe(space: Space) -> tuple[Space, int]:
    """``space`` with the axes no rule reads cut to one value, and how many plans each of its plans stands for."""
    cut = [k for k in space.axes if k not in _RELAXABLE]
    probe = Space({k: v[:1] if k in cut else v for k, v in space.axes.items()})
    return probe, math.prod(len(space.axes[k]) for k in cut)


def _admits(model: ModelSpec, gpus: int, space: Space, global_batch: int) -> bool:
    """Whether ``space`` holds a valid plan."""
    return _count(model, gpus, _probe(space)[0], global_batch, limit=1) > 0


def _valid(model: ModelSpec, gpus: int, space: Space, global_batch: int) -> int:
    """How many valid plans ``space`` holds."""
    probe, weight = _probe(space)
    return _count(model, gpus, probe, global_batch) * weight


def _batch_quanta(model: ModelSpec, gpus: int, space: Space) -> set[int]:
    """Every q such that a global batch of q (and so of any multiple of q) makes some plan of ``space`` valid."""
    quanta = set()
    a = space.axes
    for tp, pp, cp in itertools.product(a["tp"], a["pp"], a["cp"]):
        if gpus % (tp * pp * cp):
            continue
        dp = data_parallel(gpus, tp, pp, cp)
        for mb, schedule in itertools.product(a["micro_batch"], a["schedule"]):
            q = dp * mb * (pp if schedule == "interleaved" else 1)
            if q in quanta or q > MAX_SIZE:
                continue
            one = Space({**a, "tp": (tp,), "pp": (pp,), "cp": (cp,), "micro_batch": (mb,), "schedule": (schedule,)})
            if _admits(model, gpus, one, q):
                quanta.add(q)
    return quanta


def _nearest_batch(model: ModelSpec, gpus: int, space: Space, global_batch: int) -> int | None:
    """The round batch (``specs/batch.is_round``: c·2^k, never 1539) nearest ``global_batch`` that admits plans."""
    from autoplan.specs.batch import round_batches

    quanta = _batch_quanta(model, gpus, space)
    candidates = [b for b in round_batches(max(1, global_batch // 8), min(MAX_SIZE, global_batch * 8), gpus)
                  if any(b % q == 0 for q in quanta)]
    return min(candidates, key=lambda c: (abs(math.log(c / global_batch)), c), default=None)


def relaxations(model: ModelSpec, gpus: int, space: Space, global_batch: int,
                gpus_per_node: int = 1, keep: int = 3) -> list[Relaxation]:
    """The ``keep`` smallest single changes that give an empty space valid plans: one value of one axis, the
    global batch, or the GPU count in whole nodes; nearest first (log ratio of the values; 1 for a category),
    then most plans."""
    space = Space({k: v for k, v in space.axes.items() if k != BATCH})    # a range: hints for its largest batch
    found: list[tuple[float, str, int, Space, int]] = []     # distance, flags, gpus, space, global batch
    done: set[str] = set()
    for dist, change in _axis_changes(model, gpus, space, global_batch):
        axis = next(iter(change))
        changed = Space({**space.axes, **change})
        if axis not in done and _admits(model, gpus, changed, global_batch):
            done.add(axis)
            found.append((dist, " ".join(_flag(k, v[0]) for k, v in change.items()), gpus, changed, global_batch))
    batch = _nearest_batch(model, gpus, space, global_batch)
    if batch is not None:
        found.append((abs(math.log(batch / global_batch)), _flag("global_batch", batch), gpus, space, batch))
    step = max(1, gpus_per_node)
    tries = sorted((g for k in range(1, _TRIES + 1) for g in (gpus + k * step, gpus - k * step) if 0 < g <= MAX_SIZE),
                   key=lambda g: (abs(g - gpus), -g))
    for g in tries:
        if _admits(model, g, space, global_batch):
            found.append((abs(math.log(g / gpus)), _flag("gpus", g), g, space, global_batch))
            break
    found.sort(key=lambda f: f[0])
    counted = [(d, flags, _valid(model, g, sp, gb)) for d, flags, g, sp, gb in found[:keep]]
    return [Relaxation(flags, n) for _, flags, n in sorted(counted, key=lambda c: (round(c[0], 9), -c[2]))]


def explain_no_plan(model: ModelSpec, gpus: int, space: Space, global_batch: int, rejected: Counter,
                    gpus_per_node: int = 1) -> str:
    """One line for an empty space: how often each rule rejected a combination, and the smallest change that
    would admit plans (with alternatives of other kinds)."""
    reasons = "; ".join(f"{r} ({n}×)" for r, n in sorted(rejected.items(), key=lambda x: (-x[1], x[0])))
    found = relaxations(model, gpus, space, global_batch, gpus_per_node)
    if not found:
        hint = "no single change of an axis, the global batch or the GPU count admits a plan"
    else:
        best, *others = found
        hint = f"smallest change that admits plans: {best.flags} ({best.plans} valid)"
        if others:
            hint += "; or " + ", or ".join(f"{r.flags} ({r.plans})" for r in others)
    return f"no valid plan in the space of {space.raw_size()} combinations: {reasons}. {hint}"


# ------------------------------------------------------------------------------ valid plans, none of which fits

_FIT_AXES = ("pp", "tp", "zero", "recompute", "sequence_parallel", "cp", "micro_batch", "virtual_stages", "schedule")
"""Axes whose value changes a plan's peak memory, tried in this order of preference (a MoE model's expert
parallelism first: its experts are most of its weights)."""
_FIT_SECONDS = 3.0
"""Time the fit hint may take before it stops trying changes."""


def _fits(model: ModelSpec, cluster: Any, s: Strategy) -> bool:
    try:
        return peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes
    except Exception:  # noqa: BLE001 - a plan whose memory cannot be computed is not offered as a fix
        return False


def _fit_pool(model: ModelSpec, gpus: int, space: Space, name: str) -> list:
    """Values of axis ``name`` not in ``space``, nearest to its current values first; pipeline degrees over
    every divisor of the GPU count up to the layer count (Megatron-LM splits 105 layers over 35 stages)."""
    a = space.axes
    if name in ("tp", "cp"):
        pool = [d for d in _divisors(gpus) if d <= 64]
    elif name == "ep":
        pool = [d for d in _divisors(gpus) if model.experts % d == 0]
    elif name == "pp":
        pool = [d for d in _divisors(gpus) if d <= model.layers]
    elif name == "micro_batch":
        pool = [m for m in (1, 2, 4, 8) if m < min(a[name])]
    elif name == "virtual_stages":
        pool = [v for v in _divisors(model.layers) if v > 1]
    else:
        pool = list(_ALLOWED.get(name, (False, True) if name == "sequence_parallel" else ()))
    return sorted((v for v in pool if v not in a[name]), key=lambda v: (_distance(v, a[name]), str(v)))


def fit_relaxations(model: ModelSpec, gpus: int, cluster: Any, space: Space, global_batch: int,
                    keep: int = 3) -> list[Relaxation]:
    """For a space whose valid plans all exceed the GPU's memory: up to ``keep`` single changes of one axis
    (one per axis, nearest value first) under which some plan fits, each with how many plans then fit."""
    import time

    start, found = time.perf_counter(), []
    for name in (("ep",) if model.moe else ()) + _FIT_AXES:
        for v in _fit_pool(model, gpus, space, name):
            if time.perf_counter() - start > _FIT_SECONDS or len(found) == keep:
                return found
            change = {name: (v,)}
            if name == "virtual_stages":
                change["schedule"] = ("interleaved",)
            plans, _ = enumerate_plans(model, gpus, Space({**space.axes, **change}), global_batch)
            fitting = sum(_fits(model, cluster, s) for s in plans)
            if fitting:
                found.append(Relaxation(_flag(name, v), fitting))
                break
    return found


def explain_no_fit(model: ModelSpec, gpus: int, cluster: Any, space: Space, global_batch: int) -> str:
    """One line for a search that found no plan that fits: where some plans of the space fit (a sampler or budget
    that tried only others), how many; else the smallest peak and changes that make plans fit."""
    plans, _ = enumerate_plans(model, gpus, space, global_batch)
    peaks = [peak_memory(model, cluster, s) for s in plans]
    least = f" (the smallest peak is {min(peaks) / 2**30:.1f} GiB of {cluster.gpu.hbm_bytes / 2**30:.0f})" if peaks else ""
    fitting = sum(p <= cluster.gpu.hbm_bytes for p in peaks)
    if fitting:
        return (f"none of the plans tried fits in memory, but {fitting} of the space's {len(peaks)} valid plans do"
                f"{least}: give a larger --budget, or --sampler exhaustive")
    found = fit_relaxations(model, gpus, cluster, space, global_batch)
    if not found:
        return f"no plan fits in memory{least}: no single change of an axis makes one fit; try more GPUs"
    return (f"no plan fits in memory{least}; plans fit with " +
            ", or ".join(f"{r.flags} ({r.plans} fit)" for r in found))
