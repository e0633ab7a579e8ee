"""Running one sweep cell: train (if asked), run its analyses, write everything atomically.

A cell directory holds the run directory files (``config.toml``, ``model.eqx``, ``metrics.nc``,
...) plus one ``<analysis>.nc`` per analysis, and last of all ``cell.toml``: the marker saying
the cell finished, with its status (``ok``, ``diverged`` or ``failed`` and the message) and the
SHA-256 of every file it wrote. A directory without a valid marker, or whose files no longer
match their recorded hashes, is partial or corrupt: it is never merged and is recomputed.

An interrupted cell is not a failed cell: when the sweep is being interrupted (Ctrl-C, its Dask
client or worker shutting down), an error that a cell meets is a consequence of the shutdown, so
no marker is written ([`interrupted`][]) and ``--resume`` recomputes the cell.

**Test hook** (the sweeps' only one, inert unless the environment sets it; training and storage
have theirs in [`dynlab.store.fault_point`][]): with
``DYNLAB_TEST_HOOK_DIR=DIR``, each cell, as its directory has just been emptied and before it
computes anything, writes ``DIR/started-<pid>-<dirname>`` (``<pid>``: the process computing it),
then waits while ``DIR/hold`` exists (at most 60 s). Fault tests use it to kill or interrupt a
worker at a known moment (`_test_hook`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import time
import traceback
from pathlib import Path

import xarray as xr

from dynlab import config as cfgmod
from dynlab import experiment, registry, store
from dynlab.errors import DivergenceError, StorageError

MARKER = "cell.toml"


def without_training(config: dict) -> tuple[dict, bool]:
    """``train.steps = 0`` in a scenario means "analyse the freshly initialised model"."""
    if config.get("train", {}).get("steps") == 0:
        train = {k: v for k, v in config["train"].items() if k != "steps"}
        return {**config, "train": train}, False
    return config, True


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_marker(cell_dir: Path) -> dict | None:
    """The cell's marker if the cell is complete and intact, else ``None``."""
    marker = Path(cell_dir) / MARKER
    if not marker.is_file():
        return None
    try:
        info = cfgmod.load_toml(marker)
        files = info["files"]
        for name, digest in files.items():
            if _sha256(Path(cell_dir) / name) != digest:
                return None
    except Exception:  # unreadable marker, missing file: treat as partial
        return None
    return info


def _analysis_options(entry: dict, exp) -> dict:
    options = {k: v for k, v in entry.items() if k != "name"}
    task = options.get("task")
    if task == "train":
        options["task"] = exp.task
    elif isinstance(task, str):
        options["task"] = registry.build("task", task)
    return options


TEST_HOOK = "DYNLAB_TEST_HOOK_DIR"
INTERRUPTED = "interrupted"


def _test_hook(cell_dir: Path) -> None:
    """The test hook of the module docstring: announce the cell, then wait while ``hold`` exists."""
    where = os.environ.get(TEST_HOOK)
    if not where:
        return
    (Path(where) / f"started-{os.getpid()}-{cell_dir.name}").touch()
    deadline = time.monotonic() + 60
    while (Path(where) / "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _fresh(cell_dir: Path) -> Path:
    """Empty the cell's directory (a killed worker may have left a partial one) and create it."""
    cell_dir = Path(cell_dir)
    if cell_dir.exists():
        shutil.rmtree(cell_dir)
    cell_dir.mkdir(parents=True)
    _test_hook(cell_dir)
    return cell_dir


def interrupted(stop_file: str | Path | None) -> bool:
    """Is the sweep this cell belongs to being interrupted?

    Enforces: an interrupted cell is not recorded as failed. True when the sweep's runner has
    written its ``stop_file`` (it does so before closing its Dask client, see
    [`dynlab.scenarios.sweep.run_sweep`][]) or when the Dask worker running this cell is
    shutting down. A cell that meets an error while this holds writes no marker.
    """
    if stop_file is not None and Path(stop_file).exists():
        return True
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):  # not inside a Dask worker
        return False
    return getattr(worker.status, "name", "") in ("stopping", "stopped", "closing", "closing_gracefully", "closed", "failed")


class _Interrupted(Exception):
    """Raised inside a cell's training when its sweep is being interrupted."""


def _stop_when_interrupted(stop_file: str | Path | None):
    """The training progress callback of a cell: it ends the training, after the chunk in
    progress, as soon as the sweep is being interrupted ([`interrupted`][]), so that Ctrl-C stops
    the cells in flight instead of waiting for them (their writes need no scheduler)."""

    def progress(done, total, info):
        if interrupted(stop_file):
            raise _Interrupted(f"the sweep was interrupted at step {done} of {total}")

    return progress


def _failure(cell_dir: Path, e: Exception) -> tuple[str, str]:
    """Record the cell as failed with ``e``; a full or read-only disk is not the cell's failure:
    it stops the sweep with its one line ([`dynlab.errors.StorageError`][]), the cell unmarked."""
    if isinstance(e, StorageError):
        raise e
    try:
        (cell_dir / "error.txt").write_text(traceback.format_exc())
    except OSError as full:
        raise store.storage_error(full, cell_dir / "error.txt") from None
    return "failed", f"{type(e).__name__}: {e}".strip()


def _interrupted_info(message: str) -> dict:
    """What a cell returns when the sweep was interrupted under it: no marker, not failed."""
    return {"status": INTERRUPTED, "message": message, "files": {}}


def _finish(cell_dir: Path, exp, analyses: tuple[dict, ...], status: str, message: str,
            stop_file: str | Path | None = None) -> dict:
    """Run the analyses of a trained (or fresh) cell, then write its marker last (not if interrupted)."""
    if status == "ok":
        try:
            for entry in analyses:
                fn = registry.get("analysis", entry["name"]).obj
                ds = fn(exp.model, **_analysis_options(entry, exp))
                store.write_dataset(cell_dir / f"{entry['name']}.nc", ds)
        except Exception as e:  # a failed cell must not stop the sweep; keep the reason
            if interrupted(stop_file):
                return _interrupted_info(f"{type(e).__name__}: {e}")
            status, message = _failure(cell_dir, e)
    files = {p.name: _sha256(p) for p in sorted(cell_dir.iterdir()) if p.is_file() and not p.name.startswith(".")}
    info = {"status": status, "message": message, "files": files}
    store.atomic_write(cell_dir / MARKER, lambda p: p.write_text(cfgmod.dumps(info)))
    return info


def run_cell(cell_dir: str | Path, config: dict, analyses: tuple[dict, ...], stop_file: str | None = None) -> dict:
    """Compute one cell into ``cell_dir`` (emptied first); return its marker dict.

    Training divergence and analysis errors do not raise: they are recorded as the cell's
    status so that a sweep carries on. An error met while the sweep is being interrupted
    ([`interrupted`][], ``stop_file``) is not: the cell gets no marker and status
    ``"interrupted"`` is returned.
    """
    from dynlab.train import train

    cell_dir = _fresh(cell_dir)
    status, message, exp = "ok", "", None
    try:
        config, do_train = without_training(config)
        exp = experiment.build(config)
        if do_train:
            exp = dataclasses.replace(exp, model=train(exp, cell_dir, progress=_stop_when_interrupted(stop_file)).model)
        else:
            store.write_config(cell_dir, exp.config)
    except DivergenceError as e:
        status, message = "diverged", str(e)
    except Exception as e:
        if interrupted(stop_file):
            return _interrupted_info(f"{type(e).__name__}: {e}")
        status, message = _failure(cell_dir, e)
    return _finish(cell_dir, exp, analyses, status, message, stop_file)


def run_cells_vmapped(cell_dirs: list, configs: list[dict], analyses: tuple[dict, ...],
                      stop_file: str | None = None) -> list[dict]:
    """Cells that differ only in seed, trained as one ``jax.vmap``-ed run ([`dynlab.train.train_seeds`][]).

    Their numbers agree with one-cell runs up to float32 rounding, not bit for bit. Interruption
    is handled as in [`run_cell`][].
    """
    from dynlab.train import train_seeds

    dirs = [_fresh(d) for d in cell_dirs]
    try:
        pairs = [without_training(c) for c in configs]
        exps = [experiment.build(c) for c, _ in pairs]
        if not pairs[0][1]:
            results = [None] * len(exps)
            for d, e in zip(dirs, exps):
                store.write_config(d, e.config)
        else:
            results = train_seeds(exps, dirs, progress=_stop_when_interrupted(stop_file))
    except Exception as e:
        if interrupted(stop_file):
            return [_interrupted_info(f"{type(e).__name__}: {e}") for _ in dirs]
        return [_finish(d, None, analyses, *_failure(d, e)) for d in dirs]
    infos = []
    for d, e, r in zip(dirs, exps, results):
        if isinstance(r, DivergenceError):
            infos.append(_finish(d, e, analyses, "diverged", str(r), stop_file))
        else:
            trained = e if r is None else dataclasses.replace(e, model=r.model)
            infos.append(_finish(d, trained, analyses, "ok", "", stop_file))
    return infos


def cell_summary(cell_dir: Path, analyses: tuple[dict, ...]) -> xr.Dataset:
    """The cell's results as one dataset, each variable and dim prefixed by where it came from.

    ``train_*`` holds the training curves (dims ``train_step``, ``train_eval_step``); each
    analysis ``A`` contributes ``A_<variable>`` over dims ``A_<dim>``.
    """
    parts = []
    sources = [("train", cell_dir / store.METRICS)] + [(a["name"], cell_dir / f"{a['name']}.nc") for a in analyses]
    for prefix, path in sources:
        if not path.is_file():
            continue
        ds = xr.load_dataset(path, engine="h5netcdf").drop_encoding()
        bare_dims = {d: f"{prefix}_{d}" for d in ds.dims if d not in ds.variables}
        names = {n: f"{prefix}_{n}" for n in list(ds.variables)}
        parts.append(ds.rename_dims(bare_dims).rename(names).drop_attrs())
    return xr.merge(parts, combine_attrs="drop") if parts else xr.Dataset()
