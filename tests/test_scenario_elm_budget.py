"""Scenario ``elm-budget`` checked by properties, not by pinned numbers.

Two runs of [`dynlab.scenarios.elm_budget.run_elm_budget`][]:

- **trained**: the smallest grid the I_rep fit accepts (one budget, 2 memory sizes x 2 seeds: 4
  networks, 3 steps each; the seeds of one size train as one vmapped program, so 2 compile),
  checked against identities that hold whatever the numbers are: the budget arithmetic
  $P = N(k_e + k_c) \\le$ budget $< (N + 1)(k_e + k_c)$, each table entry equal to the final
  held-out loss its run directory wrote, and the fit's least-squares identities (fitted losses on
  the line $c_0 - c_1 I_{\\rm rep}$, residuals orthogonal to $1$ and to $I_{\\rm rep}$, Pearson r of
  measured and fitted).
- **wiring**: the single-axis sweeps and the $\\rho_{rec} = 0$ ablation with training replaced by a
  known function of each run's config, so that every value must land where its config says (which
  network, which axis, which ablation) — no compilation, so the whole path costs a second.

Replaces the toy run's snapshot (``tests/reference/scenarios.json``), which pinned the numbers of
11 networks trained 3 steps (87 s of the suite) and re-recorded whenever rounding moved.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from dynlab.scenarios import elm_budget

GRID = dict(budgets=[2000], d_ms=[2, 5], seeds=[0, 1], steps=3, batch_size=4, eval_size=8)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("elm-budget")
    return out, elm_budget.run_elm_budget(out, **GRID)


def test_each_network_is_the_widest_that_fits_its_budget(trained):
    _, res = trained
    ds = res["budget"]
    per_neuron = ds.k_e + ds.k_c
    np.testing.assert_array_equal(ds.P, ds.N * per_neuron)
    assert (ds.P <= ds.budget).all() and ((ds.N + 1) * per_neuron > ds.budget).all()
    assert (ds.N >= 1).all() and (np.diff(ds.k_e.values[0]) > 0).all()  # k_e grows with d_m


def test_the_table_holds_each_runs_final_held_out_loss(trained):
    out, res = trained
    ds = res["budget"]
    for d in GRID["d_ms"]:
        for seed in GRID["seeds"]:
            with xr.open_dataset(out / "runs" / f"P2000-dm{d}-seed{seed}" / "metrics.nc") as m:
                assert int(m.eval_step[-1]) == GRID["steps"]
                assert float(ds.loss.sel(budget=2000, d_m=d, seed=seed)) == float(m.eval_loss[-1])
                assert float(ds.accuracy.sel(budget=2000, d_m=d, seed=seed)) == float(m.eval_accuracy[-1])
    assert ds.loss.sel(seed=0).values.tolist() != ds.loss.sel(seed=1).values.tolist()  # each seed its own run


def test_the_fit_is_least_squares_on_its_line(trained):
    """For the fitted theory parameters, offset and scale are the linear least squares of the losses on
    I_rep: the normal equations hold, whatever the losses are."""
    _, res = trained
    fit, ds = res["i_rep_fit"], res["budget"]
    np.testing.assert_array_equal(np.sort(fit.loss.values), np.sort(ds.loss.values.ravel()))
    i_rep, r = fit.i_rep.values, fit.residual.values
    np.testing.assert_allclose(fit.fitted_loss, float(fit.offset) - float(fit.scale) * i_rep, rtol=1e-12)
    np.testing.assert_allclose(r, fit.loss - fit.fitted_loss, rtol=0, atol=1e-12)
    scale = np.abs(r).max()
    assert abs(r.sum()) <= 1e-9 * scale * r.size and abs((r * i_rep).sum()) <= 1e-9 * scale * np.abs(i_rep).sum()
    np.testing.assert_allclose(float(fit.pearson_r), np.corrcoef(fit.loss, fit.fitted_loss)[0, 1], rtol=1e-9)
    np.testing.assert_allclose(float(fit.sse), (r**2).sum(), rtol=1e-9)


def _fake_train(configs, dirs):
    """Training replaced by a known function of the config: loss = N + d_m / 100 (+ 0.5 without
    recurrence), with the counts of a layer of k_e = 100 d_m, k_c = 300."""
    model = configs[0]["model"]
    n, d = model["hidden"], model["d_m"]
    loss = n + d / 100 + 0.5 * (model.get("rho_rec") == 0.0)
    for run_dir in dirs:
        run_dir.mkdir(parents=True)
    counts = {"N": n, "k_e": 100 * d, "k_c": 300, "P": n * (100 * d + 300)}
    return np.full(len(configs), loss), np.full(len(configs), 0.5), "accuracy", "fake", counts


def test_axes_and_the_feed_forward_ablation_put_each_run_where_its_config_says(tmp_path, monkeypatch):
    monkeypatch.setattr(elm_budget, "_train_cell", _fake_train)
    res = elm_budget.run_elm_budget(tmp_path, budgets=[2000, 4000], d_ms=[2, 3, 5], seeds=[0, 1], steps=3,
                                    n_sweep={"d_m": 2, "hidden": [5, 3, 4]}, k_e_sweep={"hidden": 3, "d_ms": [5, 2, 3]},
                                    rho_rec_zero=True)
    axes = res["axes"]
    assert list(axes.hidden.values) == [3, 4, 5] and list(axes.d_m.values) == [2, 3, 5]  # sorted
    np.testing.assert_array_equal(axes.loss_vs_n.sel(seed=1), [3.02, 4.02, 5.02])
    np.testing.assert_array_equal(axes.loss_vs_d_m.sel(seed=0), [3.02, 3.03, 3.05])
    np.testing.assert_array_equal(axes.k_e, [200, 300, 500])
    # the best cell is the grid's lowest mean loss: the smallest N, at budget 2000 and d_m = 5
    grid = res["budget"]
    best = grid.loss.mean("seed").where(grid.loss.mean("seed") == grid.loss.mean("seed").min(), drop=True)
    (b,), (d,) = best.budget.values, best.d_m.values
    rho = res["rho_rec_zero"]
    np.testing.assert_array_equal(rho.loss.sel(network="default"), grid.loss.sel(budget=b, d_m=d))
    np.testing.assert_array_equal(rho.loss.sel(network="feed-forward") - rho.loss.sel(network="default"), [0.5, 0.5])
    assert list(rho.rho_rec.values) == [0.25, 0.0] and rho.attrs["budget"] == b and rho.attrs["d_m"] == d
    runs = {p.name for p in (tmp_path / "runs").iterdir()}
    assert {f"P{b}-dm{d}-rho0-seed1", "N5-dm2-seed0", "N3-dm5-seed1", "P4000-dm3-seed0"} <= runs
    assert len(runs) == 2 * (6 + 5 + 1)  # grid, the sweeps' distinct points (N3-dm2 on both), ablation
    for name in ("budget.nc", "i_rep_fit.nc", "axes.nc", "rho_rec_zero.nc", "axes.png"):
        assert (tmp_path / name).is_file()
