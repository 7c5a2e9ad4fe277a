"""The run folder: checked inputs.json, the JSONL record (a torn last line skipped on reading and cut by the next
writer, nothing else forgiven), the lock, and files that honour the umask."""

from __future__ import annotations

import json
import os
import stat

import pytest

from autoplan.errors import SpecError
from autoplan.files import write_atomic
from autoplan.search.executors import evaluate_one
from autoplan.search.folder import INPUTS, RECORD, RunFolder, trace_name
from autoplan.families.strategy import Strategy
from autoplan.families.catalog import get_model
from autoplan.specs import load_cluster

MODEL, CLUSTER = get_model("gpt-1.7b"), load_cluster("dgx-a100-80g", 16)
PLANS = [Strategy(dp=16, micro_batch=m, global_batch=64) for m in (1, 2, 4)]


@pytest.mark.parametrize("content", [b"\x80\x05\x95binary", b"{not json", b"[1, 2]", b'"text"',
                                     b'{"gpus": "64"}', b'{"top": 1.5}', b'{"space": {"tp": 8}}',
                                     b'{"seed": true}', b"[" * 100000])
def test_bad_inputs_are_one_line_errors(tmp_path, content):
    (tmp_path / INPUTS).write_bytes(content)
    with pytest.raises(SpecError) as err:
        RunFolder.existing(tmp_path).read_inputs()
    assert "\n" not in str(err.value) and INPUTS in str(err.value)


def test_not_a_run_folder(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        RunFolder.existing(tmp_path / "nope")
    with pytest.raises(SpecError, match="not a run folder"):
        RunFolder.existing(tmp_path)


def test_record_reads_back_and_a_torn_last_line_is_cut(tmp_path):
    """Reading skips a torn last line and never writes; the next search to append cuts it off first."""
    folder = RunFolder(tmp_path)
    rec = folder.recorder()
    for s in PLANS[:2]:
        rec(evaluate_one(MODEL, CLUSTER, s))
    rec.close()
    whole = (tmp_path / RECORD).read_bytes()
    torn = whole + b'{"plan": "tp1 pp1 dp16 mb4 1f1b", "feas'
    (tmp_path / RECORD).write_bytes(torn)
    assert list(folder.load_evaluations()) == PLANS[:2]
    assert (tmp_path / RECORD).read_bytes() == torn                 # a read-only command leaves it as it was
    rec = folder.recorder()
    assert (tmp_path / RECORD).read_bytes() == whole
    rec(evaluate_one(MODEL, CLUSTER, PLANS[2]))
    rec.close()
    assert list(folder.load_evaluations()) == PLANS


def test_a_corrupt_middle_line_is_an_error_not_a_silent_loss(tmp_path):
    folder = RunFolder(tmp_path)
    rec = folder.recorder()
    rec(evaluate_one(MODEL, CLUSTER, PLANS[0]))
    rec.close()
    (tmp_path / RECORD).write_bytes(b"garbage\n" + (tmp_path / RECORD).read_bytes())
    with pytest.raises(SpecError, match="line 1"):
        folder.load_evaluations()


def test_a_second_holder_of_the_lock_fails_at_once(tmp_path):
    folder = RunFolder(tmp_path)
    with folder.lock():
        with pytest.raises(SpecError, match=f"in use by another search \\(pid {os.getpid()}\\)"):
            with RunFolder(tmp_path).lock():
                pass
    with folder.lock():                               # released on exit
        pass


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_honour_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "a.json", "{}")
        write_atomic(tmp_path / "b.bin", b"\x00")
    finally:
        os.umask(old)
    for name in ("a.json", "b.bin"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask


def test_specs_and_inputs_are_json(tmp_path):
    folder = RunFolder(tmp_path)
    folder.save_specs(MODEL, CLUSTER)
    folder.write_inputs({"model": MODEL.name, "gpus": 16})
    assert folder.load_specs() == (MODEL, CLUSTER)
    assert json.loads((tmp_path / "specs.json").read_text())["model"]["name"] == MODEL.name
    assert RunFolder.existing(tmp_path).read_inputs() == {"model": MODEL.name, "gpus": 16}
    (tmp_path / "specs.json").unlink()                      # inputs.json alone still has them whole
    assert RunFolder.existing(tmp_path).load_specs() == (MODEL, CLUSTER)
    assert trace_name(2) == "trace_rank2.json.gz"
