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

**One writer.** A sweep directory is written by one process at a time: ``sweep.lock``
([`writer_lock`][]) is held for the whole sweep, and a second writer is refused with one line
naming the holder's pid (two simultaneous ``--resume`` end with one complete dataset and one
refusal). **A finished sweep is never rerun over:** ``dynlab run`` into a directory that holds a
sweep, without ``--resume``, is refused with one line and changes no file; ``--resume`` with the
same scenario continues it (and, when it is complete, only merges it again).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Callable

import numpy as np
import xarray as xr

from dynlab import config as cfgmod
from dynlab import store
from dynlab.errors import ConfigError
from dynlab.provenance import stamp
from dynlab.scenarios.references import references
from dynlab.scenarios.cell import SUMMARY, cell_summary, read_marker, run_cell, run_cells_vmapped, run_external
from dynlab.scenarios.spec import Cell, Scenario, coordinate_of, results_of

SCENARIO = "scenario.toml"
DIGEST = "scenario.sha256"
STOP = ".interrupted"
RESULT = "sweep.nc"
FINDINGS = "findings.nc"
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
    # silence_logs: a cell's error is dynlab's to report (the cell's status, or one line when it stops
    # the sweep, e.g. a full disk); Dask's "Compute Failed" block with the traceback came before it.
    local = dict(threads_per_worker=1, dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
    if workers is not None:
        cluster = LocalCluster(n_workers=workers, processes=True, **local)
    else:
        cluster = LocalCluster(n_workers=1, processes=False, **local)
    with cluster, Client(cluster) as client, _quiet_workers():
        yield client


@contextlib.contextmanager
def _quiet_workers():
    """The in-process worker's loggers at CRITICAL while the block runs (``silence_logs`` sets only
    the handlers Dask installed, which a host application may have replaced), restored after."""
    loggers = [logging.getLogger(n) for n in ("distributed.worker", "distributed.worker.state_machine")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def cell_dir(out_dir: Path, cell: Cell) -> Path:
    return Path(out_dir) / "cells" / cell.key


def model_dir(out_dir: Path, cell: Cell) -> Path:
    """The run directory of a cell's model: its cell directory, or the run it takes as it is
    (``[[runs]]``), which the sweep reads and never writes."""
    return Path(cell.run.path) if cell.run is not None else cell_dir(out_dir, cell)


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

    Enforces: a new sweep never mixes with an existing one or with a run (a directory holding a
    run's files, [`dynlab.store.RUN_FILES`][], as ``dynlab import`` refuses it), and ``resume`` continues only a sweep
    of the same validated scenario (same [`Scenario.digest`][]: base config, analyses, axes,
    ``--set`` overrides included), so another scenario cannot replace its results.
    """
    out_dir = Path(out_dir)
    existing = out_dir / SCENARIO
    # a claim alone is the directory this command claimed for the sweep (no --out): not a run's files
    held = sorted(n for n in store.RUN_FILES - {store.CLAIM} if (out_dir / n).exists())
    if held and not existing.exists():  # a training or imported run: a sweep's files never go beside its own
        raise ConfigError(f"{str(out_dir)!r} already holds a run ({', '.join(held[:3])}); a sweep writes into a new or "
                          "empty directory: choose another --out")
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


LOCK = "sweep.lock"


@contextlib.contextmanager
def writer_lock(out_dir: Path):
    """Hold the sweep directory's lock (`filelock.FileLock` on ``out_dir/sweep.lock``, the kernel's
    ``flock``) while the block runs.

    Enforces: one writer per sweep directory. A second ``dynlab run`` (``--resume`` or not) of a
    directory whose lock is held is refused at once with one line naming the holder's pid
    ([`ConfigError`][]), before it reads or writes any cell, so two resumes never recompute (and
    delete) each other's cells. The lock is the kernel's: it ends with its process, even one that is
    killed, and the file (which then names a pid that is gone) stays for the next writer.
    """
    import os

    from filelock import FileLock, Timeout

    path = Path(out_dir) / LOCK
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        try:
            holder = path.read_text(errors="replace").strip()[:64] or "unknown"
        except OSError:
            holder = "unknown"
        raise ConfigError(
            f"{str(out_dir)!r} is being written by another dynlab run (pid {holder}, holding {LOCK}); "
            "wait for it to finish, then re-run with --resume to continue it"
        ) from None
    try:
        path.write_text(f"{os.getpid()}\n")  # another descriptor: the lock, held by filelock's, stays
        yield
    finally:
        lock.release()


def prepare(scenario: Scenario, out_dir: Path, *, resume: bool, lock: contextlib.ExitStack) -> None:
    """Create ``out_dir`` for a new sweep and take its lock into ``lock`` (unless held already),
    checking again under the lock that the directory may take this sweep; or check that it holds
    this scenario to resume."""
    out_dir = Path(out_dir)
    check_out_dir(scenario, out_dir, resume=resume)
    text = Path(scenario.source).read_text() if Path(scenario.source).is_file() else ""
    (out_dir / "cells").mkdir(parents=True, exist_ok=True)
    if not resume:  # a new sweep: locked only now that its directory exists; another may have started
        lock.enter_context(writer_lock(out_dir))
        check_out_dir(scenario, out_dir, resume=resume)
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
    """Run every unfinished cell, then merge all cells into ``out_dir/sweep.nc`` and return it; then
    run the analyses across cells ([`dynlab.scenarios.across.run_across`][]; their status:
    [`dynlab.scenarios.across.read_records`][]).

    ``progress(done, total, failures)`` is called as cells finish (skipped cells count as done).
    Nothing is written before the Dask cluster or scheduler is up. The directory's lock
    ([`writer_lock`][]) is held from before the finished cells are read (``resume``; a new sweep:
    from when its directory is made) until everything is written.
    """
    from dask.distributed import as_completed

    from dynlab.scenarios.across import run_across

    out_dir = Path(out_dir)
    check_out_dir(scenario, out_dir, resume=resume)
    with contextlib.ExitStack() as lock:
        if resume:
            lock.enter_context(writer_lock(out_dir))
        cells, computed = scenario.cells, {}
        todo = pending_cells(scenario, out_dir, resume=resume, retry_failed=retry_failed)
        done, failures = len(cells) - len(todo), 0
        if progress:
            progress(done, len(cells), failures)
        if not todo:
            prepare(scenario, out_dir, resume=resume, lock=lock)
        else:
            with dask_client(workers, scheduler) as client:
                prepare(scenario, out_dir, resume=resume, lock=lock)
                stop = str(out_dir / STOP)
                try:
                    futures = {}  # each future -> the cells it computes, in the order it returns them
                    for group in _groups(todo, scenario.vmap_seeds):
                        if group[0].run is not None:
                            c = group[0]
                            futures[client.submit(
                                run_external, str(cell_dir(out_dir, c)), c.run.path, c.analyses, stop,
                                key=f"cell-{c.key}", pure=False,
                            )] = group
                        elif len(group) == 1:
                            c = group[0]
                            futures[client.submit(
                                run_cell, str(cell_dir(out_dir, c)), c.config, c.analyses, stop, key=f"cell-{c.key}",
                                pure=False,
                            )] = group
                        else:
                            futures[client.submit(
                                run_cells_vmapped, [str(cell_dir(out_dir, c)) for c in group],
                                [c.config for c in group], group[0].analyses, stop, key=f"cells-{group[0].key}",
                                pure=False,
                            )] = group
                    for future in as_completed(list(futures)):
                        result = future.result()
                        for cell, info in zip(futures[future], result if isinstance(result, list) else [result]):
                            computed[cell.key] = info
                            done += 1
                            failures += info["status"] != "ok"
                        if progress:
                            progress(done, len(cells), failures)
                except BaseException:
                    # Ctrl-C (or any error here): say so before the client closes, so that the cells in
                    # flight, which fail as it closes, are not recorded as failed (cell.interrupted).
                    Path(stop).touch()
                    raise
        # the cells computed now come with their markers and results; only those finished before are read
        infos = [computed[c.key] if c.key in computed and SUMMARY in computed[c.key] else read_marker(cell_dir(out_dir, c))
                 for c in cells]
        merged = merge(scenario, out_dir, infos)
        store.write_dataset(out_dir / RESULT, merged)
        across = run_across(scenario, out_dir, [model_dir(out_dir, c) for c in cells], infos)
        if scenario.claims:
            judge_claims(scenario, out_dir, merged, {n: r["dataset"] for n, r in across.items() if "dataset" in r})
    return merged


def judge_claims(scenario: Scenario, out_dir: Path, merged: xr.Dataset, across: dict | None = None) -> xr.Dataset:
    """Judge the scenario's ``[[claims]]`` on the merged sweep and the datasets of its analyses
    across cells ([`dynlab.scenarios.declared_claims`][]), each taken from ``across`` (name ->
    dataset, those computed now) or else read from ``out_dir``; write ``findings.nc`` and its figure."""
    from dynlab import figures
    from dynlab.claims import judge
    from dynlab.scenarios.declared_claims import to_claims
    from dynlab.scenarios.learning_gate import task_criteria

    datasets = {"sweep": merged}
    for entry in scenario.across:
        path = Path(out_dir) / f"{entry['name']}.nc"
        if across and entry["name"] in across:
            datasets[entry["name"]] = across[entry["name"]]
        elif path.is_file():
            datasets[entry["name"]] = xr.load_dataset(path, engine="h5netcdf")
    from dynlab.scenarios.spec import claim_outputs

    claims = to_claims(scenario.claims, outputs=claim_outputs(scenario)[1], criteria=task_criteria(scenario))
    findings = judge(claims, datasets, scenario=scenario.name)
    store.write_dataset(Path(out_dir) / FINDINGS, findings)
    store.write_figure(Path(out_dir) / "findings.png", figures.findings(findings))
    return findings


def _groups(cells: list[Cell], vmap_seeds: bool) -> list[list[Cell]]:
    """Cells to run together: with ``vmap_seeds``, those whose configs differ only in ``seed`` (and
    which run the same analyses)."""
    if not vmap_seeds:
        return [[c] for c in cells]
    from dynlab.config import dumps

    groups: dict[str, list[Cell]] = {}
    for c in cells:
        if c.run is not None:  # not trained: alone, whatever its config
            groups[f"run {c.key}"] = [c]
            continue
        groups.setdefault(dumps({**c.config, "seed": 0, "analyses": {str(i): a for i, a in enumerate(c.analyses)}}),
                          []).append(c)
    return list(groups.values())


def _nan_like(ds: xr.Dataset) -> xr.Dataset:
    return ds.map(lambda v: xr.full_like(v, np.nan, dtype=float) if v.dtype.kind in "fiub" else v)


NOT_SELECTED = "n/a"
"""The status of a result in a cell its analysis's ``where`` does not select."""


def _result_status(info: dict | None, names: list[str], own: set[str]) -> tuple[list[str], list[str]]:
    """Each result's status and message from a cell's marker (``missing`` for a cell without one;
    [`NOT_SELECTED`][] for a result not among the cell's ``own``)."""
    if info is None:
        return [NOT_SELECTED if n not in own else "missing" for n in names], [""] * len(names)
    results = info["results"]
    return ([NOT_SELECTED if n not in own else results.get(n, {}).get("status", "missing") for n in names],
            [results.get(n, {}).get("message", "") for n in names])


def _no_cell(template: xr.Dataset, names: list[str], axes, index: tuple[int, ...]) -> xr.Dataset:
    """The merged dataset's entry where no cell is: a run taken as a cell (``[[runs]]``) has its
    label at the first value of the other axes only, so its label at their other values holds
    NaN, status [`NOT_SELECTED`][] and every result ``n/a``."""
    ds = template.assign(status=((), NOT_SELECTED), message=((), ""), result_status=("result", [NOT_SELECTED] * len(names)),
                         result_message=("result", [""] * len(names)))
    ds = ds.assign_coords(result=("result", names))
    return ds.expand_dims({axis.name: [coordinate_of(axis, int(i))] for axis, i in zip(axes, index)})


def merge(scenario: Scenario, out_dir: Path, infos: list[dict | None] | None = None) -> xr.Dataset:
    """One dataset over the sweep axes: every cell's results, its ``status`` and ``message``, and
    each of its results' (``result`` dim: ``train``, then each analysis) ``result_status`` and
    ``result_message``.

    Enforces: a cell's results on disk are kept whatever happened to its other results (a failed
    analysis discards nothing else); a variable a cell lacks (a missing cell, a failed analysis)
    is NaN there; ``infos``: the cells' markers ([`read_marker`][dynlab.scenarios.cell.read_marker]), read if not
    given; a cell's results are read from its directory unless its marker came with them
    ([`SUMMARY`][dynlab.scenarios.cell.SUMMARY]: a cell computed by this sweep).
    Beside the results: what they are read against ([`dynlab.scenarios.references`][]).
    """
    cells = scenario.cells
    if infos is None:
        infos = [read_marker(cell_dir(out_dir, c)) for c in cells]
    held = [info.get(SUMMARY) if info else None for info in infos]
    summaries = [None if not info else h.summary if h else cell_summary(cell_dir(out_dir, c), c.analyses)
                 for c, info, h in zip(cells, infos, held)]
    present = [s for s in summaries if s is not None]
    template = xr.merge([_nan_like(s) for s in present], join="outer", compat="override", combine_attrs="drop") \
        if present else xr.Dataset()
    names = ["train", *(result for a in scenario.cell_analyses for result, _ in results_of(a))]
    per_cell = []
    for cell, info, summary in zip(cells, infos, summaries):
        ds = xr.Dataset() if summary is None else summary
        lacking = [v for v in template.data_vars if v not in ds]
        if lacking:
            ds = xr.merge([ds, template[lacking]], join="outer", compat="override", combine_attrs="drop")
        status = "missing" if info is None else info["status"]
        own = {"train", *(result for a in cell.analyses for result, _ in results_of(a))}
        result_status, result_message = _result_status(info, names, own)
        ds = ds.assign(status=((), status), message=((), "" if info is None else info["message"]),
                       result_status=("result", result_status), result_message=("result", result_message))
        ds = ds.assign_coords(result=("result", names))
        ds = ds.expand_dims({axis.name: [cell.coords[axis.name]] for axis in scenario.axes})
        per_cell.append(ds)
    if scenario.axes:
        shape = [a.size for a in scenario.axes]
        nested = np.empty(shape, dtype=object)
        for cell, ds in zip(cells, per_cell):
            nested[cell.index] = ds
        for index in np.ndindex(*shape):  # a run's label at the other values of the other axes (another seed)
            if nested[index] is None:
                nested[index] = _no_cell(template, names, scenario.axes, index)
        merged = xr.combine_nested(
            nested.tolist(), concat_dim=[a.name for a in scenario.axes], join="outer", combine_attrs="drop",
            data_vars="all", coords="different", compat="no_conflicts",
        )
        for axis in scenario.axes:
            if len(axis.values) > 1:  # a zipped axis: its keys become coordinates along it
                merged = merged.assign_coords({k: (axis.name, v) for k, v in axis.values.items()})
    else:
        merged = per_cell[0]
    merged = merged.assign(references(scenario, [cell_dir(out_dir, c) for c in cells], held))  # what sweep.png draws
    merged["status"].attrs["long_name"] = ("cell status: ok, diverged, failed, missing or n/a (no cell: a run's label "
                                           "at another value of the other axes)")
    merged["result_status"].attrs["long_name"] = ("status of each result of a cell: ok, diverged, failed, skipped, "
                                                  "missing or n/a (an analysis whose where leaves the cell out)")
    return stamp(merged, analysis="sweep", config=dict(
        scenario=scenario.name,
        description=scenario.description,
        scenario_toml=Path(out_dir, SCENARIO).read_text() if Path(out_dir, SCENARIO).is_file() else "",
        n_cells=len(cells),
        n_ok=sum(1 for i in infos if i and i["status"] == "ok"),
    ))
