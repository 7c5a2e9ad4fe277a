"""A space whose valid plans all exceed memory says which single change makes plans fit."""

from click.testing import CliRunner

from autoplan.cli import main
from autoplan.families.registry import peak_memory
from autoplan.search.space import enumerate_plans, explain_no_fit, fit_relaxations, load_space
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

# Megatron SC'21 Table 1: 530B on 2520 A100s ran TP8 PP35 DP9 (105 layers, 3 a stage), no ZeRO, full recompute
PINNED = {"tp": 8, "zero": 0, "recompute": "full", "sequence_parallel": False}


def _inputs():
    return get_model("gpt-530b"), load_cluster("dgx-a100-80g", 2520), load_space(fixed=PINNED)


def test_the_published_pipeline_degree_is_offered_when_powers_of_two_cannot_fit():
    model, cluster, space = _inputs()
    plans, _ = enumerate_plans(model, 2520, space, 2520)
    assert plans and all(peak_memory(model, cluster, s) > cluster.gpu.hbm_bytes for s in plans)
    found = fit_relaxations(model, 2520, cluster, space, 2520)
    assert found and found[0].flags.startswith("--pp ")
    pp = int(found[0].flags.split()[1])
    assert 2520 % (8 * pp) == 0 and pp > 1
    fixed = load_space(fixed={**PINNED, "pp": pp})
    fitting = [s for s in enumerate_plans(model, 2520, fixed, 2520)[0]
               if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]
    assert len(fitting) == found[0].plans


def test_each_offered_change_is_one_axis_and_really_fits():
    model, cluster, space = _inputs()
    found = fit_relaxations(model, 2520, cluster, space, 2520, keep=3)
    axes = [r.flags.split()[0] for r in found]
    assert len(axes) == len(set(axes)) and all(r.plans > 0 for r in found)


def test_the_message_names_the_smallest_peak_and_the_fixes():
    model, cluster, space = _inputs()
    text = explain_no_fit(model, 2520, cluster, space, 2520)
    assert text.startswith("no plan fits in memory (the smallest peak is") and "GiB of 80" in text
    assert "--pp " in text


def test_search_prints_the_fit_hint_and_exits_1(tmp_path):
    r = CliRunner().invoke(main, ["search", "--model", "gpt-530b", "--gpus", "2520", "--cluster", "dgx-a100-80g",
                                  "--global-batch", "2520", "--tp", "8", "--zero", "0", "--recompute", "full",
                                  "--no-sequence-parallel", "--workers", "0", "--out", str(tmp_path)])
    assert r.exit_code == 1, r.output
    assert "no plan fits in memory" in r.output and "--pp " in r.output and "Traceback" not in r.output


def test_a_moe_model_in_a_space_without_expert_parallelism_is_offered_ep_first():
    # DeepSeek-V3's 671B parameters are mostly experts: the zero-bubble space (no ep axis) fits nothing on 1024
    # H100s, and spreading the experts is the change that fits
    model, cluster = get_model("deepseek-v3"), load_cluster("dgx-h100-80g", 1024)
    space = load_space("zero-bubble", fixed={"tp": 8, "pp": 16, "micro_batch": 1})
    plans, _ = enumerate_plans(model, 1024, space, 1024)
    assert plans and all(peak_memory(model, cluster, s) > cluster.gpu.hbm_bytes for s in plans)
    found = fit_relaxations(model, 1024, cluster, space, 1024, keep=1)
    assert found and found[0].flags.startswith("--ep ")
    ep = int(found[0].flags.split()[1])
    spread = load_space("zero-bubble", fixed={"tp": 8, "pp": 16, "micro_batch": 1, "ep": ep})
    fitting = [s for s in enumerate_plans(model, 1024, spread, 1024)[0]
               if peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes]
    assert len(fitting) == found[0].plans > 0


def test_a_search_that_tried_none_of_the_fitting_plans_says_how_many_fit():
    # GPT-3 on 64 H100s: some plans of the default space fit, so an empty leaderboard means the sampler or its
    # budget tried only others
    model, cluster, space = get_model("gpt3"), load_cluster("dgx-h100-80g", 64), load_space()
    plans, _ = enumerate_plans(model, 64, space, 64)
    fit = sum(peak_memory(model, cluster, s) <= cluster.gpu.hbm_bytes for s in plans)
    assert 0 < fit < len(plans)
    text = explain_no_fit(model, 64, cluster, space, 64)
    assert text.startswith(f"none of the plans tried fits in memory, but {fit} of the space's {len(plans)} valid plans")
    assert "--budget" in text


def test_a_random_sample_that_missed_every_fitting_plan_counts_none_simulated(tmp_path):
    r = CliRunner().invoke(main, ["search", "--model", "gpt3", "--gpus", "64", "--sampler", "random", "--budget", "4",
                                  "--workers", "0", "--out", str(tmp_path)])
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "none of the plans tried fits in memory, but" in text and "4 do not fit, 0 simulated" in text
