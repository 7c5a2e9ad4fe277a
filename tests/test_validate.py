"""Guards the accuracy autoplan reaches on the published runs it ships with (deterministic thresholds)."""

import re

import pytest

from autoplan.validate import Report, validate


@pytest.fixture(scope="module")
def report() -> Report:
    return validate()


def _group(report: Report, prefix: str) -> dict:
    rows = [c for c in report.cases if c.group.startswith(prefix)]
    assert rows, prefix
    return Report.summary(rows)


def _dense(report: Report) -> list:
    return [c for c in report.cases if not c.group.startswith("MoE")]


def test_every_case_has_a_prediction(report):
    assert len(_dense(report)) == 25
    assert len(report.cases) == 27
    assert all(c.predicted is not None for c in report.cases)


def test_moe_runs_are_their_own_group_with_expert_parallel_plans(report):
    moe = [c for c in report.cases if c.group.startswith("MoE")]
    assert len(moe) == 2 and all(c.plan.ep == 8 and c.plan.etp == 1 for c in moe)
    assert all("ep_overlap" in c.searched for c in moe)      # not stated by the source: searched


def test_korthikanti_cases_beat_calculon(report):
    # Calculon on the same 8 runs: mean 3.65 %, max 8.87 % (public.yaml)
    s = _group(report, "Korthikanti")
    assert s["n"] == 8
    assert s["mean_abs_pct"] < 3.65
    assert s["max_abs_pct"] < 8.87


def test_h100_recipes_within_five_percent(report):
    s = _group(report, "NVIDIA H100")
    assert s["mean_abs_pct"] <= 3.0
    assert s["max_abs_pct"] <= 5.0


def test_overall_mean_error(report):
    s = Report.summary(_dense(report))
    assert s["mean_abs_pct"] <= 5.0


def test_sc21_regression_guard(report):
    # the SC'21 runs with NVIDIA's reproduction-script knobs: mean 4.9 %, max 8.8 % (1.7B) when this was written
    s = _group(report, "Megatron SC'21")
    assert s["mean_abs_pct"] <= 5.5
    assert s["max_abs_pct"] <= 9.5


def test_overall_max_error(report):
    # the target on all 25 dense runs (the MoE runs are a known gap, reported by `autoplan validate`)
    assert Report.summary(_dense(report))["max_abs_pct"] <= 10.0


def test_sc21_cases_use_the_reproduction_scripts_knobs(report):
    # micro-batch, virtual stages, DDP and gradient dtype come from the file, not from a search
    sc21 = [c for c in report.cases if c.group.startswith("Megatron SC'21")]
    assert len(sc21) == 10 and all(c.searched == () for c in sc21)
    by_size = {c.id.rsplit("-", 1)[-1]: c.plan for c in sc21}
    assert by_size["1.7b"].micro_batch == 16 and by_size["1.7b"].overlap_grad_reduce
    assert by_size["76.1b"].virtual_stages == 3 and not by_size["76.1b"].overlap_grad_reduce
    assert by_size["1008.0b"].schedule == "1f1b"
    assert not any(p.grad_reduce_in_fp32 or p.overlap_p2p_comm or p.gradient_accumulation_fusion
                   for p in by_size.values())


def test_only_the_2021_runs_accumulate_gradients_unfused(report):
    unfused = {c.group for c in report.cases if not c.plan.gradient_accumulation_fusion}
    assert unfused == {"Megatron SC'21 (A100)"}


def test_memory_and_bandwidth_within_ten_percent(report):
    for row in report.memory + [b for b in report.bandwidth if b.predicted is not None]:
        assert abs(row.error_pct) <= 10.0, row
    assert sum(b.predicted is not None for b in report.bandwidth) >= 8


@pytest.mark.parametrize("text, needle", [
    (b"\xff\xfe\x00binary", "is not UTF-8 text"),
    (b"cases: [", "is not valid YAML"),
    (b"cases: 3", "has no 'cases' list"),
    (b"cases: [5]", "case #1 must be a mapping, got 5"),
    (b"cases: [{id: a}]", "case #1 ('a'): hardware must be a mapping, got None"),
    (b"cases: [{id: a, hardware: {num_gpus: -8}, model: {}, strategy: {}, measured: {}}]",
     "case #1 ('a'): hardware.num_gpus must be a positive integer, got -8"),
    (b"cases: [{id: a, hardware: {num_gpus: 8}, model: {layers: 4, hidden: 256, heads: 8, ffn_hidden: 1024, "
     b"vocab: 1000, seq_len: '256'}, strategy: {}, measured: {}}]", "model.seq_len must be a positive integer, got '256'"),
    (b"cases: []\ncollective_bandwidth: [{id: b, op: all_reduce, hardware: H100, busbw_gbps: 'a-b'}]",
     "collective 'b' is malformed"),
])
def test_malformed_validation_files_name_what_is_wrong(tmp_path, text, needle):
    from autoplan.errors import SpecError

    path = tmp_path / "v.yaml"
    path.write_bytes(text)
    with pytest.raises(SpecError, match=re.escape(needle)):
        validate(path)
