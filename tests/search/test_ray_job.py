"""`ray job submit --working-dir . -- autoplan search …` on a local two-node Ray cluster started by the test
gives the leaderboard of the in-process search, written to an absolute path (slow: starts Ray)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ARGS = ["search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--sampler", "exhaustive", "--json"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def job_cluster():
    """Head (1 CPU, with the job server) and one worker node (1 CPU); token auth off: loopback-only test cluster."""
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.pop("RAY_ADDRESS", None)
    from ray.cluster_utils import Cluster

    port = _free_port()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": True, "dashboard_host": "127.0.0.1", "dashboard_port": port})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield f"http://127.0.0.1:{port}"
    cluster.shutdown()


def test_ray_job_submit_matches_in_process_search(job_cluster, tmp_path):
    out = (tmp_path / "results").resolve()
    ray = str(Path(sys.executable).parent / "ray")
    job = subprocess.run([ray, "job", "submit", "--address", job_cluster, "--working-dir", str(REPO), "--",
                          sys.executable, "-m", "autoplan", *ARGS, "--out", str(out)],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    [folder] = out.iterdir()
    on_ray = json.loads((folder / "leaderboard.json").read_text())["leaderboard"]

    local = CliRunner().invoke(main, [*ARGS, "--workers", "0", "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    in_process = json.loads(next((tmp_path / "local").iterdir()).joinpath("leaderboard.json").read_text())
    assert on_ray and [(r["strategy"], r["metrics"]["step_time_s"]) for r in on_ray] == \
        [(r["strategy"], r["metrics"]["step_time_s"]) for r in in_process["leaderboard"]]
