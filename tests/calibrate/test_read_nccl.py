"""nccl-tests output: real excerpts (fixtures/, each naming its source) and the refusals."""

from __future__ import annotations

import pytest

from autoplan.calibrate import read_nccl
from autoplan.calibrate.model import SpecError


def test_a_two_host_all_reduce_sweep(fixtures) -> None:
    path = fixtures / "all_reduce_perf_gb10_2node.txt"
    rows = read_nccl.parse(path.read_text(), path)
    assert len(rows) == 8                                   # four sizes, out-of-place and in-place
    assert {(r.op, r.ranks, r.per_node) for r in rows} == {("all_reduce", 2, 1)}
    first = rows[0]
    assert (first.nbytes, first.seconds) == (8192.0, pytest.approx(35.15e-6))
    assert rows[1].seconds == pytest.approx(30.33e-6)      # in-place
    assert first.where.endswith(":14")


def test_the_collective_comes_from_the_file_name_when_the_output_does_not_say(fixtures, tmp_path) -> None:
    text = (fixtures / "nccl_rtx4090_tree.txt").read_text()
    with pytest.raises(SpecError, match="cannot tell which collective"):
        read_nccl.parse(text, fixtures / "nccl_rtx4090_tree.txt")
    named = tmp_path / "reduce_scatter_perf.out"
    rows = read_nccl.parse(text, named)
    assert {(r.op, r.ranks, r.per_node) for r in rows} == {("reduce_scatter", 8, 8)}


def test_rows_without_rank_lines_are_refused(fixtures) -> None:
    path = fixtures / "all_reduce_perf_rows_only.txt"
    text = path.read_text()
    assert read_nccl.looks_like(text)
    with pytest.raises(SpecError, match="GPU count is unknown"):
        read_nccl.parse(text, path)


def test_a_single_process_run_counts_its_gpus_from_nthread_and_ngpus(tmp_path) -> None:
    text = ("# Collective test starting: all_gather_perf\n"
            "# nThread 1 nGpus 4 minBytes 8 maxBytes 64 step: 2(factor)\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "          64            16     float    none      -1    12.00    0.01    0.00      0    11.00    0.01    0.00      0\n")
    rows = read_nccl.parse(text, tmp_path / "x.txt")
    assert [(r.op, r.ranks, r.per_node, r.seconds) for r in rows] == [
        ("all_gather", 4, 4, pytest.approx(12e-6)), ("all_gather", 4, 4, pytest.approx(11e-6))]


def test_a_short_row_names_its_line(tmp_path) -> None:
    text = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 2\n  1024  256  float  sum  -1  12.0\n"
    with pytest.raises(SpecError, match=r"x.txt:3: an nccl-tests row needs"):
        read_nccl.parse(text, tmp_path / "x.txt")
