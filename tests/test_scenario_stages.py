"""#34: a scenario's stages after a training step (``step-N``) and after a perturbation of the
trained weights (``isolated``), and ``--set`` on one sweep axis.

Each stage's numbers are checked against the model reached another way: trained N steps as a run
of its own (``step-N``), the trained run's recurrence cut to its diagonal (``isolated``: the
eigenvalues of a diagonal matrix are its entries); the stage must not change the training it
watches. Every stage a cell cannot reach is one line, exit 2, before any work."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr

from cli_runner import TINY_CELL, invoke, one_line_error
from dynlab import config as cfgmod
from dynlab import experiment
from dynlab.errors import ConfigError
from dynlab.scenarios import spec
from dynlab.scenarios.cell import cell_summary, run_cell
from dynlab.train import train

EIGS = '[[analyses]]\nname = "weight-eigs"\nstages = {stages}\n'
STAGES = '["trained", "isolated", "step-3", "init"]'  # any order; step 3 is inside a chunk of 5 steps (log_every = 5)


def text(stages: str = STAGES, cell: str = TINY_CELL, sweep: str = "seed = [0]") -> str:
    return f'name = "stages"\n{cell}{EIGS.format(stages=stages)}[sweep]\n{sweep}\n'


def eigenvalues(model) -> np.ndarray:
    w = np.asarray(model.cells[0].recurrent_matrices()["w_hh"], np.float64)
    return np.sort_complex(np.linalg.eigvals(w))


def stored(ds: xr.Dataset, stage: str) -> np.ndarray:
    sel = ds.sel(stage=stage).squeeze()
    return np.sort_complex((sel["weight-eigs_eig_real"] + 1j * sel["weight-eigs_eig_imag"]).values.ravel())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The scenario's one cell, computed as a sweep computes it (its dataset: what the sweep merges)."""
    root = tmp_path_factory.mktemp("stages")
    (root / "s.toml").write_text(text())
    (cell,) = spec.load(str(root / "s.toml")).cells
    assert run_cell(root / "cell", cell.config, cell.analyses)["status"] == "ok"
    return cell_summary(root / "cell", cell.analyses), cell, root / "cell"


def test_stage_coordinate_is_in_the_order_of_a_cells_life(run):
    ds, _, _ = run
    assert list(ds.stage.values) == ["init", "step-3", "trained", "isolated"]


def test_step_n_is_the_model_trained_n_steps(run):
    ds, cell, _ = run
    three = dataclasses.replace(exp := experiment.build(cell.config), train=dataclasses.replace(exp.train, steps=3))
    np.testing.assert_allclose(stored(ds, "step-3"), eigenvalues(train(three).model), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stored(ds, "init"), eigenvalues(exp.model), rtol=1e-5, atol=1e-6)
    assert not np.allclose(stored(ds, "step-3"), stored(ds, "init"))  # three steps moved the weights


def test_a_step_stage_leaves_the_training_unchanged(run):
    ds, cell, cell_dir = run
    plain = train(experiment.build(cell.config)).model  # the same training without a stop at step 3
    trained = experiment.load_run(cell_dir).model
    for a, b in zip(*(np.asarray(m.cells[0].w_hh) for m in (plain, trained))):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(stored(ds, "trained"), eigenvalues(trained), rtol=1e-5, atol=1e-6)


def test_isolated_is_the_trained_recurrence_cut_to_its_diagonal(run):
    ds, _, cell_dir = run
    diagonal = np.sort_complex(np.diag(np.asarray(experiment.load_run(cell_dir).model.cells[0].w_hh, np.float64)) + 0j)
    np.testing.assert_allclose(stored(ds, "isolated"), diagonal, rtol=1e-6, atol=1e-7)
    assert not np.allclose(stored(ds, "isolated"), stored(ds, "trained"))


@pytest.mark.parametrize("scenario, fragments", [
    (text('["step-11"]'), ["stage 'step-11'", "trains 10 steps", "at most train.steps"]),
    (text('["step-0"]'), ["unknown stage 'step-0'", "step-N (after N training steps)"]),
    (text('["isolated"]', TINY_CELL.replace('"rnn"', '"gru"')), ["'isolated'", "'gru' has no isolated neurons",
                                                                 "aru, rnn, rnn-gamma"]),
    (text('["step-3"]', TINY_CELL.replace("steps = 10", "steps = 0")), ["stage 'step-3'", "train.steps = 0"]),
    (text('["init", "isolated"]', sweep='"model.unit" = ["rnn", "lstm"]'), ["cell unit=lstm", "no isolated neurons"]),
])
def test_a_stage_a_cell_cannot_reach_is_one_line_before_any_work(tmp_path, scenario, fragments):
    (tmp_path / "s.toml").write_text(scenario)
    one_line_error(invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path), *fragments)
    assert not (tmp_path / "out").exists()


# --- --set on one sweep axis ----------------------------------------------------------------------

SWEEP = '"model.hidden" = [4, 8]\nseed = [0, 1, 2]\n[sweep.zip.size]\n"task.length" = [6, 8]\n"train.lr" = [1e-3, 2e-3]\n'


def axes(scenario) -> dict:
    return {a.name: a.values for a in scenario.axes}


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(f'name = "s"\n{TINY_CELL}[sweep]\n{SWEEP}')
    return str(path)


def test_set_changes_one_sweep_axis_and_keeps_the_others(sweep_file):
    before = axes(spec.load(sweep_file))
    after = axes(spec.load(sweep_file, sets=["sweep.seed=[0]"]))
    assert after == {**before, "seed": {"seed": [0]}}
    for form in ("sweep.model.hidden=[8]", 'sweep."model.hidden"=[8]'):
        assert axes(spec.load(sweep_file, sets=[form])) == {**before, "model.hidden": {"model.hidden": [8]}}
    zipped = axes(spec.load(sweep_file, sets=["sweep.zip.size.train.lr=[5e-3, 6e-3]"]))
    assert zipped == {**before, "size": {"task.length": [6, 8], "train.lr": [5e-3, 6e-3]}}


def test_an_unquoted_dotted_sweep_key_in_a_file_is_one_axis(tmp_path, sweep_file):
    unquoted = tmp_path / "u.toml"
    unquoted.write_text(f'name = "s"\n{TINY_CELL}[sweep]\n' + SWEEP.replace('"model.hidden"', "model.hidden", 1)
                        .replace('"task.length"', "task.length").replace('"train.lr"', "train.lr"))
    assert spec.load(str(unquoted)).digest == spec.load(sweep_file).digest


def test_a_sweeps_preset_is_the_same_as_its_overrides(tmp_path):
    """``[presets.NAME]`` of a sweep holds ``--set`` keys as TOML dotted keys: loading at the preset
    is loading with those ``--set`` assignments (one axis replaced, the others kept)."""
    path = tmp_path / "p.toml"
    preset = ('[presets.full]\ndescription = "more"\ntrain.steps = 20\nsweep.seed = [0, 1]\n'
              'sweep."model.hidden" = [8]\n')
    path.write_text(f'name = "s"\n{TINY_CELL}[sweep]\n{SWEEP}{preset}')
    at_preset = spec.load(str(path), preset="full")
    by_sets = spec.load(str(path), sets=["train.steps=20", "sweep.seed=[0, 1]", 'sweep."model.hidden"=[8]'])
    assert at_preset.digest == by_sets.digest != spec.load(str(path)).digest
    assert axes(at_preset) == {**axes(spec.load(str(path))), "seed": {"seed": [0, 1]},
                               "model.hidden": {"model.hidden": [8]}}
    assert {c.config["train"]["steps"] for c in at_preset.cells} == {20}
    with pytest.raises(ConfigError, match="no preset 'paper'; presets: laptop, full"):
        spec.load(str(path), preset="paper")


@pytest.mark.parametrize("assignment", ['sweep."model.hidden=[8]', 'sweep."model hidden"=[8]', "sweep..seed=[0]"])
def test_a_malformed_set_key_is_one_line(tmp_path, sweep_file, assignment):
    with pytest.raises(ConfigError, match="malformed --set"):
        cfgmod.parse_set(assignment)
    one_line_error(invoke(["run", sweep_file, "--set", assignment, "--out", "out", "-q"], tmp_path), "malformed --set")
    assert not (tmp_path / "out").exists()
