"""Search progress on stderr: a live rich panel on a terminal, a plain line every few seconds elsewhere."""

from __future__ import annotations

import time
from typing import Any, Callable, TextIO

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

PLAIN_EVERY_S = 5.0
"""Seconds between progress lines when stderr is a file or pipe (CI logs, `ray job logs`)."""
TOP = 5


class Progress:
    """Called by the search after every batch as ``progress(done, total, board)``; a context manager."""

    def __init__(self, console: Console, valid: int, what: str, clock: Callable[[], float] = time.perf_counter,
                 plain_every: float = PLAIN_EVERY_S) -> None:
        self._console = console
        self._valid = valid
        self._what = what
        self._clock = clock
        self._plain_every = plain_every
        self._t0 = clock()
        self._last_plain = self._t0
        self._state: tuple[int, int, list[Any]] = (0, 0, [])
        self._live: Any = None

    def __enter__(self) -> "Progress":
        if self._console.is_terminal:
            from rich.live import Live
            self._live = Live(self._render(), console=self._console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def __call__(self, done: int, total: int, board: list[Any]) -> None:
        self._state = (done, total, list(board[:TOP]))
        if self._live is not None:
            self._live.update(self._render())
            return
        now = self._clock()
        if now - self._last_plain >= self._plain_every:
            self._last_plain = now
            self._console.print(self.line(), highlight=False, soft_wrap=True)

    def rate(self) -> float:
        """Plans per second since the search started."""
        elapsed = self._clock() - self._t0
        return self._state[0] / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """One line: plans done of total, plans per second, the best plan so far."""
        done, total, board = self._state
        elapsed = self._clock() - self._t0
        best = (f"best {board[0].strategy.short()} {board[0].metrics.step_time:.3f} s" if board
                else "no plan fits yet")
        return (f"autoplan: {done}/{total} {self._what} ({self._valid} valid), {_rate(self.rate())} plans/s, "
                f"{elapsed:.1f} s; {best}")

    def _render(self) -> Group:
        done, total, board = self._state
        table = Table(box=None, pad_edge=False, title_justify="left")
        for col, justify in (("#", "right"), ("plan", "left"), ("step s", "right"), ("MFU", "right"),
                             ("peak GiB", "right")):
            table.add_column(col, justify=justify)
        for rank, e in enumerate(board, 1):
            m = e.metrics
            table.add_row(str(rank), Text(e.strategy.short()), f"{m.step_time:.3f}", f"{100 * m.mfu:.1f}%",
                          f"{m.peak_memory / 2**30:.1f}")
        bar_width = 30
        filled = round(bar_width * done / total) if total else 0
        head = Text.assemble(("searching ", "bold"), ("█" * filled, "green"), ("░" * (bar_width - filled), "dim"),
                             f" {done}/{total} {self._what}, {_rate(self.rate())} plans/s, "
                             f"{self._clock() - self._t0:.1f} s")
        return Group(head, table) if board else Group(head, Text("no plan fits yet", style="dim"))


def _rate(per_s: float) -> str:
    return f"{per_s:.0f}" if per_s >= 10 else f"{per_s:.1f}"


def progress_console(stream: TextIO | None = None) -> Console:
    """The console progress goes to: stderr, so stdout stays clean for --json."""
    return Console(stderr=stream is None, file=stream, width=None if stream is None else 132, markup=False,
                   emoji=False)
