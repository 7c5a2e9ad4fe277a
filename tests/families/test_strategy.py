"""Strategy fields and validity rules: each rule fires alone, with the numbers a person needs to fix the plan."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

GPT3 = get_model("gpt3-175b")           # 96 layers, 96 heads, seq 2048


def _only(model: ModelSpec, gpus: int, s: Strategy) -> str:
    found = violations(model, gpus, s)
    assert len(found) == 1, found
    return found[0]


def test_valid_plans_have_no_violations(tiny_gpt):
    assert violations(tiny_gpt, 1, Strategy()) == []
    assert violations(tiny_gpt, 64, Strategy(tp=2, pp=4, dp=8, micro_batch=2, global_batch=64)) == []
    assert violations(tiny_gpt, 64, Strategy(tp=4, pp=2, dp=4, cp=2, micro_batch=1, global_batch=16,
                                             schedule="interleaved", virtual_stages=2, sequence_parallel=True,
                                             recompute="selective", zero=1)) == []
    assert violations(GPT3, 1024, Strategy(tp=8, pp=8, dp=16, global_batch=1536, schedule="interleaved",
                                           virtual_stages=3, sequence_parallel=True, zero=1)) == []
    assert violations(tiny_gpt, 8, Strategy(dp=8, global_batch=8, zero=3)) == []


def test_gpu_count_rule(tiny_gpt):
    msg = _only(tiny_gpt, 64, Strategy(tp=2, pp=2, dp=2, cp=2, global_batch=2))
    assert "2·2·2·2" in msg and "16" in msg and "64" in msg


def test_heads_divisible_by_tp():
    model = ModelSpec(name="m", layers=8, hidden=384, heads=12, ffn_hidden=1536, vocab=1000, seq_len=256)
    msg = _only(model, 8, Strategy(tp=8, global_batch=1))
    assert "12" in msg and "tp 8" in msg and "heads" in msg


def test_kv_heads_divisible_by_tp():
    llama = get_model("llama3-70b")          # 64 heads, 8 kv heads
    msg = _only(llama, 16, Strategy(tp=16, global_batch=1))
    assert "kv heads 8" in msg and "tp 16" in msg


def test_ffn_divisible_by_tp():
    model = ModelSpec(name="m", layers=8, hidden=256, heads=8, ffn_hidden=1012, vocab=1000, seq_len=256)
    msg = _only(model, 8, Strategy(tp=8, global_batch=1))
    assert "ffn_hidden 1012" in msg and "tp 8" in msg


def test_layers_divisible_by_pp_times_virtual_stages(tiny_gpt):
    msg = _only(tiny_gpt, 3, Strategy(pp=3, global_batch=3))
    assert "layers 8" in msg and "3·1" in msg
    msg = _only(tiny_gpt, 4, Strategy(pp=4, global_batch=4, schedule="interleaved", virtual_stages=4))
    assert "layers 8" in msg and "4·4" in msg


def test_global_batch_divisible_by_dp_times_micro_batch(tiny_gpt):
    msg = _only(tiny_gpt, 4, Strategy(dp=4, micro_batch=2, global_batch=20))
    assert "global batch 20" in msg and "4·2" in msg


def test_sequence_divisible_by_twice_cp():
    model = ModelSpec(name="m", layers=8, hidden=256, heads=8, ffn_hidden=1024, vocab=1000, seq_len=100)
    msg = _only(model, 8, Strategy(cp=8, global_batch=1))
    assert "100" in msg and "2·cp = 16" in msg


def test_sequence_parallel_needs_tp(tiny_gpt):
    msg = _only(tiny_gpt, 1, Strategy(sequence_parallel=True))
    assert "sequence parallel" in msg and "tp > 1" in msg


def test_interleaved_rules(tiny_gpt):
    msg = _only(tiny_gpt, 1, Strategy(schedule="interleaved", virtual_stages=2, global_batch=4))
    assert "pp > 1" in msg
    msg = _only(tiny_gpt, 2, Strategy(pp=2, schedule="interleaved", virtual_stages=1, global_batch=4))
    assert "virtual_stages ≥ 2" in msg
    msg = _only(tiny_gpt, 4, Strategy(pp=4, schedule="interleaved", virtual_stages=2, global_batch=6))
    assert "(6)" in msg and "(4)" in msg and "divisible" in msg
    msg = _only(tiny_gpt, 2, Strategy(pp=2, schedule="1f1b", virtual_stages=2, global_batch=4))
    assert "virtual_stages 2" in msg and "1f1b" in msg


def test_zero_3_cannot_pipeline_but_zero_2_can(tiny_gpt):
    msg = _only(tiny_gpt, 4, Strategy(pp=2, dp=2, global_batch=4, zero=3))
    assert "ZeRO stage 3" in msg and "pp > 1" in msg
    # Llama 3 (arXiv 2407.21783 §3.3.1): FSDP shards gradients and optimizer state beside pipeline parallelism
    for zero in (1, 2):
        assert violations(tiny_gpt, 4, Strategy(pp=2, dp=2, global_batch=4, zero=zero)) == []


def test_recompute_modules_is_for_moe_models(tiny_gpt):
    msg = _only(tiny_gpt, 1, Strategy(global_batch=1, recompute="modules"))
    assert "modules" in msg and "MoE" in msg


def test_several_rules_fire_together(tiny_gpt):
    found = violations(tiny_gpt, 8, Strategy(tp=3, pp=3, sequence_parallel=False, global_batch=1, zero=2))
    assert len(found) >= 4       # gpus, heads, ffn, layers, zero


@pytest.mark.parametrize("field", ["dp", "tp", "pp", "cp", "micro_batch", "global_batch", "virtual_stages"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_non_positive_or_non_integer_sizes_raise(field, value):
    with pytest.raises(SpecError, match="positive integer"):
        Strategy(**{field: value})


@pytest.mark.parametrize("kw,match", [(dict(schedule="x"), "schedule 'x'"), (dict(recompute="some"), "recompute"),
                                      (dict(zero=4), "zero stage")])
def test_bad_choices_raise(kw, match):
    with pytest.raises(SpecError, match=match):
        Strategy(**kw)


def test_tp_zero_raises():
    with pytest.raises(SpecError, match="tp"):
        Strategy(tp=0)


def test_derived_properties():
    s = Strategy(tp=2, pp=4, dp=8, cp=2, micro_batch=2, global_batch=64, schedule="interleaved", virtual_stages=3)
    assert s.gpus == 128 and s.micro_batches == 4 and s.chunks == 3
    assert Strategy(virtual_stages=3).chunks == 1
    assert s.to_dict()["virtual_stages"] == 3
    label = s.short()
    assert "tp2" in label and "pp4" in label and "dp8" in label and "cp2" in label and "int3" in label


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2]),
       mb=st.integers(1, 4), m=st.integers(1, 16))
def test_well_formed_plans_of_the_tiny_model_are_valid(tiny_gpt, tp, pp, cp, mb, m):
    assume(tp * pp * cp <= 64)
    dp = 64 // (tp * pp * cp)
    s = Strategy(tp=tp, pp=pp, cp=cp, dp=dp, micro_batch=mb, global_batch=m * dp * mb)
    assert violations(tiny_gpt, 64, s) == []
    assert s.micro_batches == m


# ------------------------------------------------------------------------------------------- cluster sizing


def test_with_gpus_needs_whole_nodes():
    cluster = load_cluster("dgx-a100-80g")
    with pytest.raises(SpecError, match="8") as err:
        cluster.with_gpus(12)
    assert "8 or 16" in str(err.value)
    with pytest.raises(SpecError):
        cluster.with_gpus(0)
    assert cluster.with_gpus(64).nodes == 8 and cluster.with_gpus(64).gpus == 64


def test_load_cluster_sizes_and_unknown_names():
    assert load_cluster("dgx-h100-80g", 16).gpus == 16
    with pytest.raises(SpecError, match="dgx-a100-80g"):
        load_cluster("dgx-a100-80")
    with pytest.raises(SpecError, match="8"):
        load_cluster("dgx-a100-80g", 12)


# ------------------------------------------------------------------------------------------------ one definition

def test_every_field_carries_a_knob_and_the_derived_tables_agree():
    from autoplan.families.strategy import AXES, KNOBS, knob_of

    names = [f.name for f in KNOBS]
    assert all("knob" in f.metadata for f in KNOBS)
    assert [a for a in names if knob_of(a).axis] == list(AXES)
    assert {"dp", "global_batch"}.isdisjoint(AXES)              # they follow from the GPUs and the search inputs
    for f in KNOBS:
        k = knob_of(f.name)
        assert f.default in k.choices if k.choices else type(f.default) is int
        assert k.fix_help is None or k.axis                      # only an axis can be pinned


@pytest.mark.parametrize("name", ["sequence_parallel", "recompute", "zero", "overlap_p2p_comm", "grad_reduce_in_fp32",
                                  "gradient_accumulation_fusion", "micro_batch", "virtual_stages"])
def test_a_choice_field_refuses_values_outside_its_choices(name):
    from autoplan.families.strategy import knob_of

    bad = {"micro_batch": 0, "virtual_stages": True}.get(name, "bogus" if knob_of(name).choices != (False, True) else 1)
    with pytest.raises(SpecError, match=name.replace("_", "-") if name != "recompute" else "recompute 'bogus'"):
        Strategy(**{name: bad})


def test_labels_come_from_the_knobs():
    s = Strategy(tp=4, pp=8, dp=32, micro_batch=2, schedule="interleaved", virtual_stages=12, sequence_parallel=True,
                 zero=1)
    assert s.short() == "tp4 pp8 dp32 mb2 int12 sp z1"
    assert Strategy(cp=2, recompute="selective", schedule="gpipe").short() == "tp1 pp1 dp1 cp2 mb1 gpipe sel"
    assert Strategy(recompute="full", overlap_grad_reduce=False).short() == "tp1 pp1 dp1 mb1 1f1b full"


def test_zero_bubble_schedules_validity(tiny_gpt):
    # Qi et al. 2024: zb-h1 is 1F1B with a split backward; zbv holds exactly two chunks per rank, in a V
    assert violations(tiny_gpt, 8, Strategy(pp=4, dp=2, global_batch=8, schedule="zb-h1")) == []
    assert violations(tiny_gpt, 8, Strategy(pp=4, dp=2, global_batch=8, schedule="zbv")) == []
    assert violations(tiny_gpt, 8, Strategy(pp=4, dp=2, global_batch=8, schedule="zbv", virtual_stages=2)) == []
    assert Strategy(pp=4, schedule="zbv").chunks == 2 and Strategy(pp=4, schedule="zb-h1").chunks == 1
    assert "pp > 1" in _only(tiny_gpt, 8, Strategy(dp=8, global_batch=8, schedule="zb-h1"))
    assert "2 model chunks per rank" in _only(tiny_gpt, 8, Strategy(pp=2, dp=4, global_batch=8, schedule="zbv",
                                                                      virtual_stages=4))
    assert "pp·virtual_stages = 8·2" in _only(tiny_gpt, 8, Strategy(pp=8, global_batch=8, schedule="zbv"))
    # a V's uneven layout gives rank 0's layers only (it holds both ends): 2 + 6 = 8 layers over 3 ranks' 6 chunks
    uneven = violations(tiny_gpt, 4, Strategy(pp=4, global_batch=8, schedule="zbv", first_stage_layers=1,
                                              last_stage_layers=1))
    assert any("not last stage layers 1" in r for r in uneven)
    assert violations(tiny_gpt, 4, Strategy(pp=4, global_batch=8, schedule="zbv", first_stage_layers=2)) == []
    assert Strategy(pp=4, schedule="zbv").short() == "tp1 pp4 dp1 mb1 zbv"


def test_zero_bubble_p2p_overlap_follows_the_reference_runtimes():
    # zbv: PyTorch's runtime posts sends asynchronously; zb-h1 keeps 1F1B's synchronous transfers
    assert not Strategy(pp=4, schedule="zbv").synchronous_p2p
    assert Strategy(pp=4, schedule="zbv", overlap_p2p_comm=False).synchronous_p2p
    assert Strategy(pp=4, schedule="zb-h1").synchronous_p2p


def test_dualpipev_needs_two_micro_batches_per_stage(tiny_gpt):
    # PyTorch ScheduleDualPipeV: at least as many micro-batches as stages (2 per rank, V placement)
    assert violations(tiny_gpt, 8, Strategy(pp=2, dp=4, global_batch=16, schedule="dualpipev")) == []
    assert Strategy(pp=2, schedule="dualpipev").chunks == 2
    msg = _only(tiny_gpt, 8, Strategy(pp=2, dp=4, global_batch=12, schedule="dualpipev"))
    assert "micro-batches (3) ≥ 2·pp (4)" in msg


def test_values_are_the_fields_in_order_without_the_cached_hash_and_label():
    s = Strategy(tp=2, pp=4, dp=16, virtual_stages=2, schedule="interleaved")
    fields = {f.name: getattr(s, f.name) for f in Strategy.KNOBS}
    hash(s), s.short()                                        # both cached in the plan's __dict__
    assert list(s.values().items()) == list(fields.items())
    assert Strategy.checked(s.values()) == s and Strategy.checked(s.values()).short() == s.short()
