"""The ``dynlab`` command line.

Every user mistake is one line on stderr and exit status 2 (no traceback); a diverged training
run is one line and exit status 1, with its last good checkpoint and metrics kept on disk.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import click

from dynlab.errors import ConfigError, DivergenceError, DynlabError, NonFiniteResult

PLURALS = {"units": "unit", "rules": "rule", "tasks": "task", "analyses": "analysis", "scenarios": "scenario",
           "programs": "program", "losses": "loss", "models": "model"}


class _CommandGroup(click.Group):
    """A command group whose unknown-command message lists the valid commands."""

    def resolve_command(self, ctx, args):
        name = args[0] if args else None
        if name is not None and not name.startswith("-") and self.get_command(ctx, name) is None:
            valid = ", ".join(self.list_commands(ctx))
            raise ConfigError(f"unknown command {ctx.command_path} {name!r}; valid: {valid}")
        return super().resolve_command(ctx, args)


class _Group(_CommandGroup):
    """Turns every error into one line on stderr and a meaningful exit status.

    **Enforces** "no command ends in a traceback": user mistakes (:class:`DynlabError`, click's
    usage errors) exit 2, divergence and non-finite results exit 1 with the data kept, Ctrl-C
    exits 130, and anything unexpected is one line with the traceback saved to a file.
    """

    def main(self, args=None, prog_name=None, **extra):
        try:
            result = super().main(args=args, prog_name=prog_name or "dynlab", standalone_mode=False, **extra)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            hint = f" (see '{e.ctx.command_path} --help')" if getattr(e, "ctx", None) else ""
            click.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(2)
        except DynlabError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except DivergenceError as e:
            click.echo(f"diverged: {e}", err=True)
            sys.exit(1)
        except NonFiniteResult as e:
            click.echo(f"non-finite result: {e}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as e:  # a bug, not a user mistake: still one line, the traceback in a file
            if os.environ.get("DYNLAB_DEBUG"):
                raise
            click.echo(f"internal error: {type(e).__name__}: {_first_line(e)} "
                       f"(traceback in {_save_traceback()}; DYNLAB_DEBUG=1 shows it here)", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _save_traceback() -> str:
    """Write the current exception's traceback to a temporary file; return its path."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="dynlab-error-", suffix=".txt", delete=False) as f:
        f.write(traceback.format_exc())
    return f.name


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dynlab")
def main():
    """dynlab: recurrent units x learning rules x tasks x dynamical analyses, in JAX.

    \b
    Examples:
      dynlab list units
      dynlab train --model aru --task adding --steps 1500
      dynlab train --model rnn --task recall --set model.hidden=128 --set train.lr=1e-3
    """


@main.command("list")
@click.argument("kind", required=False)
def list_cmd(kind):
    """List registered plug-ins with one-line descriptions.

    KIND is one of: units, rules, tasks, analyses, scenarios, programs, losses, models (default: all).
    """
    import dynlab
    from dynlab import registry

    kinds = ["unit", "rule", "task", "analysis", "scenario", "program"] if kind is None else [PLURALS.get(kind, kind)]
    for k in kinds:
        if k not in dynlab.KINDS:
            raise ConfigError(f"unknown kind {kind!r}; valid: {', '.join(PLURALS)}")
        entries = registry.entries(k)
        if kind is None:
            click.echo(f"{next(p for p, s in PLURALS.items() if s == k)}:")
        width = max((len(e.name) for e in entries), default=0) + 2
        for e in entries:
            click.echo(f"  {e.name:<{width}}{e.description}")
        if not entries:
            click.echo("  (none yet)")


def progress_bar(quiet: bool, description: str):
    """A rich progress bar (steps, loss, metric, ETA) as a context manager yielding an update fn."""
    import contextlib

    if quiet:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    @contextlib.contextmanager
    def bar():
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            transient=False,
        ) as p:
            task = p.add_task(description, total=None, status="compiling…")

            def update(step, total, metrics):
                status = "  ".join(f"{k} {v:.4g}" for k, v in metrics.items())
                p.update(task, completed=step, total=total, status=status)

            yield update

    return bar()


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
    help="Data directory of tasks that read files (smnist, psmnist, shd, charlm; default: $DYNLAB_DATA, "
         "then ~/.cache/dynlab/data).")

@main.command()
@click.option("--model", "unit", default=None, help="Unit name (see 'dynlab list units'). Default: aru.")
@click.option("--task", default=None, help="Task name (see 'dynlab list tasks'). Default: adding.")
@click.option("--rule", default=None, help="Learning rule (see 'dynlab list rules'). Default: bptt.")
@click.option("--steps", metavar="INT", default=None, help="Optimiser steps (train.steps). Default: 1500.")
@click.option("--seed", metavar="INT", default=None, help="Seed of parameters and data. Default: 0.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Start from a TOML run config ([model], [task], [rule], [train], seed).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override any config key, e.g. --set model.hidden=128 --set train.lr=1e-3 (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory to create. Default: runs/train-<unit>-<task>-<time>.")
@click.option("--resume", type=click.Path(file_okay=False), default=None,
              help="Continue the run in this directory from its checkpoint (e.g. with a larger --steps).")
@data_dir_option
@click.option("-q", "--quiet", is_flag=True, help="No progress bar; print only the summary.")
def train(unit, task, rule, steps, seed, config_file, sets, out, resume, quiet):
    """Train a model with a learning rule on a task; write a run directory.

    The run directory gets config.toml, model.eqx, checkpoint.eqx, metrics.nc (training curves as
    an xarray Dataset) and learning_curve.png. Config keys: model.* (unit keys such as hidden,
    n_g, plus layers, encoder_size), task.*, rule.*, train.* (steps, batch_size, optimizer, lr,
    schedule, warmup, clip, weight_decay, eval_every, eval_size, log_every, checkpoint_every).
    """
    from dynlab import config as cfgmod
    from dynlab import experiment, store

    if resume:
        if config_file or unit or task or rule or out:
            raise ConfigError("--resume continues a run with its own config and directory: "
                              "drop --config/--model/--task/--rule/--out")
    else:
        config = cfgmod.load_toml(config_file) if config_file else experiment.default_config()
        for section, key, value in (("model", "unit", unit), ("task", "name", task), ("rule", "name", rule)):
            if value is not None:
                config.setdefault(section, {})[key] = value
    overrides = list(sets)
    if steps is not None:
        overrides.append(f"train.steps={steps}")
    if seed is not None:
        overrides.append(f"seed={seed}")
    # a resumed run keeps its model: --set model.* may not change the stored [model] section
    config = store.resume_config(resume, overrides) if resume else cfgmod.apply_sets(config, overrides)
    exp = experiment.build(config)
    if resume:
        run_dir = Path(resume)
    else:
        prefix = f"train-{exp.config['model'].get('unit', 'aru')}-{exp.config['task'].get('name', 'adding')}"
        run_dir = new_run_dir(out, prefix, config=exp.config)
    train_and_report(exp, run_dir, quiet, resume=bool(resume))


def new_run_dir(out: str | None, prefix: str, *, config: dict | None = None) -> Path:
    """``out``, or a fresh ``runs/<prefix>-<time>``, claimed atomically
    (:func:`dynlab.store.claim_run_dir`): a directory that holds a run, is claimed by another
    process or holds other files is a one-line error. With ``config``, its config.toml is written
    at once, so that a claimed run directory can be resumed from the start."""
    from dynlab import store

    run_dir = store.new_run_dir(prefix) if out is None else store.claim_run_dir(out)
    if config is not None:
        store.write_config(run_dir, config)
    return run_dir


def train_and_report(exp, run_dir: Path, quiet: bool, *, resume: bool = False, what: str = ""):
    """Train ``exp`` into ``run_dir`` with a progress bar; write the learning curve; print the summary."""
    from dynlab import experiment, figures, store
    from dynlab.train import train as run_training

    if not quiet:
        click.echo(f"{exp.config['model'].get('unit', experiment.DEFAULT_UNIT)}{what} "
                   f"({exp.model.param_count()['total']:,} parameters) on {exp.task.describe()}, "
                   f"rule {exp.config['rule'].get('name', experiment.DEFAULT_RULE)}, seed {exp.seed} -> {run_dir}")
    def resuming(step):
        if not quiet:
            click.echo(f"resuming {run_dir} from step {step} of {exp.train.steps}")

    with progress_bar(quiet, "train") as update:
        result = run_training(exp, run_dir, resume=resume, progress=update, on_resume=resuming)
    store.write_figure(run_dir / "learning_curve.png", figures.learning_curve(result.metrics))
    _summary(result)


def analysis_model(unit, checkpoint, task_name, sets):
    """The model to analyse: a trained one from ``checkpoint``, or a fresh one from the config.

    Returns ``(experiment, task or None, source description)``.
    """
    from dynlab import config as cfgmod
    from dynlab import experiment, registry

    if checkpoint:
        if any(s.split("=", 1)[0].startswith("model.") for s in sets):
            raise ConfigError("--checkpoint fixes the model: drop the --set model.* overrides")
        exp = experiment.load_run(checkpoint, unit=unit)
        exp = dataclasses.replace(exp, config=cfgmod.apply_sets(exp.config, sets))
        task = None
        if task_name is not None:
            stored = exp.config["task"]
            task = exp.task if stored.get("name", experiment.DEFAULT_TASK) == task_name else registry.build("task", task_name)
        return exp, task, f"checkpoint {checkpoint}"
    config = experiment.default_config(unit or experiment.DEFAULT_UNIT, task_name or experiment.DEFAULT_TASK)
    exp = experiment.build(cfgmod.apply_sets(config, sets))
    return exp, (exp.task if task_name else None), "a freshly initialised model (no --checkpoint)"


def output_paths(out, plot, checkpoint, name, unit, *, create: bool = True):
    """Where the dataset and figure go (never overwriting earlier results).

    With ``create=False`` nothing is made: the locations are only checked to be writable (see
    :func:`check_writable`), so that a result is never computed only to be lost.
    """
    from dynlab import store

    if out is not None:
        nc = Path(out)
        if nc.suffix != ".nc":
            raise ConfigError(f"--out must name a .nc file, got {out!r}")
        folder = nc.parent
    else:
        folder = Path(checkpoint) if checkpoint else (store.new_run_dir(f"analyze-{name}-{unit}") if create else Path("runs"))
    png = Path(plot) if plot else None
    if not create:
        for where, option in ((folder, "--out"), (None if png is None else png.parent, "--plot")):
            if where is not None:
                check_writable(where, option)
        return None, None
    folder.mkdir(parents=True, exist_ok=True)
    if out is None:
        nc, n = folder / f"{name}.nc", 1
        while nc.exists():
            n += 1
            nc = folder / f"{name}-{n}.nc"
    return nc, png or nc.with_suffix(".png")


def check_writable(folder: Path, option: str) -> None:
    """A one-line :class:`ConfigError` unless files can be created in ``folder`` (made if missing).

    Checked by creating (and removing) a temporary file in the nearest existing ancestor, which
    also catches read-only file systems and paths through a regular file.
    """
    import tempfile

    folder = Path(folder).absolute()
    ancestor = folder
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    try:
        if not ancestor.is_dir():
            raise NotADirectoryError(f"{ancestor} is not a directory")
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as e:
        reason = e.strerror or str(e)
        raise ConfigError(f"cannot write results under {str(folder)!r} ({reason}); choose another {option}") from None


def rescue_dataset(ds, name: str, error: OSError) -> None:
    """Save a computed dataset that could not be written where asked into the temporary
    directory, then raise a one-line error naming both places (a result is never lost silently)."""
    import tempfile

    from dynlab import store
    from dynlab.errors import DataError

    path = Path(tempfile.mkdtemp(prefix=f"dynlab-{name}-")) / f"{name}.nc"
    store.write_dataset(path, ds)
    raise DataError(f"could not write the result ({error.strerror or error}); it was saved to {path}") from None


def busy(quiet: bool, what: str):
    import contextlib

    if quiet:
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(f"{what} (compiling and running)…")


@main.group(cls=_CommandGroup)
def analyze():
    """Run an analysis on a fresh or trained model; write a labelled netCDF dataset and a figure."""


_COMMON = [
    click.option("--model", "unit", default=None, help="Unit name (default: aru, or the checkpoint's unit)."),
    click.option("--checkpoint", type=click.Path(file_okay=False), default=None,
                 help="Run directory of a trained model (from 'dynlab train'). Without it, a fresh model."),
    click.option("--task", "task_name", default=None, help="Drive the dynamics with this task's inputs."),
    click.option("--steps", metavar="INT", default="2000", show_default=True, help="Steps per trajectory."),
    click.option("--seed", metavar="INT", default="0", show_default=True, help="Seed (model init, inputs, ICs)."),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override config keys (model.*, task.*)."),
    click.option("--out", type=click.Path(dir_okay=False), default=None,
                 help="Dataset file (.nc). Default: <analysis>.nc in the checkpoint's run directory, or a new one."),
    click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Figure file (.png). Default: next to --out."),
    click.option("--x64", is_flag=True, help="Compute in float64."),
    click.option("-q", "--quiet", is_flag=True, help="No spinner; print only the summary."),
    data_dir_option,
]


def _options(options: list):
    """One decorator applying a list of click options in order."""

    def apply(f):
        for option in reversed(options):
            f = option(f)
        return f

    return apply


analysis_options = _options(_COMMON)


def int_option(name, text, **bounds):
    """An integer option (``--steps``, ``--k``, …): :func:`dynlab.config.parse_number`."""
    from dynlab.config import parse_number

    return parse_number(name, text, integer=True, **bounds)


def seed_option(text) -> int:
    """``--seed``: an integer in [0, 2^32 - 1]."""
    from dynlab.config import SEED_RANGE

    return int_option("--seed", text, minimum=SEED_RANGE[0], maximum=SEED_RANGE[1])


@analyze.command("lyapunov")
@analysis_options
@click.option("--k", "k", metavar="INT", default="16", show_default=True, help="Number of exponents (1..state dim).")
@click.option("--burn-in", metavar="INT", default="500", show_default=True, help="Steps not accumulated.")
@click.option("--drive", metavar="XI", default=None, help="Constant drive xi added to every neuron (zero input).")
@click.option("--ics", metavar="INT", default="5", show_default=True, help="Initial conditions (for CIs).")
@click.option("--reortho-every", metavar="INT", default="1", show_default=True, help="Steps between QR steps.")
def lyapunov_cmd(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, k, burn_in, drive, ics,
                 reortho_every):
    """Lyapunov spectrum of a model's full state map (QR method), with CIs over initial conditions.

    Protocols: autonomous (zero input, the default), --drive XI (constant drive on every
    neuron), or --task NAME (the task's input sequence; non-autonomous exponents).
    """
    from dynlab.analyses.model_dynamics import lyapunov_analysis
    import numpy as np

    seed_v = seed_option(seed)
    options = dict(k=int_option("--k", k, minimum=1), steps=int_option("--steps", steps, minimum=1),
                   burn_in=int_option("--burn-in", burn_in, minimum=0), ics=int_option("--ics", ics, minimum=1),
                   reortho_every=int_option("--reortho-every", reortho_every, minimum=1))
    exp, task, source = analysis_model(unit, checkpoint, task_name, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))
    from dynlab import figures

    ds = run_analysis("lyapunov", lyapunov_analysis, figures.lyapunov_spectrum, exp, source, checkpoint, out, plot, quiet,
                       drive=number_option("--drive", drive), task=task, seed=seed_v, x64=x64, **options)
    _lyapunov_table(ds)
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
    from dynlab.analyses.model_dynamics import spectra_analysis

    seed_v = seed_option(seed)
    options = dict(steps=int_option("--steps", steps, minimum=1), burn_in=int_option("--burn-in", burn_in, minimum=0),
                   n_boot=int_option("--n-boot", n_boot, minimum=0), every=int_option("--every", every, minimum=1))
    exp, task, source = analysis_model(unit, checkpoint, task_name, list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))
    from dynlab import figures

    ds = run_analysis("spectra", spectra_analysis, figures.spectra, exp, source, checkpoint, out, plot, quiet,
                       task=task if task is not None else exp.task, drive=number_option("--drive", drive), seed=seed_v,
                       x64=x64, **options)
    click.echo(f"spectral radius of recurrent matrices: " + ", ".join(
        f"{m} {float(r):.4f}" for m, r in zip(ds.matrix.values, ds.weight_spectral_radius.values)))
    rho = ds.jacobian_spectral_radius.values
    click.echo(f"state Jacobian: spectral radius {rho.mean():.4f} (range {rho.min():.4f}–{rho.max():.4f}), "
               f"largest singular value {float(ds.jacobian_singular_values[:, 0].mean()):.4f} (mean over {rho.size} samples)")
    if "covariance_alpha" in ds:
        click.echo(f"activity covariance: alpha {float(ds.covariance_alpha):.3f} "
                   f"[{float(ds.covariance_alpha_ci_low):.3f}, {float(ds.covariance_alpha_ci_high):.3f}] (R² "
                   f"{float(ds.covariance_power_law_r2):.3f}); truncated power law alpha "
                   f"{float(ds.covariance_truncated_alpha):.3f}, n_c {float(ds.covariance_truncated_n_c):.3g}; "
                   f"participation ratio {float(ds.covariance_participation_ratio):.2f}")
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")


def number_option(name, text, **bounds):
    """A finite number option (``--drive``, …); ``None`` when not given: :func:`dynlab.config.parse_number`."""
    from dynlab.config import parse_number

    return parse_number(name, text, **bounds)


def run_analysis(name, function, figure, exp, source, checkpoint, out, plot, quiet, **options):
    """Run ``function(exp.model, **options)``, label the dataset, write it and ``figure(ds)``.

    Warnings become one-line messages on stderr. The output locations are checked to be
    writable before any work; files are written only after the analysis succeeded (named
    ``NAME.nc``/``NAME.png``, see :func:`output_paths`). A dataset that cannot be written where
    asked is saved in the temporary directory instead (:func:`rescue_dataset`). A figure that
    cannot be drawn because the result holds NaN or inf ends the command with
    :class:`~dynlab.errors.NonFiniteResult` (exit status 1), the dataset kept.
    """
    import warnings

    from dynlab import store
    from dynlab.config import dumps

    unit_name = exp.config["model"].get("unit", "aru")
    output_paths(out, plot, checkpoint, name, unit_name, create=False)
    if not quiet:
        click.echo(f"{name} of {source}: {unit_name}, {exp.model.param_count()['total']:,} parameters")
    with busy(quiet, name), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = function(exp.model, **options)
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    ds.attrs.update(model=unit_name, config=dumps(exp.config), checkpoint=str(checkpoint or ""), source=source,
                    dynlab_version=__import__("dynlab").__version__)
    try:
        nc, png = output_paths(out, plot, checkpoint, name, unit_name)  # only now: a failed analysis leaves nothing
        store.write_dataset(nc, ds)
    except OSError as e:
        rescue_dataset(ds, name, e)
    ds.attrs.update(path=str(nc), figure=str(png))
    draw_figure(png, figure, ds)
    return ds


def non_finite_variables(ds) -> list[str]:
    """Names of the float data variables of ``ds`` that hold NaN or inf."""
    import numpy as np

    return [str(k) for k, v in ds.data_vars.items() if v.dtype.kind in "fc" and not np.isfinite(v.values).all()]


def draw_figure(png: Path, figure, ds) -> None:
    """Write ``figure(ds)`` to ``png``; if it fails on a result holding NaN or inf, raise
    :class:`~dynlab.errors.NonFiniteResult` naming those variables (the dataset is already on disk)."""
    from dynlab import store

    try:
        fig = figure(ds)
    except Exception:
        bad = non_finite_variables(ds)
        if not bad:
            raise
        where = ds.attrs.get("path", "")
        raise NonFiniteResult(f"{', '.join(bad)} {'holds' if len(bad) == 1 else 'hold'} NaN or inf, so no figure was drawn; "
                              f"the dataset is kept{' in ' + where if where else ''}") from None
    store.write_figure(png, fig)


def _lyapunov_table(ds, show: int = 12):
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Lyapunov exponents per step — {ds.attrs['protocol']}, "
                        f"{ds.attrs['n_ic']} initial conditions, state dim {ds.attrs['state_dim']}")
    table.add_column("i", justify="right")
    table.add_column("mean λ_i", justify="right")
    table.add_column(f"{int(100 * ds.attrs['confidence'])}% CI", justify="right")
    k = ds.sizes["exponent"]
    for i in range(min(k, show)):
        table.add_row(str(i + 1), f"{float(ds['mean'][i]):+.5f}",
                      f"[{float(ds.ci_low[i]):+.5f}, {float(ds.ci_high[i]):+.5f}]")
    if k > show:
        table.add_row("…", f"({k - show} more in the dataset)", "")
    console = Console(width=100)
    console.print(table)
    console.print(
        f"largest {float(ds.largest_mean):+.5f}   sum of positive {float(ds.positive_sum_mean):.5f}   "
        f"Kaplan–Yorke dim {float(ds.ky_dimension_mean):.3f}   positive {float(ds.n_positive_mean):.1f}   "
        f"near-zero {float(ds.n_zero_mean):.1f}   (sum over the k={k} computed: {float(ds['mean'].sum()):+.5f})"
        + ("   [lower bounds: not all exponents computed]" if k < ds.attrs["state_dim"] else "")
    )


def _run_scenario(target, sets, out, workers, scheduler, resume, retry_failed, quiet) -> int:
    """Run a scenario; the exit status: 0 when every cell is ok, 1 when any failed, diverged or is missing.

    A run directory created here (no ``--out``) that is still empty (but for its claim) when the
    run stops, say because the scheduler could not be reached, is removed.
    """
    from dynlab import config as cfgmod
    from dynlab import store
    from dynlab.scenarios import spec
    from dynlab.scenarios.sweep import RESULT, run_sweep

    scenario = spec.load(target)
    if sets:  # overrides apply to the base config; the sweep axes still vary their keys
        doc = cfgmod.load_toml(scenario.source)
        scenario = spec.parse(cfgmod.apply_sets(doc, sets), scenario.source)
    workers_v = None if workers is None else int_option("--workers", workers)
    if workers_v is not None:
        from dynlab.errors import require_positive

        require_positive("--workers", workers_v)
    if workers_v is not None and scheduler is not None:
        raise ConfigError("use either --workers or --scheduler, not both")
    if isinstance(scenario, spec.Program) and (workers_v is not None or scheduler is not None or resume):
        raise ConfigError(f"scenario {scenario.name} is a programmed scenario (program {scenario.program}); "
                          "--workers, --scheduler and --resume apply to sweeps only")
    runs_existed = Path("runs").is_dir()
    created = None if out else store.new_run_dir(f"run-{scenario.name}")
    out_dir = Path(out) if out else created
    try:
        if isinstance(scenario, spec.Program):
            if not quiet:
                click.echo(f"scenario {scenario.name}: program {scenario.program} -> {out_dir}")
            with _steps_bar(quiet, scenario.name) as update:
                datasets = scenario.run(out_dir, progress=update)
            click.echo(f"done: {', '.join(sorted(datasets))}; results and figures in {out_dir}")
            return 0
        n = len(scenario.cells)
        if not quiet:
            where = scheduler or (f"{workers_v} local worker processes" if workers_v else "in-process")
            click.echo(f"scenario {scenario.name}: {n} cell{'s' * (n != 1)} on {where} -> {out_dir}")
        with _cells_bar(quiet, n) as update:
            merged = run_sweep(scenario, out_dir, workers=workers_v, scheduler=scheduler, resume=bool(resume),
                               retry_failed=retry_failed, progress=update)
    except BaseException:
        claim = getattr(store, "CLAIM", None)  # the claim file new_run_dir puts in a fresh run directory
        if created is not None and created.is_dir() and all(f.name == claim for f in created.iterdir()):
            for f in created.iterdir():
                f.unlink()
            created.rmdir()
            if not runs_existed and not any(created.parent.iterdir()):
                created.parent.rmdir()
        raise
    statuses = merged["status"].values.ravel().tolist()
    counts = {k: statuses.count(k) for k in ("ok", "diverged", "failed", "missing") if statuses.count(k)}
    click.echo(f"done: {', '.join(f'{v} {k}' for k, v in counts.items())}; merged dataset: {out_dir / RESULT}")
    from dynlab import figures

    store.write_figure(out_dir / "sweep.png", figures.plot_dataset(merged))
    click.echo(f"figure: {out_dir / 'sweep.png'}")
    bad = {k: v for k, v in counts.items() if k != "ok"}
    if bad:  # a sweep with cells that did not finish ok is not a success
        click.echo(f"incomplete: {', '.join(f'{v} {k}' for k, v in bad.items())} of {n} cell{'s' * (n != 1)} "
                   f"(status and message in {out_dir / RESULT}; --resume recomputes missing cells, "
                   "--resume --retry-failed also failed ones)", err=True)
        return 1
    return 0


def _cells_bar(quiet: bool, total: int):
    """The sweep's progress bar: ``update(done, total, failures)``."""
    import contextlib

    if quiet:
        return contextlib.nullcontext(None)

    @contextlib.contextmanager
    def bar():
        with _steps_bar(False, "cells") as update:
            update(0, total)
            yield lambda done, n, failures: update(done, n, {"failures": failures})

    return bar()


def _steps_bar(quiet: bool, name: str):
    """A progress bar whose ``update(done, total, info)`` shows a dict of short fields beside it."""
    import contextlib

    if quiet:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    @contextlib.contextmanager
    def bar():
        with Progress(TextColumn(f"[bold]{name}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()) as p:
            task = p.add_task(name, total=None, info="")

            def update(done, total, info=None):
                text = "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in (info or {}).items())
                p.update(task, completed=done, total=total, info=text)

            yield update

    return bar()


_SWEEP_OPTIONS = [
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override base config keys (repeatable)."),
    click.option("--out", type=click.Path(file_okay=False), default=None,
                 help="Output directory. Default: runs/run-<scenario>-<time>."),
    click.option("--workers", metavar="INT", default=None, help="Run cells on a local Dask cluster of N processes."),
    click.option("--scheduler", metavar="ADDRESS", default=None,
                 help="Run cells on an existing Dask scheduler (e.g. one started by dask-jobqueue); "
                      "one that does not answer within 10 s is an error."),
    click.option("--resume", is_flag=True,
                 help="Continue the sweep in --out (the same scenario only): finished cells are skipped."),
    click.option("--retry-failed", is_flag=True, help="With --resume, also recompute failed cells."),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar."),
    data_dir_option,
]


_sweep_options = _options(_SWEEP_OPTIONS)


@main.command()
@click.argument("scenario")
@_sweep_options
def run(scenario, sets, out, workers, scheduler, resume, retry_failed, quiet):
    """Run a scenario: a built-in name (see 'dynlab list scenarios') or a TOML file.

    Every cell (one per combination of the [sweep] axes; one if there is no sweep) trains its
    model and runs its [[analyses]]; the merged dataset sweep.nc has the sweep axes as dims and
    a status variable (ok / diverged / failed). The whole file is validated before any work.
    Exit status 0 when every cell is ok, 1 when any failed or diverged (one line on stderr), 2 for
    a mistake in the scenario or the options.
    """
    if resume and not out:
        raise ConfigError("--resume needs --out DIR, the directory of the sweep to continue")
    return _run_scenario(scenario, sets, out, workers, scheduler, resume, retry_failed, quiet)


@main.command()
@click.argument("scenario")
@_sweep_options
def sweep(scenario, sets, out, workers, scheduler, resume, retry_failed, quiet):
    """Run a scenario's sweep on Dask; the same as 'dynlab run', named for the sweep use.

    \b
    On a SLURM/PBS cluster, start a scheduler with dask-jobqueue, e.g.
      from dask_jobqueue import SLURMCluster
      cluster = SLURMCluster(cores=2, memory="8GB"); cluster.scale(jobs=20)
      print(cluster.scheduler_address)
    and pass that address with --scheduler.
    """
    if resume and not out:
        raise ConfigError("--resume needs --out DIR, the directory of the sweep to continue")
    return _run_scenario(scenario, sets, out, workers, scheduler, resume, retry_failed, quiet)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Figure file. Default: FILE with .png.")
def plot(file, out):
    """Draw the figure that fits a result file (.nc): training curves, Lyapunov spectrum, spectra,
    sweep, or a generic plot of its variables."""
    import xarray as xr

    from dynlab import figures, store
    from dynlab.errors import DataError

    path = Path(file)
    if not path.is_file():
        raise DataError(f"no result file {file!r}")
    try:
        ds = xr.load_dataset(path, engine="h5netcdf")
    except Exception as e:
        raise DataError(f"{file!r} is not a readable netCDF result file ({type(e).__name__})") from None
    png = Path(out) if out else path.with_suffix(".png")
    check_writable(png.parent, "--out")

    def figure(ds):
        try:
            return figures.plot_dataset(ds)
        except (KeyError, AttributeError, IndexError, ValueError) as e:
            if non_finite_variables(ds):
                raise  # draw_figure reports the NaN/inf result
            kind = ds.attrs.get("analysis", "(none)")
            click.echo(f"warning: {file} lacks what the {kind!r} figure needs ({type(e).__name__}: {_first_line(e)}); "
                       "drew the generic figure of its variables", err=True)
            return figures.generic(ds)

    ds.attrs["path"] = str(path)
    draw_figure(png, figure, ds)
    click.echo(f"figure: {png}")


def _summary(result):
    ds = result.metrics
    metric = ds.attrs["metric"]
    final = ds[f"eval_{metric}"].values[-1]
    first = ds[f"eval_{metric}"].values[0]
    click.echo(
        f"done: {result.steps_done} steps in {result.seconds:.1f} s; held-out {metric} {final:.4g} "
        f"(at step 0: {first:.4g}, chance {ds.attrs['chance']:.4g}); final batch loss {ds.loss.values[-1]:.4g}\n"
        f"run directory: {result.run_dir}  (metrics.nc, model.eqx, learning_curve.png)"
    )


# Commands that live in their own modules register themselves on the groups above.
from dynlab import cli_trw  # noqa: E402,F401
from dynlab import cli_aru  # noqa: E402,F401
from dynlab import cli_perturb  # noqa: E402,F401
from dynlab import cli_transfer  # noqa: E402,F401
from dynlab.cli_compare import compare  # noqa: E402

main.add_command(compare)

if __name__ == "__main__":
    main()
