"""The calibrated cluster spec as a TOML file of ``cluster_specs/*.toml``'s schema, with its provenance: a comment on
each fitted key and a ``[calibration]`` table (inputs with hashes, date, fitted values with uncertainty, residuals)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

from autoplan.calibrate.fit import Fit
from autoplan.calibrate.model import ClusterSpec

GIB = 2**30


def _s(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(str(text), ensure_ascii=True)


def _n(value: float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return repr(round(float(value), 6)) if math.isfinite(value) else "0.0"


def _gpu_rows(c: ClusterSpec) -> list[tuple[str, object]]:
    g = c.gpu
    rows: list[tuple[str, object]] = [
        ("name", g.name), ("peak_tflops", g.peak_flops / 1e12), ("hbm_gib", g.hbm_bytes / GIB),
        ("hbm_bandwidth_gb_per_s", g.hbm_bandwidth / 1e9), ("sm_count", g.sm_count), ("gemm_tile", list(g.gemm_tile)),
        ("gemm_efficiency", g.gemm_efficiency), ("gemm_half_k", g.gemm_half_k),
        ("attention_efficiency", g.attention_efficiency), ("memory_efficiency", g.memory_efficiency),
        ("clock_ratio", g.clock_ratio), ("kernel_overhead_us", g.kernel_overhead * 1e6),
        ("memory_reserve_gib", g.memory_reserve_bytes / GIB)]
    optional = [("attention_memory_efficiency", g.attention_memory_efficiency),
                ("flash2_attention_efficiency", g.flash2_attention_efficiency),
                ("fp8_peak_tflops", g.fp8_peak_flops / 1e12), ("fp8_gemm_efficiency", g.fp8_gemm_efficiency),
                ("epilogue_exposure", g.epilogue_exposure),
                ("l2_cache_mib", g.l2_cache_bytes / 2**20), ("l2_bandwidth_gb_per_s", g.l2_bandwidth / 1e9),
                ("host_launch_us", g.host_launch * 1e6), ("host_step_ms", g.host_step * 1e3),
                ("graph_kernel_overhead_us", g.graph_kernel_overhead * 1e6),
                ("speed_variability", g.speed_variability), ("tdp_w", g.tdp_w), ("idle_w", g.idle_w),
                ("host_link_gb_per_s", g.host_link / 1e9), ("host_adam_params_per_s", g.host_adam_params_per_s)]
    rows += [(k, v) for k, v in optional if v]
    for key in ("fp8_blockwise_gemm_ratio", "mxfp8_gemm_ratio", "fp8_attention_fwd_ratio", "fp8_attention_bwd_ratio",
                "flash2_deterministic_bwd_ratio", "fused_deterministic_bwd_ratio"):
        if getattr(g, key) != 1.0:
            rows.append((key, getattr(g, key)))
    if g.mxfp8:
        rows.append(("mxfp8", True))
    if g.fp8_any_layout:
        rows.append(("fp8_any_layout", True))
    return rows


def _value(v: object) -> str:
    if isinstance(v, str):
        return _s(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return _n(v)  # type: ignore[arg-type]


def render(fit: Fit, name: str, inputs: list[dict], command: str, version: str) -> str:
    """The calibrated spec's TOML text."""
    c, date = fit.cluster, datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    fitted = {p.name: (v, sd, b) for p, v, sd, b in zip(fit.params, fit.values, fit.sds, fit.base_values)}
    out = [f"# {name}: {fit.base.name} calibrated by `autoplan calibrate` on {date}.",
           "# Every key not marked 'calibrated' is the base spec's (see its file for the sources); the [calibration]",
           "# table at the end records the inputs (with their SHA-256), the fitted values with one standard deviation",
           "# and the residuals.",
           f"name = {_s(name)}", f"description = {_s(fit.base.description + ' (calibrated)')}",
           f"source = {_s(f'autoplan calibrate --base {fit.base.name}; ' + fit.base.source)}",
           f"gpus_per_node = {fit.base.gpus_per_node}", f"flash_attention = {_n(c.flash_attention)}"]
    if c.nvlink_domain_gpus:
        out.append(f"nvlink_domain_gpus = {c.nvlink_domain_gpus}")
    # the whole-run keys (energy and price) as the base spec gives them
    out += [f"{k} = {_n(v)}" for k, v in (("node_overhead_w", c.node_overhead_w), ("pue", c.pue),
                                          ("gpu_hour_usd", c.gpu_hour_usd)) if v and not (k == "pue" and v == 1.0)]
    if not c.contention:
        out.append("contention = false")

    def line(table: str, key: str, value: object) -> str:
        text = f"{key} = {_value(value)}"
        hit = fitted.get(f"{table}.{key}")
        if hit:
            v, sd, b = hit
            text += f"  # calibrated: {v:.4g} ± {sd:.2g} (base {b:.4g})"
        return text

    out += ["", "[gpu]"] + [line("gpu", k, v) for k, v in _gpu_rows(c)]
    for t in c.tiers:
        out += ["", "[[tiers]]", f"name = {_s(t.name)}", f"gpus = {t.gpus}",
                line(f"tiers.{t.name}", "bandwidth_gb_per_s", t.bandwidth / 1e9),
                line(f"tiers.{t.name}", "efficiency", t.efficiency),
                line(f"tiers.{t.name}", "latency_us", t.latency * 1e6),
                f"half_bandwidth_mib = {_n(t.half_bandwidth_bytes / 2**20)}"]
        if t.allreduce_busbw:
            out.append(f"allreduce_busbw_gb_per_s = {_n(t.allreduce_busbw / 1e9)}")
        if t.oversubscription != 1.0:
            out.append(f"oversubscription = {_n(t.oversubscription)}")
    for d in c.dimensions:
        out += ["", "[[dimensions]]", f"name = {_s(d.name)}", f"size = {d.size}", f"topology = {_s(d.topology)}",
                f"bandwidth_gb_per_s = {_n(d.bandwidth / 1e9)}", f"efficiency = {_n(d.efficiency)}",
                f"latency_us = {_n(d.latency * 1e6)}"]
    loo = [abs(r.error_pct) for r in fit.loo]
    out += ["", "[calibration]", f"tool = {_s(f'autoplan {version}')}", f"command = {_s(command)}",
            f"date = {_s(date)}", f"base = {_s(fit.base.name)}", f"measurements = {len(fit.residuals)}",
            f"residual_rms_pct = {_n(fit.rms_pct)}", f"residual_max_pct = {_n(fit.max_pct)}"]
    if loo:
        out += [f"leave_one_out_mean_pct = {_n(sum(loo) / len(loo))}", f"leave_one_out_max_pct = {_n(max(loo))}"]
    if fit.at_bound:
        out.append(f"at_bound = {_value(fit.at_bound)}")
    for rec in inputs:
        out += ["", "[[calibration.inputs]]"] + [f"{k} = {_value(v)}" for k, v in rec.items()]
    for p, v, sd, b in zip(fit.params, fit.values, fit.sds, fit.base_values):
        out += ["", f"[calibration.fitted.{_s(p.name)}]", f"value = {_n(v)}", f"sd = {_n(sd)}", f"base = {_n(b)}",
                f"low = {_n(p.low)}", f"high = {_n(p.high)}", f"meaning = {_s(p.doc)}"]
    return "\n".join(out) + "\n"
