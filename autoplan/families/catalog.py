"""The built-in model catalog (each family's entries, ``families/<name>/catalog.py``) and loading a user's own
model from TOML or a HuggingFace ``config.json``."""

from __future__ import annotations

import difflib
import os
from dataclasses import fields
from importlib import import_module
from pathlib import Path

from autoplan.errors import SpecError
from autoplan.families import PACKAGES
from autoplan.specs.files import check_path, read_toml
from autoplan.specs.model import SIZES, ModelSpec

_CATALOGS = tuple(import_module(f"autoplan.families.{name}.catalog") for name in PACKAGES)
_MODELS: tuple[ModelSpec, ...] = tuple(m for c in _CATALOGS for m in c.MODELS)
_ALIASES: dict[str, str] = {k: v for c in _CATALOGS for k, v in c.ALIASES.items()}
_BY_NAME = {m.name: m for m in _MODELS}
_FILE_TABLES = {k: fn for c in _CATALOGS for k, fn in getattr(c, "FILE_TABLES", {}).items()}
"""Model-file tables a family builds its model from (e.g. ``[dlrm]``), by key."""

_EPOCHS: dict[str, int] = {k: v for c in _CATALOGS for k, v in getattr(c, "EPOCH_SAMPLES", {}).items()}
"""Samples in one epoch of a built-in model's training set, where its family's catalog gives it."""

STRUCTURE_TYPES: dict[str, type] = {m.family: type(m.structure) for m in _MODELS if m.structure is not None}
"""The type of ``ModelSpec.structure`` per family that has one (for reading run folders back)."""


def list_models() -> tuple[ModelSpec, ...]:
    """Every built-in model, smallest first within each family."""
    return _MODELS


def epoch_samples(model: ModelSpec) -> int | None:
    """Samples in one epoch of ``model``'s training set (built-in CNNs), or None if unknown."""
    return _EPOCHS.get(model.name)


def aliases() -> dict[str, str]:
    """Short names accepted for built-in models."""
    return dict(_ALIASES)


def get_model(name_or_path: str) -> ModelSpec:
    """A built-in model by name or alias, a user's model from a ``.toml`` file, or a HuggingFace ``config.json``
    (a ``.json`` file, or a folder holding ``config.json``)."""
    check_path(name_or_path, "model name or file")
    path = Path(name_or_path)
    if name_or_path.endswith(".json") or (path.is_dir() and (path / "config.json").is_file()):
        from autoplan.families.transformer.hf import load_hf_model
        return load_hf_model(path)
    if name_or_path.endswith(".toml") or path.is_file() or ("/" in name_or_path and os.path.lexists(path)):
        return load_model(path)                 # (a path that is no regular file: the reader says what it is)
    key = _ALIASES.get(name_or_path, _ALIASES.get(name_or_path.lower(), name_or_path.lower()))
    if key in _BY_NAME:
        return _BY_NAME[key]
    known = sorted(_BY_NAME) + sorted(_ALIASES)
    near = difflib.get_close_matches(name_or_path.lower(), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else f"; known models: {', '.join(sorted(_BY_NAME))}"
    raise SpecError(f"unknown model {name_or_path!r}{hint} (or pass a .toml file or a HuggingFace config.json)")


def load_model(path: Path) -> ModelSpec:
    """A model from a TOML file whose keys are ModelSpec's fields (at top level or under ``[model]``)."""
    data = read_toml(path, "model")
    data = data.get("model", data)
    if not isinstance(data, dict):
        raise SpecError(f"model file {str(path)!r}: [model] must be a table of ModelSpec fields, got {data!r}")
    allowed = ({f.name for f in fields(ModelSpec)} - {"structure"}) | set(_FILE_TABLES)  # structures: built in code
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(f"model file {str(path)!r}: unknown key(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(allowed))}")
    data.setdefault("name", Path(path).stem)
    for key in set(_FILE_TABLES) & set(data):
        built = _FILE_TABLES[key](data.pop(key), f"model file {str(path)!r}")
        data["structure"] = built.pop("structure")
        for name, value in built.items():
            data.setdefault(name, value)
    missing = [k for k in SIZES if k not in data]
    if missing:
        raise SpecError(f"model file {str(path)!r}: missing key(s) {', '.join(missing)} "
                        f"(required: {', '.join(SIZES)})")
    for key in SIZES + ("kv_heads", "head_dim"):
        if key in data and (not isinstance(data[key], int) or isinstance(data[key], bool)):
            raise SpecError(f"model file {str(path)!r}: {key} must be an integer, got {data[key]!r}")
    try:
        return check_model(ModelSpec(**data))
    except SpecError as err:
        raise SpecError(f"model file {str(path)!r}: {err}") from None


def check_model(model: ModelSpec) -> ModelSpec:
    """``model`` if its family can cost it: a registered family, and the structure that family describes its
    models with (a CNN's layers, a DLRM's tables), or none for a transformer family. SpecError otherwise."""
    from autoplan.families.registry import family_of

    family_of(model)
    kind = STRUCTURE_TYPES.get(model.family)
    if kind is not None and not isinstance(model.structure, kind):
        how = f"a [{model.family}] table" if model.family in _FILE_TABLES else f"a built-in {model.family} model"
        raise SpecError(f"model {model.name!r}: family {model.family!r} needs its {kind.__name__} (its layers or "
                        f"tables; {how} gives them), and this model has none")
    if kind is None and model.structure is not None:
        raise SpecError(f"model {model.name!r}: family {model.family!r} takes no structure, got a "
                        f"{type(model.structure).__name__}")
    return model
