"""Running one sweep cell: train (if asked), run its analyses, write everything atomically.

A cell directory holds the run directory files (``config.toml``, ``model.eqx``, ``metrics.nc``,
...) plus one ``<analysis>.nc`` per analysis, and last of all ``cell.toml``: the marker saying
the cell finished, with its status (``ok``, ``diverged`` or ``failed`` and the message), the
status and message of each of its results (``[results.train]``, ``[results.<analysis>]``: ``ok``,
``diverged``, ``failed``, or ``skipped`` when training did not finish), the SHA-256 of every file
it wrote, and a digest of all of that ([`read_marker`][]). A directory without a valid marker, whose
marker does not match its own digest (a line removed or edited), or whose files no longer match
their recorded hashes, is partial or corrupt: it is never merged and is recomputed.

**One failing analysis discards nothing else.** Each analysis of a cell runs on its own: one that
raises is recorded as ``failed`` with its message (the traceback in ``error.txt``), and the cell's
training and its other analyses are kept; the cell's status is then ``failed`` and its message
names the analysis, so that ``--resume --retry-failed`` recomputes it.

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

import contextlib
import dataclasses
import hashlib
import os
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab import config as cfgmod
from dynlab import experiment, registry, store
from dynlab.errors import ConfigError, DivergenceError, StorageError
from dynlab.scenarios.spec import (ISOLATED, analysis_options, cell_transfer, entry_stages, results_of, stage_step,
                                   takes_rules, without_training)

MARKER = "cell.toml"
SUMMARY = "summary"
"""The key of a computed cell's [`Held`][] results in the marker dict its run returns (never written:
the marker file holds what [`read_marker`][] trusts; a sweep merges the results it was handed and
reads only the cells it did not compute, [`dynlab.scenarios.sweep.merge`][])."""


@dataclasses.dataclass(frozen=True)
class Held:
    """What a cell that has just computed hands back beside its marker, from memory: its
    [`cell_summary`][], and the global attributes of each dataset it wrote (file name -> attrs, as
    netCDF stores them), which the sweep's references read ([`dynlab.scenarios.references`][])."""

    summary: xr.Dataset
    attrs: dict


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


RESULT_STATUSES = ("ok", "diverged", "failed", "skipped")
"""The status of one result of a cell (its training, each analysis)."""
CELL_STATUSES = ("ok", "diverged", "failed")


def _canonical(value):
    return {k: _canonical(value[k]) for k in sorted(value)} if isinstance(value, dict) else value


def marker_digest(info: dict) -> str:
    """SHA-256 of a marker's content (everything but its ``digest``), independent of key order."""
    body = {k: v for k, v in info.items() if k != "digest"}
    return hashlib.sha256(cfgmod.dumps(_canonical(body)).encode()).hexdigest()


def read_marker(cell_dir: Path) -> dict | None:
    """The cell's marker if the cell is complete and intact, else ``None`` (the cell is pending).

    Enforces: a marker is trusted only when it parses, matches its own ``digest`` (so a line
    removed or changed, such as a ``files`` entry or a result, makes the cell pending), has a
    known status for the cell and for each result, names the dataset of every analysis it says
    finished ok, and every file it names has the recorded SHA-256.
    """
    marker = Path(cell_dir) / MARKER
    if not marker.is_file():
        return None
    try:
        info = cfgmod.load_toml(marker)
        if info.get("digest") != marker_digest(info) or info["status"] not in CELL_STATUSES:
            return None
        files, results = info["files"], info["results"]
        if not isinstance(info["message"], str) or not isinstance(files, dict) or not isinstance(results, dict):
            return None
        for name, result in results.items():
            if result["status"] not in RESULT_STATUSES or not isinstance(result["message"], str):
                return None
            if name != "train" and result["status"] == "ok" and f"{name}.nc" not in files:
                return None
        for name, digest in files.items():
            if _sha256(Path(cell_dir) / name) != digest:
                return None
    except Exception:  # unreadable marker, a key missing, a file missing: treat as partial
        return None
    return info


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


def one_line(text: str) -> str:
    """``text`` as one printable line (a message in a marker, which TOML must read back, and on a
    terminal): runs of whitespace become one space, other unprintable characters a space."""
    return "".join(c if c.isprintable() else " " for c in " ".join(str(text).split()))


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


def _failure(cell_dir: Path, e: Exception, what: str = "") -> tuple[str, str]:
    """``("failed", "Type: message")``; the traceback is appended to the cell's ``error.txt``. A
    full or read-only disk is not the cell's failure: it stops the sweep with its one line
    ([`dynlab.errors.StorageError`][]), the cell unmarked."""
    if isinstance(e, StorageError):
        raise e
    try:
        with open(cell_dir / "error.txt", "a") as f:
            f.write(f"--- {what or 'cell'}\n{traceback.format_exc()}")
    except OSError as full:
        raise store.storage_error(full, cell_dir / "error.txt") from None
    return "failed", one_line(f"{type(e).__name__}: {e}")


def _interrupted_info(message: str) -> dict:
    """What a cell returns when the sweep was interrupted under it: no marker, not failed."""
    return {"status": INTERRUPTED, "message": message, "files": {}, "results": {}}


TRANSFERRED = "transferred"
"""The run directory, inside a cell, of its model after its ``[transfer]`` (config, model; when
retrained, its curves and checkpoints): ``dynlab analyze NAME --checkpoint CELL/transferred`` reads it."""


class _Stages:
    """The experiment an analysis at a stage sees, each made once per cell (a transfer is applied,
    and retrained, once however many analyses run after it; a failed one is not tried again), or
    ``None`` when the cell did not reach the stage: ``initial`` at ``init``; the model kept after N
    steps (``snapshots``) at ``step-N``; ``exp`` (trained) at ``trained``; its isolated neurons at
    ``isolated``; after ``transfer`` at ``transferred``, written to [`TRANSFERRED`][]."""

    def __init__(self, cell_dir: Path, initial, exp, status: str, snapshots: dict, transfer, progress):
        self.cell_dir, self.initial, self.exp, self.status = cell_dir, initial, exp, status
        self.snapshots, self.transfer, self.progress, self.made = snapshots, transfer, progress, {}

    def __call__(self, stage: str):
        if stage not in self.made:
            try:
                self.made[stage] = self._make(stage)
            except Exception as e:
                self.made[stage] = e
        if isinstance(self.made[stage], Exception):
            raise self.made[stage]
        return self.made[stage]

    def initial_model(self):
        """The cell's model before training (a continuation's ``homotopy = "init"``)."""
        if self.initial is None:
            raise ConfigError("homotopy = \"init\": this cell has no model before training")
        return self.initial.model

    def _make(self, stage: str):
        if stage == "init":
            return self.initial
        step = stage_step(stage)
        if step is not None:
            return None if self.exp is None or step not in self.snapshots else \
                dataclasses.replace(self.exp, model=self.snapshots[step])
        if self.exp is None or self.status != "ok":
            return None
        if stage == "isolated":
            return ISOLATED.apply(self.exp)
        if stage == TRANSFERRED:
            return self.transfer.apply(self.exp, self.cell_dir / TRANSFERRED, self.progress)
        return self.exp


def _finish(cell_dir: Path, exp, analyses: tuple[dict, ...], status: str, message: str,
            stop_file: str | Path | None = None, initial=None, snapshots: dict | None = None, transfer=None,
            metrics: xr.Dataset | None = None) -> dict:
    """Run the analyses of a trained (or fresh) cell, each at each of its stages on its own, then
    write its marker last (not if interrupted). ``status``/``message``: how training ended;
    ``initial``: the experiment before training (stage ``init``), ``exp`` after it (``trained``),
    ``snapshots``: the models after the steps of its ``step-N`` stages, ``transfer``: its
    [`Transfer`][dynlab.transfer.Transfer] (stage ``transferred``), ``metrics``: the training curves
    it wrote. The marker is returned with the cell's results under [`SUMMARY`][] ([`Held`][]), made
    from the datasets still in memory (nothing is read back)."""
    message = one_line(message)
    results = {"train": {"status": status, "message": message}}
    held = {} if metrics is None else {store.METRICS: metrics}
    at_stage = _Stages(cell_dir, initial, exp, status, snapshots or {}, transfer, _stop_when_interrupted(stop_file))
    for entry in analyses:
        for result, stage in results_of(entry):
            try:
                at = at_stage(stage)
                if at is None:
                    results[result] = {"status": "skipped", "message": f"not run: training {status}"}
                    continue
                fn = registry.get("analysis", entry["name"]).obj
                subject = (at.model, at.rules) if takes_rules(entry) else (at.model,)
                ds = fn(*subject, **analysis_options(entry, at.task, at.seed, at_stage.initial_model))
                store.write_dataset(cell_dir / f"{result}.nc", ds)
                held[f"{result}.nc"] = ds
                results[result] = {"status": "ok", "message": ""}
            except Exception as e:  # a failed analysis stops neither the cell's other results nor the sweep
                if interrupted(stop_file):
                    return _interrupted_info(f"{type(e).__name__}: {e}")
                failed, why = _failure(cell_dir, e, result)
                results[result] = {"status": failed, "message": why}
    failed = [n for n, r in results.items() if n != "train" and r["status"] == "failed"]
    if status == "ok" and failed:
        status, message = "failed", "; ".join(f"{n}: {results[n]['message']}" for n in failed)
    files = {p.relative_to(cell_dir).as_posix(): _sha256(p) for p in sorted(cell_dir.rglob("*"))
             if p.is_file() and not p.name.startswith(".")}
    info = {"status": status, "message": message, "results": results, "files": files}
    info["digest"] = marker_digest(info)
    store.atomic_write(cell_dir / MARKER, lambda p: p.write_text(cfgmod.dumps(info)))
    stored = {name: {k: store.netcdf_attr(v) for k, v in ds.attrs.items()} for name, ds in held.items()}
    return {**info, SUMMARY: Held(cell_summary(cell_dir, analyses, held), stored)}


def _at_init(analyses: tuple[dict, ...]) -> bool:
    """Whether the model before training is kept: an analysis at stage ``init``, or a continuation
    from it (``path = {homotopy = "init"}``)."""
    def from_init(path) -> bool:
        return (path.get("homotopy") if isinstance(path, dict) else getattr(path, "homotopy", None)) == "init"

    return any("init" in entry_stages(e) or from_init(e.get("path")) for e in analyses)


def _steps(analyses: tuple[dict, ...]) -> list[int]:
    """The training steps after which a ``step-N`` stage analyses the model."""
    return sorted({stage_step(s) for e in analyses for s in entry_stages(e) if stage_step(s) is not None})


@contextlib.contextmanager
def _one_line_warnings():
    """Warnings met while cells compute, printed as ``warning: MESSAGE`` on one line of stderr, as
    the command line prints its own: a Dask worker process does not go through the command's
    handler, and would print Python's two lines of file, line and source."""
    shown = warnings.showwarning

    def line(message, category, filename, lineno, file=None, text=None):
        print(f"warning: {' '.join(str(message).split())}", file=sys.stderr)

    warnings.showwarning = line
    try:
        yield
    finally:
        warnings.showwarning = shown


@_one_line_warnings()
def run_cell(cell_dir: str | Path, config: dict, analyses: tuple[dict, ...], stop_file: str | None = None) -> dict:
    """Compute one cell into ``cell_dir`` (emptied first); return its marker dict.

    Training divergence and analysis errors do not raise: they are recorded as the cell's
    status so that a sweep carries on. An error met while the sweep is being interrupted
    ([`interrupted`][], ``stop_file``) is not: the cell gets no marker and status
    ``"interrupted"`` is returned.
    """
    from dynlab.train import train

    cell_dir = _fresh(cell_dir)
    status, message, exp, initial, snapshots, transfer, metrics = "ok", "", None, None, {}, None, None
    try:
        config, transfer = cell_transfer(config)
        config, do_train = without_training(config)
        exp = experiment.build(config, training=do_train)
        initial = exp if _at_init(analyses) else None
        if do_train:
            result = train(exp, cell_dir, progress=_stop_when_interrupted(stop_file), snapshots=_steps(analyses))
            exp, snapshots, metrics = dataclasses.replace(exp, model=result.model), result.snapshots, result.metrics
        else:
            store.write_config(cell_dir, exp.config)
    except DivergenceError as e:
        status, message = "diverged", str(e)
    except Exception as e:
        if interrupted(stop_file):
            return _interrupted_info(f"{type(e).__name__}: {e}")
        status, message = _failure(cell_dir, e)
    return _finish(cell_dir, exp, analyses, status, message, stop_file, initial, snapshots, transfer, metrics)


def _curves_of(exp) -> xr.Dataset:
    """The training curves of a run taken as a cell: its own ``metrics.nc`` when it has one (a
    ``dynlab train`` run), else its held-out loss and metric measured once now, as the trainer
    measures them (its evaluation and key; an imported run has no curves), at ``eval_step`` 0.
    So the learning gate judges it by its task's criterion as it judges the trained cells."""
    from dynlab.train import _evaluate, _keys  # the trainer's own held-out evaluation, not a second one

    own = store.load_metrics(exp.path)
    if own is not None:
        return own
    res = _evaluate(exp.model, exp.rule, exp.task, _keys(exp.seed)[2], exp.train.eval_size)
    metric = next(k for k in res if k != "loss")
    return xr.Dataset(
        {"eval_loss": ("eval_step", [float(res["loss"])], {"long_name": "held-out loss"}),
         f"eval_{metric}": ("eval_step", [float(res[metric])], {"long_name": f"held-out {metric}"})},
        coords={"eval_step": ("eval_step", np.array([0], np.int64), {"long_name": "step of evaluation"})},
        attrs={"note": f"measured once on the run {exp.path}, which the study did not train"})


@_one_line_warnings()
def run_external(cell_dir: str | Path, run_dir: str, analyses: tuple[dict, ...], stop_file: str | None = None) -> dict:
    """Compute the cell of a run directory the study takes as it is (``[[runs]]``,
    [`dynlab.scenarios.external_runs`][]) into ``cell_dir`` (emptied first): its curves
    (its metrics.nc, or one held-out evaluation) and its analyses at the stage ``trained``; return its marker dict, as
    [`run_cell`][] does. The run's own directory is only read."""
    cell_dir = _fresh(cell_dir)
    status, message, exp = "ok", f"not trained by the study: the run {run_dir}, as it is", None
    try:
        exp = experiment.load_run(run_dir)
        store.write_dataset(cell_dir / store.METRICS, _curves_of(exp))
    except Exception as e:
        if interrupted(stop_file):
            return _interrupted_info(f"{type(e).__name__}: {e}")
        status, message = _failure(cell_dir, e)
    return _finish(cell_dir, exp, analyses, status, message, stop_file)


@_one_line_warnings()
def run_cells_vmapped(cell_dirs: list, configs: list[dict], analyses: tuple[dict, ...],
                      stop_file: str | None = None) -> list[dict]:
    """Cells that differ only in seed, trained as one ``jax.vmap``-ed run ([`dynlab.train.train_seeds`][]).

    Their numbers agree with one-cell runs up to float32 rounding, not bit for bit. Interruption
    is handled as in [`run_cell`][].
    """
    from dynlab.train import train_seeds

    dirs = [_fresh(d) for d in cell_dirs]
    try:
        transfer = cell_transfer(configs[0])[1]  # the cells differ only in seed
        pairs = [without_training(cell_transfer(c)[0]) for c in configs]
        exps = [experiment.build(c, training=t) for c, t in pairs]
        if not pairs[0][1]:
            results = [None] * len(exps)
            for d, e in zip(dirs, exps):
                store.write_config(d, e.config)
        else:
            results = train_seeds(exps, dirs, progress=_stop_when_interrupted(stop_file), snapshots=_steps(analyses))
    except Exception as e:
        if interrupted(stop_file):
            return [_interrupted_info(f"{type(e).__name__}: {e}") for _ in dirs]
        return [_finish(d, None, analyses, *_failure(d, e)) for d in dirs]
    infos = []
    initial = _at_init(analyses)
    for d, e, r in zip(dirs, exps, results):
        if isinstance(r, DivergenceError):
            infos.append(_finish(d, e, analyses, "diverged", str(r), stop_file, e if initial else None))
        else:
            trained = e if r is None else dataclasses.replace(e, model=r.model)
            infos.append(_finish(d, trained, analyses, "ok", "", stop_file, e if initial else None,
                                 {} if r is None else r.snapshots, transfer, None if r is None else r.metrics))
    return infos


def cell_summary(cell_dir: Path, analyses: tuple[dict, ...], held: dict[str, xr.Dataset] | None = None) -> xr.Dataset:
    """The cell's results as one dataset, each variable and dim prefixed by where it came from:
    each taken from ``held`` (file name -> the dataset written there, still in memory: the cell
    just computed it) or else read from ``cell_dir``.

    ``train_*`` holds the training curves (dims ``train_step``, ``train_eval_step``); each
    analysis ``A`` contributes ``A_<variable>`` over dims ``A_<dim>`` (a dim without a coordinate
    numbered 0, 1, …, so that results of different lengths across cells merge, padded with NaN). An analysis whose entry
    names its ``stages`` contributes its results of every stage stacked along a ``stage`` dim
    (a stage whose result is missing is NaN there).
    """
    def load(path: Path, prefix: str) -> xr.Dataset | None:
        if held is not None and path.name in held:
            ds = held[path.name].drop_encoding()
        elif path.is_file():
            ds = xr.load_dataset(path, engine="h5netcdf").drop_encoding()
        else:
            return None
        bare_dims = {d: f"{prefix}_{d}" for d in ds.dims if d not in ds.variables}
        names = {n: f"{prefix}_{n}" for n in list(ds.variables)}
        ds = ds.rename_dims(bare_dims).rename(names).drop_attrs()
        # numbered, so that cells whose results differ in length along them (points found) merge, padded with NaN
        return ds.assign_coords({d: np.arange(ds.sizes[d]) for d in bare_dims.values()})

    parts = [p for p in [load(cell_dir / store.METRICS, "train")] if p is not None]
    for entry in analyses:
        name = entry["name"]
        if "stages" not in entry:
            part = load(cell_dir / f"{name}.nc", name)
        else:
            staged = [(stage, load(cell_dir / f"{result}.nc", name)) for result, stage in results_of(entry)]
            staged = [(stage, ds) for stage, ds in staged if ds is not None]
            part = xr.concat([ds for _, ds in staged], dim=xr.DataArray([s for s, _ in staged], dims="stage"),
                             join="outer", data_vars="all", coords="different", compat="no_conflicts",
                             combine_attrs="drop") if staged else None
        if part is not None:
            parts.append(part)
    return xr.merge(parts, combine_attrs="drop", join="outer") if parts else xr.Dataset()
