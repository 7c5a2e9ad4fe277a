"""`autoplan profile` on this machine's CPU (--quick): the same code path a GPU runs, writing a file calibrate reads;
collectives under torchrun (gloo); a clear error where PyTorch is missing."""

from __future__ import annotations

import builtins
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.calibrate import read_profile
from autoplan.cli import main

pytest.importorskip("torch", reason="autoplan profile needs torch (pip install -e '.[test]' brings the CPU wheel)")

# this machine's CPU as a one-device cluster: CPU timings against an H100 spec would (rightly) be refused as
# inconsistent; peaks within the loader's bounds, the rest calibrate's job
CPU_SPEC = """name = "cpu-test"
description = "a CPU as a one-device cluster, for the profile tests"
gpus_per_node = 2
[gpu]
name = "CPU"
peak_tflops = 0.2
hbm_gib = 8
hbm_bandwidth_gb_per_s = 100
sm_count = 1
gemm_tile = [64, 64]
gemm_efficiency = 0.5
attention_efficiency = 0.3
memory_efficiency = 0.5
kernel_overhead_us = 5
memory_reserve_gib = 0.5
[[tiers]]
name = "loopback"
gpus = 2
bandwidth_gb_per_s = 2
efficiency = 0.5
latency_us = 50
"""


def test_profile_quick_on_cpu_writes_a_file_calibrate_reads(tmp_path) -> None:
    out = tmp_path / "cpu.json"
    result = CliRunner().invoke(main, ["profile", "--quick", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["schema"] == "autoplan-measurements/1"
    assert data["device"]["type"] == "cpu" and data["software"]["torch"].startswith("2.")
    assert data["host"]["hostname"]
    kinds = {m["kind"] for m in data["measurements"]}
    assert kinds == {"gemm", "attention", "elementwise", "launch"}
    kernels, colls, _ = read_profile.parse(out.read_text(), out)
    assert len(kernels) == len(data["measurements"]) and not colls
    spec = tmp_path / "cpu-test.toml"
    spec.write_text(CPU_SPEC)
    cal = CliRunner().invoke(main, ["calibrate", str(out), "--base", str(spec), "-o", str(tmp_path / "cal.toml"),
                                    "--max-residual", "1000"])
    assert cal.exit_code == 0, cal.output
    assert "gpu.gemm_efficiency" in cal.output and "gpu.kernel_overhead_us" in cal.output


def test_profile_shapes_from_a_model() -> None:
    from autoplan.calibrate.profile import gemm_shapes

    shapes = gemm_shapes("llama3-8b", (1, 2), (1,), quick=False)
    # qkv forward at TP1, micro-batch 1: 8192 tokens x (4096 + 2·1024) x 4096, and its dgrad and wgrad
    assert (8192, 6144, 4096) in shapes and (8192, 4096, 6144) in shapes and (4096, 6144, 8192) in shapes
    assert (8192, 3072, 4096) in shapes                       # TP2
    assert all(max(shape) <= 256 for shape in gemm_shapes("llama3-8b", (1,), (1,), quick=True))


def test_missing_torch_is_one_line_exit_2(tmp_path, monkeypatch) -> None:
    real = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_torch)
    result = CliRunner().invoke(main, ["profile", "--quick", "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 2
    assert result.output == "autoplan: error: autoplan profile needs PyTorch: pip install 'autoplan[profile]'\n"


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("torchrun") and not Path(sys.executable).with_name("torchrun").exists(),
                    reason="torchrun not installed")
def test_collectives_under_torchrun_on_cpu(tmp_path) -> None:
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    out = tmp_path / "two.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", "29517", "-m", "autoplan", "profile",
                          "--quick", "-o", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["settings"]["distributed"] == {"world_size": 2, "local_world_size": 2, "nodes": 1,
                                               "backend": "gloo"}
    ops = {m["op"] for m in data["measurements"] if m["kind"] == "collective"}
    assert {"all_reduce", "all_gather", "send_recv"} <= ops
    _, colls, _ = read_profile.parse(out.read_text(), out)
    assert all(c.ranks == 2 and c.per_node == 2 for c in colls if c.op != "send_recv")
