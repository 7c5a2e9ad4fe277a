"""`autoplan whatif`: on a space given by flags and on a run folder (whose report then shows the answers); bad
input as one line and exit code 2."""

from __future__ import annotations

import json

from click.testing import CliRunner

from autoplan.cli import main

SPACE = ("--model", "gpt-1.7b", "--gpus", "16", "--cluster", "dgx-a100-80g", "--global-batch", "64", "--tp", "2",
         "--micro-batch", "1", "--schedule", "1f1b", "--recompute", "full")


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_whatif_on_a_space_answers_each_change_with_its_best_plan():
    r = run("whatif", *SPACE, "--vary", "nic_bw=2x,oversubscription=4", "--vary", "gpus=32", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [w["change"] for w in out["whatifs"]] == ["nic_bw=2x", "oversubscription=4:1", "gpus=32"]
    assert all(w["best"]["step_time_s"] > 0 for w in out["whatifs"])
    assert {x["parameter"] for x in out["elasticity"]} == {"compute", "hbm", "nvlink", "nic_bw", "latency", "memory"}
    r = run("whatif", *SPACE, "--vary", "nic_bw=2x", "--no-elasticity")
    assert r.exit_code == 0 and "Under each change" in r.output and "Elasticity" not in r.output


def test_whatif_on_a_run_folder_leaves_its_answers_for_the_report(tmp_path):
    r = run("search", *SPACE, "--out", str(tmp_path), "--workers", "0", "--json")
    assert r.exit_code == 0, r.output
    folder = json.loads(r.output)["run"]
    r = run("whatif", folder, "--vary", "nic_bw=2x", "--no-elasticity", "--json")
    assert r.exit_code == 0, r.output
    saved = json.loads((tmp_path / folder.split("/")[-1] / "whatif.json").read_text())
    assert saved["whatifs"][0]["change"] == "nic_bw=2x"
    page = (tmp_path / folder.split("/")[-1] / "report.html").read_text()
    assert 'id="whatif"' in page and "nic_bw=2x" in page


def test_bad_whatif_input_is_one_line_and_exit_2(tmp_path):
    for args, match in ((("--vary", "nic_bw=2"), "write nic_bw=2x"), (("--vary", "nvlink_domain=12"), "whole number"),
                        (("--vary", "oversubscription=100"), "oversubscription")):
        r = run("whatif", *SPACE, *args)
        assert r.exit_code == 2 and match in r.output and "Traceback" not in r.output, r.output
    r = run("whatif", str(tmp_path), "--gpus", "16", "--vary", "nic_bw=2x")
    assert r.exit_code == 2 and "give RUN alone" in r.output
