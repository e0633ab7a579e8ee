"""Run directories: config, checkpoints, metrics and analyses as netCDF, figures (DESIGN §4).

A run directory holds::

    config.toml        the full run config (what built the model, task, rule and trainer)
    model.eqx          the model's arrays (equinox.tree_serialise_leaves; no pickle)
    checkpoint.eqx     (step, model, optimiser state): what ``dynlab train --resume`` continues
    metrics.nc         training curves, an xarray Dataset
    *.nc, *.png        analyses and figures

Every write is atomic: the file is written under a temporary name in the same folder and moved
into place with ``os.replace``, so a killed process never leaves a half-written file.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Callable

import equinox as eqx
import jax.numpy as jnp
import xarray as xr

from dynlab import config as cfgmod
from dynlab.errors import CheckpointError, ConfigError

CONFIG = "config.toml"
MODEL = "model.eqx"
CHECKPOINT = "checkpoint.eqx"
METRICS = "metrics.nc"


def atomic_write(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then move it to ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def new_run_dir(prefix: str, root: Path | str = "runs") -> Path:
    """A fresh directory ``root/prefix-YYYYmmdd-HHMMSS[-n]``."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{prefix}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = Path(f"{base}-{n}")
    path.mkdir(parents=True)
    return path


def write_config(run_dir: Path, config: dict) -> None:
    atomic_write(Path(run_dir) / CONFIG, lambda p: p.write_text(cfgmod.dumps(config)))


def read_config(run_dir: Path | str) -> dict:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory {str(run_dir)!r} does not exist")
    if not (run_dir / CONFIG).is_file():
        raise CheckpointError(f"{str(run_dir)!r} is not a dynlab run directory: it has no {CONFIG}")
    try:
        return cfgmod.load_toml(run_dir / CONFIG)
    except ConfigError as e:
        raise CheckpointError(str(e)) from None


def _serialise(obj) -> Callable[[Path], None]:
    return lambda p: eqx.tree_serialise_leaves(p, obj)


def save_checkpoint(run_dir: Path, step: int, model, opt_state) -> None:
    """Write ``checkpoint.eqx`` (step, model, optimiser state) and ``model.eqx``, each atomically."""
    atomic_write(Path(run_dir) / CHECKPOINT, _serialise((jnp.asarray(step, jnp.int32), model, opt_state)))
    save_model(run_dir, model)


def save_model(run_dir: Path, model) -> None:
    """Write ``model.eqx`` alone (a run directory of a model that was derived, not trained)."""
    atomic_write(Path(run_dir) / MODEL, _serialise(model))


def _deserialise(path: Path, like, what: str):
    if not path.is_file():
        raise CheckpointError(f"{what} {str(path)!r} does not exist")
    try:
        return eqx.tree_deserialise_leaves(path, like)
    except Exception as e:  # truncated file, wrong shapes or dtypes, foreign file
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{what} {str(path)!r} is corrupt or does not match the model its config.toml builds ({detail})"
        ) from None


def load_checkpoint(run_dir: Path, model_like, opt_state_like):
    """``(step, model, opt_state)`` from ``checkpoint.eqx``, shaped like the templates."""
    step, model, opt_state = _deserialise(
        Path(run_dir) / CHECKPOINT, (jnp.asarray(0, jnp.int32), model_like, opt_state_like), "checkpoint"
    )
    return int(step), model, opt_state


def load_model_arrays(run_dir: Path, model_like):
    """The model stored in ``model.eqx``, shaped like ``model_like``."""
    return _deserialise(Path(run_dir) / MODEL, model_like, "model file")


def write_dataset(path: Path, ds: xr.Dataset) -> Path:
    """Write an xarray Dataset as netCDF (h5netcdf engine), atomically."""
    return atomic_write(Path(path), lambda p: ds.to_netcdf(p, engine="h5netcdf"))


def write_figure(path: Path, fig) -> Path:
    """Save a matplotlib figure as PNG, atomically, and close it."""
    import matplotlib.pyplot as plt

    try:
        return atomic_write(Path(path), lambda p: fig.savefig(p, format="png", dpi=120, bbox_inches="tight"))
    finally:
        plt.close(fig)
