"""The ``cross-fingerprint`` scenario (issue 19, item 5) at toy size: its numbers are those of the
registered analyses run directly on the trained run directories (the scenario adds plumbing, not
numerics; the cores are tested in their own modules), its DSA matrix is a distance matrix, and bad
units fail before any work with one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from dynlab import experiment, registry
from dynlab.cli import main

FP = dict(ics=3, steps=30, burn_in=5, max_steps=40)
CLV = dict(k=2, steps=20, window=20, transient_forward=5, transient_backward=5)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    from dynlab.scenarios.cross_fingerprint import run_cross_fingerprint, summary

    out = tmp_path_factory.mktemp("fingerprint")
    result = run_cross_fingerprint(
        out, units=["rnn", "blockdiag"], width=4, seeds=[0], length=6, steps=2, batch_size=4, n_test=8,
        fp_ics=FP["ics"], fp_steps=FP["steps"], fp_burn_in=FP["burn_in"], fp_max_steps=FP["max_steps"],
        clv_k=CLV["k"], clv_steps=CLV["steps"], clv_transient=CLV["transient_forward"],
        dsa_trials=3, dsa_delays=2, dsa_rank=3, dsa_pcs=2, dsa_iterations=30, dsa_restarts=1)
    return out, result, summary(result)


def test_parts_equal_the_registered_analyses_on_the_trained_runs(toy):
    out, result, table = toy
    fp, clv, dsa = result["fixed_points"], result["clv"], result["dsa"]
    assert {"fixed_points.nc", "clv.nc", "dsa.nc", "fingerprint.png"} <= {p.name for p in out.iterdir()}
    assert (fp.status == "ok").all()
    fixed_points, clv_analysis = (registry.get("analysis", n).obj for n in ("fixed-points", "clv"))
    for unit in ("rnn", "blockdiag"):
        exp = experiment.load_run(out / "runs" / f"{unit}-seed0")
        direct = fixed_points(exp.model, task=exp.task, seed=0, **FP)
        f = fp.sel(unit=unit, seed=0)
        assert int(f.n_points) == direct.sizes["point"] and int(f.n_fixed) == int(direct.is_fixed.sum())
        n = direct.sizes["point"]
        np.testing.assert_array_equal(f.n_unstable.values[:n], direct.n_unstable.values)
        assert (f.n_unstable.values[n:] == -1).all()
        assert int(f.class_count.sum()) == n
        c = clv_analysis(exp.model, task=exp.task, seed=0, **CLV)
        got = clv.sel(unit=unit, seed=0)
        np.testing.assert_allclose(got.median_angle_rest, float(c.median_angle_rest), rtol=1e-6)
        np.testing.assert_allclose(got.min_angle_rest, float(c.min_angle_rest), rtol=1e-6)
        np.testing.assert_allclose(got.readout_angle_median, float(c.readout_angle.sel(vector=1).median()), rtol=1e-6)
    d = dsa.distance.values
    assert d.shape == (2, 2) and np.allclose(d, d.T) and np.all(np.diag(d) == 0) and d[0, 1] > 0
    assert list(dsa.unit.values) == ["rnn", "blockdiag"]
    assert table.splitlines()[1].split()[:3] == ["unit", "loss", "fixed(slow)"]
    assert "blockdiag (" in table.splitlines()[2] and "rnn (" in table.splitlines()[3]  # each other's nearest


@pytest.mark.parametrize("units, says", [('["gru","nope"]', "params.units: unknown unit 'nope'"),
                                         ('["gru"]', "at least 2 units")])
def test_bad_units_fail_before_any_work(units, says, tmp_path):
    r = CliRunner().invoke(main, ["run", "cross-fingerprint", "--set", f"params.units={units}",
                                  "--out", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2, (r.output, r.stderr)
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
