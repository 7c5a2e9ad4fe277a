"""Transformer validity rules that read a plan's layout: a partial recompute is held against a chunk's layers only
where the layout exists."""

from __future__ import annotations

from autoplan.families.catalog import get_model
from autoplan.families.registry import violations
from autoplan.families.strategy import Strategy


def test_a_partial_recompute_on_an_invalid_layout_reports_the_layout_not_a_crash():
    # an uneven V on one rank has no chunk layer count (it once divided by 2·(pp − 1) = 0)
    s = Strategy(dp=64, global_batch=128, schedule="zbv", first_stage_layers=1, recompute="full", recompute_layers=1)
    reasons = violations(get_model("gpt-1.7b"), 64, s)
    assert any("need pp > 1" in r for r in reasons) and not any("recompute_layers" in r for r in reasons)


def test_a_partial_recompute_of_a_whole_chunk_is_refused_on_a_valid_layout():
    s = Strategy(dp=16, pp=4, global_batch=128, recompute="full", recompute_layers=6)
    assert any("every layer of a model chunk (6 at most)" in r for r in violations(get_model("gpt-1.7b"), 64, s))
    assert not violations(get_model("gpt-1.7b"), 64, Strategy(dp=16, pp=4, global_batch=128, recompute="full",
                                                              recompute_layers=5))


# --------------------------------------------------------------- the groups a space's enumeration asks once per key

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from autoplan.families.transformer import moe as moe_family, validity  # noqa: E402

_SMALL = {"dp": [1, 2, 3, 4, 8], "tp": [1, 2, 3, 4, 8], "pp": [1, 2, 3, 4], "cp": [1, 2, 3], "spatial": [1, 2],
          "channel": [1, 2], "filter": [1], "micro_batch": [1, 2, 3], "global_batch": [8, 12, 16, 64],
          "virtual_stages": [1, 2, 3, 4], "recompute_layers": [0, 1, 2, 6], "activation_offload_layers": [0, 1, 40],
          "first_stage_layers": [0, 1, 3], "last_stage_layers": [0, 1, 3], "ep": [1, 2, 4], "etp": [1, 2]}


@st.composite
def _any_plan(draw: st.DrawFn) -> Strategy:
    """A plan with any value of every field a transformer rule reads (valid or not), built as a space builds
    its plans (``Strategy.checked``: no constructor checks)."""
    fields = Strategy.defaults()
    for name in fields:
        choices = _SMALL.get(name) or Strategy.knob_of(name).choices
        if choices:
            fields[name] = draw(st.sampled_from(list(choices)))
    return Strategy.checked(fields)


def _fields_read(rules, model, gpus, s: Strategy) -> set[str]:
    """The plan fields ``rules(model, gpus, s)`` reads: every attribute it (and each property it asks) takes from
    the plan, a property counted as the fields it reads (``Plan.gpus`` reads the degrees through ``__dict__``)."""
    seen: set[str] = set()

    class Recording(type(s)):
        def __getattribute__(self, name):
            seen.add(name)
            return object.__getattribute__(self, name)

    spy = object.__new__(Recording)
    spy.__dict__.update(s.__dict__)
    seen.clear()
    assert rules(model, gpus, spy) == rules(model, gpus, s)
    if "__dict__" in seen:
        seen |= set(type(s).DEGREES)
    return seen & set(Strategy.defaults())


_GROUPS = [("dense", "gpt-1.7b", validity.VIOLATION_GROUPS), ("moe", "mixtral-8x7b", moe_family.VIOLATION_GROUPS),
           ("mtp", "deepseek-v3", moe_family.VIOLATION_GROUPS), ("gqa", "llama3-70b", validity.VIOLATION_GROUPS)]


@pytest.mark.parametrize("label, model_name, groups", _GROUPS, ids=[g[0] for g in _GROUPS])
@settings(max_examples=300, deadline=None)
@given(s=_any_plan(), gpus=st.sampled_from([8, 16, 64]))
def test_each_group_of_rules_reads_only_the_fields_it_declares(label, model_name, groups, s, gpus):
    # a space's enumeration asks each group once per distinct value of its declared fields: a field it read but
    # did not declare would hand one plan another's reasons
    model = get_model(model_name)
    for reads, rules in groups:
        assert set(reads) <= set(Strategy.defaults()), rules.__name__      # every declared name is a plan field
        assert _fields_read(rules, model, gpus, s) <= set(reads), rules.__name__


@pytest.mark.parametrize("label, model_name, groups", _GROUPS, ids=[g[0] for g in _GROUPS])
@settings(max_examples=100, deadline=None)
@given(s=_any_plan(), gpus=st.sampled_from([8, 16, 64]))
def test_the_groups_in_order_are_the_familys_violations(label, model_name, groups, s, gpus):
    from autoplan.families.registry import family_of

    model = get_model(model_name)
    assert [r for _, rules in groups for r in rules(model, gpus, s)] == family_of(model).violations(model, gpus, s)
