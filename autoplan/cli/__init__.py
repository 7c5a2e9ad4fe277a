"""The `autoplan` command. Parses flags, loads specs, prints; the modelling lives elsewhere.

One module per command (or pair of commands); heavy modules (ray, optuna, numpy, networkx) are imported inside
the commands that need them, so that ``autoplan --help`` stays fast.
"""

from autoplan.cli.app import main
from autoplan.cli import catalog, collective, plan, runs, search, validate, whatif  # noqa: F401  (they register commands)

__all__ = ["main"]
