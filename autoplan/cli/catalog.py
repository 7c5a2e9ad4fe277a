"""`autoplan models` and `autoplan clusters`: the built-in models and cluster specs."""

from __future__ import annotations

import json
from typing import Any

import click

from autoplan.cli.app import (_console, friendly,
                              main)


def _size(n: float) -> str:
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _family(m: Any) -> str:
    """The table a model is listed in: transformer, moe, cnn or dlrm."""
    return {"dense": "transformer"}.get(m.family, m.family)


def _row(m: Any) -> dict:
    """The columns that mean something for the model's family."""
    if m.family == "cnn":
        c = m.structure
        return {"name": m.name, "params": _size(c.params()), "layers": len(c.layers),
                "input": f"{c.input_channels}×{'×'.join(map(str, c.input_size))}",
                "GFLOP/sample": f"{c.model_flops_per_sample() / 1e9:.1f}", "framework": c.framework,
                "source": m.source}
    if m.family == "dlrm":
        d = m.structure
        return {"name": m.name, "params": _size(m.params()), "tables": len(d.tables),
                "rows": f"{sum(t.rows for t in d.tables):,}", "dim": "/".join(sorted({str(t.dim) for t in d.tables})),
                "bottom MLP": "-".join(map(str, d.bottom_mlp)), "top MLP": "-".join(map(str, d.top_mlp)),
                "batch": f"{d.global_batch:,}", "source": m.source}
    row = {"name": m.name, "params": _size(m.params()) + (f" + {_size(m.mtp_params())} MTP" if m.mtp_layers else "")}
    if m.moe:
        row |= {"active": _size(m.active_params()), "layers": f"{m.dense_layers}+{m.moe_layers}",
                "experts": f"{m.experts} (top {m.top_k}{f', {m.shared_experts} shared' if m.shared_experts else ''})",
                "expert ffn": m.moe_ffn_hidden, "attention": "MLA" if m.mla else f"{m.heads} ({m.kv_heads})"}
    else:
        row |= {"layers": m.layers, "heads (kv)": f"{m.heads} ({m.kv_heads})", "ffn": m.ffn_hidden, "mlp": m.activation}
    return row | {"hidden": m.hidden, "vocab": m.vocab, "seq": m.seq_len, "source": m.source}


_TITLES = {"transformer": "Transformers", "moe": "Mixtures of experts", "cnn": "CNNs (samples are images or volumes)",
           "dlrm": "DLRMs (samples are rows of dense and sparse features)"}


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def models(as_json: bool) -> None:
    """List the built-in models, one table per family with the columns that mean something for it."""
    from autoplan.families.catalog import aliases, list_models

    ms = list_models()
    if as_json:
        click.echo(json.dumps([{"name": m.name, "family": _family(m), "params": m.params(),
                                **({"mtp_params": m.mtp_params()} if m.mtp_layers else {}),
                                **({"active_params": m.active_params()} if m.moe else {}),
                                "layers": m.layers, "hidden": m.hidden,
                                "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden,
                                "vocab": m.vocab, "seq_len": m.seq_len, "source": m.source}
                               if m.structure is None else
                               {"family": _family(m), **{k.replace(" ", "_").replace("/", "_per_"): v
                                                         for k, v in _row(m).items()}, "params": m.params()}
                               for m in ms], indent=2))
        return
    from rich.table import Table
    for family, title in _TITLES.items():
        rows = [_row(m) for m in ms if _family(m) == family]
        if not rows:
            continue
        t = Table(title=f"{title} (also: --model FILE.toml or config.json)", title_justify="left")
        for col in rows[0]:
            t.add_column(col, justify="left" if col in ("name", "source", "mlp", "framework", "attention") else "right")
        for r in rows:
            t.add_row(*(str(v) for v in r.values()))
        _console().print(t)
    _console().print("aliases: " + ", ".join(f"{a} → {n}" for a, n in sorted(aliases().items())))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def clusters(as_json: bool) -> None:
    """List the built-in cluster specs (cluster_specs/*.toml)."""
    from autoplan.specs.cluster import list_clusters, load_cluster

    specs = [load_cluster(name) for name in list_clusters()]
    if as_json:
        click.echo(json.dumps([{"name": c.name, "description": c.description, "gpu": c.gpu.name,
                                "gpus_per_node": c.gpus_per_node, "nvlink_domain_gpus": c.domain_gpus,
                                "peak_tflops": c.gpu.peak_flops / 1e12,
                                "hbm_gib": c.gpu.hbm_bytes / 2**30,
                                "tiers": [{"name": t.name, "gpus": t.gpus, "bandwidth_gb_per_s": t.bandwidth / 1e9,
                                           "efficiency": t.efficiency} for t in c.tiers]} for c in specs], indent=2))
        return
    from rich.table import Table
    t = Table(title="Cluster specs (--cluster NAME or FILE.toml; --gpus sets the node count)", title_justify="left")
    for col in ("name", "GPU", "per node", "peak TFLOP/s", "HBM GiB", "network tiers (GB/s per GPU × efficiency)"):
        t.add_column(col)
    for c in specs:
        tiers = ", ".join(f"{x.name} {x.bandwidth / 1e9:g}×{x.efficiency:g}" for x in c.tiers)
        per_node = str(c.gpus_per_node) + (f" (NVLink {c.domain_gpus})" if c.domain_gpus != c.gpus_per_node else "")
        t.add_row(c.name, c.gpu.name, per_node, f"{c.gpu.peak_flops / 1e12:g}",
                  f"{c.gpu.hbm_bytes / 2**30:g}", tiers)
    _console().print(t)
