"""Model and cluster files: every malformed value is a SpecError that names the file, the table and the key."""

from __future__ import annotations

import tomllib

import pytest

from autoplan.errors import SpecError
from autoplan.families.catalog import load_model
from autoplan.specs.cluster import list_clusters, load_cluster, specs_dir
from autoplan.specs.model import MAX_SIZE, ModelSpec

SHAPE = dict(name="m", layers=2, hidden=256, heads=8, ffn_hidden=1024, vocab=100, seq_len=64)


@pytest.mark.parametrize("bad, match", [
    (dict(bias="yes"), "bias must be true or false"), (dict(dropout=1), "dropout must be true or false"),
    (dict(name=3), "name must be a non-empty string"), (dict(name=""), "non-empty"),
    (dict(kv_heads=-2), "kv_heads must be a positive integer"), (dict(head_dim=-1), "head_dim"),
    (dict(layers=MAX_SIZE + 1), "larger than"), (dict(hidden=1.5), "positive integer"),
    (dict(vocab=True), "positive integer"), (dict(source=["a"]), "source must be a string"),
])
def test_model_fields_are_checked(bad, match):
    with pytest.raises(SpecError, match=match):
        ModelSpec(**(SHAPE | bad))


@pytest.mark.parametrize("text, match", [
    ("model = 3\n", r"\[model\] must be a table"),
    ("layers = 2\nhidden = 256\nheads = 8\nffn_hidden = 1024\nvocab = 100\nseq_len = 64\nactivation = 'tanh'\n",
     r"m\.toml': model 'm': activation 'tanh' is not one of gelu, swiglu, relu2"),
    ("layers = 2\n", "missing key.*hidden.*required: layers, hidden"),
    ("layers = [2,\n", r"not valid TOML: .*after line 1"),
])
def test_model_files_name_file_and_key(tmp_path, text, match):
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=match):
        load_model(path)


def test_unreadable_model_files(tmp_path):
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\x00\xff\xfe")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_model(binary)
    folder = tmp_path / "d.toml"
    folder.mkdir()
    with pytest.raises(SpecError, match="cannot read model file"):
        load_model(folder)


def _cluster_text(edit) -> str:
    data = tomllib.loads((specs_dir() / "dgx-a100-80g.toml").read_text())
    edit(data)
    lines = []
    for k, v in data.items():
        if not isinstance(v, (dict, list)):
            lines.append(f"{k} = {_value(v)}")
    lines.append("[gpu]")
    lines += [f"{k} = {_value(v)}" for k, v in data["gpu"].items()]
    for tier in data["tiers"] if isinstance(data["tiers"], list) else ():
        lines.append("[[tiers]]")
        lines += [f"{k} = {_value(v)}" for k, v in tier.items()]
    return "\n".join(lines) + "\n"


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    if isinstance(v, float) and v != v:
        return "nan"
    if v == float("inf"):
        return "inf"
    return str(list(v)) if isinstance(v, (list, tuple)) else str(v)


def _set(table: str, key: str, value: object):
    def edit(data: dict) -> None:
        target = data if table == "top" else data["gpu"] if table == "gpu" else data["tiers"][int(table)]
        if value is KeyError:
            del target[key]
        else:
            target[key] = value
    return edit


@pytest.mark.parametrize("edit, match", [
    (_set("gpu", "sm_count", KeyError), r"missing key 'sm_count' in \[gpu\]"),
    (_set("1", "bandwidth_gb_per_s", KeyError), r"missing key 'bandwidth_gb_per_s' in \[\[tiers\]\] #2"),
    (_set("gpu", "peak_tflops", float("nan")), r"peak_tflops in \[gpu\] must be a number in \[0.1, 100000\], got nan"),
    (_set("gpu", "hbm_gib", float("inf")), "hbm_gib in .gpu. must be a number in .*, got inf"),
    (_set("gpu", "gemm_efficiency", 1.2), r"gemm_efficiency in \[gpu\] must be a number in \[0.01, 1\], got 1.2"),
    (_set("gpu", "kernel_overhead_us", "4"), "kernel_overhead_us in .gpu. must be a number in .0, 1e\\+06., got '4'"),
    (_set("gpu", "memory_reserve_gib", -1), "memory_reserve_gib"),
    (_set("gpu", "gemm_tile", [128]), "gemm_tile in .gpu. must be two positive integers"),
    (_set("gpu", "sm_count", 107.5), "sm_count in .gpu. must be a positive integer"),
    (_set("gpu", "name", 7), "name in .gpu. must be a string"),
    (_set("top", "gpus_per_node", 0), "gpus_per_node in the top level must be a positive integer"),
    (_set("top", "flash_attention", "yes"), "flash_attention in the top level must be true or false"),
    (_set("top", "tiers", 3), "tiers must be one or more"),
    (_set("top", "nvlink_gbps", 3), "unknown key.*nvlink_gbps in the top level"),
    (_set("0", "efficency", 0.8), r"unknown key.*efficency in \[\[tiers\]\] #1"),
    (_set("0", "gpus", -8), r"gpus in \[\[tiers\]\] #1 must be an integer ≥ 0"),
    (_set("0", "latency_us", -1.0), "latency_us"),
    (_set("gpu", "peak_tflops", 1e-300), r"peak_tflops in \[gpu\] must be a number in \[0.1, 100000\], got 1e-300"),
    (_set("gpu", "memory_efficiency", 80), r"memory_efficiency in \[gpu\] must be a number in \[0.01, 1\], got 80"),
    (_set("gpu", "memory_reserve_gib", 80), "memory_reserve_gib 80 in .gpu. leaves nothing of hbm_gib 80"),
    (_set("gpu", "attention_memory_efficiency", 1e-9), "attention_memory_efficiency .* must be 0 or a number"),
    (_set("gpu", "flash2_attention_efficiency", 2.0), "flash2_attention_efficiency .* must be 0 or a number"),
    (_set("1", "bandwidth_gb_per_s", 0), r"bandwidth_gb_per_s in \[\[tiers\]\] #2 must be a number in .*, got 0"),
    (_set("1", "bandwidth_gb_per_s", float("inf")), r"bandwidth_gb_per_s in \[\[tiers\]\] #2 .*, got inf"),
    (_set("0", "latency_us", float("nan")), r"latency_us in \[\[tiers\]\] #1 must be a number in \[0, .*, got nan"),
    (_set("0", "latency_us", 1e300), r"latency_us .*, got 1e\+300"),
    (_set("0", "efficiency", 1.01), r"efficiency in \[\[tiers\]\] #1 must be a number in \[0.01, 1\], got 1.01"),
    (_set("top", "gpus_per_node", 10**6), "gpus_per_node in the top level must be a positive integer .at most 4,096"),
])
def test_cluster_files_name_file_table_and_key(tmp_path, edit, match):
    path = tmp_path / "c.toml"
    path.write_text(_cluster_text(edit))
    with pytest.raises(SpecError, match=match) as err:
        load_cluster(str(path), 8)
    assert "c.toml" in str(err.value)


def test_builtin_clusters_still_load():
    for name in list_clusters():
        assert load_cluster(name, 16).gpus == 16


def test_gpu_counts_are_whole_and_bounded():
    cluster = load_cluster("dgx-a100-80g")
    with pytest.raises(SpecError, match="more than"):
        cluster.with_gpus(8 * 2**30)
    with pytest.raises(SpecError, match="positive integer"):
        cluster.with_gpus(True)
    with pytest.raises(SpecError, match="unknown cluster"):
        load_cluster("../cluster_specs/dgx-a100-80g")


def _keys(table: str) -> list[str]:
    data = tomllib.loads((specs_dir() / "dgx-a100-80g.toml").read_text())
    target = data if table == "top" else data["gpu"] if table == "gpu" else data["tiers"][0]
    return sorted(k for k, v in target.items() if k not in ("gpu", "tiers"))


@pytest.mark.parametrize("table", ["top", "gpu", "0"])
def test_optional_keys_are_exactly_those_the_parser_defaults(tmp_path, table):
    from autoplan.specs.cluster import OPTIONAL

    path = tmp_path / "c.toml"
    for key in _keys(table):
        path.write_text(_cluster_text(_set(table, key, KeyError)))
        if key in OPTIONAL["tier" if table == "0" else table]:
            assert load_cluster(str(path), 8).gpus == 8
        else:
            with pytest.raises(SpecError, match=f"missing key '{key}'"):
                load_cluster(str(path), 8)


# ------------------------------------------------------------------------------------------------ bounded reads

def test_reads_take_regular_files_only_and_never_block(tmp_path):
    import os

    from autoplan.specs.files import read_bytes

    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)                                    # no writer: an ordinary open would wait for ever
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    for path, match in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"), (tmp_path, "is a folder"),
                        (loop, "link loop"), (tmp_path / "none.toml", "does not exist")):
        with pytest.raises(SpecError, match=match):
            read_bytes(path, "model")
    (tmp_path / "real.toml").write_text("x = 1\n")
    (tmp_path / "link.toml").symlink_to(tmp_path / "real.toml")
    assert read_bytes(tmp_path / "link.toml", "model") == b"x = 1\n"
    with pytest.raises(SpecError, match="is a symbolic link"):
        read_bytes(tmp_path / "link.toml", "run-folder", follow=False)


def test_reads_are_bounded_in_size_nesting_and_aliases(tmp_path):
    from autoplan.specs.files import MAX_DEPTH, read_bytes, read_json, read_toml, read_yaml

    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.truncate(2**30)                              # sparse: refused by its size, never read
    with pytest.raises(SpecError, match="more than the 16.0 MiB"):
        read_bytes(big, "model")
    for name, text, read in (("d.toml", "a = " + "[" * 100 + "]" * 100, read_toml),
                             ("d.json", "[" * 100_000 + "]" * 100_000, read_json),
                             ("d.yaml", "a: " + "[" * 100 + "]" * 100, read_yaml)):
        (tmp_path / name).write_text(text)
        with pytest.raises(SpecError, match=f"nests deeper than {MAX_DEPTH} levels"):
            read(tmp_path / name, "x")
    (tmp_path / "fine.toml").write_text("a = " + "[" * 10 + "]" * 10)
    assert read_toml(tmp_path / "fine.toml", "x")
    laughs = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] + [
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    (tmp_path / "laughs.yaml").write_text("\n".join(laughs))
    with pytest.raises(SpecError, match="more than 32 YAML aliases") as err:
        read_yaml(tmp_path / "laughs.yaml", "validation")
    assert len(str(err.value)) < 300


def test_odd_models_are_refused_when_read(tmp_path):
    """A family that costs models by their structure (CNN layers, DLRM tables) refuses a model file without it."""
    for family, match in (("cnn", "needs its CNNSpec"), ("dlrm", "needs its DLRMSpec"), ("zzz", "is not one of")):
        path = tmp_path / f"{family}.toml"
        path.write_text("\n".join(f"{k} = {v!r}" if isinstance(v, int) else f'{k} = "{v}"'
                                  for k, v in (SHAPE | {"family": family}).items()))
        with pytest.raises(SpecError, match=match):
            load_model(path)


def test_a_cluster_read_back_passes_the_checks_of_a_cluster_file():
    import dataclasses

    from autoplan.specs.cluster import check_cluster

    for name in list_clusters():
        spec = load_cluster(name)
        assert check_cluster(spec, "specs.json") is spec
    spec = load_cluster("dgx-a100-80g")
    for bad, match in ((dict(tiers=()), "tiers must be one or more"),
                       (dict(gpu=dataclasses.replace(spec.gpu, sm_count=0)), "sm_count in \\[gpu\\]"),
                       (dict(gpu=dataclasses.replace(spec.gpu, peak_flops=float("nan"))), "peak_tflops"),
                       (dict(name="a\nb"), "printable"), (dict(gpus_per_node=0), "gpus_per_node")):
        with pytest.raises(SpecError, match=match):
            check_cluster(dataclasses.replace(spec, **bad), "specs.json")
