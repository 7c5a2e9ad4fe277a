"""What a new user meets first: --seq-len and the batch flags on every command, headers that name the sequence
length, global batch and tokens per step, the GB200 NVL72 search at 1,152 GPUs, --framework and the framework key
of a search space, and a CNN or DLRM never offered a transformer framework."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from autoplan.cli import main

HEADER = "sequences of {seq:,} tokens, global batch {batch:,}"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_check_and_simulate_take_seq_len_and_tokens_per_step():
    r = run("check", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--seq-len", "4096", "--tokens-per-step",
            "1M")
    assert HEADER.format(seq=4096, batch=256) in r.output and "(1.05M tokens per step)" in r.output, r.output
    r = run("simulate", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "64", "--seq-len", "1024")
    assert r.exit_code == 0 and HEADER.format(seq=1024, batch=64) in r.output, r.output
    r = run("check", "--model", "resnet50", "--gpus", "8", "--seq-len", "512")
    assert r.exit_code == 2 and "not a token-sequence model" in r.output
    r = run("check", "--model", "gpt-1.7b", "--gpus", "8", "--global-batch", "64", "--tokens-per-step", "1M")
    assert r.exit_code == 2 and "not both" in r.output


def test_space_names_the_batch_and_sequence_of_its_plans():
    r = run("space", "--model", "gpt-1.7b", "--gpus", "16", "--seq-len", "4096", "--tp", "1", "--pp", "1")
    assert HEADER.format(seq=4096, batch=256) in r.output, r.output       # 1M tokens (GPT-3 Table 2.1, 1.3–2.7B)


def test_gb200_nvl72_at_1152_gpus_has_plans_and_round_hints():
    r = run("space", "--model", "llama3-405b", "--gpus", "1152", "--cluster", "gb200-nvl72", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["fit"] > 0, r.output[-500:]
    r = run("space", "--model", "llama3-405b", "--gpus", "1152", "--cluster", "gb200-nvl72", "--global-batch", "1536",
            "--pp", "8")
    assert r.exit_code == 2 and "--global-batch 1152" in r.output and "1539" not in r.output, r.output


def test_a_batch_range_ranks_by_throughput(tmp_path):
    r = run("search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64-128", "--tp", "1", "--pp", "1",
            "--workers", "0", "--top", "3", "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    board = json.loads(r.output)["leaderboard"]
    assert all(row["plan"].endswith(" gb128") for row in board)               # the larger batch: no bubble to lose
    tps = [row["tokens_per_s"] for row in board]
    assert tps == sorted(tps, reverse=True)
    r = run("search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64-128", "--sampler", "tpe",
            "--out", str(tmp_path))
    assert r.exit_code == 2 and "--sampler exhaustive" in r.output


def test_framework_key_of_a_space_and_resume(tmp_path):
    space = tmp_path / "ds.toml"
    space.write_text('framework = "deepspeed"\ntp = [1]\npp = [1, 2]\nzero = [0, 1, 2, 3]\nmicro_batch = [1, 2]\n')
    r = run("search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--space", str(space),
            "--workers", "0", "--top", "3", "--out", str(tmp_path / "out"), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert all("deepspeed" in row["launch_with"] for row in out["leaderboard"])
    inputs = json.loads((tmp_path / "out" / out["run"].split("/")[-1] / "inputs.json").read_text())
    assert inputs["space"]["framework"] == ["deepspeed"]
    r = run("search", "--resume", out["run"], "--framework", "megatron")
    assert r.exit_code == 2 and "--framework 'megatron' (the run's: 'deepspeed')" in r.output
    space.write_text('framework = "jax"\n')
    r = run("space", "--model", "gpt-1.7b", "--gpus", "16", "--space", str(space))
    assert r.exit_code == 2 and "'jax' is not one of any, megatron" in r.output


def test_default_runs_keep_their_inputs_and_a_cnn_gets_no_transformer_framework(tmp_path):
    r = run("space", "--model", "resnet50", "--gpus", "8", "--framework", "megatron")
    assert r.exit_code == 2 and "resnet50 is a CNN" in r.output and "--format pytorch" in r.output
    r = run("search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--tp", "1", "--pp", "1",
            "--workers", "0", "--top", "2", "--out", str(tmp_path), "--json")
    folder = json.loads(r.output)["run"]
    inputs = json.loads(open(f"{folder}/inputs.json").read())
    assert "framework" not in inputs["space"] and "global_batch" not in inputs["space"]   # `any`: as before


@pytest.mark.parametrize("model, fmt", [("resnet50", "pytorch"), ("dlrm-criteo", "torchrec")])
def test_the_report_launch_section_shows_only_what_launches(model, fmt, tmp_path):
    gpus = "8" if model == "resnet50" else "16"
    r = run("search", "--model", model, "--gpus", gpus, "--workers", "0", "--top", "1", "--out", str(tmp_path),
            "--json")
    assert r.exit_code == 0, r.output
    page = (tmp_path / json.loads(r.output)["run"].split("/")[-1] / "report.html").read_text()
    launch = page.split('<section id="launch">', 1)[1].split("</section>", 1)[0]
    assert "--seq-length" not in launch and "pretrain_gpt" not in launch
    assert {"pytorch": "torchrun", "torchrec": "ParameterConstraints"}[fmt] in launch


def test_models_lists_each_family_with_its_own_columns():
    r = run("models")
    assert r.exit_code == 0
    cnn = r.output.split("CNNs", 1)[1].split("DLRMs", 1)[0]
    assert "input" in cnn and "3×224×224" in cnn and "heads" not in cnn and "mlp" not in cnn
    dlrm = r.output.split("DLRMs", 1)[1]
    assert "tables" in dlrm and "bottom MLP" in dlrm and "seq" not in dlrm.split("\n", 3)[2]
    assert "experts" in r.output.split("Mixtures of experts", 1)[1].split("CNNs", 1)[0]
    rows = json.loads(run("models", "--json").output)
    assert {row["family"] for row in rows} == {"transformer", "moe", "cnn", "dlrm"}


def test_plan_labels_have_a_legend_in_help():
    from autoplan.families.strategy import Strategy

    text = run("search", "--help").output + run("--help").output
    for label in ("int", "z2", "rmod", "epo", "LF/L", "a8", "sp", "tpo", "fp8pg", "sdN"):
        assert label in text, label
    labels = {a for a, _ in Strategy.legend()}
    assert {"z1", "z2", "z3", "sel", "full", "rmod", "epo", "a8", "sp", "tpo", "intV", "LF/L", "mbN"} <= labels
