"""``dynlab analyze dsa RUN_DIR RUN_DIR ...``: dynamical similarity between trained runs
(registered on ``dynlab.cli.analyze``; the analysis is [`dynlab.analyses.dsa`][])."""

from __future__ import annotations

from pathlib import Path

import click

from dynlab.cli.analysis import draw_figure, output_paths, rescue_dataset
from dynlab.cli.analyze import analyze
from dynlab.cli.options import (busy, data_dir_option, int_option, number_option, overwrite_given, overwrite_option,
                                seed_option)
from dynlab.errors import ConfigError


def run_directories(given, roots) -> list[Path]:
    """The RUN_DIR arguments, then every run directory (one holding ``config.toml`` and
    ``model.eqx``) under each ``--runs`` folder, sorted; each directory once."""
    runs = [Path(r) for r in given]
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise ConfigError(f"--runs {str(root)!r} is not a directory")
        found = sorted(p.parent for p in root.rglob("model.eqx") if (p.parent / "config.toml").is_file())
        if not found:
            raise ConfigError(f"--runs {str(root)!r} holds no run directory (a folder with config.toml and model.eqx)")
        runs += found
    unique = list(dict.fromkeys(r.resolve() for r in runs))
    return [Path(r) for r in unique] if len(unique) < len(runs) else runs


@analyze.command("dsa", short_help="Dynamical similarity (DSA) between trained runs: a distance matrix.")
@click.argument("run_dirs", nargs=-1, metavar="RUN_DIR...")
@click.option("--runs", "roots", multiple=True, metavar="DIR",
              help="Also every run directory under DIR (repeatable), e.g. a sweep's output.")
@click.option("--task", "task_name", default=None,
              help="Drive every model with this task's inputs (default: the runs' common task).")
@click.option("--trials", metavar="INT", default="16", show_default=True, help="Test samples of the task driving every model.")
@click.option("--delays", metavar="INT", default="10", show_default=True, help="Delays of the embedding (n_delays).")
@click.option("--delay-interval", metavar="INT", default="1", show_default=True, help="Steps between delays.")
@click.option("--rank", metavar="INT", default="10", show_default=True, help="Rank r of the HAVOK-DMD operator.")
@click.option("--pcs", metavar="INT|all", default="16", show_default=True,
              help="Principal components of each model's state observed ('all': every component).")
@click.option("--ridge", metavar="X", default="0", show_default=True, help="Ridge lambda of the operator's least squares.")
@click.option("--iterations", metavar="INT", default="2000", show_default=True,
              help="Most Riemannian steps per restart of the orthogonal alignment.")
@click.option("--restarts", metavar="INT", default="4", show_default=True, help="Starting points of the alignment.")
@click.option("--tol", metavar="X", default="1e-6", show_default=True,
              help="Stop a restart when the Riemannian gradient norm is below this.")
@click.option("--null-draws", metavar="INT", default=None,
              help="Input draws of its own per run, in pairs: the run's distances from itself between the two "
                   "draws of each pair are its null (even; default: the analysis's; 0: no null, no verdicts).")
@click.option("--seed", metavar="INT", default="0", show_default=True, help="Seed of the input samples and restarts.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Dataset file (.nc). Default: dsa.nc in a new directory under runs/.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Figure file (.png). Default: next to --out.")
@overwrite_option
@click.option("-q", "--quiet", is_flag=True, help="No spinner; print only the summary.")
@data_dir_option
def dsa_cmd(run_dirs, roots, task_name, trials, delays, delay_interval, rank, pcs, ridge, iterations, restarts, tol,
            null_draws, seed, out, plot, quiet):
    """Dynamical similarity analysis (Ostrow et al. 2023) between the trained models of run
    directories (from 'dynlab train'; unit x rule x seed): each model is driven by the same task
    inputs, its state's top principal components are delay-embedded, a rank-r linear operator is
    fitted (HAVOK DMD), and every pair of operators is compared up to an orthogonal change of
    coordinates (Procrustes over vector fields, Riemannian descent on O(r)). Each run is also
    driven by draws of its own inputs: its distances from itself between them are the null, and a
    pair is called distinguishable only when its distance is beyond both runs' null. Writes the
    distance matrix (radians), the null and the verdicts, the optimiser's convergence report and a
    heat map whose colour scale is centred at the null.

    The runs must share a task (the [task] of their config.toml), or --task must give inputs
    every model reads.
    """
    from dynlab import registry, store
    from dynlab.analyses.dsa import dsa_analysis, dsa_summary

    runs = run_directories(run_dirs, roots)
    if len(runs) < 2:
        raise ConfigError(f"DSA compares at least 2 run directories (RUN_DIR arguments or --runs DIR), got {len(runs)}")
    options = dict(
        trials=int_option("--trials", trials, minimum=1), n_delays=int_option("--delays", delays, minimum=1),
        delay_interval=int_option("--delay-interval", delay_interval, minimum=1), rank=int_option("--rank", rank, minimum=1),
        pcs=None if str(pcs).strip() == "all" else int_option("--pcs", pcs, minimum=1),
        ridge=number_option("--ridge", ridge, minimum=0), iterations=int_option("--iterations", iterations, minimum=1),
        restarts=int_option("--restarts", restarts, minimum=1), tol=number_option("--tol", tol, minimum=0),
        seed=seed_option(seed))
    if null_draws is not None:  # else the analysis's default
        options["null_draws"] = int_option("--null-draws", null_draws, minimum=0)
    output_paths(out, plot, None, "dsa", "runs", create=False)  # checked before any work
    task = None if task_name is None else registry.build("task", task_name)
    if not quiet:
        click.echo(f"dsa of {len(runs)} runs: " + ", ".join(str(r) for r in runs))
    with busy(quiet, "dsa"):
        ds = dsa_analysis(runs, task=task, **options)
    try:
        nc, png = output_paths(out, plot, None, "dsa", "runs")
        store.write_dataset(nc, ds, replace=overwrite_given())  # a file that appeared meanwhile is kept
    except OSError as e:
        rescue_dataset(ds, "dsa", e)
    ds.attrs.update(path=str(nc), figure=str(png))
    draw_figure(png, registry.get("analysis", "dsa").figure, ds)
    click.echo(dsa_summary(ds))
    click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")
