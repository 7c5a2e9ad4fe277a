"""`autoplan collective`: one collective on a multi-dimensional network, baseline or Themis schedule."""

from __future__ import annotations

import json

import click

from autoplan.cli.app import (DEFAULT_CLUSTER, _console, _UsablePath, friendly,
                              main)
from autoplan.errors import SpecError


_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str) -> float:
    """A size such as ``1GiB``, ``64MiB``, ``500MB`` or ``1e9`` in bytes."""
    import re
    m = re.fullmatch(r"\s*([0-9.]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in _UNITS:
        raise SpecError(f"--bytes {text!r} is not a size; use e.g. 1GiB, 64MiB, 500MB or 1e9")
    try:
        value = float(m.group(1)) * _UNITS[m.group(2)]
    except ValueError:
        raise SpecError(f"--bytes {text!r} is not a size; use e.g. 1GiB, 64MiB, 500MB or 1e9") from None
    return value


def parse_network(text: str) -> tuple:
    """Dimensions from ``TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US],...``, innermost first: ``ring:4:200,switch:8:50``."""
    from autoplan.hardware.dims import make_dims

    sizes, tops, bws, lats = [], [], [], []
    for part in text.split(","):
        fields = part.strip().split(":")
        try:
            if len(fields) not in (3, 4):
                raise ValueError
            sizes.append(int(fields[1]))
            bws.append(float(fields[2]))
            lats.append(float(fields[3]) if len(fields) == 4 else 0.5)
        except ValueError:
            raise SpecError(f"--network part {part.strip()!r} must be TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US], "
                            f"e.g. ring:4:200:0.5") from None
        tops.append(fields[0])
    return make_dims(sizes, tops, bws, lats)


@main.command("collective")
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True,
              help="Cluster spec name or a .toml file; its [[dimensions]], else its tiers, give the dimensions.")
@click.option("--gpus", type=int, default=None, help="GPUs in the group (required unless --network).")
@click.option("--network", default=None,
              help="Dimensions instead of a cluster: TOPOLOGY:SIZE:GB_PER_S[:LATENCY_US],... innermost first "
                   "(topology ring, switch or fully_connected; latency 0.5 µs if left out).")
@click.option("--op", type=click.Choice(["all_reduce", "reduce_scatter", "all_gather"]), default="all_reduce",
              show_default=True)
@click.option("--bytes", "size", default="1GiB", show_default=True, help="Buffer size: 1GiB, 64MiB, 500MB, 1e9.")
@click.option("--policy", type=click.Choice(["baseline", "themis"]), default="themis", show_default=True,
              help="Dimension order per chunk: fixed ascending, or Themis's load-balancing greedy.")
@click.option("--chunks", type=int, default=64, show_default=True, help="Chunks the buffer is split into.")
@click.option("--intra", type=click.Choice(["fifo", "scf"]), default="scf", show_default=True,
              help="Order of waiting chunks within a dimension: arrival, or smallest chunk first.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--trace", "trace_path", type=_UsablePath(dir_okay=False, writable=True), default=None,
              help="Write the chunk phases, run as events on per-dimension link streams, as a Perfetto trace.")
@friendly
def collective_cmd(cluster: str, gpus: int | None, network: str | None, op: str, size: str, policy: str,
                   chunks: int, intra: str, as_json: bool, trace_path: str | None = None) -> None:
    """Time one collective on a multi-dimensional network, baseline or Themis schedule (arXiv 2110.04478)."""
    import math

    from autoplan.hardware.dims import dims_of
    from autoplan.hardware.themis import collective
    from autoplan.specs.cluster import load_cluster

    nbytes = parse_bytes(size)
    if network is not None:
        dims, where = parse_network(network), "--network " + network
        group = math.prod(d.size for d in dims)
        if gpus is not None and gpus != group:
            raise SpecError(f"--gpus {gpus} differs from the {group} GPUs of --network {network} (give one of them)")
    else:
        if gpus is None or gpus < 2:
            raise SpecError(f"--gpus must be an integer ≥ 2 (the group size: a collective needs two GPUs), got {gpus}")
        spec = load_cluster(cluster)
        spec = spec.with_gpus(-(-gpus // spec.gpus_per_node) * spec.gpus_per_node)
        dims, where = dims_of(spec, gpus), f"{gpus} GPUs of {spec.name}"
    r = collective(dims, op, nbytes, policy=policy, chunks=chunks, intra=intra)
    base = collective(dims, op, nbytes, policy="baseline", chunks=chunks, intra=intra)
    if trace_path is not None:
        from pathlib import Path

        from autoplan.sim.chunked import simulate, trace_events
        Path(trace_path).write_text(json.dumps({"traceEvents": trace_events(simulate(r))}))
    rows = [{"dimension": d.name or f"dim {i + 1}", "size": d.size, "topology": d.topology,
             "bandwidth_gb_per_s": d.bandwidth / 1e9, "latency_us": d.latency * 1e6, "sent_bytes": s,
             "busy_ms": b * 1e3, "utilisation": u}
            for i, (d, s, b, u) in enumerate(zip(r.dims, r.sent, r.busy, r.utilisation))]
    summary = {"network": where, "op": op, "bytes": nbytes, "policy": policy, "chunks": chunks, "intra": intra,
               "time_ms": r.time * 1e3, "baseline_time_ms": base.time * 1e3,
               "speedup_over_baseline": base.time / r.time if r.time else 1.0,
               "bandwidth_utilisation": r.bandwidth_utilisation, "fell_back_to_baseline": r.fell_back,
               "dimensions": rows}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    from rich.table import Table
    from rich.text import Text
    t = Table(title=Text(f"{op} of {nbytes / 2**20:,.1f} MiB on {where}, {policy} ({chunks} chunks, {intra})"),
              title_justify="left")
    for col in ("dimension", "size", "topology", "GB/s", "latency µs", "sent MiB", "busy ms", "utilisation"):
        t.add_column(col, justify="left" if col in ("dimension", "topology") else "right")
    for row in rows:
        t.add_row(Text(row["dimension"]), str(row["size"]), Text(row["topology"]), f"{row['bandwidth_gb_per_s']:g}",
                  f"{row['latency_us']:g}", f"{row['sent_bytes'] / 2**20:,.1f}", f"{row['busy_ms']:.3f}",
                  f"{row['utilisation']:.1%}")
    _console().print(t)
    click.echo(f"time {r.time * 1e3:.3f} ms, bandwidth utilisation {r.bandwidth_utilisation:.1%} "
               "(bytes sent per GPU / time / sum of the dimensions' bandwidths)")
    if policy == "themis":
        note = " (the greedy order was slower here, so the baseline order is kept)" if r.fell_back else ""
        click.echo(f"baseline: {base.time * 1e3:.3f} ms, bandwidth utilisation {base.bandwidth_utilisation:.1%}; "
                   f"Themis is {base.time / r.time if r.time else 1.0:.2f}x faster{note}")
