"""How close `autoplan validate`'s measured runs on a GPU come out, printed beside a prediction on that GPU: the
shipped table ``autoplan/data/fidelity.json`` (``autoplan validate --write-fidelity`` writes it from the runs;
tests/validate checks that it is current)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "data" / "fidelity.json"
KIND_WORDS = {"dense": "dense transformer", "moe": "mixture-of-experts", "cnn": "CNN", "dlrm": "DLRM"}
"""How a line names the runs of each model family."""


@lru_cache(maxsize=1)
def _table() -> dict[tuple[str, str], dict]:
    try:
        rows = json.loads(TABLE.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return {}
    return {(r["gpu"], r["kind"]): r for r in rows}


def row(gpu_name: str, kind: str) -> dict | None:
    """validate's figures for this GPU and model family (``--json`` outputs), or None where it has no such run."""
    return _table().get((gpu_name, kind))


def line(gpu_name: str, kind: str) -> str:
    """One line on validate's runs of this GPU and model family (``ModelSpec.family``), or a line saying there are
    none."""
    found = row(gpu_name, kind)
    words = KIND_WORDS.get(kind, kind)
    if found is None:
        return (f"no measured {words} run on the {gpu_name} in validate: this prediction is untested there "
                "(autoplan calibrate fits a spec to your own runs)")
    logo = found["logo_mean_abs_pct"]
    logo_text = f", {logo:.1f} % with the clock fitted on other groups" if logo is not None else ""
    runs = "run" if found["runs"] == 1 else "runs"
    return (f"validate's {found['runs']} measured {words} {runs} on the {gpu_name}: mean |error| "
            f"{found['mean_abs_pct']:.1f} % (signed {found['mean_signed_pct']:+.1f} %, max {found['max_abs_pct']:.0f} %)"
            f"{logo_text}")
