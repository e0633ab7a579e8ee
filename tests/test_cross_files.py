"""The language the cross-unit studies are written in (issue 34, item 2): an analysis seeded by its
cell (``seed = "cell"``), named model variants as one sweep axis; and the built-in cross-unit files
themselves, which run from the files alone."""

from __future__ import annotations

import pytest
import xarray as xr

from dynlab import experiment, registry
from dynlab.errors import ConfigError
from dynlab.scenarios import spec

from cli_runner import TINY_CELL, invoke

SEEDED = ('[[analyses]]\nname = "perturb"\nstrengths = [1.0]\nn = 16\ntask = "train"\nseed = "cell"\n'
          'stages = ["init"]\n[sweep]\nseed = [0, 1]\n')


def test_an_analysis_seeded_by_its_cell_is_the_analysis_at_the_cells_seed(tmp_path):
    """Each cell's held-out loss under a noisy drive is the analysis run at that cell's seed (its own
    test samples and noise), not at the analysis's default seed 0."""
    (tmp_path / "s.toml").write_text(f'name = "s"\n{TINY_CELL.replace("steps = 10", "steps = 0")}{SEEDED}')
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 0, r.output
    loss = xr.load_dataset(tmp_path / "out" / "sweep.nc")["perturb_loss"].sel(stage="init", perturb_strength=1.0)
    fn = registry.get("analysis", "perturb").obj
    for cell in spec.load(str(tmp_path / "s.toml")).cells:
        exp = experiment.build(spec.without_training(cell.config)[0])
        seed = cell.coords["seed"]
        at = {s: float(fn(exp.model, task=exp.task, strengths=[1.0], n=16, seed=s).loss[0]) for s in (0, seed)}
        assert float(loss.sel(seed=seed)) == pytest.approx(at[seed], rel=1e-6)
        if seed:  # the cell's seed drew other samples than seed 0 would have
            assert float(loss.sel(seed=seed)) != pytest.approx(at[0], rel=1e-3)


@pytest.mark.parametrize("extra, message", [
    ('[[analyses]]\nname = "dsa"\nseed = "cell"\n', "analyses.dsa.seed = \"cell\": this analysis takes no seed of one cell"),
    ('[[analyses]]\nname = "weight-eigs"\nseed = "cell"\n', "analyses.weight-eigs.seed = \"cell\""),
])
def test_a_cell_seed_where_none_is_taken_is_one_line_before_any_work(tmp_path, extra, message):
    (tmp_path / "s.toml").write_text(f'name = "s"\n{TINY_CELL}{extra}[sweep]\nseed = [0, 1]\n')
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 2 and message in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError):
        spec.load(str(tmp_path / "s.toml"))


VARIANTS = """[sweep.variants.network.tanh]
model = { unit = "rnn", hidden = 4 }
[sweep.variants.network.relu-wide]
model = { unit = "rnn", activation = "relu", hidden = 6 }
"train.lr" = 1e-2
"""
EIGS = '[[analyses]]\nname = "weight-eigs"\nstages = ["init"]\n'


def test_each_variant_sets_its_own_keys_and_is_a_coordinate_by_its_name(tmp_path):
    """A variant axis: every cell has its variant's keys and the base's others; the sweep's
    coordinate is the variants' names, and what they build differs as their keys say (the
    recurrent matrix of an RNN of 4 and of 6 neurons: 4 and 6 eigenvalues)."""
    cell = TINY_CELL.replace("steps = 10", "steps = 0")
    (tmp_path / "s.toml").write_text(f'name = "s"\n{cell}{EIGS}{VARIANTS}[sweep]\nseed = [0]\n')
    cells = spec.load(str(tmp_path / "s.toml")).cells
    assert [c.coords["network"] for c in cells] == ["tanh", "relu-wide"]
    assert cells[1].config["model"] == {"unit": "rnn", "activation": "relu", "hidden": 6}
    assert cells[1].config["train"]["lr"] == 1e-2 and "lr" not in cells[0].config["train"]
    assert cells[0].config["task"] == cells[1].config["task"]  # the base's sections stay
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 0, r.output
    ds = xr.load_dataset(tmp_path / "out" / "sweep.nc")
    assert list(ds["network"].values) == ["tanh", "relu-wide"]
    n = ds["weight-eigs_n_eigenvalues"].sel(stage="init", seed=0).squeeze("weight-eigs_matrix")
    assert dict(zip(ds["network"].values, n.values.tolist())) == {"tanh": 4, "relu-wide": 6}


@pytest.mark.parametrize("sweep, message", [
    ('[sweep.variants.network.tanh]\nmodel = { unit = "rnn", hiden = 4 }\n', "hiden"),
    ('[sweep.variants.network."a b"]\nmodel = { unit = "rnn" }\n', "variant name 'a b' must be letters"),
    ('[sweep.variants.network.tanh]\n', "[sweep.variants.network.tanh] must be a non-empty table"),
    ('[sweep.variants]\nnetwork = 3\n', "[sweep.variants.network] must hold one table per variant"),
])
def test_a_bad_variant_is_one_line_before_any_work(tmp_path, sweep, message):
    (tmp_path / "s.toml").write_text(f'name = "s"\n{TINY_CELL}{sweep}')
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 2 and message in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "out").exists()
