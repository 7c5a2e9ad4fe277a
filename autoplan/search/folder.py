"""The run folder: the one module that knows its file names, and writes and reads them.

A run folder holds only JSON, JSONL, CSV, Markdown, HTML and gzip'd JSON (no pickle): loading a crafted folder can
fail with a one-line error, never run code.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

from autoplan.errors import SpecError
from autoplan.files import write_atomic
from autoplan.search.codec import evaluation_from_data, specs_from_data, specs_to_data, to_data
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

INPUTS = "inputs.json"
"""What was searched: model, cluster, gpus, global batch, the space's axes, top k, sampler, budget, seed; and under
``INPUT_SPECS`` the model and cluster whole (as specs.json), so the folder resumes from inputs.json alone."""
INPUT_SPECS = "specs"
RECORD = "evaluations.jsonl"
"""Every evaluation of the run, one JSON line each, appended as it arrives (a line torn by a kill is cut)."""
SPECS = "specs.json"
"""The run's model and cluster, whole (also those given as files)."""
JOURNAL = "study.journal"
"""The Optuna study (JournalStorage) unless --storage names another."""
LOCK = "lock"
"""Held (flock) by the search writing the folder: a second search of it fails fast."""
LEADERBOARD = ("leaderboard.json", "leaderboard.csv", "leaderboard.md")
REPORT = "report.html"
BEST_PLAN = "best_plan.json"

INPUT_TYPES: dict[str, type] = {"model": str, "cluster": str, "gpu": str, "gpus": int, "global_batch": int,
                                "space": dict, "top": int, "sampler": str, "budget": int, "seed": int,
                                "interrupted": bool}


def trace_name(rank: int) -> str:
    """``trace_rank1.json.gz``: the Chrome/Perfetto trace of the plan at ``rank`` (Perfetto opens gzip)."""
    return f"trace_rank{rank}.json.gz"


class RunFolder:
    """One run folder on disk."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, root: Path, name: str) -> "RunFolder":
        """A fresh folder ``root/name`` (``name-2``, ``-3``… if taken): two searches never share a folder."""
        root.mkdir(parents=True, exist_ok=True)
        for n in range(1, 10_000):
            folder = root / (name if n == 1 else f"{name}-{n}")
            try:
                folder.mkdir()
                return cls(folder)
            except FileExistsError:
                continue
        raise SpecError(f"no free run folder name under {str(root)!r}")

    @classmethod
    def existing(cls, path: str | Path) -> "RunFolder":
        """The run folder at ``path``; SpecError if it is none."""
        folder = Path(path).expanduser().resolve()
        if not folder.is_dir():
            raise SpecError(f"run folder {str(path)!r} does not exist")
        if not (folder / INPUTS).is_file():
            raise SpecError(f"{str(path)!r} is not a run folder (no {INPUTS})")
        return cls(folder)

    @property
    def name(self) -> str:
        return self.path.name

    def file(self, name: str) -> Path:
        """The path of the folder's file ``name``."""
        return self.path / name

    def write(self, name: str, data: str | bytes) -> Path:
        """Write file ``name`` atomically."""
        path = self.path / name
        write_atomic(path, data)
        return path

    def remove(self) -> None:
        """Delete the folder (a search that could not start leaves nothing behind)."""
        shutil.rmtree(self.path, ignore_errors=True)

    def write_inputs(self, inputs: dict) -> None:
        """inputs.json, with the model and cluster of specs.json whole if they were saved before."""
        saved = self._load_specs_file()
        whole = {INPUT_SPECS: specs_to_data(*saved)} if saved is not None else {}
        self.write(INPUTS, json.dumps(inputs | whole, indent=2))

    def read_inputs(self) -> dict:
        """inputs.json, checked: SpecError (one line) if it is unreadable, not JSON or holds wrong types. Without
        the model and cluster it holds whole (``load_specs`` reads them)."""
        data = self._read_inputs()
        data.pop(INPUT_SPECS, None)
        return data

    def _read_inputs(self) -> dict:
        path = self.path / INPUTS
        where = repr(str(path))
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            raise SpecError(f"{str(self.path)!r} is not a run folder (no {INPUTS})") from None
        except OSError as err:
            raise SpecError(f"{where} cannot be read: {err.strerror or err}") from None
        except UnicodeDecodeError:
            raise SpecError(f"{where} is not text (a run folder's {INPUTS} is JSON)") from None
        except (ValueError, RecursionError) as err:
            raise SpecError(f"{where} is not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise SpecError(f"{where} must hold a JSON object, not {type(data).__name__}")
        for key, kind in INPUT_TYPES.items():
            if key in data and not (type(data[key]) is kind):
                raise SpecError(f"{where}: {key} must be {kind.__name__}, got {data[key]!r:.60}")
        for axis, values in data.get("space", {}).items():
            if not isinstance(values, list) or not all(isinstance(v, (str, int, bool)) for v in values):
                raise SpecError(f"{where}: space axis {axis!r} must be a list of values, got {values!r:.60}")
        return data

    def read_summary(self) -> dict:
        """The search's counts from leaderboard.json, or {} if it has none."""
        try:
            summary = json.loads((self.path / LEADERBOARD[0]).read_text()).get("summary", {})
        except (OSError, ValueError, AttributeError):
            return {}
        return summary if isinstance(summary, dict) else {}

    def save_specs(self, model: ModelSpec, cluster: ClusterSpec) -> None:
        """Keep the run's model and cluster beside it (for reports and resumes of models given as files), in
        specs.json and in inputs.json (whichever is written first): a model given as a file, or one whose name a built-in
        shares, is not rebuilt from its name."""
        data = specs_to_data(model, cluster)
        self.write(SPECS, json.dumps(data, indent=1))
        if (self.path / INPUTS).exists():
            self.write(INPUTS, json.dumps(self._read_inputs() | {INPUT_SPECS: data}, indent=2))

    def load_specs(self) -> tuple[ModelSpec, ClusterSpec] | None:
        """The saved model and cluster (specs.json, else inputs.json's copy); None if there are none; SpecError
        if they are unreadable."""
        whole = self._load_specs_file()
        if whole is not None or not (self.path / INPUTS).exists():
            return whole
        data = self._read_inputs().get(INPUT_SPECS)
        if data is None:
            return None
        try:
            return specs_from_data(data)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
            raise SpecError(f"{str(self.path / INPUTS)!r}: its {INPUT_SPECS} are unreadable: {err}") from None

    def _load_specs_file(self) -> tuple[ModelSpec, ClusterSpec] | None:
        path = self.path / SPECS
        if not path.exists():
            return None
        try:
            return specs_from_data(json.loads(path.read_bytes().decode("utf-8")))
        except (OSError, ValueError, RecursionError) as err:
            raise SpecError(f"{str(path)!r} is unreadable: {err}") from None

    def load_evaluations(self) -> dict[Strategy, Evaluation]:
        """Every evaluation recorded; a last line torn by a kill is cut off, so what is appended next reads back."""
        known: dict[Strategy, Evaluation] = {}
        path = self.path / RECORD
        if not path.exists():
            return known
        data = path.read_bytes()
        whole, _, torn = data.rpartition(b"\n")
        if torn:                                # written without its newline: a kill tore it
            with path.open("r+b") as f:
                f.truncate(len(whole) + 1 if whole else 0)
        for number, line in enumerate(whole.split(b"\n") if whole else [], 1):
            if not line.strip():
                continue
            try:
                e = evaluation_from_data(json.loads(line.decode("utf-8")))
            except (ValueError, RecursionError, SpecError) as err:
                raise SpecError(f"{str(path)!r} line {number} is not an evaluation record: {err}") from None
            known[e.strategy] = e
        return known

    def recorder(self) -> "Recorder":
        """Appends new evaluations to the record."""
        return Recorder(self.path / RECORD)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's lock; SpecError at once if another search holds it (a killed one never does)."""
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise SpecError(f"run folder {str(self.path)!r} is in use by another search "
                                f"(pid {os.pread(fd, 32, 0).decode(errors='replace').strip() or '?'})") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)


def record_line(e: Evaluation) -> str:
    """One evaluation as a record line: its label and feasibility first (for people), then every field."""
    return json.dumps({"plan": e.strategy.short(), "feasible": e.feasible, **to_data(e)}) + "\n"


class Recorder:
    """Appends each new evaluation to the record, one flushed line each."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a")

    def __call__(self, e: Evaluation) -> None:
        self._file.write(record_line(e))
        self._file.flush()

    def close(self) -> None:
        self._file.close()

