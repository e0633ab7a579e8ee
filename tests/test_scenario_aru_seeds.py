"""Scenario ``aru-seeds`` (the built-in file, shrunk) checked by properties, not by pinned numbers.

The file is read as shipped and only its sizes are made small (width 4, two seeds, 4 training
steps, an 85-step spectrum); its structure — the sweep axes, the analysis and its options — is the
file's. Checked: the merged dataset has the file's sweep axes and every cell finished; each cell's
spectrum is ordered (λ1 ≥ λ2 ≥ …) and inside its interval; with every exponent below 0 the
Kaplan–Yorke dimension is 0 by its definition; the merged values are each cell's own
``lyapunov.nc`` (the same numbers two ways); seeds give different networks.

Replaces the toy run's snapshot (``tests/reference/scenarios.json``), which pinned its numbers.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.scenarios import parse
from dynlab.scenarios.sweep import run_sweep

FILE = Path(__file__).resolve().parents[1] / "scenarios" / "aru-seeds.toml"


def test_the_files_sweep_runs_and_each_cells_spectrum_is_ordered_and_merged_as_written(tmp_path):
    doc = tomllib.loads(FILE.read_text())
    doc["sweep"] = {"model.hidden": [4], "seed": [0, 1]}  # both axes kept; one width (a compile each)
    doc["model"]["n_g"] = 2
    doc["train"].update(steps=4, log_every=2, eval_every=2, checkpoint_every=4)
    (analysis,) = doc["analyses"]
    assert analysis["name"] == "lyapunov"
    analysis.update(steps=85, burn_in=35, ics=2)  # the shortest spectrum whose burn-in the estimator accepts
    ds = run_sweep(parse(doc, str(FILE)), tmp_path / "out")
    assert (ds.status == "ok").all() and dict(ds.status.sizes) == {"model.hidden": 1, "seed": 2}
    k = analysis["qr"]["k"]
    mean = ds.lyapunov_mean
    assert mean.sizes["lyapunov_exponent"] == k
    assert (mean.diff("lyapunov_exponent") <= 0).all()
    assert ((ds.lyapunov_ci_low <= mean) & (mean <= ds.lyapunov_ci_high)).all()
    assert (mean.isel(lyapunov_exponent=0) < 0).all()  # a briefly trained ARU contracts: then D_KY = 0
    np.testing.assert_array_equal(ds.lyapunov_ky_dimension_mean, 0.0)
    assert not np.array_equal(mean.sel(seed=0).values, mean.sel(seed=1).values)
    cells = sorted((tmp_path / "out" / "cells").iterdir())
    assert len(cells) == 2
    merged = {tuple(mean.isel({"model.hidden": i, "seed": j}).values.tolist()) for i, j in np.ndindex(1, 2)}
    for cell in cells:  # each cell's own result is one entry of the merged dataset, and no two are equal
        with xr.open_dataset(cell / "lyapunov.nc") as one:
            merged.remove(tuple(one["mean"].values.tolist()))
