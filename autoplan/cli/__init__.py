"""The `autoplan` command. Parses flags, loads specs, prints; the modelling lives elsewhere.

One module per command (or pair of commands), loaded when one of its commands runs (``app.COMMANDS``); heavy
modules (ray, optuna, numpy, networkx, plotly) are imported inside the commands that need them, so that
``autoplan --help`` stays fast.
"""

import os

# the simulator's numpy never multiplies matrices: one BLAS thread, not one per core, spinning up when numpy loads
# (60 ms of CPU per command on 2 cores); a value the user set is kept
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from autoplan.cli.app import main  # noqa: E402

__all__ = ["main"]
