"""What a sweep's numbers are read against: each cell's chance level and the values its task's
theory expects, as per-cell variables of the merged sweep, so that its figure draws them
([`dynlab.figures.sweep`][]) and ``dynlab plot sweep.nc`` draws them again.

- ``train_eval_<metric>_chance``: the held-out metric a model that learned nothing gets, as the
  cell's training recorded it (``chance`` and ``metric`` of its ``metrics.nc``: the flip-flop's
  sign accuracy 0.5, the adding problem's MSE 1/6).
- ``<analysis>_<variable>_expected``: the value the cell's task declares for a network that
  learned it ([`dynlab.tasks.base.Expected`][]: the flip-flop's $2^N$ stable fixed points), where
  the cell ran that analysis after training with the input the value is known for (its
  result's ``input`` attribute: the flip-flop's points at zero input).

NaN where a cell has none. Both end in a suffix of [`dynlab.figures.REFERENCE_SUFFIXES`][], which
the printed summary leaves out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from dynlab import store
from dynlab.errors import DynlabError
from dynlab.figures import CHANCE, EXPECTED

__all__ = ["references"]


def _attrs(path: Path) -> dict:
    """The global attributes of a result file (``{}`` if it is missing or unreadable)."""
    if not path.is_file():
        return {}
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return dict(ds.attrs)
    except (OSError, ValueError):
        return {}


def _expected(cell) -> tuple:
    """The cell's task's [`Expected`][dynlab.tasks.base.Expected] values (building the task only
    where its class declares some: a teacher's task is never trained here)."""
    from dynlab import registry
    from dynlab.tasks.base import Task

    task = dict(cell.config.get("task") or {})
    name = task.pop("name", None)
    try:
        cls = registry.get("task", name).obj if name else None
    except Exception:  # an unknown task was refused when the scenario was checked
        return ()
    if cls is None or getattr(cls, "expected", Task.expected) is Task.expected:
        return ()
    try:
        return registry.build("task", name, **task).expected()
    except DynlabError:  # a run taken as it is, whose config this version cannot build: nothing expected
        return ()


def references(scenario, cell_dirs: list[Path], held: list | None = None) -> dict[str, xr.DataArray]:
    """Name -> per-cell reference values over the sweep axes (module docstring), read from the
    cells' directories ``cell_dirs`` (in the order of ``scenario.cells``), or for a cell with
    ``held`` results ([`Held`][dynlab.scenarios.cell.Held]: computed by this sweep) from their attrs."""
    axes = scenario.axes
    shape = tuple(a.size for a in axes)
    coords = [[None] * a.size for a in axes]
    values: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}

    def put(name: str, index, value, source: str = "") -> None:
        values.setdefault(name, np.full(shape, np.nan))[index] = float(value)
        sources.setdefault(name, source)

    for cell, directory, results in zip(scenario.cells, cell_dirs, held or [None] * len(cell_dirs)):
        for i, axis in enumerate(axes):
            coords[i][cell.index[i]] = cell.coords[axis.name]
        directory = Path(directory)

        def attrs_of(name: str) -> dict:
            return results.attrs[name] if results is not None and name in results.attrs else _attrs(directory / name)

        trained = attrs_of(store.METRICS)
        if trained.get("metric") and np.isfinite(float(trained.get("chance", np.nan))):
            put(f"train_eval_{trained['metric']}{CHANCE}", cell.index, trained["chance"])
        ran = {entry["name"] for entry in cell.analyses}
        for expected in _expected(cell) if ran else ():
            if expected.analysis in ran and expected.applies(attrs_of(f"{expected.analysis}.nc")):
                put(f"{expected.analysis}_{expected.variable}{EXPECTED}", cell.index, expected.value,
                    expected.source)
    dims = [a.name for a in axes]
    return {name: xr.DataArray(v, dims=dims, coords={a.name: c for a, c in zip(axes, coords)},
                               attrs={"long_name": "chance level" if name.endswith(CHANCE) else
                                      "expected when the task is learned", "source": sources[name]})
            for name, v in values.items()}
