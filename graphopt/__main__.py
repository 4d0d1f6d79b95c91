"""``python -m graphopt``: the graphopt command line."""

from graphopt.cli import main

main()
