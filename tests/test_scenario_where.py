"""#35 on #34's language: an ``[[analyses]]`` entry's ``where`` runs it in the cells it selects only.

A study of several tasks measures each with what fits it (a recovery score where there is a
teacher, a fixed-point count on the flip-flop). The selected cells' results must be the analysis
of their own model, computed another way (the eigenvalues of the stored ``W_hh``); the others have
none (NaN, result status ``n/a``), and the sweep is still complete. A ``where`` naming an axis the
sweep lacks, or a value off its axis, is one line and exit 2 before any work."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from cli_runner import TINY_CELL, invoke, one_line_error
from dynlab import experiment
from dynlab.scenarios import spec

SWEEP = '[sweep]\n"model.hidden" = [4, 3]\n'


FINAL_CLAIM = """[[claims]]
id = "trained"
statement = "The held-out loss at the last evaluation is below 100"
variable = "train_eval_loss"
reduce = "final"
over = "model.hidden"
below = 100.0
"""
"""A claim on the final value of a training metric (issue 48): judged on each cell's last evaluation."""


def study(where: str) -> str:
    return f'name = "where"\n{TINY_CELL}[[analyses]]\nname = "weight-eigs"\n{where}\n' + SWEEP


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("where")
    (root / "s.toml").write_text(study('where = {"model.hidden" = 4}') + FINAL_CLAIM)
    res = invoke(["run", "s.toml", "--out", "out", "-q"], root)
    assert res.exit_code == 0, res.output + res.stderr
    return root / "out", res


def test_only_the_selected_cells_run_the_analysis(run):
    out, _ = run
    ds = xr.load_dataset(out / "sweep.nc")
    assert (ds["status"] == "ok").all()
    status = ds["result_status"]
    assert list(status["result"].values) == ["train", "weight-eigs"]
    assert list(status.sel({"model.hidden": 4}).values) == ["ok", "ok"]
    assert list(status.sel({"model.hidden": 3}).values) == ["ok", "n/a"]
    assert np.isnan(ds["weight-eigs_eig_real"].sel({"model.hidden": 3}).values).all()


def test_a_selected_cells_result_is_its_own_models_analysis(run):
    """The truth another way: the eigenvalues of the cell's stored, trained ``W_hh``."""
    out, _ = run
    ds = xr.load_dataset(out / "sweep.nc")
    cell = next(c for c in spec.load(str(out / "scenario.toml")).cells if c.coords["model.hidden"] == 4)
    from dynlab.scenarios.sweep import cell_dir

    model = experiment.load_run(cell_dir(out, cell)).model
    w = np.asarray(model.cells[0].recurrent_matrices()["w_hh"], np.float64)
    truth = np.sort_complex(np.linalg.eigvals(w))
    sel = ds.sel({"model.hidden": 4}).squeeze()
    got = sel["weight-eigs_eig_real"].values + 1j * sel["weight-eigs_eig_imag"].values
    got = np.sort_complex(got[np.isfinite(got)])
    np.testing.assert_allclose(got, truth, atol=1e-5)


def test_a_sweep_whose_analysis_skips_cells_is_complete(run):
    _, res = run
    assert "incomplete" not in res.stderr and "2 ok" in res.output


@pytest.mark.parametrize("where, fragments", [
    ('where = {"model.width" = 4}', ["analyses.weight-eigs.where", "'model.width' is not a sweep axis",
                                     "axes: model.hidden"]),
    ('where = {"model.hidden" = [4, 5]}', ["model.hidden = 5 is not on the axis", "its values: 4, 3"]),
    ('where = "model.hidden"', ["analyses.weight-eigs.where must be a table of sweep axis"]),
])
def test_a_where_off_the_sweep_is_one_line_before_any_work(tmp_path, where, fragments):
    (tmp_path / "s.toml").write_text(study(where))
    one_line_error(invoke(["run", "s.toml", "--out", "out"], tmp_path), *fragments)
    assert not (tmp_path / "out").exists()


def test_an_analysis_across_cells_compares_only_the_cells_it_selects(tmp_path):
    """DSA needs two runs: selecting one cell of two is refused before any work, naming one run."""
    text = study("").replace(SWEEP, "") + (
        '[[analyses]]\nname = "dsa"\ntask = "train"\nwhere = {"model.hidden" = 4}\n' + SWEEP)
    (tmp_path / "s.toml").write_text(text)
    one_line_error(invoke(["run", "s.toml", "--out", "out"], tmp_path), "analyses.dsa (across the 1 cell)")


def test_a_claim_on_the_final_evaluation_is_judged_on_each_cells_last_one(run):
    """The truth read another way: the last ``eval_loss`` of each cell's own ``metrics.nc``."""
    from dynlab import store
    from dynlab.scenarios.sweep import cell_dir

    out, _ = run
    last = [float(xr.load_dataset(cell_dir(out, c) / store.METRICS)["eval_loss"].values[-1])
            for c in spec.load(str(out / "scenario.toml")).cells]
    findings = xr.load_dataset(out / "findings.nc")
    assert str(findings.outcome.values[0]) in ("holds", "undecided")
    assert float(findings.value.values[0]) == pytest.approx(np.mean(last), rel=1e-6)
