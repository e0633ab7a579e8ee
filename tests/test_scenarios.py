"""Scenario files and sweeps: validation before work, resume, kill -9, workers, determinism."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

from dynlab.cli import main
from dynlab.errors import DataError
from dynlab.scenarios import load, parse
from dynlab.scenarios.cell import MARKER
from dynlab.scenarios.sweep import run_sweep
from cli_runner import TINY_CELL

TINY = ("""
name = "tiny"
description = "8 tiny cells"
"""
        + TINY_CELL
        + """[[analyses]]
name = "lyapunov"
k = 2
steps = 40
burn_in = 10
ics = 2
[sweep]
"model.gain" = [1.0, 0.5]
seed = [0, 1]
[sweep.zip.opt]
"train.lr" = [1e-3, 1e-2]
"train.warmup" = [0, 2]
""")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted in-process run of the 8-cell sweep.

    Its model axis (``model.gain``, the RNN's initial recurrent scale) changes values, not shapes,
    so every cell of one optimiser setting runs the same compiled programs; sweeps over shapes
    (``model.hidden``, ``model.unit``) are merged in tests/test_sweep_units.py."""
    root = tmp_path_factory.mktemp("ref")
    (root / "tiny.toml").write_text(TINY)
    merged = run_sweep(load(str(root / "tiny.toml")), root / "out")
    return root, merged


def test_sweep_merges_all_cells(reference):
    _, ds = reference
    assert dict(ds["status"].sizes) == {"model.gain": 2, "seed": 2, "opt": 2}
    assert (ds["status"] == "ok").all()
    assert list(ds["train.lr"].values) == [1e-3, 1e-2] and ds["train_loss"].dims[-1] == "train_step"
    assert ds["lyapunov_mean"].dims == ("model.gain", "seed", "opt", "lyapunov_exponent")
    # cells differ: different seeds, and different gains, give different curves
    assert not np.array_equal(ds.train_loss.isel(seed=0).values, ds.train_loss.isel(seed=1).values)
    assert not np.array_equal(ds.train_loss.isel({"model.gain": 0}).values, ds.train_loss.isel({"model.gain": 1}).values)


def test_kill_minus_9_then_resume_equals_uninterrupted(reference, tmp_path):
    """A real ``dynlab run`` killed with SIGKILL after at least 3 of its 8 cells finished; then, in
    this process, one resume of it, which also makes a finished cell partial (its marker removed)
    and another corrupt (its metrics' bytes changed: the hash no longer matches). The resume counts
    the intact cells as done before any work, leaves their files untouched, recomputes the rest
    (partial, corrupt, and those the kill left unfinished), and ends with the dataset of the
    uninterrupted run. Two tests before, the partial-or-corrupt resume on a copy of the reference:
    each resumed and merged the 8 cells again (about 5 s of CPU each); all their assertions are here."""
    root, ref = reference
    out = tmp_path / "killed"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dynlab.cli", "run", str(root / "tiny.toml"), "--out", str(out), "-q"],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path,  # not the source tree
        )
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and len(list(out.glob(f"cells/*/{MARKER}"))) < 3:
        time.sleep(0.2)
    assert proc.poll() is None, f"the sweep ended before it could be killed: {log.read_text()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = sorted(p.parent for p in out.glob(f"cells/*/{MARKER}"))
    assert 3 <= len(finished) < 8, len(finished)
    partial, corrupt, *intact = finished
    (partial / MARKER).unlink()  # partial: no marker
    (corrupt / "metrics.nc").write_bytes(b"corrupted")  # corrupt: hash mismatch
    untouched = {p: p.stat().st_mtime_ns for cell in intact for p in cell.iterdir()}
    ran = []
    merged = run_sweep(load(str(root / "tiny.toml")), out, resume=True, progress=lambda d, t, f: ran.append(d))
    assert ran[0] == len(intact)  # the intact cells counted as done before any work
    assert {p: p.stat().st_mtime_ns for cell in intact for p in cell.iterdir()} == untouched  # not recomputed
    assert len(list(out.glob(f"cells/*/{MARKER}"))) == 8
    xr.testing.assert_identical(merged.drop_attrs(), ref.drop_attrs())
    xr.testing.assert_identical(xr.load_dataset(out / "sweep.nc").drop_attrs(),
                                xr.load_dataset(root / "out" / "sweep.nc").drop_attrs())


def test_workers_give_the_same_dataset(reference, tmp_path):
    """Cells computed by a worker process (a ``LocalCluster`` of processes, as ``--workers`` makes)
    give the dataset of cells computed in this process. One worker: its first cell runs in a fresh
    process, its second after that one only, while here both run after the reference's eight, so
    neither cell's numbers may depend on what its process computed before. A second worker process
    cost another ~12 s of CPU (its start-up and its first cell's tracing: 23.4 s of the workers'
    CPU against 11.6 s with one, measured here) for no further comparison."""
    # two of the reference's cells (gain 1, the default lr 1e-3 without warmup): the serial run reuses its programs
    doc = TINY.replace('"model.gain" = [1.0, 0.5]', '"model.gain" = [1.0]').split("[sweep.zip.opt]")[0]
    (tmp_path / "s.toml").write_text(doc)
    a = run_sweep(load(str(tmp_path / "s.toml")), tmp_path / "a")
    b = run_sweep(load(str(tmp_path / "s.toml")), tmp_path / "b", workers=1)
    xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())


def test_failed_and_diverged_cells_are_marked_and_the_sweep_continues(tmp_path):
    doc = TINY.split("[sweep]")[0] + '[sweep]\n"train.lr" = [1e-3, 1e6]\n"train.optimizer" = ["sgd"]\n'
    doc = doc.replace("[train]\n", "[train]\nclip = 0.0\n").replace('unit = "rnn"', 'unit = "rnn"\nactivation = "relu"')
    (tmp_path / "d.toml").write_text(doc)
    ds = run_sweep(load(str(tmp_path / "d.toml")), tmp_path / "out")
    status = ds["status"].values.ravel().tolist()
    assert status == ["ok", "diverged"], status
    assert "diverged at step" in str(ds["message"].values.ravel()[1])


BAD = [
    ("bogus = 1\n", "unknown scenario key(s) bogus"),
    ('[model]\nunit = "nope"\n', "unknown unit 'nope'"),
    ('[model]\nhiden = 3\n', "unknown config key model.hiden"),
    ('[model]\nhidden = "many"\n', "model.hidden must be int"),
    ('[task]\nname = "nope"\n', "unknown task 'nope'"),
    ('[rule]\nname = "nope"\n', "unknown rule 'nope'"),
    ('[[analyses]]\nname = "nope"\n', "unknown analysis 'nope'"),
    ('[[analyses]]\nname = "lyapunov"\nkk = 3\n', "unknown config key analyses.lyapunov.kk"),
    ('[sweep]\nseed = []\n', "axis 'seed' is empty"),
    ('[sweep]\n"model.hidden" = [4, -1]\n', "hidden must be a positive integer"),
    ("[model\n", "not valid TOML"),
]


@pytest.mark.parametrize("text, fragment", BAD)
def test_bad_scenarios_fail_before_any_work(text, fragment, tmp_path):
    (tmp_path / "bad.toml").write_text(text)
    r = CliRunner().invoke(main, ["run", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 2, (r.output, r.stderr)
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and fragment in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_builtin_scenarios_parse_and_are_listed():
    r = CliRunner().invoke(main, ["list", "scenarios"])
    assert r.exit_code == 0 and "aru-seeds" in r.output
    from dynlab.scenarios import builtin_names

    for name in builtin_names():
        try:
            load(name)  # every built-in scenario is valid: raises on any bad key, type or cell config
        except DataError:  # cross-adaptation's cells are checked on the real psMNIST files (CI has them)
            if os.environ.get("DYNLAB_DATA"):
                raise


def test_plot_picks_the_figure(reference, tmp_path):
    root, _ = reference
    for nc in [root / "out" / "sweep.nc", next((root / "out" / "cells").glob("*/lyapunov.nc")),
               next((root / "out" / "cells").glob("*/metrics.nc"))]:
        png = tmp_path / (nc.parent.name + nc.stem + ".png")
        r = CliRunner().invoke(main, ["plot", str(nc), "--out", str(png)])
        assert r.exit_code == 0 and png.stat().st_size > 10_000, r.stderr
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "nope.nc")])
    assert r.exit_code == 2 and "no result file" in r.stderr


def test_vmap_seeds_path_agrees_with_one_cell_per_seed(reference, tmp_path):
    """The reference's four cells of its second optimiser setting (lr 1e-2 with 2 warm-up steps, the
    one that is not the default), both gains: two groups of two vmapped seeds, one compiled vmapped
    training program (the gain is a value); the other setting would compile a second one and
    merge four more cells, for the same comparison (about 5 s of CPU). Measured at -O0: the largest
    difference from the reference is 1.2e-7 (relative 2.3e-7; 1.0e-7 at the other setting), under
    0.2% of the tolerance below."""
    root, ref = reference
    doc = TINY.replace("[sweep]\n", "[sweep]\nvmap_seeds = true\n")
    doc = doc.replace('"train.lr" = [1e-3, 1e-2]\n"train.warmup" = [0, 2]', '"train.lr" = [1e-2]\n"train.warmup" = [2]')
    (tmp_path / "v.toml").write_text(doc)
    ds = run_sweep(load(str(tmp_path / "v.toml")), tmp_path / "out")
    assert (ds["status"] == "ok").all() and dict(ds["status"].sizes) == {"model.gain": 2, "seed": 2, "opt": 1}
    expected = ref.train_loss.isel(opt=[1])
    assert expected["train.lr"].values.tolist() == [1e-2] and expected.dims == ds.train_loss.dims
    np.testing.assert_allclose(ds.train_loss.values, expected.values, rtol=1e-4, atol=1e-6)


def test_docs_scenario_example_is_valid():
    """The sweep of docs/concepts/scenarios.md (README's own commands run in tests/test_readme.py)."""
    import re
    import tomllib

    page = (Path(__file__).parent.parent / "docs" / "concepts" / "scenarios.md").read_text()
    block = re.search(r"```toml\n(.*?)```", page, re.S).group(1)
    scenario = parse(tomllib.loads(block), "scenarios.md")
    assert len(scenario.cells) == 12 and scenario.vmap_seeds


def toy_experiment(out_dir, *, n: int, scale: float = 1.0, progress=None):
    ds = xr.Dataset({"y": ("i", [scale * i for i in range(n)])})
    ds.to_netcdf(out_dir / "y.nc", engine="h5netcdf")
    for i in range(n):
        if progress is not None:
            progress(i + 1, n, {"i": i})
    return {"y": ds}


def test_programmed_scenario_checks_params_and_runs_with_overrides(tmp_path, monkeypatch):
    from dynlab import registry

    # what @register("program", "toy") would do, undone after the test
    monkeypatch.setitem(registry._REGISTRY["program"], "toy", registry.Entry("program", "toy", toy_experiment, "toy"))
    toml = tmp_path / "toy.toml"
    toml.write_text('name = "toy"\nprogram = "toy"\n[params]\nn = 3\n')
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", str(toml), "--set", "params.scale=2.0", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(xr.load_dataset(out / "y.nc").y.values, [0.0, 2.0, 4.0])
    for bad, says in [('[params]\nn = "three"\n', "params.n must be"), ("[params]\nscale = 1.0\n", "lacks required key(s) n"),
                      ("[params]\nn = 1\n[train]\nsteps = 1\n", "takes only"),
                      ('[params]\nn = 1\nout_dir = "x"\n', "unknown config key")]:
        toml.write_text('program = "toy"\n' + bad)
        res = CliRunner().invoke(main, ["run", str(toml), "--out", str(out)])
        assert res.exit_code == 2 and says in res.output, (bad, res.output)
    toml.write_text(f'entry = "{__name__}:toy_experiment"\n[params]\nn = 1\n')  # the old spelling, registered
    assert load(str(toml)).program == "toy"
    toml.write_text('program = "nothing"\n')
    res = CliRunner().invoke(main, ["run", str(toml)])
    assert res.exit_code == 2 and "unknown program 'nothing'; registered programs:" in res.output
    res = CliRunner().invoke(main, ["run", "sith-trw", "--workers", "2"])
    assert res.exit_code == 2 and "sweeps only" in res.output



def test_elm_budget_rejects_a_budget_below_one_neuron_before_training(tmp_path):
    res = CliRunner().invoke(main, ["run", "elm-budget", "--set", "params.budgets=[10]", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "too small for one neuron" in res.output, res.output


@pytest.mark.parametrize("sweep, message", [
    ("params.n_sweep={d_m=5,hidden=[4,8]}", "params.n_sweep: hidden must list at least 3 distinct positive integers"),
    ("params.n_sweep={d_m=5,hidden=[4,4,8]}", "params.n_sweep: hidden must list at least 3 distinct positive integers"),
    ("params.k_e_sweep={hidden=8}", "params.k_e_sweep needs exactly the keys hidden and d_ms"),
    ("params.k_e_sweep={hidden=0,d_ms=[2,5,10]}", "params.k_e_sweep: d_ms must list at least 3 distinct positive"),
])
def test_elm_budget_rejects_a_bad_single_axis_sweep_before_training(tmp_path, sweep, message):
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["run", "elm-budget", "--set", sweep, "--out", str(out)])
    assert res.exit_code == 2 and message in res.output, res.output
    assert "Traceback" not in res.output and res.output.strip().splitlines()[-1].startswith("error: params.")
    assert not list(out.rglob("*.eqx"))  # nothing was trained
