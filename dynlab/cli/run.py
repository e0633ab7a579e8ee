"""``dynlab run`` and ``dynlab sweep``: a scenario file or built-in scenario, its cells on Dask."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from dynlab.errors import ConfigError
from dynlab.cli.main import main
from dynlab.cli.options import _options, data_dir_option, int_option, progress_bar


def _run_scenario(target, sets, out, workers, scheduler, resume, retry_failed, quiet, preset=None) -> int:
    """Run a scenario; the exit status: 0 when every cell is ok, 1 when any failed, diverged or is missing.

    A programmed scenario claims its ``--out`` ([`dynlab.store.claim_run_dir`][]): a directory
    that holds anything (an earlier run's results included) is refused with one line, never
    written over. A directory claimed here that still holds nothing but its claim when the run
    stops (a refused program, a scheduler that could not be reached) is removed
    ([`dynlab.store.released_on_failure`][]).
    """
    from dynlab import registry, store
    from dynlab.scenarios import spec
    from dynlab.scenarios.sweep import run_sweep

    if resume and not out:
        raise ConfigError("--resume needs --out DIR, the directory of the sweep to continue")
    # the preset, then the overrides, apply to the base config; the sweep axes still vary their keys
    workers_v = _workers(workers)
    scenario = spec.load(target, preset=preset, sets=sets)
    if workers_v is not None and scheduler is not None:
        raise ConfigError("use either --workers or --scheduler, not both")
    if isinstance(scenario, spec.Program) and (workers_v is not None or scheduler is not None or resume):
        raise ConfigError(f"scenario {scenario.name} is a programmed scenario (program {scenario.program}); "
                          "--workers, --scheduler and --resume apply to sweeps only")
    program = isinstance(scenario, spec.Program)
    if out and not program:  # a sweep's --out may hold the sweep to --resume: the sweep checks it
        out_dir, claimed = Path(out), contextlib.nullcontext()
    else:  # a directory claimed here: a second run into one --out is refused; one left empty goes again
        out_dir = store.claim_output(out or None, f"run-{scenario.name}")
        claimed = store.released_on_failure(out_dir)
    with claimed:
        if program:
            if not quiet:
                click.echo(f"scenario {scenario.name}: program {scenario.program} -> {out_dir}")
            with progress_bar(quiet, scenario.name) as update:
                datasets = scenario.run(out_dir, progress=update)
            summary = registry.get("program", scenario.program).summary  # what the program registered to print
            text = summary(datasets) if summary is not None else ""
            if text:
                click.echo(text)
            if "findings" in datasets:
                from dynlab.claims import format_verdicts

                click.echo(format_verdicts(datasets["findings"]))
            click.echo(f"done: {', '.join(sorted(datasets))}; results and figures in {out_dir}")
            return 0
        n = len(scenario.cells)
        if not quiet:
            where = scheduler or (f"{workers_v} local worker processes" if workers_v else "in-process")
            click.echo(f"scenario {scenario.name}: {n} cell{'s' * (n != 1)} on {where} -> {out_dir}")
        with _cells_bar(quiet, n) as update:
            merged = run_sweep(scenario, out_dir, workers=workers_v, scheduler=scheduler, resume=bool(resume),
                               retry_failed=retry_failed, progress=update)
    from dynlab import figures
    from dynlab.scenarios.summary import sweep_report

    lines, incomplete = sweep_report(scenario, out_dir, merged)
    store.write_figure(out_dir / "sweep.png", figures.plot_dataset(merged))
    for line in lines:  # results, on stdout; the one line on stderr says the sweep is incomplete
        click.echo(line)
    if incomplete:  # a sweep with results that did not finish ok is not a success
        click.echo(incomplete, err=True)
        return 1
    return 0


def _workers(text) -> int | None:
    """``--workers``: an integer from 1 to the cores this process may use.

    **Enforces** "workers are capped at the cores, naming the cap": more worker processes than
    cores only compete for them (and a thousand would exhaust the machine).
    """
    from dynlab.budget import cores as available

    if text is None:
        return None
    cores = available()
    value = int_option("--workers", text, minimum=1)
    if value > cores:
        raise ConfigError(f"--workers {value} is more than the {cores} core{'s' * (cores != 1)} this process may use; "
                          f"give --workers 1 to {cores}")
    return value


def _cells_bar(quiet: bool, total: int):
    """The sweep's progress bar: ``update(done, total, failures)``."""
    if quiet:
        return contextlib.nullcontext(None)

    @contextlib.contextmanager
    def bar():
        with progress_bar(False, "cells") as update:
            update(0, total)
            yield lambda done, n, failures: update(done, n, {"failures": failures})

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
    click.option("--preset", metavar="NAME", default=None,
                 help="The scenario's preset: 'laptop' (default, the file as written) or one of its [presets.NAME], "
                      "e.g. 'paper' (the paper's sizes, for a GPU; see 'dynlab reproduce --list') or 'full'."),
    click.option("-q", "--quiet", is_flag=True, help="No progress bar."),
    data_dir_option,
]


_sweep_options = _options(_SWEEP_OPTIONS)


@main.command()
@click.argument("scenario")
@_sweep_options
def run(scenario, sets, out, workers, scheduler, resume, retry_failed, preset, quiet):
    """Run a scenario: a built-in name (see 'dynlab list scenarios') or a TOML file.

    Every cell (one per combination of the [sweep] axes; one if there is no sweep) trains its
    model and runs its [[analyses]]; the merged dataset sweep.nc has the sweep axes as dims and
    a status variable (ok / diverged / failed). The whole file is validated before any work.
    Exit status 0 when every cell is ok, 1 when any failed or diverged (one line on stderr), 2 for
    a mistake in the scenario or the options.
    """
    return _run_scenario(scenario, sets, out, workers, scheduler, resume, retry_failed, quiet, preset)


@main.command()
@click.argument("scenario")
@_sweep_options
def sweep(scenario, sets, out, workers, scheduler, resume, retry_failed, preset, quiet):
    """Run a scenario's sweep on Dask; the same as 'dynlab run', named for the sweep use.

    \b
    On a SLURM/PBS cluster, start a scheduler with dask-jobqueue, e.g.
      from dask_jobqueue import SLURMCluster
      cluster = SLURMCluster(cores=2, memory="8GB"); cluster.scale(jobs=20)
      print(cluster.scheduler_address)
    and pass that address with --scheduler.
    """
    return _run_scenario(scenario, sets, out, workers, scheduler, resume, retry_failed, quiet, preset)
