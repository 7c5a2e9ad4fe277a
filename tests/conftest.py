"""Shared fixtures: a tiny GPT that simulates in milliseconds, and one- and eight-node DGX A100 clusters.

Session-scoped so that hypothesis tests may use them (specs are frozen, so sharing them is safe).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from autoplan.specs.cluster import ClusterSpec, load_cluster
from autoplan.specs.model import ModelSpec

# Hypothesis keeps its files (example database, unicode tables) outside the checkout: never a .hypothesis/ here.
# The test command replays the same examples on every run and saves none (a newcomer's run never flakes);
# HYPOTHESIS_PROFILE=explore draws new random examples and remembers failing ones there. CI always replays.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / f"autoplan-hypothesis-{os.getuid()}")
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore")
_CI = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
settings.load_profile("ci" if _CI else os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TINY_GPT = ModelSpec(name="tiny-gpt", layers=8, hidden=256, heads=8, ffn_hidden=1024, vocab=1024, seq_len=256)


@pytest.fixture(scope="session")
def tiny_gpt() -> ModelSpec:
    """8 layers, hidden 256, 8 heads, ffn 1024, vocab 1024, sequence 256 (GPT-style: gelu, learned positions)."""
    return TINY_GPT


@pytest.fixture(scope="session")
def a100_8() -> ClusterSpec:
    """One DGX A100 node (8 GPUs), its host never binding (host_launch and host_step 0: tests of the GPU-side model;
    the host floor and the step's host time have tests of their own)."""
    return _hostless(load_cluster("dgx-a100-80g", 8))


@pytest.fixture(scope="session")
def a100_64() -> ClusterSpec:
    """Eight DGX A100 nodes (64 GPUs), host never binding as ``a100_8``."""
    return _hostless(load_cluster("dgx-a100-80g", 64))


def _hostless(cluster: ClusterSpec) -> ClusterSpec:
    from dataclasses import replace
    return replace(cluster, gpu=replace(cluster.gpu, host_launch=0.0, host_step=0.0))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--nightly", action="store_true", help="also run the tests marked nightly (the docs' slow examples)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the nightly tests unless --nightly is given (whatever -m says), so CI stays short."""
    if config.getoption("--nightly"):
        return
    nightly = [item for item in items if item.get_closest_marker("nightly")]
    if nightly:
        config.hook.pytest_deselected(items=nightly)
        items[:] = [item for item in items if not item.get_closest_marker("nightly")]
