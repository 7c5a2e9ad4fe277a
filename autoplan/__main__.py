"""``python -m autoplan`` runs the command line."""

from autoplan.cli import main

main()
