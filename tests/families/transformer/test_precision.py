"""FP8 precision: GEMM time at the FP8 peak (closed form), quantize passes, memory, param-gather bytes, validity."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autoplan.families.transformer import fp8_scaling, memory, step as plan
from autoplan.hardware import network
from autoplan.hardware.compute import gemm_time, memory_time
from autoplan.families.transformer.layer import layer_compute
from autoplan.errors import SpecError
from autoplan.sim.simulate import evaluate
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.hardware.support import hardware_violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.validity import violations

H100 = load_cluster("dgx-h100-80g", 64)
A100 = load_cluster("dgx-a100-80g", 64)
GPT3 = get_model("gpt3-175b")
LAYER_GEMMS = ("qkv", "proj", "fc1", "fc2")


def _one_wave(gpu):
    """A GEMM of exactly one wave of full tiles, near-square so that it is compute-bound: a·b = SMs tiles."""
    tm, tn = gpu.gemm_tile
    a = max(d for d in range(1, int(gpu.sm_count ** 0.5) + 1) if gpu.sm_count % d == 0)
    return tm * a, tn * (gpu.sm_count // a), 8192


@pytest.mark.parametrize("fp8", [False, True])
def test_gemm_time_is_flops_over_peak_times_efficiency(fp8):
    gpu = H100.gpu
    m, n, k = _one_wave(gpu)
    peak, eff = (gpu.fp8_peak_flops, gpu.fp8_gemm_efficiency) if fp8 else (gpu.peak_flops, gpu.gemm_efficiency)
    # closed form: one wave of full tiles, each SM at peak·eff·clock·k/(k + k½), the clock of the job's slowest GPU
    rate = peak * eff * gpu.clock_ratio * gpu.pace * k / (k + gpu.gemm_half_k)
    expected = 2.0 * m * n * k / rate + gpu.kernel_overhead
    assert gemm_time(gpu, m, n, k, 1, fp8) == pytest.approx(expected, rel=1e-12)


def test_fp8_gemm_is_faster_than_bf16_but_not_twice():
    gpu = H100.gpu
    m, n, k = _one_wave(gpu)
    bf16 = gemm_time(gpu, m, n, k) - gpu.kernel_overhead
    fp8 = gemm_time(gpu, m, n, k, 1, True) - gpu.kernel_overhead
    ratio = (gpu.fp8_peak_flops * gpu.fp8_gemm_efficiency) / (gpu.peak_flops * gpu.gemm_efficiency)
    assert bf16 / fp8 == pytest.approx(ratio, rel=1e-12)
    assert 1 < bf16 / fp8 < 2


def test_fp8_gemm_on_a_gpu_without_fp8_is_a_clear_error():
    with pytest.raises(SpecError, match="no FP8 tensor cores"):
        gemm_time(A100.gpu, 1024, 1024, 1024, 1, True)


def test_fp8_changes_only_the_layer_gemms_and_adds_quantize_passes():
    bf16 = layer_compute(GPT3, H100, 8, 1, True, 1, "none")
    fp8 = layer_compute(GPT3, H100, 8, 1, True, 1, "none", "fp8")
    b_ops = {op.name: op for op in bf16.forward + bf16.backward}
    f_ops = {op.name: op for op in fp8.forward + fp8.backward}
    for name, op in b_ops.items():
        if name.split(".")[0] in LAYER_GEMMS:
            assert f_ops[name].flops == op.flops and f_ops[name].seconds < op.seconds, name
        else:
            assert f_ops[name] == op, name                       # non-GEMM ops unchanged
    extra = set(f_ops) - set(b_ops)
    assert extra == {f"{g}.quantize" for g in LAYER_GEMMS} | {f"{g}.quantize_grad" for g in LAYER_GEMMS}
    # a quantize pass reads BF16 and writes FP8 row- and column-wise: 4 bytes per value of the GEMM's input
    tokens, h, t = GPT3.seq_len, GPT3.hidden, 8
    assert f_ops["fc2.quantize"].bytes == 4 * tokens * GPT3.ffn_hidden // t
    assert f_ops["qkv.quantize"].bytes == 4 * tokens // t * h          # sequence-parallel shard, before the gather
    assert f_ops["fc1.quantize_grad"].bytes == 4 * tokens * GPT3.ffn_hidden // t


def test_current_scaling_finds_each_amax_first_and_all_reduces_it_over_tp_where_sp_needs_it():
    delayed = {op.name: op for op in (lambda c: c.forward + c.backward)(
        layer_compute(GPT3, H100, 8, 1, True, 1, "none", "fp8"))}
    current = {op.name: op for op in (lambda c: c.forward + c.backward)(
        layer_compute(GPT3, H100, 8, 1, True, 1, "none", "fp8-current"))}
    assert set(delayed) == set(current)
    gpu = H100.gpu
    # TE v2.4 cast.cpp: an amax pass over the BF16 input (2 B a value; with its zero fill, two kernels) and a scale
    # kernel before the cast (4 B); TE v2.7+: the norm before qkv and fc1 finds their amax, so no pass of their own
    tp_amax = network.all_reduce_latency(H100, network.group_shape(H100.domain_gpus, 8, 1))
    assert tp_amax > 0
    for name, op in delayed.items():
        if not name.endswith(("quantize", "quantize_grad")):
            assert current[name] == op, name
            continue
        values = op.bytes / 4
        after_norm = name in ("qkv.quantize", "fc1.quantize")
        nbytes, kernels = (4 * values, 2) if after_norm else (6 * values, 4)
        assert current[name].bytes == pytest.approx(nbytes)
        # column-parallel inputs and row-parallel output gradients under SP all-reduce their amax over TP
        synced = name in ("qkv.quantize", "fc1.quantize", "proj.quantize_grad", "fc2.quantize_grad")
        expected = memory_time(gpu, nbytes, kernels) + (tp_amax if synced else 0.0)
        assert current[name].seconds == pytest.approx(expected), name
    # without SP no amax is all-reduced
    no_sp = {op.name: op for op in layer_compute(GPT3, H100, 8, 1, False, 1, "none", "fp8-current").forward}
    assert no_sp["qkv.quantize"].seconds == pytest.approx(memory_time(gpu, no_sp["qkv.quantize"].bytes, 2))


@pytest.mark.parametrize("precision, copies", [("fp8", 1), ("fp8-current", 1), ("mxfp8", 2), ("fp8-blockwise", 2)])
def test_on_blackwell_tensor_scaled_casts_write_one_copy_and_mx_casts_two(precision, copies):
    # TE v2.2+ quantizer.cpp: no transpose where cuBLASLt's FP8 GEMMs take every layout (sm 10.x); MXFP8's scales
    # run along the GEMM's inner dimension, so it keeps row- and column-wise data everywhere
    b200 = load_cluster("dgx-b200", 64)
    assert fp8_scaling.fp8_copies(b200.gpu, precision) == copies
    assert fp8_scaling.fp8_copies(H100.gpu, precision) == 2
    ops = {op.name: op for op in (lambda c: c.forward + c.backward)(
        layer_compute(GPT3, b200, 8, 1, True, 1, "none", precision))}
    values = GPT3.seq_len * GPT3.ffn_hidden // 8
    read_amax = 2 if precision == "fp8-current" else 0
    assert ops["fc2.quantize"].bytes == (2 + copies + read_amax) * values
    s = Strategy(tp=8, pp=8, dp=1, global_batch=64, sequence_parallel=True, zero=1)
    base = memory.memory_per_stage(GPT3, b200, s)[1]
    fp8 = memory.memory_per_stage(GPT3, b200, replace(s, precision=precision))[1]
    assert fp8.weights - base.weights == pytest.approx(copies * GPT3.layers // 8 * GPT3.layer_params() / 8)


def test_fp8_plan_is_faster_on_h100():
    s = Strategy(tp=8, pp=8, dp=1, global_batch=64, sequence_parallel=True, recompute="selective", zero=1)
    cluster = load_cluster("dgx-h100-80g", 64)
    bf16 = evaluate(GPT3, cluster, s)
    fp8 = evaluate(GPT3, cluster, replace(s, precision="fp8"))
    assert fp8.feasible and bf16.feasible
    assert bf16.metrics.step_time / 2 < fp8.metrics.step_time < bf16.metrics.step_time


def test_fp8_memory_weights_copies_and_saved_inputs():
    s = Strategy(tp=8, pp=8, dp=1, global_batch=64, sequence_parallel=True, zero=1)
    base = memory.memory_per_stage(GPT3, H100, s)[1]
    fp8 = memory.memory_per_stage(GPT3, H100, replace(s, precision="fp8"))[1]
    gather = memory.memory_per_stage(GPT3, H100, replace(s, precision="fp8", fp8_param_gather=True))[1]
    layer_params = GPT3.layers // 8 * GPT3.layer_params() / 8
    # TE keeps an FP8 weight and its transpose (2 B) beside the BF16 one; --fp8-param-gather drops the BF16 copy
    assert fp8.weights - base.weights == pytest.approx(2 * layer_params)
    assert gather.weights == pytest.approx(base.weights)
    assert fp8.gradients == base.gradients and fp8.optimizer == base.optimizer
    # FP8 GEMM inputs saved for the backward: QKV and fc1 inputs (sbh/t each with SP), proj and fc2 inputs
    sb = GPT3.seq_len
    saved = 2 * sb * GPT3.hidden / 8 + sb * (GPT3.q_dim + GPT3.ffn_hidden) / 8
    per_layer = memory.activation_bytes_per_layer(GPT3, s, True)
    per_layer_fp8 = memory.activation_bytes_per_layer(GPT3, replace(s, precision="fp8"), True)
    assert per_layer - per_layer_fp8 == pytest.approx(saved)
    assert fp8.activations < base.activations


def test_fp8_param_gather_halves_the_param_all_gather():
    s = Strategy(tp=8, pp=1, dp=8, global_batch=64, zero=1, precision="fp8")
    assert plan.param_bytes(s) == 2 and plan.param_bytes(replace(s, fp8_param_gather=True)) == 1
    cluster = load_cluster("dgx-h100-80g", 64)
    model = get_model("gpt-7.5b")
    bf = plan.step_costs(model, cluster, s).param_gather
    half = plan.step_costs(model, cluster, replace(s, fp8_param_gather=True)).param_gather
    assert half < bf


@pytest.mark.parametrize("precision, cluster, needle", [
    ("fp8", A100, "needs FP8 tensor cores; the A100-SXM4-80GB has none"),
    ("fp8-blockwise", A100, "needs FP8 tensor cores"),
    ("fp8-current", A100, "needs FP8 tensor cores"),
    ("mxfp8", A100, "needs FP8 tensor cores"),
    ("mxfp8", H100, "needs Blackwell tensor cores"),
])
def test_precision_the_gpu_lacks_is_a_reason(precision, cluster, needle):
    s = Strategy(tp=8, pp=8, dp=1, global_batch=64, precision=precision)
    reasons = hardware_violations(GPT3, cluster, s)
    assert len(reasons) == 1 and needle in reasons[0]
    e = evaluate(GPT3, cluster, s)
    assert not e.feasible and needle in e.violations[0]


def test_fp8_and_fp8_blockwise_run_on_h100():
    for precision in ("fp8", "fp8-current", "fp8-blockwise"):
        assert hardware_violations(GPT3, H100, Strategy(tp=8, pp=8, dp=1, global_batch=64, precision=precision)) == []


def test_fp8_param_gather_needs_an_fp8_precision():
    s = Strategy(tp=8, pp=8, dp=1, global_batch=64, fp8_param_gather=True)
    assert any("fp8_param_gather needs an FP8 precision" in r for r in violations(GPT3, 64, s))
    assert violations(GPT3, 64, replace(s, precision="fp8")) == []


def test_a_cluster_file_with_an_fp8_peak_and_no_efficiency_takes_the_bf16_one(tmp_path):
    text = (load_cluster.__globals__["specs_dir"]() / "dgx-h100-80g.toml").read_text()
    plain = tmp_path / "plain.toml"
    plain.write_text("\n".join(line for line in text.splitlines() if not line.startswith("fp8_gemm_efficiency")))
    gpu = load_cluster(str(plain)).gpu
    assert gpu.fp8_gemm_efficiency == 0.0
    m, n, k = _one_wave(gpu)
    ratio = (gemm_time(gpu, m, n, k) - gpu.kernel_overhead) / (gemm_time(gpu, m, n, k, 1, True) - gpu.kernel_overhead)
    assert ratio == pytest.approx(gpu.fp8_peak_flops / gpu.peak_flops)
