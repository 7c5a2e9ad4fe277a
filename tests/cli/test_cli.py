"""The command line: main paths work, bad input gives one line and exit code 2, never a traceback."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from autoplan.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_models_and_clusters_list():
    r = run("models")
    assert r.exit_code == 0 and "gpt3-175b" in r.output and "llama3-405b" in r.output
    r = run("clusters", "--json")
    assert r.exit_code == 0 and {c["name"] for c in json.loads(r.output)} >= {"dgx-a100-80g", "dgx-h100-80g"}


def test_check_valid_and_invalid():
    r = run("check", "--model", "gpt3", "--gpus", "1024", "--tp", "8", "--pp", "8", "--sequence-parallel",
            "--recompute", "selective", "--zero", "1", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["valid"] and report["fits"] and len(report["memory_gib"]) == 8
    assert {c["group"] for c in report["collectives"]} >= {"tp", "pp", "dp"}
    r = run("check", "--model", "gpt3", "--gpus", "1024", "--tp", "3", "--pp", "7", "--dp", "48")
    assert r.exit_code == 1 and "not divisible" in r.output


def test_simulate_json_and_trace(tmp_path):
    trace = tmp_path / "t.json"
    r = run("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "64",
            "--virtual-stages", "2", "--trace", str(trace), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["feasible"] and 0 < out["metrics"]["mfu"] < 1
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"compute", "pp_send_fwd", "pp_send_bwd", "dp"} <= names
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)
    path = out["critical_path"]                     # the chain that sets the step, also marked in the trace
    assert path["step_time_s"] == pytest.approx(out["metrics"]["step_time_s"], rel=1e-9)
    assert sum(x["share"] for x in path["segments"]) == pytest.approx(1.0)
    assert len([e for e in spans if e["cat"] == "critical"]) == len(path["segments"])
    assert any(e["args"].get("critical") for e in spans if e["cat"] != "critical")


def test_search_writes_a_run_folder(tmp_path):
    r = run("search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--top", "3", "--out",
            str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert len(out["leaderboard"]) == 3
    steps = [row["step_s"] for row in out["leaderboard"]]
    assert steps == sorted(steps)
    folder = tmp_path / out["run"].split("/")[-1]
    assert {p.name for p in folder.iterdir()} >= {"leaderboard.json", "leaderboard.csv", "leaderboard.md",
                                                  "inputs.json"}


@pytest.mark.parametrize("args, needle", [
    (["simulate", "--model", "gpt5", "--gpus", "1024"], "unknown model"),
    (["simulate", "--gpus", "1020"], "whole"),
    (["simulate", "--gpus", "1024", "--tp", "3"], "not divisible"),
    (["simulate", "--gpus", "0"], "positive"),
    (["simulate", "--gpus", "1024", "--tp", "-2"], "positive"),
    (["simulate", "--gpus", "1024", "--cluster", "dgx-a1000"], "unknown cluster"),
    (["simulate", "--gpus", "1024", "--global-batch", "1000", "--tp", "8", "--pp", "8"], "invalid plan"),
    (["search", "--gpus", "1024", "--space", "nope"], "not found"),
    (["search", "--gpus", "1024", "--tp", "0"], "positive"),
    (["validate", "/nonexistent.yaml"], "does not exist"),
    (["simulate", "--gpus", "1024", "--schedule", "zigzag"], "zigzag"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert "Traceback" not in r.output


def test_model_file_errors(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text("layers = 2\nhidden = 64\n")
    r = run("check", "--model", str(f), "--gpus", "8")
    assert r.exit_code == 2 and "missing key" in r.output
    f.write_text("layers = [\n")
    r = run("check", "--model", str(f), "--gpus", "8")
    assert r.exit_code == 2 and "not valid TOML" in r.output


def test_help_is_fast_and_imports_nothing_heavy():
    code = "import sys, autoplan.cli; print(sorted(m for m in ('ray','optuna','networkx','numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_space_counts_add_up():
    r = run("space", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)
    assert c["raw"] == c["valid"] + c["rejected"] and c["valid"] == c["distinct"] + c["equivalent"]
    assert c["distinct"] == c["fit"] + c["out_of_memory"]
    assert max(c["reasons"].values()) <= c["rejected"] <= sum(c["reasons"].values())
    r = run("space", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--tp", "2")
    assert r.exit_code == 0 and "What reaches the simulator" in r.output and "tp  " in r.output


def test_search_reports_progress_on_stderr_and_keeps_stdout_json(tmp_path):
    r = CliRunner().invoke(main, ["search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch",
                                                  "64", "--sampler", "random", "--budget", "40", "--workers", "0",
                                                  "--out", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["leaderboard"]


def test_resume_refuses_a_different_search_and_out_must_be_writable(tmp_path):
    args = ["search", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "64", "--tp", "2", "--workers", "0",
            "--out", str(tmp_path)]
    assert run(*args).exit_code == 0
    [folder] = tmp_path.iterdir()
    assert json.loads((folder / "inputs.json").read_text())["gpus"] == 16
    r = run(*[a if a != "64" else "128" for a in args], "--resume", str(folder))
    assert r.exit_code == 2 and "--global-batch 128 (the run's: 64)" in r.output
    r = run(*args, "--resume", str(folder))
    assert r.exit_code == 0 and "reused" in r.output
    (tmp_path / "file").write_text("")
    r = run(*args[:-1], str(tmp_path / "file" / "sub"))
    assert r.exit_code == 2 and "cannot create a run folder" in r.output


def test_synchronous_p2p_and_16bit_gradients_from_the_command_line(tmp_path):
    trace = tmp_path / "t.json"
    common = ("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--pp", "2", "--global-batch", "64",
              "--virtual-stages", "2", "--json")
    r = run(*common, "--no-overlap-p2p-comm", "--grad-reduce-in-16bit", "--trace", str(trace))
    assert r.exit_code == 0, r.output
    blocking = json.loads(r.output)
    assert blocking["strategy"]["overlap_p2p_comm"] is False and blocking["strategy"]["grad_reduce_in_fp32"] is False
    assert blocking["metrics"]["breakdown_s"]["pp"] > 0
    overlapped = json.loads(run(*common).output)
    assert blocking["metrics"]["step_time_s"] >= overlapped["metrics"]["step_time_s"]
    assert any(e.get("cat") == "pp" for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X")


def test_unfused_gradient_accumulation_from_the_command_line():
    # micro-batches of 8: kernels large enough that the host does not bind (costs.host_bound)
    common = ("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--global-batch", "64", "--micro-batch",
              "8", "--json")
    fused = json.loads(run(*common).output)
    r = run(*common, "--no-gradient-accumulation-fusion")
    assert r.exit_code == 0, r.output
    unfused = json.loads(r.output)
    assert unfused["strategy"]["gradient_accumulation_fusion"] is False
    assert unfused["metrics"]["step_time_s"] > fused["metrics"]["step_time_s"]
    r = run("check", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--no-gradient-accumulation-fusion")
    assert r.exit_code == 0 and "grad_accumulation" in r.output


def test_every_strategy_field_has_a_flag_and_every_pinnable_axis_a_search_flag():
    from autoplan.families.strategy import KNOBS, knob_of

    check = {p.name for p in main.get_command(None, "check").params}
    assert {f.name for f in KNOBS} <= check
    search = {p.name for p in main.get_command(None, "search").params}
    assert {f.name for f in KNOBS if knob_of(f.name).fix_help is not None} <= search
    assert {f.name for f in KNOBS if knob_of(f.name).fix_help is None} & search == {"global_batch"}


def test_plan_flags_reach_the_strategy():
    r = run("check", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--pp", "2", "--cp", "2", "--micro-batch", "2",
            "--global-batch", "64", "--virtual-stages", "2", "--sequence-parallel", "--recompute", "full", "--zero", "1",
            "--no-overlap-grad-reduce", "--no-overlap-param-gather", "--no-overlap-p2p-comm", "--grad-reduce-in-16bit",
            "--no-gradient-accumulation-fusion", "--json")
    assert r.exit_code in (0, 1), r.output
    expected = {
        "dp": 2, "tp": 2, "pp": 2, "cp": 2, "micro_batch": 2, "global_batch": 64, "schedule": "interleaved",
        "virtual_stages": 2, "sequence_parallel": True, "recompute": "full", "zero": 1, "overlap_grad_reduce": False,
        "overlap_param_gather": False, "overlap_p2p_comm": False, "grad_reduce_in_fp32": False,
        "gradient_accumulation_fusion": False}
    plan = json.loads(r.output)["plan"]
    assert {k: plan[k] for k in expected} == expected


def test_llama3_405b_search_returns_uneven_plans(tmp_path):
    r = run("search", "--model", "llama3-405b", "--gpus", "16384", "--global-batch", "2048", "--tp", "8", "--pp",
            "16", "--cp", "1", "--micro-batch", "1", "--top", "3", "--workers", "0", "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["leaderboard"]
    assert len(rows) == 3 and all("L7/7" in row["plan"] for row in rows)


def test_simulate_collective_policy_flag():
    args = ("simulate", "--model", "gpt-1.7b", "--gpus", "64", "--tp", "2", "--global-batch", "64", "--zero", "1",
            "--json")
    steps = {}
    for p in ("nccl", "baseline", "themis"):
        r = run(*args, "--collective-policy", p)
        assert r.exit_code == 0, r.output
        steps[p] = json.loads(r.output)["metrics"]["step_time_s"]
    assert steps["themis"] <= steps["baseline"] * (1 + 1e-9)
    assert steps["nccl"] == json.loads(run(*args).output)["metrics"]["step_time_s"]
    r = run(*args, "--collective-policy", "ring")
    assert r.exit_code == 2 and "ring" in r.output and "Traceback" not in r.output


def test_precision_the_cluster_lacks_is_one_line_and_exit_2():
    r = run("search", "--model", "gpt3", "--gpus", "64", "--cluster", "dgx-a100-80g", "--precision", "fp8")
    assert r.exit_code == 2 and "needs FP8 tensor cores; the A100-SXM4-80GB has none" in r.output
    r = run("simulate", "--model", "gpt3", "--gpus", "64", "--cluster", "dgx-h100-80g", "--tp", "8", "--pp", "8",
            "--precision", "mxfp8")
    assert r.exit_code == 2 and "needs Blackwell tensor cores" in r.output
    r = run("check", "--model", "gpt3", "--gpus", "64", "--cluster", "dgx-h100-80g", "--tp", "8", "--pp", "8",
            "--sequence-parallel", "--precision", "fp8", "--tp-comm-overlap", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["plan"]["precision"] == "fp8"


def test_the_help_table_is_each_commands_help():
    # autoplan --help lists the commands from app.COMMANDS without loading their modules: the table must say what
    # each command's own help says
    import click

    from autoplan.cli.app import COMMANDS
    for name, (module, text) in COMMANDS.items():
        cmd = main.get_command(None, name)
        assert cmd.callback.__module__ == f"autoplan.cli.{module}", name
        for width in (40, 60, 80):
            assert click.Command(name, help=text).get_short_help_str(width) == cmd.get_short_help_str(width), name


def test_every_command_is_in_the_help_table():
    # a command module's every command is listed (and loadable) by name: none is missing from app.COMMANDS
    import importlib
    import pkgutil

    import autoplan.cli
    from autoplan.cli.app import COMMANDS
    for info in pkgutil.iter_modules(autoplan.cli.__path__):
        importlib.import_module(f"autoplan.cli.{info.name}")
    assert set(main.commands) == set(COMMANDS)
    out = CliRunner().invoke(main, ["--help"]).output
    for name in COMMANDS:
        assert f"\n  {name} " in out, name


def test_the_help_legend_is_the_knobs_legend():
    # --help shows the plan labels' legend as text (autoplan.cli.legend); it must be what the knobs define
    # (after changing a knob: python -m autoplan.cli.legend)
    from autoplan.cli.legend import LEGEND
    from autoplan.cli.options import legend_text
    assert LEGEND == legend_text()
    for args in ([], ["search"], ["show"], ["space"]):
        out = CliRunner().invoke(main, [*args, "--help"]).output
        assert "Plan labels (e.g. tp4 pp8 dp32 mb2 int12 sp z1):" in out and "tpN ppN dpN" in out, args


def test_framework_choices_are_the_families_launchers():
    from autoplan.cli.options import FRAMEWORK_CHOICES
    from autoplan.families.registry import FRAMEWORKS
    assert FRAMEWORK_CHOICES == FRAMEWORKS


@pytest.mark.parametrize("command", ["search", "sweep", "space", "whatif"])
def test_a_command_help_imports_no_family_registry(command):
    # --help of the commands with the space's flags builds them from the knobs, never from the families' costs
    code = (f"import sys; sys.argv = ['autoplan', '{command}', '--help']\nfrom autoplan.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('autoplan.families.registry', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_help_loads_no_command_module():
    code = ("import sys; sys.argv = ['autoplan', '--help']\nfrom autoplan.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('autoplan.cli.') or m.split('.')[0] in "
            "('numpy', 'rich', 'optuna', 'ray', 'plotly', 'networkx')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "['autoplan.cli.app', 'autoplan.cli.legend']"


def test_simulate_shows_the_slowest_gpus_pace(tmp_path):
    # a job runs at its slowest GPU's pace (GPUSpec.pace): shown with the figures it slows, absent without a spread
    from autoplan.specs.cluster import load_cluster
    args = ("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--global-batch", "64")
    r = run(*args)
    pace = load_cluster("dgx-h100-80g", 16).gpu.pace
    assert r.exit_code == 0 and f"computes at {100 * pace:.1f} % of a median GPU's pace (the slowest of 16" in r.output
    assert json.loads(run(*args, "--json").output)["slowest_gpu_pace"] == pytest.approx(pace)
    flat = tmp_path / "flat.toml"
    from pathlib import Path
    spec = Path(__file__).resolve().parents[2] / "cluster_specs" / "dgx-h100-80g.toml"
    flat.write_text(spec.read_text().replace("speed_variability = 0.017", "speed_variability = 0.0", 1))
    r = run(*args, "--cluster", str(flat))
    assert r.exit_code == 0 and "slowest GPU" not in r.output


def test_simulate_names_the_peak_an_fp8_plans_mfu_is_against():
    import re
    args = ("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--global-batch", "64")
    bf16 = run(*args)
    assert bf16.exit_code == 0 and "of the FP8 peak" not in bf16.output
    r = run(*args, "--precision", "fp8")
    m = re.search(r"MFU ([\d.]+) % of the 16-bit peak, ([\d.]+) % of the FP8 peak", " ".join(r.output.split()))
    assert r.exit_code == 0 and m
    # the H100's FP8 peak is twice its BF16 one (datasheet): the same model FLOPs are half its share
    assert float(m.group(2)) == pytest.approx(float(m.group(1)) / 2, abs=0.06)


def test_simulate_and_search_say_how_close_validate_comes_on_the_gpu():
    # the plan's GPU and model family: validate's figures beside the prediction, in text and in --json
    args = ("simulate", "--model", "gpt-1.7b", "--gpus", "16", "--tp", "2", "--global-batch", "64")
    r = run(*args)
    assert r.exit_code == 0 and "measured dense transformer runs on the H100-SXM5-80GB" in r.output
    accuracy = json.loads(run(*args, "--json").output)["measured_accuracy"]
    assert accuracy["gpu"] == "H100-SXM5-80GB" and accuracy["kind"] == "dense" and accuracy["runs"] > 100
    r = run("simulate", "--model", "resnet50", "--gpus", "8")
    assert r.exit_code == 0 and "no measured CNN run on the H100-SXM5-80GB" in r.output
    assert json.loads(run("simulate", "--model", "resnet50", "--gpus", "8", "--json").output)["measured_accuracy"] is None
