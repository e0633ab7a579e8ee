"""Scenario ``elm-shd-adding`` checked by properties, not by pinned numbers.

One run of [`dynlab.scenarios.elm_shd.run_elm_vs_lstm`][] with training replaced by a known function
of each run's config (its held-out accuracy curve is ``hidden / 1000 + bin_ms / 1e5 + seed / 1e7``
at every evaluation), and one seed of one run reported as diverged, so that every value must land
where its config says — which bin size, which network, which seed — with no compilation:

- the LSTM's whole model has the ELM network's parameter count within ``match_tol`` (counted from
  the built models, not from the program's table);
- the constant-τ ablation trains at the smallest bin only, with τ_min = τ_max = 25 ms in steps of that
  bin, and is NaN at the others; a diverged seed is NaN, the others are not;
- the dataset on disk is the one returned.

Replaces the toy run's snapshot (``tests/reference/scenarios.json``), which pinned the numbers of
both networks trained 3 steps at two bin sizes (26-43 s of the suite) and was re-recorded whenever
rounding moved. Training seeds as one vmapped computation is tested in ``tests/test_train.py``, the
run configs in ``tests/test_paper_presets.py``, the claims in ``tests/test_claims.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from dynlab.errors import DivergenceError
from dynlab.scenarios import elm_shd

RUN = dict(seeds=[0, 1], bins_ms=[50.0, 100.0], steps=3, eval_every=3, batch_size=4, eval_size=8, constant_tau_ms=25.0)
DIVERGED = (100.0, "lstm", 1)


def _accuracy(config) -> float:
    return config["model"]["hidden"] / 1000 + config["task"]["bin_ms"] / 1e5 + config["seed"] / 1e7


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("elm-shd")
    given = []

    def known(exps, dirs, progress=None):
        results = []
        for exp in exps:
            c = exp.config
            net = "lstm" if c["model"]["unit"] == "lstm" else "elm-constant-tau" if c["model"].get("tau_min") else "elm-net"
            given.append((c["task"]["bin_ms"], net, c["seed"], exp))
            if (c["task"]["bin_ms"], net, c["seed"]) == DIVERGED:
                results.append(DivergenceError("diverged", step=2))
                continue
            curve = np.full(2, _accuracy({**c, "model": {"hidden": exp.model.cells[0].hidden}}))
            metrics = xr.Dataset({"eval_accuracy": ("eval_step", curve)}, coords={"eval_step": [0, c["train"]["steps"]]},
                                 attrs={"metric": "accuracy", "chance": 0.5})
            results.append(SimpleNamespace(metrics=metrics))
        return results

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dynlab.train.train_seeds", known)
        result = elm_shd.run_elm_vs_lstm(out, **RUN)
    return out, result["accuracy"], given


def test_every_value_lands_where_its_config_says(run):
    _, ds, given = run
    assert len(given) == len(RUN["seeds"]) * (2 * len(RUN["bins_ms"]) + 1)
    for b, net, seed, exp in given:
        got = ds.accuracy.sel(bin_ms=b, network=net, seed=seed).values
        if (b, net, seed) == DIVERGED:
            assert np.isnan(got).all()
        else:
            np.testing.assert_array_equal(got, _accuracy({**exp.config, "model": {"hidden": exp.model.cells[0].hidden}}))
            assert int(ds.hidden.sel(network=net)) == exp.model.cells[0].hidden
            assert int(ds.params.sel(network=net)) == exp.model.param_count()["total"]


def test_the_lstm_has_the_elm_networks_parameter_count(run):
    _, _, given = run
    counts = {net: exp.model.param_count()["total"] for _, net, _, exp in given}
    assert abs(counts["lstm"] - counts["elm-net"]) <= 0.05 * counts["elm-net"]
    assert counts["elm-constant-tau"] == counts["elm-net"]


def test_the_constant_tau_ablation_runs_at_the_smallest_bin_only(run):
    _, ds, given = run
    smallest = min(RUN["bins_ms"])
    for b, net, _, exp in given:
        if net == "elm-constant-tau":
            assert b == smallest
            m = exp.config["model"]
            assert m["tau_min"] == m["tau_max"] == RUN["constant_tau_ms"] / smallest
    other = ds.accuracy.sel(network="elm-constant-tau").where(ds.bin_ms != smallest, drop=True)
    assert other.size and np.isnan(other).all()
    assert np.isfinite(ds.accuracy.sel(network="elm-constant-tau", bin_ms=smallest)).all()


def test_the_dataset_on_disk_is_the_one_returned(run):
    out, ds, _ = run
    assert (out / "accuracy.png").exists()
    with xr.open_dataset(out / "accuracy.nc") as disk:
        np.testing.assert_array_equal(disk.accuracy.values, ds.accuracy.values)
        assert list(disk.network.values) == ["elm-net", "elm-constant-tau", "lstm"]
