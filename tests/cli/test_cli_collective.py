"""`autoplan collective`: time and per-dimension utilisation of one collective, baseline or Themis; bad input is
one line and exit code 2."""

import json

import pytest
from click.testing import CliRunner

from autoplan.cli import main
from autoplan.cli.collective import parse_bytes
from autoplan.errors import SpecError


def run(*args: str):
    return CliRunner().invoke(main, ["collective", *args])


def test_cluster_group_table():
    r = run("--gpus", "16", "--bytes", "256MiB")
    assert r.exit_code == 0, r.output
    assert "nvlink" in r.output and "ib-leaf" in r.output and "Themis is" in r.output and "faster" in r.output


def test_network_json_themis_beats_baseline_on_equal_bandwidths():
    r = run("--network", "switch:8:100,switch:8:100,switch:16:100", "--bytes", "1GiB", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [d["size"] for d in out["dimensions"]] == [8, 8, 16]
    assert out["speedup_over_baseline"] > 2 and out["bandwidth_utilisation"] > 0.9
    assert out["time_ms"] < out["baseline_time_ms"] and not out["fell_back_to_baseline"]
    assert sum(d["sent_bytes"] for d in out["dimensions"]) == pytest.approx(2 * 1023 / 1024 * 2**30)


def test_baseline_single_ring_closed_form():
    r = run("--network", "ring:8:100:5", "--bytes", "1e9", "--chunks", "1", "--policy", "baseline", "--json")
    out = json.loads(r.output)
    assert out["time_ms"] == pytest.approx((2 * 7 / 8 * 1e9 / 100e9 + 2 * 7 * 5e-6) * 1e3)


@pytest.mark.parametrize("text, value", [("1GiB", 2**30), ("64MiB", 64 * 2**20), ("500MB", 5e8), ("1e9", 1e9),
                                         ("2.5 kib", 2560), ("123", 123)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("args, needle", [
    (["--gpus", "12"], "12 GPUs is not a whole number of nvlink domains of 8 GPUs"),
    (["--gpus", "0"], "--gpus must be an integer ≥ 2 (the group size: a collective needs two GPUs), got 0"),
    (["--gpus", "1"], "--gpus must be an integer ≥ 2 (the group size: a collective needs two GPUs), got 1"),
    ([], "--gpus must be an integer ≥ 2 (the group size: a collective needs two GPUs), got None"),
    (["--network", "ring:4:200,switch:8:50", "--gpus", "33"], "--gpus 33 differs from the 32 GPUs of --network"),
    (["--gpus", "16", "--bytes", "1XB"], "--bytes '1XB' is not a size"),
    (["--gpus", "16", "--bytes", "1.2.3"], "--bytes '1.2.3' is not a size"),
    (["--gpus", "16", "--bytes", "0"], "--bytes must be a positive finite number of bytes, got 0.0"),
    (["--gpus", "16", "--bytes", "1e400"], "got inf"),
    (["--gpus", "16", "--chunks", "0"], "--chunks must be an integer in [1, 4096], got 0"),
    (["--network", "ring:1:100"], "size of dim 1 must be an integer ≥ 2, got 1"),
    (["--network", "torus:4:100"], "topology of dim 1 must be one of ring, switch, fully_connected"),
    (["--network", "ring:4"], "--network part 'ring:4' must be TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US]"),
    (["--network", "ring:4:nan"], "bandwidth values must be numbers, got nan"),
    (["--network", "ring:4:-5"], "bandwidth of dim 1 must be a positive number of bytes/s"),
    (["--cluster", "nope", "--gpus", "8"], "unknown cluster 'nope'"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    r = run(*args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.output


def test_parse_bytes_rejects_units_it_does_not_know():
    with pytest.raises(SpecError, match="use e.g. 1GiB"):
        parse_bytes("3 parsecs")


def test_trace_shows_chunks_on_per_dimension_link_streams(tmp_path):
    path = tmp_path / "c.json"
    r = run("--network", "switch:8:100,switch:16:50", "--bytes", "64MiB", "--chunks", "4", "--json",
            "--trace", str(path))
    assert r.exit_code == 0, r.output
    events = json.loads(path.read_text())["traceEvents"]
    rows = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"dim 1.links", "dim 2.links", "chunk0", "chunk3"} <= rows
    end = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")
    assert end == pytest.approx(json.loads(r.output)["time_ms"] * 1e3, rel=1e-9)


def test_nvl72_cluster_uses_its_explicit_dimensions():
    r = run("--cluster", "gb200-nvl72", "--gpus", "1152", "--bytes", "1GiB", "--json")
    assert r.exit_code == 0, r.output
    assert [(d["dimension"], d["size"]) for d in json.loads(r.output)["dimensions"]] == [("nvlink", 72),
                                                                                        ("infiniband", 16)]
    bad = run("--cluster", "gb200-nvl72", "--gpus", "1000", "--bytes", "1GiB")
    assert bad.exit_code == 2 and "does not tile gb200-nvl72's dimensions 72 x rest" in bad.output
