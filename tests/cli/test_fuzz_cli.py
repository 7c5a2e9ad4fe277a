"""Fuzzing the command line: random and malformed flag values and spec files never give a traceback.

Every input is built from parts that are either well formed or certainly malformed (a non-positive or
non-integer size, an unknown name, a missing or unknown key, a value of the wrong type, text that is not TOML).
Certainly malformed input must exit with code 2 and one ``autoplan: error:`` line (or click's usage error);
well-formed input exits 0 or 1, or 2 when the plan or space it describes has no valid plan, never with a
traceback. Further classes are malformed by construction: names and paths no file system takes (over 255 bytes,
empty, a NUL byte) for every path flag, cluster numbers outside their plausible range (1e-300 TFLOP/s, zero or
infinite bandwidths, NaN latencies, efficiencies above 1), damaged validation files (binary, not YAML, a missing
or wrongly typed key), and spaces without a valid plan. The plans span every family (dense, MoE, CNN, DLRM, a
HuggingFace config.json) and the newer knobs and clusters (FP8, zero-bubble schedules, ZeRO-2, EP, NVL72); searches
also vary --cost, --prefilter and --symbolic-weights and resume from inputs.json alone; ``collective`` gets its own
flags. Examples are derandomized (the same inputs every run). ``FUZZED`` counts the inputs each test fed and
``MALFORMED`` those certainly malformed (``-s`` prints them: about 1,600 inputs, 1,100 of them malformed).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from autoplan.cli import main
from autoplan.search.space import AXES
from autoplan.families.strategy import knob_of
from autoplan.families.catalog import aliases, list_models
from autoplan.specs.cluster import OPTIONAL, RANGES, list_clusters, specs_dir
from autoplan.specs.model import MAX_SIZE

FUZZED: Counter = Counter()
MALFORMED: Counter = Counter()
SETTINGS = dict(deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
KNOWN_NAMES = {m.name for m in list_models()} | set(aliases()) | set(list_clusters())
HF_CONFIG = str(Path(__file__).parents[1] / "families" / "transformer" / "hf_configs" / "llama-3.1-8b.json")
"""A HuggingFace config.json model (``--model path/config.json``)."""
TINY_MODEL = {"layers": 4, "hidden": 256, "heads": 8, "ffn_hidden": 1024, "vocab": 1000, "seq_len": 256}
_SHM = Path("/dev/shm")
WORK = Path(tempfile.mkdtemp(prefix="autoplan-fuzz-", dir=_SHM if _SHM.is_dir() and os.access(_SHM, os.W_OK) else None))
"""In memory where there is a tmpfs: the searches' journal files fsync every trial."""


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    print("\nfuzzed inputs:", ", ".join(f"{k}: {n}" for k, n in sorted(FUZZED.items())),
          f"(total {sum(FUZZED.values())}, of them certainly malformed {sum(MALFORMED.values())}: "
          + ", ".join(f"{k} {n}" for k, n in sorted(MALFORMED.items())) + "; tracebacks 0)")
    shutil.rmtree(WORK, ignore_errors=True)


def tally(kind: str, r, malformed: bool) -> None:
    """Count one fuzzed input (after ``assert_clean`` passed: no traceback)."""
    FUZZED[f"{kind}, exit {r.exit_code}"] += 1
    MALFORMED[kind] += malformed


def invoke(args: list[str]):
    return CliRunner().invoke(main, args)


def assert_clean(r, args: list[str], *, codes: set[int]) -> None:
    """No traceback, an exit code in ``codes``, and a failure says why in one line."""
    where = f"autoplan {' '.join(map(repr, args))}\n{r.output}"
    assert r.exception is None or isinstance(r.exception, SystemExit), where + f"\n{r.exc_info!r}"
    assert "Traceback" not in r.output, where
    assert r.exit_code in codes, where
    if r.exit_code == 2:
        errors = [line for line in r.output.splitlines() if line.startswith(("autoplan: error:", "Error:"))]
        assert len(errors) == 1, where


# ------------------------------------------------------------------------------------------------ flag values

def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


@st.composite
def count_value(draw: st.DrawFn, good: list[int], bad: bool = False) -> tuple[str, bool]:
    """A value for a count flag (malformed if ``bad``), and whether it is certainly malformed."""
    if not bad:
        return str(draw(st.sampled_from(good))), False
    kind = draw(st.sampled_from(["nonpositive", "huge", "text", "float"]))
    if kind == "nonpositive":
        return str(draw(st.integers(-10**6, 0))), True
    if kind == "huge":
        return str(draw(st.integers(MAX_SIZE + 1, 10**40))), True
    if kind == "float":
        return draw(st.sampled_from(["1.5", "2e3", "8.0", "nan", "inf", "-0.5"])), True
    text = draw(st.text(max_size=8))
    n = _int_or_none(text)                     # int() takes " 8", "1_6" and "８": then it is no longer malformed
    return text, n is None or not 0 < n <= MAX_SIZE


@st.composite
def name_value(draw: st.DrawFn, good: list[str], bad: bool = False) -> tuple[str, bool]:
    if not bad:
        return draw(st.sampled_from(good)), False
    text = draw(st.one_of(st.text(max_size=12), st.sampled_from(["gpt5", "gpt-3", "llama", "dgx-a1000", "h100",
                                                                 "x.toml", "/nonexistent", ""])))
    return text, text not in KNOWN_NAMES


PLAN_COUNTS = (("--tp", [1, 2, 4, 8]), ("--pp", [1, 2, 4]), ("--cp", [1, 2]), ("--micro-batch", [1, 2, 4]),
               ("--global-batch", [16, 64, 256]), ("--virtual-stages", [1, 2, 3]), ("--dp", [1, 2, 8]),
               ("--ep", [1, 2, 8]), ("--etp", [1, 2]), ("--spatial", [1, 2]), ("--channel", [1, 2]),
               ("--filter", [1, 2]))
PLAN_CHOICES = (("--schedule", ["gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "dualpipev"], ["zigzag", "zb"]),
                ("--recompute", ["none", "selective", "full", "modules"], ["some", "FULL"]),
                ("--zero", ["0", "1", "2", "3"], ["4", "-1", "z"]),
                ("--precision", ["bf16", "fp8", "fp8-current", "fp8-blockwise", "mxfp8"], ["fp4", "FP8", ""]),
                ("--cp-comm", ["p2p", "a2a", "a2a+p2p"], ["ring", "all_gather"]),
                ("--sharding", ["auto", "table_wise", "row_wise", "data_parallel"], ["bogus", "rowwise"]))
PLAN_MODELS = ["gpt-1.7b", "gpt-7.5b", "llama3-8b", "gpt3", "mixtral-8x7b", "deepseek-v3", "resnet50", "dlrm-criteo",
               HF_CONFIG]
PLAN_CLUSTERS = ["dgx-a100-80g", "dgx-h100-80g", "dgx-b200", "gb200-nvl72", "gb300-nvl72"]
PLAN_SWITCHES = ["--sequence-parallel", "--no-overlap-grad-reduce", "--json", "--fp8-param-gather", "--tp-comm-overlap",
                 "--ep-overlap"]


@st.composite
def plan_flags(draw: st.DrawFn) -> tuple[list[str], bool, bool]:
    """Flags of check/simulate, whether one is certainly malformed, and whether dp = gpus/(tp·pp·cp) is whole.

    Half the cases are well formed; the others spoil one part (a name, a count or a choice)."""
    counts = [(f, g) for f, g in PLAN_COUNTS if draw(st.booleans())]
    choices = [c for c in PLAN_CHOICES if draw(st.booleans())]
    spoil = draw(st.one_of(st.none(), st.integers(0, 2 + len(counts) + len(choices))))
    model, bad_m = draw(name_value(PLAN_MODELS, bad=spoil == 0))
    cluster, bad_c = draw(name_value(PLAN_CLUSTERS, bad=spoil == 1))
    gpus, bad_g = draw(count_value([8, 16, 64], bad=spoil == 2))
    if not bad_g and draw(st.integers(0, 9)) == 0:
        gpus, bad_g = str(8 * int(gpus) + 2), True                 # not whole nodes (of 4 or 8 GPUs)
    args, bad = ["--model", model, "--cluster", cluster, "--gpus", gpus], bad_m or bad_c or bad_g
    sizes = {}
    for i, (flag, good) in enumerate(counts):
        value, b = draw(count_value(good, bad=spoil == 3 + i))
        args += [flag, value]
        bad |= b
        sizes[flag] = value
    for i, (flag, good, wrong) in enumerate(choices):
        spoilt = spoil == 3 + len(counts) + i
        args += [flag, draw(st.sampled_from(wrong if spoilt else good))]
        bad |= spoilt
    args += draw(st.lists(st.sampled_from(PLAN_SWITCHES), max_size=2, unique=True))
    degrees = [_int_or_none(sizes.get(f, "1")) or 1 for f in ("--tp", "--pp", "--cp", "--spatial", "--channel",
                                                                "--filter")]
    whole = "--dp" not in sizes and not bad and int(gpus) % math.prod(degrees) == 0
    return args, bad, whole


@st.composite
def coherent_plan(draw: st.DrawFn) -> tuple[list[str], bool, bool]:
    """Well-formed flags of a plan that is valid more often than not (so the simulator itself runs)."""
    gpus = draw(st.sampled_from([8, 16, 64]))
    tp, pp, cp = draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2]))
    dp = max(1, gpus // (tp * pp * cp))
    mb = draw(st.sampled_from([1, 2]))
    v = draw(st.sampled_from([1, 1, 2, 3])) if pp > 1 else 1
    batch = dp * mb * pp * draw(st.integers(1, 8))
    args = ["--model", draw(st.sampled_from(["gpt-1.7b", "llama3-8b", "gpt3"])), "--gpus", str(gpus), "--tp", str(tp),
            "--pp", str(pp), "--cp", str(cp), "--micro-batch", str(mb), "--global-batch", str(batch),
            "--virtual-stages", str(v), "--recompute", draw(st.sampled_from(["none", "selective", "full"])),
            "--zero", draw(st.sampled_from(["0", "1"])), "--json"]
    return args + (["--sequence-parallel"] if tp > 1 and draw(st.booleans()) else []), False, gpus % (tp * pp * cp) == 0


@st.composite
def coherent_new_plan(draw: st.DrawFn) -> tuple[list[str], bool, bool]:
    """Well-formed flags of a plan of the newer families and knobs: MoE (ep, etp, ep-overlap, recompute modules),
    CNN (spatial, channel, filter), DLRM (sharding), a config.json model, FP8, zero-bubble schedules, ZeRO-2 with
    pp > 1, TP overlap, the CP exchange and the NVL72 and B200 clusters."""
    family = draw(st.sampled_from(["dense", "moe", "cnn", "dlrm"]))
    cluster = draw(st.sampled_from(["dgx-h100-80g", "dgx-b200", "gb200-nvl72"]))
    gpus = draw(st.sampled_from([8, 16, 64]))
    args = ["--cluster", cluster, "--gpus", str(gpus), "--json"]
    if family == "dlrm":
        return args + ["--model", "dlrm-criteo", "--sharding", draw(st.sampled_from(
            ["auto", "table_wise", "row_wise", "column_wise", "table_row_wise", "data_parallel"]))], False, True
    if family == "cnn":
        split = draw(st.sampled_from(["--spatial", "--channel", "--filter"]))
        degree, pp = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2]))
        return args + ["--model", draw(st.sampled_from(["resnet50", "vgg16"])), split, str(degree), "--pp", str(pp),
                       "--schedule", draw(st.sampled_from(["gpipe", "1f1b"]))], False, gpus % (degree * pp) == 0
    tp, pp = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 4]))
    dp = max(1, gpus // (tp * pp))
    args += ["--tp", str(tp), "--pp", str(pp), "--global-batch", str(dp * pp * draw(st.integers(1, 4))),
             "--precision", draw(st.sampled_from(["bf16", "fp8", "fp8-current", "fp8-blockwise", "mxfp8"]))]
    if pp > 1:
        schedule = draw(st.sampled_from(["1f1b", "zb-h1", "zbv", "dualpipev"]))
        args += ["--schedule", schedule, "--zero", draw(st.sampled_from(["0", "1", "2"]))]
        args += ["--virtual-stages", "2"] if schedule in ("zbv", "dualpipev") else []
    if tp > 1:
        args += ["--sequence-parallel"] + (["--tp-comm-overlap"] if draw(st.booleans()) else [])
    if family == "moe":
        args += ["--model", "mixtral-8x7b", "--ep", str(draw(st.sampled_from([1, 2, 4, 8]))),
                 "--recompute", draw(st.sampled_from(["none", "modules"]))]
        args += ["--ep-overlap"] if draw(st.booleans()) else []
    else:
        args += ["--model", draw(st.sampled_from(["gpt-1.7b", HF_CONFIG]))]
        cp = 2 if dp % 2 == 0 and draw(st.booleans()) else 1
        args += ["--cp", str(cp), "--cp-comm", draw(st.sampled_from(["p2p", "a2a", "a2a+p2p"]))]
        tp *= cp                                                  # (for the divisibility below)
    args += ["--fp8-param-gather"] if "bf16" not in args and draw(st.booleans()) else []
    return args, False, gpus % (tp * pp) == 0


@settings(max_examples=150, **SETTINGS)
@given(st.one_of(plan_flags(), coherent_plan(), coherent_new_plan()))
def test_check_flags(case):
    args, bad, whole = case
    args = ["check", *args]
    r = invoke(args)
    tally("check flags", r, bad)
    assert_clean(r, args, codes={2} if bad else ({0, 1} if whole else {0, 1, 2}))


@settings(max_examples=80, **SETTINGS)
@given(st.one_of(plan_flags(), coherent_plan(), coherent_new_plan()), st.sampled_from(["", "", "", "ok", "no folder", "a folder"]))
def test_simulate_flags(case, trace):
    args, bad, _ = case
    args = ["simulate", *args]
    if trace:
        path = {"ok": WORK / "trace.json", "no folder": WORK / "nowhere" / "t.json", "a folder": WORK}[trace]
        args += ["--trace", str(path)]
        bad |= trace != "ok"
    r = invoke(args)
    tally("simulate flags", r, bad)
    assert_clean(r, args, codes={2} if bad else {0, 2})


SEARCH_COUNTS = (("--tp", [1, 2, 8]), ("--pp", [1, 2]), ("--micro-batch", [1, 4]), ("--global-batch", [32, 64]),
                 ("--top", [1, 3]), ("--budget", [5, 50]), ("--seed", [0, 7, -3, 2**40]))


@settings(max_examples=40, **SETTINGS)
@given(st.data())
def test_search_flags(data):
    counts = [(f, g) for f, g in SEARCH_COUNTS if f in ("--tp", "--pp", "--global-batch") or data.draw(st.booleans())]
    spoil = data.draw(st.one_of(st.none(), st.integers(0, 1 + len(counts))))
    model, bad = data.draw(name_value(["gpt-1.7b", "llama3-8b", HF_CONFIG], bad=spoil == 0))
    gpus, b = data.draw(count_value([8, 16], bad=spoil == 1))
    bad |= b
    args = ["search", "--model", model, "--gpus", gpus, "--workers", "0", "--out", str(WORK / "search"), "--json",
            "--recompute", "none", "--zero", "1", "--cp", "1"]
    for i, (flag, good) in enumerate(counts):
        value, b = data.draw(count_value(good, bad=spoil == 2 + i))
        n = _int_or_none(value)
        if flag == "--seed":
            b = n is None                                     # any integer seeds a sampler
        elif flag == "--budget":
            b = n is None or n < 1                            # no upper limit
        elif flag == "--top":
            b = n is None or not 1 <= n <= 1000
        args += [flag, value]
        bad |= b
    args += ["--sampler", data.draw(st.sampled_from(["exhaustive", "random", "tpe", "auto"]))]
    r = invoke(args)
    tally("search flags", r, bad)
    assert_clean(r, args, codes={2} if bad else {0, 1, 2})


SEARCH_MODELS = {"gpt-1.7b": ["--tp", "2", "--pp", "2", "--recompute", "none", "--zero", "1", "--global-batch", "32"],
                 HF_CONFIG: ["--tp", "2", "--pp", "2", "--recompute", "none", "--zero", "1", "--global-batch", "32"],
                 "resnet50": ["--global-batch", "64"], "dlrm-criteo": []}


@settings(max_examples=16, **SETTINGS)
@given(st.data())
def test_search_cost_options_and_resume(data):
    """--cost, --prefilter and --symbolic-weights over the families; a search that ran resumes from its
    inputs.json alone to the same leaderboard."""
    model = data.draw(st.sampled_from(sorted(SEARCH_MODELS)))
    cost = data.draw(st.sampled_from(["sim", "symbolic"]))
    prefilter = data.draw(st.sampled_from([None, None, "10", "100", "0", "nan", "-5", "x"]))
    weights = data.draw(st.sampled_from(["balance", "shape", "launch", "hardware"]))
    args = ["search", "--model", model, "--gpus", "8", *SEARCH_MODELS[model], "--cost", cost, "--symbolic-weights",
            weights, "--sampler", data.draw(st.sampled_from(["exhaustive", "random"])), "--budget", "8", "--top", "3",
            "--workers", "0", "--out", str(WORK / "costs"), "--json"] + (["--prefilter", prefilter] if prefilter else [])
    bad = weights == "hardware" or prefilter in ("0", "nan", "-5", "x") or (prefilter is not None and cost == "symbolic")
    r = invoke(args)
    tally("search cost options", r, bad)
    assert_clean(r, args, codes={2} if bad else {0, 1})
    if r.exit_code == 0:
        run = Path(json.loads(r.output)["run"])
        alone = Path(tempfile.mkdtemp(dir=WORK))
        shutil.copy(run / "inputs.json", alone / "inputs.json")
        again = invoke(["search", "--resume", str(alone), "--json"])
        assert_clean(again, ["--resume", str(alone)], codes={0})
        assert json.loads(again.output)["leaderboard"] == json.loads(r.output)["leaderboard"]


@st.composite
def collective_flags(draw: st.DrawFn) -> tuple[list[str], bool | None]:
    """Flags of ``autoplan collective`` and whether they are valid (True), certainly malformed (False) or unknown
    (None: a group size that may not tile the cluster's dimensions). Half the cases spoil one part."""
    spoil = draw(st.one_of(st.none(), st.sampled_from(["network", "gpus", "bytes", "chunks"])))
    args: list[str] = []
    valid: bool | None = True
    if draw(st.booleans()):
        parts = draw(st.lists(st.tuples(st.sampled_from(["ring", "switch", "fully_connected"]),
                                        st.sampled_from([2, 4, 8]), st.sampled_from(["200", "50", "25:1.5"])),
                              min_size=1, max_size=3))
        if spoil == "network":
            at = draw(st.integers(0, len(parts) - 1))
            parts[at] = draw(st.sampled_from([("torus", 4, "200"), ("ring", 1, "200"), ("ring", 4, "0"),
                                              ("ring", 4, "nan"), ("switch", 0, "50"), ("ring", 4, "200:-1")]))
        args += ["--network", ",".join(":".join(map(str, p)) for p in parts)]
        if spoil == "gpus":
            args += ["--gpus", str(math.prod(n for _, n, _ in parts) + 1)]
        elif draw(st.booleans()):
            args += ["--gpus", str(math.prod(n for _, n, _ in parts))]
        valid = spoil not in ("network", "gpus")
    else:
        gpus, bad = draw(count_value([2, 8, 16, 72, 144], bad=spoil == "gpus"))
        args += ["--cluster", draw(st.sampled_from(["dgx-h100-80g", "gb200-nvl72", "dgx-b200"])), "--gpus", gpus]
        valid = False if spoil == "gpus" and (bad or _int_or_none(gpus) == 1) else None
    size = draw(st.sampled_from(["0", "nan", "-1GiB", "1e400", "5 parsecs"] if spoil == "bytes" else
                                ["1GiB", "64MiB", "1e9"]))
    chunks = draw(st.sampled_from(["0", "-3", "99999999"] if spoil == "chunks" else ["1", "64"]))
    valid = False if spoil in ("bytes", "chunks") else valid
    return args + ["--bytes", size, "--chunks", chunks, "--op", draw(st.sampled_from(
        ["all_reduce", "reduce_scatter", "all_gather"])), "--policy", draw(st.sampled_from(["baseline", "themis"])),
        "--json"], valid


@settings(max_examples=60, **SETTINGS)
@given(collective_flags())
def test_collective_flags(case):
    args, valid = case
    args = ["collective", *args]
    r = invoke(args)
    tally("collective flags", r, valid is False)
    assert_clean(r, args, codes=_codes(valid, {0}))


# ------------------------------------------------------------------------------------------------ spec files

def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)                                    # a TOML basic string
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def toml_text(data: dict) -> str:
    """Top-level keys, then [tables], then [[arrays of tables]]."""
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in data.items()
             if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))]
    for k, v in data.items():
        if isinstance(v, dict):
            lines += [f"[{json.dumps(k)}]"] + [f"{json.dumps(a)} = {toml_value(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for table in v:
                lines += [f"[[{json.dumps(k)}]]"] + [f"{json.dumps(a)} = {toml_value(b)}" for a, b in table.items()]
    return "\n".join(lines) + "\n"


WRONG_TYPES = st.one_of(st.text(max_size=6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                        st.lists(st.integers(-3, 3), max_size=2), st.just({"a": 1}))
NON_POSITIVE = st.one_of(st.integers(-10**18, 0), st.floats(max_value=0.0), st.just(float("nan")))


@st.composite
def text_damage(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """Text cut short or with bytes inserted (valid or not: unknown), or random text."""
    kind = draw(st.sampled_from(["cut", "insert", "random"]))
    if kind == "random":
        return draw(st.text(max_size=60)), kind
    at = draw(st.integers(0, len(text)))
    if kind == "cut":
        return text[:at], kind
    return text[:at] + draw(st.text(min_size=1, max_size=5)) + text[at:], kind


@st.composite
def model_file(draw: st.DrawFn) -> tuple[str, bool | None]:
    """A model TOML and whether it is valid (True), certainly malformed (False) or unknown (None)."""
    data: dict = dict(TINY_MODEL)
    valid: bool | None = True
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        op = draw(st.sampled_from(["drop", "unknown", "nonpositive", "wrong type", "choice", "fine", "table"]))
        key = draw(st.sampled_from(sorted(TINY_MODEL)))
        if op == "drop":
            data.pop(key, None)
            valid = False
        elif op == "unknown":
            data[draw(st.sampled_from(["width", "layer", "Layers", "moe", ""]))] = 1
            valid = False
        elif op == "nonpositive":
            data[key] = draw(st.one_of(NON_POSITIVE, st.integers(MAX_SIZE + 1, 2**63 - 1)))
            valid = False
        elif op == "wrong type":
            data[key] = draw(WRONG_TYPES)
            valid = False
        elif op == "choice":
            name = draw(st.sampled_from(["activation", "position", "norm", "bias", "dropout", "kv_heads", "head_dim"]))
            data[name] = draw(st.one_of(st.text(max_size=6), st.integers(-5, 5), st.booleans()))
            valid = valid and None
        elif op == "fine" and valid is not False:             # (not over a spoilt key)
            data[key] = draw(st.sampled_from([1, 2, 8, 16])) * (8 if key in ("hidden", "ffn_hidden") else 1)
            valid = valid and None
        elif op == "table":
            data["[model]"] = True
    text = toml_text({"model": data} if data.pop("[model]", False) else data)
    if draw(st.integers(0, 4)) == 0:
        text, _ = draw(text_damage(text))
        valid = None
    return text, valid


def _builtin_cluster() -> dict:
    return tomllib.loads((specs_dir() / "dgx-a100-80g.toml").read_text())


@st.composite
def cluster_file(draw: st.DrawFn) -> tuple[str, bool | None]:
    data = _builtin_cluster()
    valid: bool | None = True
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        where = draw(st.sampled_from(["top", "gpu", "tier"]))
        tiers = data.get("tiers")
        first_tier = tiers[0] if isinstance(tiers, list) and tiers else None
        table = {"top": data, "gpu": data.get("gpu"), "tier": first_tier}[where]
        if not isinstance(table, dict):
            continue
        keys = sorted(k for k, v in table.items()
                      if (not isinstance(v, (dict, list)) or k == "gemm_tile") and k != "bandwith_gb_per_s")
        op = draw(st.sampled_from(["drop", "unknown", "nonpositive", "wrong type", "tiers", "fine", "fine"]))
        key = draw(st.sampled_from(keys))
        required = key not in OPTIONAL[where]                # the parser's own table of optional keys
        if op == "drop":
            del table[key]
            valid = False if required else valid and None     # a default replaces it: another plausible cluster
        elif op == "unknown":
            table["bandwith_gb_per_s"] = 1
            valid = False
        elif op == "nonpositive":
            table[key] = draw(NON_POSITIVE)
            valid = valid and None                # some keys (latency, overhead) may be 0
        elif op == "wrong type":
            table[key] = draw(WRONG_TYPES)
            valid = valid and None
        elif op == "tiers":
            data["tiers"] = draw(st.sampled_from([[], 3, "nvlink", [1, 2]]))
            valid = False
        elif isinstance(table.get(key), (int, float)) and not isinstance(table.get(key), bool):
            table[key] = table[key] * draw(st.sampled_from([0.5, 0.9, 1]))      # another plausible cluster
            valid = valid and None
    text = toml_text(data)
    if draw(st.integers(0, 4)) == 0:
        text, _ = draw(text_damage(text))
        valid = None
    return text, valid


@st.composite
def space_file(draw: st.DrawFn) -> tuple[str, bool | None]:
    good = {"tp": [1, 2, 4], "pp": [1, 2], "cp": [1, 2], "micro_batch": [1, 2, 4],
            "schedule": ["1f1b", "gpipe", "interleaved"],
            "virtual_stages": [1, 2], "sequence_parallel": [False, True], "recompute": ["none", "full"],
            "zero": [0, 1, 2], "overlap_grad_reduce": [True, False], "overlap_param_gather": [True]}
    def values(axis: str) -> list:                          # an axis added later: its choices
        return good.get(axis) or list(knob_of(axis).choices) or [1, 2]

    data: dict = {}
    valid: bool | None = True
    for axis in draw(st.lists(st.sampled_from(AXES), max_size=4, unique=True)):
        op = draw(st.sampled_from(["good", "good", "good", "scalar", "empty", "bad value"]))
        if op == "good":
            data[axis] = draw(st.lists(st.sampled_from(values(axis)), min_size=1, max_size=3))
        elif op == "scalar":
            data[axis] = values(axis)[0]
        elif op == "empty":
            data[axis] = []
            valid = False
        else:
            bad = {"schedule": "zigzag", "recompute": "some", "zero": 4, "sequence_parallel": 1,
                   "overlap_grad_reduce": "yes", "overlap_param_gather": 0}.get(axis)
            data[axis] = [draw(st.one_of(NON_POSITIVE, st.just(1.5), st.just("2"), st.just(True)))] if bad is None \
                else [bad]
            valid = False
    if draw(st.integers(0, 6)) == 0:
        data[draw(st.sampled_from(["warp", "tensor_parallel", "dp", "Tp"]))] = [1]
        valid = False
    text = toml_text(data)
    if draw(st.integers(0, 5)) == 0:
        text, _ = draw(text_damage(text))
        valid = None
    return text, valid


def _write(text: str, name: str) -> str:
    path = Path(tempfile.mkdtemp(dir=WORK)) / name
    path.write_text(text)
    return str(path)


def _codes(valid: bool | None, ok: set[int]) -> set[int]:
    return {2} if valid is False else (ok if valid else ok | {2})


@settings(max_examples=120, **SETTINGS)
@given(model_file(), st.sampled_from(["check", "simulate"]))
def test_model_files(case, command):
    text, valid = case
    args = [command, "--model", _write(text, "m.toml"), "--gpus", "8", "--tp", "2", "--pp", "2",
            "--global-batch", "16", "--json"]
    r = invoke(args)
    tally("model files", r, valid is False)
    assert_clean(r, args, codes=_codes(valid, {0, 1} if command == "check" else {0}))


@settings(max_examples=120, **SETTINGS)
@given(cluster_file(), st.sampled_from(["check", "simulate"]))
def test_cluster_files(case, command):
    text, valid = case
    args = [command, "--model", "gpt-1.7b", "--cluster", _write(text, "c.toml"), "--gpus", "16", "--tp", "2",
            "--pp", "2", "--global-batch", "64", "--json"]
    r = invoke(args)
    tally("cluster files", r, valid is False)
    assert_clean(r, args, codes=_codes(valid, {0, 1} if command == "check" else {0}))


@settings(max_examples=60, **SETTINGS)
@given(space_file())
def test_space_files(case):
    text, valid = case
    args = ["search", "--model", _write(toml_text(TINY_MODEL), "tiny.toml"), "--gpus", "8", "--global-batch", "32",
            "--space", _write(text, "s.toml"), "--workers", "0", "--sampler", "exhaustive", "--top", "3",
            "--out", str(WORK / "spaces"), "--json"]
    r = invoke(args)
    tally("space files", r, valid is False)
    assert_clean(r, args, codes=_codes(valid, {0, 1}) | ({2} if valid else set()))


# ------------------------------------------------------------------------------------------------ names and paths

NAME_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00")
PATH_FLAGS = (("check", "--model"), ("simulate", "--cluster"), ("simulate", "--trace"), ("space", "--space"),
              ("space", "--model"), ("search", "--space"), ("search", "--cluster"), ("search", "--out"),
              ("search", "--resume"), ("validate", None))


@st.composite
def unusable_path(draw: st.DrawFn) -> str:
    """A name no file system takes (a component over 255 bytes, anywhere in a path, or a NUL byte), or none."""
    kind = draw(st.sampled_from(["long", "long", "long in a path", "empty", "nul"]))
    if kind == "empty":
        return draw(st.sampled_from(["", " ", "\t"]))
    if kind == "nul":
        return draw(st.text(NAME_CHARS, max_size=8)) + "\0" + draw(st.sampled_from(["", ".toml", "/x"]))
    name = draw(st.text(NAME_CHARS, min_size=256, max_size=400))       # ≥ 1 byte a character
    if kind == "long in a path":
        return str(WORK / name / draw(st.sampled_from(["x.toml", "run", "t.json"])))
    return name + draw(st.sampled_from(["", ".toml", ".json", ".yaml"]))


@settings(max_examples=300, **SETTINGS)
@given(st.sampled_from(PATH_FLAGS), unusable_path())
def test_unusable_names_and_paths(where, value):
    command, flag = where
    args = [command] + ([flag, value] if flag else ["--", value])
    if command != "validate":
        args += ["--gpus", "8", "--model" if flag != "--model" else "--cluster",
                 "gpt-1.7b" if flag != "--model" else "dgx-a100-80g"]
    if command == "search":
        args += ["--workers", "0"] + (["--out", str(WORK / "unused")] if flag not in ("--out", "--resume") else [])
    r = invoke(args)
    tally("unusable names and paths", r, True)
    assert_clean(r, args, codes={2})
    assert any(why in r.output for why in ("too long", "empty", "NUL byte")), r.output


# ------------------------------------------------------------------------------------------------ absurd clusters

_GPU_RANGED = sorted(k for k in RANGES if k in _builtin_cluster()["gpu"] or k in OPTIONAL["gpu"])
_TIER_RANGED = sorted(k for k in RANGES if k not in _GPU_RANGED)
ABSURD = st.one_of(st.sampled_from([1e-300, 5e-324, 0, 0.0, -0.0, -1, -1e300, 1e300, math.inf, -math.inf, math.nan]),
                   st.floats(allow_nan=True, allow_infinity=True))


def _plausible(key: str, value: float) -> bool:
    low, high, zero_ok = RANGES[key]
    return math.isfinite(value) and (low <= value <= high or (zero_ok and value == 0))


@st.composite
def absurd_cluster(draw: st.DrawFn) -> tuple[str, str, float, bool]:
    """A built-in cluster with one number replaced: the file, the key, the value, and whether it is plausible."""
    data = _builtin_cluster()
    if draw(st.booleans()):
        key = draw(st.sampled_from(_GPU_RANGED))
        table = data["gpu"]
    else:
        key = draw(st.sampled_from(_TIER_RANGED))
        table = data["tiers"][draw(st.integers(0, len(data["tiers"]) - 1))]
    low, high, _ = RANGES[key]
    value = draw(st.one_of(ABSURD, st.sampled_from([low / 2, high * 2, low, high])))
    table[key] = value
    plausible = _plausible(key, value) and data["gpu"]["memory_reserve_gib"] < data["gpu"]["hbm_gib"]
    return toml_text(data), key, value, plausible


@settings(max_examples=400, **SETTINGS)
@given(absurd_cluster())
def test_absurd_cluster_numbers(case):
    text, key, value, plausible = case
    args = ["check", "--model", "gpt-1.7b", "--cluster", _write(text, "c.toml"), "--gpus", "16", "--tp", "2",
            "--global-batch", "64", "--json"]
    r = invoke(args)
    tally("absurd cluster numbers", r, not plausible)
    assert_clean(r, args, codes={0, 1} if plausible else {2})
    if not plausible:
        assert key in r.output and ("got" in r.output or "leaves nothing" in r.output), r.output


# ------------------------------------------------------------------------------------------------ validation files

TINY_CASE = {"id": "tiny-1", "group": "fuzz", "source": "a test",
             "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 8},
             "model": dict(TINY_MODEL, name="tiny"),
             "strategy": {"tp": 2, "pp": 1, "dp": 4, "cp": 1, "microbatch": 1, "global_batch": 8, "recompute": "none",
                          "sequence_parallel": False, "virtual_stages_per_rank": 1, "distributed_optimizer": False,
                          "overlap_grad_reduce": True},
             "measured": {"iteration_time_s": 0.05}}
REQUIRED_NUMBERS = [("hardware", "num_gpus"), ("strategy", "global_batch"), ("measured", "iteration_time_s")] + [
    ("model", k) for k in ("layers", "hidden", "heads", "ffn_hidden", "vocab", "seq_len")]
NOT_POSITIVE = st.one_of(st.integers(-10**6, 0), st.sampled_from(["8", "", None, True, [8], {"a": 1}, -0.5]))


@st.composite
def validation_file(draw: st.DrawFn) -> tuple[bytes, bool | None]:
    """A validation YAML (as bytes) and whether it is valid (True), certainly malformed (False) or unknown."""
    kind = draw(st.sampled_from(["binary", "not yaml", "no cases", "case", "case", "case", "case", "bandwidth"]))
    if kind == "binary":
        return b"\xff\xfe\x00" + draw(st.binary(max_size=40)), False
    if kind == "not yaml":
        return draw(st.sampled_from(["cases: [", "{{{", "cases:\n\t- x", "a: b: c", "- [1, 2\n"])).encode(), False
    if kind == "no cases":
        doc = draw(st.sampled_from([{}, {"cases": 3}, {"cases": "x"}, {"case": []}, [1, 2], "text", 7]))
        return json.dumps(doc).encode(), False
    case = json.loads(json.dumps(TINY_CASE))
    doc: dict = {"cases": [case]}
    valid: bool | None = True
    if kind == "bandwidth":
        doc["collective_bandwidth"] = [{"id": "b", "op": draw(st.sampled_from(["all_reduce", 3, None])),
                                        "hardware": draw(st.sampled_from(["8x A100", "H100 NDR", 5])),
                                        "scope": draw(st.sampled_from(["intra-node, 8 GPUs", "inter-node", 7])),
                                        "busbw_gbps": draw(st.sampled_from([230, "1-2", "a-b", None, -1]))}]
        valid = None
    op = draw(st.sampled_from(["number", "number", "table", "drop", "none"]))
    if op == "number":
        table, key = draw(st.sampled_from(REQUIRED_NUMBERS))
        case[table][key] = draw(NOT_POSITIVE)
        valid = False
    elif op == "table":
        case[draw(st.sampled_from(["hardware", "model", "strategy", "measured"]))] = draw(
            st.sampled_from([None, 3, "x", [1]]))
        valid = False
    elif op == "drop":
        table, key = draw(st.sampled_from(REQUIRED_NUMBERS))
        del case[table][key]
        valid = False
    return json.dumps(doc).encode(), valid                  # JSON is YAML


@settings(max_examples=220, **SETTINGS)
@given(validation_file())
def test_validation_files(case):
    data, valid = case
    path = Path(tempfile.mkdtemp(dir=WORK)) / "v.yaml"
    path.write_bytes(data)
    args = ["validate", str(path), "--json"]
    r = invoke(args)
    tally("validation files", r, valid is False)
    assert_clean(r, args, codes=_codes(valid, {0}))


# ------------------------------------------------------------------------------------------------ empty spaces

@st.composite
def empty_space(draw: st.DrawFn) -> tuple[list[str], str]:
    """search/space flags whose space holds no valid plan (a degree that does not divide 8 GPUs, or virtual stages
    without the interleaved schedule), and the phrase the error must contain."""
    args = ["--model", _write(toml_text(TINY_MODEL), "tiny.toml"), "--gpus", "8", "--global-batch", "32"]
    if draw(st.booleans()):
        args += [draw(st.sampled_from(["--tp", "--pp", "--cp"])), str(draw(st.sampled_from([3, 5, 6, 7, 12, 16])))]
        need = "smallest change"
    else:
        args += ["--schedule", draw(st.sampled_from(["1f1b", "gpipe"])), "--virtual-stages", str(draw(st.integers(2, 8)))]
        need = "needs the interleaved schedule"
    args += draw(st.lists(st.sampled_from(["--json", "--sequence-parallel", "--recompute=full", "--zero=1"]),
                          max_size=2, unique=True))
    return args, need


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(["search", "space"]), empty_space())
def test_spaces_without_a_valid_plan(command, case):
    args, need = case
    args = [command, *args] + (["--workers", "0", "--out", str(WORK / "empty")] if command == "search" else [])
    r = invoke(args)
    tally("spaces without a valid plan", r, True)
    assert_clean(r, args, codes={2})
    assert need in r.output, r.output
    assert not (WORK / "empty").exists()                     # no run folder for a search that cannot start


@pytest.mark.parametrize("command", ["search", "space"])
def test_json_exits_1_when_no_plan_fits(command, tmp_path):
    args = [command, "--model", "gpt3", "--gpus", "8", "--tp", "8", "--pp", "1", "--micro-batch", "1", "--json"]
    r = invoke(args + (["--workers", "0", "--out", str(tmp_path)] if command == "search" else []))
    assert r.exit_code == 1, r.output
    out = json.loads(r.output)
    assert (out["leaderboard"] == []) if command == "search" else (out["fit"] == 0 and out["valid"] > 0)


def test_check_names_the_usable_capacity():
    r = invoke(["check", "--model", "gpt3", "--gpus", "1024", "--tp", "8", "--pp", "8"])
    assert r.exit_code == 1 and "more than the 79.6 GiB usable of 80" in r.output, r.output
    r = invoke(["check", "--model", "gpt3", "--gpus", "1024", "--tp", "8", "--pp", "8", "--json"])
    assert json.loads(r.output)["capacity"] == "79.6 GiB usable of 80"
    r = invoke(["check", "--model", "gpt-1.7b", "--gpus", "8", "--cluster", "dgx-a100-80g"])
    assert r.exit_code == 0 and "fits in the 80.0 GiB usable of 80" in r.output, r.output


def test_a_space_without_valid_plans_names_reasons_and_the_smallest_fix(tmp_path):
    r = invoke(["search", "--model", "gpt3", "--gpus", "1024", "--tp", "5", "--out", str(tmp_path), "--workers", "0"])
    assert r.exit_code == 2 and "tp·pp·cp does not divide the GPU count 1024" in r.output
    assert "smallest change that admits plans: --tp 4" in r.output
    r = invoke(["search", "--model", "gpt3", "--gpus", "1024", "--global-batch", "1537", "--out", str(tmp_path),
                "--workers", "0"])
    assert r.exit_code == 2 and "global batch N is not divisible" in r.output and "--global-batch 1536" in r.output


@pytest.mark.parametrize("args, needle", [
    (["check", "--gpus", "1024", "--model", "gpt-3"], "did you mean gpt3"),
    (["check", "--gpus", "1024", "--cluster", "dgx-h10-80g"], "did you mean dgx-h100-80g"),
    (["check", "--gpus", "1020"], "use a multiple of 8 (e.g. 1016 or 1024)"),
    (["check", "--gpus", "99999999999"], "more than"),
    (["check", "--gpus", "8", "--global-batch", "0"], "positive integer"),
    (["check", "--gpus", "8", "--dp", "-8"], "positive integer"),
    (["search", "--gpus", "8", "--zero", "1", "--tp", "3000000000"], "larger than"),
    (["search", "--gpus", "8", "--prefilter", "nan"], "'nan' is not a number in the range 0<x<=100"),
])
def test_named_errors(args, needle):
    r = invoke(args)
    assert r.exit_code == 2 and needle in r.output, r.output


def test_malformed_files_name_the_file_line_and_key(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text("layers = 4\nhidden = 256\nheads = [8,\n")
    r = invoke(["check", "--model", str(f), "--gpus", "8"])
    assert r.exit_code == 2 and "m.toml" in r.output and "after line 3" in r.output
    f.write_text("layers = 4\nhidden = = 256\n")
    r = invoke(["check", "--model", str(f), "--gpus", "8"])
    assert r.exit_code == 2 and "m.toml" in r.output and "line 2, column 10" in r.output
    c = tmp_path / "c.toml"
    data = _builtin_cluster()
    del data["gpu"]["sm_count"]
    c.write_text(toml_text(data))
    r = invoke(["check", "--cluster", str(c), "--gpus", "8"])
    assert r.exit_code == 2 and "missing key 'sm_count' in [gpu]" in r.output and "c.toml" in r.output
    data = _builtin_cluster()
    data["tiers"][1]["efficiency"] = 1.5
    c.write_text(toml_text(data))
    r = invoke(["check", "--cluster", str(c), "--gpus", "8"])
    assert r.exit_code == 2 and "efficiency in [[tiers]] #2 must be a number in [0.01, 1], got 1.5" in r.output
    s = tmp_path / "s.toml"
    s.write_text('schedule = ["1f1b", "zigzag"]\n')
    r = invoke(["search", "--space", str(s), "--gpus", "8", "--model", "gpt-1.7b"])
    assert r.exit_code == 2 and "axis schedule: value 'zigzag' is not one of \"gpipe\", \"1f1b\", \"interleaved\"" \
        in r.output
    s.write_bytes(b"\xff\xfe tp = [1]")
    r = invoke(["search", "--space", str(s), "--gpus", "8", "--model", "gpt-1.7b"])
    assert r.exit_code == 2 and "not UTF-8" in r.output


# ------------------------------------------------------------------------------------------------ user strings
# Classes an independent fuzzer found (issue 26): names that reach rich's markup parser, odd folder names, samplers
# on small spaces and absurd budgets, shared --storage studies, odd model files and unreachable Ray addresses.
# Special files, deep nesting and damaged run folders: tests/cli/test_fuzz_inputs.py (forked, time-bounded).

MARKUP = ["[/]", "[bold red]x", "x[/x]", ":smile:", "[link=file:///etc]y", "[", "a]b"]


def _named_cluster(where: str, name: str) -> str:
    data = _builtin_cluster()
    {"cluster": data, "gpu": data["gpu"], "tier": data["tiers"][0]}[where]["name"] = name
    if where == "tier":
        data["tiers"][1]["name"] = name + "2"
    return _write(toml_text(data), "c.toml")


@settings(max_examples=20, **SETTINGS)
@given(st.sampled_from(MARKUP), st.sampled_from(["model", "cluster", "gpu", "tier"]),
       st.sampled_from(["check", "simulate", "collective", "space"]))
def test_markup_in_names_is_printed_as_text(name, where, command):
    where = "cluster" if command == "collective" and where == "model" else where
    args = [command, "--gpus", "16"]
    if where == "model":
        args += ["--model", _write(toml_text(TINY_MODEL | {"name": name}), "m.toml")]
    else:
        args += ["--cluster", _named_cluster(where, name)]
    if command != "collective":
        args += ["--tp", "2", "--global-batch", "64"] + (["--model", "gpt-1.7b"] if where != "model" else [])
    r = invoke(args)
    tally("markup in names", r, False)
    assert_clean(r, args, codes={0, 1})
    if where in ("model", "cluster") and command != "space" or command == "collective" and where == "cluster":
        assert name in r.output, r.output


def test_markup_in_out_and_in_a_resumed_folder(tmp_path):
    out = tmp_path / "outs" / "[/]"
    model = _write(toml_text(TINY_MODEL | {"name": "[bold]m[/]"}), "m.toml")
    r = invoke(["search", "--model", model, "--gpus", "8", "--global-batch", "32", "--pp", "2", "--zero", "1",
                "--workers", "0", "--top", "2", "--out", str(out)])             # zero 1: a plan Megatron-LM launches
    assert r.exit_code == 0 and str(out) in r.output and "[bold]m[/] on 8" in r.output, r.output
    (folder,) = out.glob("*/")
    assert folder.name.endswith("-_bold_m___-8gpu")
    for command in (["show"], ["export", "--format", "megatron"], ["search", "--resume"]):
        r = invoke([*command, str(folder)])
        assert r.exit_code == 0 and r.exception is None and "[bold]m[/]" in r.output, r.output


@pytest.mark.parametrize("name", ["a/../b c", ".hidden/é", ".."])
def test_model_names_never_make_odd_run_folders(tmp_path, name):
    model = _write(toml_text(TINY_MODEL | {"name": name}), "m.toml")
    out = tmp_path / "out"
    r = invoke(["search", "--model", model, "--gpus", "8", "--global-batch", "32", "--pp", "2", "--tp", "1",
                "--workers", "0", "--top", "1", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    (folder,) = out.iterdir()
    assert Path(json.loads(r.stdout)["run"]) == folder and not folder.name.startswith(".")
    assert all(c.isalnum() or c in "._+-" for c in folder.name) and folder.is_dir()


@pytest.mark.parametrize("name", ["x\ny", "tab\there", "nul\x00", "x" * 201])
def test_model_names_with_control_characters_are_refused(name):
    args = ["check", "--model", _write(toml_text(TINY_MODEL | {"name": name}), "m.toml"), "--gpus", "8"]
    r = invoke(args)
    assert_clean(r, args, codes={2})
    assert "printable" in r.output or "not valid TOML" in r.output, r.output


def test_a_sampler_on_a_small_space_searches_exhaustively_and_says_so(tmp_path):
    """TPE asked for every plan of a small space never ended (2 plans/s and falling); it is now exhaustive."""
    import time

    t0 = time.process_time()
    r = invoke(["search", "--model", "gpt-1.7b", "--gpus", "8", "--sampler", "tpe", "--workers", "0", "--top", "3",
                "--out", str(tmp_path), "--json"])
    assert r.exit_code == 0 and time.process_time() - t0 < 30, r.output
    assert "covers all 1,968 distinct valid plans: searching them exhaustively" in r.stderr, r.stderr
    (folder,) = tmp_path.glob("*/")
    assert json.loads((folder / "inputs.json").read_text())["sampler"] == "exhaustive"


@pytest.mark.parametrize("budget", ["99999999999999999999999999", "10000001", "0"])
def test_absurd_budgets_are_refused(budget):
    args = ["search", "--model", "gpt-1.7b", "--gpus", "8", "--budget", budget, "--workers", "0"]
    r = invoke(args)
    assert_clean(r, args, codes={2})
    assert "--budget" in r.output and "range" in r.output, r.output


def test_storage_studies_are_unique_and_a_resume_replaces_only_its_own(tmp_path):
    import optuna

    db = f"sqlite:///{tmp_path / 'studies.db'}"
    args = ["search", "--model", "gpt-1.7b", "--gpus", "8", "--tp", "2", "--pp", "2", "--cp", "1", "--global-batch",
            "16", "--micro-batch", "1", "--recompute", "none", "--zero", "1", "--workers", "0", "--top", "2",
            "--storage", db, "--out", str(tmp_path / "runs"), "--json"]
    first, second = invoke(args), invoke(args)                    # same model and GPUs, within a second or two
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    folders = [Path(json.loads(r.stdout)["run"]) for r in (first, second)]
    studies = [json.loads((f / "inputs.json").read_text())["study"] for f in folders]
    assert studies[0] != studies[1] and set(studies) <= set(optuna.get_all_study_names(db))
    foreign = optuna.create_study(study_name=folders[0].name, storage=db)   # whoever else named a study so
    foreign.enqueue_trial({"x": 1})
    r = invoke(["search", "--resume", str(folders[0]), "--storage", db, "--json"])
    assert r.exit_code == 0, r.output
    assert folders[0].name in optuna.get_all_study_names(db)
    assert len(optuna.load_study(study_name=folders[0].name, storage=db).trials) == 1
    assert len(optuna.load_study(study_name=studies[1], storage=db).trials) > 0


def test_an_address_where_no_ray_answers_is_one_line():
    import socket
    import threading
    import time

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def answer() -> None:
        conn, _ = server.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    args = ["search", "--model", "gpt-1.7b", "--gpus", "8", "--workers", "2",
            "--ray-address", f"127.0.0.1:{server.getsockname()[1]}"]
    t0 = time.monotonic()
    r = invoke(args)
    server.close()
    assert_clean(r, args, codes={2})
    assert "no Ray cluster answers there" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert time.monotonic() - t0 < 30
