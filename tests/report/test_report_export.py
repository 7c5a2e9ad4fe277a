"""Launch settings: Megatron-LM arguments and torchtitan TOML, checked against closed forms."""

from __future__ import annotations

import re

from dataclasses import replace

import pytest

from autoplan.errors import SpecError
from autoplan.families.transformer.export_torchtitan import torchtitan_python
from autoplan.report.export import export_text, megatron_args, megatron_text
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model

GPT3 = get_model("gpt3")
LLAMA = get_model("llama3-8b")


def flags(args: list[str]) -> dict[str, str | None]:
    """``--name value`` lines as {name: value} (None for switches)."""
    out = {}
    for a in args:
        name, _, value = a.partition(" ")
        out[name] = value or None
    return out


@pytest.mark.parametrize("pp,v", [(2, 2), (4, 3), (8, 6), (8, 12), (16, 3)])
def test_virtual_stage_layers_is_layers_over_pp_times_v(pp, v):
    s = Strategy(dp=1024 // (4 * pp), tp=4, pp=pp, micro_batch=1, global_batch=1536, schedule="interleaved",
                 virtual_stages=v, zero=1)
    f = flags(megatron_args(s, GPT3))
    assert int(f["--num-layers-per-virtual-pipeline-stage"]) == GPT3.layers // (pp * v)
    assert int(f["--pipeline-model-parallel-size"]) == pp and int(f["--tensor-model-parallel-size"]) == 4
    assert (int(f["--micro-batch-size"]), int(f["--global-batch-size"])) == (1, 1536)


def test_plain_1f1b_plan():
    s = Strategy(dp=16, tp=8, pp=8, micro_batch=2, global_batch=1536, sequence_parallel=True)
    f = flags(megatron_args(s, GPT3))
    assert f["--tensor-model-parallel-size"] == "8" and f["--pipeline-model-parallel-size"] == "8"
    assert "--sequence-parallel" in f and "--num-layers-per-virtual-pipeline-stage" not in f
    assert "--use-distributed-optimizer" not in f and "--overlap-param-gather" not in f
    assert "--recompute-granularity" not in f
    assert (f["--num-layers"], f["--hidden-size"], f["--num-attention-heads"]) == ("96", "12288", "96")
    assert f["--seq-length"] == "2048" and f["--ffn-hidden-size"] == str(4 * 12288)
    assert "--group-query-attention" not in f


def test_recompute_and_distributed_optimizer():
    full = flags(megatron_args(Strategy(dp=128, tp=8, global_batch=1536, recompute="full", zero=1), GPT3))
    assert full["--recompute-granularity"] == "full" and full["--recompute-method"] == "uniform"
    assert full["--recompute-num-layers"] == "1"
    assert "--use-distributed-optimizer" in full and "--overlap-param-gather" in full
    sel = flags(megatron_args(Strategy(dp=128, tp=8, global_batch=1536, recompute="selective"), GPT3))
    assert sel["--recompute-granularity"] == "selective" and "--recompute-method" not in sel


def test_grouped_query_attention_model_shape():
    f = flags(megatron_args(Strategy(dp=8, tp=2, global_batch=64), LLAMA, flash_attention=False))
    assert "--group-query-attention" in f and f["--num-query-groups"] == str(LLAMA.kv_heads)
    assert {"--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights"} <= set(f)
    assert f["--normalization"] == "RMSNorm" and f["--position-embedding-type"] == "rope"
    assert "--use-flash-attn" not in f


@pytest.mark.parametrize("zero", [2, 3])
def test_zero_2_and_3_run_as_megatron_fsdp(zero):
    s = Strategy(dp=16, global_batch=64, zero=zero)
    f = flags(megatron_args(s, GPT3))
    assert "--use-megatron-fsdp" in f and f["--ckpt-format"] == "fsdp_dtensor"
    assert f["--data-parallel-sharding-strategy"] == {2: "optim_grads", 3: "optim_grads_params"}[zero]
    assert "--overlap-param-gather" in f
    with pytest.raises(SpecError, match="--framework megatron"):
        export_text("megatron", Strategy(dp=4, pp=4, global_batch=64, zero=2), GPT3)


def test_megatron_text_is_pasteable():
    s = Strategy(dp=32, tp=4, pp=8, global_batch=1536, schedule="interleaved", virtual_stages=6, zero=1)
    lines = megatron_text(s, GPT3, header="rank 1").splitlines()
    comments = [x for x in lines if x.startswith("#")]
    launch, *args = [x for x in lines if not x.startswith("#")]
    assert comments[0] == "# rank 1" and any("data-parallel size 32" in c for c in comments)
    assert launch.startswith("torchrun ") and launch.endswith("pretrain_gpt.py \\")
    assert all(a.startswith("  --") for a in args)
    assert all(a.endswith(" \\") for a in args[:-1]) and not args[-1].endswith("\\")


def test_unknown_model_leaves_shape_out():
    s = Strategy(dp=32, tp=4, pp=8, global_batch=1536, schedule="interleaved", virtual_stages=6)
    f = flags(megatron_args(s, None))
    assert "--num-layers" not in f and f["--num-virtual-stages-per-pipeline-rank"] == "6"


def _titan(s, model=GPT3) -> dict[str, str]:
    """``config.section.field = value`` lines of a torchtitan export, by ``section.field``."""
    text = torchtitan_python(s, model)
    return dict(re.findall(r"^    config\.(\w+(?:\.\w+)?) = (.*)$", text, re.M))


def test_torchtitan_interleaved_replicated():
    s = Strategy(dp=16, tp=2, pp=16, cp=2, micro_batch=1, global_batch=1536, schedule="interleaved",
                 virtual_stages=6, sequence_parallel=True, zero=0)
    c = _titan(s)
    assert (c["parallelism.data_parallel_replicate_degree"], c["parallelism.data_parallel_shard_degree"]) == ("16", "1")
    assert (c["parallelism.tensor_parallel_degree"], c["parallelism.pipeline_parallel_degree"],
            c["parallelism.context_parallel_degree"]) == ("2", "16", "2")
    assert c["parallelism.pipeline_parallel_schedule"] == '"Interleaved1F1B"'
    assert c["parallelism.pipeline_parallel_layers_per_stage"] == str(GPT3.layers // (16 * 6))
    assert c["parallelism.num_pp_microbatches"] == str(1536 // 16)
    assert c["activation_checkpoint"] == "None"
    assert c["training.num_tokens_per_train_step"] == str(1536 * 2048)
    assert c["training.num_tokens_per_microbatch_per_dp_rank"] == "2048"


@pytest.mark.parametrize("schedule,name", [("gpipe", "GPipe"), ("1f1b", "1F1B")])
def test_torchtitan_schedules_and_fsdp(schedule, name):
    c = _titan(Strategy(dp=16, pp=4, global_batch=64, schedule=schedule, recompute="full"))
    assert c["parallelism.pipeline_parallel_schedule"] == f'"{name}"'
    assert c["activation_checkpoint"] == "FullAC.Config()"
    z3 = _titan(Strategy(dp=64, global_batch=64, zero=3, recompute="op"))
    assert (z3["parallelism.data_parallel_shard_degree"], z3["parallelism.data_parallel_replicate_degree"]) \
        == ("64", "1")
    assert z3["parallelism.fsdp_reshard_after_forward"] == '"always"'
    assert z3["activation_checkpoint"] == "SelectiveAC.Config()"
    assert "parallelism.pipeline_parallel_schedule" not in z3
    z1 = _titan(Strategy(dp=16, pp=4, global_batch=64, zero=1))          # FSDP2 under pipelining: ZeRO-1's memory
    assert z1["parallelism.data_parallel_shard_degree"] == "16"


def test_unknown_format():
    with pytest.raises(SpecError, match="megatron, torchtitan"):
        export_text("jax", Strategy(), GPT3)
    with pytest.raises(SpecError, match="torchrec does not launch it"):
        export_text("torchrec", Strategy(), GPT3)


def test_p2p_overlap_and_gradient_dtype_flags():
    s = Strategy(dp=32, tp=4, pp=8, global_batch=1536, schedule="interleaved", virtual_stages=3)
    f = flags(megatron_args(s, GPT3))
    assert "--no-overlap-p2p-communication" not in f and "--accumulate-allreduce-grads-in-fp32" in f
    f = flags(megatron_args(Strategy(**{**s.to_dict(), "overlap_p2p_comm": False, "grad_reduce_in_fp32": False}),
                            GPT3))
    assert "--no-overlap-p2p-communication" in f and "--accumulate-allreduce-grads-in-fp32" not in f
    assert "--no-gradient-accumulation-fusion" not in f
    f = flags(megatron_args(replace(s, gradient_accumulation_fusion=False), GPT3))
    assert "--no-gradient-accumulation-fusion" in f


def _meta(**kw) -> Strategy:
    return Strategy(**{"tp": 8, "pp": 16, "dp": 128, "global_batch": 2048, "first_stage_layers": 7,
                       "last_stage_layers": 7} | kw)


def test_uneven_1f1b_exports_megatron_first_and_last_stage_layers():
    f = flags(megatron_args(_meta(), get_model("llama3-405b")))
    assert f["--decoder-first-pipeline-num-layers"] == "7" and f["--decoder-last-pipeline-num-layers"] == "7"
    only_last = flags(megatron_args(_meta(first_stage_layers=0, last_stage_layers=6), None))
    assert "--decoder-first-pipeline-num-layers" not in only_last
    assert "--decoder-first-pipeline-num-layers" not in flags(megatron_args(Strategy(pp=2, global_batch=2), None))


def test_uneven_interleaved_exports_the_virtual_stage_layout():
    f = flags(megatron_args(_meta(schedule="interleaved", virtual_stages=2), get_model("llama3-405b")))
    stages = f["--pipeline-model-parallel-layout"].strip('"').split("|")
    # 32 virtual stages: 3 layers and the embedding, 30 of 4, 3 and the loss (7 + 14·8 + 7 per rank)
    assert len(stages) == 32 and stages[0] == "E" + "t" * 3 and stages[-1] == "t" * 3 + "L"
    assert all(st == "tttt" for st in stages[1:-1])
    assert "--num-layers-per-virtual-pipeline-stage" not in f and "--decoder-first-pipeline-num-layers" not in f
    with pytest.raises(SpecError, match="layer count"):
        megatron_args(_meta(schedule="interleaved", virtual_stages=2), None)
    # two ranks holding the whole model (DeepSeek-V3 at PP 2, VP 8, 32 + 29 layers): Megatron-Bridge's layout
    two = Strategy(pp=2, dp=128, global_batch=4096, ep=32, schedule="interleaved", virtual_stages=8,
                   first_stage_layers=32, last_stage_layers=29)
    stages = flags(megatron_args(two, get_model("deepseek-v3")))["--pipeline-model-parallel-layout"].strip('"')
    assert stages == "|".join(["Etttt"] + ["tttt"] * 14 + ["tmL"])               # the MTP block beside the loss
    assert "--mtp-num-layers 1" in megatron_args(two, get_model("deepseek-v3"))
    assert not any(a.startswith("--mtp") for a in megatron_args(two, get_model("llama3-405b")))


def test_torchtitan_names_the_modules_of_uneven_stages():
    c = _titan(_meta(schedule="interleaved", virtual_stages=2), get_model("llama3-405b"))
    parts = eval(c["parallelism.module_fqns_per_model_part"])
    assert parts[0][:2] == ["tok_embeddings", "layers.0"] and parts[-1][-2:] == ["norm", "lm_head"]
    assert "parallelism.pipeline_parallel_layers_per_stage" not in c


@pytest.mark.parametrize("schedule,name", [("zb-h1", None), ("zbv", "ZBVZeroBubble"), ("dualpipev", "DualPipeV"),
                                           ("dualpipe", None)])
def test_zero_bubble_schedules_launch_with_torchtitan_only(schedule, name):
    s = Strategy(dp=16, tp=8, pp=8, global_batch=1536, schedule=schedule, sequence_parallel=True, zero=1)
    with pytest.raises(SpecError, match="Megatron-LM cannot launch.*1F1B and interleaved"):
        megatron_text(s, GPT3)
    if name is None:
        with pytest.raises(SpecError, match="torchtitan cannot launch"):
            torchtitan_python(s, GPT3)
        return
    c = _titan(s)
    assert c["parallelism.pipeline_parallel_schedule"] == f'"{name}"'
    assert c["parallelism.pipeline_parallel_layers_per_stage"] == str(GPT3.layers // 16)


@pytest.mark.parametrize("precision, fmt, recipe", [("fp8", "hybrid", "delayed"), ("fp8-current", "hybrid", "tensorwise"),
                                                    ("fp8-blockwise", "e4m3", "blockwise"), ("mxfp8", "e4m3", "mxfp8")])
def test_precision_exports_transformer_engine_fp8_flags(precision, fmt, recipe):
    s = Strategy(dp=16, tp=8, pp=8, global_batch=1536, sequence_parallel=True, zero=1, precision=precision)
    f = flags(megatron_args(s, GPT3))
    assert (f["--fp8-format"], f["--fp8-recipe"]) == (fmt, recipe)
    assert "--fp8-param-gather" not in f
    assert "--fp8-param-gather" in flags(megatron_args(replace(s, fp8_param_gather=True), GPT3))
    assert "--fp8-format" not in flags(megatron_args(replace(s, precision="bf16"), GPT3))


def test_tp_comm_overlap_and_cp_comm_type_flags():
    s = Strategy(dp=8, tp=8, pp=8, cp=2, global_batch=1536, sequence_parallel=True, tp_comm_overlap=True)
    f = flags(megatron_args(s, LLAMA))
    assert "--tp-comm-overlap" in f and "--cp-comm-type" not in f
    assert flags(megatron_args(replace(s, cp_comm="a2a"), LLAMA))["--cp-comm-type"] == "a2a"
    assert "--cp-comm-type" not in flags(megatron_args(replace(s, cp=1, dp=16, cp_comm="a2a"), LLAMA))
    mixed = megatron_text(replace(s, cp_comm="a2a+p2p"), LLAMA)
    assert "--cp-comm-type a2a+p2p" in mixed and "--hierarchical-context-parallel-sizes" in mixed
    assert _titan(s, LLAMA)["compile.enable_async_tensor_parallel"] == "True"
