"""The run folder: the one module that knows its file names, and writes and reads them.

A run folder holds only JSON, JSONL, CSV, Markdown, HTML and gzip'd JSON (no pickle): loading a crafted folder can
fail with a one-line error, never run code. Its files are read as untrusted input (bounded reads of regular files,
each field checked: ``search/checks.py``), reading never writes, and nothing follows a link out of the folder: files
are written by atomic replace, or opened with O_NOFOLLOW.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Iterator

from autoplan.errors import SpecError
from autoplan.files import write_atomic
from autoplan.search.checks import check_evaluation, check_inputs, check_specs
from autoplan.search.codec import evaluation_from_data, specs_from_data, specs_to_data, to_data
from autoplan.sim.simulate import Evaluation
from autoplan.specs.cluster import ClusterSpec
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy
from autoplan.specs.files import MAX_BYTES, parse_json, read_bytes, shown

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

MAX_RECORD_BYTES = 2**30
"""Largest evaluations.jsonl read (1 GiB: some 300,000 plans)."""
WHAT = "run-folder"
"""How errors name a run folder's files (``run-folder file '…/inputs.json' is a folder, not a file``)."""
_NOFOLLOW = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def folder_name(text: str) -> str:
    """``text`` as part of one file name: letters, digits and ``. _ + -`` kept, anything else (``/``, ``..`` at the
    start, a line break, a space) becomes ``_``; at most 80 characters."""
    import re

    return re.sub(r"[^A-Za-z0-9._+-]", "_", text)[:80].lstrip(".") or "model"


def trace_name(rank: int) -> str:
    """``trace_rank1.json.gz``: the Chrome/Perfetto trace of the plan at ``rank`` (Perfetto opens gzip)."""
    return f"trace_rank{rank}.json.gz"


TRACES_GLOB = "trace_rank*.json.gz"
"""Every ``trace_name`` in a run folder."""


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
        try:
            folder = Path(path).expanduser().resolve()
        except (RuntimeError, OSError):            # a link loop: RuntimeError up to Python 3.12, OSError after
            raise SpecError(f"run folder {shown(path)} is a symbolic link loop") from None
        if not folder.is_dir():
            raise SpecError(f"run folder {shown(path)} does not exist" if not os.path.lexists(folder) else
                            f"run folder {shown(path)} is not a folder")
        if not os.path.lexists(folder / INPUTS):
            raise SpecError(f"{shown(path)} is not a run folder (no {INPUTS})")
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

    def _json(self, name: str, limit: int = MAX_BYTES) -> object:
        """The JSON document of the folder's file ``name``: a regular file, not a link, at most ``limit`` bytes."""
        path = self.path / name
        return parse_json(read_bytes(path, WHAT, limit, follow=False), f"{WHAT} file {shown(path)}")

    def _read_inputs(self) -> dict:
        if not os.path.lexists(self.path / INPUTS):
            raise SpecError(f"{shown(self.path)} is not a run folder (no {INPUTS})")
        return check_inputs(self._json(INPUTS), shown(self.path / INPUTS))

    def read_summary(self) -> dict:
        """The search's counts from leaderboard.json, or {} if it has none (or it is unreadable)."""
        try:
            summary = self._json(LEADERBOARD[0]).get("summary", {})
        except (SpecError, AttributeError):
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
        """The saved model and cluster (specs.json, else inputs.json's copy), checked as a model and a cluster file
        are (``checks.check_specs``); None if there are none; SpecError if they are unreadable or refused."""
        whole = self._load_specs_file()
        if whole is not None or not os.path.lexists(self.path / INPUTS):
            return whole
        data = self._read_inputs().get(INPUT_SPECS)
        if data is None:
            return None
        return self._checked_specs(data, f"{shown(self.path / INPUTS)}: its {INPUT_SPECS} are unreadable")

    def _load_specs_file(self) -> tuple[ModelSpec, ClusterSpec] | None:
        path = self.path / SPECS
        if not os.path.lexists(path):
            return None
        return self._checked_specs(self._json(SPECS), shown(path))

    def _checked_specs(self, data: object, where: str) -> tuple[ModelSpec, ClusterSpec]:
        try:
            model, cluster = specs_from_data(data)
        except (SpecError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
            raise SpecError(f"{where}: {err}") from None
        gpus = self._read_inputs().get("gpus") if os.path.lexists(self.path / INPUTS) else None
        check_specs(model, cluster, where, gpus)
        return model, cluster

    def load_evaluations(self) -> dict[Strategy, Evaluation]:
        """Every evaluation recorded, each checked (finite figures, a plan of the run's space: ``checks``). A last
        line torn by a kill (no newline) is left out here; the next search of the folder cuts it off before it
        appends (``recorder``): reading never writes."""
        known: dict[Strategy, Evaluation] = {}
        path = self.path / RECORD
        if not os.path.lexists(path):
            return known
        inputs = self._read_inputs() if os.path.lexists(self.path / INPUTS) else None
        whole, _, _torn = read_bytes(path, WHAT, MAX_RECORD_BYTES, follow=False).rpartition(b"\n")
        for number, line in enumerate(whole.split(b"\n") if whole else [], 1):
            if not line.strip():
                continue
            try:
                e = evaluation_from_data(parse_json(line, "the line"))
                check_evaluation(e, inputs)
            except (ValueError, RecursionError, SpecError) as err:
                raise SpecError(f"{shown(path)} line {number} is not an evaluation record of this run: "
                                f"{err}") from None
            known[e.strategy] = e
        return known

    def check_known(self, known: dict[Strategy, Evaluation], plans: list[Strategy]) -> None:
        """SpecError if a recorded plan is not one of the run's valid ``plans`` (a resume would rank, or hand
        Optuna, a plan the space does not hold)."""
        valid = set(plans)
        stray = next((s for s in known if s not in valid), None)
        if stray is not None:
            raise SpecError(f"{shown(self.path / RECORD)} records plan {stray.short()!r}, which is not a valid plan "
                            "of the run's space; this folder cannot be resumed")

    def recorder(self) -> "Recorder":
        """Appends new evaluations to the record."""
        return Recorder(self.path / RECORD)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder's lock; SpecError at once if another search holds it (a killed one never does), or if
        the lock is a link or no regular file (it is never followed out of the folder)."""
        fd = _open_own(self.path / LOCK, os.O_RDWR | os.O_CREAT)
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


def _open_own(path: Path, flags: int) -> int:
    """A descriptor of the folder's regular file ``path``, opened with ``flags`` without following a link;
    SpecError, one line, if it is a link, a folder or no regular file."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise SpecError(f"run folder file {shown(path)} is a symbolic link; autoplan writes only its own files "
                            "there (remove the link)") from None
        raise SpecError(f"run folder file {shown(path)} cannot be opened: {err.strerror or err}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SpecError(f"run folder file {shown(path)} is not a regular file")
    os.set_blocking(fd, True)
    return fd


class Recorder:
    """Appends each new evaluation to the record, one flushed line each; a last line torn by a kill is cut off
    first, so that the next line starts on a line of its own."""

    def __init__(self, path: Path) -> None:
        fd = _open_own(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        _cut_torn_line(fd)
        self._file = os.fdopen(fd, "a")

    def __call__(self, e: Evaluation) -> None:
        self._file.write(record_line(e))
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _cut_torn_line(fd: int) -> None:
    """Truncate the file after its last newline (a line written without one was torn by a kill)."""
    end = os.fstat(fd).st_size
    keep = end
    while keep > 0:
        start = max(0, keep - 65536)
        chunk = os.pread(fd, keep - start, start)
        at = chunk.rfind(b"\n")
        if at >= 0:
            keep = start + at + 1
            break
        keep = start
    if keep != end:
        os.ftruncate(fd, keep)
