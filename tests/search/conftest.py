"""A small search run (Llama 3 8B on 16 H100s, global batch 64) for the analysis tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.cli import main


@pytest.fixture(scope="session")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of ``autoplan search --model llama3-8b --gpus 16 --global-batch 64 --top 5``."""
    out = tmp_path_factory.mktemp("runs")
    r = CliRunner().invoke(main, ["search", "--model", "llama3-8b", "--gpus", "16", "--global-batch", "64", "--top",
                                  "5", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    return Path(json.loads(r.output)["run"])
