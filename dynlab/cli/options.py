"""Options shared by the commands: numbers, seeds, the data directory, the analysis options,
the progress bar and the spinner (each declared once)."""

from __future__ import annotations

import os
from pathlib import Path

import click


def progress_bar(quiet: bool, description: str, status: str = ""):
    """The one progress bar of the command line (rich): a context manager yielding
    ``update(done, total, info)``, where ``info`` is a dict of short fields shown beside the bar
    (floats to 4 significant digits). ``None`` under ``quiet``.

    What it shows, in 80 columns, with rich's own columns: the description, the bar, ``done/total``
    (``done/?`` and no time remaining until a total is known), the elapsed time and the time remaining
    (`TimeRemainingColumn`: the units left over the mean rate between the updates that advanced,
    so the start-up before the first, compilation, is left out; unknown, ``-:--:--``, until two
    have; the elapsed time once done), all on one line
    that is never cut; the ``info`` fields on a second line, cut with an ellipsis at the
    terminal's width. The bar is drawn on stderr, so what a command prints on stdout (its tables
    and results) never mixes with the bar's control sequences.
    """
    import contextlib

    if quiet:
        return contextlib.nullcontext(None)
    import math

    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    from rich.text import Text

    class TwoLines(Progress):
        def get_renderables(self):
            table = self.make_tasks_table(self.tasks)
            yield table
            for task in self.tasks:
                if task.fields.get("info"):
                    yield Text(f"  {task.fields['info']}", no_wrap=True, overflow="ellipsis", style="dim")

    @contextlib.contextmanager
    def bar():
        import sys

        # text printed on stdout meanwhile goes above the bar when both are the terminal, and
        # straight to stdout when stdout is a file or a pipe (the results never pass through stderr);
        # the rate is the mean since the first update (no window: a cell may take minutes)
        with TwoLines(TextColumn("[bold]{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                      TimeElapsedColumn(), TimeRemainingColumn(elapsed_when_finished=True),
                      console=Console(stderr=True), redirect_stdout=sys.stdout.isatty(),
                      speed_estimate_period=math.inf) as p:
            task = p.add_task(description, total=None, info=status)

            def update(done, total, info=None):
                text = "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in (info or {}).items())
                p.update(task, completed=done, total=total, info=text)

            try:
                yield update
            except BaseException:
                p.live.transient = True  # an error ends in its one line, not under a half-done bar
                raise

    return bar()


def busy(quiet: bool, what: str):
    import contextlib

    if quiet:
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(f"{what} (compiling and running)…")


def _use_data_dir(ctx, param, value):
    """``--data-dir``: the data directory for the command's duration, in this process and (as
    ``$DYNLAB_DATA``) in the worker processes it starts; both are restored afterwards."""
    if value is None:
        return
    import contextlib

    from dynlab.data import ENV, command_data_dir

    @contextlib.contextmanager
    def everywhere():
        previous = os.environ.get(ENV)
        os.environ[ENV] = str(Path(value).expanduser().absolute())
        try:
            with command_data_dir(value):
                yield
        finally:
            if previous is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = previous

    ctx.with_resource(everywhere())


data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False), default=None, expose_value=False, callback=_use_data_dir,
    help="Data directory of tasks that read files (smnist, psmnist, scifar10, pc-mnist, pc-cifar10, shd, charlm; "
         "default: $DYNLAB_DATA, then ~/.cache/dynlab/data).")


OVERWRITE = "dynlab.overwrite"


def _record_overwrite(ctx, param, value):
    ctx.meta[OVERWRITE] = bool(value)


overwrite_option = click.option(
    "--overwrite", is_flag=True, expose_value=False, callback=_record_overwrite,
    help="Replace output files that exist (atomically). Without it an existing output is refused; "
         "a run's own files (model, checkpoint, metrics, config, sweep, cells) are refused even with it.")
"""``--overwrite``, the one declaration: what the command was told is read by
[`overwrite_given`][], and the outputs are checked by [`dynlab.cli.analysis.check_outputs`][]."""


def overwrite_given() -> bool:
    """Whether the running command was given ``--overwrite``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(OVERWRITE))


_SEED = click.option("--seed", metavar="INT", default=None,
                     help="Seed of the analysis and of a fresh model's init (default 0).")
_RESULT = [
    click.option("--out", type=click.Path(dir_okay=False), default=None,
                 help="Dataset file (.nc). Default: <analysis>.nc in the checkpoint's run directory, or a new one."),
    click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Figure file (.png). Default: next to --out."),
    overwrite_option,
    click.option("-q", "--quiet", is_flag=True, help="No spinner; print only the summary."),
    data_dir_option,
]
"""Where an analysis's result goes, and how it is reported."""
_COMMON = [
    click.option("--model", "unit", default=None, help="Unit name (default: aru, or the checkpoint's unit)."),
    click.option("--checkpoint", type=click.Path(file_okay=False), default=None,
                 help="Run directory of a trained model (from 'dynlab train'). Without it, a fresh model."),
    click.option("--task", "task_name", default=None,
                 help="Drive the analysis with this task's inputs (a fresh model is built for it). "
                      "Default: the analysis's own (see its task option, if any)."),
    _SEED,
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override config keys (model.*, task.*)."),
    *_RESULT,
]


def _options(options: list):
    """One decorator applying a list of click options in order."""

    def apply(f):
        for option in reversed(options):
            f = option(f)
        return f

    return apply


analysis_options = _options(_COMMON)
"""The common options of an analysis of one model."""
runs_options = _options([
    click.argument("run_dirs", nargs=-1, metavar="RUN_DIR..."),
    click.option("--runs", "roots", multiple=True, metavar="DIR",
                 help="Also every run directory under DIR (repeatable), e.g. a sweep's output."),
    click.option("--task", "task_name", default=None,
                 help="Drive every model with this task's inputs (default: the runs' common task)."),
    _SEED, *_RESULT])
"""The common options of an analysis of several runs (``takes="runs"``): the run directories
instead of the model, then ``--task``, ``--seed``, ``--out`` and the rest of [`analysis_options`][]."""


def int_option(name, text, **bounds):
    """An integer option (``--steps``, ``--k``, …): [`dynlab.config.parse_number`][]."""
    from dynlab.config import parse_number

    return parse_number(name, text, integer=True, **bounds)


def seed_option(text) -> int:
    """``--seed``: an integer in [0, 2^32 - 1]."""
    from dynlab.config import SEED_RANGE

    return int_option("--seed", text, minimum=SEED_RANGE[0], maximum=SEED_RANGE[1])


def number_option(name, text, **bounds):
    """A finite number option (``--drive``, …); ``None`` when not given: [`dynlab.config.parse_number`][]."""
    from dynlab.config import parse_number

    return parse_number(name, text, **bounds)
