"""The `autoplan` command. Parses flags, loads specs, prints; the modelling lives elsewhere.

One module per command (or pair of commands), loaded when one of its commands runs (``app.COMMANDS``); heavy
modules (ray, optuna, numpy, networkx, plotly) are imported inside the commands that need them, so that
``autoplan --help`` stays fast.
"""

from autoplan.cli.app import main

__all__ = ["main"]
