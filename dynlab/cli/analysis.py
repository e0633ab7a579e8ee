"""What every ``dynlab analyze`` command shares: the model to analyse, where results go (checked
before any work), running an analysis, writing its dataset and drawing its figure."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from dynlab.errors import ConfigError, NonFiniteResult
from dynlab.cli.options import busy, overwrite_given


def analysis_model(unit, checkpoint, task_name, sets):
    """The model to analyse and where it came from, ``(experiment, source description)``: a
    trained one from ``checkpoint``, or a fresh one from the config of ``unit`` on ``task_name``
    (default: ``aru`` on ``adding``, the defaults of [`dynlab.experiment.default_config`][])."""
    from dynlab import config as cfgmod
    from dynlab import experiment

    if checkpoint:
        if any(s.split("=", 1)[0].startswith("model.") for s in sets):
            raise ConfigError("--checkpoint fixes the model: drop the --set model.* overrides")
        exp = experiment.load_run(checkpoint, unit=unit)
        return dataclasses.replace(exp, config=cfgmod.apply_sets(exp.config, sets)), f"checkpoint {checkpoint}"
    config = experiment.default_config(unit or experiment.DEFAULT_UNIT, task_name or experiment.DEFAULT_TASK)
    exp = experiment.build(cfgmod.apply_sets(config, sets), training=False)  # analysed, not trained
    from dynlab.api import FRESH_SOURCE

    return exp, FRESH_SOURCE


def output_paths(out, plot, checkpoint, name, unit, *, create: bool = True):
    """Where the dataset and figure go: ``(nc, png)``.

    ``--out`` (a ``.nc`` file) with the figure at ``--plot`` or next to it (``.png``); without
    ``--out``, ``NAME.nc`` in the checkpoint's run directory (the first of ``NAME.nc``,
    ``NAME-2.nc``, … that is free, with its figure), or in a new run directory under ``runs/``.

    With ``create=False`` nothing is made (``nc`` is ``None`` when a new run directory would
    hold it): the paths are checked ([`check_outputs`][]: nothing that exists is replaced
    without ``--overwrite``, a run's own files never; the folders writable), so that a result
    is never computed only to be lost.
    """
    from dynlab import store

    if out is not None:
        nc = dataset_file(out)
        folder = nc.parent
    else:
        folder = Path(checkpoint) if checkpoint else (store.new_run_dir(f"analyze-{name}-{unit}") if create else None)
        nc, n = (None, 1) if folder is None else (folder / f"{name}.nc", 1)
        while nc is not None and (nc.exists() or (plot is None and nc.with_suffix(".png").exists())):
            n += 1
            nc = folder / f"{name}-{n}.nc"
    png = Path(plot) if plot else None if nc is None else nc.with_suffix(".png")
    if not create:
        check_outputs([("--out", nc), ("--plot" if plot else "--out", png)])
        if folder is None:
            store.check_writable(Path("runs"), "--out")
        return nc, png
    folder.mkdir(parents=True, exist_ok=True)
    return nc, png


def dataset_file(out: str) -> Path:
    """``--out`` as the path of a dataset: a ``.nc`` file, else a one-line [`ConfigError`][]."""
    if Path(out).suffix != ".nc":
        raise ConfigError(f"--out must name a .nc file, got {out!r}")
    return Path(out)


def check_outputs(outputs, *, reading=()) -> None:
    """The one check of a command's output files, before any work: ``outputs`` are
    ``(option, path)`` pairs (``path`` ``None``: not known yet), ``reading`` the files the command reads.

    Nothing that exists is replaced unless the command was given ``--overwrite``
    ([`dynlab.cli.options.overwrite_given`][]), a run's or sweep's own files never, and each
    folder must be writable ([`dynlab.store.check_outputs`][], [`dynlab.store.check_writable`][]):
    a one-line [`ConfigError`][] naming the option otherwise.
    """
    from dynlab import store
    from dynlab.cli.options import overwrite_given

    store.check_outputs(outputs, overwrite=overwrite_given(), reading=reading)
    for option, path in outputs:
        if path is not None:
            store.check_writable(Path(path).parent, option)


def run_analysis(name, exp, source, checkpoint, out, plot, quiet, **options):
    """Run the registered analysis ``name`` on ``exp.model`` with ``options``, stamp the dataset
    with what was analysed ([`dynlab.provenance.stamp`][]: the model, its config as TOML text,
    the checkpoint), write it and draw its registered figure ([`save_result`][]).

    Warnings become one-line messages on stderr. The output locations are checked to be
    writable before any work; files are written only after the analysis succeeded (named
    ``NAME.nc``/``NAME.png``, see [`output_paths`][]).
    """
    from dynlab import budget, registry
    from dynlab.api import stamped
    from dynlab.variants import describe_run

    entry = drawable(name)
    unit_name = exp.config["model"].get("unit", "aru")
    output_paths(out, plot, checkpoint, name, unit_name, create=False)
    budget.check_analysis(name, exp.model, {**registry.defaults(entry.obj), **options})  # before any work
    if not quiet:
        click.echo(f"{name} of {source}: {unit_name}, {exp.model.param_count()['total']:,} parameters")
    ds = computed(name, quiet, entry.obj, *((exp.model, exp.rules) if entry.takes == "rules" else (exp.model,)),
                  **options)
    variant = describe_run(exp.config, checkpoint) if checkpoint else ""
    if variant:  # e.g. an isolated network at chance: say that it was not retrained
        click.echo(f"note: {checkpoint}: {variant}")
    ds = stamped(ds, name, exp, checkpoint=checkpoint or "")  # the stamp of dynlab.analyze too
    return save_result(ds, name, out, plot, checkpoint, unit_name)


def run_on_runs(name, runs, out, plot, quiet, groups=None, **options):
    """Run the registered analysis ``name`` of several run directories (``takes="runs"``, e.g.
    ``dsa``) on ``runs``, write its dataset (default: ``NAME.nc`` in a new run directory) and
    draw its figure, as [`run_analysis`][] does for one model. ``groups``: each run's group, whose
    means and permutation tests the dataset gets as a study's does
    ([`dynlab.scenarios.across.grouped`][])."""
    from dynlab.scenarios.across import grouped

    entry = drawable(name)
    output_paths(out, plot, None, name, "runs", create=False)
    if not quiet:
        click.echo(f"{name} of {len(runs)} runs: " + ", ".join(str(r) for r in runs))
    ds = computed(name, quiet, entry.obj, runs, **options)
    if groups is not None and "run" in ds.dims:
        ds = grouped(ds, [str(label) for label in ds["run"].values], list(groups))
    return save_result(ds, name, out, plot, None, "runs")


def drawable(name):
    """The registry entry of the analysis ``name``; a one-line [`PluginError`][dynlab.errors.PluginError]
    when it has no figure (every built-in analysis has one; a plug-in's may not)."""
    from dynlab import registry

    entry = registry.get("analysis", name)
    if entry.figure is None:
        from dynlab.errors import PluginError

        raise PluginError(f"analysis {name!r} was registered without a figure, so its result cannot be drawn; "
                          f"its plug-in must register it with figure=... (nothing was computed)")
    return entry


def computed(name, quiet, function, *arguments, **options):
    """``function(*arguments, **options)`` under the spinner, its warnings as one line each on stderr."""
    import warnings

    with busy(quiet, name), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = function(*arguments, **options)
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    return ds


def save_result(ds, name, out, plot, checkpoint, unit_name):
    """Write the dataset of the analysis ``name`` where [`output_paths`][] says (over an existing
    file only under ``--overwrite``) and draw its registered figure ([`draw_figure`][]); the paths
    go into ``ds.attrs`` (``path``, ``figure``). A dataset that cannot be written where asked is
    saved in the temporary directory instead ([`dynlab.store.rescue_dataset`][]). A figure that cannot be
    drawn because the result holds NaN or inf ends the command with
    [`NonFiniteResult`][dynlab.errors.NonFiniteResult] (exit status 1), the dataset kept."""
    from dynlab import registry, store

    try:
        nc, png = output_paths(out, plot, checkpoint, name, unit_name)  # only now: a failed analysis leaves nothing
        store.write_dataset(nc, ds, replace=overwrite_given())  # a file that appeared meanwhile is kept
    except OSError as e:
        store.rescue_dataset(ds, name, e)
    ds.attrs.update(path=str(nc), figure=str(png))
    draw_figure(png, registry.get("analysis", name).figure, ds)
    return ds


def draw_figure(png: Path, figure, ds) -> None:
    """Write ``figure(ds)`` to ``png``; if it fails on a result holding NaN or inf, raise
    [`NonFiniteResult`][dynlab.errors.NonFiniteResult] naming those variables (the dataset is already on disk)."""
    from dynlab.figures import non_finite_variables, with_note

    try:
        fig = with_note(figure(ds), ds.attrs.get("variant"))
    except Exception:
        bad = non_finite_variables(ds)
        if not bad:
            raise
        where = ds.attrs.get("path", "")
        raise NonFiniteResult(f"{', '.join(bad)} {'holds' if len(bad) == 1 else 'hold'} NaN or inf, so no figure was drawn; "
                              f"the dataset is kept{' in ' + where if where else ''}") from None
    write_figure(png, fig)


def write_figure(png: Path, fig) -> None:
    """Write the figure of a command's result to ``png``, over an existing file only under
    ``--overwrite`` ([`dynlab.cli.options.overwrite_given`][]): a file that appeared while the
    result was computed is kept, and the one-line error says how to draw the figure elsewhere."""
    from dynlab import store

    try:
        store.write_figure(png, fig, replace=overwrite_given())
    except FileExistsError:
        raise ConfigError(f"{str(png)!r} appeared while the result was computed and was kept; the figure was not "
                          "drawn: draw it elsewhere with 'dynlab plot RESULT --out FILE'") from None
