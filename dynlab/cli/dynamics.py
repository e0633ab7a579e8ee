"""``dynlab analyze lyapunov`` and ``dynlab analyze spectra``: the dynamics of a model's full state map."""

from __future__ import annotations


import click
import numpy as np

from dynlab.errors import NonFiniteResult
from dynlab.cli.analysis import analysis_model, non_finite_variables, run_analysis
from dynlab.cli.analyze import analyze
from dynlab.cli.options import analysis_options, int_option, number_option, seed_option


FRESH_DRIVE = 1.0
r"""The constant drive $\xi$ that ``analyze lyapunov`` puts on every neuron of a *freshly
initialised* model when neither ``--drive`` nor ``--task`` is given (``--drive 0`` gives the
autonomous dynamics; a ``--checkpoint`` stays autonomous by default, the ARU paper's App. D.4
setting, and ``--drive``/``--task`` mean what they say in every case).

Why: without input a fresh network rests at the fixed point of its initialisation, and its
spectrum describes the initialisation, not the network. Measured on the default model
(`--model aru`: 64 neurons, $n_g$ = 16, seed 0; 16 exponents, 2 CPU cores): autonomous, all 16
are $-0.4098 \dots -0.4105$, copies of one mode of the controller RNN that every neuron runs
with the same weights (the recurrent network's own modes lie lower, near $-0.57$); task inputs
(adding, recall, hierarchical-language) leave the same degenerate block. At $\xi = 1$ the
neurons sit in the nonlinear range of $\gamma$ and the recurrent network's modes lead: an
isolated $\lambda_1 = -0.148$, then complex pairs down to $-0.255$ (the controllers' block
follows at $-0.41$), in about 25 s. $\xi = 0.5$ gives $-0.225 \dots -0.329$; $\xi \ge 2$
saturates ($\lambda_1 = -0.118$) at twice the time. A vanilla tanh RNN (`--model rnn`) rests
at $h = 0$, where its orthogonal $W_{hh}$ gives 16 exponents of $\approx 0$; at $\xi = 1$ it
contracts with a spread spectrum ($-0.54 \dots -0.76$). $\xi = 1$ is also the smallest drive of
the ARU paper's Fig. 5 sweep (and of ``analyze adaptation``).
"""


@analyze.command("lyapunov")
@analysis_options
@click.option("--k", "k", metavar="INT", default="16", show_default=True, help="Number of exponents (1..state dim).")
@click.option("--burn-in", metavar="INT|auto", default="auto", show_default=True,
              help="Steps not accumulated; 'auto': steps/4, then as many more as the MSER rule finds transient.")
@click.option("--drive", metavar="XI", default=None,
              help="Constant drive xi added to every neuron (zero input). Default: none (autonomous) for a "
                   f"--checkpoint or with --task; {FRESH_DRIVE:g} for a fresh model (--drive 0: autonomous).")
@click.option("--realisations", metavar="INT", default="5", show_default=True,
              help="Independent realisations the CI is over (task input sequences; autonomous: trajectory stretches).")
@click.option("--ics", metavar="INT", default="2", show_default=True,
              help="Initial conditions per realisation (their spread measures multistability, not error).")
@click.option("--reortho-every", metavar="INT|auto", default="auto", show_default=True,
              help="Steps between QR steps; 'auto' picks them from the spread of the exponents (error bound in attrs).")
def lyapunov_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, k, burn_in, drive, realisations,
                 ics, reortho_every):
    """Lyapunov spectrum of a model's full state map (QR method), with CIs over independent realisations.

    Protocols: autonomous (zero input; the default for a --checkpoint), --drive XI (constant
    drive on every neuron; XI = 1 is the default for a fresh model, whose autonomous dynamics rest at
    the fixed point of its initialisation), or --task NAME (the task's input sequence;
    non-autonomous exponents). The interval
    is a Student-t interval over --realisations independent input sequences (autonomous and
    constant drive: stretches of one trajectory, --steps apart); the table also shows each
    run's within-run standard error and the spread over initial conditions under one input.
    """
    import numpy as np

    seed_v = seed_option(seed)
    options = dict(k=int_option("--k", k, minimum=1), steps=int_option("--steps", steps, minimum=1),
                   burn_in="auto" if burn_in == "auto" else int_option("--burn-in", burn_in, minimum=0),
                   ics=int_option("--ics", ics, minimum=1),
                   realisations=int_option("--realisations", realisations, minimum=2),
                   reortho_every="auto" if reortho_every == "auto"
                   else int_option("--reortho-every", reortho_every, minimum=1))
    exp, task, source = analysis_model(unit, checkpoint, task_name, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))

    drive_v = number_option("--drive", drive)
    if drive_v is None and task is None and not checkpoint:
        drive_v = FRESH_DRIVE
        if not quiet:
            click.echo(f"a fresh model without --drive or --task: constant drive ξ = {FRESH_DRIVE:g} on every neuron "
                       "(--drive 0 for the autonomous dynamics)")
    ds = run_analysis("lyapunov", exp, source, checkpoint, out, plot, quiet,
                       drive=drive_v, task=task, seed=seed_v, x64=x64, **options)
    _lyapunov_table(ds, glossary=not quiet)
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")
    if "mean" in non_finite_variables(ds):
        raise NonFiniteResult(f"{int((~np.isfinite(ds['mean'].values)).sum())} of {ds.sizes['exponent']} mean exponents are "
                              f"NaN or inf (the trajectory left the finite range); the dataset is kept in {ds.attrs['path']}")


@analyze.command("spectra")
@analysis_options
@click.option("--burn-in", metavar="INT", default="200", show_default=True, help="Steps before the analysed window.")
@click.option("--every", metavar="INT", default=None, help="Jacobian sampled every this many steps (default: 20 samples).")
@click.option("--drive", metavar="XI", default=None, help="Constant drive xi added to every neuron.")
@click.option("--n-boot", metavar="INT", default="200", show_default=True, help="Bootstrap resamples for the CI of alpha.")
def spectra_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, burn_in, every, drive, n_boot):
    """Eigenvalues of recurrent weights and of the state Jacobian, and the activity covariance spectrum.

    The trajectory is driven by the task's inputs (--task, default: the config's task, adding),
    plus --drive if given; the covariance spectrum gets a power-law fit with a bootstrap CI.
    """

    seed_v = seed_option(seed)
    options = dict(steps=int_option("--steps", steps, minimum=1), burn_in=int_option("--burn-in", burn_in, minimum=0),
                   n_boot=int_option("--n-boot", n_boot, minimum=0), every=int_option("--every", every, minimum=1))
    exp, task, source = analysis_model(unit, checkpoint, task_name, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))

    ds = run_analysis("spectra", exp, source, checkpoint, out, plot, quiet,
                       task=task if task is not None else exp.task, drive=number_option("--drive", drive), seed=seed_v,
                       x64=x64, **options)
    click.echo(f"spectral radius of recurrent matrices: " + ", ".join(
        f"{m} {float(r):.4f}" for m, r in zip(ds.matrix.values, ds.weight_spectral_radius.values)))
    rho = ds.jacobian_spectral_radius.values
    click.echo(f"state Jacobian: spectral radius {rho.mean():.4f} (range {rho.min():.4f}–{rho.max():.4f}), "
               f"largest singular value {float(ds.jacobian_singular_values[:, 0].mean()):.4f} (mean over {rho.size} samples)")
    if "covariance_alpha" in ds:
        ranks = (f" over ranks {ds.attrs['covariance_fit_rank_min']}–{ds.attrs['covariance_fit_rank_max']} "
                 f"(M_eff {ds.attrs['covariance_effective_samples']:.0f} of {ds.attrs['covariance_n_samples']} samples)"
                 if "covariance_fit_rank_max" in ds.attrs else "")
        click.echo(f"activity covariance: alpha {float(ds.covariance_alpha):.3f}{ranks} "
                   f"[{float(ds.covariance_alpha_ci_low):.3f}, {float(ds.covariance_alpha_ci_high):.3f}]"
                   f"{', ' + ds.attrs['covariance_ci_label'] if 'covariance_ci_label' in ds.attrs else ''}; R² "
                   f"{float(ds.covariance_power_law_r2):.3f}; truncated power law alpha "
                   f"{float(ds.covariance_truncated_alpha):.3f}, n_c {float(ds.covariance_truncated_n_c):.3g}; "
                   f"participation ratio {float(ds.covariance_participation_ratio):.2f}")
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")


def _interval_counts(ds) -> str:
    """How many exponents' intervals lie above 0, contain 0, lie below 0: "a / b / c"."""
    low, high = np.asarray(ds.ci_low), np.asarray(ds.ci_high)
    return f"{int((low > 0).sum())} / {int(((low <= 0) & (high >= 0)).sum())} / {int((high < 0).sum())}"


def _lyapunov_table(ds, show: int = 12, glossary: bool = True):
    """The table of exponents, the summary line and the reading line; with ``glossary``, the line
    saying what the columns mean, how the QR steps and the burn-in were chosen (left out under ``-q``)."""
    from rich.console import Console

    from dynlab.analyses.lyapunov import interpret_spectrum
    from rich.table import Table

    level = f"{100 * ds.attrs['ci_level']:g}%"
    table = Table(title=f"Lyapunov exponents per step — {ds.attrs['protocol']}, state dim {ds.attrs['state_dim']}\n"
                        f"mean and {level} CI over {ds.attrs['ci_population']} (Student t); "
                        f"{ds.attrs['n_ic']} initial conditions each")
    table.add_column("i", justify="right")
    table.add_column("mean λ_i", justify="right")
    table.add_column(f"± {level} CI half-width ({ds.attrs['n_realisations']} realisations)", justify="right")
    table.add_column("within-run SE", justify="right")
    table.add_column("IC sd (multistab.)", justify="right")
    k = ds.sizes["exponent"]

    def number(x, fmt="+.5f"):
        return "—" if not np.isfinite(x) else format(x, fmt)

    for i in range(min(k, show)):
        table.add_row(str(i + 1), number(float(ds["mean"][i])),
                      number((float(ds.ci_high[i]) - float(ds.ci_low[i])) / 2, ".1e"),
                      number(float(ds.within_run_se_of_mean[i]), ".1e"), number(float(ds.ic_sd_mean[i]), ".1e"))
    if k > show:
        table.add_row("…", f"({k - show} more in the dataset)", "", "", "")
    console = Console(width=120)
    console.print(table)
    counts = _interval_counts(ds)
    console.print(
        f"largest = λ1, row 1 above   sum of positive exponents {float(ds.positive_sum_mean):.5f} "
        f"in [{float(ds.positive_sum_ci_low):.5f}, {float(ds.positive_sum_ci_high):.5f}] (from the rows' intervals; "
        f"the sum of the exponents resolved > 0)   Kaplan–Yorke dim {float(ds.ky_dimension_mean):.3f}   "
        f"intervals above / containing / below 0: {counts}   (sum over the k={k} computed: {float(ds['mean'].sum()):+.5f})"
        + ("   [lower bounds: not all exponents computed]" if k < ds.attrs["state_dim"] else "")
    )
    burn = (f"burn-in {ds.attrs['burn_in']} of {ds.attrs['steps_total']} steps ({ds.attrs['burn_in_fixed']} fixed"
            + (f" + {ds.attrs['burn_in_truncated']} dropped by the MSER rule" if ds.attrs.get("burn_in_requested") == "auto"
               else "") + (", repeated over twice the steps: the transient outlasted the first window"
                           if ds.attrs.get("burn_in_extended") else "") + ")") if "burn_in_fixed" in ds.attrs else ""
    if glossary:
        console.print(
            f"within-run SE: batch-means standard error that time averaging alone leaves in the mean; "
            f"IC sd: spread over initial conditions under one input (multistability, not an error bar); "
            f"QR every {ds.attrs['reortho_every']} steps ({ds.attrs['reortho_requested']}), "
            f"blocking error <= {ds.attrs['reortho_error_bound']:.1e}; {burn}"
        )
    click.echo(interpret_spectrum(ds))
