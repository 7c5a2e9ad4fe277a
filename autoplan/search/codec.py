"""Lossless plain-JSON forms of the records a run folder keeps: Evaluation (with its Strategy and Metrics),
ModelSpec and ClusterSpec. Only data is read back (no pickle): a crafted file can fail to load, never run code."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from autoplan.errors import SpecError
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.catalog import STRUCTURE_TYPES
from autoplan.specs.model import ModelSpec


_PLAIN = frozenset((float, int, str, bool, type(None)))


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    return tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None


def to_data(obj: Any) -> Any:
    """Dataclasses as dicts of their fields, tuples as lists; floats stay exact (JSON writes ``repr``)."""
    cls = type(obj)
    if cls in _PLAIN:                      # most of a record: answered without asking what it is
        return obj
    names = _field_names(cls)
    if names is not None:
        return {name: to_data(getattr(obj, name)) for name in names}
    if isinstance(obj, (list, tuple)):
        return [to_data(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    return obj


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp: Any, data: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _build(inner, data, where)
    if dataclasses.is_dataclass(tp):
        return from_data(tp, data, where)
    if origin is tuple:
        _expect(data, list, where)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], x, where) for x in data)
        if len(args) != len(data):
            raise SpecError(f"{where}: expected {len(args)} values, got {len(data)}")
        return tuple(_build(a, x, where) for a, x in zip(args, data))
    if origin is dict:
        _expect(data, dict, where)
        return {k: _build(args[1], v, where) for k, v in data.items()}
    if tp is float:
        if type(data) not in (int, float):
            raise SpecError(f"{where}: expected a number, got {type(data).__name__}")
        return float(data)
    if tp in (int, str, bool):
        _expect(data, tp, where)
        return data
    raise SpecError(f"{where}: cannot read a value of type {tp!r}")


def _expect(data: Any, kind: type, where: str) -> None:
    if type(data) is not kind:
        raise SpecError(f"{where}: expected {kind.__name__}, got {type(data).__name__}")


def from_data(cls: type, data: Any, where: str = "record") -> Any:
    """Rebuild dataclass ``cls`` from ``to_data``'s form; SpecError naming ``where`` if it does not fit."""
    _expect(data, dict, where)
    hints = _hints(cls)
    unknown = set(data) - set(hints)
    if unknown:
        raise SpecError(f"{where}: unknown {cls.__name__} fields {sorted(unknown)}")
    kwargs = {k: _build(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise SpecError(f"{where}: {err}") from None


def evaluation_from_data(data: Any) -> Evaluation:
    """An Evaluation from ``to_data(evaluation)`` (extra keys of a record line are ignored)."""
    _expect(data, dict, "evaluation")
    return from_data(Evaluation, {k: data[k] for k in ("strategy", "metrics", "violations", "peak_memory")
                                  if k in data}, "evaluation")


def specs_to_data(model: ModelSpec, cluster: ClusterSpec) -> dict:
    """The run's model and cluster as one JSON object."""
    return {"model": to_data(model), "cluster": to_data(cluster)}


def specs_from_data(data: Any) -> tuple[ModelSpec, ClusterSpec]:
    """The model and cluster ``specs_to_data`` wrote."""
    _expect(data, dict, "specs")
    return _model_from_data(data.get("model")), from_data(ClusterSpec, data.get("cluster"), "cluster")


def _model_from_data(data: Any) -> ModelSpec:
    """A ModelSpec, its ``structure`` rebuilt as the type its family registered (``STRUCTURE_TYPES``)."""
    _expect(data, dict, "model")
    structure = data.get("structure")
    model = from_data(ModelSpec, {k: v for k, v in data.items() if k != "structure"}, "model")
    if structure is None:
        return model
    kind = STRUCTURE_TYPES.get(model.family)
    if kind is None:
        raise SpecError(f"model.structure: family {model.family!r} has no structure type")
    return dataclasses.replace(model, structure=from_data(kind, structure, "model.structure"))
