"""The TorchRec export names the quantised-comms codec a plan's all-to-all precision needs."""

from dataclasses import replace

import pytest

from autoplan.families.dlrm.export import qcomm_lines, torchrec_text
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.strategy import Strategy

BASE = get_model("dlrm-criteo")


def _with_bytes(n: int):
    return replace(BASE, structure=replace(BASE.structure, pooled_comm_bytes=n))


@pytest.mark.parametrize("n, comm", [(2, "FP16"), (1, "FP8")])
def test_a_narrow_all_to_all_exports_its_codec(n, comm):
    text = torchrec_text(_with_bytes(n), load_cluster("dgx-a100-80g", 8),
                         Strategy(dp=8, micro_batch=8192, global_batch=65536, sharding="table_wise"))
    assert f"forward_precision=CommType.{comm}, backward_precision=CommType.{comm}" in text
    assert text.index("qcomm_codecs_registry =") < text.index("constraints = {")


def test_fp32_exports_no_codec():
    assert qcomm_lines(BASE) == [] and qcomm_lines(_with_bytes(4)) == []
    text = torchrec_text(BASE, load_cluster("dgx-a100-80g", 8),
                         Strategy(dp=8, micro_batch=8192, global_batch=65536, sharding="table_wise"))
    assert "qcomm" not in text
