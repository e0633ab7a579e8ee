"""Scenario ``aru-table1`` checked by properties, not by pinned numbers.

One toy run of [`dynlab.scenarios.aru_table1.run_aru_table1`][] (ARUN and LSTM, one seed, 14 x 14
digits down-sampled to 7 x 7, the rotation transfer and the adaptation analysis on) with training
replaced by the identity: each network keeps its initial weights, so no training step compiles and
these hold whatever the weights are:

- **the table is each run's own evaluation**: clean and noisy accuracies equal the run directory's
  ``perturb.nc``, in steps of 1/``n_test``; ``table1.txt`` is [`table`][dynlab.scenarios.aru_table1.table]
  of the dataset;
- **matched sizes**: the LSTM's whole model has the ARUN's parameter count within ``match_tol``;
- **rotation transfer**: with retraining the identity, the retrained model is the rotated one, so
  ``retrained`` equals ``rotated`` and ``recovered`` = (retrained - rotated) / (original - rotated) is
  0 wherever the rotation lost accuracy (NaN elsewhere);
- **adaptation**: ``closer`` = |λ1 fixed| - |λ1 adapted| and each reading's summary is the mean
  its run's own ``adaptation-<reading>.nc`` holds.

Replaces the toy run's snapshot (``tests/reference/scenarios.json``), which pinned the numbers of
three networks trained 3 steps and was re-recorded whenever rounding moved. Needs the MNIST files
(``DYNLAB_DATA``; CI sets it), as the snapshot did. The claims on these datasets are tested in
``tests/test_claims.py``, training in ``tests/test_train.py``.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from dynlab.scenarios import aru_table1

pytestmark = pytest.mark.skipif(not os.environ.get("DYNLAB_DATA"),
                                reason="DYNLAB_DATA is not set (CI sets it to ../shared/data): psMNIST needs the MNIST files")

RUN = dict(networks=["aru", "lstm"], seeds=[0], steps=3, hidden=16, eval_size=32, n_test=64, strengths=[0.0, 5.0],
           downsample=4, rotation={"network": "aru", "steps": 2},
           adaptation={"onset": 10, "duration": 40, "window": 10, "realisations": 2, "ics": 2, "steps": 60, "burn_in": 10})


def _metrics(steps):
    return xr.Dataset({"loss": ("step", np.ones(steps)), "eval_loss": ("eval_step", [1.0, 1.0]),
                       "eval_accuracy": ("eval_step", [0.1, 0.1])},
                      coords={"step": np.arange(1, steps + 1), "eval_step": [0, steps]},
                      attrs={"metric": "accuracy", "chance": 0.1})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("aru-table1")

    def untrained(exps, dirs, progress=None):  # training as the identity
        return [SimpleNamespace(model=e.model, metrics=_metrics(e.config["train"]["steps"])) for e in exps]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dynlab.train.train_seeds", untrained)
        result = aru_table1.run_aru_table1(out, **RUN)
    return out, result


def test_the_table_is_each_runs_own_evaluation(run):
    out, res = run
    ds = res["table1"]
    for net in RUN["networks"]:
        with xr.open_dataset(out / "runs" / f"{net}-seed0" / "perturb.nc") as own:
            np.testing.assert_array_equal(ds.accuracy.sel(network=net, seed=0).values, own.accuracy.values)
            np.testing.assert_array_equal(ds.loss.sel(network=net, seed=0).values, own.loss.values)
    counts = ds.accuracy.values * RUN["n_test"]
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    assert (out / "table1.txt").read_text() == aru_table1.table(ds) + "\n"


def test_the_lstm_is_matched_to_the_aruns_parameter_count(run):
    _, res = run
    p = res["table1"].params
    assert abs(int(p.sel(network="lstm")) - int(p.sel(network="aru"))) <= 0.05 * int(p.sel(network="aru"))


def test_retraining_as_the_identity_recovers_nothing(run):
    _, res = run
    rot = res["rotation"]
    acc = rot.accuracy.values
    np.testing.assert_array_equal(acc[:, 2], acc[:, 1])
    lost = acc[:, 0] > acc[:, 1]
    np.testing.assert_array_equal(rot.recovered.values[lost], 0.0)
    assert np.isnan(rot.recovered.values[~lost]).all()


def test_adaptation_summary_is_each_runs_own_analysis(run):
    out, res = run
    ad = res["adaptation"]
    np.testing.assert_allclose(ad.closer, abs(ad.lambda1_fixed) - abs(ad.lambda1_adapted), rtol=0, atol=0)
    for reading in aru_table1.READINGS:
        with xr.open_dataset(out / "runs" / "aru-seed0" / f"adaptation-{reading}.nc") as own:
            own = own.sel(drive=own.drive > 0)
            for name in ("adapted", "fixed"):
                np.testing.assert_array_equal(ad[f"lambda1_{name}"].sel(reading=reading, seed=0).values,
                                              own[f"lambda1_{name}_mean"].values)
