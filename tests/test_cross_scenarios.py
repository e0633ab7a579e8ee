"""The cross-paper scenarios (issue 9, item 4) at toy size: each writes its datasets and figures,
and its numbers equal the same analysis run directly on the same models (the scenario adds
plumbing, not numerics; the numerical cores are tested in their own modules)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr

from dynlab import experiment
from dynlab.errors import ConfigError, DynlabError
from dynlab.scenarios import load
from dynlab.scenarios.every_unit import UNITS, model_section


def test_every_unit_section_is_valid_and_width_sets_the_size():
    for unit in UNITS:
        for width in (8, 32):
            experiment.check({"model": model_section(unit, width), "task": {"name": "adding"}})
    dims = {w: experiment.build({"model": model_section("gru", w)}).model.cells[0].hidden for w in (8, 32)}
    assert dims == {8: 8, 32: 32}
    with pytest.raises(DynlabError, match="unknown unit 'nope'"):
        model_section("nope", 8)


def test_cross_adaptation_builds_the_elm_variants_before_training():
    from dynlab.scenarios.aru_table1 import model_sections

    p = load("cross-adaptation").params
    sections = model_sections(p["networks"], p["hidden"], p["n_g"], 0.05, p["extra_networks"])
    cells = {n: experiment.build({"model": sections[n], "task": {"name": "adding"}}).model.cells[0]
             for n in ("elm", "elm-hp-off", "elm-aru", "elm-aru-hp-off")}
    assert cells["elm"].gain is None and cells["elm"].tau_r == 5.0
    assert cells["elm-aru"].gain is not None and cells["elm-aru"].gain.n_g == 8
    assert math.isinf(cells["elm-hp-off"].tau_r) and math.isinf(cells["elm-aru-hp-off"].tau_r)
    with pytest.raises(ConfigError, match="adaptation"):
        model_sections(["bad"], 8, 2, 0.05, {"bad": {"unit": "elm-net", "adaptation": "yes"}})


def test_cross_lyapunov_matches_the_analysis_run_directly(tmp_path):
    from dynlab.analyses.lyapunov import lyapunov_analysis
    from dynlab.scenarios.cross_lyapunov import run_cross_lyapunov

    lyap = dict(k=2, lyapunov_steps=60, burn_in=10, ics=2)
    ds = run_cross_lyapunov(tmp_path, units=["rnn", "elm"], width=4, seeds=[0], length=5, steps=4, batch_size=8,
                            n_test=16, **lyap)["lyapunov"]
    assert {"lyapunov.nc", "spectra.png", "largest.png"} <= {p.name for p in tmp_path.iterdir()}
    assert (ds.status == "ok").all() and list(ds.stage.values) == ["init", "trained"]
    options = dict(k=2, steps=60, burn_in=10, ics=2, seed=0)
    for unit in ("rnn", "elm"):
        fresh = experiment.build({"seed": 0, "model": model_section(unit, 4), "task": {"name": "adding", "length": 5}})
        trained = experiment.load_run(tmp_path / "runs" / f"{unit}-seed0")
        for stage, model in (("init", fresh.model), ("trained", trained.model)):
            direct = lyapunov_analysis(model, task=fresh.task, **options)
            np.testing.assert_allclose(ds["mean"].sel(unit=unit, seed=0, stage=stage), direct["mean"], rtol=1e-5)
        assert not np.allclose(ds["mean"].sel(unit=unit, stage="init"), ds["mean"].sel(unit=unit, stage="trained"))


def test_cross_trw_matches_the_per_run_analysis(tmp_path):
    from dynlab.scenarios.cross_trw import run_cross_trw

    nets = {"gru": {"unit": "gru", "hidden": 4, "layers": 2, "lr": 3e-3}}
    out = run_cross_trw(tmp_path, networks=nets, seeds=[0], steps=3, n_shuffle=4, dilations=[0, 1])
    trw, acc = out["trw"], out["accuracy"]
    per_run = xr.load_dataset(tmp_path / "runs" / "gru-seed0" / "trw.nc")
    np.testing.assert_array_equal(trw.log3_s50.sel(network="gru", seed=0).values, per_run.log3_s50.values)
    assert trw.sizes["layer"] == 2 and acc.accuracy.shape == (1, 1, 2)
    assert {"trw.nc", "accuracy.nc", "trw_by_layer.png", "accuracy_vs_dilation.png", "trw-gru.png"} <= {
        p.name for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match="lr"):
        run_cross_trw(tmp_path, networks={"gru": {"unit": "gru"}})


