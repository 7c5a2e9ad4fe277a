"""The MoE search space: chosen for MoE models by the CLI, expert axes enumerated, DeepSeek's published layout
(PP16 EP64 TP1 on 2048 GPUs, 61 layers split 3 + 14·4 + 2) among its valid plans."""

from __future__ import annotations

from autoplan.search.space import enumerate_plans, load_space
from autoplan.specs.catalog import get_model
from autoplan.specs.layout import balanced_layout


def test_balanced_layouts_up_to_three_layers_short_for_moe_only():
    assert balanced_layout(61, 16, 3) == (3, 2)           # DeepSeek-V3: 3 + 14·4 + 2
    assert balanced_layout(61, 16) == (0, 0)              # the dense default is unchanged
    assert balanced_layout(126, 16) == (7, 7)             # Llama 3 405B, as before
    assert balanced_layout(61, 32, 3) == (0, 0)           # the last stage would hold no layer


def test_deepseek_published_layout_is_in_the_moe_space():
    model = get_model("deepseek-v3")
    fixed = {"tp": 1, "pp": 16, "ep": 64, "micro_batch": 1, "etp": 1, "cp": 1}
    plans, rejected = enumerate_plans(model, 2048, load_space("moe", fixed), 15360)
    assert plans, rejected
    assert all((p.dp, p.first_stage_layers, p.last_stage_layers) == (128, 3, 2) for p in plans)
    assert {p.ep_overlap for p in plans} == {False, True}


def test_the_moe_space_enumerates_expert_degrees_that_divide_the_experts():
    model = get_model("mixtral-8x7b")
    plans, rejected = enumerate_plans(model, 64, load_space("moe", {"pp": 4, "tp": 1}), 512)
    assert {p.ep for p in plans} == {1, 2, 4, 8}
    assert any(k.startswith("experts N are not divisible by ep") for k in rejected)
