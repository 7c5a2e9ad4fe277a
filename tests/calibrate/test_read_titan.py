"""torchtitan logs (tps per GPU; the older wps) with their job config."""

from __future__ import annotations

import tomllib

import pytest

from autoplan.calibrate import read_titan
from autoplan.calibrate.model import SpecError, get_model


def test_tps_after_warm_up(fixtures) -> None:
    path = fixtures / "torchtitan_flex_debug.log"
    rate, line, n, gpus = read_titan.tps(path.read_text(), path)
    # steps 3-10 logged; the first logged step is left out: median of steps 4-10
    assert (rate, n, gpus) == (34824.0, 7, None)


def test_the_older_wps_format(fixtures) -> None:
    path = fixtures / "torchtitan_gpt2_wps.log"
    text = path.read_text()
    assert read_titan.looks_like_log(text)
    rate, _, n, _ = read_titan.tps(text, path)
    assert (rate, n) == (112109.0, 3)                       # steps 20, 30, 40 (step 1 and the first after it left out)


def test_a_log_and_its_job_config_give_a_step(fixtures) -> None:
    log, cfg = fixtures / "torchtitan_flex_debug.log", fixtures / "torchtitan_llama3_8b.toml"
    config = tomllib.loads(cfg.read_text())
    assert read_titan.looks_like_config(config)
    with pytest.raises(SpecError, match="data_parallel_shard_degree is -1"):
        read_titan.parse(log.read_text(), log, config, cfg)
    step = read_titan.parse(log.read_text(), log, config, cfg, gpus=8)
    (plan,) = step.plans
    assert step.model.name == "llama3-8b" and step.model.seq_len == 8192
    # selective with no selective_ac_option: the TOML configs' default "2" wraps every second block whole
    assert (plan.dp, plan.tp, plan.zero, plan.recompute, plan.recompute_layers, plan.global_batch) == (
        8, 1, 3, "full", 16, 8)
    assert plan.loss_impl == "torch"
    assert step.seconds == pytest.approx(8 * 8192 / (34824.0 * 8))


@pytest.mark.parametrize("option,expected", [("op", ("op", 0)), ("1", ("full", 0)), ("4", ("full", 8)),
                                             ("64", ("none", 0))])
def test_selective_ac_options_map_to_recompute(fixtures, option, expected) -> None:
    """torchtitan's selective AC: "op" is the per-op policy, an integer n wraps every n-th block whole."""
    log, cfg = fixtures / "torchtitan_flex_debug.log", fixtures / "torchtitan_llama3_8b.toml"
    config = tomllib.loads(cfg.read_text())
    config["activation_checkpoint"]["selective_ac_option"] = option
    config["training"]["compile"] = True
    (plan,) = read_titan.parse(log.read_text(), log, config, cfg, gpus=8).plans
    assert (plan.recompute, plan.recompute_layers) == expected
    assert plan.loss_impl == "torch-compiled"          # a local_batch_size config compiles its loss with the model


def test_a_flavor_outside_the_catalog_needs_a_model(fixtures) -> None:
    log = fixtures / "torchtitan_flex_debug.log"
    config = {"model": {"name": "llama3", "flavor": "debugmodel"}, "training": {"local_batch_size": 8,
                                                                                 "seq_len": 2048}}
    with pytest.raises(SpecError, match="not a catalog model; give --model"):
        read_titan.parse(log.read_text(), log, config, log.with_suffix(".toml"), gpus=8)
    step = read_titan.parse(log.read_text(), log, config, log.with_suffix(".toml"), model=get_model("gpt-1.7b"),
                            gpus=8)
    assert step.model.seq_len == 2048
