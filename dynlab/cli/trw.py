"""``dynlab analyze trw``: temporal receptive windows of any model (registered on ``dynlab.cli.analyze``)."""

from __future__ import annotations

import click

from dynlab.cli.analysis import analysis_model, run_analysis
from dynlab.cli.analyze import analyze
from dynlab.cli.options import analysis_options, int_option, number_option, seed_option
from dynlab.errors import ConfigError

TASK = "hierarchical-language"


@analyze.command("trw")
@analysis_options
@click.option("--n-shuffle", metavar="INT", default="200", show_default=True, help="Permutations per scale.")
@click.option("--dilation", metavar="INT", default="0", show_default=True,
              help="Dilate the 729-symbol stream by 3^m (scales 3^0..3^6 times 3^m).")
@click.option("--mode", type=click.Choice(["pulse", "hold"]), default=None, help="Dilation mode (default: the task's).")
@click.option("--entries", type=click.Choice(["offdiag", "all"]), default="offdiag", show_default=True,
              help="Recurrence-matrix entries correlated.")
@click.option("--warmup", type=click.Choice(["stream", "none"]), default="stream", show_default=True,
              help="Present the intact stream once before each measured one (stream) or start from the zero state (none).")
@click.option("--frac", metavar="X", default="0.5", show_default=True, help="s50 threshold as a fraction of the maximum.")
def trw_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, n_shuffle, dilation, mode, entries,
            warmup, frac):
    """Temporal receptive windows: block-scramble the hierarchical-language stream at 3^0..3^6,
    un-shuffle every layer's output, correlate recurrence matrices (Eq. 10) and report s50 per layer.

    Works on any model whose input has the task's 9 channels; multi-layer units (sithcon, sith-rnn,
    rnn-*) are analysed layer by layer inside the cell. (--steps is not used.)
    """
    from dynlab.tasks.hierarchical import HierarchicalLanguageTask

    seed_v = seed_option(seed)
    if task_name is not None and task_name != TASK:
        raise ConfigError(f"the trw analysis runs on the {TASK!r} stream, got --task {task_name!r}")
    exp, task, source = analysis_model(unit, checkpoint, TASK, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))
    if not isinstance(task, HierarchicalLanguageTask):
        task = HierarchicalLanguageTask()
    frac_v = number_option("--frac", frac)
    if not 0 < frac_v < 1:
        raise ConfigError(f"--frac must be between 0 and 1, got {frac}")
    ds = run_analysis("trw", exp, source, checkpoint, out, plot, quiet,
                      task=task, n_shuffle=int_option("--n-shuffle", n_shuffle), dilation=int_option("--dilation", dilation),
                      mode=mode, entries=entries, warmup=warmup, frac=frac_v, seed=seed_v)
    for i in range(ds.sizes["layer"]):
        censored = bool(ds.s50_censored[i])
        cens = " (censored: at or below the smallest scale, a bound)" if censored else ""
        sel = ""
        if "tau_selected_quantile" in ds:
            q = ds.tau_selected_quantile[i].values
            sel = f"; tau at the max over tau: median {q[1]:.1f} (10-90%: {q[0]:.1f}-{q[2]:.1f})"
        click.echo(f"{ds.layer_name.values[i]:<16} s50 {'≤' if censored else '='} {float(ds.s50[i]):8.2f} steps "
                   f"= 3^{float(ds.log3_s50[i]):.2f}{cens}{sel}")
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")
