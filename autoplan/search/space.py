"""Search spaces: the axes of a plan and their allowed values, enumerated into valid plans with reasons."""

from __future__ import annotations

import itertools
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from autoplan.errors import SpecError
from autoplan.specs.model import ModelSpec
from autoplan.specs.strategy import RECOMPUTE, SCHEDULES, Strategy, violations

AXES = ("tp", "pp", "cp", "micro_batch", "schedule", "virtual_stages", "sequence_parallel", "recompute", "zero",
        "overlap_grad_reduce", "overlap_param_gather")
_ALLOWED: dict[str, tuple] = {"schedule": SCHEDULES, "recompute": RECOMPUTE, "zero": (0, 1, 2, 3),
                              "sequence_parallel": (False, True), "overlap_grad_reduce": (False, True),
                              "overlap_param_gather": (False, True)}


@dataclass(frozen=True)
class Space:
    """Allowed values per axis."""

    axes: dict[str, tuple]

    def raw_size(self) -> int:
        """Combinations before any rule is applied (virtual stages count only for the interleaved schedule)."""
        per_schedule = sum(len(self.axes["virtual_stages"]) if s == "interleaved" else 1 for s in self.axes["schedule"])
        rest = 1
        for name, values in self.axes.items():
            if name not in ("schedule", "virtual_stages"):
                rest *= len(values)
        return per_schedule * rest


def spaces_dir() -> Path:
    """The folder of built-in search spaces."""
    return Path(__file__).resolve().parents[2] / "search_spaces"


def load_space(name_or_path: str = "default", fixed: dict[str, Any] | None = None) -> Space:
    """A space from ``search_spaces/NAME.toml`` or a file, with ``fixed`` axes pinned to one value."""
    path = Path(name_or_path)
    if not (name_or_path.endswith(".toml") or path.is_file()):
        path = spaces_dir() / f"{name_or_path}.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in spaces_dir().glob("*.toml")))
        raise SpecError(f"search space {name_or_path!r} not found (built-in: {known}; or pass a .toml file)") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"search space {str(path)!r} is not valid TOML: {err}") from None
    unknown = sorted(set(data) - set(AXES))
    if unknown:
        raise SpecError(f"search space {str(path)!r}: unknown axis {', '.join(unknown)}; axes are {', '.join(AXES)}")
    axes: dict[str, tuple] = {}
    defaults = {f.name: f.default for f in fields(Strategy)}
    for name in AXES:
        values = data.get(name, [defaults[name]])
        if fixed and fixed.get(name) is not None:
            values = [fixed[name]]
        if not isinstance(values, list) or not values:
            values = [values] if not isinstance(values, list) else values
        if not values:
            raise SpecError(f"search space axis {name!r} has no values")
        _check_values(name, values)
        axes[name] = tuple(values)
    return Space(axes)


def _check_values(name: str, values: list) -> None:
    allowed = _ALLOWED.get(name)
    for v in values:
        if allowed is not None and v not in allowed:
            raise SpecError(f"axis {name}: value {v!r} is not one of {', '.join(map(str, allowed))}")
        if allowed is None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise SpecError(f"axis {name}: value {v!r} must be a positive integer")


def reason_key(reason: str) -> str:
    """A rejection reason without its numbers, to count reasons of one kind together."""
    return re.sub(r"\d+", "N", reason)


def enumerate_plans(model: ModelSpec, gpus: int, space: Space, global_batch: int) -> tuple[list[Strategy], Counter]:
    """Every valid plan of ``space`` (deterministic order) and the count of each rejection reason."""
    a = space.axes
    plans: list[Strategy] = []
    rejected: Counter = Counter()
    for tp, pp, cp in itertools.product(a["tp"], a["pp"], a["cp"]):
        if gpus % (tp * pp * cp):
            rejected[f"tp·pp·cp does not divide the GPU count {gpus}"] += _rest(space)
            continue
        dp = gpus // (tp * pp * cp)
        for mb, schedule, sp, rc, zero, ogr, opg in itertools.product(
                a["micro_batch"], a["schedule"], a["sequence_parallel"], a["recompute"], a["zero"],
                a["overlap_grad_reduce"], a["overlap_param_gather"]):
            for v in (a["virtual_stages"] if schedule == "interleaved" else (1,)):
                s = Strategy(dp=dp, tp=tp, pp=pp, cp=cp, micro_batch=mb, global_batch=global_batch,
                             schedule=schedule, virtual_stages=v, sequence_parallel=sp, recompute=rc, zero=zero,
                             overlap_grad_reduce=ogr, overlap_param_gather=opg)
                reasons = violations(model, gpus, s)
                if reasons:
                    for r in reasons:
                        rejected[reason_key(r)] += 1
                else:
                    plans.append(s)
    return plans, rejected


def _rest(space: Space) -> int:
    a = space.axes
    per_schedule = sum(len(a["virtual_stages"]) if s == "interleaved" else 1 for s in a["schedule"])
    n = per_schedule
    for name in ("micro_batch", "sequence_parallel", "recompute", "zero", "overlap_grad_reduce",
                 "overlap_param_gather"):
        n *= len(a[name])
    return n
