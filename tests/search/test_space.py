"""The search space: loading, fixing axes, enumeration and rejection reasons."""

import pytest

from autoplan.errors import SpecError
from autoplan.search.space import enumerate_plans, load_space, reason_key
from autoplan.specs import get_model, violations


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
