"""Guards the DLRM validation group (public.yaml dlrm_cases) and the helpers that build its runs."""

import re

import pytest

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.validate import Report, dlrm_cluster, dlrm_model, validate


@pytest.fixture(scope="module")
def report() -> Report:
    return validate()


def test_every_dlrm_case_loads_and_is_predicted(report):
    assert len(report.dlrm) == 7
    assert all(c.predicted is not None and c.metric == "samples_per_s" and c.note == "" for c in report.dlrm)
    assert {c.plan.sharding for c in report.dlrm} == {"table_wise"}
    assert all(c.plan.dp * c.plan.micro_batch == c.plan.global_batch for c in report.dlrm)


def test_dlrm_runs_are_predicted_within_the_documented_band(report):
    # 7 NVIDIA DeepLearningExamples DLRM runs on DGX A100 (AMP; 5 PyTorch, 2 TensorFlow 2): mean |error| 6.1 %, max
    # 28.9 % since the TF2 code's collectives wait for Horovod's negotiation rounds (13.0 % / 76.9 % before; 13.9 % /
    # 50.0 % before the all-to-all carried fp16 and TF2 placed its tables memory_balanced; 46.2 % / 75.7 % before the
    # element-wise ops); the 1-GPU runs within 6 %, the PyTorch 8-GPU runs within 6.5 %, the TF2 8-GPU run still
    # 29 % too fast (docs/fidelity.md); each bound sits about a point above its figure and fails on any regression
    s = Report.summary(report.dlrm)
    assert s["n"] == 7
    assert s["mean_abs_pct"] < 7.0 and s["max_abs_pct"] < 30.0
    pytorch = Report.summary([c for c in report.dlrm if not c.id.startswith("dle-tf2")])
    assert pytorch["n"] == 5 and pytorch["mean_abs_pct"] < 4.0 and pytorch["max_abs_pct"] < 6.5
    one_gpu = [c for c in report.dlrm if "-1gpu-" in c.id]
    assert len(one_gpu) == 3 and all(abs(c.error_pct) < 6.5 for c in one_gpu)
    eight = [c for c in report.dlrm if "-8gpu-" in c.id]
    assert all(abs(c.error_pct) < 6.5 for c in eight if not c.id.startswith("dle-tf2"))
    assert all(0 < c.error_pct < 30.0 for c in eight if c.id.startswith("dle-tf2"))


def test_every_run_is_planned_as_its_code_runs_it():
    # NVIDIA's PyTorch DLRM (dlrm/model/distributed.py DistributedDlrm) runs the bottom MLP on GPU 0 and places the
    # tables by get_device_mapping; the TF2 one (nn/sparse_model.py) keeps the bottom MLP data-parallel and places
    # the tables with distributed-embeddings' memory_balanced strategy; both cast the pooled embeddings to fp16 for
    # the all-to-all (dlrm/nn/parts.py; dist_model_parallel.py _call_base)
    from autoplan.validate import load
    for case in load(None)["dlrm_cases"]:
        spec = dlrm_model(case["model"]).structure
        tf2 = case["id"].startswith("dle-tf2")
        assert spec.bottom_mlp_placement == ("data_parallel" if tf2 else "rank0"), case["id"]
        assert spec.table_placement == ("memory_balanced" if tf2 and "-8gpu-" in case["id"] else "planner"), case["id"]
        assert spec.pooled_comm_bytes == 2, case["id"]
        # the TF2 code issues its collectives as Horovod ops (nn/trainer.py, dist_model_parallel.py)
        assert spec.framework == ("horovod" if tf2 else "pytorch"), case["id"]


def test_dlrm_group_does_not_enter_the_transformer_summary(report):
    assert not any(c.id.startswith("dle-dlrm") for c in report.cases + report.cnn)


def test_embedding_params_scale_every_table_by_one_factor():
    base = get_model("dlrm-criteo").structure
    spec = dlrm_model({"name": "dlrm-criteo", "embedding_params": 20_500_000_000}).structure
    total = sum(t.params for t in spec.tables)
    # rounding each table to whole rows moves the total by at most half a row per table
    assert abs(total - 20_500_000_000) <= len(spec.tables) * max(t.dim for t in spec.tables)
    big = max(range(len(base.tables)), key=lambda i: base.tables[i].rows)
    k = 20_500_000_000 / sum(t.params for t in base.tables)
    assert spec.tables[big].rows == round(base.tables[big].rows * k)
    assert all(t.rows >= 1 for t in spec.tables)
    assert dlrm_model({"name": "dlrm-criteo"}) == get_model("dlrm-criteo")


def test_a_single_gpu_run_is_one_node_and_memory_overrides_apply():
    one = dlrm_cluster({"cluster": "dgx-a100-80g", "num_gpus": 1, "hbm_gib": 40, "hbm_bandwidth_gb_per_s": 1555})
    assert (one.gpus, one.nodes) == (1, 1)
    assert one.gpu.hbm_bytes == 40 * 2**30 and one.gpu.hbm_bandwidth == 1555e9
    eight = dlrm_cluster({"cluster": "dgx-a100-80g", "num_gpus": 8})
    assert eight.gpus == 8 and eight.gpu.hbm_bytes == 80 * 2**30


def test_less_memory_bandwidth_predicts_fewer_samples(report):
    by_id = {c.id: c.predicted for c in report.dlrm}
    assert by_id["dle-dlrm-a100-40g-8gpu-large-amp"] < by_id["dle-dlrm-a100-80g-8gpu-large-amp"]
    assert by_id["dle-dlrm-a100-40g-1gpu-small-amp"] < by_id["dle-dlrm-a100-80g-1gpu-small-amp"]


_OK = "{id: d, model: {name: dlrm-criteo}, hardware: {num_gpus: 8}, strategy: {global_batch: 65536%s}, measured: %s}"


@pytest.mark.parametrize("case, needle", [
    (_OK % ("", "{}"), "measured.samples_per_s must be a positive number, got None"),
    (_OK % ("", "{samples_per_s: -1}"), "measured.samples_per_s must be a positive number, got -1"),
    (_OK % (", tp: 2", "{samples_per_s: 1}"), "DLRM case 'd': unknown strategy key(s) tp"),
    ("{id: d, model: {name: gpt3}, hardware: {num_gpus: 8}, strategy: {global_batch: 8}, measured: {samples_per_s: 1}}",
     "DLRM case 'd': model 'gpt3-175b' is not a DLRM"),
    ("{id: d, model: {name: dlrm-criteo}, hardware: {num_gpus: 8, nics: 2}, strategy: {global_batch: 8}, "
     "measured: {samples_per_s: 1}}", "unknown hardware key(s) nics"),
    ("{id: d, model: {name: dlrm-criteo, pooled_comm_bytes: 0}, hardware: {num_gpus: 8}, strategy: {global_batch: 8},"
     " measured: {samples_per_s: 1}}", "DLRM case 'd': DLRM pooled_comm_bytes must be a positive integer, got 0"),
    ("{id: d, model: {name: dlrm-criteo, table_placement: snake}, hardware: {num_gpus: 8}, "
     "strategy: {global_batch: 8}, measured: {samples_per_s: 1}}", "table_placement 'snake' is not one of planner"),
])
def test_malformed_dlrm_cases_name_what_is_wrong(tmp_path, case, needle):
    path = tmp_path / "v.yaml"
    path.write_text(f"cases: []\ndlrm_cases: [{case}]\n")
    with pytest.raises(SpecError, match=re.escape(needle)):
        validate(path)


def test_a_plan_the_family_refuses_is_data_not_a_crash(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text("cases: []\ndlrm_cases: [{id: d, model: {name: dlrm-criteo}, hardware: {num_gpus: 8}, "
                    "strategy: {global_batch: 65536, micro_batch: 3}, measured: {samples_per_s: 1}}]\n")
    (row,) = validate(path).dlrm
    assert row.predicted is None and "not divisible" in row.note
