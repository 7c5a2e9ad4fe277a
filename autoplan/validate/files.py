"""Reading a validation file (public.yaml's schema) and checking every key the predictions read."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from autoplan.errors import SpecError
from autoplan.specs.files import excerpt, read_yaml

CNN_METRICS = ("iteration_time_s", "seconds_per_sample")
"""What a CNN case may report: seconds per step, or training seconds per sample on one GPU."""
MEMORY_METRICS = ("max_allocated_gib", "max_reserved_gib")
"""What a measured memory run may report: PyTorch's peak allocated or peak reserved bytes on the fullest GPU."""


def default_file() -> Path:
    """The published runs shipped with autoplan (a copy of shared/validation/public.yaml)."""
    return Path(str(resources.files("autoplan") / "data" / "public.yaml"))


def default_files() -> tuple[Path, ...]:
    """Every file of runs shipped with autoplan: the public set and the measured runs compiled beside it."""
    return default_file(), Path(str(resources.files("autoplan") / "data" / "measured_runs.yaml"))


def load_default() -> dict:
    """The shipped files' lists, concatenated in file order (each file checked as ``load`` checks it)."""
    merged: dict = {}
    for path in default_files():
        for key, value in load(path).items():
            if isinstance(value, list):
                merged.setdefault(key, []).extend(value)
            else:
                merged.setdefault(key, value)
    return merged


def load(path: Path | None = None) -> dict:
    """Read a validation file of public.yaml's schema (its cases checked: ``check_cases``)."""
    path = Path(path) if path else default_file()
    where = f"validation file {str(path)!r}"
    data = read_yaml(path, "validation")
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise SpecError(f"{where} has no 'cases' list")
    check_cases(data, where)
    return data


_MODEL_KEYS = ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")


def _positive(value: object, what: str, *, integer: bool = True, optional: bool = False) -> None:
    if optional and (value is None or (isinstance(value, str) and "not stated" in value)):
        return
    kinds = (int,) if integer else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool) or not 0 < value < float("inf"):
        kind = "a positive integer" if integer else "a positive number"
        raise SpecError(f"{what} must be {kind}, got {excerpt(value)}")


def _table(parent: dict, key: str, where: str) -> dict:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise SpecError(f"{where}: {key} must be a mapping, got {excerpt(value)}")
    return value


def _list(data: dict, key: str, where: str) -> list:
    """``data[key]`` (a list of mappings; [] when absent)."""
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise SpecError(f"{where}: {key} must be a list of mappings")
    return items


def _names(items: list, what: str, where: str) -> None:
    """Each item's ``id`` a non-empty string, once in its list (results are keyed by it), and its ``group``, if
    given, a string."""
    seen: dict[str, int] = {}
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict):
            continue
        name, group = item.get("id"), item.get("group")
        if not isinstance(name, str) or not name.strip():
            raise SpecError(f"{where}: {what} #{i}: id must be a non-empty string, got {excerpt(name)}")
        if name in seen:
            raise SpecError(f"{where}: {what} #{i}: id {name[:60]!r} is also {what} #{seen[name]}'s (ids name one "
                            "run each)")
        seen[name] = i
        if group is not None and not isinstance(group, str):
            raise SpecError(f"{where}: {what} #{i} ({name[:60]!r}): group must be a string, got {excerpt(group)}")


def check_cases(data: dict, where: str) -> None:
    """Every key the predictions read, with the type it must have; errors name the file, case and key."""
    _names(data["cases"], "case", where)
    for key, what in (("memory_cases", "memory case"), ("memory_runs", "memory run"), ("cnn_cases", "CNN case"),
                      ("dlrm_cases", "DLRM case"), ("collective_bandwidth", "collective case")):
        _names(_list(data, key, where), what, where)
    for i, case in enumerate(data["cases"], 1):
        if not isinstance(case, dict):
            raise SpecError(f"{where}: case #{i} must be a mapping, got {case!r}")
        at = f"{where}: case #{i} ({str(case.get('id', '?'))[:60]!r})"
        hw, model, st = (_table(case, k, at) for k in ("hardware", "model", "strategy"))
        measured = _table(case, "measured", at)
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        for key in _MODEL_KEYS:
            _positive(model.get(key), f"{at}: model.{key}")
        for key in ("kv_heads", "head_dim"):
            _positive(model.get(key) or None, f"{at}: model.{key}", optional=True)
        _positive(st.get("global_batch"), f"{at}: strategy.global_batch")
        for key in ("tp", "pp", "cp", "dp", "microbatch", "virtual_stages_per_rank", "ep", "etp"):
            _positive(st.get(key) or None, f"{at}: strategy.{key}", optional=True)
        metric = next((k for k in ("iteration_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu") if k in measured),
                      None)
        if metric is None:
            raise SpecError(f"{at}: measured needs iteration_time_s, tflops_per_gpu or tokens_per_s_per_gpu")
        _positive(measured[metric], f"{at}: measured.{metric}", integer=False)
    for i, mc in enumerate(_list(data, "memory_cases", where), 1):
        at = f"{where}: memory case #{i}"
        ref = _table(mc, "reference_gib_per_gpu", at)
        for key, value in ref.items():
            _positive(value, f"{at}: reference_gib_per_gpu.{key}", integer=False)
    for i, run in enumerate(_list(data, "memory_runs", where), 1):
        at = f"{where}: memory run #{i} ({str(run.get('id', '?'))[:60]!r})"
        hw, model, st, measured = (_table(run, k, at) for k in ("hardware", "model", "strategy", "measured"))
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        for key in _MODEL_KEYS:
            _positive(model.get(key), f"{at}: model.{key}")
        _positive(st.get("global_batch"), f"{at}: strategy.global_batch")
        if not any(k in measured for k in MEMORY_METRICS):
            raise SpecError(f"{at}: measured needs one of {', '.join(MEMORY_METRICS)}")
        for key in MEMORY_METRICS:
            _positive(measured.get(key), f"{at}: measured.{key}", integer=False, optional=True)
    _list(data, "collective_bandwidth", where)
    for i, case in enumerate(_list(data, "cnn_cases", where), 1):
        at = f"{where}: CNN case #{i} ({str(case.get('id', '?'))[:60]!r})"
        hw, model, st, measured = (_table(case, k, at) for k in ("hardware", "model", "strategy", "measured"))
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        _positive(model.get("image_size"), f"{at}: model.image_size")
        for key in ("dp", "micro_batch", "global_batch"):
            _positive(st.get(key), f"{at}: strategy.{key}")
        metric = next((k for k in CNN_METRICS if k in measured), None)
        if metric is None:
            raise SpecError(f"{at}: measured needs one of {', '.join(CNN_METRICS)}")
        _positive(measured[metric], f"{at}: measured.{metric}", integer=False)
    for i, case in enumerate(_list(data, "dlrm_cases", where), 1):
        at = f"{where}: DLRM case #{i} ({str(case.get('id', '?'))[:60]!r})"
        hw, model, st, measured = (_table(case, k, at) for k in ("hardware", "model", "strategy", "measured"))
        _positive(hw.get("num_gpus"), f"{at}: hardware.num_gpus")
        _positive(model.get("embedding_params"), f"{at}: model.embedding_params", integer=False,
                  optional=True)
        _positive(st.get("global_batch"), f"{at}: strategy.global_batch")
        _positive(measured.get("samples_per_s"), f"{at}: measured.samples_per_s", integer=False)
