"""Hostile scenario files and faults during sweeps (issue 17: items 1, 2, 5, 6 and 13).

Each test names the guarantee it checks and where it is enforced:

* nothing a scenario file names is imported (``spec.program_name``);
* a scenario name from a file is a safe slug (``spec.scenario_name``);
* an interrupted cell is not a failed cell (``cell.interrupted``, ``sweep.run_sweep``);
* ``--resume`` continues only the same scenario (``sweep.check_out_dir``, ``Scenario.digest``);
* analysis options are checked against every cell's model before any work (``spec.check_cells``),
  and a sweep with cells that are not ok exits 1 (``cli._run_scenario``).
"""

import os
import signal
import subprocess
import sys
import time

import pytest
import xarray as xr

from cli_runner import TINY_CELL, invoke
from dynlab.errors import ConfigError
from dynlab.scenarios import builtin_names, load, parse
from dynlab.scenarios.cell import MARKER
from dynlab.scenarios.sweep import run_sweep

CELL = TINY_CELL


def one_line(stderr: str) -> str:
    err = stderr.strip()
    assert "\n" not in err and "Traceback" not in err, stderr
    return err


# --- 1. nothing a scenario file names is imported ------------------------------------------------


def test_entry_naming_a_module_runs_nothing(tmp_path):
    """``entry = "os:system"`` with a command: refused in one line, exit 2, the command never ran.
    (In-process: had ``os.system`` run, it would have made the marker from this process as well;
    the next test is the one that needs a fresh interpreter.)"""
    (tmp_path / "evil.toml").write_text('name = "evil"\nentry = "os:system"\n[params]\ncommand = "touch marker"\n')
    res = invoke(["run", "evil.toml"], tmp_path)
    assert res.exit_code == 2, res.stderr
    err = one_line(res.stderr)
    assert err.startswith("error: ") and "is not a registered program" in err and "sith-trw" in err, err
    assert not (tmp_path / "marker").exists()
    assert not (tmp_path / "runs").exists()


def test_entry_naming_a_module_imports_nothing(tmp_path):
    """``entry = "this:s"``: the module ``this`` (it prints the Zen of Python) is never imported."""
    (tmp_path / "zen.toml").write_text('entry = "this:s"\n')
    code = ("import sys\nfrom dynlab.cli import main\n"
            "try:\n    main(['run', 'zen.toml'])\nexcept SystemExit as e:\n    print('exit', e.code)\n"
            "print('imported' if 'this' in sys.modules else 'not imported')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "Beautiful is better than ugly" not in proc.stdout + proc.stderr
    assert proc.stdout.split("\n")[-3:] == ["exit 2", "not imported", ""], proc.stdout
    assert "'this:s' is not a registered program" in one_line(proc.stderr)


def test_programs_are_chosen_by_registered_name(tmp_path):
    """``program = NAME`` picks a registered program; the old spelling works only for a registered
    program's exact ``module:function``; anything else lists the registered programs."""
    program = parse({"program": "sith-trw", "params": {"steps": 5}}, "a.toml")
    assert program.program == "sith-trw" and program.params == {"steps": 5}
    legacy = parse({"entry": "dynlab.scenarios.sith_trw:run_sith_trw"}, "b.toml")
    assert legacy.program == "sith-trw" and legacy.function is program.function
    bad = [({"program": "nope"}, "unknown program 'nope'; registered programs: "),  # (a plug-in test may add some)
           ({"program": "os:system"}, "unknown program 'os:system'"),
           ({"entry": "dynlab.scenarios.sith_trw:build"}, "is not a registered program"),
           ({"entry": "dynlab.scenarios.sith_trw.run_sith_trw"}, "is not a registered program"),
           ({"entry": 3}, "is not a registered program"),
           ({"program": "sith-trw", "entry": "dynlab.scenarios.sith_trw:run_sith_trw"}, "not also entry")]
    for doc, says in bad:
        with pytest.raises(ConfigError, match="registered programs|not also entry") as e:
            parse(doc, "c.toml")
        assert says in str(e.value) and "\n" not in str(e.value), str(e.value)
    for name, path in builtin_names().items():  # the built-in programmed scenarios use program =
        text = path.read_text()
        assert "\nentry" not in text and ("\nprogram = " in text or "\n[sweep]" in text or "\n[model]" in text), name


# --- 2. names from files are safe slugs --------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../../../escaped", "..", "a/b", "/abs", "", " x", ".hidden", "a..b", "x" * 101, 3])
def test_unsafe_scenario_names_are_refused(name):
    with pytest.raises(ConfigError, match="name must be 1-100 letters"):
        parse({"name": name, **{"model": {"unit": "rnn"}}}, "n.toml")
    with pytest.raises(ConfigError, match="name must be 1-100 letters"):
        parse({"name": name, "program": "sith-trw"}, "n.toml")


def test_escaping_name_writes_nothing_outside(tmp_path):
    work = tmp_path / "a" / "b" / "c" / "d"
    work.mkdir(parents=True)
    (work / "esc.toml").write_text('name = "../../../../escaped"\n' + CELL)
    res = invoke(["run", "esc.toml", "-q"], work)
    err = one_line(res.stderr)
    assert res.exit_code == 2 and err.startswith("error: esc.toml: name must be") and "'../../../../escaped'" in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b", "c", "d", "esc.toml"]


def test_name_from_the_file_stem_becomes_a_slug():
    assert parse(dict(model={"unit": "rnn"}), "dir/my sweep (v2).toml").name == "my-sweep-v2-"
    assert parse(dict(model={"unit": "rnn"}), "..toml").name == "scenario"
    assert parse(dict(model={"unit": "rnn"}), "ok_name-1.2.toml").name == "ok_name-1.2"


# --- 5. an interrupted cell is not a failed cell ------------------------------------------------------

SLOW = """
name = "slow"
[model]
unit = "rnn"
hidden = 4
[task]
name = "adding"
length = 6
[train]
steps = 400
batch_size = 8
eval_size = 16
log_every = 50
eval_every = 500
checkpoint_every = 100
[sweep]
seed = [0, 1]
"""
"""Two cells of 400 steps (it was 800): after the first cell's first metrics.nc, the command still
ran 4.1-6.6 s (measured three times, its compiled programs in the cache, 2 cores shared with
other work) with nothing interrupting it, against the 0.05 s it takes the test to see that moment
and send SIGINT."""


def test_ctrl_c_leaves_no_failed_cell_and_resume_equals_uninterrupted(tmp_path):
    """SIGINT to the process group while a cell trains: exit 130, the cell in flight gets no marker
    (before the fix: a "failed" marker, "ConnectionPool is closed"), and plain --resume finishes
    with the same sweep.nc as an uninterrupted run. The uninterrupted run goes first: the
    process then loads its compiled programs from the suite's compilation cache."""
    (tmp_path / "slow.toml").write_text(SLOW)
    reference = run_sweep(load(str(tmp_path / "slow.toml")), tmp_path / "reference")
    out = tmp_path / "out"
    # SIGINT as in a terminal: an xdist worker ignores SIGINT, an ignored signal stays ignored across exec,
    # and Python then leaves it ignored (the child ran to the end and exited 0, depending on which modules
    # ran before); so the child restores Python's own handler before the command line starts
    launcher = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                "sys.argv = ['dynlab'] + sys.argv[1:]; runpy.run_module('dynlab.cli', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", launcher, "run", "slow.toml", "--out", str(out), "-q"],
                            cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        in_flight = []
        while time.monotonic() < deadline and proc.poll() is None and not in_flight:
            # the first cell is training: it has written a checkpoint's metrics and no cell has a marker yet
            # (so the whole second cell is left to interrupt: seen at the last cell's end, the signal could
            # arrive after the run finished, exit 0)
            cells = list(out.glob("cells/*"))
            if not any((d / MARKER).exists() for d in cells):
                in_flight = [d for d in cells if (d / "metrics.nc").exists()]
            time.sleep(0.05)
        assert in_flight and proc.poll() is None, "no cell was seen in flight"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    markers = [d / MARKER for d in out.glob("cells/*") if (d / MARKER).exists()]
    assert all('status = "ok"' in m.read_text() for m in markers), [m.read_text() for m in markers]
    assert not (in_flight[0] / MARKER).exists()  # the interrupted cell is not marked at all
    res = invoke(["run", "slow.toml", "--out", str(out), "--resume", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    assert not (out / ".interrupted").exists()
    merged = xr.load_dataset(out / "sweep.nc")
    assert (merged["status"] == "ok").all()
    xr.testing.assert_identical(merged.drop_attrs(), reference.drop_attrs())


# --- 6. --resume continues only the same scenario ---------------------------------------------------


def test_resume_refuses_another_scenario(tmp_path):
    (tmp_path / "a.toml").write_text('name = "a"\n' + CELL + '[sweep]\nseed = [0]\n')
    (tmp_path / "b.toml").write_text('name = "b"\n' + CELL.replace("hidden = 4", "hidden = 3") + '[sweep]\nseed = [0]\n')
    res = invoke(["run", "a.toml", "--out", "s", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    before = (tmp_path / "s" / "sweep.nc").read_bytes()
    for args in (["run", "b.toml", "--out", "s", "--resume"],
                 ["run", "a.toml", "--out", "s", "--resume", "--set", "train.steps=11"]):
        res = invoke(args, tmp_path)
        assert res.exit_code == 2, (args, res.output, res.stderr)
        assert "holds a sweep of another scenario" in one_line(res.stderr)
        assert (tmp_path / "s" / "sweep.nc").read_bytes() == before
    # the same scenario with other comments, layout, name and description is the same sweep
    text = "# a comment\n" + (tmp_path / "a.toml").read_text().replace('name = "a"', 'name = "a2"\ndescription = "x"')
    (tmp_path / "a2.toml").write_text(text.replace("hidden = 4", "hidden   =   4  # same"))
    res = invoke(["run", "a2.toml", "--out", "s", "--resume", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr


# --- 13. analysis options against every cell's model; exit 1 when cells are not ok -----------------


def test_analysis_options_are_checked_against_every_cell_model(tmp_path):
    doc = CELL + '[[analyses]]\nname = "lyapunov"\nk = 4\nsteps = 30\nburn_in = 10\n[sweep]\n"model.hidden" = [8, 1]\n'
    (tmp_path / "k.toml").write_text(doc)
    res = invoke(["run", "k.toml", "--out", "o", "-q"], tmp_path)
    assert res.exit_code == 2, res.output + res.stderr
    err = one_line(res.stderr)
    assert "analyses.lyapunov in cell model.hidden=1" in err and "k = 4 exceeds the state dimension N = 1" in err, err
    assert not (tmp_path / "o").exists()  # nothing was trained
    doc = CELL + '[[analyses]]\nname = "activity"\ncomponent = "layer0.x"\n'
    with pytest.raises(ConfigError, match="analyses.activity: no state component 'layer0.x'; valid: layer0.h"):
        parse(__import__("tomllib").loads(doc), "c.toml")


@pytest.mark.parametrize("name", ["pc-bp", "pc-bptt"])
def test_an_analysis_that_builds_its_own_models_is_refused_before_any_work(name, tmp_path):
    """``pc-bp``/``pc-bptt`` are functions of a task and a grid, not of a cell's model: a scenario
    naming one is refused in one line naming its command and what a scenario can run, exit 2,
    nothing trained (it used to fail in every cell, after training)."""
    (tmp_path / "p.toml").write_text(CELL + f'[[analyses]]\nname = "{name}"\n')
    res = invoke(["run", "p.toml", "--out", "o", "-q"], tmp_path)
    assert res.exit_code == 2, res.output + res.stderr
    err = one_line(res.stderr)
    assert f"analyses.{name} builds its own models" in err and f"dynlab analyze {name}" in err, err
    assert "lyapunov" in err and "dsa" in err and ", pc-bp" not in err, err
    assert not (tmp_path / "o").exists()


def test_sweep_with_a_cell_not_ok_exits_1(tmp_path):
    doc = CELL.replace("[train]\n", "[train]\nclip = 0.0\noptimizer = \"sgd\"\n")
    doc = doc.replace('unit = "rnn"', 'unit = "rnn"\nactivation = "relu"') + '[sweep]\n"train.lr" = [1e-3, 1e6]\n'
    (tmp_path / "d.toml").write_text(doc)
    res = invoke(["run", "d.toml", "--out", "o", "-q"], tmp_path)
    assert res.exit_code == 1, res.output + res.stderr
    assert one_line(res.stderr).startswith("incomplete: 1 diverged of 2 cells"), res.stderr
    ds = xr.load_dataset(tmp_path / "o" / "sweep.nc")
    assert ds["status"].values.tolist() == ["ok", "diverged"]
