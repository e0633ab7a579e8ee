"""Issue 48 §4: run directories (an imported PyTorch network) as cells of a study, and the group
tests of ``dynlab analyze dsa --runs``.

The truths: the run's analysis in the study is that of the PyTorch module itself (the spectral
radius of its ``weight_hh_l0``, by NumPy); the group means are the means of the distance matrix's
entries computed here with NumPy; labels are the user's words (the ``label`` key, the directory's
name), never a hash. Every mistake in a ``[[runs]]`` table is one line, exit 2, before any work."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from dynlab import config as cfgmod
from dynlab.analyses.dsa.model import run_labels
from dynlab.scenarios import spec

from cli_runner import invoke, one_line_error

TRAIN = """[task]
name = "adding"
length = 6
[train]
steps = 10
batch_size = 8
eval_size = 16
log_every = 5
eval_every = 5
checkpoint_every = 10
"""
LYAPUNOV = '[[analyses]]\nname = "lyapunov"\nk = 2\nsteps = 120\nburn_in = 60\nrealisations = 2\n'
WEIGHT_EIGS = '[[analyses]]\nname = "weight-eigs"\n'
DSA = ('[[analyses]]\nname = "dsa"\ntrials = 4\nn_delays = 2\nrank = 2\npcs = 2\niterations = 30\nrestarts = 1\n'
       'null_draws = 2\n')
VARIANTS = '[sweep]\nseed = [0, 1]\n[sweep.variants.network.rnn]\nmodel = {unit = "rnn", hidden = 4}\n'
RUN_CONFIG = {"seed": 0, "model": {"unit": "gru", "hidden": 4}, "task": {"name": "adding", "length": 6},
              "rule": {"name": "bptt"}, "train": {}}


def fake_run(path, config=RUN_CONFIG):
    """A run directory as a study's parse sees it (its config; weights it does not read)."""
    path.mkdir(parents=True)
    (path / "config.toml").write_text(cfgmod.dumps(config))
    (path / "model.eqx").write_bytes(b"weights")
    return path


def study(runs: str, *, analyses: str = LYAPUNOV, sweep: str = VARIANTS, extra: str = "") -> str:
    return f'name = "with-runs"\n{TRAIN}{analyses}{runs}\n{extra}\n{sweep}'


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNLAB_DATA", str(tmp_path / "data"))
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


def test_a_run_is_a_cell_at_its_label_on_the_variant_axis(tmp_path, data_dir):
    fake_run(tmp_path / "torch-gru")
    fake_run(data_dir / "published" / "gru")
    path = tmp_path / "study.toml"
    path.write_text(study('[[runs]]\npath = "torch-gru"\nlabel = "torch GRU"\n[[runs]]\npath = "published/gru"\n'))
    scenario = spec.load(str(path))
    network = next(a for a in scenario.axes if a.name == "network")
    assert network.values["network"] == ["rnn", "torch GRU", "gru"] and network.trained == 1
    runs = [c for c in scenario.cells if c.run is not None]
    assert [(c.coords, spec.cell_name(c)) for c in runs] == [
        ({"seed": 0, "network": "torch GRU"}, "torch GRU"), ({"seed": 0, "network": "gru"}, "gru")]
    assert len(scenario.cells) == 4  # 2 trained seeds and the 2 runs, each at seed 0 only
    assert runs[1].run.path == str((data_dir / "published" / "gru").resolve())  # from $DYNLAB_DATA
    key, digest = runs[0].key, scenario.digest
    (tmp_path / "torch-gru" / "model.eqx").write_bytes(b"other weights")  # a run changed on disk is a new cell
    again = spec.load(str(path))
    assert [c for c in again.cells if c.run is not None][0].key != key and again.digest != digest


@pytest.mark.parametrize("runs, setup, sweep, analyses, message", [
    ('path = "nowhere"', None, VARIANTS, LYAPUNOV, "no such run directory"),
    ('path = "empty"', "empty", VARIANTS, LYAPUNOV, "is not a run directory: it has no config.toml and no model.eqx"),
    ('path = "../elsewhere/run"', "outside", VARIANTS, LYAPUNOV, "outside the study's folder and the data directory"),
    ('path = "run"\nlabel = "a"\n[[runs]]\npath = "run2"\nlabel = "a"', "two", VARIANTS, LYAPUNOV,
     "the label 'a' is already another run's"),
    ('path = "run"\nlabel = "rnn"', "run", VARIANTS, LYAPUNOV, "the label 'rnn' is already a value of the axis network"),
    ('path = "run"\nlabel = "x"\n[[runs]]\npath = "run"\nlabel = "y"', "run", VARIANTS, LYAPUNOV, "is already a cell ('x')"),
    ('path = "run"', "run", "[sweep]\nseed = [0, 1]\n", LYAPUNOV, "a sweep axis of names"),
    ('path = "run"', "run", VARIANTS, LYAPUNOV + 'stages = ["init", "trained"]\n', "taken as it is, not trained"),
    ('path = "run"\ncolour = 1', "run", VARIANTS, LYAPUNOV, "unknown key(s) colour"),
])
def test_a_mistake_in_runs_is_one_line_before_any_work(tmp_path, data_dir, runs, setup, sweep, analyses, message):
    root = tmp_path / "study"
    root.mkdir()
    if setup == "empty":
        (root / "empty").mkdir()
    elif setup == "outside":
        fake_run(tmp_path / "elsewhere" / "run")
    elif setup in ("run", "two"):
        fake_run(root / "run")
        if setup == "two":
            fake_run(root / "run2")
    (root / "study.toml").write_text(study(f"[[runs]]\n{runs}\n", sweep=sweep, analyses=analyses))
    one_line_error(invoke(["run", "study.toml", "--out", "out", "-q"], root), message)
    assert not (root / "out").exists()


def test_a_hash_named_cell_is_labelled_by_what_sets_it_apart(tmp_path):
    runs = [tmp_path / "torch-gru", tmp_path / "cells" / "0123456789abcdef", tmp_path / "cells" / "fedcba9876543210"]
    configs = [RUN_CONFIG, {**RUN_CONFIG, "model": {"unit": "rnn", "hidden": 4}, "seed": 0},
               {**RUN_CONFIG, "model": {"unit": "rnn", "hidden": 4}, "seed": 1}]
    assert run_labels(runs, configs) == ["torch-gru", "seed=0", "seed=1"]
    assert run_labels([tmp_path / "a" / "gru", tmp_path / "b" / "gru"], configs[:2]) == ["a/gru", "b/gru"]


@pytest.fixture(scope="module")
def imported_study(tmp_path_factory):
    """An RNN trained for a few steps in plain PyTorch on dynlab's adding batches and imported, in a
    study beside two seeds of a dynlab-trained RNN of the same size (one unit, one name: only the
    label tells them apart); run with ``dynlab run``."""
    torch = pytest.importorskip("torch")
    import jax

    from dynlab import registry

    root = tmp_path_factory.mktemp("imported")
    torch.manual_seed(0)
    rnn, readout = torch.nn.RNN(2, 4, batch_first=True), torch.nn.Linear(4, 1)
    opt = torch.optim.Adam([*rnn.parameters(), *readout.parameters()], lr=1e-2)
    task = registry.build("task", "adding", length=6)
    for i in range(20):
        x, y = (torch.from_numpy(np.array(a)) for a in task.batch(jax.random.key(i), 16)[:2])
        loss = torch.mean((readout(rnn(x)[0])[:, -1] - y.reshape(16, -1)[:, -1:]) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
    radius = float(np.abs(np.linalg.eigvals(rnn.weight_hh_l0.detach().numpy().astype(np.float64))).max())
    torch.save({**{f"rnn.{k}": v for k, v in rnn.state_dict().items()},
                **{f"fc.{k}": v for k, v in readout.state_dict().items()}}, root / "rnn.pt")
    done = invoke(["import", "rnn.pt", "--format", "torch-rnn", "--nonlinearity", "tanh", "--task", "adding",
                   "--set", "task.length=6", "--out", "torch-rnn", "-q"], root)
    assert done.exit_code == 0, done.output
    before = sorted(p.name for p in (root / "torch-rnn").iterdir())
    claim = ('[[claims]]\nid = "torch-error"\nstatement = "the torch RNN\'s held-out error is below 1"\n'
             'variable = "train_eval_mse"\nreduce = "final"\nwhere = {network = "torch RNN"}\nbelow = 1.0\n')
    (root / "study.toml").write_text(study('[[runs]]\npath = "torch-rnn"\nlabel = "torch RNN"\n',
                                           analyses=WEIGHT_EIGS + DSA, extra=claim))
    r = invoke(["run", "study.toml", "--out", "out", "-q"], root)
    assert r.exit_code == 0, (r.output, r.stderr)
    return root, r, before, radius


def test_the_run_is_analysed_as_it_is_beside_the_trained_cells(imported_study):
    root, r, before, radius = imported_study
    sweep = xr.load_dataset(root / "out" / "sweep.nc", engine="h5netcdf")
    assert list(sweep["network"].values) == ["rnn", "torch RNN"]
    status = sweep["status"].sel(network="torch RNN")
    assert list(status.values) == ["ok", "n/a"]  # seed 0 is the run; seed 1 holds no cell
    ours = sweep["weight-eigs_spectral_radius"].sel(network="torch RNN", seed=0)
    assert float(ours.squeeze()) == pytest.approx(radius, rel=1e-5)  # PyTorch's own recurrent matrix
    assert sorted(p.name for p in (root / "torch-rnn").iterdir()) == before  # read, never written
    assert "n/a" not in r.output  # a position without a cell is no failed cell
    findings = xr.load_dataset(root / "out" / "findings.nc", engine="h5netcdf")
    verdict = str(findings["verdict"].values[0])  # the run's final held-out MSE: its one value, not 1 of 2 missing
    assert float(findings["value"].values[0]) == pytest.approx(float(sweep["train_eval_mse"].sel(
        network="torch RNN", seed=0).dropna("train_eval_step")[-1])) and "only one value over seed" in verdict


def test_dsa_across_the_study_labels_and_groups_the_run_by_its_label(imported_study):
    root = imported_study[0]
    ds = xr.load_dataset(root / "out" / "dsa.nc", engine="h5netcdf")
    labels = [str(v) for v in ds["run"].values]
    assert labels == ["seed=0, network=rnn", "seed=1, network=rnn", "torch RNN"]
    assert list(ds["group"].values) == ["network=rnn", "network=rnn", "torch RNN"]
    d = ds["distance"].values
    table = ds["distance_by_group"].sel(run_group="network=rnn")
    assert float(table.sel(run_group_b="torch RNN")) == pytest.approx(d[[0, 1], 2].mean())
    assert float(table.sel(run_group_b="network=rnn")) == pytest.approx(d[0, 1])


def test_dsa_runs_on_the_command_line_has_the_studys_group_tests(imported_study):
    root = imported_study[0]
    options = ["--trials", "4", "--delays", "2", "--rank", "2", "--pcs", "2", "--iterations", "30", "--restarts", "1",
               "--null-draws", "2"]
    r = invoke(["analyze", "dsa", "torch-rnn", "--runs", "out/cells", "--group", "torch=torch-rnn", *options,
                "--out", "dsa.nc", "-q"], root)
    assert r.exit_code == 0, (r.output, r.stderr)
    ds = xr.load_dataset(root / "dsa.nc", engine="h5netcdf")
    labels = [str(v) for v in ds["run"].values]
    assert labels[0] == "torch-rnn" and sorted(labels[1:]) == ["seed=0", "seed=1"]  # no hash, no "gru bptt s0"
    assert list(ds["group"].values) == ["torch", "rnn", "rnn"]  # --group, else the unit
    d = ds["distance"].values
    assert float(ds["distance_by_group"].sel(run_group="torch", run_group_b="rnn")) == pytest.approx(d[0, 1:].mean())
    assert "distance_group_p_value" in ds and "mean distance between groups" in r.output
    bad = invoke(["analyze", "dsa", "torch-rnn", "--runs", "out/cells", "--group", "torch=nowhere", *options,
                  "--out", "dsa2.nc", "-q"], root)
    one_line_error(bad, "--group torch: 'nowhere' is not one of the runs compared")
