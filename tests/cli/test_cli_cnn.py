"""The CLI on CNNs: simulate, search with the CNN space, export, and bad input as one line with exit code 2."""

from __future__ import annotations

import json

from click.testing import CliRunner

from autoplan.cli import main


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_simulate_a_spatial_plan_derives_dp_from_the_cnn_degrees():
    r = _run("simulate", "--model", "resnet50", "--gpus", "16", "--spatial", "2", "--filter", "2",
             "--micro-batch", "16", "--global-batch", "64", "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output)["strategy"]
    assert (plan["dp"], plan["spatial"], plan["filter"]) == (4, 2, 2)


def test_bad_cnn_input_is_one_line_and_exit_2():
    for args, text in ((("--spatial", "3"), "not divisible by pp·spatial·channel·filter"),
                       (("--filter", "0"), "--filter must be a positive integer"),
                       (("--spatial", "1024", "--gpus", "1024"), "more than the input's 224 rows"),
                       (("--tp", "2"), "tensor parallelism is for transformers")):
        gpus = () if "--gpus" in args else ("--gpus", "8")
        r = _run("simulate", "--model", "resnet50", *gpus, "--global-batch", "1024", *args)
        assert r.exit_code == 2, r.output
        assert text in r.output and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_search_export_a_cnn_end_to_end(tmp_path):
    r = _run("search", "--model", "resnet50", "--gpus", "16", "--global-batch", "256", "--out", str(tmp_path),
             "--workers", "0", "--json")
    assert r.exit_code == 0, r.output
    run = json.loads(r.output)["run"]
    assert "spatial" in json.loads((tmp_path / run.split("/")[-1] / "inputs.json").read_text())["space"]
    out = _run("export", run)
    assert out.exit_code == 0 and "torchrun" in out.output and "DistributedDataParallel" in out.output
    assert _run("report", run).exit_code == 0
    best = json.loads((tmp_path / run.split("/")[-1] / "best_plan.json").read_text())
    assert "torchrun" in best["pytorch"] and not {"megatron", "torchtitan"} & set(best)
    for fmt in ("megatron", "torchtitan"):                   # transformer trainers: refused in one line, not faked
        bad = _run("export", run, "--format", fmt)
        assert bad.exit_code == 2 and "is a CNN" in bad.output and "--format pytorch" in bad.output, bad.output


def test_a_transformer_run_does_not_export_as_a_cnn_launch(tmp_path):
    r = _run("search", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "32", "--tp", "2", "--pp", "2",
             "--out", str(tmp_path), "--workers", "0", "--sampler", "random", "--budget", "4", "--json")
    assert r.exit_code == 0, r.output
    bad = _run("export", json.loads(r.output)["run"], "--format", "pytorch")
    assert bad.exit_code == 2 and "is a transformer" in bad.output and len(bad.output.strip().splitlines()) == 1
