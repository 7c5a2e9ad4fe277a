"""The measured-accuracy line simulate and search print: validate's runs of the plan's GPU and model family."""

from __future__ import annotations

import json

from autoplan.report import fidelity


def test_a_gpu_and_family_with_runs_gets_their_figures(monkeypatch, tmp_path):
    table = tmp_path / "fidelity.json"
    table.write_text(json.dumps({"rows": [{"gpu": "H100-SXM5-80GB", "kind": "dense", "runs": 207, "mean_abs_pct": 3.61,
                                           "max_abs_pct": 15.2, "mean_signed_pct": -0.7, "logo_mean_abs_pct": 3.9}]}))
    monkeypatch.setattr(fidelity, "TABLE", table)
    fidelity._table.cache_clear()
    try:
        text = fidelity.line("H100-SXM5-80GB", "dense")
        assert "207 measured dense transformer runs" in text and "3.6 %" in text and "3.9 %" in text
        assert "untested" in fidelity.line("H100-SXM5-80GB", "cnn")
        assert "untested" in fidelity.line("MI300X", "dense")
    finally:
        fidelity._table.cache_clear()


def test_a_missing_table_reads_as_untested(monkeypatch, tmp_path):
    monkeypatch.setattr(fidelity, "TABLE", tmp_path / "absent.json")
    fidelity._table.cache_clear()
    try:
        assert "untested" in fidelity.line("H100-SXM5-80GB", "dense")
    finally:
        fidelity._table.cache_clear()


def test_the_shipped_table_covers_the_bundled_gpus():
    fidelity._table.cache_clear()
    assert "measured dense transformer runs on the H100-SXM5-80GB" in fidelity.line("H100-SXM5-80GB", "dense")
    assert "mixture-of-experts" in fidelity.line("B200 (GB200 superchip)", "moe")


def test_validate_writes_the_table_of_its_file(tmp_path):
    import yaml
    from click.testing import CliRunner

    from autoplan.cli import main
    from autoplan.validate import load_default
    cases = [c for c in load_default()["cases"] if c["id"].startswith("dgxc-h100-bf16-gpt3-175b")][:2]
    runs = tmp_path / "runs.yaml"
    runs.write_text(yaml.safe_dump({"cases": cases}))
    out = tmp_path / "fidelity.json"
    result = CliRunner().invoke(main, ["validate", str(runs), "--no-calibration", "--write-fidelity", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["rows"]
    assert [(r["gpu"], r["kind"], r["runs"]) for r in rows] == [("H100-SXM5-80GB", "dense", 2)]
    assert rows[0]["logo_mean_abs_pct"] is None                     # --no-calibration: no leave-one-group-out fit


def test_one_run_is_one_run():
    fidelity._table.cache_clear()
    assert "1 measured mixture-of-experts run on the H800-SXM5-80GB" in fidelity.line("H800-SXM5-80GB", "moe")
