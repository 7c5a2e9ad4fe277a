"""Megatron-LM and NeMo logs: the arguments block gives the model and plan, the iteration lines the step time."""

from __future__ import annotations

import pytest

from autoplan.calibrate import read_megatron
from autoplan.calibrate.model import SpecError


def test_a_megatron_log_gives_model_plan_and_step(fixtures) -> None:
    path = fixtures / "megatron_gpt_tp2_pp4_2021.log"
    step = read_megatron.parse(path.read_text(), path)
    m, (plan,) = step.model, step.plans
    assert (m.layers, m.hidden, m.heads, m.ffn_hidden, m.seq_len, m.vocab, m.head_dim) == (
        40, 5120, 40, 20480, 2048, 50432, 128)            # vocab from the 'padded vocab' line
    assert (plan.tp, plan.pp, plan.dp, plan.micro_batch, plan.global_batch, plan.recompute) == (
        2, 4, 1, 1, 1024, "full")                          # checkpoint_activations True: full recompute (2021)
    assert plan.overlap_grad_reduce is False               # DDP_impl local reduced after the backward
    assert plan.grad_reduce_in_fp32 is False
    assert step.gpus == 8
    # iterations 4-10 (the first three are warm-up): the median is iteration 5's 192769.9 ms
    assert step.seconds == pytest.approx(192.7699)
    assert "median of 7 iterations" in step.where


def test_iteration_lines_without_arguments_are_refused(fixtures) -> None:
    path = fixtures / "megatron_mixtral_iterations.log"
    text = path.read_text()
    assert read_megatron.looks_like(text)
    seconds, line, n = read_megatron.step_seconds(text.splitlines(), path)
    assert (round(seconds, 4), n) == (5.5338, 3)           # median of 5444.9, 5533.8, 5718.6 (first three skipped)
    with pytest.raises(SpecError, match="no '---- arguments ----' block"):
        read_megatron.parse(text, path)


def test_an_unterminated_arguments_block_names_its_line(tmp_path) -> None:
    text = "------------------------ arguments ------------------------\n  num_layers ..... 2\n"
    with pytest.raises(SpecError, match=r"x.log:1: the arguments block never ends"):
        read_megatron.parse(text, tmp_path / "x.log")


def test_megatron_deepspeed_default_markers_and_modern_arguments(tmp_path) -> None:
    args = {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "ffn_hidden_size": 14336,
            "group_query_attention": True, "num_query_groups": 8, "seq_length": 8192, "padded_vocab_size": 128256,
            "swiglu": True, "normalization": "RMSNorm", "position_embedding_type": "rope", "add_bias_linear": False,
            "untie_embeddings_and_output_weights": True, "hidden_dropout": 0.0, "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 2, "context_parallel_size": 1, "world_size": 16, "micro_batch_size": 1,
            "global_batch_size": 128, "sequence_parallel": True, "recompute_granularity": "selective",
            "use_distributed_optimizer": True, "virtual_pipeline_model_parallel_size": 4, "overlap_grad_reduce": True,
            "qk_layernorm": True}
    body = "\n".join(f"  {k} {'.' * (40 - len(k))} {v}{'.' * 10 + 'default' if k == 'hidden_dropout' else ''}"
                     for k, v in args.items())
    text = (f"------------------------ arguments ------------------------\n{body}\n"
            "-------------------- end of arguments ---------------------\n" +
            "".join(f" [2025-01-01] iteration {i:8d}/ 100 | consumed samples: 1 | elapsed time per iteration (ms): "
                    f"{1000 + i}.0 | throughput per GPU (TFLOP/s/GPU): 400.0 |\n" for i in range(1, 9)))
    step = read_megatron.parse(text, tmp_path / "llama.log")
    m, (plan,) = step.model, step.plans
    assert (m.kv_heads, m.activation, m.norm, m.position, m.bias, m.tied_embeddings, m.dropout, m.qk_norm) == (
        8, "swiglu", "rmsnorm", "rope", False, False, False, True)
    assert (plan.tp, plan.pp, plan.dp, plan.schedule, plan.virtual_stages, plan.sequence_parallel, plan.zero,
            plan.recompute) == (2, 2, 4, "interleaved", 4, True, 1, "selective")
    assert step.seconds == pytest.approx(1.0060)            # iterations 4-8


def test_a_nemo_log(tmp_path) -> None:
    text = ("model:\n  micro_batch_size: 1\n  global_batch_size: 16\n  tensor_model_parallel_size: 2\n"
            "  pipeline_model_parallel_size: 1\n  encoder_seq_length: 2048\n  num_layers: 4\n  hidden_size: 1024\n"
            "  ffn_hidden_size: 4096\n  num_attention_heads: 16\n  vocab_size: 32000\n  data_parallel_size: 4\n"
            + "".join(f"Epoch 0: : {i}/100 [00:0{i}<00:10, reduced_train_loss=9.1, train_step_timing in s=0.5{i}]\n"
                      for i in range(1, 5)))
    step = read_megatron.parse(text, tmp_path / "nemo.log")
    assert (step.gpus, step.plans[0].tp, step.plans[0].dp, step.model.seq_len) == (8, 2, 4, 2048)
    assert step.seconds == pytest.approx(0.53)              # steps 2-4
