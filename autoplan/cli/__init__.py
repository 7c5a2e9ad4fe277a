"""The `autoplan` command. Parses flags, loads specs, prints; the modelling lives elsewhere.

One module per command (or pair of commands); heavy modules (ray, optuna, numpy, networkx) are imported inside
the commands that need them, so that ``autoplan --help`` stays fast.
"""

from autoplan.cli.app import main
from autoplan.cli import calibrate, catalog, collective, plan, runs, search, sweep, validate, whatif  # noqa: F401  (register commands)
from autoplan.cli.options import legend_text

main.epilog = legend_text()
for _name in ("search", "show", "space"):
    main.commands[_name].epilog = legend_text()

__all__ = ["main"]
