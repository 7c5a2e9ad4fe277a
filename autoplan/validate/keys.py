"""The keys a transformer run of a validation file may carry: a key the predictions would not read is an error that
names it, never a published fact silently dropped (a misspelled ``micro_batch`` once left the micro-batch searched)."""

from __future__ import annotations

from dataclasses import fields

from autoplan.errors import SpecError
from autoplan.families.strategy import KNOBS
from autoplan.specs.model import ModelSpec

_OTHER_FAMILIES = {"spatial", "channel", "filter", "sharding"}
"""Plan knobs of the CNN and DLRM families: no transformer run reads them."""
_FILE_SPELLINGS = {"micro_batch": "microbatch", "virtual_stages": "virtual_stages_per_rank",
                   "zero": "zero_stage (a DeepSpeed stage) or distributed_optimizer (Megatron)"}
"""Plan fields a transformer run names its own way (public.yaml's schema)."""
STRATEGY_KEYS = frozenset({f.name for f in KNOBS} - _OTHER_FAMILIES - set(_FILE_SPELLINGS)) | {
    "microbatch", "virtual_stages_per_rank", "interleaved_schedule", "distributed_optimizer", "zero_stage",
    # published and implied by the keys above, so checked against them rather than read (``_implied``)
    "grad_accum", "scatter_gather_optimization"}
MODEL_KEYS = frozenset(f.name for f in fields(ModelSpec)) - {"source", "structure", "family"} | {
    "hf_config", "dtype", "force_balanced_routing",
    "params_b"}                      # the source's parameter count: a label, the model's own count is computed
HARDWARE_KEYS = frozenset({"gpu", "num_gpus", "cluster_spec", "flash_attention", "attention_kernel", "hbm_gib",
                           "nccl_algo",
                           # labels: the cluster spec holds the numbers the model uses
                           "gpus_per_node", "cluster", "intra_node", "inter_node", "peak_tflops_16bit",
                           "peak_tflops_fp8"})
RUN_KEYS = frozenset({"id", "group", "source", "hardware", "model", "strategy", "measured", "variants", "known_gap",
                      "calibration", "held_out", "needs", "verified", "verification", "derived",
                      "calculon_reported", "simumax_reported"})


def check_run_keys(run: dict, at: str) -> None:
    """Raise ``SpecError`` naming the first key of ``run`` (a case or a memory run) no prediction reads."""
    _only(run, RUN_KEYS, at, "")
    _strategy(run["strategy"], at, "strategy")
    _only(run["model"], MODEL_KEYS, at, "model.")
    _only(run["hardware"], HARDWARE_KEYS, at, "hardware.")
    for i, variant in enumerate(run.get("variants") or [], 1):
        if not isinstance(variant, dict) or not isinstance(variant.get("strategy"), dict) or not variant.get("label"):
            raise SpecError(f"{at}: variants #{i} must be a mapping of a label and a strategy")
        _only(variant, {"label", "strategy"}, at, f"variants #{i}: ")
        _strategy(variant["strategy"], at, f"variants #{i}: strategy")
    _implied(run["strategy"], at)


def _strategy(st: dict, at: str, where: str) -> None:
    for key in st:
        if key in _FILE_SPELLINGS:
            raise SpecError(f"{at}: {where}.{key}: this file spells it {_FILE_SPELLINGS[key]}")
    _only(st, STRATEGY_KEYS, at, where + ".")


def _only(table: dict, allowed: frozenset | set, at: str, where: str) -> None:
    unknown = sorted(str(k) for k in table if k not in allowed)
    if unknown:
        raise SpecError(f"{at}: unknown key {where}{unknown[0]}; allowed: {', '.join(sorted(allowed))}")


def _implied(st: dict, at: str) -> None:
    """The published keys the others imply agree with them."""
    if st.get("scatter_gather_optimization") is False:
        raise SpecError(f"{at}: strategy.scatter_gather_optimization false is not modelled (Megatron-LM always "
                        "scatters a pipeline send over the TP ranks and gathers it)")
    accum, mb, dp, gbs = (st.get(k) for k in ("grad_accum", "microbatch", "dp", "global_batch"))
    if all(isinstance(x, int) and not isinstance(x, bool) for x in (accum, mb, dp, gbs)) and accum * mb * dp != gbs:
        raise SpecError(f"{at}: strategy.grad_accum {accum} × microbatch {mb} × dp {dp} = {accum * mb * dp}, not "
                        f"the global_batch {gbs}")
