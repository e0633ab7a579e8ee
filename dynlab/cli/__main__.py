"""``python -m dynlab.cli``: the command line."""

from dynlab.cli import main

main()
