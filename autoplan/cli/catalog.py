"""`autoplan models` and `autoplan clusters`: the built-in models and cluster specs."""

from __future__ import annotations

import json

import click

from autoplan.cli.app import (_console, friendly,
                              main)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly
def models(as_json: bool) -> None:
    """List the built-in models."""
    from autoplan.families.catalog import aliases, list_models

    ms = list_models()
    if as_json:
        click.echo(json.dumps([{"name": m.name, "params": m.params(), **({"mtp_params": m.mtp_params()}
                                                                         if m.mtp_layers else {}),
                                "layers": m.layers, "hidden": m.hidden,
                                "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden,
                                "vocab": m.vocab, "seq_len": m.seq_len, "source": m.source} for m in ms], indent=2))
        return
    from rich.table import Table
    t = Table(title="Built-in models (also: --model FILE.toml)", title_justify="left")
    for col in ("name", "params", "layers", "hidden", "heads (kv)", "ffn", "vocab", "seq", "mlp", "source"):
        t.add_column(col, justify="right" if col not in ("name", "source", "mlp") else "left")
    for m in ms:
        n = m.params()
        size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"
        size += f" + {m.mtp_params() / 1e9:.1f}B MTP" if m.mtp_layers else ""      # the MTP modules beside
        t.add_row(m.name, size, str(m.layers), str(m.hidden), f"{m.heads} ({m.kv_heads})",
                  str(m.ffn_hidden), str(m.vocab), str(m.seq_len), m.activation, m.source)
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
