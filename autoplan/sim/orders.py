"""Every stage's pass order as flat arrays: ``schedule.stage_order``'s steps, built with numpy where a schedule's
steady state repeats (the simulator's fast path compiles these; tests/sim/test_orders.py checks them step for
step against ``schedule.py``, which stays the definition)."""

from __future__ import annotations

import numpy as np

from autoplan.sim.schedule import stage_order

I = np.int32
"""The integer type of the compiled arrays (arrays under 128 KiB stay off mmap: fresh pages cost more than the
work)."""

WHOLE, B, W, AMP = 0, 1, 2, 3
"""A step's part: a whole pass, a backward's B or W, or a forward run fused with the next step (DualPipe)."""
PARTS = {"": WHOLE, "B": B, "W": W, "&": AMP}


def orders(schedule: str, p: int, m: int, v: int) -> tuple[np.ndarray, ...]:
    """Every stage's pass order, stage after stage: stage, position in the stage's order, forward, micro-batch,
    chunk, part."""
    if schedule in ("1f1b", "interleaved"):
        return _warmup_steady_cooldown(schedule, p, m, v)
    build = {"zb-h1": _zb_h1, "zbv": _zbv, "dualpipev": _dualpipev, "dualpipe": _dualpipe}.get(schedule)
    cols: list[list[np.ndarray]] = [[], [], [], [], [], []]
    memo: dict = {}
    for i in range(p):
        if build is None:
            f, mb, ch, part = _from_steps(stage_order(schedule, i, p, m, v))
        else:
            f, mb, ch, part = build(i, p, m, memo)
        cols[0].append(np.full(len(f), i, I))
        cols[1].append(np.arange(len(f), dtype=I))
        for k, c in enumerate((f, mb, ch, part)):
            cols[2 + k].append(c)
    return tuple(np.concatenate(c) for c in cols)


def _from_steps(steps: tuple) -> tuple[np.ndarray, ...]:
    if not steps:
        return np.zeros(0, bool), np.zeros(0, I), np.zeros(0, I), np.zeros(0, np.int8)
    f, mb, ch, part = zip(*steps)
    return (np.array(f, bool), np.array(mb, I), np.array(ch, I), np.array([PARTS[x] for x in part], np.int8))


def _warmup_steady_cooldown(schedule: str, p: int, m: int, v: int) -> tuple[np.ndarray, ...]:
    """1F1B (schedule.one_f_one_b) and interleaved (schedule.interleaved): w warm-up forwards, forward/backward
    pairs, the remaining backwards."""
    total = m * v
    q = np.arange(2 * total, dtype=I)
    w = np.array([min(p - i - 1 if schedule == "1f1b" else (p - i - 1) * 2 + (v - 1) * p, total)
                  for i in range(p)], I)[:, None]
    cool = 2 * total - w
    forward = (q < w) | ((q < cool) & ((q - w) % 2 == 0))
    k = np.where(forward, np.where(q < w, q, w + (q - w) // 2), np.where(q >= cool, q - total, (q - w - 1) // 2))
    if schedule == "1f1b":
        mb, chunk = k, np.zeros_like(k)
    else:
        # forward k runs chunk (k // p) mod v of micro-batch (k // pv)·p + k mod p; backwards the chunks in reverse
        mb, chunk = (k // (p * v)) * p + k % p, (k // p) % v
        chunk = np.where(forward, chunk, v - 1 - chunk)
    stage = np.repeat(np.arange(p, dtype=I), 2 * total)
    return (stage, np.tile(q, p), forward.ravel(), mb.ravel().astype(I), chunk.ravel().astype(I),
            np.zeros(2 * total * p, np.int8))


class _Steps:
    """Steps appended one by one (the short phases of a schedule) or as arrays (its repeating steady state)."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.f: list[bool] = []
        self.mb: list[int] = []
        self.ch: list[int] = []
        self.part: list[int] = []

    def add(self, forward: bool, mb: int, chunk: int, part: int = WHOLE) -> None:
        self.f.append(forward)
        self.mb.append(mb)
        self.ch.append(chunk)
        self.part.append(part)

    def flush(self) -> None:
        if self.f:
            self.parts.append((np.array(self.f, bool), np.array(self.mb, I), np.array(self.ch, I),
                               np.array(self.part, np.int8)))
            self.f, self.mb, self.ch, self.part = [], [], [], []

    def block(self, f: np.ndarray, mb: np.ndarray, ch: np.ndarray, part: np.ndarray) -> None:
        """Steps as arrays, in order."""
        self.flush()
        self.parts.append((f, mb.astype(I), ch.astype(I), part.astype(np.int8)))

    def arrays(self) -> tuple[np.ndarray, ...]:
        self.flush()
        if not self.parts:
            return np.zeros(0, bool), np.zeros(0, I), np.zeros(0, I), np.zeros(0, np.int8)
        return tuple(np.concatenate(c) for c in zip(*self.parts))


def _cycle(k: int, pattern: list[tuple[bool, int, int, int, int]]) -> tuple[np.ndarray, ...]:
    """``k`` repetitions of ``pattern``: (forward, chunk, part, first micro-batch, micro-batches per repetition)
    per step, interleaved step by step."""
    n = len(pattern)
    rep = np.broadcast_to(np.array(pattern, dtype=I), (k, n, 5)).reshape(k * n, 5)
    r = np.repeat(np.arange(k, dtype=I), n)
    return rep[:, 0].astype(bool), rep[:, 3] + r * rep[:, 4], rep[:, 1].copy(), rep[:, 2].astype(np.int8)


def _zb_h1(i: int, p: int, m: int, memo: dict) -> tuple[np.ndarray, ...]:
    """``schedule.zb_h1``, each phase a ``_cycle``: the warm-up forwards, the forward-B pairs, the F-B-W triples,
    the cool-down's B-W pairs and the last Ws."""
    warmup = min(p - i - 1, m)
    steady = m - warmup
    early = min(i, steady)
    done_w = max(0, steady - i)
    phases = [(warmup, [(True, 0, WHOLE, 0, 1)]),
              (early, [(True, 0, WHOLE, warmup, 1), (False, 0, B, 0, 1)]),
              (steady - early, [(True, 0, WHOLE, warmup + early, 1), (False, 0, B, early, 1), (False, 0, W, 0, 1)]),
              (warmup, [(False, 0, B, m - warmup, 1), (False, 0, W, done_w, 1)]),
              (m - done_w - warmup, [(False, 0, W, done_w + warmup, 1)])]
    s = _Steps()
    for k, pattern in phases:
        if k > 0:
            s.block(*_cycle(k, pattern))
    return s.arrays()


def _zbv(i: int, p: int, m: int, memo: dict) -> tuple[np.ndarray, ...]:
    """``schedule.zbv`` (built for max(m, 2p − 1) micro-batches and cut to the real ones)."""
    n = max(m, 2 * p - 1)
    s = _Steps()
    f = [0, 0]
    b = [0, 0]

    def fwd(c: int) -> None:
        s.add(True, f[c], c)
        f[c] += 1

    def group(c: int, forward: bool = True, weight: bool = True) -> None:
        if forward:
            fwd(c)
        s.add(False, b[c], c, B)
        if weight:
            s.add(False, b[c], c, W)
        b[c] += 1

    for _ in range(2 * (p - i) - 1):
        fwd(0)
    for _ in range(i):
        fwd(1)
        fwd(0)
    for _ in range(p - i):
        group(1)
    # the steady state: a chunk-0 F-B-W group and a chunk-1 one, while chunk 0 has forwards left
    k = max(0, n - f[0])
    if k:
        s.block(*_cycle(k, [(True, 0, WHOLE, f[0], 1), (False, 0, B, b[0], 1), (False, 0, W, b[0], 1),
                            (True, 1, WHOLE, f[1], 1), (False, 1, B, b[1], 1), (False, 1, W, b[1], 1)]))
        f[0] += k
        b[0] += k
        f[1] += k
        b[1] += k
    while f[1] < f[0] or f[0] < n:
        group(0, forward=f[0] < n)
        group(1)
    w = list(b)
    for _ in range(i):
        group(0, forward=False, weight=False)
        group(1, forward=False, weight=False)
    for _ in range(p - i):
        s.add(False, b[0], 0, B)
        b[0] += 1
        s.add(False, w[0], 0, W)
        w[0] += 1
    for j in range(w[1], b[1]):
        s.add(False, j, 1, W)
    for j in range(w[0], b[0]):
        s.add(False, j, 0, W)
    out = s.arrays()
    keep = out[1] < m
    return tuple(c[keep] for c in out)


def _dualpipev(i: int, p: int, m: int, memo: dict) -> tuple[np.ndarray, ...]:
    """``schedule.dualpipev``; its fused main phase as arrays."""
    if (i, p, m) in memo:
        return memo[(i, p, m)]
    s = _Steps()
    count = {(c, k): 0 for c in (0, 1) for k in "FB"}
    pending: list[tuple[int, int]] = []

    def add(c: int, kind: str, part: int = WHOLE) -> None:
        key = (c, "F" if kind == "F" else "B")
        mb = count[key]
        s.add(kind == "F", mb, c, part)
        count[key] += 1
        if part == B:
            pending.append((mb, c))

    def weight() -> None:
        if pending:
            mb, c = pending.pop(0)
            s.add(False, mb, c, W)

    for _ in range(2 * (p - i - 1)):
        add(0, "F")
    for _ in range(i + 1):
        add(0, "F")
        add(1, "F")
    for _ in range(p - i - 1):
        add(1, "B", B)
        weight()
        add(1, "F")
    main = m - 2 * p + i + 1
    start = 0
    if main > 0 and i == p - 1:
        add(0, "F")                                 # PyTorch: not fused, to shorten the bubble
        add(1, "B")
        add(1, "F", AMP)
        add(0, "B")
        start = 1
    if main > start:
        k = main - start
        c = count
        s.block(*_cycle(k, [(True, 0, AMP, c[(0, "F")], 1), (False, 1, WHOLE, c[(1, "B")], 1),
                            (True, 1, AMP, c[(1, "F")], 1), (False, 0, WHOLE, c[(0, "B")], 1)]))
        for key in c:
            c[key] += k
    for _ in range(p - i - 1):
        add(1, "B")
        add(1, "F", AMP)
        add(0, "B")
    split = False
    for k in range(i + 1):
        # the second half of the cool-down splits its backwards, the W filling the tail
        if k == (i + 1) // 2 and i % 2 == 1:
            split = True
        add(1, "B", B if split else WHOLE)
        if k == (i + 1) // 2 and i % 2 == 0:
            split = True
        add(0, "B", B if split else WHOLE)
    for _ in range(p - i - 1):
        weight()
        add(0, "B", B if split else WHOLE)
    for _ in range(i + 1):
        weight()
    memo[(i, p, m)] = out = s.arrays()
    return out


def _dualpipe(i: int, p: int, m: int, memo: dict) -> tuple[np.ndarray, ...]:
    """``schedule.dualpipe``: rank i runs DualPipeV's order as rank min(i, p − 1 − i) of p/2 on m/2."""
    return _dualpipev(min(i, p - 1 - i), p // 2, m // 2, memo)
