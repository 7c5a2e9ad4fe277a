"""`autoplan search --resume FOLDER`: alone it restores every setting of the run; a flag that differs is refused
by name; a second resume of a folder in use fails fast; a run folder is left behind only by a search that started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autoplan.cli import main
from autoplan.search.folder import RECORD, RunFolder

ARGS = ["--model", "gpt-1.7b", "--gpus", "16", "--cluster", "dgx-a100-80g", "--global-batch", "64", "--tp", "2",
        "--sampler", "tpe", "--budget", "12", "--seed", "3", "--top", "4", "--workers", "0"]


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def _run(out: Path, *args: str) -> Path:
    r = cli("search", *args, "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    return Path(json.loads(r.output)["run"])


def _one_line_exit_2(r) -> str:
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("autoplan: error: "), r.output
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    return _run(tmp_path_factory.mktemp("runs"), *ARGS)


def test_resume_alone_restores_every_setting(finished, tmp_path):
    cut = tmp_path / "cut"
    cut.mkdir()
    for name in ("inputs.json", "specs.json", RECORD):
        (cut / name).write_bytes((finished / name).read_bytes())
    lines = (cut / RECORD).read_text().splitlines(keepends=True)
    (cut / RECORD).write_text("".join(lines[:5]))                 # as if stopped after 5 plans
    r = cli("search", "--resume", str(cut), "--json")
    assert r.exit_code == 0, r.output
    board = json.loads((cut / "leaderboard.json").read_text())
    reference = json.loads((finished / "leaderboard.json").read_text())
    assert board["leaderboard"] == reference["leaderboard"] and board["inputs"] == reference["inputs"]
    assert len((cut / RECORD).read_text().splitlines()) == 12       # the original budget, not 12 + 5


def test_resume_with_the_same_flags_is_accepted(finished):
    r = cli("search", *ARGS, "--resume", str(finished), "--json")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("flags, named", [
    (["--budget", "50"], ["--budget 50"]),
    (["--seed", "4", "--top", "9"], ["--seed 4", "--top 9"]),
    (["--gpus", "32"], ["--gpus 32"]),
    (["--model", "gpt3"], ["--model 'gpt3'"]),
    (["--tp", "4"], ["--tp 4"]),
    (["--sampler", "nsga2"], ["--sampler 'nsga2'"]),
    (["--global-batch", "128"], ["--global-batch 128"]),
])
def test_differing_flags_are_refused_by_name(finished, flags, named):
    line = _one_line_exit_2(cli("search", "--resume", str(finished), *flags))
    assert all(n in line for n in named), line


def test_a_second_resume_of_a_folder_in_use_fails_fast(finished):
    with RunFolder(finished).lock():
        line = _one_line_exit_2(cli("search", "--resume", str(finished)))
    assert "in use by another search" in line


@pytest.mark.parametrize("content", [b"\x00\x01binary\xff", b"{broken", b"[]", b'{"gpus": "sixteen"}'])
@pytest.mark.parametrize("command", [["report"], ["show"], ["export"], ["search", "--resume"]])
def test_corrupt_inputs_json_is_one_line(finished, tmp_path, content, command):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "inputs.json").write_bytes(content)
    (folder / RECORD).write_bytes((finished / RECORD).read_bytes())
    line = _one_line_exit_2(cli(*command, str(folder)))
    assert "inputs.json" in line


@pytest.mark.parametrize("specs", [3, [], {"model": 1}, {"model": {}, "cluster": {}}])
def test_crafted_specs_in_inputs_json_are_one_line(finished, tmp_path, specs):
    folder = tmp_path / "bad"
    folder.mkdir()
    inputs = json.loads((finished / "inputs.json").read_text())
    assert "model" in inputs["specs"]                      # the run wrote them whole
    (folder / "inputs.json").write_text(json.dumps(inputs | {"specs": specs}))
    line = _one_line_exit_2(cli("search", "--resume", str(folder)))
    assert "inputs.json" in line and "specs are unreadable" in line
    assert _one_line_exit_2(cli("report", str(folder))) == line     # a damaged folder is refused, not half-shown


def test_crafted_record_never_loads(finished, tmp_path):
    folder = tmp_path / "crafted"
    folder.mkdir()
    (folder / "inputs.json").write_bytes((finished / "inputs.json").read_bytes())
    (folder / RECORD).write_text('{"strategy": {"__class__": "os.system"}, "metrics": null}\n')
    _one_line_exit_2(cli("show", str(folder)))


@pytest.mark.parametrize("extra", [["--storage", "not a url"], ["--storage", "bogus://x"],
                                   ["--storage", "postgresql://u:p@127.0.0.1:1/db"],
                                   ["--ray-address", "127.0.0.1:1", "--workers", "2"]])
def test_failed_starts_leave_no_run_folder(tmp_path, extra):
    out = tmp_path / "out"
    args = [a for a in ARGS if a not in ("--workers", "0")] if "--workers" in extra else ARGS
    line = _one_line_exit_2(cli("search", *args, *extra, "--out", str(out)))
    assert ("--storage" in line) or ("Ray" in line)
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize("config, builtin", [("llama-3.1-8b.json", None), ("mixtral-8x7b.json", "mixtral-8x7b")])
def test_a_config_json_model_resumes_from_inputs_json_alone(tmp_path, config, builtin):
    """A model given as a file is not rebuilt from its name (unknown, or a built-in's of another shape)."""
    from autoplan.families.catalog import get_model

    path = Path(__file__).parents[1] / "families" / "transformer" / "hf_configs" / config
    done = _run(tmp_path / "runs", "--model", str(path), "--gpus", "16", "--global-batch", "64", "--pp", "2",
                "--sampler", "random", "--budget", "10", "--top", "3", "--workers", "0")
    reference = json.loads((done / "leaderboard.json").read_text())
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "inputs.json").write_bytes((done / "inputs.json").read_bytes())
    r = cli("search", "--resume", str(alone), "--json")
    assert r.exit_code in (0, 1), r.output
    board = json.loads((alone / "leaderboard.json").read_text())
    assert board["leaderboard"] == reference["leaderboard"] and board["inputs"] == reference["inputs"]
    model, _ = RunFolder.existing(alone).load_specs()
    if builtin is not None:                                # the file's model is not the built-in of its name
        assert model.name == builtin and model != get_model(builtin)
