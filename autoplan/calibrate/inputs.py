"""Read any mix of input files into measurements: ``autoplan profile`` output, nccl-tests output, validation files
of measured steps, Megatron-LM / NeMo / torchtitan logs (with torchtitan's job config) and Kineto traces."""

from __future__ import annotations

import tomllib
from pathlib import Path

from autoplan.calibrate import read_kineto, read_megatron, read_nccl, read_profile, read_steps, read_titan
from autoplan.calibrate.measurements import Inputs, read_text
from autoplan.calibrate.model import ClusterSpec, ModelSpec, SpecError

KINDS = ("profile", "nccl-tests", "steps", "megatron", "torchtitan", "torchtitan-config", "kineto")
"""Input kinds, as the provenance table names them."""


def detect(text: str, path: Path) -> str:
    """The kind of an input file, from its content (its name only where the content allows two readings)."""
    if read_profile.looks_like(text):
        return "profile"
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise SpecError(f"{path}: not valid TOML ({err})") from None
        if read_titan.looks_like_config(data):
            return "torchtitan-config"
        raise SpecError(f"{path}: a TOML file that is not a torchtitan job config ([model] flavor, [training])")
    if read_kineto.looks_like(text):
        return "kineto"
    if read_nccl.looks_like(text):
        return "nccl-tests"
    if read_steps.looks_like(text):
        return "steps"
    if read_titan.looks_like_log(text):
        return "torchtitan"
    if read_megatron.looks_like(text):
        return "megatron"
    raise SpecError(f"{path}: not a file calibrate reads (autoplan profile JSON, nccl-tests output, a validation "
                    "YAML, a Megatron-LM/NeMo or torchtitan log, a torchtitan job config or a Kineto trace)")


def read(paths: list[str], base: ClusterSpec, model: ModelSpec | None = None, gpus: int | None = None,
         known_gaps: bool = False) -> Inputs:
    """Every measurement in ``paths``; torchtitan logs take the job config given beside them (one config for
    all logs, or one per log in order)."""
    out = Inputs()
    titan_logs: list[tuple[Path, str, dict]] = []
    titan_configs: list[tuple[Path, dict]] = []
    for raw in paths:
        path = Path(raw)
        text, digest = read_text(path, "input file")
        kind = detect(text, path)
        record = {"path": str(path), "sha256": digest, "bytes": len(text.encode()), "kind": kind}
        before = out.count()
        if kind == "profile":
            kernels, colls, header = read_profile.parse(text, path)
            out.kernels += kernels
            out.collectives += colls
            device = (header.get("device") or {}).get("name")
            if device:
                record["device"] = str(device)[:120]
        elif kind == "nccl-tests":
            out.collectives += read_nccl.parse(text, path)
        elif kind == "steps":
            steps, notes = read_steps.parse(text, path, base, known_gaps)
            out.steps += steps
            out.notes += notes
        elif kind == "megatron":
            out.steps.append(read_megatron.parse(text, path, model))
        elif kind == "kineto":
            kernels, colls, share = read_kineto.parse(text, path, base.gpus_per_node)
            out.kernels += kernels
            out.collectives += colls
            out.notes.append(f"{path}: GPU time by kernel class: " + ", ".join(
                f"{k} {v:.0%}" for k, v in share.items() if v) + f"; {len(kernels)} kernels and {len(colls)} "
                "collectives with known shapes used")
        elif kind == "torchtitan":
            titan_logs.append((path, text, record))
        else:
            titan_configs.append((path, tomllib.loads(text)))
        record["measurements"] = out.count() - before
        out.files.append(record)
    if titan_logs:
        if not titan_configs:
            raise SpecError(f"{titan_logs[0][0]}: a torchtitan log needs its job config (.toml) among the inputs")
        if len(titan_configs) not in (1, len(titan_logs)):
            raise SpecError(f"{len(titan_logs)} torchtitan logs and {len(titan_configs)} job configs: give one "
                            "config for all logs or one per log, in the same order")
        for i, (path, text, record) in enumerate(titan_logs):
            cpath, config = titan_configs[min(i, len(titan_configs) - 1)]
            out.steps.append(read_titan.parse(text, path, config, cpath, model, gpus))
            record["measurements"] = 1
    elif titan_configs:
        raise SpecError(f"{titan_configs[0][0]}: a torchtitan job config without a torchtitan log")
    return out
