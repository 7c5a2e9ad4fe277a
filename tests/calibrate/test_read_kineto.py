"""Kineto traces: kernels classified by name and sized through the operator that launched them.

The trace here is written for the test in the event format of PyTorch's profiler (``torch.profiler`` with
``record_shapes=True``, exported by ``export_chrome_trace``): ``ph: X`` events, ``cat`` ``cpu_op`` / ``kernel``,
``dur`` in µs, ``args`` with ``External id``, ``Input Dims``, ``Input type`` and, for ``record_param_comms``, the
collective's name, group size, element count and dtype. A CPU-only machine records no GPU kernels, so no real trace
of one can be made here."""

from __future__ import annotations

import json

import pytest

from autoplan.calibrate import read_kineto
from autoplan.calibrate.model import SpecError


def _op(name: str, ext: int, dims: list, types: list, dur: float = 50.0, **args: object) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": dur,
            "args": {"External id": ext, "Input Dims": dims, "Input type": types, **args}}


def _kernel(name: str, ext: int, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 10, "dur": dur,
            "args": {"External id": ext, "correlation": ext + 100, "grid": [132, 1, 1], "block": [384, 1, 1]}}


TRACE = {"traceEvents": [
    _op("aten::linear", 1, [[4, 2048, 4096], [11008, 4096]], ["c10::BFloat16", "c10::BFloat16"], dur=90),
    _op("aten::mm", 1, [[8192, 4096], [4096, 11008]], ["c10::BFloat16", "c10::BFloat16"], dur=80),
    _kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1", 1, 610.0),
    _op("aten::_scaled_dot_product_flash_attention", 2, [[4, 32, 2048, 128], [4, 8, 2048, 128], [4, 8, 2048, 128]],
        ["c10::BFloat16"] * 3),
    _kernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)", 2,
            400.0),
    _op("aten::add", 3, [[8192, 4096], [8192, 4096], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"]),
    _kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>", 3, 45.0),
    _op("record_param_comms", 4, [[1048576]], ["c10::BFloat16"], **{
        "Collective name": "allreduce", "Group size": 8, "In msg nelems": 1048576, "Out msg nelems": 1048576,
        "dtype": "BFloat16"}),
    _kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 4, 30.0),
    _kernel("void at::native::unknown_kernel()", 99, 5.0),
]}


def test_kernels_are_classified_and_sized(tmp_path) -> None:
    path = tmp_path / "trace.json"
    kernels, colls, share = read_kineto.parse(json.dumps(TRACE), path, gpus_per_node=8)
    by_kind = {k.kind: k for k in kernels}
    assert by_kind["gemm"].shape == (8192, 11008, 4096, 1)  # from aten::mm, the innermost operator
    assert by_kind["gemm"].seconds == pytest.approx(610e-6) and by_kind["gemm"].sustained
    assert by_kind["attention"].shape == (4, 32, 2048, 2048, 128)
    assert by_kind["memory"].shape == (3 * 8192 * 4096 * 2,)
    (c,) = colls
    assert (c.op, c.ranks, c.per_node, c.nbytes, c.seconds) == ("all_reduce", 8, 8, 2 * 1048576.0,
                                                                pytest.approx(30e-6))
    assert share["gemm"] == pytest.approx(610 / 1090)
    assert share["other"] == pytest.approx(5 / 1090)


def test_names_classify() -> None:
    assert read_kineto.classify("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn") == "gemm"
    assert read_kineto.classify("cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>") == "gemm"
    assert read_kineto.classify("flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel") == "attention"
    assert read_kineto.classify("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "nccl"
    assert read_kineto.classify("void at::native::(anonymous namespace)::layer_norm_kernel") == "elementwise"


def test_a_trace_without_gpu_kernels_is_refused(tmp_path) -> None:
    with pytest.raises(SpecError, match="no GPU kernel events"):
        read_kineto.parse(json.dumps({"traceEvents": [TRACE["traceEvents"][0]]}), tmp_path / "t.json", 8)


def test_broken_json_names_its_line(tmp_path) -> None:
    with pytest.raises(SpecError, match=r"t.json. is not valid JSON: .* \(line 2, column 4\)"):
        read_kineto.parse('{"traceEvents": [\n  {,}]}', tmp_path / "t.json", 8)
