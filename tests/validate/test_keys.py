"""A validation file's transformer runs: every key is one the predictions read, or an error naming it."""

from __future__ import annotations

import re

import pytest
import yaml

from autoplan.errors import SpecError
from autoplan.validate import files, model_of, plan_space


def _case(**strategy) -> dict:
    return {"id": "x", "hardware": {"gpu": "A100-SXM4-80GB", "num_gpus": 64},
            "model": {"layers": 32, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 51200, "seq_len": 2048},
            "strategy": {"tp": 8, "pp": 4, "microbatch": 1, "global_batch": 64, **strategy},
            "measured": {"iteration_time_s": 1.0}}


def _load(tmp_path, case: dict, key: str = "cases") -> dict:
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump({"cases": [case] if key == "cases" else [], key: [case]} if key != "cases"
                                   else {"cases": [case]}))
    return files.load(path)


@pytest.mark.parametrize("where, change, needle", [
    ("strategy", {"tpp": 2}, "unknown key strategy.tpp"),
    ("strategy", {"micro_batch": 2}, "strategy.micro_batch: this file spells it microbatch"),
    ("strategy", {"zero": 1}, "strategy.zero: this file spells it zero_stage"),
    ("strategy", {"spatial": 2}, "unknown key strategy.spatial"),              # a CNN knob
    ("model", {"activaton": "swiglu"}, "unknown key model.activaton"),
    ("hardware", {"hbm_gb": 96}, "unknown key hardware.hbm_gb"),
    ("", {"known_gaps": "typo"}, "unknown key known_gaps"),
    ("strategy", {"grad_accum": 3, "dp": 2}, "grad_accum 3 × microbatch 1 × dp 2 = 6, not the global_batch 64"),
    ("strategy", {"scatter_gather_optimization": False}, "scatter_gather_optimization false is not modelled"),
])
def test_a_key_no_prediction_reads_is_an_error_that_names_it(tmp_path, where, change, needle):
    case = _case()
    if where:
        case[where] = {**case[where], **change}
    else:
        case |= change
    with pytest.raises(SpecError, match=re.escape(needle)):
        _load(tmp_path, case)


def test_variants_and_memory_runs_are_checked_alike(tmp_path):
    case = _case() | {"variants": [{"label": "v", "strategy": {"micro_batch": 2}}]}
    with pytest.raises(SpecError, match="variants #1: strategy.micro_batch: this file spells it microbatch"):
        _load(tmp_path, case)
    run = {k: v for k, v in _case(recompute_layer=2).items() if k != "measured"} | {
        "measured": {"max_allocated_gib": 30.0}}
    with pytest.raises(SpecError, match=re.escape("memory run #1 ('x'): unknown key strategy.recompute_layer")):
        _load(tmp_path, run, "memory_runs")


def test_the_shipped_files_use_only_keys_the_predictions_read():
    for path in files.default_files():
        assert files.load(path)["cases"]


@pytest.mark.parametrize("knob, value", [("recompute_layers", 2), ("optimizer_offload_pct", 50),
                                         ("collective_policy", "themis")])
def test_a_stated_non_boolean_knob_is_the_plans(knob, value):
    case = _case(recompute="full", dp=2, distributed_optimizer=True, **{knob: value})
    plans, searched = plan_space(case, model_of(case["model"]), 64)
    assert plans and all(getattr(p, knob) == value for p in plans) and knob not in searched


def test_force_balanced_routing_sets_capacity_factor_one_outside_the_catalog_too():
    shape = {"layers": 4, "hidden": 1024, "heads": 16, "ffn_hidden": 2816, "vocab": 32000, "seq_len": 4096,
             "experts": 8, "top_k": 2, "moe_ffn_hidden": 1408}
    assert model_of({**shape, "force_balanced_routing": True}).capacity_factor == 1.0
    assert model_of({**shape, "force_balanced_routing": True, "capacity_factor": 1.25}).capacity_factor == 1.25


def test_what_a_run_needs_and_autoplan_cannot_describe_is_shown_and_the_run_counted(tmp_path):
    from autoplan.report.validation import report_dict
    from autoplan.validate import validate
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump({"cases": [_case(dp=2) | {"needs": ["torch_compile"]}]}))
    report = validate(path)
    (row,) = report.cases
    assert row.needs == ("torch_compile",) and row.counted
    assert report_dict(report)["runs"][0]["needs"] == ["torch_compile"]
    path.write_text(yaml.safe_dump({"cases": [_case(dp=2) | {"needs": "torch_compile"}]}))
    with pytest.raises(SpecError, match="needs must be a list of setting names"):
        validate(path)
