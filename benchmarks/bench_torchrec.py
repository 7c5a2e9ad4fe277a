"""autoplan's embedding sharding plan against TorchRec's EmbeddingShardingPlanner on the same tables.

For each case (a catalog DLRM or a seeded random table set, a cluster file, a GPU count) both planners plan the
same tables with the same inputs: the HBM autoplan leaves for embeddings (``hbm_cap``), the node as the local
world, the cluster file's bandwidths, each table's pooling factor, HBM kernels only, 32-wide column shards. Then
both plans are scored by autoplan's DLRM model (``families/dlrm/sharding.py``, at the ranks each planner chose) and by
TorchRec's own estimate (its perf model: the busiest rank's summed shard estimates, in ms; autoplan's plan is
re-estimated by TorchRec with each table's kind pinned and autoplan's ranks put on the shards).

Runs on CPU: the planner only estimates (``compute_device="cuda"``, tables on the meta device, no process group).
Needs the optional extra (``pip install -e '.[torchrec]'`` in a separate environment, see README); without torchrec
it says so and exits 0.

    python benchmarks/bench_torchrec.py [--clusters dgx-a100-80g dgx-h100-80g] [--gpus 8 16 64] [--random 3] [--quick]
    (--quick: dlrm-criteo and one random set of 4 tables on 8 H100s, unless given)
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, replace

from autoplan.families.dlrm.family import embedding_room, sharding_plan
from autoplan.families.dlrm import torchrec_compare as tc
from autoplan.families.catalog import get_model
from autoplan.specs.cluster import load_cluster
from autoplan.families.dlrm.spec import EmbeddingTable
from autoplan.specs.model import ModelSpec
from autoplan.families.strategy import Strategy

CATALOG = ("dlrm-criteo", "dlrm-dcnv2", "dlrm-synthetic-100b")
FULL = {"clusters": ["dgx-a100-80g", "dgx-h100-80g"], "gpus": [8, 16, 64], "random": 3, "tables": 12, "models": None}
QUICK = {"clusters": ["dgx-h100-80g"], "gpus": [8], "random": 1, "tables": 4,
         "models": ["dlrm-criteo", "random-{seed}-0"]}
"""Options when not given: the benchmark's, and --quick's (one catalog DLRM and one small random set, one node)."""


def random_tables(rng: random.Random, count: int) -> tuple[EmbeddingTable, ...]:
    """Tables with log-uniform rows (1e2..5e7) and pooling (1..100), dim 64/128/256, Zipf skew in [0, 1.2]."""
    return tuple(EmbeddingTable(name=f"t{i}", rows=int(10 ** rng.uniform(2, 7.7)), dim=rng.choice((64, 128, 256)),
                                pooling=round(10 ** rng.uniform(0, 2), 1), skew=round(rng.uniform(0, 1.2), 2))
                 for i in range(count))


def models(count: int, tables: int, seed: int) -> list[ModelSpec]:
    """The catalog DLRMs, then ``count`` random table sets on dlrm-dcnv2's MLPs (its DCN interaction takes any dim)."""
    rng, base = random.Random(seed), get_model("dlrm-dcnv2")
    out = [get_model(m) for m in CATALOG]
    for k in range(count):
        spec = replace(base.structure, tables=random_tables(rng, tables))
        out.append(replace(base, name=f"random-{seed}-{k}", structure=spec))
    return out


@dataclass
class TorchRec:
    """The torchrec names the benchmark needs, imported once."""

    torch: object
    planner: object
    sharder: object

    @classmethod
    def load(cls) -> "TorchRec | None":
        try:
            import torch
            from fbgemm_gpu.split_embedding_configs import EmbOptimType
            from torchrec.distributed import planner
            from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
            from torchrec.distributed.planner import storage_reservations
        except ImportError as err:
            print(f"bench_torchrec: skipped, torchrec is not importable ({err}): the TorchRec comparison needs the "
                  "optional extra 'torchrec', in a separate environment (pyproject.toml, optional-dependencies)")
            return None
        planner.storage_reservations = storage_reservations
        # exact row-wise Adagrad fused into the backward: one fp32 state per row, as autoplan's ROW_STATE_BYTES
        sharder = EmbeddingBagCollectionSharder(fused_params={"optimizer": EmbOptimType.EXACT_ROWWISE_ADAGRAD})
        return cls(torch, planner, sharder)

    def collection(self, model: ModelSpec):
        from torchrec.modules.embedding_configs import EmbeddingBagConfig
        from torchrec.modules.embedding_modules import EmbeddingBagCollection
        configs = [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.rows, feature_names=[t.name])
                   for t in model.structure.tables]
        return EmbeddingBagCollection(tables=configs, device=self.torch.device("meta"))

    def plan(self, model: ModelSpec, cluster, s: Strategy, kinds: dict[str, str] | None = None):
        """TorchRec's best plan (its ShardingOptions) for ``model``; ``kinds`` pins tables' sharding types."""
        p = self.planner
        topology = p.Topology(**tc.topology_kwargs(cluster, s.dp, embedding_room(model, cluster, s)))
        constraints = {t.name: p.ParameterConstraints(**tc.constraint_kwargs(
            t, (kinds[t.name],) if kinds else tc.SHARDINGS)) for t in model.structure.tables}
        planner = p.EmbeddingShardingPlanner(
            topology=topology, batch_size=s.micro_batch, constraints=constraints, debug=False,
            storage_reservation=p.storage_reservations.FixedPercentageStorageReservation(0.0))
        planner.plan(self.collection(model), [self.sharder])
        return planner.get_selected_options()


def chosen(options) -> dict[str, tuple[str, list[int]]]:
    """Table name → (sharding type, ranks of its shards) of TorchRec ShardingOptions."""
    return {o.name: (o.sharding_type, [sh.rank for sh in o.shards]) for o in options}


def estimate(options, world: int, ranks: dict[str, list[int]] | None = None) -> tuple[float, float]:
    """TorchRec's perf model (NoopPerfModel.rate: the busiest rank's summed shard estimates, ms) and its storage
    model (the fullest rank's HBM bytes); ``ranks`` re-places each table's shards first."""
    perf, hbm = [0.0] * world, [0.0] * world
    for o in options:
        where = ranks[o.name] if ranks else [sh.rank for sh in o.shards]
        for rank, shard in zip(where, o.shards, strict=True):
            perf[rank] += shard.perf.total
            hbm[rank] += shard.storage.hbm
    return max(perf), max(hbm)


def estimate_ms(options, world: int, ranks: dict[str, list[int]] | None = None) -> float:
    return estimate(options, world, ranks)[0]


def one_case(trc: TorchRec, model: ModelSpec, cluster_name: str, gpus: int) -> dict | None:
    cluster = load_cluster(cluster_name, gpus)
    batch = model.structure.global_batch
    s = Strategy(dp=gpus, micro_batch=batch // gpus, global_batch=batch)
    room = embedding_room(model, cluster, s)
    t0 = time.perf_counter()
    ours = sharding_plan(model, cluster, s)
    t_ours = time.perf_counter() - t0
    label = f"{model.name} on {gpus} x {cluster.gpu.name} (micro-batch {s.micro_batch})"
    if ours.unplaced:
        print(f"\n{label}: autoplan places no plan ({len(ours.unplaced)} tables fit nowhere); skipped")
        return None
    t0 = time.perf_counter()
    try:
        theirs = trc.plan(model, cluster, s)
    except Exception as err:   # PlannerError: no plan fits; an infeasible case is data
        print(f"\n{label}: TorchRec's planner found no plan: {str(err).splitlines()[0][:200]}")
        return None
    t_theirs = time.perf_counter() - t0
    their_plans = tc.table_plans(model, gpus, chosen(theirs))
    our_kinds = {t.name: p.kind for t, p in zip(model.structure.tables, ours.tables)}
    try:
        pinned = trc.plan(model, cluster, s, our_kinds)
        our_ranks = {t.name: tc.shard_ranks(p, len(next(o for o in pinned if o.name == t.name).shards))
                     for t, p in zip(model.structure.tables, ours.tables)}
        our_est, our_hbm = estimate(pinned, gpus, our_ranks)
        view = (f"  TorchRec's view of autoplan's plan: {our_est:.3f} ms at autoplan's ranks "
              f"({our_hbm / 2**30:.1f} GiB on the fullest rank by TorchRec's storage estimate, "
              f"{'within' if our_hbm <= room else 'OVER'} its {room / 2**30:.1f} GiB), "
              f"{estimate_ms(pinned, gpus):.3f} ms as TorchRec places the same kinds")
    except Exception as err:
        view = f"  (TorchRec cannot estimate autoplan's plan: {str(err).splitlines()[0][:160]})"
        our_est, our_hbm = float("nan"), float("inf")
    a, b = tc.score(model, cluster, s, ours.tables), tc.score(model, cluster, s, their_plans)
    # TorchRec's kinds placed by autoplan's rule: separates the choice of kinds from the placement of the shards
    pinned_model = replace(model, structure=replace(model.structure, tables=tuple(
        replace(t, sharding=p.kind) for t, p in zip(model.structure.tables, their_plans))))
    c = sharding_plan(pinned_model, cluster, s)
    kinds_only = float("inf") if c.unplaced else c.times.total
    row = {"case": f"{model.name} {cluster_name} {gpus}", "agree": tc.agreement(ours.tables, their_plans),
           "ours_s": a.step_s, "theirs_s": b.step_s, "theirs_fits": b.fits, "kinds_only_s": kinds_only,
           "ours_est": our_est, "theirs_est": estimate_ms(theirs, gpus), "ours_fits_tr": our_hbm <= room,
           "ours_kinds": tc.kind_counts(ours.tables), "theirs_kinds": tc.kind_counts(their_plans)}
    print(f"\n{label}: autoplan {t_ours:.2f} s, TorchRec {t_theirs:.2f} s to plan; same kind for "
          f"{100 * row['agree']:.0f} % of {len(ours.tables)} tables")
    print(f"  {'':9} {'kinds':<32} {'autoplan model':>15} {'TorchRec estimate':>18}  memory (autoplan)")
    for who, kinds, sc, est in (("autoplan", row["ours_kinds"], a, our_est),
                                ("TorchRec", row["theirs_kinds"], b, row["theirs_est"])):
        print(f"  {who:<9} {kinds:<32} {1e3 * sc.step_s:12.3f} ms {est:15.3f} ms  "
              f"{sc.embedding_bytes / 2**30:5.1f} of {sc.room / 2**30:.1f} GiB{'' if sc.fits else ' (over)'}")
    print(f"  TorchRec's kinds placed by autoplan's rule: {1e3 * kinds_only:.3f} ms (autoplan model)")
    print(view)
    if len(model.structure.tables) <= 32:
        print("  " + " ".join(f"{t.name}:{tc.SHORT[x.kind]}/{tc.SHORT[y.kind]}" for t, x, y in
                              zip(model.structure.tables, ours.tables, their_plans)) + "   (autoplan/TorchRec)")
    return row


def summary(rows: list[dict]) -> None:
    print(f"\n{'':<38} {'':>6} {'autoplan model (ms)':^35}   {'TorchRec estimate (ms)':^26}")
    print(f"{'case':<38} {'agree':>6} {'autoplan':>8} {'TorchRec':>8} {'TR kinds':>8} {'ratio':>6}   "
          f"{'autoplan':>8} {'TorchRec':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['case']:<38} {100 * r['agree']:5.0f}% {1e3 * r['ours_s']:8.3f} {1e3 * r['theirs_s']:8.3f} "
              f"{1e3 * r['kinds_only_s']:8.3f} {r['theirs_s'] / r['ours_s']:6.2f}   {r['ours_est']:8.3f} "
              f"{r['theirs_est']:8.3f} {r['theirs_est'] / r['ours_est']:6.2f}")
    ratios = [r["theirs_s"] / r["ours_s"] for r in rows]
    est_better = sum(r["ours_est"] < r["theirs_est"] and r["ours_fits_tr"] for r in rows)
    print(f"{len(rows)} cases: same kind for {100 * statistics.mean(r['agree'] for r in rows):.0f} % of tables (mean); "
          f"by autoplan's model TorchRec's plan is {statistics.mean(ratios):.2f}x autoplan's step (geo. mean "
          f"{statistics.geometric_mean(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x); by TorchRec's "
          f"estimate autoplan's plan is the faster (and fits its storage estimate) in {est_better} of {len(rows)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", nargs="+", help=f"cluster files (default {' '.join(FULL['clusters'])})")
    ap.add_argument("--gpus", nargs="+", type=int, help=f"GPU counts (default {' '.join(map(str, FULL['gpus']))})")
    ap.add_argument("--random", type=int,
                    help=f"random table sets besides the catalog DLRMs (default {FULL['random']})")
    ap.add_argument("--tables", type=int, help=f"tables per random set (default {FULL['tables']})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="*", help="only these catalog/random model names (default all)")
    ap.add_argument("--quick", action="store_true", help="unless given: dlrm-criteo and one random set of "
                    f"{QUICK['tables']} tables on {QUICK['gpus'][0]} GPUs of {QUICK['clusters'][0]}")
    a = ap.parse_args()
    for name, value in (QUICK if a.quick else FULL).items():
        if getattr(a, name) is None:
            setattr(a, name, [m.format(seed=a.seed) for m in value] if name == "models" and value else value)
    trc = TorchRec.load()
    if trc is None:
        return 0
    logging.disable(logging.WARNING)          # the planner's stats tables and its dry-run reservation warnings
    warnings.filterwarnings("ignore")
    import torchrec
    print(f"torchrec {torchrec.__version__}, torch {trc.torch.__version__}; planning on CPU (estimates only)")
    rows = []
    for model in models(a.random, a.tables, a.seed):
        if a.models and model.name not in a.models:
            continue
        for cluster_name in a.clusters:
            for gpus in a.gpus:
                row = one_case(trc, model, cluster_name, gpus)
                rows += [row] if row else []
    if rows:
        summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
