"""NVLink domains spanning nodes (nvlink_domain_gpus) and explicit [[dimensions]] in cluster files."""

from __future__ import annotations

import tomllib

import pytest

from autoplan.errors import SpecError
from autoplan.specs.cluster import load_cluster, specs_dir


def _toml(data: dict) -> str:
    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace('"', '\\"') + '"'
        return str(list(v)) if isinstance(v, (list, tuple)) else str(v)

    tables = [k for k, v in data.items() if isinstance(v, dict) or (isinstance(v, list) and v and isinstance(v[0], dict))]
    lines = [f"{k} = {value(v)}" for k, v in data.items() if k not in tables]
    lines += ["[gpu]"] + [f"{k} = {value(v)}" for k, v in data["gpu"].items()]
    for table in ("tiers", "dimensions"):
        for row in data.get(table, []):
            lines += [f"[[{table}]]"] + [f"{k} = {value(v)}" for k, v in row.items()]
    return "\n".join(lines) + "\n"


def _load(tmp_path, edit) -> object:
    data = tomllib.loads((specs_dir() / "gb200-nvl72.toml").read_text())
    edit(data)
    path = tmp_path / "nvl.toml"
    path.write_text(_toml(data))
    return load_cluster(str(path), 144)


def test_gb200_nvl72_is_one_nvlink_domain_of_72_over_trays_of_4():
    c = load_cluster("gb200-nvl72", 1152)
    assert (c.gpus_per_node, c.domain_gpus, c.nodes, c.domains) == (4, 72, 288, 16)
    assert [(d.name, d.size, d.topology) for d in c.dimensions] == [("nvlink", 72, "switch"),
                                                                    ("infiniband", 0, "switch")]


def test_round_trip_of_the_test_serializer(tmp_path):
    assert _load(tmp_path, lambda d: None) == load_cluster("gb200-nvl72", 144)


@pytest.mark.parametrize("name", ["dgx-a100-80g", "dgx-h100-80g", "dgx-h800-80g", "dgx-b200"])
def test_files_without_the_new_keys_keep_their_meaning(name):
    c = load_cluster(name, 64)
    assert c.domain_gpus == c.gpus_per_node == 8 and c.domains == c.nodes and c.dimensions == ()


def _top(key, value):
    def edit(data):
        data[key] = value
    return edit


def _dim(index, key, value):
    def edit(data):
        if value is KeyError:
            del data["dimensions"][index][key]
        else:
            data["dimensions"][index][key] = value
    return edit


@pytest.mark.parametrize("edit, match", [
    (_top("nvlink_domain_gpus", 70), "nvlink_domain_gpus 70 must be a whole number of nodes of gpus_per_node 4 "
                                     r"\(e.g. 68 or 72\)"),
    (_top("nvlink_domain_gpus", 2), r"nvlink_domain_gpus 2 must be a whole number of nodes of gpus_per_node 4 \(e.g. 4\)$"),
    (_top("nvlink_domain_gpus", -1), "nvlink_domain_gpus in the top level must be an integer ≥ 0"),
    (_top("nvlink_domain_gpus", 36), "the first tier 'nvlink' joins 72 GPUs but the NVLink domain has 36"),
    (_dim(0, "topology", "torus"), r"topology in \[\[dimensions\]\] #1 must be one of ring, switch, "
                                   "fully_connected, got 'torus'"),
    (_dim(0, "size", 1), r"size in \[\[dimensions\]\] #1 must be ≥ 2"),
    (_dim(0, "size", 0), r"size 0 \(the rest of the cluster\) is allowed only in the last \[\[dimensions\]\] table"),
    (_dim(0, "size", 64), "the innermost dimensions must tile the NVLink domain of 72 GPUs exactly; sizes 64 x 0"),
    (_dim(1, "bandwidth_gb_per_s", 0), r"bandwidth_gb_per_s in \[\[dimensions\]\] #2 must be a number"),
    (_dim(1, "latency_us", KeyError), r"missing key 'latency_us' in \[\[dimensions\]\] #2"),
    (_dim(1, "links", 4), r"unknown key\(s\) links in \[\[dimensions\]\] #2"),
    (_top("dimensions", []), "dimensions must be one or more"),
])
def test_bad_domains_and_dimensions_name_file_table_and_numbers(tmp_path, edit, match):
    with pytest.raises(SpecError, match=match) as err:
        _load(tmp_path, edit)
    assert "nvl.toml" in str(err.value)


def test_dimensions_may_split_the_domain(tmp_path):
    def split(data):
        nvl = data["dimensions"][0]
        data["dimensions"] = [dict(nvl, name="tray", size=4), dict(nvl, name="rack", size=18)] + data["dimensions"][1:]
    c = _load(tmp_path, split)
    assert [d.size for d in c.dimensions] == [4, 18, 0]
