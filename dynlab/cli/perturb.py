"""``dynlab analyze perturb``: a model's held-out metric under a perturbation of increasing strength
(registered on ``dynlab.cli.analyze``)."""

from __future__ import annotations

import click

from dynlab.cli.analysis import analysis_model, run_analysis
from dynlab.cli.analyze import analyze
from dynlab.cli.options import analysis_options, int_option, number_option, seed_option
from dynlab.config import parse_numbers
from dynlab.errors import ConfigError


@analyze.command("perturb")
@analysis_options
@click.option("--kind", metavar="step|noisy|contrast", default="noisy", show_default=True,
              help="step: drive xi on every neuron in a window; noisy: N(mu, (std_ratio*mu)^2) i.i.d. per neuron "
                   "and step in the window; contrast: x_t (1 + alpha sin(2 pi f t/T + phase)).")
@click.option("--strength", "strength", metavar="LIST", default="0,1,2,3,4,5", show_default=True,
              help="Comma-separated strengths: xi (step), mu (noisy) or alpha (contrast).")
@click.option("--n", "n", metavar="INT", default="1000", show_default=True, help="Held-out samples per strength.")
@click.option("--onset", metavar="INT", default=None, help="First drive step (default: 200/784 of the sequence).")
@click.option("--duration", metavar="INT", default=None, help="Drive steps (default: 200/784 of the sequence).")
@click.option("--std-ratio", metavar="X", default="0.4", show_default=True, help="Noisy drive: std = std_ratio * mu.")
@click.option("--freq", metavar="X", default="1.0", show_default=True, help="Contrast: cycles per sequence.")
@click.option("--phase", metavar="X", default="0.0", show_default=True, help="Contrast: phase (radians).")
def perturb_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, kind, strength, n, onset, duration,
                std_ratio, freq, phase):
    """Held-out metric (accuracy) of a model under a step drive, a noisy drive or a contrast
    modulation, against the perturbation's strength; strength 0 is the clean model.

    Evaluated on the model's own task (or --task), every strength on the same samples and noise
    draws (--seed). (--steps and --x64 are not used.)
    """

    from dynlab.perturbations import KINDS

    if kind not in KINDS:
        raise ConfigError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
    seed_v = seed_option(seed)
    exp, task, source = analysis_model(unit, checkpoint, task_name, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))
    options = dict(kind=kind, strengths=[float(v) for v in parse_numbers("--strength", strength)],
                   n=int_option("--n", n, minimum=1), seed=seed_v,
                   onset=None if onset is None else int_option("--onset", onset),
                   duration=None if duration is None else int_option("--duration", duration),
                   std_ratio=number_option("--std-ratio", std_ratio), freq=number_option("--freq", freq),
                   phase=number_option("--phase", phase))
    ds = run_analysis("perturb", exp, source, checkpoint, out, plot, quiet,
                      task=task if task is not None else exp.task, **options)
    metric = ds.attrs["metric"]
    for s, v in zip(ds.strength.values, ds[metric].values):
        click.echo(f"strength {s:8.3g}   {metric} {v:.4f}")
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")
