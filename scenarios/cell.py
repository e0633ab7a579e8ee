"""Running one sweep cell: train (if asked), run its analyses, write everything atomically.

A cell directory holds the run directory files (``config.toml``, ``model.eqx``, ``metrics.nc``,
...) plus one ``<analysis>.nc`` per analysis, and last of all ``cell.toml``: the marker saying
the cell finished, with its status (``ok``, ``diverged`` or ``failed`` and the message) and the
SHA-256 of every file it wrote. A directory without a valid marker, or whose files no longer
match their recorded hashes, is partial or corrupt: it is never merged and is recomputed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import traceback
from pathlib import Path

import xarray as xr

from dynlab import config as cfgmod
from dynlab import experiment, registry, store
from dynlab.errors import DivergenceError

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


def _fresh(cell_dir: Path) -> Path:
    cell_dir = Path(cell_dir)
    if cell_dir.exists():
        shutil.rmtree(cell_dir)
    cell_dir.mkdir(parents=True)
    return cell_dir


def _failure(cell_dir: Path, e: Exception) -> tuple[str, str]:
    (cell_dir / "error.txt").write_text(traceback.format_exc())
    return "failed", f"{type(e).__name__}: {e}".strip()


def _finish(cell_dir: Path, exp, analyses: tuple[dict, ...], status: str, message: str) -> dict:
    """Run the analyses of a trained (or fresh) cell, then write its marker last."""
    if status == "ok":
        try:
            for entry in analyses:
                fn = registry.get("analysis", entry["name"]).obj
                ds = fn(exp.model, **_analysis_options(entry, exp))
                store.write_dataset(cell_dir / f"{entry['name']}.nc", ds)
        except Exception as e:  # a failed cell must not stop the sweep; keep the reason
            status, message = _failure(cell_dir, e)
    files = {p.name: _sha256(p) for p in sorted(cell_dir.iterdir()) if p.is_file() and not p.name.startswith(".")}
    info = {"status": status, "message": message, "files": files}
    store.atomic_write(cell_dir / MARKER, lambda p: p.write_text(cfgmod.dumps(info)))
    return info


def run_cell(cell_dir: str | Path, config: dict, analyses: tuple[dict, ...]) -> dict:
    """Compute one cell into ``cell_dir`` (emptied first); return its marker dict.

    Training divergence and analysis errors do not raise: they are recorded as the cell's
    status so that a sweep carries on.
    """
    from dynlab.train import train

    cell_dir = _fresh(cell_dir)
    status, message, exp = "ok", "", None
    try:
        config, do_train = without_training(config)
        exp = experiment.build(config)
        if do_train:
            exp = dataclasses.replace(exp, model=train(exp, cell_dir).model)
        else:
            store.write_config(cell_dir, exp.config)
    except DivergenceError as e:
        status, message = "diverged", str(e)
    except Exception as e:
        status, message = _failure(cell_dir, e)
    return _finish(cell_dir, exp, analyses, status, message)


def run_cells_vmapped(cell_dirs: list, configs: list[dict], analyses: tuple[dict, ...]) -> list[dict]:
    """Cells that differ only in seed, trained as one ``jax.vmap``-ed run (:func:`dynlab.train.train_seeds`).

    Their numbers agree with one-cell runs up to float32 rounding, not bit for bit.
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
            results = train_seeds(exps, dirs)
    except Exception as e:
        return [_finish(d, None, analyses, *_failure(d, e)) for d in dirs]
    infos = []
    for d, e, r in zip(dirs, exps, results):
        if isinstance(r, DivergenceError):
            infos.append(_finish(d, e, analyses, "diverged", str(r)))
        else:
            infos.append(_finish(d, e if r is None else dataclasses.replace(e, model=r.model), analyses, "ok", ""))
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
