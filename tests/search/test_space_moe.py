"""The MoE search space: chosen for MoE models by the CLI, expert axes enumerated, DeepSeek's published layout
(PP16 EP64 TP1 on 2048 GPUs, 61 layers split 15·4 + 1 beside the MTP module) among its valid plans."""

from __future__ import annotations

from autoplan.search.space import enumerate_plans, load_space
from autoplan.families.catalog import get_model
from autoplan.specs.layout import balanced_layout


def test_balanced_layouts_up_to_three_layers_short_for_moe_only():
    assert balanced_layout(61, 16, 3) == (3, 2)           # DeepSeek-V3: 3 + 14·4 + 2
    assert balanced_layout(61, 16) == (0, 0)              # the dense default is unchanged
    assert balanced_layout(126, 16) == (7, 7)             # Llama 3 405B, as before
    assert balanced_layout(61, 32, 3) == (0, 0)           # the last stage would hold no layer


def test_a_last_stage_running_mtp_modules_gives_up_the_whole_shortfall():
    # DeepSeek-V3 §2.2: the MTP module (a MoE block and a second head pass) sits beside the last stage's layers
    assert balanced_layout(61, 16, 3, output_heavy=True) == (0, 1)    # 15·4 + 1
    assert balanced_layout(61, 8, 3, output_heavy=True) == (0, 5)     # 7·8 + 5
    assert balanced_layout(61, 32, 3, output_heavy=True) == (0, 0)    # it would hold no layer: as before
    assert balanced_layout(64, 16, 3, output_heavy=True) == (0, 0)    # an even split stays even
    for pp in (2, 4, 8, 16):
        first, last = balanced_layout(61, pp, 3, output_heavy=True)
        assert first == 0 and 1 <= last and (61 - last) % (pp - 1) == 0 and last < (61 - last) // (pp - 1)


def test_deepseek_published_layout_is_in_the_moe_space():
    model = get_model("deepseek-v3")
    fixed = {"tp": 1, "pp": 16, "ep": 64, "micro_batch": 1, "etp": 1, "cp": 1}
    plans, rejected = enumerate_plans(model, 2048, load_space("moe", fixed), 15360)
    assert plans, rejected
    # the last stage runs the MTP module too: it holds one layer, the others four (15·4 + 1)
    assert all((p.dp, p.first_stage_layers, p.last_stage_layers) == (128, 0, 1) for p in plans)
    # Megatron-Core's EP overlap needs virtual stages with pp > 1 (61 layers do not interleave over 16 stages)
    assert any(p.schedule == "1f1b" for p in plans) and not any(p.ep_overlap for p in plans)


def test_the_moe_space_enumerates_expert_degrees_that_divide_the_experts():
    model = get_model("mixtral-8x7b")
    plans, rejected = enumerate_plans(model, 64, load_space("moe", {"pp": 4, "tp": 1}), 512)
    assert {p.ep for p in plans} == {1, 2, 4, 8}
    assert any(k.startswith("experts N are not divisible by ep") for k in rejected)


def test_the_moe_zero_bubble_space_is_the_moe_space_plus_the_zero_bubble_schedules():
    moe, zb = load_space("moe"), load_space("moe-zero-bubble")
    assert zb.axes["schedule"] == ("1f1b", "interleaved", "zb-h1", "zbv", "dualpipev", "dualpipe")
    others = lambda space: {k: v for k, v in space.axes.items() if k != "schedule"}  # noqa: E731
    assert others(zb) == others(moe)
    # DeepSeek-V3's published DualPipe plan is one of its plans (arXiv 2412.19437 §3.2: PP16 EP64 TP1)
    model = get_model("deepseek-v3")
    fixed = {"tp": 1, "pp": 16, "ep": 64, "schedule": "dualpipe", "recompute": "modules", "micro_batch": 1}
    plans, _ = enumerate_plans(model, 2048, load_space("moe-zero-bubble", fixed), 15360)
    assert any(p.ep_overlap is False and p.dp == 128 for p in plans)
