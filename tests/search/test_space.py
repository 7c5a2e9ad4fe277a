"""The search space: loading, fixing axes, enumeration and rejection reasons."""

import pytest

from autoplan.errors import SpecError
from autoplan.search.space import Space, enumerate_plans, explain_no_plan, load_space, reason_key, relaxations
from autoplan.specs import ModelSpec
from autoplan.families.catalog import get_model
from autoplan.families.transformer.validity import violations
from autoplan.specs.layout import chunk_layers


def test_default_space_enumerates_only_valid_plans():
    model = get_model("gpt3")
    space = load_space()
    plans, rejected = enumerate_plans(model, 1024, space, 1536)
    assert plans and all(not violations(model, 1024, p) for p in plans)
    assert len({p for p in plans}) == len(plans)
    assert sum(rejected.values()) > 0
    assert all(p.gpus == 1024 for p in plans)


def test_counts_add_up_without_divisibility_shortcuts():
    model = get_model("gpt-1.7b")
    space = load_space(fixed={"tp": 1, "cp": 1})
    plans, rejected = enumerate_plans(model, 32, space, 512)
    # every combination is either valid or rejected at least once
    assert len(plans) + min(1, sum(rejected.values())) <= space.raw_size()


def test_fixing_an_axis_pins_it():
    plans, _ = enumerate_plans(get_model("gpt3"), 1024, load_space(fixed={"tp": 8, "recompute": "full"}), 1536)
    assert plans and {p.tp for p in plans} == {8} and {p.recompute for p in plans} == {"full"}


def test_unknown_axis_and_bad_values_are_user_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("tp = [1, 2]\nwarp = [3]\n")
    with pytest.raises(SpecError, match="unknown axis warp"):
        load_space(str(bad))
    bad.write_text("schedule = ['zigzag']\n")
    with pytest.raises(SpecError, match="zigzag"):
        load_space(str(bad))
    bad.write_text("tp = [0]\n")
    with pytest.raises(SpecError, match="positive integer"):
        load_space(str(bad))
    bad.write_text("tp = [1,\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_space(str(bad))
    with pytest.raises(SpecError, match="not found"):
        load_space("nonexistent-space")


def test_reason_key_drops_numbers():
    assert reason_key("global batch 1536 is not divisible by dp·micro_batch = 48·1") == \
        "global batch N is not divisible by dp·micro_batch = N·N"


def test_values_are_checked_by_type_and_repeats_dropped(tmp_path):
    f = tmp_path / "s.toml"
    for text, match in [("sequence_parallel = [1]\n", "not one of false, true"), ("zero = [true]\n", "not one of 0"),
                        ("zero = [1.0]\n", "not one of 0"), ("tp = [2.0]\n", "positive integer"),
                        ("tp = []\n", "axis tp has no values"), ("tp = [33554432]\n", "larger than"),
                        ("virtual_stage = [2]\n", "did you mean virtual_stages")]:
        f.write_text(text)
        with pytest.raises(SpecError, match=match):
            load_space(str(f))
    f.write_text("tp = [2, 4, 2]\nrecompute = 'full'\n")
    space = load_space(str(f))
    assert space.axes["tp"] == (2, 4) and space.axes["recompute"] == ("full",)
    with pytest.raises(SpecError, match="^--tp: value 0"):
        load_space(fixed={"tp": 0})


def test_rejections_keep_their_thresholds():
    assert reason_key("the interleaved schedule needs pp > 1") == "the interleaved schedule needs pp > 1"
    assert reason_key("sequence length 100 is not divisible by 2·cp = 4") == \
        "sequence length N is not divisible by N·cp = N"
    assert reason_key("ep 3 / etp 1 need a mixture-of-experts model; gpt-1.7b has no experts") == \
        "ep N / etp N need a mixture-of-experts model; gpt-1.7b has no experts"
    assert reason_key("precision mxfp8 needs Blackwell; the H100-SXM5-80GB has none; needs 75.1 GiB") == \
        "precision mxfp8 needs Blackwell; the H100-SXM5-80GB has none; needs N GiB"


@pytest.mark.parametrize("name, gpus, batch, fixed, first", [
    ("gpt3", 1024, 1536, {"tp": 5}, "--tp 4"),                               # heads and GPUs need a power of 2
    ("gpt3", 1024, 1537, {}, "--global-batch 1536"),                          # a prime-ish batch
    ("gpt3", 1024, 1536, {"sequence_parallel": True, "tp": 1}, "--tp 2"),    # SP needs TP
    ("gpt3", 24, 1536, {"tp": 16}, "--gpus 32"),                              # 16 does not divide 24
    ("gpt3", 1024, 1536, {"schedule": "interleaved", "virtual_stages": 5}, "--virtual-stages 6"),
])
def test_an_empty_space_names_the_smallest_change_that_admits_plans(name, gpus, batch, fixed, first):
    model, space = get_model(name), load_space(fixed=fixed)
    plans, rejected = enumerate_plans(model, gpus, space, batch)
    assert not plans
    found = relaxations(model, gpus, space, batch, gpus_per_node=8)
    assert found[0].flags == first and found[0].plans > 0
    message = explain_no_plan(model, gpus, space, batch, rejected, gpus_per_node=8)
    assert f"smallest change that admits plans: {first} ({found[0].plans} valid)" in message
    for reason, n in rejected.items():
        assert f"{reason} ({n}×)" in message
    # the suggestion holds: applying it gives exactly that many valid plans
    kind, _, value = first.removeprefix("--").partition(" ")
    if kind == "global-batch":
        assert len(enumerate_plans(model, gpus, space, int(value))[0]) == found[0].plans
    elif kind == "gpus":
        assert len(enumerate_plans(model, int(value), space, batch)[0]) == found[0].plans
    else:
        again = load_space(fixed={**fixed, kind.replace("-", "_"): int(value)})
        assert len(enumerate_plans(model, gpus, again, batch)[0]) == found[0].plans


def test_when_no_single_change_helps_it_says_so(tmp_path):
    model = ModelSpec(name="one-head", layers=4, hidden=64, heads=1, ffn_hidden=256, vocab=100, seq_len=64)
    space = load_space(fixed={"tp": 1, "sequence_parallel": True, "pp": 2, "zero": 3, "cp": 1})
    plans, rejected = enumerate_plans(model, 8, space, 64)
    assert not plans
    assert relaxations(model, 8, space, 64, gpus_per_node=8) == []
    assert "no single change" in explain_no_plan(model, 8, space, 64, rejected, gpus_per_node=8)


def test_explaining_the_default_space_names_the_nearest_batch():
    """A prime-ish global batch leaves the default space empty; the hint names the batch that admits plans."""
    model, space = get_model("gpt3"), load_space()
    plans, rejected = enumerate_plans(model, 1024, space, 1537)
    assert not plans
    text = explain_no_plan(model, 1024, space, 1537, rejected, gpus_per_node=8)
    valid = len(enumerate_plans(model, 1024, space, 1536)[0])
    assert f"smallest change that admits plans: --global-batch 1536 ({valid} valid)" in text


def test_trial_parameters_tell_every_plan_of_a_space_apart(tiny_gpt):
    """A sampler names a plan by its parameters: plans differing in any axis (the overlap flags too) stay distinct."""
    from autoplan.search.study import plan_params

    space = Space({"tp": (1, 2), "pp": (1, 2), "cp": (1,), "micro_batch": (1, 2), "schedule": ("1f1b", "interleaved"),
                   "virtual_stages": (2,), "sequence_parallel": (False, True), "recompute": ("none",), "zero": (0, 1),
                   "overlap_grad_reduce": (False, True), "overlap_param_gather": (False, True)})
    plans, _ = enumerate_plans(tiny_gpt, 8, space, 32)
    assert len(plans) > 16
    assert len({tuple(plan_params(s).values()) for s in plans}) == len(plans)


def test_llama3_405b_space_proposes_meta_layout():
    """126 layers split over 16 stages only unevenly: the space holds Meta's 7 + 14·8 + 7 layout (Llama 3 §3.3); at
    eight chunks the outer ones keep only the embedding or the loss (Megatron-Core's account-for-embedding split)."""
    space = Space({"tp": (8,), "pp": (16,), "schedule": ("1f1b", "interleaved"), "virtual_stages": (2, 4, 8)})
    plans, rejected = enumerate_plans(get_model("llama3-405b"), 16384, space, 2048)
    assert {(s.schedule, s.chunks, s.first_stage_layers, s.last_stage_layers) for s in plans} == {
        ("1f1b", 1, 7, 7), ("interleaved", 2, 7, 7), ("interleaved", 4, 7, 7), ("interleaved", 8, 7, 7)}
    assert chunk_layers(126, next(s for s in plans if s.chunks == 8)) == (0, 1, 0)
    assert not rejected


_LAYOUTS = {"tp": [1, 3, 4], "pp": [1, 2, 4], "cp": [1, 2], "micro_batch": [1, 3], "virtual_stages": [2, 3],
            "schedule": ["1f1b", "interleaved", "zb-h1", "zbv", "dualpipe"], "sequence_parallel": [False, True],
            "recompute": ["none", "full"], "recompute_layers": [0, 1, 3]}
_KNOBS = {"tp": [1, 2], "pp": [1, 2], "cp": [1, 2], "recompute": ["none", "full", "op", "modules"], "zero": [0, 1, 3],
          "activation_offload_layers": [0, 2], "optimizer_offload_pct": [0, 50], "sequence_parallel": [False, True]}
_NUMERICS = {"tp": [1, 2], "pp": [1, 2], "cp": [1, 2], "precision": ["bf16", "fp8"], "fp8_param_gather": [False, True],
             "tp_comm_overlap": [False, True], "cp_comm": ["p2p", "a2a"], "ep": [1, 2], "ep_overlap": [False, True],
             "sequence_parallel": [False, True], "micro_batch": [1], "recompute": ["none"], "zero": [0, 1]}


@pytest.mark.parametrize("model_name, gpus, space, batch", [
    ("gpt3", 1024, "default", 1536), ("gpt3", 1024, "zero-bubble", 1536), ("mixtral-8x7b", 64, "moe", 512),
    ("gpt-1.7b", 48, _LAYOUTS, 96), ("gpt-1.7b", 16, _KNOBS, 32), ("mixtral-8x7b", 16, _KNOBS, 32),
    ("gpt-1.7b", 16, _NUMERICS, 32), ("mixtral-8x7b", 16, _NUMERICS, 32), ("resnet50", 8, "cnn", 64)])
def test_rules_asked_once_per_key_give_every_plans_own_reasons(monkeypatch, model_name, gpus, space, batch):
    # the enumeration asks each group of a family's rules once per distinct value of the fields it reads
    # (registry.violation_checker): the same plans and the same count of every reason as asking every plan
    import autoplan.search.space as space_module
    from autoplan.families import registry

    sp = Space(dict(load_space("default").axes) | space) if isinstance(space, dict) else load_space(space)
    model = get_model(model_name)
    fast = enumerate_plans(model, gpus, sp, batch)
    monkeypatch.setattr(space_module, "violation_checker",
                        lambda m, g: lambda s, fields: registry.violations(m, g, s))
    assert enumerate_plans(model, gpus, sp, batch) == fast
    assert fast[0] and sum(fast[1].values()) > 0
