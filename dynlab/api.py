r"""dynlab from Python: the command line's twin, for notebooks and scripts.

Each function does what one command does, with the same defaults, the same checks and the same
results, as values instead of files:

| Python | command line |
|---|---|
| `dynlab.model("gru", task="flipflop", hidden=64)` | the fresh model of `dynlab analyze NAME --model gru --task flipflop --set model.hidden=64` |
| `dynlab.fit("gru", task="flipflop", steps=500, out="runs/g")` | `dynlab train --model gru --task flipflop --steps 500 --out runs/g` |
| `dynlab.load("runs/g")` | `--checkpoint runs/g` |
| `dynlab.analyze("lyapunov", run, qr={"k": 8})` | `dynlab analyze lyapunov --checkpoint runs/g --qr k=8` (its `lyapunov.nc`) |
| `dynlab.Study.load("compare-units").run(out="runs/cu", workers=2)` | `dynlab run compare-units --out runs/cu --workers 2` |
| `dynlab.plot(ds)` | `dynlab plot FILE` |

An analysis's options are given as a scenario's `[[analyses]]` entry gives them: TOML-like values
(`qr={"k": 8}`, `input="autonomous"`, `input={"task": "train"}`) or the option groups' own values
([`dynlab.analyses.protocol`][]). They are checked where they are given, with the same one-line
[`ConfigError`][dynlab.errors.ConfigError] the command prints, before any work.

`analyze` returns the dataset `dynlab analyze` writes, stamped with the same provenance (the
model's config as TOML text, the checkpoint, the source); it writes nothing. A model loaded under
`jax.config.update("jax_enable_x64", True)` holds float64 arrays whatever precision it was trained
in, so its analyses run in float64 ([`dynlab.store.load_model_arrays`][]).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynlab.errors import ConfigError

if TYPE_CHECKING:  # importing dynlab stays free of xarray and JAX until a function is called
    import xarray as xr

__all__ = ["Study", "StudyResult", "analyze", "fit", "load", "model", "plot"]

FRESH_SOURCE = "a freshly initialised model (no --checkpoint)"
"""How a dataset's ``source`` names a model that was not loaded from a run."""


def load(run_dir: str | os.PathLike):
    """The run in ``run_dir`` (a `dynlab train` or `dynlab import` directory): its
    [`Experiment`][dynlab.experiment.Experiment] with the trained model, its task and rules, and ``path``.

    The arrays are checksum-verified and read into the model its ``config.toml`` builds; a file whose
    arrays do not fit that model is a one-line [`CheckpointError`][dynlab.errors.CheckpointError]
    naming the first array that differs and how.
    """
    from dynlab import experiment

    return experiment.load_run(run_dir)


def model(unit: str = "aru", *, task: str | dict = "adding", seed: int = 0, width: int | None = None,
          rule: str | list[str] = "bptt", **keys: Any):
    """A freshly initialised model of ``unit`` for ``task``, as a run config builds it: its
    [`Experiment`][dynlab.experiment.Experiment] (``.model``, ``.task``, ``.config``).

    Args:
        unit: a unit name (`dynlab.names("unit")`).
        task: the task it is built for (its input and output sizes; `dynlab.names("task")`), or its
            whole ``[task]`` table (``{"name": "adding", "length": 20}``).
        seed: the seed of its initial weights.
        width: the unit-neutral width ([`dynlab.experiment.sized_section`][]), or ``None`` for the unit's own keys.
        rule: the rule named in its config (`dynlab.names("rule")`), or a list of rules that analyses
            comparing rules compare (``["pc-time", "bptt"]``).
        **keys: the unit's and the model's own config keys (``hidden=64``, ``layers=2``); a key that
            names a section (``task={"length": 20}``, ``train={...}``) sets keys of that section.
    """
    from dynlab import experiment

    return experiment.build(_config(unit, task, rule, seed, width, keys), training=False)


def fit(unit: str = "aru", *, task: str | dict = "adding", rule: str = "bptt", steps: int | None = None, seed: int = 0,
          width: int | None = None, out: str | os.PathLike | None = None, progress: bool = True, **keys: Any):
    """Train ``unit`` on ``task`` with ``rule`` into the run directory ``out`` (default:
    ``runs/train-<unit>-<task>-<time>``), as `dynlab train` does; return the trained run ([`load`][]).
    (Named ``fit``: ``dynlab.train`` is the trainer's module, [`dynlab.train`][].)

    Args:
        unit, task, rule, seed, width, **keys: as for [`model`][]; ``train={"lr": 1e-3}`` sets training keys.
        steps: optimiser steps (``train.steps``); ``None`` takes the default.
        out: the run directory to create; one that holds anything is refused.
        progress: show the progress bar.
    """
    from dynlab import experiment, store
    from dynlab.cli.train import train_and_report

    if steps is not None:
        keys = {**keys, "train": {**keys.get("train", {}), "steps": steps}}
    exp = experiment.build(_config(unit, task, rule, seed, width, keys))
    run_dir = store.claim_output(None if out is None else str(out), f"train-{unit}-{exp.config['task']['name']}", config=exp.config)
    train_and_report(exp, run_dir, quiet=not progress)
    return load(run_dir)


def _config(unit, task, rule, seed, width, keys) -> dict:
    """The run config of [`model`][]/[`fit`][]: section tables in ``keys`` set their sections' keys,
    every other key is a model key."""
    from dynlab import config as cfgmod
    from dynlab import experiment

    if isinstance(task, dict):  # task={"name": "adding", "length": 20}: the whole section
        keys = {**keys, "task": task}
        task = task.get("name", experiment.DEFAULT_TASK)
    sections = {k: v for k, v in keys.items() if k in cfgmod.SECTIONS}
    for section, value in sections.items():
        if not isinstance(value, dict):
            raise ConfigError(f"{section} must be a table of {section} keys, e.g. {section}={{...}}; got {value!r}")
    model_keys = {k: v for k, v in keys.items() if k not in sections}
    if width is not None:
        model_keys["width"] = width
    config = experiment.default_config(unit, task, rule, seed)
    for section, value in {"model": model_keys, **sections}.items():
        config[section] = {**config.get(section, {}), **value}
    return config


def analyze(name: str, target, **options: Any) -> xr.Dataset:
    """Run the registered analysis ``name`` and return its dataset, the one `dynlab analyze NAME`
    writes for the same model and options (nothing is written here).

    Args:
        name: a registered analysis (`dynlab.names("analysis")`).
        target: a run directory or a loaded run ([`load`][]), a fresh model ([`model`][]); for an
            analysis of several runs (``dsa``), a list of run directories.
        **options: the analysis's options, as in a scenario's ``[[analyses]]`` entry; ``task = "train"``
            is the model's own task.
    """
    from dynlab import budget, registry
    from dynlab.experiment import Experiment, initial_model
    from dynlab.scenarios.spec import _check_analysis, analysis_options

    entry = registry.get("analysis", name)
    checked = _check_analysis({"name": name, **options})
    if entry.takes == "runs":
        runs = [Path(r) for r in target] if isinstance(target, (list, tuple)) else None
        if runs is None or len(runs) < 2:
            raise ConfigError(f"{name} compares at least 2 run directories: give a list of them")
        return entry.obj(runs, **analysis_options(checked))
    exp = target if isinstance(target, Experiment) else load(target)
    resolved = analysis_options(checked, exp.task, exp.seed, functools.partial(initial_model, exp))
    budget.check_analysis(name, exp.model, {**registry.defaults(entry.obj), **resolved})  # before any work
    arguments = (exp.model, exp.rules) if entry.takes == "rules" else (exp.model,)
    return stamped(entry.obj(*arguments, **resolved), name, exp)


def stamped(ds: xr.Dataset, name: str, exp, *, checkpoint: str | os.PathLike | None = None) -> xr.Dataset:
    """``ds`` stamped with what was analysed ([`dynlab.provenance.stamp`][]): the model's unit, its config as
    TOML text, the checkpoint it was loaded from (``exp.path``, or ``checkpoint``) and the source, and a
    note on a variant run ([`dynlab.variants.describe_run`][]). The one stamp of `dynlab analyze` and
    [`analyze`][]."""
    from dynlab.config import dumps
    from dynlab.provenance import stamp
    from dynlab.variants import describe_run

    checkpoint = checkpoint if checkpoint is not None else getattr(exp, "path", None)
    unit_name = exp.config["model"].get("unit", "aru")
    source = f"checkpoint {checkpoint}" if checkpoint else FRESH_SOURCE
    variant = describe_run(exp.config, checkpoint) if checkpoint else ""
    return stamp(ds, analysis=ds.attrs.get("analysis", name), config={
        "model": unit_name, "config": dumps(exp.config), "checkpoint": str(checkpoint or ""), "source": source,
        **({"variant": variant} if variant else {})})


def plot(data: xr.Dataset | str | os.PathLike):
    """The figure `dynlab plot` draws for a dataset (or a ``.nc`` file): the one its analysis
    registered, a sweep's panels, a run's learning curve. Returns the matplotlib figure."""
    from dynlab import budget, figures

    ds = budget.load_result(Path(data)) if isinstance(data, (str, os.PathLike)) else data
    return figures.plot_dataset(ds)


@dataclasses.dataclass(frozen=True)
class StudyResult:
    """What a study wrote, as values: ``sweep`` (the merged cells, ``sweep.nc``), ``across`` (each
    analysis across cells by name, e.g. ``dsa``), ``findings`` (its claims' verdicts, or ``None``)."""

    path: Path
    sweep: xr.Dataset
    across: dict[str, xr.Dataset]
    findings: xr.Dataset | None


@dataclasses.dataclass(frozen=True)
class Study:
    """A study (a scenario file or a built-in scenario), checked whole when loaded."""

    scenario: Any

    @classmethod
    def load(cls, name_or_path: str | os.PathLike, *, preset: str | None = None, sets=()) -> "Study":
        """A built-in study by name (`dynlab.names("scenario")`, `dynlab list scenarios`) or a TOML
        file, at ``preset``, with ``sets`` overrides (``["train.steps=20"]``) as ``--set`` gives them."""
        from dynlab.scenarios import spec

        scenario = spec.load(str(name_or_path), preset=preset, sets=tuple(sets))
        if isinstance(scenario, spec.Program):
            raise ConfigError(f"{scenario.name} is a programmed scenario (program {scenario.program}); run it with "
                              f"'dynlab run {scenario.name}' or 'dynlab reproduce'")
        return cls(scenario)

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def cells(self) -> list:
        """Its cells, one per combination of the sweep's axes."""
        return list(self.scenario.cells)

    def run(self, out: str | os.PathLike, *, workers: int | None = None, resume: bool = False) -> StudyResult:
        """Run every cell (on ``workers`` local Dask processes; ``None``: in this process), then the
        analyses across cells and the claims, into ``out``, as `dynlab run` does; ``resume``
        continues a sweep in ``out``, keeping its finished cells."""
        import xarray as xr

        from dynlab import figures, store
        from dynlab.scenarios.sweep import FINDINGS, run_sweep

        out = Path(out)
        sweep = run_sweep(self.scenario, out, workers=workers, resume=resume)
        store.write_figure(out / "sweep.png", figures.plot_dataset(sweep))
        across = {e["name"]: xr.load_dataset(out / f"{e['name']}.nc", engine="h5netcdf")
                  for e in self.scenario.across if (out / f"{e['name']}.nc").is_file()}
        findings = xr.load_dataset(out / FINDINGS, engine="h5netcdf") if (out / FINDINGS).is_file() else None
        return StudyResult(out, sweep, across, findings)
