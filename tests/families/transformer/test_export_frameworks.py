"""Every flag and field an export emits exists in the framework's own parser or config dataclasses, as vendored from
pinned snapshots into tests/fixtures/frameworks/ (tools/vendor_frameworks.py): the next rename upstream fails here
instead of in a user's job. Exports of plans a framework cannot launch are refused, never half-written."""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.export import megatron_text
from autoplan.families.transformer.export_deepspeed import deepspeed_text
from autoplan.families.transformer.export_torchtitan import torchtitan_python
from autoplan.families.transformer.frameworks import (deepspeed_violations, megatron_violations,
                                                      torchtitan_violations)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "frameworks"
MEGATRON = json.loads((FIXTURES / "megatron.json").read_text())
TITAN = json.loads((FIXTURES / "torchtitan.json").read_text())
DEEPSPEED = json.loads((FIXTURES / "deepspeed.json").read_text())
GPT3, LLAMA405, DSV3 = get_model("gpt3"), get_model("llama3-405b"), get_model("deepseek-v3")
TORCHRUN = {"--nnodes", "--nproc-per-node", "--node-rank", "--master-addr", "--master-port"}
"""torch.distributed.run's flags the launch lines use (torch/distributed/run.py)."""

PLANS = [
    Strategy(tp=4, pp=8, dp=32, micro_batch=2, global_batch=1536, schedule="interleaved", virtual_stages=12,
             sequence_parallel=True, zero=1),                       # the headline search's --framework megatron best
    Strategy(tp=8, dp=128, micro_batch=4, global_batch=1536, recompute="full", zero=2),
    Strategy(tp=8, dp=128, micro_batch=4, global_batch=1536, recompute="full", zero=3),
    Strategy(tp=4, dp=128, cp=2, micro_batch=1, global_batch=1536, sequence_parallel=True, tp_comm_overlap=True,
             zero=2, recompute="selective"),
    Strategy(tp=8, pp=16, dp=8, global_batch=1536, precision="fp8", fp8_param_gather=True, zero=1,
             optimizer_moments="bf16", sequence_parallel=True),
    Strategy(pp=8, dp=128, micro_batch=1, global_batch=1536, zero=1, recompute="full"),
    Strategy(pp=8, dp=128, micro_batch=1, global_batch=1536, zero=0, schedule="zbv", sequence_parallel=False),
    Strategy(cp=4, dp=256, micro_batch=1, global_batch=1536, cp_comm="a2a", zero=3),
    Strategy(tp=8, pp=8, dp=16, micro_batch=1, global_batch=1536, sequence_parallel=True, zero=1, cuda_graphs=True),
]


def _flags(text: str) -> list[tuple[str, list[str]]]:
    """(flag, values) of every --flag in a launch (comment lines skipped)."""
    words = shlex.split(" ".join(line.rstrip("\\") for line in text.splitlines() if not line.startswith("#")))
    out: list[tuple[str, list[str]]] = []
    for w in words:
        if w.startswith("--"):
            out.append((w, []))
        elif out and not w.startswith("$"):
            out[-1][1].append(w)
    return out


def _megatron_ok(text: str) -> None:
    script = text.split("pretrain_gpt.py", 1)
    assert len(script) == 2, text
    for flag, _ in _flags(script[0]):
        assert flag in TORCHRUN, flag
    for flag, values in _flags(script[1]):
        assert flag in MEGATRON["arguments"], f"{flag} is not an argument of Megatron-LM {MEGATRON['commit'][:7]}"
        choices = MEGATRON["arguments"][flag]
        if choices:
            assert all(v.strip('"') in map(str, choices) for v in values), (flag, values, choices)


@pytest.mark.parametrize("model", [GPT3, LLAMA405], ids=lambda m: m.name)
@pytest.mark.parametrize("i", range(len(PLANS)))
def test_megatron_flags_are_megatron_arguments(model, i):
    s = PLANS[i]
    if megatron_violations(model, s):
        with pytest.raises(SpecError, match="Megatron-LM cannot launch"):
            megatron_text(s, model)
        return
    text = megatron_text(s, model, gpus_per_node=8)
    _megatron_ok(text)
    assert ("--use-megatron-fsdp" in text) == (s.zero >= 2)
    if s.zero >= 2:
        assert f"--data-parallel-sharding-strategy {'optim_grads' if s.zero == 2 else 'optim_grads_params'}" in text


def test_megatron_moe_uneven_and_hierarchical_cp():
    s = Strategy(tp=8, pp=16, dp=8, ep=8, micro_batch=1, global_batch=1536, zero=1, sequence_parallel=True,
                 first_stage_layers=3, last_stage_layers=2, recompute="modules", cp=1)
    assert not megatron_violations(DSV3, s)
    _megatron_ok(megatron_text(s, DSV3, gpus_per_node=8))
    cp = Strategy(tp=2, cp=8, dp=64, global_batch=1536, cp_comm="a2a+p2p", zero=1, sequence_parallel=True)
    text = megatron_text(cp, LLAMA405, gpus_per_node=8)
    _megatron_ok(text)
    assert "--hierarchical-context-parallel-sizes 4 2" in text


# ---------------------------------------------------------------------------------------------------- torchtitan

def _titan_class(name: str) -> dict:
    assert name in TITAN["classes"], f"torchtitan {TITAN['commit'][:7]} has no {name}"
    return TITAN["classes"][name]


SECTIONS = {"parallelism": "ParallelismConfig", "training": "TrainingConfig", "compile": "CompileConfig"}


def _titan_ok(text: str) -> None:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("torchtitan"):
            defined = TITAN["modules"].get(node.module)
            assert defined is not None, f"module {node.module} not vendored"
            for a in node.names:
                assert a.name in defined, f"{node.module} defines no {a.name}"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                path = ast.unparse(target).split(".")
                if path[0] != "config" or len(path) < 2:
                    continue
                assert path[1] in _titan_class("Trainer.Config"), path
                if len(path) == 3:
                    fields = _titan_class(SECTIONS[path[1]])
                    assert path[2] in fields, f"{SECTIONS[path[1]]} has no field {path[2]}"
                    if fields[path[2]]:
                        assert ast.literal_eval(node.value) in fields[path[2]], (path, fields[path[2]])
                    if path[2] == "pipeline_parallel_schedule":
                        assert ast.literal_eval(node.value) in TITAN["pipeline_schedules"]
        elif isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func.endswith(".Config"):
                fields = _titan_class(func)
                for kw in node.keywords:
                    assert kw.arg in fields, f"{func} has no field {kw.arg}"
            elif func in ("_build_llama3_layers", "model_registry"):
                params = TITAN["modules"]["torchtitan.models.llama3"][func]
                assert all(kw.arg in params for kw in node.keywords), (func, params)


@pytest.mark.parametrize("model", [GPT3, LLAMA405], ids=lambda m: m.name)
@pytest.mark.parametrize("i", range(len(PLANS)))
def test_torchtitan_fields_are_torchtitan_config_fields(model, i):
    s = PLANS[i]
    if torchtitan_violations(model, s):
        with pytest.raises(SpecError, match="torchtitan cannot launch"):
            torchtitan_python(s, model)
        return
    text = torchtitan_python(s, model, gpus_per_node=8)
    _titan_ok(text)
    assert "--module autoplan_plan --config autoplan_plan" in text


def test_torchtitan_uneven_stages_name_every_layer():
    s = Strategy(tp=8, pp=16, dp=128, micro_batch=1, global_batch=2048, zero=1, sequence_parallel=True,
                 schedule="interleaved", virtual_stages=4, first_stage_layers=7, last_stage_layers=7)
    assert not torchtitan_violations(LLAMA405, s)
    text = torchtitan_python(s, LLAMA405)
    _titan_ok(text)
    parts = ast.literal_eval(re.search(r"module_fqns_per_model_part = (\[.*\])", text).group(1))
    layers = [n for part in parts for n in part if n.startswith("layers.")]
    assert len(parts) == 64 and layers == [f"layers.{i}" for i in range(126)]
    assert "llama3_405b()" in text


# ----------------------------------------------------------------------------------------------------- DeepSpeed

def _deepspeed_ok(text: str) -> dict:
    cfg = json.loads(text.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0])
    for key, value in cfg.items():
        assert key in DEEPSPEED["top_level"], f"ds_config key {key} unknown to DeepSpeed {DEEPSPEED['commit'][:7]}"
        if isinstance(value, dict):
            assert set(value) <= set(DEEPSPEED["sections"][key]), (key, set(value) - set(DEEPSPEED["sections"][key]))
    launch = text.rstrip().splitlines()[-1]
    assert launch.startswith("deepspeed ")
    flags = [f for f, _ in _flags(launch) if f not in ("--deepspeed", "--deepspeed_config")]   # train.py's own
    assert set(flags) <= set(DEEPSPEED["launcher"]), set(flags) - set(DEEPSPEED["launcher"])
    return cfg


@pytest.mark.parametrize("i", range(len(PLANS)))
def test_deepspeed_keys_are_ds_config_keys(i):
    s = PLANS[i]
    if deepspeed_violations(GPT3, s):
        with pytest.raises(SpecError, match="DeepSpeed cannot launch"):
            deepspeed_text(s, GPT3)
        return
    cfg = _deepspeed_ok(deepspeed_text(s, GPT3, gpus_per_node=8))
    dp = s.gpus // (s.pp * s.tp * s.cp)
    assert cfg["train_batch_size"] == cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] * dp


def test_every_framework_launches_some_plan_here():
    """The plans above exercise each exporter, not only its refusal."""
    for rules in (megatron_violations, torchtitan_violations, deepspeed_violations):
        assert any(not rules(GPT3, s) for s in PLANS), rules.__name__


def test_fixtures_record_their_commits():
    for data in (MEGATRON, TITAN, DEEPSPEED):
        assert re.fullmatch(r"[0-9a-f]{40}", data["commit"]) and data["repo"] and data["sources"]


def test_refused_reasons_cite_the_framework():
    zbv = replace(PLANS[0], schedule="zbv", virtual_stages=1)
    assert any("1F1B and interleaved" in r for r in megatron_violations(GPT3, zbv))
    assert any("refuses ZeRO-2" in r for r in deepspeed_violations(GPT3, replace(PLANS[5], zero=2)))
    # torchtitan's Float8LinearConverter is rowwise only; Megatron-Core runs TE's current scaling (tensorwise)
    current = replace(PLANS[0], precision="fp8-current")
    assert any("rowwise recipes only" in r for r in torchtitan_violations(GPT3, current))
    assert not any("fp8" in r for r in megatron_violations(GPT3, current))


@pytest.mark.parametrize("framework,check", [("megatron", _megatron_ok), ("torchtitan", _titan_ok),
                                             ("deepspeed", _deepspeed_ok)])
def test_headline_search_rank1_launches_with_each_framework(framework, check, tmp_path):
    """`autoplan search --model gpt3 --gpus 1024 --framework F`: rank 1 exports as F, and every flag passes."""
    from click.testing import CliRunner

    from autoplan.cli import main

    out = tmp_path / framework
    res = CliRunner().invoke(main, ["search", "--model", "gpt3", "--gpus", "1024", "--framework", framework,
                                    "--top", "1", "--workers", "0", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.output)["leaderboard"][0]
    assert framework in row["launch_with"]
    [run] = out.iterdir()
    exported = CliRunner().invoke(main, ["export", str(run), "--rank", "1", "--format", framework])
    assert exported.exit_code == 0, exported.output
    check(exported.output)


def test_megatron_names_the_userbuffers_reduce_scatters_a_plan_was_priced_with():
    base = dict(tp=8, pp=16, dp=8, micro_batch=1, global_batch=1536, zero=1, sequence_parallel=True,
                tp_comm_overlap=True, precision="fp8")
    assert "--tp-comm-overlap-cfg" not in megatron_text(Strategy(**base), LLAMA405, gpus_per_node=8)
    text = megatron_text(Strategy(**base, tp_overlap_rs="24/8", tp_overlap_fp8_rs=True), LLAMA405, gpus_per_node=8)
    _megatron_ok(text)
    assert ("proj_fprop and fc2_fprop are {method: pipeline, num_sm: 24, num_splits: 4, set_sm_margin: 1, fp8_buf: "
            "true} and {method: pipeline, num_sm: 8, num_splits: 4, set_sm_margin: 1, fp8_buf: true}") in text
    ring = megatron_text(Strategy(**base, tp_overlap_rs="r/24"), LLAMA405, gpus_per_node=8)
    assert "{method: ring_exchange} and {method: pipeline, num_sm: 24" in ring
