"""A second fuzzer, property-based, over what autoplan reads: run folders (``inputs.json``, ``specs.json``,
``evaluations.jsonl``, links and special files in their place) and spec files (model TOML, HuggingFace
config.json, cluster TOML, space TOML, validation YAML), and over the names and flags that reach folder names and
the terminal.

It knows nothing of autoplan beyond its command line and the files it ships (templates to damage). Every input
runs in a forked child under a memory limit and a time bound, so that an input that reads forever, recurses or
hangs is counted, not fatal. The properties, for every input: an exit code in {0, 1, 2}; no traceback; an end
within ``LIMIT_S`` seconds; an error of at most 3 lines, none longer than ``LINE_MAX`` characters; a read-only
command (``show``, ``export``) changes nothing in the folder, and no command writes through a link to a file
outside it.

``AUTOPLAN_FUZZ_SCALE`` multiplies every test's examples (default 1: 57 generated inputs, about 30 s);
``benchmarks/fuzz_inputs.py`` runs it at scale and prints the counts. ``AUTOPLAN_FUZZ_TALLY=1`` counts failures
instead of stopping at the first (for the benchmark, and for measuring a version that fails); with
``AUTOPLAN_FUZZ_REPORT=FILE`` the counts and a few failing inputs of each kind are written there as JSON.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import resource
import select
import shutil
import signal
import stat
import tempfile
import time
import tomllib
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from autoplan.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCALE = float(os.environ.get("AUTOPLAN_FUZZ_SCALE", "1"))
TALLY_ONLY = os.environ.get("AUTOPLAN_FUZZ_TALLY", "") not in ("", "0")
REPORT = os.environ.get("AUTOPLAN_FUZZ_REPORT")
LIMIT_S = float(os.environ.get("AUTOPLAN_FUZZ_LIMIT_S", "60"))
"""An input still running after this long is a hang (the slowest well-formed input here takes a few seconds)."""
MEMORY = 6 * 2**30
"""Address-space limit of each child: reading /dev/zero ends in MemoryError, not in the machine swapping."""
LINE_MAX = 1000
"""Longest error line allowed: a message quotes a short excerpt of what it refuses, never a whole file."""
SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])
_SHM = Path("/dev/shm")
WORK = Path(tempfile.mkdtemp(prefix="autoplan-fuzz2-",
                             dir=_SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else None))

COUNTS: dict[str, Counter] = defaultdict(Counter)
WARM = ("autoplan.cli.plan", "autoplan.cli.search", "autoplan.cli.runs", "autoplan.search.run", "autoplan.search.study",
        "autoplan.search.analysis", "autoplan.report.write", "autoplan.report.html", "autoplan.report.terminal",
        "autoplan.report.live", "autoplan.report.validation", "autoplan.validate", "autoplan.inspect", "yaml",
        "rich.live", "rich.table")
"""Modules every child would import again: imported once here, every forked child starts with them."""
for _name in WARM:
    try:
        __import__(_name)
    except ImportError:
        pass
FAILURES: dict[str, list] = defaultdict(list)


def examples(n: int) -> int:
    return max(1, round(n * SCALE))


# ------------------------------------------------------------------------------------------------ running one input

@dataclass
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    traceback: str
    hang: bool
    seconds: float


def _child(args: list[str], cwd: Path, w: int) -> None:
    try:
        os.setpgid(0, 0)
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        os.chdir(cwd)
        raw = tempfile.TemporaryFile()          # what bypasses sys.stderr (Ray's C++ warnings write to fd 2)
        os.dup2(raw.fileno(), 1)
        os.dup2(raw.fileno(), 2)
        result = CliRunner().invoke(main, args)
        tb = ""
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            tb = "".join(traceback.format_exception(*result.exc_info))[-3000:]
        raw.seek(0)
        payload = {"code": result.exit_code, "stdout": result.stdout[-20000:],
                   "stderr": (raw.read().decode(errors="replace") + result.stderr)[-20000:], "traceback": tb}
    except BaseException as err:  # noqa: BLE001 - whatever happens is reported, not raised
        payload = {"code": None, "stdout": "", "stderr": "", "traceback": f"harness: {type(err).__name__}: {err}"}
    try:
        with os.fdopen(w, "wb") as f:
            f.write(json.dumps(payload).encode())
    finally:
        os._exit(0)


def run(args: list[str], cwd: Path) -> Outcome:
    """Run ``autoplan ARGS`` in a forked child (in ``cwd``), killing it after ``LIMIT_S`` seconds."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(args, cwd, w)
    os.close(w)
    data, hang = b"", False
    while True:
        left = LIMIT_S - (time.monotonic() - t0)
        ready = select.select([r], [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            hang = True
            for target in (-pid, pid):
                try:
                    os.kill(target, signal.SIGKILL)
                except OSError:
                    pass
            break
        chunk = os.read(r, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    seconds = time.monotonic() - t0
    if hang:
        return Outcome(None, "", "", "", True, seconds)
    try:
        p = json.loads(data)
    except ValueError:
        return Outcome(None, "", "", f"harness: the child died without a result ({len(data)} bytes)", False, seconds)
    return Outcome(p["code"], p["stdout"], p["stderr"], p["traceback"], False, seconds)


def problems(o: Outcome) -> list[str]:
    """What is wrong with an outcome: the fuzzer's properties."""
    if o.hang:
        return [f"hang (still running after {LIMIT_S:g} s)"]
    found = []
    if o.traceback or "Traceback (most recent call last)" in o.stdout + o.stderr:
        found.append("traceback")
    if o.code not in (0, 1, 2):
        found.append(f"exit code {o.code}")
    if o.code == 2:
        lines = [line for line in o.stderr.splitlines() if line.strip()]
        if len(lines) > 3:
            found.append(f"error of {len(lines)} lines")
        if any(len(line) > LINE_MAX for line in lines):
            found.append(f"error line over {LINE_MAX} characters")
    return found


def check(kind: str, args: list[str], o: Outcome, extra: list[str] = ()) -> None:
    """Count the input and its problems; fail at the first one unless counting only."""
    found = problems(o) + list(extra)
    COUNTS[kind]["inputs"] += 1
    COUNTS[kind]["ms"] += round(1000 * o.seconds)
    COUNTS[kind][f"exit {o.code}" if not o.hang else "hang"] += 1
    for p in found:
        COUNTS[kind][p.split(" (")[0].split(" of ")[0] if p.startswith(("hang", "error of")) else p] += 1
    if found:
        COUNTS[kind]["failed inputs"] += 1
        if len(FAILURES[kind]) < 8:
            FAILURES[kind].append({"args": [a[:200] for a in args], "problems": found, "code": o.code,
                                   "stderr": o.stderr[-600:], "traceback": o.traceback[-1500:]})
    if found and not TALLY_ONLY:
        pytest.fail(f"autoplan {' '.join(map(repr, args))}: {'; '.join(found)}\nstdout: {o.stdout[-1500:]}\n"
                    f"stderr: {o.stderr[-1500:]}\n{o.traceback}")


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    total = Counter()
    for c in COUNTS.values():
        total.update(c)
    lines = [f"  {kind}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items()) if k != "ms")
             for kind, c in sorted(COUNTS.items())]
    print("\nfuzzed inputs (second fuzzer):\n" + "\n".join(lines) +
          f"\n  total: {total['inputs']} inputs, {total['failed inputs']} failed, {total['traceback']} tracebacks, "
          f"{total['hang']} hangs")
    if REPORT:
        Path(REPORT).write_text(json.dumps({"counts": {k: dict(v) for k, v in COUNTS.items()},
                                            "failures": FAILURES}, indent=1))
    shutil.rmtree(WORK, ignore_errors=True)


def scratch() -> Path:
    return Path(tempfile.mkdtemp(dir=WORK))


# ------------------------------------------------------------------------------------------------ values

NAN, INF = float("nan"), float("inf")
MARKUP = ["[/]", "[bold red]x", "x[/x]", "[link=file:///etc]y", ":smile:", "[", "]"]
EVIL = [None, True, False, 0, -1, 1, 3, 2**31, 2**63, 10**30, -10**30, 0.0, -0.0, 0.5, 1.5, -1e-300, 1e308, NAN,
        INF, -INF, "", " ", "a\nb", "../..", "/", "x" * 3000, "\x00", "é", [], {}, [1], [[[]]], {"a": 1}, ["x"],
        *MARKUP]
"""Values no field expects (or only some do): wrong types, signs, magnitudes, non-finite numbers, markup, paths."""


def nested(depth: int, kind: str) -> str:
    """``depth`` levels of nesting as text of ``kind`` (json, toml, yaml)."""
    if kind == "json":
        return '{"a": ' + "[" * depth + "]" * depth + "}"
    if kind == "toml":
        return "a = " + "[" * depth + "]" * depth + "\n"
    return "a: " + "[" * depth + "]" * depth + "\n"


def laughs(levels: int = 9) -> str:
    """YAML "billion laughs": each level aliases the one below ten times."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + f"\ncases: *a{levels}\n"


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == INF else "-inf" if v == -INF else repr(v))
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items() if x is not None) + "}"
    return str(v)


def toml_text(data: dict) -> str:
    """Top-level keys, then [tables], then [[arrays of tables]] (None values are left out: TOML has no null)."""
    def table(v):
        return isinstance(v, list) and v and all(isinstance(x, dict) for x in v)
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in data.items()
             if v is not None and not isinstance(v, dict) and not table(v)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines += [f"[{json.dumps(k)}]"] + [f"{json.dumps(a)} = {toml_value(b)}" for a, b in v.items()
                                                if b is not None]
        elif table(v):
            for t in v:
                lines += [f"[[{json.dumps(k)}]]"] + [f"{json.dumps(a)} = {toml_value(b)}" for a, b in t.items()
                                                      if b is not None]
    return "\n".join(lines) + "\n"


def paths_of(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON-like document."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths_of(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):
            out += paths_of(v, prefix + (i,))
    return out


@st.composite
def damaged(draw: st.DrawFn, doc: object, targeted: list[tuple] = ()) -> object:
    """``doc`` with one to three values replaced by evil ones, deleted, or with an unknown key added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = paths_of(doc)
        if not paths:
            break
        path = draw(st.sampled_from(list(targeted))) if targeted and draw(st.booleans()) else \
            draw(st.sampled_from(paths))
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            last = path[-1]
            parent[last]
        except (KeyError, IndexError, TypeError):
            continue
        op = draw(st.sampled_from(["evil", "evil", "evil", "delete", "unknown", "scale"]))
        if op == "evil":
            parent[last] = draw(st.sampled_from(EVIL))
        elif op == "delete":
            del parent[last]
        elif op == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "[/]", "Layers", ""]))] = 1
        elif isinstance(parent[last], (int, float)) and not isinstance(parent[last], bool):
            parent[last] = parent[last] * draw(st.sampled_from([-1, 0, 1000, 1e-9]))
    return doc


@st.composite
def special_path(draw: st.DrawFn, suffix: str) -> str:
    """A path that is no ordinary file: a device, a FIFO, a folder, a link loop, a dangling link, a huge file."""
    kind = draw(st.sampled_from(["/dev/zero", "/dev/urandom", "/dev/null", "fifo", "folder", "loop", "dangling",
                                 "huge", "/proc/self/mem"]))
    where = scratch()
    path = where / f"f{suffix}"
    if kind.startswith("/"):
        if draw(st.booleans()):
            return kind
        path.symlink_to(kind)                          # a .toml name that is a device
        return str(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(where / "b")
        (where / "b").symlink_to(path)
    elif kind == "dangling":
        path.symlink_to(where / "nothing")
    else:
        with path.open("wb") as f:                 # a sparse file: instant, and larger than any spec
            f.truncate(draw(st.sampled_from([100 * 2**20, 3 * 2**30])))
    return str(path)


@st.composite
def pathological_text(draw: st.DrawFn, kind: str) -> str | bytes:
    """Text no parser should trust: deep nesting, random bytes, a billion laughs (YAML), odd encodings."""
    choice = draw(st.sampled_from(["deep", "deep", "bytes", "text", "laughs", "bom", "empty"]))
    if choice == "deep":
        return nested(draw(st.sampled_from([100, 1000, 50_000, 500_000])), kind)
    if choice == "bytes":
        return draw(st.binary(max_size=300))
    if choice == "laughs" and kind == "yaml":
        return laughs(draw(st.integers(3, 9)))
    if choice == "bom":
        return b"\xef\xbb\xbf" + b"\xff\xfe" * draw(st.integers(1, 50))
    if choice == "empty":
        return ""
    return draw(st.text(max_size=200))


# ------------------------------------------------------------------------------------------------ spec files

TINY_MODEL = {"name": "tiny", "layers": 4, "hidden": 256, "heads": 8, "ffn_hidden": 1024, "vocab": 1000,
              "seq_len": 256}
HF_CONFIG = json.loads((ROOT / "tests" / "families" / "transformer" / "hf_configs" / "llama-3.1-8b.json").read_text())
CLUSTER = tomllib.loads((ROOT / "cluster_specs" / "dgx-a100-80g.toml").read_text())
SPACE = {"tp": [1, 2], "pp": [1, 2], "cp": [1], "micro_batch": [1, 2], "schedule": ["1f1b"],
         "recompute": ["none", "full"], "zero": [0, 1]}
VALIDATION = {"cases": [{
    "id": "tiny-1", "group": "fuzz", "source": "a test", "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8},
    "model": dict(TINY_MODEL), "strategy": {"tp": 2, "pp": 1, "dp": 4, "cp": 1, "microbatch": 1, "global_batch": 8,
                                            "recompute": "none", "sequence_parallel": False,
                                            "virtual_stages_per_rank": 1, "distributed_optimizer": False,
                                            "overlap_grad_reduce": True},
    "measured": {"iteration_time_s": 0.05}}]}
ODD_MODELS = [{"family": "cnn"}, {"family": "dlrm"}, {"family": "moe"}, {"family": "[/]"}, {"experts": 4},
              {"name": "a/b"}, {"name": "../.."}, {"name": "x\ny"}, {"name": "[/]"}, {"name": "[bold]x"},
              {"kv_heads": 3}, {"head_dim": 1}, {"window": 10**6}, {"capacity_factor": NAN}, {"glu_clamp": INF}]
ODD_CLUSTERS = [("gpu", "sm_count", 0), ("", "tiers", []), ("", "gpus_per_node", 0), ("", "name", "[/]"),
                ("", "name", "a\nb"), ("gpu", "name", "[bold]x"), ("gpu", "peak_tflops", NAN),
                ("gpu", "hbm_gib", INF), ("", "nvlink_domain_gpus", 7), ("gpu", "gemm_tile", [0, 0]),
                ("", "dimensions", []), ("", "dimensions", [{"size": 8, "topology": "ring", "bandwidth_gb_per_s": 0,
                                                             "latency_us": 1}])]


@st.composite
def spec_file(draw: st.DrawFn, kind: str) -> tuple[str, str]:
    """A file of ``kind`` (model, hf, cluster, space, validation) in a fresh folder: its path, and how it was made."""
    how = draw(st.sampled_from(["damaged", "damaged", "damaged", "odd", "special", "pathological"]))
    suffix = {"model": ".toml", "hf": ".json", "cluster": ".toml", "space": ".toml", "validation": ".yaml"}[kind]
    if how == "special":
        return draw(special_path(suffix)), how
    path = scratch() / f"spec{suffix}"
    if how == "pathological":
        text = draw(pathological_text({"hf": "json", "validation": "yaml"}.get(kind, "toml")))
    else:
        doc = {"model": TINY_MODEL, "hf": HF_CONFIG, "cluster": CLUSTER, "space": SPACE,
               "validation": VALIDATION}[kind]
        doc = copy.deepcopy(doc)
        if how == "odd" and kind in ("model", "cluster"):
            if kind == "model":
                doc.update(draw(st.sampled_from(ODD_MODELS)))
            else:
                table, key, value = draw(st.sampled_from(ODD_CLUSTERS))
                (doc[table] if table else doc)[key] = value
        else:
            doc = draw(damaged(doc))
        if kind in ("hf", "validation"):
            text = json.dumps(doc, allow_nan=True) if kind == "hf" or draw(st.booleans()) else _yaml(doc)
        else:
            text = toml_text(doc) if isinstance(doc, dict) else "x = 1\n"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, errors="surrogatepass")
    return str(path), how


def _yaml(doc: object) -> str:
    import yaml
    return yaml.safe_dump(doc, allow_unicode=True)


SPEC_COMMANDS = {
    "model": [["check", "--model", "{}", "--gpus", "8", "--tp", "2", "--global-batch", "16"],
              ["simulate", "--model", "{}", "--gpus", "8", "--tp", "2", "--global-batch", "16"],
              ["space", "--model", "{}", "--gpus", "8", "--global-batch", "16", "--tp", "2"],
              ["search", "--model", "{}", "--gpus", "8", "--global-batch", "16", "--tp", "2", "--pp", "2",
               "--workers", "0", "--top", "2", "--out", "runs"]],
    "cluster": [["check", "--cluster", "{}", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--global-batch",
                 "64"],
                ["simulate", "--cluster", "{}", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2",
                 "--global-batch", "64"],
                ["collective", "--cluster", "{}", "--gpus", "16"],
                ["space", "--cluster", "{}", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2"]],
    "space": [["space", "--space", "{}", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "16"],
              ["search", "--space", "{}", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "16",
               "--workers", "0", "--top", "2", "--out", "runs"]],
    "validation": [["validate", "{}"]],
}
SPEC_COMMANDS["hf"] = SPEC_COMMANDS["model"]


@pytest.mark.parametrize("kind", sorted(SPEC_COMMANDS))
def test_spec_files(kind):
    @settings(max_examples=examples(8), **SETTINGS)
    @given(spec_file(kind), st.sampled_from(SPEC_COMMANDS[kind]), st.booleans())
    def fuzz(made, command, as_json):
        path, how = made
        args = [a.replace("{}", path) for a in command] + (["--json"] if as_json else [])
        check(f"spec files: {kind}", args, run(args, scratch()))

    fuzz()


# ------------------------------------------------------------------------------------------------ run folders

TEMPLATES: dict[str, Path] = {}
TINY_FILE = WORK / "tiny.toml"
TEMPLATE_ARGS = {
    "transformer": ["--model", str(TINY_FILE), "--gpus", "8", "--global-batch", "32", "--pp", "2"],
    "cnn": ["--model", "resnet50", "--gpus", "8", "--global-batch", "64", "--pp", "1"],
    "dlrm": ["--model", "dlrm-criteo", "--gpus", "8"],
}


def template(name: str) -> Path:
    """A run folder made by a real search (once per session), to copy and damage."""
    if name not in TEMPLATES:
        out = WORK / "templates" / name
        if not TINY_FILE.exists():
            TINY_FILE.write_text(toml_text(TINY_MODEL))
        args = ["search", *TEMPLATE_ARGS[name], "--workers", "0", "--top", "3", "--out", str(out), "--json"]
        o = run(args, WORK)
        assert o.code == 0, o.stderr + o.traceback
        TEMPLATES[name] = Path(json.loads(o.stdout)["run"])
    return TEMPLATES[name]


RUN_FILES = ("inputs.json", "specs.json", "evaluations.jsonl", "lock", "study.journal", "leaderboard.json")
TARGETED_INPUTS = [("top",), ("gpus",), ("budget",), ("sampler",), ("seed",), ("global_batch",), ("space", "tp"),
                   ("space", "tp", 0), ("space", "schedule", 0), ("model",), ("cluster",), ("specs", "cluster"),
                   ("specs", "model", "layers")]
TARGETED_SPECS = [("cluster", "gpu", "sm_count"), ("cluster", "tiers"), ("cluster", "tiers", 0, "bandwidth"),
                  ("cluster", "gpu", "peak_flops"), ("cluster", "gpus_per_node"), ("cluster", "nodes"),
                  ("model", "layers"), ("model", "family"), ("model", "structure"), ("model", "name"),
                  ("cluster", "name"), ("cluster", "gpu", "hbm_bytes"), ("model", "structure", "layers")]
TARGETED_RECORD = [("metrics", "step_time"), ("metrics", "tokens_per_s"), ("metrics", "peak_memory"),
                   ("metrics", "mfu"), ("strategy", "tp"), ("strategy", "dp"), ("strategy", "schedule"),
                   ("strategy", "micro_batch"), ("strategy", "global_batch"), ("peak_memory",), ("violations",),
                   ("metrics",), ("strategy",), ("metrics", "breakdown", "compute")]


def _digest(folder: Path) -> dict[str, str]:
    """Each entry under ``folder`` (links as their target's name, never followed) and a hash of each file."""
    out = {}
    for p in sorted(folder.rglob("*")) if folder.is_dir() and not folder.is_symlink() else []:
        rel = str(p.relative_to(folder))
        mode = os.lstat(p).st_mode
        if stat.S_ISLNK(mode):
            out[rel] = "link to " + os.readlink(p)
        elif stat.S_ISREG(mode):
            out[rel] = hashlib.sha1(p.read_bytes()).hexdigest() if p.stat().st_size < 2**26 else \
                f"size {p.stat().st_size}"
        else:
            out[rel] = f"mode {mode:o}"
    return out


@st.composite
def damaged_run(draw: st.DrawFn) -> tuple[Path, Path, str]:
    """A copy of a template run folder with one to three files damaged; the folder, a folder outside it that links
    may point into (must stay unchanged), and what was done."""
    name = draw(st.sampled_from(["transformer", "transformer", "transformer", "cnn", "dlrm"]))
    base = scratch()
    folder, outside = base / "run", base / "outside"
    shutil.copytree(template(name), folder, symlinks=True)
    outside.mkdir()
    (outside / "victim.txt").write_text("not autoplan's\n")
    done = []
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["inputs.json", "inputs.json", "specs.json", "specs.json", "evaluations.jsonl",
                                       "evaluations.jsonl", "evaluations.jsonl", "special", "folder"]))
        try:
            done.append(_damage(draw, folder, outside, target))
        except (RecursionError, ValueError):     # a document a damage before nested too deeply to edit further
            done.append("nothing")
    return folder, outside, f"{name}: " + "; ".join(done)


def _damage(draw: st.DrawFn, folder: Path, outside: Path, target: str) -> str:
    if target == "folder":
        how = draw(st.sampled_from(["loop", "file", "empty", "no inputs", "link"]))
        if folder.is_symlink() or not folder.is_dir():
            return "nothing"
        if how == "loop":
            shutil.rmtree(folder)
            folder.symlink_to(folder.parent / "run2")
            (folder.parent / "run2").symlink_to(folder)
        elif how == "file":
            shutil.rmtree(folder)
            folder.write_text("{}")
        elif how == "empty":
            shutil.rmtree(folder)
            folder.mkdir()
        elif how == "no inputs" and (folder / "inputs.json").exists():
            (folder / "inputs.json").unlink()
        elif how == "link" and folder.is_dir() and not folder.is_symlink():
            real = folder.parent / "real-run"
            folder.rename(real)
            folder.symlink_to(real)
        return f"folder {how}"
    if not folder.is_dir():
        return "nothing"
    if target == "special":
        name = draw(st.sampled_from(RUN_FILES))
        path = folder / name
        how = draw(st.sampled_from(["link out", "link out", "link loop", "fifo", "folder", "/dev/zero", "huge"]))
        if path.exists() or path.is_symlink():
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        if how == "link out":
            victim = outside / "victim.txt"
            if name in ("inputs.json", "specs.json", "evaluations.jsonl"):
                victim = outside / name
                shutil.copy(template("transformer") / name, victim) if (template("transformer") / name).exists() \
                    else victim.write_text("")
            path.symlink_to(victim)
        elif how == "link loop":
            path.symlink_to(path)
        elif how == "fifo":
            os.mkfifo(path)
        elif how == "folder":
            path.mkdir()
        elif how == "/dev/zero":
            path.symlink_to("/dev/zero")
        else:
            with path.open("wb") as f:
                f.truncate(draw(st.sampled_from([100 * 2**20, 3 * 2**30])))
        return f"{name} {how}"
    path = folder / target
    if not path.is_file() or path.is_symlink():
        return "nothing"
    if target == "evaluations.jsonl":
        return _damage_record(draw, path)
    how = draw(st.sampled_from(["value", "value", "value", "value", "text", "not object", "nan"]))
    if how == "text":
        data = draw(pathological_text("json"))
        path.write_bytes(data if isinstance(data, bytes) else data.encode(errors="surrogatepass"))
        return f"{target} text"
    doc = json.loads(path.read_text())
    if how == "not object":
        doc = draw(st.sampled_from([[], 3, "x", None, [doc]]))
    elif how == "nan":
        doc = draw(damaged(doc, [p for p in TARGETED_SPECS if target == "specs.json"] or TARGETED_INPUTS))
    else:
        doc = draw(damaged(doc, TARGETED_INPUTS if target == "inputs.json" else TARGETED_SPECS))
    path.write_text(json.dumps(doc, allow_nan=True))
    return f"{target} {how}"


def _damage_record(draw: st.DrawFn, path: Path) -> str:
    lines = path.read_bytes().splitlines(keepends=True)
    how = draw(st.sampled_from(["value", "value", "value", "value", "torn", "garbage", "blank", "duplicate", "deep",
                                "empty"]))
    if not lines or how == "empty":
        path.write_bytes(b"")
        return "record emptied"
    at = draw(st.integers(0, len(lines) - 1))
    if how == "value":
        record = json.loads(lines[at])
        lines[at] = (json.dumps(draw(damaged(record, TARGETED_RECORD)), allow_nan=True) + "\n").encode()
    elif how == "torn":
        data = b"".join(lines)
        path.write_bytes(data[:draw(st.integers(0, len(data)))])
        return "record torn"
    elif how == "garbage":
        lines.insert(at, draw(st.sampled_from([b"{\n", b"null\n", b"[]\n", b"\xff\xfe\n", b"{\"plan\": 1}\n",
                                               b"NaN\n", b"\x00\x00\n"])))
    elif how == "blank":
        lines.insert(at, b"\n")
    elif how == "duplicate":
        lines.insert(at, lines[at])
    else:
        lines.insert(at, (nested(draw(st.sampled_from([1000, 100_000])), "json") + "\n").encode())
    path.write_bytes(b"".join(lines))
    return f"record {how}"


RUN_COMMANDS = [["show", "{}"], ["show", "{}", "--json"], ["show", "{}", "--top", "50"], ["export", "{}"],
                ["export", "{}", "--rank", "2"], ["export", "{}", "--format", "torchtitan"],
                ["export", "{}", "--format", "torchrec"], ["report", "{}"],
                ["search", "--resume", "{}", "--workers", "0", "--json"], ["search", "--resume", "{}", "--workers", "0"]]
READ_ONLY = ("show", "export")


@settings(max_examples=examples(12), **SETTINGS)
@given(damaged_run(), st.sampled_from(RUN_COMMANDS))
def test_run_folders(case, command):
    folder, outside, how = case
    args = [a.replace("{}", str(folder)) for a in command]
    before, outside_before = _digest(folder), _digest(outside)
    o = run(args, folder.parent)
    extra = []
    if _digest(outside) != outside_before:
        extra.append("wrote outside the run folder (through a link)")
    if command[0] in READ_ONLY and _digest(folder) != before:
        extra.append(f"{command[0]} changed the run folder")
    check(f"run folders: {command[0]}", args + [f"({how})"], o, extra)


# ------------------------------------------------------------------------------------------------ names and flags

NAMES = [*MARKUP, "a/b", "../x", "..", ".", "x\ny", "\t", "-x", "x" * 200, "é/ü", "a b", "~", "$HOME", "*",
         "outs/[/]", "[/]/[/]"]


@st.composite
def named_input(draw: st.DrawFn) -> list[str]:
    """Flags whose strings reach folder names, messages and tables: --out, model and cluster names (from files),
    budgets and samplers, --storage and --ray-address."""
    kind = draw(st.sampled_from(["out", "model name", "cluster name", "budget", "storage", "ray", "names"]))
    base = ["search", "--model", "gpt-1.7b", "--gpus", "8", "--tp", "2", "--pp", "2", "--global-batch", "16",
            "--workers", "0", "--top", "2", "--cp", "1", "--zero", "1", "--recompute", "none"]
    json_flag = ["--json"] if draw(st.booleans()) else []
    if kind == "out":
        return base + ["--out", draw(st.sampled_from(NAMES))] + json_flag
    if kind == "model name":
        model = scratch() / "m.toml"
        model.write_text(toml_text(TINY_MODEL | {"name": draw(st.sampled_from(NAMES))}))
        command = draw(st.sampled_from(["check", "simulate", "space", "search"]))
        args = [command, "--model", str(model), "--gpus", "8", "--tp", "2", "--global-batch", "16"]
        return args + (["--workers", "0", "--out", "runs", "--pp", "2"] if command == "search" else []) + json_flag
    if kind == "cluster name":
        cluster = scratch() / "c.toml"
        data = copy.deepcopy(CLUSTER)
        where = draw(st.sampled_from(["top", "gpu", "tier"]))
        (data if where == "top" else data["gpu"] if where == "gpu" else data["tiers"][0])["name"] = \
            draw(st.sampled_from(NAMES))
        command = draw(st.sampled_from(["collective", "check", "simulate", "search"]))
        cluster.write_text(toml_text(data))
        if command == "collective":
            return ["collective", "--cluster", str(cluster), "--gpus", "16"] + json_flag
        args = [command, "--cluster", str(cluster), "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2",
                "--global-batch", "64"]
        return args + (["--workers", "0", "--out", "runs", "--pp", "2"] if command == "search" else []) + json_flag
    if kind == "budget":
        budget = draw(st.sampled_from(["99999999999999999999999999", "0", "-1", "1", "3", "20000", "1e9",
                                       str(2**63), str(2**31)]))
        sampler = draw(st.sampled_from(["tpe", "nsga2", "random", "auto", "exhaustive"]))
        return ["search", "--model", "gpt-1.7b", "--gpus", "8", "--workers", "0", "--top", "2", "--tp", "2",
                "--cp", "1", "--zero", "1", "--recompute", "none", "--budget", budget, "--sampler", sampler,
                "--out", "runs"] + json_flag
    if kind == "storage":
        url = draw(st.sampled_from(["sqlite:///s.db", "sqlite:///nowhere/x/s.db", "bogus://x", "[/]", "",
                                    "sqlite:///[/].db", "postgresql://u:p@127.0.0.1:1/db"]))
        return base + ["--storage", url, "--out", "runs", "--sampler", "random", "--budget", "3"] + json_flag
    if kind == "ray":
        address = draw(st.sampled_from(["127.0.0.1:1", "ray://127.0.0.1:1", "[/]:1", "localhost:notaport",
                                        "10.255.255.1:6379"]))
        return base + ["--ray-address", address, "--out", "runs"] + json_flag
    command = draw(st.sampled_from(["show", "report", "export", "search --resume"]))
    name = draw(st.sampled_from(NAMES))
    return command.split() + [name] + (["--workers", "0"] if command.startswith("search") else [])


@settings(max_examples=examples(5), **SETTINGS)
@given(named_input())
def test_names_and_flags(args):
    if not args:
        return
    check(f"names and flags: {args[0]}", args, run(args, scratch()))


# ------------------------------------------------------------------------------------------------ one test per class
# The classes an independent fuzzer found (issue 26), each pinned by one input; every one runs forked and bounded.

def _clean(args: list[str], cwd: Path | None = None, codes: tuple = (2,)) -> Outcome:
    o = run(args, cwd or scratch())
    assert not problems(o) and o.code in codes, f"{args}: {problems(o)} {o.code}\n{o.stderr}\n{o.traceback}"
    return o


def _copy(name: str = "transformer") -> Path:
    folder = scratch() / "run"
    shutil.copytree(template(name), folder, symlinks=True)
    return folder


def _edit_record(folder: Path, edit) -> None:
    path = folder / "evaluations.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    edit(records)
    path.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in records))


@pytest.mark.parametrize("field, value", [("step_time", NAN), ("step_time", INF), ("step_time", -INF),
                                          ("step_time", -1.0), ("step_time", 0.0), ("tokens_per_s", INF),
                                          ("tokens_per_s", NAN), ("peak_memory", -1.0), ("mfu", -INF)])
def test_a_recorded_figure_that_is_not_finite_or_is_negative_is_refused(field, value):
    """Not ranked first (a negative step time), no OverflowError (an infinite throughput): the folder is refused,
    in one line naming the record and the field."""
    folder = _copy()
    best = min(range(len(_lines_of(folder))), key=lambda i: json.loads(_lines_of(folder)[i])["metrics"]["step_time"]
               if json.loads(_lines_of(folder)[i])["metrics"] else INF)

    _edit_record(folder, lambda records: records[best]["metrics"].update({field: value}))
    for command in (["show"], ["show", "--json"], ["export"], ["report"], ["search", "--workers", "0", "--resume"]):
        o = _clean([*command, str(folder)])
        assert f"line {best + 1}" in o.stderr and f"metrics.{field}" in o.stderr, o.stderr


def _lines_of(folder: Path) -> list[str]:
    return (folder / "evaluations.jsonl").read_text().splitlines()


@pytest.mark.parametrize("field, value, needle", [
    ("top", 0, "top must be an integer in [1,"), ("budget", -1, "budget"), ("gpus", 0, "gpus"),
    ("sampler", "bayes", "sampler must be one of"), ("space", {"tp": [0]}, "axis tp"),
    ("seed", 1.5, "seed must be an integer")])
def test_inputs_json_fields_out_of_range_are_refused(field, value, needle):
    folder = _copy()
    inputs = json.loads((folder / "inputs.json").read_text())
    inputs[field] = value
    (folder / "inputs.json").write_text(json.dumps(inputs))
    for command in (["show"], ["export"], ["search", "--workers", "0", "--resume"]):
        o = _clean([*command, str(folder)])
        assert "inputs.json" in o.stderr and needle in o.stderr, o.stderr


def test_a_recorded_plan_outside_the_space_is_refused():
    folder = _copy()
    _edit_record(folder, lambda records: records[0]["strategy"].update(tp=3))
    o = _clean(["search", "--resume", str(folder), "--workers", "0"])
    assert "line 1" in o.stderr and "strategy.tp 3 is not in the run's space" in o.stderr, o.stderr


@pytest.mark.parametrize("where, key, value, needle", [
    ("gpu", "sm_count", 0, "sm_count in [gpu] must be a positive integer"),
    ("cluster", "tiers", [], "tiers must be one or more"),
    ("gpu", "peak_flops", NAN, "peak_tflops in [gpu]"),
    ("model", "family", "cnn", "needs its CNNSpec"),
    ("model", "layers", -4, "layers must be a positive integer")])
def test_specs_json_passes_the_checks_of_user_files(where, key, value, needle):
    folder = _copy()
    specs = json.loads((folder / "specs.json").read_text())
    (specs["cluster"]["gpu"] if where == "gpu" else specs[where])[key] = value
    (folder / "specs.json").write_text(json.dumps(specs, allow_nan=True))
    for command in (["show"], ["report"], ["export"], ["search", "--workers", "0", "--resume"]):
        o = _clean([*command, str(folder)])
        assert "specs.json" in o.stderr and needle in o.stderr, o.stderr


def test_a_cnn_run_without_layers_is_refused():
    folder = _copy("cnn")
    specs = json.loads((folder / "specs.json").read_text())
    specs["model"]["structure"]["layers"] = []
    (folder / "specs.json").write_text(json.dumps(specs))
    o = _clean(["report", str(folder)])
    assert "has no layers" in o.stderr


def test_a_run_folder_that_is_a_link_loop_is_one_line():
    where = scratch()
    (where / "a").symlink_to(where / "b")
    (where / "b").symlink_to(where / "a")
    for command in (["show"], ["export"], ["report"], ["search", "--resume"]):
        o = _clean([*command, str(where / "a")])
        assert "symbolic link loop" in o.stderr, o.stderr


def test_show_and_export_never_write_a_torn_record():
    folder = _copy()
    data = (folder / "evaluations.jsonl").read_bytes()
    (folder / "evaluations.jsonl").write_bytes(data[:-40])
    before = _digest(folder)
    for command in (["show"], ["show", "--json"], ["export"]):
        _clean([*command, str(folder)], codes=(0, 2))
    assert _digest(folder) == before
    os.chmod(folder / "evaluations.jsonl", 0o444)          # read-only media: nothing to write, nothing fails
    _clean(["show", str(folder)], codes=(0,))


@pytest.mark.parametrize("name", ["lock", "evaluations.jsonl", "study.journal"])
def test_a_resume_never_writes_through_a_link(name):
    folder = _copy()
    victim = folder.parent / "victim"
    shutil.copy(folder / name, victim) if (folder / name).is_file() else victim.write_text("someone's\n")
    (folder / name).unlink(missing_ok=True)        # an exhaustive run keeps no study.journal: one planted
    (folder / name).symlink_to(victim)
    before = victim.read_bytes()
    o = _clean(["search", "--resume", str(folder), "--workers", "0"])
    assert "link" in o.stderr and victim.read_bytes() == before, o.stderr


SPECIAL = ["/dev/zero", "fifo", "folder", "loop", "huge"]


def _special(kind: str, suffix: str) -> str:
    if kind.startswith("/"):
        return kind
    where = scratch()
    path = where / f"f{suffix}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path)
    else:
        with path.open("wb") as f:
            f.truncate(3 * 2**30)
    return str(path)


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("flag, suffix, command", [
    ("--model", ".toml", ["check", "--gpus", "8"]), ("--model", ".json", ["check", "--gpus", "8"]),
    ("--cluster", ".toml", ["check", "--gpus", "8"]), ("--cluster", ".toml", ["collective", "--gpus", "8"]),
    ("--space", ".toml", ["space", "--gpus", "8"]), (None, ".yaml", ["validate"])])
def test_special_files_are_refused_at_once(kind, flag, suffix, command):
    path = _special(kind, suffix)
    o = _clean([*command, *([flag, path] if flag else [path])])
    assert o.seconds < 20 and any(why in o.stderr for why in (
        "not a regular file", "is a folder", "is a directory", "link loop", "more than the", "unknown", "not found",
        "does not exist")), o.stderr


@pytest.mark.parametrize("kind, suffix, flag", [("toml", ".toml", "--model"), ("json", ".json", "--model"),
                                                ("toml", ".toml", "--cluster"), ("toml", ".toml", "--space"),
                                                ("yaml", ".yaml", None)])
def test_deep_nesting_is_one_line(kind, suffix, flag):
    for depth in (100, 100_000):
        path = scratch() / f"deep{suffix}"
        path.write_text(nested(depth, kind))
        command = ["validate", str(path)] if flag is None else ["space" if flag == "--space" else "check", flag,
                                                                 str(path), "--gpus", "8"]
        o = _clean(command)
        assert "nests deeper than" in o.stderr or "not valid" in o.stderr, o.stderr


def test_a_billion_laughs_is_refused_in_a_short_line():
    path = scratch() / "laughs.yaml"
    path.write_text(laughs(9))
    o = _clean(["validate", str(path)])
    assert "YAML aliases" in o.stderr and len(o.stderr) < 400, o.stderr
