"""Running the ``dynlab`` CLI in-process from tests, in a chosen working directory."""

import os

from click.testing import CliRunner

from dynlab.cli import main


def invoke(args, cwd):
    """``dynlab ARGS`` run in ``cwd``; the result has ``exit_code``, ``output`` and ``stderr``."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args)
    finally:
        os.chdir(old)
