"""``dynlab analyze`` commands of the ARU paper's dynamics analyses (registered on ``dynlab.cli.analyze``).

Each runs on a trained model (``--checkpoint RUN``) or a fresh one (``--model aru --set ...``) and
writes ``NAME.nc`` and ``NAME.png`` like ``dynlab analyze lyapunov``.
"""

from __future__ import annotations

import click

from dynlab.cli.analysis import analysis_model, run_analysis
from dynlab.cli.analyze import analyze
from dynlab.cli.options import _options, analysis_options, int_option, number_option, seed_option
from dynlab.config import parse_numbers


def number_list(name: str, text: str | None, integer: bool = False):
    """``"1,2.5,10"`` -> ``[1, 2.5, 10]`` (``None`` stays ``None``: the analysis default)."""
    return parse_numbers(name, text, integer=integer)


def _given(**options):
    """The options the user set (``None`` = keep the analysis's default)."""
    return {k: v for k, v in options.items() if v is not None}


def _prepare(unit, checkpoint, task_name, seed, sets):
    seed_v = seed_option(seed)
    sets = list(sets) + ([] if checkpoint else [f"seed={seed_v}"])
    exp, task, source = analysis_model(unit, checkpoint, task_name, sets)
    return seed_v, exp, task, source



def _done(ds):
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")


_grid_options = _options([
    click.option("--n-values", metavar="LIST", default=None, help="Gains n (default: the paper's 1, 1.25, ..., 20)."),
    click.option("--s-values", metavar="LIST", default=None, help="Saturations s (default: 0, 0.25, 0.5, 0.75, 1)."),
    click.option("--h-range", metavar="X", default=None, help="States h ~ U(-X, X) (default 5, the paper's)."),
    click.option("--drive", metavar="XI", default=None, help="Constant drive xi in the map (default 0)."),
])


@analyze.command("jacobian-grid")
@analysis_options
@_grid_options
@click.option("--samples", metavar="INT", default="100", show_default=True, help="States h per grid point.")
@click.option("--norm", type=click.Choice(["spectral", "rms"]), default="spectral", show_default=True,
              help="Operator 2-norm, or |J|_F / sqrt(N).")
def jacobian_grid_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, n_values, s_values,
                      h_range, drive, samples, norm):
    """Mean Jacobian norm of layer 0's static gamma network over the (n, s) grid (ARU paper App. Fig. 6A).

    The network keeps the model's W_hh and b_h, takes zero input and one (n, s) pair for all neurons.
    (--steps, --task and --x64 are not used.)
    """

    seed_v, exp, _, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("jacobian-grid", exp, source, checkpoint, out, plot, quiet, seed=seed_v,
              samples=int_option("--samples", samples), norm=norm,
              **_given(n_values=number_list("--n-values", n_values), s_values=number_list("--s-values", s_values),
                       h_range=number_option("--h-range", h_range), drive=number_option("--drive", drive)))
    jn = ds.jacobian_norm
    where = jn.where(jn == jn.max(), drop=True)
    click.echo(f"mean Jacobian norm: {float(jn.min()):.4f} – {float(jn.max()):.4f}; above 1 at "
               f"{int((jn > 1).sum())} of {jn.size} grid points; largest at n = {float(where.n[0]):g}, "
               f"s = {float(where.s[0]):g}")
    _done(ds)


@analyze.command("lyapunov-grid")
@analysis_options
@_grid_options
@click.option("--realisations", metavar="INT", default="5", show_default=True,
              help="Independent runs (initial states and frames) the CI is over.")
@click.option("--ics", metavar="INT", default="2", show_default=True,
              help="Initial conditions per realisation and grid point (their spread: multistability).")
@click.option("--burn-in", metavar="INT", default="200", show_default=True, help="Steps not accumulated.")
def lyapunov_grid_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, n_values, s_values,
                      h_range, drive, realisations, ics, burn_in):
    """Largest Lyapunov exponent of layer 0's static gamma network over the (n, s) grid (App. Fig. 6B).

    Zero input (App. D.4); every grid point and initial condition in one vmapped QR run. (--task is not used.)
    """

    seed_v, exp, _, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("lyapunov-grid", exp, source, checkpoint, out, plot, quiet, seed=seed_v,
              x64=x64, steps=int_option("--steps", steps), ics=int_option("--ics", ics),
              realisations=int_option("--realisations", realisations, minimum=2), burn_in=int_option("--burn-in", burn_in),
              **_given(n_values=number_list("--n-values", n_values), s_values=number_list("--s-values", s_values),
                       h_range=number_option("--h-range", h_range), drive=number_option("--drive", drive)))
    lam = ds.lambda1_mean
    near = lam.where(abs(lam) == abs(lam).min(), drop=True)
    click.echo(f"lambda_1: {float(lam.min()):+.4f} – {float(lam.max()):+.4f} per step; positive at "
               f"{int((lam > 0).sum())} of {lam.size} grid points; closest to 0 at n = {float(near.n[0]):g}, "
               f"s = {float(near.s[0]):g} ({float(near.values.ravel()[0]):+.4f}); means over {ds.attrs['ci_population']}")
    _done(ds)


def _ci(ds, name, i):
    """``mean [low, high]`` of the finite runs (said to be over those when some escaped: the mean is
    conditional on not escaping), and the count and escape rate of the diverged ones."""
    n_div = int(ds[f"{name}_diverged"][i].sum())
    n = int(ds[f"{name}_diverged"][i].size)
    text = "" if n_div == n else (f"{float(ds[f'{name}_mean'][i]):+.5f} [{float(ds[f'{name}_ci_low'][i]):+.5f}, "
                                  f"{float(ds[f'{name}_ci_high'][i]):+.5f}]"
                                  + (f" over the {n - n_div}/{n} bounded runs" if n_div else ""))
    if n_div:
        text += f"{'; ' if text else ''}{n_div}/{n} escape at {float(ds[f'{name}_escape_mean'][i]):+.4f}"
    return text


@analyze.command("adaptation", short_help="Fig. 5c/d: lambda_1 with (n, s) frozen where the ARU sets them under a drive.")
@analysis_options
@click.option("--drives", metavar="LIST", default=None, help="Step drives xi (default 1,2,5,10,20; 0 is always added).")
@click.option("--t-hats", metavar="LIST", default=None,
              help="Steps after onset at which to freeze (n, s) (default 0,1,2,5,10,20,50,100).")
@click.option("--onset", metavar="INT", default="100", show_default=True, help="Undriven steps before the drive.")
@click.option("--duration", metavar="INT", default="400", show_default=True, help="Driven steps.")
@click.option("--window", metavar="INT", default="50", show_default=True,
              help="Last driven steps averaged for (n_inf, s_inf).")
@click.option("--realisations", metavar="INT", default="5", show_default=True,
              help="Independent input streams the CI is over; (n_inf, s_inf) are re-estimated in each.")
@click.option("--ics", metavar="INT", default="4", show_default=True,
              help="Initial conditions per realisation, from its driven run (their spread: multistability).")
@click.option("--burn-in", metavar="INT", default="200", show_default=True, help="Lyapunov steps not accumulated.")
@click.option("--drive-in-map/--no-drive-in-map", default=True, show_default=True,
              help="Keep the drive xi in the frozen map whose lambda_1 is computed.")
def adaptation_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, drives, t_hats, onset,
                   duration, window, realisations, ics, burn_in, drive_in_map):
    """Fig. 5c/d: lambda_1 with the activation parameters frozen where the ARU sets them under a drive.

    Adapted = steady-state (n, s) under xi, fixed = those without drive, and one per t_hat; initial
    conditions from the driven run's stationary part (zero input, or --task's inputs). --steps is the
    length of each Lyapunov run.
    """
    import numpy as np
    from rich.console import Console
    from rich.table import Table


    seed_v, exp, task, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("adaptation", exp, source, checkpoint, out, plot, quiet, seed=seed_v, x64=x64,
              task=task, steps=int_option("--steps", steps), onset=int_option("--onset", onset),
              duration=int_option("--duration", duration), window=int_option("--window", window),
              ics=int_option("--ics", ics), realisations=int_option("--realisations", realisations, minimum=2),
              burn_in=int_option("--burn-in", burn_in), drive_in_map=drive_in_map,
              **_given(drives=number_list("--drives", drives), t_hats=number_list("--t-hats", t_hats, integer=True)))
    conf = int(100 * ds.attrs["confidence"])
    table = Table(title=f"lambda_1 per step, mean [{conf}% CI over {ds.attrs['ci_population']}, Student t; "
                        f"{ds.sizes['ic']} initial conditions each] (runs escaping to infinity: their growth rate) "
                        f"— {ds.attrs['inputs']}")
    for col in ("xi", "adapted (n_inf(xi), s_inf(xi))", "fixed (n_inf(0), s_inf(0))", "|adapted| / |fixed|"):
        table.add_column(col, justify="right")
    for i, xi in enumerate(ds.drive.values):
        ratio = abs(float(ds.lambda1_adapted_mean[i])) / max(abs(float(ds.lambda1_fixed_mean[i])), 1e-300)
        table.add_row(f"{xi:g}", _ci(ds, "lambda1_adapted", i), _ci(ds, "lambda1_fixed", i),
                      "–" if np.isnan(ratio) else f"{ratio:.4g}")
    Console(width=120).print(table)
    click.echo(f"steady-state check, max |n_T - n_(T-window)| per drive (worst realisation): "
               + ", ".join(f"{v:.2g}" for v in ds.n_drift.max("realisation").values))
    _done(ds)


@analyze.command("controller", short_help="Fig. 5a/b: controller states (PCA) and limit points under constant drives.")
@analysis_options
@click.option("--drives", metavar="LIST", default=None,
              help="Constant drives xi (default 1,2,5,10,20,30; 0 is always added).")
@click.option("--onset", metavar="INT", default="50", show_default=True, help="Undriven steps before the drive.")
@click.option("--duration", metavar="INT", default="300", show_default=True, help="Driven steps.")
@click.option("--eps", metavar="X", default="0.01", show_default=True, help="Level curves gamma' = 1 - eps.")
def controller_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, drives, onset, duration, eps):
    """Fig. 5a/b: controller states in their first two principal components with limit points under
    constant drives, and the (n_t, s_t) paths. (--steps and --x64 are not used.)"""

    seed_v, exp, task, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("controller", exp, source, checkpoint, out, plot, quiet, seed=seed_v, task=task,
              onset=int_option("--onset", onset), duration=int_option("--duration", duration),
              eps=number_option("--eps", eps), **_given(drives=number_list("--drives", drives)))
    evr = ds.explained_variance_ratio.values
    click.echo(f"explained variance: " + ", ".join(f"PC{i + 1} {100 * v:.1f}%" for i, v in enumerate(evr)))
    for i, xi in enumerate(ds.drive.values):
        click.echo(f"xi = {xi:<6g} n onset {float(ds.n_onset[i].mean()):.4f} -> end {float(ds.n_inf[i].mean()):.4f}, "
                   f"s onset {float(ds.s_onset[i].mean()):+.4f} -> end {float(ds.s_inf[i].mean()):+.4f} "
                   f"(means over neurons); limit residual {float(ds.limit_residual[i]):.2g}")
    _done(ds)


@analyze.command("gain-scaling", short_help="Fig. 3b: steady-state gain and saturation against the noise std, with fits.")
@analysis_options
@click.option("--stds", metavar="LIST", default=None, help="Noise stds xi (default 0.5,1,2,5,10,20).")
@click.option("--base-std", metavar="X", default="0.01", show_default=True, help="Low-noise std before and after.")
@click.option("--pre", metavar="INT", default="200", show_default=True, help="Low-noise steps before.")
@click.option("--duration", metavar="INT", default="200", show_default=True, help="High-noise steps.")
@click.option("--post", metavar="INT", default="200", show_default=True, help="Low-noise steps after.")
@click.option("--window", metavar="INT", default="100", show_default=True, help="Last high-noise steps averaged.")
@click.option("--seeds", metavar="INT", default="3", show_default=True, help="Noise draws.")
@click.option("--channel", type=click.Choice(["drive", "input"]), default="drive", show_default=True,
              help="Noise on every neuron's pre-activation, or on the input.")
def gain_scaling_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, stds, base_std, pre,
                     duration, post, window, seeds, channel):
    """Fig. 3b: steady-state gain n_inf and saturation s_inf against the noise std, with a power-law
    and an exponential fit. (--steps, --task and --x64 are not used.)"""

    seed_v, exp, _, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("gain-scaling", exp, source, checkpoint, out, plot, quiet, seed=seed_v,
              base_std=number_option("--base-std", base_std), pre=int_option("--pre", pre),
              duration=int_option("--duration", duration), post=int_option("--post", post),
              window=int_option("--window", window), seeds=int_option("--seeds", seeds), channel=channel,
              **_given(stds=number_list("--stds", stds)))
    for xi, n, s in zip(ds["std"].values, ds.n_inf_mean.values, ds.s_inf_mean.values):
        click.echo(f"std {xi:<6g} n_inf {n:.5g}   s_inf {s:+.5g}")
    def seed_ci(name):
        if f"{name}_ci_low" not in ds:
            return ""
        return (f"; 95% CI over {ds.sizes['seed']} noise seeds [{float(ds[name + '_ci_low']):.4g}, "
                f"{float(ds[name + '_ci_high']):.4g}]")

    if "power_b" in ds:
        click.echo(f"power law  n_inf = {float(ds.power_a):.4g} * std^({float(ds.power_b):.4g} ± "
                   f"{float(ds.power_b_se):.2g} (1 SE of the fit: misfit, not seed spread){seed_ci('power_b')})"
                   f"   R² {float(ds.power_r2):.4f}")
    if "exp_k" in ds:
        click.echo(f"exponential s_inf = {float(ds.exp_c):.4g} + {float(ds.exp_a):.4g} * exp(({float(ds.exp_k):.4g} ± "
                   f"{float(ds.exp_k_se):.2g} (1 SE of the fit){seed_ci('exp_k')}) std)   R² {float(ds.exp_r2):.4f}")
    _done(ds)


@analyze.command("fractional-order", short_help="Fig. 4b-d: fractional order alpha of each neuron's step response.")
@analysis_options
@click.option("--drives", metavar="LIST", default="20", show_default=True, help="Step drive amplitudes xi.")
@click.option("--onset", metavar="INT", default="100", show_default=True, help="First driven step.")
@click.option("--duration", metavar="INT", default="100", show_default=True, help="Driven steps.")
@click.option("--isolated", is_flag=True, help="Keep only the diagonal of W_hh (isolated units, Fig. 4c).")
@click.option("--extension", type=click.Choice(["even", "periodic"]), default="even", show_default=True,
              help="Boundary handling of the FFT operator (periodic = the paper's plain FFT).")
def fractional_order_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, drives, onset, duration,
                         isolated, extension):
    """Fig. 4b-d: fractional order alpha of each neuron's response to a step drive (Eq. 16; alpha > 0:
    fractional differentiation, < 0: integration). --steps is the window length. (--x64 is not used.)"""

    seed_v, exp, task, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("fractional-order", exp, source, checkpoint, out, plot, quiet, seed=seed_v,
              task=task, steps=int_option("--steps", steps), onset=int_option("--onset", onset),
              duration=int_option("--duration", duration), isolated=isolated, extension=extension,
              drives=number_list("--drives", drives))
    for i, xi in enumerate(ds.drive.values):
        a = ds.alpha_hat[i]
        click.echo(f"xi = {xi:<6g} alpha of the mean response {float(ds.alpha_mean_response[i]):+.2f} "
                   f"(error {float(ds.error_mean_response[i]):.3f}); per neuron median {float(a.median()):+.2f}, "
                   f"range {float(a.min()):+.2f} – {float(a.max()):+.2f}, alpha > 0 for "
                   f"{100 * float(ds.fraction_positive[i]):.0f}%")
    _done(ds)


@analyze.command("gradient-by-position", short_help="Fig. 18: gradient norms by input position.")
@analysis_options
@click.option("--batch", metavar="INT", default="16", show_default=True, help="Held-out samples.")
def gradient_by_position_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, batch):
    """Fig. 18: gradient norms by input position (|dL/dx_t|, |dL/da_t|, W_hh contributions) on the
    task (--task, default: the model's). (--steps and --x64 are not used.)"""

    seed_v, exp, task, source = _prepare(unit, checkpoint, task_name, seed, sets)
    ds = run_analysis("gradient-by-position", exp, source, checkpoint, out, plot, quiet,
              seed=seed_v, task=task if task is not None else exp.task, batch=int_option("--batch", batch))
    for name in ("input_grad", "preact_grad", "w_hh_grad"):
        m = ds[f"{name}_mean"].values
        click.echo(f"{name:<12} mean over samples: first position {m[0]:.3g}, last {m[-1]:.3g}, "
                   f"max {m.max():.3g} at t = {int(m.argmax())}")
    click.echo(f"|dL/dW_hh| of the batch-mean loss, whole sequence: {float(ds.w_hh_grad_from[0]):.4g}")
    _done(ds)


@analyze.command("weight-eigs", short_help="Fig. 5e: eigenvalues of W_hh against the unit circle.")
@analysis_options
@click.option("--compare", "compare", multiple=True, type=click.Path(file_okay=False), metavar="RUN",
              help="Another trained run to overlay (repeatable), e.g. a non-adaptive network.")
def weight_eigs_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, compare):
    """Fig. 5e: eigenvalues of W_hh against the unit circle, with counts outside it.
    (--steps, --task and --x64 are not used.)"""
    from dynlab import experiment

    seed_v, exp, _, source = _prepare(unit, checkpoint, task_name, seed, sets)
    others = {str(run): experiment.load_run(run).model for run in compare}
    ds = run_analysis("weight-eigs", exp, source, checkpoint, out, plot, quiet, others=others,
              label=str(checkpoint) if checkpoint else exp.config["model"].get("unit", "aru"))
    for name in ds.matrix.values:
        sel = ds.sel(matrix=name)
        click.echo(f"{name}: spectral radius {float(sel.spectral_radius):.4f}, {int(sel.n_outside)} of "
                   f"{int(sel.n_eigenvalues)} eigenvalues outside the unit circle")
    _done(ds)
