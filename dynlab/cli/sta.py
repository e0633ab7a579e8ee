"""``dynlab analyze sta``: receptive fields by spike-triggered averaging (registered on
``dynlab.cli.analyze``; the analysis is [`dynlab.analyses.sta`][])."""

from __future__ import annotations

import click

from dynlab.cli.analysis import analysis_model, run_analysis
from dynlab.cli.analyze import analyze
from dynlab.cli.options import analysis_options, int_option, number_option, seed_option

TASK = "hierarchical-language"


@analyze.command("sta", short_help="Receptive fields by spike-triggered averaging, per layer, neuron and level.")
@analysis_options
@click.option("--quantile", metavar="X", default="0.9", show_default=True,
              help="A neuron's activity is high above this quantile of its outputs (0 <= X < 1).")
@click.option("--lags", metavar="INT", default="9", show_default=True,
              help="Items back (hierarchical language) or steps back (other tasks) averaged.")
@click.option("--samples", metavar="INT", default="64", show_default=True,
              help="Test samples of a task other than the hierarchical language.")
def sta_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, quantile, lags, samples):
    """Receptive fields of every neuron of every layer by spike-triggered averaging (SITH paper
    Fig. 4d, S2): the average input preceding a neuron's high activity (above its --quantile),
    at every level of the hierarchical language (letters, words, sentences, paragraphs,
    sequences), or of any task's raw input.

    The task: --task NAME, else a checkpoint's own task, else the hierarchical language (a
    fresh model is built for it). (--steps and --x64 are not used.)
    """
    seed_v = seed_option(seed)
    name = task_name if task_name is not None or checkpoint else TASK
    exp, task, source = analysis_model(unit, checkpoint, name, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))
    ds = run_analysis("sta", exp, source, checkpoint, out, plot, quiet, task=exp.task if task is None else task,
                      quantile=number_option("--quantile", quantile, minimum=0, maximum=1),
                      lags=int_option("--lags", lags, minimum=1), samples=int_option("--samples", samples, minimum=1),
                      seed=seed_v)
    from dynlab.analyses.sta import sta_summary

    click.echo(sta_summary(ds))
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")
