"""A sweep over units completes (issue 37): string axes, per-analysis status, every scalar kept,
DSA across cells, one writer per sweep directory, markers verified, data_dir confined."""

import hashlib
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from cli_runner import TINY_CELL, invoke
from dynlab import registry
from dynlab.scenarios.cell import MARKER, read_marker

UNITS = """
name = "aru-vs-gru"
description = "ARU against GRU: Lyapunov, fixed points, DSA"
[model]
hidden = 4
[task]
name = "adding"
length = 20
[train]
steps = 10
batch_size = 8
eval_size = 16
log_every = 5
eval_every = 5
checkpoint_every = 10
[[analyses]]
name = "lyapunov"
k = 2
steps = 30
burn_in = 10
ics = 2
realisations = 2
[[analyses]]
name = "fixed-points"
ics = 4
steps = 30
burn_in = 10
max_steps = 50
[[analyses]]
name = "dsa"
trials = 4
n_delays = 3
rank = 4
pcs = 4
iterations = 100
restarts = 2
[sweep]
"model.unit" = ["aru", "gru"]
seed = [0, 1]
"""

PYTHON = [sys.executable, "-m", "dynlab.cli"]


def tree_hash(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def units(tmp_path_factory):
    """One uninterrupted run of the ARU-vs-GRU sweep, from the command line in-process."""
    root = tmp_path_factory.mktemp("units")
    (root / "units.toml").write_text(UNITS)
    res = invoke(["run", "units.toml", "--out", "out", "-q"], root)
    return root, res


def test_unit_sweep_finishes_with_figures_fixed_point_counts_and_dsa_across_cells(units):
    root, res = units
    out = root / "out"
    assert res.exit_code == 0, res.output + res.stderr
    assert (out / "sweep.png").stat().st_size > 0 and (out / "dsa.png").stat().st_size > 0
    ds = xr.load_dataset(out / "sweep.nc")
    assert list(ds["model.unit"].values) == ["aru", "gru"] and (ds["status"] == "ok").all()
    for name in ("fixed-points_n_fixed", "fixed-points_n_slow", "fixed-points_n_points_stable",
                 "fixed-points_n_points_saddle", "lyapunov_largest_mean"):
        assert ds[name].dims == ("model.unit", "seed") and np.isfinite(ds[name].values).all(), name
    assert "fixed-points n_fixed" in res.output and "fixed-points n_points_stable" in res.output  # summary rows
    assert "model.unit=aru" in res.output and "model.unit=gru" in res.output
    dsa = xr.load_dataset(out / "dsa.nc")
    assert list(dsa["model.unit"].values) == ["aru", "aru", "gru", "gru"] and list(dsa["seed"].values) == [0, 1, 0, 1]
    assert list(dsa["group"].values) == ["unit=aru", "unit=aru", "unit=gru", "unit=gru"]
    d = dsa["distance"].values
    assert d.shape == (4, 4) and np.allclose(np.diag(d), 0) and (d[~np.eye(4, dtype=bool)] > 0).all()
    assert "dsa across cells" in res.output and "mean distance between groups" in res.output
    # the yardsticks: each cell's distance from itself (its null), and units against their seeds,
    # where 2 seeds per unit allow C(4, 2) = 6 relabellings, 2 of them the observed split, so p >= 1/3
    assert dsa["self_distance"].dims == ("run", "draw_pair") and dsa["distinguishable"].dims == ("run", "run_b")
    assert dsa["distance_group_p_floor"].values[0, 1] == 1 / 3 and dsa["distance_group_p_value"].values[0, 1] >= 1 / 3
    assert "unit=aru vs unit=gru: p = " in res.output and "not distinguishable beyond their replicates" in res.output
    # the figure draws the numbers, not "no numeric variables"
    from dynlab import figures

    assert [panel.label for panel in figures._sweep_panels(ds, ["model.unit", "seed"])][1:] == [
        "largest Lyapunov exponent λ₁",  # every point stable and near the visited states
        "fixed points near the visited states (fixed-points) (= stable fixed points near the visited states)"]


def test_resume_of_the_finished_unit_sweep_merges_again_and_recomputes_nothing(units, tmp_path):
    root, _ = units
    import shutil

    shutil.copytree(root / "out", tmp_path / "out")
    before = tree_hash(tmp_path / "out" / "cells")
    dsa = (tmp_path / "out" / "dsa.nc").read_bytes()
    res = invoke(["run", str(root / "units.toml"), "--out", "out", "--resume", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    assert tree_hash(tmp_path / "out" / "cells") == before and (tmp_path / "out" / "dsa.nc").read_bytes() == dsa
    xr.testing.assert_identical(xr.load_dataset(tmp_path / "out" / "sweep.nc"), xr.load_dataset(root / "out" / "sweep.nc"))


def test_second_run_into_a_finished_sweep_is_refused_and_changes_nothing(units):
    root, _ = units
    before = tree_hash(root / "out")
    res = invoke(["run", "units.toml", "--out", "out", "-q"], root)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "already holds a sweep" in res.stderr, res.stderr
    assert tree_hash(root / "out") == before


TINY = ("""
name = "tiny-pair"
""" + TINY_CELL + """[sweep]
seed = [0, 1]
""")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One uninterrupted run of a two-cell sweep (the reference of the concurrent resumes): training
    only, both cells one compiled program, since what is tested is the directory's lock (a cell's
    analyses are resumed and merged in the tests above and below)."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "s.toml").write_text(TINY)
    res = invoke(["run", "s.toml", "--out", "out", "-q"], root)
    assert res.exit_code == 0, res.output + res.stderr
    return root


def test_a_sweep_merges_what_its_cells_hand_back_and_reads_cells_only_when_resumed(tmp_path, monkeypatch):
    """Issue 47, item 4: the cells a sweep computes return their results with their markers, and the
    merge takes them from memory, as the claims take the analyses across cells computed now; files
    are read back only by a resume, which merges the same dataset and judges the same findings."""
    reads = []
    load = xr.load_dataset

    def spying(read):
        def spy(path, *args, **kwargs):
            reads.append(Path(path))
            return read(path, *args, **kwargs)
        return spy

    monkeypatch.setattr(xr, "load_dataset", spying(xr.load_dataset))
    monkeypatch.setattr(xr, "open_dataset", spying(xr.open_dataset))
    (tmp_path / "s.toml").write_text(
        TINY + '[[analyses]]\nname = "weight-eigs"\n[[analyses]]\nname = "dsa"\ntask = "train"\ntrials = 4\n'
        'n_delays = 2\nrank = 2\nnull_draws = 2\n[[claims]]\nid = "c"\nstatement = "fits"\ndataset = "dsa"\n'
        'variable = "fit_error"\nover = "run"\nbelow = 1.0\n')
    res = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    out = tmp_path / "out"
    assert not [p for p in reads if "cells" in p.parts], reads
    assert [p.name for p in reads].count("dsa.nc") == 1, reads  # by the printed summary only, not by the claims
    computed, findings = load(out / "sweep.nc"), load(out / "findings.nc")
    (out / "sweep.nc").unlink()  # a resume of a finished sweep merges and judges again
    res = invoke(["run", "s.toml", "--out", "out", "--resume", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    assert sorted(set(p.name for p in reads if "cells" in p.parts)) == ["metrics.nc", "weight-eigs.nc"]
    assert [p.name for p in reads].count("dsa.nc") == 3, reads  # kept, not recomputed: the claims read it too
    xr.testing.assert_identical(load(out / "sweep.nc"), computed)
    xr.testing.assert_equal(load(out / "findings.nc").drop_attrs(), findings.drop_attrs())


def test_two_simultaneous_resumes_end_with_one_complete_identical_dataset_and_one_refusal(tiny, tmp_path):
    """Both resumes start while the first one to reach a cell is held there (the cell test hook):
    without the directory's lock both would recompute (and delete) the pending cell."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(tiny / "out", out)
    (sorted((out / "cells").iterdir())[0] / MARKER).unlink()  # one cell pending again
    (out / "sweep.nc").unlink()
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "hold").touch()
    env = {**os.environ, "DYNLAB_TEST_HOOK_DIR": str(hook)}
    procs = [subprocess.Popen([*PYTHON, "run", str(tiny / "s.toml"), "--out", str(out), "--resume", "-q"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    deadline = time.time() + 120
    while time.time() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.1)
    time.sleep(1.0)  # a second writer without the lock would reach the cell by now too
    started = {f.name.split("-")[1] for f in hook.glob("started-*")}
    (hook / "hold").unlink()
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert len(started) <= 1, f"two processes computed cells at once: {started}"
    assert sorted(r[0] for r in results) == [0, 2], results
    refused = next(r for r in results if r[0] == 2)[2]
    assert refused.count("\n") == 1 and "being written by another dynlab run (pid" in refused, refused
    xr.testing.assert_identical(xr.load_dataset(out / "sweep.nc"), xr.load_dataset(tiny / "out" / "sweep.nc"))


def test_a_held_sweep_lock_refuses_a_second_writer_naming_the_holder(tmp_path):
    """The lock itself (filelock's flock): a second writer, even a second lock object of this
    process, is refused at once naming the holder's pid, which its try leaves in the file; once
    released the next writer takes it, and the file stays."""
    from dynlab.errors import ConfigError
    from dynlab.scenarios.sweep import LOCK, writer_lock

    mine = f"{os.getpid()}\n"
    with writer_lock(tmp_path):
        assert (tmp_path / LOCK).read_text() == mine
        with pytest.raises(ConfigError, match=rf"being written by another dynlab run \(pid {os.getpid()}, holding"):
            with writer_lock(tmp_path):
                pass
        assert (tmp_path / LOCK).read_text() == mine
    with writer_lock(tmp_path):
        pass
    assert (tmp_path / LOCK).read_text() == mine


# --- a failing analysis in one cell ------------------------------------------------------------

def _explode_for_three(model, *, seed: int = 0):
    """A test plug-in analysis: a number for every model, except that it raises for 3 hidden units."""
    from dynlab.analyses.state_map import state_map

    if state_map(model).dim == 3:
        raise ValueError("this analysis refuses 3 hidden units")
    return xr.Dataset({"value_mean": ((), float(seed + 1))}).assign_attrs(analysis="explode")


if "explode" not in registry._REGISTRY["analysis"]:  # registered at collection: a well-formed plug-in, with its figure
    from dynlab.figures import generic

    registry.register("analysis", "explode", "test plug-in that fails for 3 hidden units", figure=generic)(_explode_for_three)

FAILING = ("""
name = "one-fails"
""" + TINY_CELL + """[[analyses]]
name = "lyapunov"
k = 2
steps = 30
burn_in = 10
ics = 2
realisations = 2
[[analyses]]
name = "explode"
[[analyses]]
name = "dsa"
trials = 4
n_delays = 2
rank = 2
pcs = 2
iterations = 50
restarts = 1
[sweep]
"model.hidden" = [3, 4]
""")


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    root = tmp_path_factory.mktemp("failing")
    (root / "s.toml").write_text(FAILING)
    return root, invoke(["run", "s.toml", "--out", "out", "-q"], root)


def test_a_failing_analysis_keeps_the_cells_other_results_and_prints_its_message(failing):
    root, res = failing
    assert res.exit_code == 1, res.output + res.stderr
    assert "cell model.hidden=3: failed: explode: ValueError: this analysis refuses 3 hidden units" in res.stdout
    errors = [line for line in res.stderr.splitlines() if not line.startswith("warning: ")]  # the analyses' own warnings
    assert errors == [errors[0]] and errors[0].startswith("incomplete: 1 failed of 2 cells"), res.stderr
    ds = xr.load_dataset(root / "out" / "sweep.nc")
    three, four = ds.sel({"model.hidden": 3}), ds.sel({"model.hidden": 4})
    assert str(three.status.values) == "failed" and str(four.status.values) == "ok"
    assert dict(zip(ds.result.values.tolist(), three.result_status.values.tolist())) == {
        "train": "ok", "lyapunov": "ok", "explode": "failed"}
    assert np.isfinite(float(three.lyapunov_largest_mean)) and np.isfinite(three.train_eval_loss.values).all()
    assert np.isnan(float(three.explode_value_mean)) and float(four.explode_value_mean) == 1.0
    # the summary keeps the failed cell's good numbers; only the failed analysis is left out there
    row = next(line for line in res.output.splitlines() if line.startswith("lyapunov largest"))
    assert "—" not in row, res.output
    assert (root / "out" / "sweep.png").stat().st_size > 0
    # the cell whose explode failed still has its trained model: DSA compares both cells
    assert xr.load_dataset(root / "out" / "dsa.nc")["model.hidden"].values.tolist() == [3, 4]


def test_retry_failed_recomputes_the_cell(failing, tmp_path):
    import shutil

    root, _ = failing
    shutil.copytree(root / "out", tmp_path / "out")
    res = invoke(["run", str(root / "s.toml"), "--out", "out", "--resume", "--retry-failed", "-q"], tmp_path)
    assert res.exit_code == 1 and "refuses 3 hidden units" in res.stdout  # still failing, still said


# --- markers ---------------------------------------------------------------------------------------

def test_a_marker_with_any_line_removed_or_changed_makes_the_cell_pending(failing, tmp_path):
    import shutil

    root, _ = failing
    cell = next(c for c in sorted((root / "out" / "cells").iterdir()) if read_marker(c)["status"] == "ok")
    lines = (cell / MARKER).read_text().splitlines()
    work = tmp_path / "cell"
    def parsed(text):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None

    original = parsed("\n".join(lines))
    for i, line in enumerate(lines):
        if parsed("\n".join(lines[:i] + lines[i + 1:])) == original:
            continue  # a blank line or a table header TOML implies: the same marker
        shutil.copytree(cell, work, dirs_exist_ok=True)
        (work / MARKER).write_text("\n".join(lines[:i] + lines[i + 1:]) + "\n")
        assert read_marker(work) is None, f"marker trusted with line {line!r} removed"
    shutil.copytree(cell, work, dirs_exist_ok=True)
    assert read_marker(work) is not None
    (work / MARKER).write_text((cell / MARKER).read_text().replace('status = "ok"', 'status = "failed"', 1))
    assert read_marker(work) is None


def test_resume_recomputes_a_cell_whose_marker_lost_a_line(failing, tmp_path):
    import shutil

    root, _ = failing
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    cell = next(c for c in sorted((out / "cells").iterdir()) if read_marker(c)["status"] == "ok")
    text = (cell / MARKER).read_text()
    (cell / MARKER).write_text("\n".join(line for line in text.splitlines() if not line.startswith('"lyapunov.nc"')))
    (cell / "lyapunov.nc").unlink()  # the partial cell of the issue: marker line and file gone
    res = invoke(["run", str(root / "s.toml"), "--out", "out", "--resume", "-q"], tmp_path)
    assert res.exit_code == 1 and (cell / "lyapunov.nc").is_file()
    ds = xr.load_dataset(out / "sweep.nc")
    assert np.isfinite(ds["lyapunov_largest_mean"].values).all()
    xr.testing.assert_identical(ds, xr.load_dataset(root / "out" / "sweep.nc"))


# --- analyses of several runs, checked before any work ------------------------------------------

@pytest.mark.parametrize("sweep, fragment", [
    ("", "DSA compares several trained models, and this scenario has 1 cell"),
    ('[sweep]\n"task.length" = [6, 8]\n', "trained on different tasks (task.length"),
    ('[sweep]\nseed = [0, 1]\n"train.steps" = [0]\n', "train.steps = 0"),
    ('[sweep]\nseed = [0, 1]\n', "too short for 10 delays"),
])
def test_dsa_in_a_scenario_is_checked_against_the_cells_before_any_work(sweep, fragment, tmp_path):
    (tmp_path / "s.toml").write_text(TINY_CELL + '[[analyses]]\nname = "dsa"\n' + sweep)
    res = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and fragment in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


# --- data_dir from a file stays inside the data directory ----------------------------------------

@pytest.mark.parametrize("data_dir", ["/etc", "../outside", "sub/../../outside"])
def test_a_file_data_dir_outside_the_data_directory_is_refused(data_dir, tmp_path, monkeypatch):
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "tiny.txt").write_text("secret " * 200)
    monkeypatch.setenv("DYNLAB_DATA", str(tmp_path / "data"))
    task = f'[task]\nname = "charlm"\ncorpus = "tiny.txt"\ndata_dir = "{data_dir}"\n[train]\nsteps = 1\n'
    (tmp_path / "c.toml").write_text(task)
    res = invoke(["train", "--config", "c.toml", "--out", "run", "-q"], tmp_path)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "outside the data directory" in res.stderr, res.stderr
    assert not (tmp_path / "run").exists()
    (tmp_path / "s.toml").write_text(task.replace("[train]", '[sweep]\nseed = [0]\n[train]'))
    res = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert res.exit_code == 2 and "outside the data directory" in res.stderr and not (tmp_path / "out").exists()


def test_a_file_data_dir_inside_the_data_directory_is_taken_from_it(tmp_path, monkeypatch):
    from dynlab.data import confine_file_data_dir

    (tmp_path / "data" / "sub").mkdir(parents=True)
    monkeypatch.setenv("DYNLAB_DATA", str(tmp_path / "data"))
    assert confine_file_data_dir("sub", "c.toml") == str((tmp_path / "data" / "sub").resolve())
    assert confine_file_data_dir(str(tmp_path / "data"), "c.toml") == str((tmp_path / "data").resolve())
