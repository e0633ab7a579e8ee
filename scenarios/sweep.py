r"""Sweeps: every cell of a scenario on Dask, resumable, merged into one dataset.

Execution is on ``dask.distributed``: in-process by default (one worker thread in this process),
a ``LocalCluster`` of ``workers`` processes, or an existing scheduler by address (on HPC, start
one with ``dask-jobqueue``, e.g. ``SLURMCluster(...).scale(jobs=10)``, and pass its address).

Cells are keyed by a hash of their config, so a re-run finds finished cells by content, not by
position: with ``resume=True`` every cell whose marker is intact is skipped (its files are not
touched), partial or corrupt cells are recomputed, and failed cells are retried only with
``retry_failed=True``. A cell's numbers depend only on its config (seed included), so the merged
dataset does not depend on the worker, the order, or on interruptions.

A sweep directory holds ``scenario.toml`` (the file as given) and ``scenario.sha256`` (the digest
of the validated scenario, [`digest`][dynlab.scenarios.spec.Scenario.digest]); ``resume=True``
continues only a sweep of the same scenario ([`check_out_dir`][]). An interrupted sweep (Ctrl-C)
writes ``.interrupted`` before its Dask client closes, so that the cells in flight, which then
fail because of the shutdown, are not recorded as failed ([`dynlab.scenarios.cell.interrupted`][]);
a resume removes it. With ``scheduler``, the directory is created only once the scheduler has
answered ([`connect`][]).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import numpy as np
import xarray as xr

from dynlab import config as cfgmod
from dynlab import store
from dynlab.errors import ConfigError
from dynlab.provenance import stamp
from dynlab.scenarios.cell import cell_summary, read_marker, run_cell, run_cells_vmapped
from dynlab.scenarios.spec import Cell, Scenario

SCENARIO = "scenario.toml"
DIGEST = "scenario.sha256"
STOP = ".interrupted"
RESULT = "sweep.nc"
CONNECT_TIMEOUT = "10s"


def connect(address: str):
    """A ``dask.distributed.Client`` of the scheduler at ``address``.

    Enforces: a scheduler that cannot be reached (wrong host or port, nothing listening, a
    malformed address) is a one-line [`ConfigError`][] after at most ``CONNECT_TIMEOUT``,
    never a traceback.
    """
    from dask.distributed import Client

    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    # MemoryError, OverflowError, KeyError: a server that answers garbage (a frame of 6 EiB)
    except (OSError, TimeoutError, ValueError, TypeError, AssertionError, MemoryError, OverflowError, KeyError) as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(
            f"cannot reach a Dask scheduler at {address!r} ({reason}); start one ('dask scheduler', or "
            "dask-jobqueue on a cluster) and pass its address, e.g. --scheduler tcp://HOST:8786"
        ) from None


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None):
    """A ``dask.distributed.Client``: existing scheduler, local processes, or in-process."""
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        client = connect(scheduler)
        try:
            yield client
        finally:
            client.close()
        return
    # The scheduler's HTTP server on a free local port: not 0.0.0.0:8787, which warns when taken.
    local = dict(threads_per_worker=1, dashboard_address="127.0.0.1:0")
    if workers is not None:
        cluster = LocalCluster(n_workers=workers, processes=True, **local)
    else:
        cluster = LocalCluster(n_workers=1, processes=False, **local)
    with cluster, Client(cluster) as client:
        yield client


def cell_dir(out_dir: Path, cell: Cell) -> Path:
    return Path(out_dir) / "cells" / cell.key


def pending_cells(scenario: Scenario, out_dir: Path, *, resume: bool, retry_failed: bool) -> list[Cell]:
    todo = []
    for cell in scenario.cells:
        marker = read_marker(cell_dir(out_dir, cell)) if resume else None
        if marker is None or (retry_failed and marker["status"] == "failed"):
            todo.append(cell)
    return todo


def _stored_digest(out_dir: Path) -> str | None:
    """The digest of the scenario a sweep directory was started with (``None`` if unknown)."""
    digest = out_dir / DIGEST
    if digest.is_file():
        return digest.read_text().strip()
    try:  # a sweep started before digests were stored: the digest of its scenario.toml
        from dynlab.scenarios.spec import parse

        return parse(cfgmod.load_toml(out_dir / SCENARIO), str(out_dir / SCENARIO)).digest
    except Exception:
        return None


def check_out_dir(scenario: Scenario, out_dir: Path, *, resume: bool) -> None:
    """Check, without writing anything, that ``out_dir`` may take this sweep.

    Enforces: a new sweep never mixes with an existing one, and ``resume`` continues only a sweep
    of the same validated scenario (same [`Scenario.digest`][]: base config, analyses, axes,
    ``--set`` overrides included), so another scenario cannot replace its results.
    """
    out_dir = Path(out_dir)
    existing = out_dir / SCENARIO
    if existing.exists() and not resume:
        raise ConfigError(f"{str(out_dir)!r} already holds a sweep; re-run with --resume, or choose another --out")
    if resume and not existing.exists():
        raise ConfigError(f"nothing to resume in {str(out_dir)!r}: it holds no {SCENARIO}")
    if resume and _stored_digest(out_dir) != scenario.digest:
        raise ConfigError(
            f"{str(out_dir)!r} holds a sweep of another scenario than {scenario.source} (base config, analyses or "
            "sweep axes differ, --set overrides included); resume it with the scenario that started it, "
            "or choose another --out"
        )


def prepare(scenario: Scenario, out_dir: Path, *, resume: bool) -> None:
    """Create ``out_dir`` for a new sweep, or check that it holds this scenario to resume."""
    out_dir = Path(out_dir)
    check_out_dir(scenario, out_dir, resume=resume)
    text = Path(scenario.source).read_text() if Path(scenario.source).is_file() else ""
    (out_dir / "cells").mkdir(parents=True, exist_ok=True)
    (out_dir / STOP).unlink(missing_ok=True)
    if not (out_dir / DIGEST).exists():  # before scenario.toml: a sweep with one has the other
        store.atomic_write(out_dir / DIGEST, lambda p: p.write_text(scenario.digest + "\n"))
    if not (out_dir / SCENARIO).exists():
        store.atomic_write(out_dir / SCENARIO, lambda p: p.write_text(text))


def run_sweep(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    progress: Callable[[int, int, int], None] | None = None,
) -> xr.Dataset:
    """Run every unfinished cell, then merge all cells into ``out_dir/sweep.nc`` and return it.

    ``progress(done, total, failures)`` is called as cells finish (skipped cells count as done).
    Nothing is written before the Dask cluster or scheduler is up.
    """
    from dask.distributed import as_completed

    out_dir = Path(out_dir)
    check_out_dir(scenario, out_dir, resume=resume)
    cells = scenario.cells
    todo = pending_cells(scenario, out_dir, resume=resume, retry_failed=retry_failed)
    done, failures = len(cells) - len(todo), 0
    if progress:
        progress(done, len(cells), failures)
    if not todo:
        prepare(scenario, out_dir, resume=resume)
    else:
        with dask_client(workers, scheduler) as client:
            prepare(scenario, out_dir, resume=resume)
            stop = str(out_dir / STOP)
            try:
                futures = []
                for group in _groups(todo, scenario.vmap_seeds):
                    if len(group) == 1:
                        c = group[0]
                        futures.append(client.submit(
                            run_cell, str(cell_dir(out_dir, c)), c.config, c.analyses, stop, key=f"cell-{c.key}",
                            pure=False,
                        ))
                    else:
                        futures.append(client.submit(
                            run_cells_vmapped, [str(cell_dir(out_dir, c)) for c in group],
                            [c.config for c in group], group[0].analyses, stop, key=f"cells-{group[0].key}",
                            pure=False,
                        ))
                for future in as_completed(futures):
                    result = future.result()
                    for info in result if isinstance(result, list) else [result]:
                        done += 1
                        failures += info["status"] != "ok"
                    if progress:
                        progress(done, len(cells), failures)
            except BaseException:
                # Ctrl-C (or any error here): say so before the client closes, so that the cells in
                # flight, which fail as it closes, are not recorded as failed (cell.interrupted).
                Path(stop).touch()
                raise
    merged = merge(scenario, out_dir)
    store.write_dataset(out_dir / RESULT, merged)
    return merged


def _groups(cells: list[Cell], vmap_seeds: bool) -> list[list[Cell]]:
    """Cells to run together: with ``vmap_seeds``, those whose configs differ only in ``seed``."""
    if not vmap_seeds:
        return [[c] for c in cells]
    from dynlab.config import dumps

    groups: dict[str, list[Cell]] = {}
    for c in cells:
        groups.setdefault(dumps({**c.config, "seed": 0}), []).append(c)
    return list(groups.values())


def _nan_like(ds: xr.Dataset) -> xr.Dataset:
    return ds.map(lambda v: xr.full_like(v, np.nan, dtype=float) if v.dtype.kind in "fiub" else v)


def merge(scenario: Scenario, out_dir: Path) -> xr.Dataset:
    """One dataset over the sweep axes: every cell's results plus its ``status`` and ``message``."""
    cells = scenario.cells
    infos = [read_marker(cell_dir(out_dir, c)) for c in cells]
    summaries = [
        cell_summary(cell_dir(out_dir, c), c.analyses) if info and info["status"] == "ok" else None
        for c, info in zip(cells, infos)
    ]
    template = next((s for s in summaries if s is not None), xr.Dataset())
    per_cell = []
    for cell, info, summary in zip(cells, infos, summaries):
        ds = summary if summary is not None else _nan_like(template)
        status = "missing" if info is None else info["status"]
        ds = ds.assign(status=((), status), message=((), "" if info is None else info["message"]))
        ds = ds.expand_dims({axis.name: [cell.coords[axis.name]] for axis in scenario.axes})
        per_cell.append(ds)
    if scenario.axes:
        shape = [a.size for a in scenario.axes]
        nested = np.empty(shape, dtype=object)
        for cell, ds in zip(cells, per_cell):
            nested[cell.index] = ds
        merged = xr.combine_nested(
            nested.tolist(), concat_dim=[a.name for a in scenario.axes], join="outer", combine_attrs="drop",
            data_vars="all", coords="different", compat="no_conflicts",
        )
        for axis in scenario.axes:
            if len(axis.values) > 1:  # a zipped axis: its keys become coordinates along it
                merged = merged.assign_coords({k: (axis.name, v) for k, v in axis.values.items()})
    else:
        merged = per_cell[0]
    merged["status"].attrs["long_name"] = "cell status: ok, diverged, failed or missing"
    return stamp(merged, analysis="sweep", config=dict(
        scenario=scenario.name,
        description=scenario.description,
        scenario_toml=Path(out_dir, SCENARIO).read_text() if Path(out_dir, SCENARIO).is_file() else "",
        n_cells=len(cells),
        n_ok=sum(1 for i in infos if i and i["status"] == "ok"),
    ))
