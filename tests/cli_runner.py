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


def one_line_error(result, *fragments, status=2, prefix="error: ") -> str:
    """``result`` ended in exactly one ``error:`` line on stderr (no traceback) and exit ``status``,
    naming every one of ``fragments``; returns the line."""
    assert result.exit_code == status, (result.exit_code, result.output, result.stderr)
    err = result.stderr.strip()
    assert err.startswith(prefix) and "\n" not in err and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


TINY_CELL = """[model]
unit = "rnn"
hidden = 4
[task]
name = "adding"
length = 6
[train]
steps = 10
batch_size = 8
eval_size = 16
log_every = 5
eval_every = 5
checkpoint_every = 10
"""
"""The tables of a scenario whose cells train a 4-unit RNN on a short adding task in about a second."""

