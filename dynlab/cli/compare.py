"""``dynlab compare pc-bp`` (and ``dynlab analyze pc-bp``/``pc-bptt``): the comparisons of
learning rules over a grid, generated from their registered functions.

[`comparison_command`][] builds one command for the analyses of a task and a grid that
``--model`` chooses between (``mlp``: [`dynlab.analyses.pc_bp.compare_pc_bp`][]; ``rnn``:
``compare_pc_bptt``): its options are those of the analyses' signatures
([`dynlab.cli.analyze.signature_options`][]), so the signature holds the only default and its
docstring the help; an option of the other model's analysis is one line naming the model it
applies to. ``--task`` names the task (the signature's default when not given). It prints the
plan, runs the grid under a progress bar and writes the dataset with its three figures
([`dynlab.analyses.pc_bp_figures.FIGURES`][]), then the registered summary and the comparison's
warnings. Errors are reported by the main group (one line, exit status 2).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import click

from dynlab.cli.analysis import check_outputs, dataset_file, write_figure
from dynlab.cli.analyze import _plain, parameter_help, signature_options
from dynlab.cli.main import _CommandGroup
from dynlab.cli.options import _options, data_dir_option, overwrite_given, overwrite_option, progress_bar
from dynlab.errors import ConfigError

ANALYSES = {"mlp": "pc-bp", "rnn": "pc-bptt"}
"""The comparison's analysis by ``--model``."""


@click.group(cls=_CommandGroup)
def compare():
    """Compare learning rules side by side (gradients, losses) across model sizes."""


def comparison_command(name: str, default: str) -> click.Command:
    """The command ``name`` of the comparisons [`ANALYSES`][], ``--model`` ``default`` unless given."""
    from dynlab import registry

    entries = {model: registry.get("analysis", analysis) for model, analysis in ANALYSES.items()}
    signatures = {model: signature_options(e.name, e.obj, exclude=("task", "progress")) for model, e in entries.items()}
    options = {}
    for signature in signatures.values():  # a key of both: the feed-forward one's option and help
        for key, option in signature.options.items():
            options.setdefault(key, option)
    tasks = "; ".join(f"{m}: {_plain(parameter_help(inspect.getdoc(e.obj))['task'])} "
                      f"[default: {inspect.signature(e.obj).parameters['task'].default}]" for m, e in entries.items())

    def callback(model_kind, task_name, out, quiet, **given):
        from dynlab import store
        from dynlab.analyses.pc_bp import pc_bp_warnings, plan
        from dynlab.analyses.pc_bp_figures import FIGURES, figure_paths

        signature, entry = signatures[model_kind], registry.get("analysis", ANALYSES[model_kind])  # a plug-in's, now
        for key, text in given.items():
            if text is not None and key not in signature.options:
                other = next(m for m, s in signatures.items() if key in s.options)
                raise ConfigError(f"{signatures[other].spelled[key]} applies to --model {other} only")
        values = signature.parse({k: v for k, v in given.items() if k in signature.options},
                                 **({} if task_name is None else {"task": task_name}))
        arguments = inspect.signature(entry.obj).bind(**values)
        arguments.apply_defaults()
        line = plan(model_kind, arguments.arguments)  # checks every setting before any work
        if out is not None:  # the dataset and its three figures: nothing that exists is replaced without --overwrite
            check_outputs([("--out", dataset_file(out))] + [("--out", p) for p in figure_paths(Path(out)).values()])
        else:
            store.check_writable(Path("runs"), "--out")
        if not quiet:
            click.echo(line)
        with progress_bar(quiet, "cells") as update:
            ds = entry.obj(**values, progress=update)
        try:
            nc = Path(out) if out else store.new_run_dir("compare-pc-bp") / "pc_bp.nc"
            nc.parent.mkdir(parents=True, exist_ok=True)
            store.write_dataset(nc, ds, replace=overwrite_given())  # a file that appeared meanwhile is kept
        except OSError as e:
            store.rescue_dataset(ds, "pc_bp", e)
        figs = figure_paths(nc)
        for figure, draw in FIGURES.items():
            write_figure(figs[figure], draw(ds))
        click.echo(entry.summary(ds))
        for note in pc_bp_warnings(ds):
            click.echo(f"warning: {note}", err=True)
        click.echo(f"dataset: {nc}\nfigures: " + ", ".join(str(p) for p in figs.values()))

    common = _options([
        click.option("--model", "model_kind", type=click.Choice(list(ANALYSES)), default=default, show_default=True,
                     help="; ".join(f"{m}: {e.description} ({e.name})" for m, e in entries.items()) + "."),
        *options.values(),
        click.option("--task", "task_name", default=None, help=tasks),
        click.option("--out", type=click.Path(dir_okay=False), default=None,
                     help="Dataset file (.nc); figures go next to it. Default: runs/compare-pc-bp-<time>/pc_bp.nc."),
        overwrite_option,
        click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary."),
        data_dir_option])
    doc = "\n\n".join(f"--model {m}: " + inspect.getdoc(e.obj).split("\n\n")[0]
                       for m, e in sorted(entries.items(), key=lambda x: x[0] != default))
    return click.command(name, help=_plain(doc), short_help=entries[default].description)(common(callback))
