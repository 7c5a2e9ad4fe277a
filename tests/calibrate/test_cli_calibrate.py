"""`autoplan calibrate` end to end: inputs → a cluster spec that loads, with its provenance; the guarded reading of
untrusted inputs; one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from autoplan.calibrate import measurements
from autoplan.calibrate.model import SpecError, load_cluster, validation
from autoplan.calibrate.read_profile import SCHEMA
from autoplan.cli import main


def _profile_json(inputs, path: Path) -> Path:
    rows = []
    for k in inputs.kernels:
        if k.kind.startswith("gemm"):
            m, n, kk, b = k.shape
            rows.append({"kind": "gemm", "dtype": "fp8" if k.kind == "gemm_fp8" else "bf16", "m": m, "n": n, "k": kk,
                         "batch": b, "seconds": k.seconds})
        elif k.kind.startswith("attention"):
            b, h, sq, skv, d = k.shape
            rows.append({"kind": "attention", "direction": "backward" if k.kind.endswith("bwd") else "forward",
                         "batch": b, "heads": h, "seq_q": sq, "seq_kv": skv, "head_dim": d, "seconds": k.seconds})
        elif k.kind == "memory":
            rows.append({"kind": "elementwise", "op": "add", "bytes": k.shape[0], "seconds": k.seconds})
        else:
            rows.append({"kind": "launch", "seconds": k.seconds})
    rows += [{"kind": "collective", "op": c.op, "ranks": c.ranks, "per_node": c.per_node, "bytes": int(c.nbytes),
              "seconds": c.seconds} for c in inputs.collectives]
    path.write_text(json.dumps({"schema": SCHEMA, "device": {"name": "synthetic H100"}, "measurements": rows}))
    return path


def _h100_steps(tmp_path: Path) -> Path:
    data = validation.load()
    cases = [c for c in data["cases"] if c["id"].startswith("dgxc-h100-bf16-gpt3-175b")][:3]
    path = tmp_path / "steps.yaml"
    path.write_text(yaml.safe_dump({"cases": cases}))
    return path


def test_calibrate_writes_a_spec_that_loads_with_its_provenance(synthetic, truth, tmp_path) -> None:
    inputs, _ = synthetic({k: v for k, v in truth.items() if k != "gpu.clock_ratio"})
    profile = _profile_json(inputs, tmp_path / "h100.json")
    steps = _h100_steps(tmp_path)
    out = tmp_path / "mine.toml"
    result = CliRunner().invoke(main, ["calibrate", str(profile), str(steps), "--base", "dgx-h100-80g",
                                       "-o", str(out), "--name", "my-h100"])
    assert result.exit_code == 0, result.output
    assert "gpu.gemm_efficiency" in result.output and "±" in result.output
    assert "leave-one-out error on the measured steps: mean |error|" in result.output
    spec = load_cluster(str(out), 64)
    assert spec.name == "my-h100"
    assert spec.gpu.gemm_efficiency == pytest.approx(truth["gpu.gemm_efficiency"], rel=0.02)
    table = tomllib.loads(out.read_text())["calibration"]
    assert table["base"] == "dgx-h100-80g"
    assert [i["kind"] for i in table["inputs"]] == ["profile", "steps"]
    assert table["inputs"][0]["sha256"] == __import__("hashlib").sha256(profile.read_bytes()).hexdigest()
    fitted = table["fitted"]["gpu.clock_ratio"]
    assert fitted["low"] == 0.5 and fitted["high"] == 1.0 and fitted["sd"] > 0
    assert "calibrated:" in out.read_text()
    # the written file is a cluster spec like any other: autoplan simulates on it
    sim = CliRunner().invoke(main, ["simulate", "--model", "gpt-1.7b", "--gpus", "8", "--cluster", str(out)])
    assert sim.exit_code == 0, sim.output


def test_json_output(synthetic, tmp_path) -> None:
    inputs, _ = synthetic({"gpu.gemm_efficiency": 0.7})
    inputs.collectives, inputs.steps = [], []
    inputs.kernels = [k for k in inputs.kernels if k.kind == "gemm"]
    profile = _profile_json(inputs, tmp_path / "g.json")
    result = CliRunner().invoke(main, ["calibrate", str(profile), "--json", "-o", str(tmp_path / "x.toml"),
                                       "--fit", "gemm_efficiency"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["fitted"][0]["name"] == "gpu.gemm_efficiency"
    assert data["fitted"][0]["value"] == pytest.approx(0.7, rel=0.02)


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is not a regular file"),
    (lambda p: p.write_bytes(b"\xff\xfe oops"), "line 1: not UTF-8 text"),
    (lambda p: p.write_text("hello\n"), "not a file calibrate reads"),
    (lambda p: p.write_text('{"schema": "autoplan-measurements/9", "measurements": []}'), "this autoplan reads"),
    (lambda p: p.write_text('{"schema": "autoplan-measurements/1", "measurements": [{"kind": "gemm", "m": 1}]}'),
     "measurement #1: seconds must be a positive number"),
    (lambda p: None, "does not exist"),
])
def test_bad_inputs_are_one_line_with_exit_code_2(tmp_path, make, message) -> None:
    path = tmp_path / "input.json"
    make(path)
    result = CliRunner().invoke(main, ["calibrate", str(path), "-o", str(tmp_path / "x.toml")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.output.count("\n") == 1 and result.output.startswith("autoplan: error: ")


def test_a_symlink_to_a_device_is_not_read(tmp_path) -> None:
    link = tmp_path / "log.txt"
    os.symlink("/dev/zero", link)
    with pytest.raises(SpecError, match="not a regular file"):
        measurements.read_text(link, "input file")


def test_an_oversized_file_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(measurements, "MAX_INPUT_BYTES", 100)
    big = tmp_path / "big.log"
    big.write_text("x" * 200)
    with pytest.raises(SpecError, match="more than the 0 MiB read"):
        measurements.read_text(big, "input file")


def test_too_few_steps_exit_2(tmp_path) -> None:
    data = validation.load()
    case = next(c for c in data["cases"] if c["id"] == "dgxc-h100-bf16-llama31-8b-8gpu")
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump({"cases": [case]}))
    result = CliRunner().invoke(main, ["calibrate", str(path), "-o", str(tmp_path / "x.toml")])
    assert result.exit_code == 2
    assert "too few measurements: gpu.clock_ratio rests on one measurement" in result.output
    assert not (tmp_path / "x.toml").exists()


def test_the_loader_accepts_only_a_calibration_table(tmp_path) -> None:
    text = (Path(load_cluster.__code__.co_filename).parents[2] / "cluster_specs" / "dgx-a100-80g.toml").read_text()
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(text + '\n[calibration]\nbase = "dgx-a100-80g"\n')
    bad.write_text('calibration = 3\n' + text)
    assert load_cluster(str(good)).name == "dgx-a100-80g"
    with pytest.raises(SpecError, match="calibration must be a table"):
        load_cluster(str(bad))


def test_steps_all_of_one_model_carry_a_warning_that_leave_one_out_tests_no_transfer():
    from autoplan.cli.calibrate import _transfer_notes
    data = validation.load()
    gpt3 = [c for c in data["cases"] if c["id"].startswith("dgxc-h100-bf16-gpt3-175b")][:3]
    llama = [c for c in data["cases"] if c["id"].startswith("dgxc-h100-bf16-llama31-8b")][:1]

    def steps(cases):
        return [measurements.Step(name=c["id"], model=validation.model_of(c["model"]), plans=(), gpus=1, seconds=1.0,
                                  where="") for c in cases]
    one, two = steps(gpt3), steps(gpt3 + llama)
    assert len(_transfer_notes(one)) == 1 and "one model" in _transfer_notes(one)[0]
    assert _transfer_notes(two) == [] and _transfer_notes(one[:1]) == []
