"""A DLRM plan as TorchRec settings: the launch line, per-table ParameterConstraints that pin the planner's
sharding kinds, and the sharding plan (each table's kind and ranks) to check TorchRec's own plan against."""

from __future__ import annotations

from autoplan.families.dlrm.family import sharding_plan
from autoplan.errors import SpecError
from autoplan.families.base import Launcher, no_violations
from autoplan.specs.cluster import ClusterSpec
from autoplan.families.dlrm.spec import dlrm_of
from autoplan.specs.model import ModelSpec
from autoplan.specs.plan import Plan

_KERNEL = "fused"
"""TorchRec EmbeddingComputeKernel for tables in HBM with the optimizer fused into the backward (FBGEMM TBE)."""
_COMM_TYPES = {2: "FP16", 1: "FP8"}
"""TorchRec CommType of a pooled-embedding all-to-all at ``DLRMSpec.pooled_comm_bytes`` bytes a value (4: fp32, TorchRec's
default, needs no codec; torchrec/distributed/fbgemm_qcomm_codec.py QCommsConfig)."""


def qcomm_lines(model: ModelSpec) -> list[str]:
    """The quantised-comms codec that makes TorchRec's all-to-all carry what the plan assumed; none for fp32."""
    comm = _COMM_TYPES.get(model.structure.pooled_comm_bytes)
    if comm is None:
        return []
    return ["from torchrec.distributed.fbgemm_qcomm_codec import CommType, QCommsConfig, get_qcomm_codecs_registry",
            f"# the plan's all-to-all carries {model.structure.pooled_comm_bytes}-byte pooled values: pass to "
            "EmbeddingBagCollectionSharder(qcomm_codecs_registry=...)",
            "qcomm_codecs_registry = get_qcomm_codecs_registry(QCommsConfig(forward_precision=CommType."
            f"{comm}, backward_precision=CommType.{comm}))", ""]


def _ranks(gpus: tuple[int, ...], world: int) -> str:
    if len(gpus) == world and world > 1:
        return f"all {world}"
    if len(gpus) > 1 and gpus == tuple(range(gpus[0], gpus[-1] + 1)):
        return f"{gpus[0]}-{gpus[-1]}"
    return ",".join(map(str, gpus))


def sharding_rows(model: ModelSpec, cluster: ClusterSpec, s: Plan) -> list[dict]:
    """One row per table: name, rows, dim, pooling, skew, sharding kind and ranks."""
    plan = sharding_plan(model, cluster, s)
    return [{"table": t.name, "rows": t.rows, "dim": t.dim, "pooling": t.pooling, "skew": t.skew, "sharding": p.kind,
             "ranks": _ranks(p.gpus, s.dp)} for t, p in zip(model.structure.tables, plan.tables)]


def torchrec_text(model: ModelSpec, cluster: ClusterSpec, s: Plan, header: str = "") -> str:
    """The launch hint, ParameterConstraints and the sharding plan of DLRM plan ``s`` as Python comment lines
    and code to paste into a TorchRec training script."""
    if dlrm_of(model) is None:
        raise SpecError(f"model {model.name!r} is not a DLRM; --format torchrec exports embedding sharding plans "
                        "(use megatron or torchtitan)")
    rows = sharding_rows(model, cluster, s)
    nodes = max(1, s.dp // cluster.gpus_per_node)
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"# torchrun --nnodes {nodes} --nproc_per_node {min(s.dp, cluster.gpus_per_node)} <your dlrm_main.py> "
              f"--batch_size {s.micro_batch}  # samples per rank; global batch {s.global_batch}"
              + (f" over {s.micro_batches} accumulated micro-batches" if s.micro_batches > 1 else ""),
              "from torchrec.distributed.planner.types import ParameterConstraints", "",
              *qcomm_lines(model), "constraints = {"]
    for r in rows:
        lines.append(f'    "{r["table"]}": ParameterConstraints(sharding_types=["{r["sharding"]}"], '
                     f'compute_kernels=["{_KERNEL}"], pooling_factors=[{r["pooling"]:g}]),')
    lines += ["}", "# pass to EmbeddingShardingPlanner(topology=Topology(world_size="
              f"{s.dp}, compute_device=\"cuda\", local_world_size={min(s.dp, cluster.gpus_per_node)}), "
              "constraints=constraints)", "", "# the plan autoplan modelled (TorchRec places ranks itself):",
              f"# {'table':<12} {'rows':>11} {'dim':>4} {'pool':>5} {'skew':>5}  {'sharding':<15} ranks"]
    lines += [f"# {r['table']:<12} {r['rows']:>11,} {r['dim']:>4} {r['pooling']:>5g} {r['skew']:>5g}  "
              f"{r['sharding']:<15} {r['ranks']}" for r in rows]
    return "\n".join(lines) + "\n"


def _torchrec(s: Plan, model: ModelSpec | None, cluster: ClusterSpec | None, header: str) -> str:
    if model is None or cluster is None:
        raise SpecError("a TorchRec sharding plan needs the run's model and cluster (they could not be rebuilt)")
    return torchrec_text(model, cluster, s, header)


LAUNCHERS = {"dlrm": (Launcher("torchrec", "TorchRec", no_violations, _torchrec, framework=False),)}
"""A DLRM launches as TorchRec sharding constraints and its sharding plan."""
