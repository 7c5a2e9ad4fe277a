"""A step's task graph compiled for the fast path (``pipeline``): per stage, its compute-stream tasks as flat lists
with what each waits for, sends and is followed by on the DP stream, with the semantics of ``workload._graph``.

Every stream of a stage but compute (its send links, its DP stream) is fed by that stage alone, in the order the
stage runs, so a stage's sends and DP collectives can be timed the moment their pass ends: the only waits between
stages are the pipeline transfers. The compiler works on every stage's rows at once (numpy), once per shape.
"""

from __future__ import annotations

import functools
import gc
from dataclasses import dataclass

import numpy as np

from autoplan.sim.engine import sized_cache
from autoplan.sim.orders import AMP, B, I, W, orders
from autoplan.sim.workload import _Shape
from autoplan.specs.layout import ends, rank_of, virtual_stage

FWD_LINK, BWD_LINK, ON_COMPUTE, DIRECT = 0, 1, 2, 3
"""Where a pass's output goes: a send on the stage's forward or backward link, a send that holds the sender's
compute stream (synchronous p2p), or straight to the next chunk on the same GPU (the turn of a V)."""

@dataclass(frozen=True, slots=True)
class Special:
    """A compute task the plain loop does not time: a chunk's first forward (it waits for its weights'
    all-gather too), a backward run in bucket-sized pieces, every pass of a plan with ZeRO-3 gathers, a fused
    pair's first forward. Its dependencies in the graph's order, and what follows it."""

    deps: tuple[tuple[str, int], ...]
    """("a", key): a transfer; ("g", chunk): the chunk's overlapped weight gather; ("s", n): this task's n-th
    ZeRO-3 gather."""
    gathers: int
    """ZeRO-3 gathers on the DP stream just before the task."""
    pieces: int
    """Tasks it runs as (the last backward of a chunk in pieces; 1 otherwise), one after another."""
    reduce: int
    """Slot of the DP collective after each piece (-1: none)."""
    sends: tuple[tuple[int, int], ...]
    """(key, link) of each output after the last piece, in the graph's order."""


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage's compute-stream tasks from a given task on, as parallel lists (one entry per task, in stream
    order), with what the whole stage's run needs besides."""

    slots: list[int]
    """Slot of the task's seconds."""
    keys: list[int]
    """The transfer it waits for (-1: none; -2 - j: ``specials[j]`` runs it)."""
    sends: list[int]
    """The transfer it sends (-1: none)."""
    links: list[int]
    """Where that send goes (``FWD_LINK`` …)."""
    reduces: list[int]
    """Slot of the DP collective that follows it (a ZeRO-2/3 reduce-scatter, a bucket's reduction), -1: none."""
    fused_keys: list[int] | None
    """DualPipe: the other transfer a fused pair waits for (its forward's), -1: none."""
    fused_sends: list[int] | None
    fused_links: list[int] | None
    fused_first: list[bool] | None
    """Whether the forward's transfer comes first in the pair's dependency list."""
    specials: "Specials"
    counts: tuple[tuple[tuple[int, int], ...], ...]
    """(slot, count) of the whole stage's compute, forward-link, backward-link and DP streams, in first-use order."""
    tail: tuple[int, int, int, int]
    """Slots of the reduction after the whole backward, the tied-embedding all-reduce, the optimizer step and the
    weight gather after it (-1: none)."""


@dataclass(frozen=True, slots=True)
class Program:
    """A shape's step, compiled: every stage's tasks as arrays (stage after stage), the slot keys
    (``workload.slot_costs``' names) of every duration, how many transfers there are; each stage's lists and each
    special task's record are made when first asked for (``stage``), from a given task on."""

    stages: int
    keys: tuple
    transfers: int
    chunks: int
    param_gather: int
    """Slot of the overlapped weight all-gather of each chunk before its first forward (what that forward waits
    for)."""
    param_gather_rest: int
    """Slot of the rest of that all-gather, on the DP stream while the forward runs."""
    shard_gather: int
    """Slot of the ZeRO-3 all-gather before every pass (-1: none)."""
    hop: int
    arrays: dict
    """The tasks' columns (``bounds``: where each stage's start), as ``shared_prefix`` compares them."""
    counts: tuple
    """Per stage, ``Stage.counts``."""
    tails: tuple
    """Per stage, ``Stage.tail``."""
    specials: "Specials"
    made: dict
    """Stages' lists already made, by (stage, first task)."""

    def stage(self, i: int, start: int = 0) -> Stage:
        """Stage ``i``'s tasks from its ``start``-th on."""
        key = (i, start)
        got = self.made.get(key)
        if got is None:
            a = self.arrays
            lo, hi = int(a["bounds"][i]) + start, int(a["bounds"][i + 1])
            if start == 0:
                # kept (a warm run reads them again) as tuples: the cyclic collector stops walking a tuple of
                # numbers once it has seen it, a list it walks in every collection
                part = {k: (tuple(a[k][lo:hi].tolist()) if a[k] is not None else None) for k in _LISTS}
            else:
                part = {k: (a[k][lo:hi].tolist() if a[k] is not None else None) for k in _LISTS}
            got = Stage(part["slot"], part["key"], part["send"], part["link"], part["reduce"], part["fkey"],
                        part["fsend"], part["flink"], part["ffirst"], self.specials, self.counts[i], self.tails[i])
            if start == 0:
                self.made[key] = got
        return got


_LISTS = ("slot", "key", "send", "link", "reduce", "fkey", "fsend", "flink", "ffirst")
"""The columns a stage's run reads, as lists."""


class Specials:
    """The special tasks' records (``Special``), made when first run: the compiler's ``make`` of row j of the
    columns ``cols`` (listed when the first is asked for)."""

    def __init__(self, make, cols: dict, count: int, flatten=None) -> None:
        self._make = make
        self._cols: dict | None = cols
        self._lists: dict = {}
        self._count = count
        self._made: dict[int, Special] = {}
        self._flatten = (lambda: flatten(cols)) if flatten is not None else None
        self._flat: tuple | None = None

    def flat(self) -> tuple:
        """Every record at once as the C runner reads them (``_Compiler._flat_specials``): dependency bounds,
        kinds (0 a transfer, 1 a chunk's weight gather, 2 a ZeRO-3 gather) and ids, gathers, pieces, reductions,
        send bounds, sends and their links."""
        if self._flat is None:
            self._flat = self._flatten()
        return self._flat

    def __getitem__(self, j: int) -> Special:
        got = self._made.get(j)
        if got is None:
            if self._cols is not None:
                self._lists, self._cols = {k: c.tolist() for k, c in self._cols.items()}, None
            got = self._made[j] = self._make({k: c[j] for k, c in self._lists.items()})
        return got

    def __len__(self) -> int:
        return self._count


def _size(prog: Program) -> int:
    return len(prog.arrays["slot"])


PROGRAM_CACHE_TASKS = 4_000_000
"""Compute tasks the program cache holds (about 100 bytes each)."""


def program(shape: _Shape, key_scale: int | None = None) -> Program:
    """The compiled step of ``shape`` (cached per shape: plans that differ only in durations share it).
    ``key_scale``: micro-batches to number transfers for (a larger shape's, to share a run with it)."""
    return _program((shape, key_scale or shape.micro_batches))


def cycle_gc_paused(fn):
    """``fn`` run with the cyclic garbage collector paused: the compiler and the runner make a few large lists
    of numbers and no cycles, which a collection would only walk through (13 % of a compile, 8 % of a run)."""

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return paused


@sized_cache(PROGRAM_CACHE_TASKS, _size)
@cycle_gc_paused
def _program(key: tuple[_Shape, int]) -> Program:
    return _Compiler(*key).program()


_CODES = 7
"""Kinds of compute-stream pass: forward, backward, B, W, fused pair, a piece of a whole backward, of a W."""


def _slot_name(code: int, i: int, c: int) -> object:
    """``workload._graph``'s slot key of a pass of kind ``code`` on stage ``i``, chunk ``c``."""
    if code >= 5:
        return ("segment", i, c, False if code == 5 else "W")
    return (i, _PASS_KINDS[code], c)


_PASS_KINDS = (True, False, "B", "W", "F&B")


class _Compiler:
    """Turns a shape's stage orders into ``Program`` lists, with the graph's semantics (``workload._graph``);
    every array holds all stages' rows (one per compute task), stage after stage."""

    def __init__(self, shape: _Shape, key_scale: int) -> None:
        self.shape = sh = shape
        p, v = sh.stages, sh.chunks
        self.p, self.m, self.v = p, key_scale, v
        self.mb_count = sh.micro_batches
        self.nv = p * v
        vss = range(self.nv)
        self.first = np.array([ends(sh.schedule, x, p, v)[0] for x in vss] + [True], bool)
        self.last = np.array([ends(sh.schedule, x, p, v)[1] for x in vss] + [True], bool)
        self.rank = np.array([rank_of(sh.schedule, x, p) for x in vss] + [-1], I)
        self.vs = np.array([[virtual_stage(sh.schedule, i, c, p) for c in range(v)] for i in range(p)], I)
        self.slot_ids: dict[object, int] = {}

    def slot(self, key: object) -> int:
        return self.slot_ids.setdefault(key, len(self.slot_ids))

    def key(self, forward: np.ndarray, mb: np.ndarray, vs: np.ndarray) -> np.ndarray:
        """The transfer feeding pass (forward, micro-batch, virtual stage): one id each."""
        return (forward.astype(I) * I(self.m) + mb) * I(self.nv) + vs

    def program(self) -> Program:
        sh, p, v = self.shape, self.p, self.v
        r = self._rows(*orders(sh.schedule, p, self.mb_count, v))
        n = len(r["stage"])
        pg = self.slot("param_gather")
        pgr = self.slot("param_gather_rest")
        sg = self.slot("shard_gather") if sh.shard_gather else -1
        self.hop = hop = self.slot("hop")
        fused_any = r["fkey"] is not None
        # when each transfer's send is created in workload._graph's round-robin build (step k of every stage, then
        # step k + 1): a pass whose transfer is created after it lists it after its gathers
        created = np.full(2 * self.m * self.nv, -1, I)
        at = r["step"] * I(p) + r["stage"]
        for name in ("send", "fsend") if fused_any else ("send",):
            sent = r[name] >= 0
            created[r[name][sent]] = at[sent]
        # a backward in bucket-sized pieces: one task per piece (but under ZeRO-3, whose gathers come once a step)
        expanded = bool(r["seg"].any()) and not sh.shard_gather
        if expanded:
            r = self._pieces(r)
            n = len(r["stage"])
        # the slot of each row's pass
        chunk = np.where(r["fused"], r["fch"], r["ch"]) if fused_any else r["ch"]
        pair = (r["code"] * I(p) + r["stage"]) * I(v) + chunk
        table = np.full(_CODES * p * v, -1, I)
        used = np.zeros(_CODES * p * v, bool)
        used[pair] = True
        used_at = np.flatnonzero(used)
        table[used_at] = [self.slot(_slot_name(u // (p * v), (u // v) % p, u % v)) for u in used_at.tolist()]
        slots = table.take(pair)
        sr = self.slot("shard_reduce") if sh.shard_reduce else -1
        seg_red = self.slot("segment_reduce") if sh.segment_reduce else -1
        reduces = np.where(r["red"], I(sr), I(-1))
        if expanded:
            reduces = np.where(r["seg"], I(seg_red), reduces)
        keys = r["key"].copy()
        # tasks with more than one dependency or task: a chunk's first forward (its weights' all-gather), a
        # backward in pieces (under ZeRO-3), every pass under ZeRO-3 gathers
        special = (r["f"] & (r["mb"] == 0)) | (r["seg"] if not expanded else False)
        if fused_any:
            special |= r["fmb0"]
        if sh.shard_gather:
            special = np.ones(n, bool)
        rows = np.flatnonzero(special)
        keys[rows] = -2 - np.arange(len(rows), dtype=I)
        names = ("stage", "step", "f", "mb", "ch", "key", "send", "link", "fused", "seg", "red") + (
            ("fstep", "fkey", "fmb0", "fch", "fsend", "flink") if fused_any else ())
        cols = {k: r[k][rows] for k in names}
        cols["sent"] = created[np.maximum(r["key"][rows], 0)]
        cols["fsent"] = created[np.maximum(r["fkey"][rows], 0)] if fused_any else np.zeros(len(rows), I)
        reduce_kinds = (seg_red if not expanded else -1, sr)
        specials = Specials(lambda row: self._special(row, *reduce_kinds), cols, len(rows),
                            lambda c: self._flat_specials(c, *reduce_kinds))
        bounds = np.searchsorted(r["stage"], np.arange(p + 1))
        counts = self._counts(r, slots, reduces, -1 if expanded else seg_red, expanded)
        tails, stage_counts = [], []
        for i in range(p):
            tail = (self.slot(("reduce_all", i)) if sh.reduce_all else -1,
                    self.slot("tied") if sh.tied and i in (0, p - 1) else -1,
                    self.slot(("optimizer", i)), self.slot(("final_gather", i)) if sh.final_gather else -1)
            comp, fwd, bwd, dp = counts[i]
            dp = ((pg, v), (pgr, v)) + dp + tuple((x, 1) for x in (tail[0], tail[1], tail[3]) if x >= 0)
            tails.append(tail)
            stage_counts.append((comp + ((tail[2], 1),), fwd, bwd, dp))
        producer = np.full(len(created), -1, I)
        row = np.arange(n, dtype=I)
        for name in ("send", "fsend") if fused_any else ("send",):
            sent = r[name] >= 0
            producer[r[name][sent]] = row[sent]
        arrays = {"bounds": bounds.astype(I), "stage": r["stage"], "slot": slots, "key": keys, "raw_key": r["key"],
                  "send": r["send"], "link": r["link"], "reduce": reduces, "mb": r["mb"], "fkey": r["fkey"],
                  "fsend": r["fsend"], "flink": r["flink"],
                  "ffirst": self._fwd_first(r, created) if fused_any else None, "producer": producer,
                  "created": created}
        return Program(p, tuple(self.slot_ids), len(created), v, pg, pgr, sg, hop, arrays, tuple(stage_counts),
                       tuple(tails), specials, {})

    def _rows(self, stage: np.ndarray, step: np.ndarray, f: np.ndarray, mb: np.ndarray, ch: np.ndarray,
              part: np.ndarray) -> dict:
        """Every step as a compute task (a fused pair is one), with what it waits for and what it sends."""
        sh, n = self.shape, len(stage)
        vs = self.vs.take(stage * I(self.v) + ch) if n else np.zeros(0, I)
        first, last = self.first.take(vs), self.last.take(vs)
        w, b = part == W, part == B
        has_in = ~w & np.where(f, ~first, ~last)
        key = np.where(has_in, self.key(f, mb, vs), I(-1))
        to_next, to_prev = f & ~last, ~f & ~w & ~first
        target = np.where(to_next, vs + 1, np.where(to_prev, vs - 1, I(self.nv)))
        send = np.where(to_next | to_prev, self.key(f, mb, np.minimum(target, self.nv - 1)), I(-1))
        direct = self.rank.take(target) == stage
        link = np.where(direct, I(DIRECT), I(ON_COMPUTE) if sh.blocking_p2p else np.where(f, I(FWD_LINK),
                                                                                             I(BWD_LINK)))
        cols = {"stage": stage, "step": step, "f": f, "mb": mb, "ch": ch, "key": key, "send": send, "link": link,
                "w": w, "b": b}
        # a fused forward (DualPipe) runs as one task with the next step: that row takes the forward's transfers
        head = np.flatnonzero(part == AMP)
        fused_cols = dict.fromkeys(("fmb0", "fkey", "fsend", "flink", "fch", "fstep"))
        if len(head):
            keep = np.ones(n, bool)
            keep[head] = False
            kept = np.flatnonzero(keep)
            cols = {k: c.take(kept) for k, c in cols.items()}
            n = len(cols["stage"])
            at = head - np.arange(len(head))          # the partner's row once the fused forwards are gone
            for k, src in (("fkey", key), ("fsend", send), ("flink", link), ("fch", ch), ("fstep", step)):
                fused_cols[k] = np.full(n, -1, I)
                fused_cols[k][at] = src[head]
            fused_cols["fmb0"] = np.zeros(n, bool)
            fused_cols["fmb0"][at] = mb[head] == 0
        fused = np.zeros(n, bool)
        fused[head - np.arange(len(head))] = True
        stage, f, ch, w, b = cols["stage"], cols["f"], cols["ch"], cols.pop("w"), cols.pop("b")
        # the last backward of each chunk (a whole one, or W) runs in bucket-sized pieces, each reducing its
        # gradients as it ends (not a fused pair's: the graph never splits one)
        reducing = ~f & ~b
        seg = np.zeros(n, bool)
        if sh.segments:
            rows = np.flatnonzero(reducing).astype(I)
            lasts = np.full(self.p * self.v, -1, I)
            np.maximum.at(lasts, stage[rows] * I(self.v) + ch[rows], rows)
            lasts = lasts[lasts >= 0]
            seg[lasts[~fused[lasts]]] = True
        code = np.where(f, I(0), np.where(b, I(2), np.where(w, I(3), I(1))))
        if len(head) or sh.segments:
            code = np.where(fused, I(4), np.where(seg, np.where(w, I(6), I(5)), code))
        red = (reducing & ~seg & ~fused) if sh.shard_reduce else np.zeros(n, bool)
        return cols | fused_cols | {"code": code, "seg": seg, "red": red, "fused": fused}

    def _pieces(self, r: dict) -> dict:
        """Each segmented backward as its pieces, rows of their own: only the first waits for a transfer, only the
        last sends (each reduces its share of the gradients: ``program``)."""
        rep = np.where(r["seg"], I(self.shape.segments), I(1))
        src = np.repeat(np.arange(len(rep), dtype=I), rep)     # each new row's original row
        out = {k: (c.take(src) if c is not None else None) for k, c in r.items()}
        # a piece is its backward's first where its original row differs from the row before's, its last where
        # it differs from the row after's
        new = np.ones(len(src), bool)
        new[1:] = src[1:] != src[:-1]
        out["key"] = np.where(new, out["key"], I(-1))
        out["send"] = np.where(np.append(new[1:], True), out["send"], I(-1))
        return out

    def _fwd_first(self, r: dict, created: np.ndarray) -> np.ndarray:
        """For a fused pair: whether its forward's transfer precedes its backward's in the graph's list (each is
        listed when its half of the pair is built, or later when its send is)."""
        at_f = r["fstep"] * I(self.p) + r["stage"]
        at_b = r["step"] * I(self.p) + r["stage"]
        fk, bk = r["fkey"], r["key"]
        tf = np.where(fk >= 0, np.maximum(at_f, created[np.maximum(fk, 0)]), 0)
        tb = np.where(bk >= 0, np.maximum(at_b, created[np.maximum(bk, 0)]), 0)
        return tf <= tb

    def _special(self, r: dict, seg_reduce: int, shard_reduce: int) -> Special:
        """One row (``r``: its columns) as ``workload._graph`` builds it: its dependencies are appended when the
        pass is built (its transfer if already sent, then its gathers) or when a late transfer is sent (``sent``,
        ``fsent``: when its transfers' sends are built)."""
        p, i, sent, fsent = self.p, r["stage"], r["sent"], r["fsent"]
        items: list[tuple[int, int, tuple[str, int]]] = []      # (when appended, order, dependency)
        gathers = 0

        def half(at: int, key: int, created: int, first_forward: bool, chunk: int) -> None:
            nonlocal gathers
            if key >= 0:
                items.append((at, 0, ("a", key)) if created < at else (created, 1, ("a", key)))
            if first_forward:
                items.append((at, 1, ("g", chunk)))
            if self.shape.shard_gather:
                items.append((at, 2, ("s", gathers)))
                gathers += 1

        sends: list[tuple[int, int]] = []
        if r["fused"]:
            half(r["fstep"] * p + i, r["fkey"], fsent, r["fmb0"], r["fch"])
            if r["fsend"] >= 0:
                sends.append((r["fsend"], r["flink"]))
        half(r["step"] * p + i, r["key"], sent, r["f"] and r["mb"] == 0, r["ch"])
        if r["send"] >= 0:
            sends.append((r["send"], r["link"]))
        items.sort(key=lambda x: (x[0], x[1]))
        pieces = self.shape.segments if r["seg"] else 1
        reduce = seg_reduce if r["seg"] else shard_reduce if r["red"] else -1
        return Special(tuple(d for _, _, d in items), gathers, pieces, reduce, tuple(sends))

    def _flat_specials(self, c: dict, seg_reduce: int, shard_reduce: int) -> tuple[np.ndarray, ...]:
        """``_special`` of every row at once (``Specials.flat``): each row's candidate dependencies in the order
        ``_special`` lists them (the fused forward's transfer, weight gather and ZeRO-3 gather, then the pass's),
        the valid ones sorted by (when appended, order, that rank), as ``items.sort`` sorts them."""
        p, n, i32 = self.p, len(c["stage"]), np.int32
        shard = bool(self.shape.shard_gather)
        fused = c["fused"]
        zeros = np.zeros(n, I)
        fkey, fch, fmb0 = ((c["fkey"], c["fch"], c["fmb0"]) if "fkey" in c else (zeros - 1, zeros, zeros.astype(bool)))
        fstep = c["fstep"] if "fstep" in c else zeros
        at_f, at = fstep * I(p) + c["stage"], c["step"] * I(p) + c["stage"]
        late_f, late = ~(c["fsent"] < at_f), ~(c["sent"] < at)
        valid = np.stack([fused & (fkey >= 0), fused & fmb0, fused & shard,
                          c["key"] >= 0, c["f"] & (c["mb"] == 0), np.full(n, shard)], axis=1)
        when = np.stack([np.where(late_f, c["fsent"], at_f), at_f, at_f, np.where(late, c["sent"], at), at, at], axis=1)
        order = np.stack([late_f.astype(I), np.ones(n, I), np.full(n, 2, I), late.astype(I), np.ones(n, I),
                          np.full(n, 2, I)], axis=1)
        kind = np.broadcast_to(np.array([0, 1, 2, 0, 1, 2], I), (n, 6))
        x = np.stack([fkey, fch, zeros, c["key"], c["ch"], (fused & shard).astype(I)], axis=1)
        row, rank = np.nonzero(valid)
        take = np.lexsort((rank, order[row, rank], when[row, rank], row))
        row, rank = row[take], rank[take]
        dep_bounds = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(i32)
        gathers = (valid[:, 2].astype(i32) + valid[:, 5])
        pieces = np.where(c["seg"], i32(max(1, self.shape.segments)), i32(1))
        reduce = np.where(c["seg"], i32(seg_reduce), np.where(c["red"], i32(shard_reduce), i32(-1)))
        fsend = c["fsend"] if "fsend" in c else zeros - 1
        flink = c["flink"] if "flink" in c else zeros
        sends = np.stack([np.where(fused, fsend, -1), c["send"]], axis=1)
        links = np.stack([flink, c["link"]], axis=1)
        srow, scol = np.nonzero(sends >= 0)
        send_bounds = np.concatenate([[0], np.cumsum((sends >= 0).sum(axis=1))]).astype(i32)
        return (dep_bounds, kind[row, rank].astype(i32), x[row, rank].astype(i32), gathers.astype(i32),
                pieces.astype(i32), reduce.astype(i32), send_bounds, sends[srow, scol].astype(i32),
                links[srow, scol].astype(i32))

    def _counts(self, r: dict, slots: np.ndarray, reduces: np.ndarray, seg_reduce: int,
                expanded: bool) -> list[tuple]:
        """Per stage, (slot, count) of its compute, link and DP streams in first-use order (``workload._graph``'s
        ``stream_slots``), without the optimizer and the DP stream's head and tail."""
        p, hop, n = self.p, self.hop, len(slots)
        stage, sends, links = r["stage"], r["send"], r["link"]
        row = np.arange(n, dtype=I)
        pieces = (None if expanded or not r["seg"].any() else
                  np.where(r["seg"], I(max(1, self.shape.segments)), I(1)))       # None: 1 each
        sent = [(sends >= 0) & (links == k) for k in (FWD_LINK, BWD_LINK, ON_COMPUTE)]
        fsent = ([(r["fsend"] >= 0) & (r["flink"] == k) for k in (FWD_LINK, BWD_LINK, ON_COMPUTE)]
                 if r["fkey"] is not None else None)
        per_link = []
        for k in (0, 1):
            on = sent[k] if fsent is None else sent[k].astype(I) + fsent[k]
            per_link.append(np.bincount(stage, weights=on, minlength=p).astype(I).tolist())
        # positions 3·row + 0, 1, 2: a row's pass (or its ZeRO-3 gather), its fused forward's send (or second
        # gather), its send (or reduction)
        comp = [(stage, 3 * row, slots, pieces)]
        if sent[2].any():
            comp.append((stage[sent[2]], 3 * row[sent[2]] + 2, np.full(int(sent[2].sum()), hop, I), None))
        if fsent is not None and fsent[2].any():
            comp.append((stage[fsent[2]], 3 * row[fsent[2]] + 1, np.full(int(fsent[2].sum()), hop, I), None))
        red = reduces if expanded else np.where(r["seg"], I(seg_reduce), reduces)
        has = red >= 0
        dp = [(stage[has], 3 * row[has] + 2, red[has], pieces[has] if pieces is not None else None)]
        if self.shape.shard_gather:
            sg = self.slot_ids["shard_gather"]
            dp.append((stage, 3 * row, np.full(n, sg, I), None))
            both = r["fused"]
            dp.append((stage[both], 3 * row[both] + 1, np.full(int(both.sum()), sg, I), None))
        compute, dstream = _first_use_by_stage(comp, p), _first_use_by_stage(dp, p)
        return [(compute[i], ((hop, per_link[0][i]),) if per_link[0][i] else (),
                 ((hop, per_link[1][i]),) if per_link[1][i] else (), dstream[i]) for i in range(p)]


def _first_use_by_stage(entries: list[tuple], p: int) -> list[tuple[tuple[int, int], ...]]:
    """Per stage, (slot, count) of ``entries`` ((stage, position, slot, count or None for 1) arrays; positions
    ordered stage by stage), in the order each slot first appears."""
    stage = np.concatenate([e[0] for e in entries])
    pos = np.concatenate([e[1] for e in entries])
    slot = np.concatenate([e[2] for e in entries])
    out: list[tuple] = [() for _ in range(p)]
    if not len(slot):
        return out
    width = int(slot.max()) + 1
    combined = stage * I(width) + slot
    if all(e[3] is None for e in entries):
        count = np.bincount(combined, minlength=p * width)
    else:
        weight = np.concatenate([e[3] if e[3] is not None else np.ones(len(e[0]), I) for e in entries])
        count = np.bincount(combined, weights=weight, minlength=p * width).astype(np.int64)
    first = np.full(p * width, np.iinfo(I).max, I)
    np.minimum.at(first, combined, pos)
    present = np.flatnonzero(count)
    present = present[np.argsort(first[present], kind="stable")]
    groups: list[list] = [[] for _ in range(p)]
    for u, c in zip(present.tolist(), count[present].tolist()):
        groups[u // width].append((u % width, c))
    return [tuple(g) for g in groups]


# ----------------------------------------------------------------------------------------------- shared prefix

_COMPARED = ("slot", "raw_key", "send", "link", "reduce", "mb", "fkey", "fsend", "flink", "ffirst")


def shared_prefix(a: Program, b: Program) -> tuple[list[int], list[int]] | None:
    """Per stage, how many of A's first compute tasks B runs identically (the same seconds, transfers, sends,
    DP collectives and specials) with every dependency among them, so that B's run of them is A's; and the
    transfers A sends after them. None when nothing is shared. Both compiled with the same transfer numbering.

    The steady-state samples of ``simulate._extrapolated`` differ by one period of micro-batches: the shorter one
    is the longer one's warm-up and steady state up to its own cool-down (75-90 % of its tasks)."""
    A, B = a.arrays, b.arrays
    p = a.stages
    if b.stages != p or a.transfers != b.transfers:
        return None
    ba, bb = A["bounds"], B["bounds"]
    n = np.minimum(np.diff(ba), np.diff(bb))
    starts = np.cumsum(n) - n
    stage = np.repeat(np.arange(p, dtype=I), n)
    q = np.arange(int(n.sum()), dtype=I) - np.repeat(starts, n).astype(I)
    ia, ib = ba.take(stage) + q, bb.take(stage) + q
    whole_a = len(ia) == len(A["stage"])                 # A no longer than B on every stage: ia is every row

    def col_a(k: str) -> np.ndarray:
        return A[k] if whole_a else A[k].take(ia)

    # a special task (several dependencies) is the same where it is one in both, with the same columns and its
    # transfers sent when the other's are
    sa, sb = col_a("key") <= -2, B["key"].take(ib) <= -2
    differ = sa != sb
    for k in _COMPARED:
        if (A[k] is None) != (B[k] is None):
            return None
        if A[k] is not None:
            differ |= col_a(k) != B[k].take(ib)
    both = sa & sb
    for k in ("raw_key", "fkey"):
        if A[k] is not None:
            ka, kb = col_a(k)[both], B[k].take(ib)[both]
            differ[both] |= (ka >= 0) & (A["created"].take(np.maximum(ka, 0)) !=
                                         B["created"].take(np.maximum(kb, 0)))
    s = n.astype(I)
    bad = np.flatnonzero(differ)
    np.minimum.at(s, stage.take(bad), q.take(bad))
    # every transfer a prefix task waits for is sent by a prefix task (else stop the prefix before it)
    row_a = np.arange(len(A["stage"]), dtype=I)
    pos_a = row_a - ba.take(A["stage"])
    waits = [A["raw_key"]] + ([A["fkey"]] if A["fkey"] is not None else [])
    w_stage = np.concatenate([A["stage"]] * len(waits))
    w_pos = np.concatenate([pos_a] * len(waits))
    w_key = np.concatenate(waits)
    has = w_key >= 0
    w_stage, w_pos, w_key = w_stage[has], w_pos[has], w_key[has]
    prod = A["producer"].take(w_key)
    p_stage = A["stage"].take(prod)
    p_pos = prod - ba.take(p_stage)
    while True:
        late = (w_pos < s.take(w_stage)) & (p_pos >= s.take(p_stage))
        if not late.any():
            break
        np.minimum.at(s, w_stage[late], w_pos[late])
    if not s.any():
        return None
    after = pos_a >= s.take(A["stage"])
    sent = [A["send"][after & (A["send"] >= 0)]]
    if A["fsend"] is not None:
        sent.append(A["fsend"][after & (A["fsend"] >= 0)])
    return s.tolist(), np.unique(np.concatenate(sent)).tolist()


def pair_split(a: _Shape, b: _Shape) -> tuple[list[int], list[int]] | None:
    """``shared_prefix`` of the programs of shapes ``a`` and ``b`` (cached)."""
    return _pair((a, b))


@sized_cache(1024, lambda _: 1)
def _pair(key: tuple[_Shape, _Shape]) -> tuple[list[int], list[int]] | None:
    a, b = key
    return shared_prefix(program(a, b.micro_batches), program(b))
