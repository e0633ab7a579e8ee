"""The cross-unit studies as scenario files (issue 34, item 2): each file reproduces, at the same
seeds, the numbers its old program wrote (``tests/reference/scenarios.json``, recorded with the
programs at toy size by ``tests/scenario_snapshots.py``)."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from dynlab import config as cfgmod
from dynlab.scenarios import spec
from dynlab.scenarios.sweep import run_sweep
from scenario_snapshots import REFERENCE

OLD = json.loads(REFERENCE.read_text())


def reduced(name: str, sets: list[str], sweep: dict, analyses: list[dict]):
    """The built-in scenario ``name`` with ``--set``-style ``sets``, ``sweep`` axes replaced and each
    ``[[analyses]]`` entry updated by the matching dict of ``analyses``."""
    doc = cfgmod.apply_sets(cfgmod.load_toml(spec.builtin_names()[name]), sets)
    doc["sweep"].update(sweep)
    for entry, update in zip(doc["analyses"], analyses):
        entry.update(update)
    return spec.parse(doc, name)


def same(got, old: dict, where: str):
    """``got`` (flattened in the old dataset's order) equals the old program's recorded sample."""
    flat = np.asarray(got, dtype=float).ravel()
    assert list(np.shape(got)) == old["shape"], where
    idx = np.unique(np.linspace(0, flat.size - 1, min(48, flat.size)).round().astype(int))
    np.testing.assert_allclose(flat[idx], np.array(old["values"], dtype=float), rtol=1e-4, atol=1e-6, err_msg=where)


def test_cross_lyapunov_file_reproduces_the_program(tmp_path):
    """The old program's toy run (aru and sith-rnn at width 8, 3 steps, seed 0; k = 3 over 60 steps)."""
    scenario = reduced("cross-lyapunov", ["model.width=8", "train.steps=3", "train.eval_every=1", "train.log_every=3",
                                          "train.checkpoint_every=3"],
                       {"model.unit": ["aru", "sith-rnn"], "seed": [0]},
                       [dict(k=3, steps=60, burn_in=10, ics=2), {}])
    ds = run_sweep(scenario, tmp_path / "sweep").transpose("model.unit", "seed", "stage", ...)
    old = OLD["cross-lyapunov"]["lyapunov.nc"]
    for new, name in (("lyapunov_mean", "mean"), ("lyapunov_ci_low", "ci_low"), ("lyapunov_ci_high", "ci_high"),
                      ("lyapunov_largest_mean", "largest")):
        same(ds[new], old[name], name)
    same(ds.perturb_loss.squeeze("perturb_strength"), old["eval_loss"], "eval_loss")


def test_cross_fingerprint_file_reproduces_the_program(tmp_path):
    """The old program's toy run (gru and rnn at width 8, 3 steps, seed 0; small fixed-point, CLV and
    DSA settings): fixed-point counts by class, CLV angles, held-out loss, DSA distances."""
    scenario = reduced("cross-fingerprint", ["model.width=8", "train.steps=3", "train.eval_every=1", "train.log_every=3",
                                             "train.checkpoint_every=3"],
                       {"model.unit": ["gru", "rnn"], "seed": [0]},
                       [dict(ics=8, steps=60, burn_in=10, max_steps=100),
                        dict(k=3, steps=60, window=60, transient_forward=20, transient_backward=20), dict(n=64),
                        dict(trials=4, n_delays=2, rank=4, pcs=4, iterations=50, restarts=1)])
    ds = run_sweep(scenario, tmp_path / "sweep").transpose("model.unit", "seed", ...)
    old = OLD["cross-fingerprint"]
    fp, clv = old["fixed_points.nc"], old["clv.nc"]
    for name in ("n_fixed", "n_slow"):
        same(ds[f"fixed-points_{name}"], fp[name], name)
    classes = [ds[f"fixed-points_n_points_{c}"] for c in ("stable", "marginal", "saddle", "unstable")]
    same(np.stack(classes, -1), fp["class_count"], "class_count")
    same(ds["fixed-points_ic_q"].min("fixed-points_ic"), fp["min_q"], "min_q")
    for name in ("median_angle_rest", "min_angle_rest"):
        same(ds[f"clv_{name}"], clv[name], name)
    same(ds.clv_clv_exponent, clv["clv_exponent"], "clv_exponent")
    same(ds.clv_readout_angle.median("clv_time"), clv["readout_angle"], "readout_angle")
    same(ds.perturb_loss.squeeze("perturb_strength"), clv["eval_loss"], "eval_loss")
    dsa = xr.load_dataset(tmp_path / "sweep" / "dsa.nc")
    same(dsa.distance, old["dsa.nc"]["distance"], "distance")
