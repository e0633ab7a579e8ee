"""``python -m dynlab.cli``: the command line."""

from dynlab.cli import console

console()
