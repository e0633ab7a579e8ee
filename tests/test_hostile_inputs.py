"""Hostile input on the command line: every number checked where it is parsed, one-line errors
with exit status 2, nothing computed only to be lost, no tracebacks (issue 17, items 7-12, 15,
18, 19)."""

import numpy as np
import pytest
import xarray as xr

from cli_runner import invoke, one_line_error
from dynlab import config as cfgmod
from dynlab import experiment
from dynlab.errors import ConfigError
from dynlab.train import TrainConfig


TINY_LYAPUNOV = ["--model", "rnn", "--set", "model.hidden=4", "--k", "1", "--steps", "40", "--burn-in", "10",
                 "--ics", "2", "-q"]


@pytest.mark.parametrize(
    "args, fragments",
    [
        # 8, 9: non-finite trainer settings are refused where they are parsed
        (["train", "--set", "train.lr=nan"], ["--set train.lr is nan", "finite"]),
        (["train", "--set", "train.lr=inf"], ["train.lr is inf", "finite"]),
        (["train", "--set", "train.weight_decay=inf"], ["train.weight_decay is inf"]),
        (["train", "--set", "train.clip=nan"], ["train.clip is nan"]),
        (["train", "--set", "model.hidden=1e400"], ["model.hidden is inf"]),
        # 11: integers beyond 64 bits, seeds beyond 32 bits
        (["train", "--seed", "99999999999999999999"], ["seed", "out of range"]),
        (["train", "--set", "seed=99999999999999999999"], ["seed", "out of range"]),
        (["train", "--set", "seed=4294967296"], ["seed must be an integer in [0, 2^32 - 1]"]),
        (["analyze", "lyapunov", "--seed", "99999999999999999999"], ["--seed must be an integer >= 0 and <= 4294967295"]),
        # 10, 12: analysis options
        (["analyze", "lyapunov", "--drive", "nan"], ["--drive is nan"]),
        (["analyze", "lyapunov", "--drive", "-inf"], ["--drive is -inf"]),
        (["analyze", "lyapunov", "--reortho-every", "0"], ["--qr: reortho_every must be an integer >= 1 or 'auto', got 0"]),
        (["analyze", "lyapunov", "--k", "0"], ["--qr: k must be an integer >= 1"]),
        (["analyze", "lyapunov", "--k", "1.5"], ["--k must be an integer, got '1.5'"]),
        (["analyze", "lyapunov", "--burn-in", "-3"], ["--burn-in must be an integer >= 0"]),
        (["analyze", "perturb", "--strength", "0,nan"], ["--strength is nan"]),
        (["analyze", "perturb", "--strength", "0,,1"], ["--strength must be a comma-separated list"]),
        (["analyze", "adaptation", "--drives", "1,inf"], ["--drives is inf"]),
        (["compare", "pc-bp", "--widths", "8,nan"], ["--widths must be an integer"]),
        (["compare", "pc-bp", "--widths", "8,0"], ["--widths must be an integer >= 1"]),
        (["compare", "pc-bp", "--lr", "inf"], ["--lr is inf"]),
        # 18: unknown commands list what is valid; no "analysiss"
        (["analyze", "nope"], ["unknown command", "analyze 'nope'", "lyapunov", "trw", "perturb"]),
        (["nope"], ["unknown command", "'nope'; valid", "train", "analyze"]),
        (["transfer", "nope"], ["unknown command", "transfer 'nope'", "controller"]),
    ],
)
def test_bad_numbers_and_names_are_one_line_exit_2(args, fragments, tmp_path):
    one_line_error(invoke(args, tmp_path), *fragments)
    assert not (tmp_path / "runs").exists()  # refused before any work or any directory


def test_unknown_name_message_uses_the_right_plural():
    from dynlab import registry

    with pytest.raises(ConfigError.__mro__[1]) as e:  # UnknownNameError is a DynlabError
        registry.get("analysis", "nope")
    assert "valid analyses:" in str(e.value) and "analysiss" not in str(e.value)


@pytest.mark.parametrize("text", ["nan", "[1.0, nan]", "{ a = nan }"])
def test_nan_is_refused_by_the_value_parser(text):
    with pytest.raises(ConfigError, match="nan"):
        cfgmod.parse_value(text)


def test_config_files_and_scenario_axes_refuse_nan(tmp_path):
    run = tmp_path / "run.toml"
    run.write_text('[train]\nlr = nan\n')
    with pytest.raises(ConfigError, match="lr is nan"):
        cfgmod.load_toml(run)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('[model]\nunit = "rnn"\n[sweep]\n"train.lr" = [1e-3, nan]\n')
    res = invoke(["run", str(sweep), "--out", "s"], tmp_path)
    one_line_error(res, "train.lr is nan")
    assert not (tmp_path / "s").exists()


def test_infinity_only_where_a_key_declares_it():
    """``tau_r = inf`` switches ELM's high-pass off (annotated FloatOrInf); elsewhere inf is refused."""
    experiment.check(cfgmod.apply_sets(experiment.default_config("elm-net", "adding"), ["model.tau_r=inf"]))
    with pytest.raises(ConfigError, match="model.c is inf"):
        experiment.check(cfgmod.apply_sets(experiment.default_config("elm-net", "adding"), ["model.c=inf"]))


@pytest.mark.parametrize("field, value", [("lr", float("nan")), ("lr", float("inf")), ("clip", float("nan")),
                                          ("weight_decay", float("inf"))])
def test_python_api_train_config_refuses_non_finite(field, value):
    with pytest.raises(ConfigError):
        TrainConfig(**{field: value})


def test_unwritable_output_is_refused_before_computing(tmp_path):
    """Item 7: the output location is checked before any work (a path through a regular file,
    and a folder under /proc, stand in for a read-only file system)."""
    (tmp_path / "afile").write_text("")
    for out in (str(tmp_path / "afile" / "l.nc"), "/proc/dynlab-no-such/l.nc"):
        res = invoke(["analyze", "lyapunov", "--out", out, *TINY_LYAPUNOV], tmp_path)
        err = one_line_error(res, "cannot write results under", "choose another --out")
        assert "Lyapunov" not in res.output  # nothing was computed
    res = invoke(["analyze", "lyapunov", "--plot", str(tmp_path / "afile" / "l.png"), *TINY_LYAPUNOV], tmp_path)
    one_line_error(res, "choose another --plot")
    assert not (tmp_path / "runs").exists()


def test_a_result_that_cannot_be_written_is_rescued(tmp_path, monkeypatch):
    """Item 7: if writing still fails after the analysis ran, the dataset goes to the temporary
    directory and the one-line error names it."""
    from dynlab import store

    real = store.write_dataset
    calls = []

    def failing_once(path, ds, **options):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(30, "Read-only file system")
        return real(path, ds, **options)

    monkeypatch.setattr(store, "write_dataset", failing_once)
    res = invoke(["analyze", "lyapunov", "--out", str(tmp_path / "l.nc"), *TINY_LYAPUNOV], tmp_path)
    err = one_line_error(res, "could not write the result (Read-only file system); it was saved to")
    rescued = err.rsplit("saved to ", 1)[1]
    ds = xr.load_dataset(rescued, engine="h5netcdf")
    assert ds.attrs["analysis"] == "lyapunov" and np.isfinite(ds["mean"].values).all()


def test_non_finite_result_is_kept_and_exit_1(tmp_path):
    """Items 10, 19: a Lyapunov run whose exponents are NaN keeps its dataset, says so in one
    line and exits 1 (the figure is drawn where possible), never a traceback."""
    from dynlab.figures import non_finite_variables

    ds = xr.Dataset({"mean": ("exponent", [np.nan, -1.0])}, attrs={"analysis": "lyapunov"})
    path = tmp_path / "l.nc"
    ds.to_netcdf(path, engine="h5netcdf")
    res = invoke(["plot", str(path)], tmp_path)
    one_line_error(res, "mean holds NaN or inf", "dataset is kept", status=1, prefix="non-finite result: ")
    assert path.is_file()
    assert non_finite_variables(ds) == ["mean"]


@pytest.mark.parametrize(
    "data, attrs, needs",
    [
        ({"eval_loss": ("eval_step", [1.0, 0.5])}, {"analysis": "training", "metric": "mse"}, "'training' figure"),
        ({"mean": ("exponent", [-0.1, -0.2])}, {"analysis": "lyapunov"}, "'lyapunov' figure"),
    ],
)
def test_plot_of_an_incomplete_dataset_draws_the_generic_figure(data, attrs, needs, tmp_path):
    """Item 15: a dataset that lacks what its figure needs gets the generic figure and one warning line."""
    path = tmp_path / "d.nc"
    xr.Dataset(data, attrs=attrs).to_netcdf(path, engine="h5netcdf")
    res = invoke(["plot", str(path)], tmp_path)
    assert res.exit_code == 0, res.stderr
    assert res.stderr.count("\n") == 1 and needs in res.stderr and "generic figure" in res.stderr
    assert (tmp_path / "d.png").stat().st_size > 1000


def test_plot_of_a_file_that_is_not_netcdf(tmp_path):
    (tmp_path / "x.nc").write_text("not netcdf")
    one_line_error(invoke(["plot", str(tmp_path / "x.nc")], tmp_path), "is not a readable netCDF result file")


def test_unexpected_errors_are_one_line_with_the_traceback_in_a_file(tmp_path, monkeypatch):
    """Item 19, the last line of defence: a bug is one line, exit 1, the traceback saved."""
    from dynlab import registry

    def broken(kind):
        raise RuntimeError("simulated bug")

    monkeypatch.delenv("DYNLAB_DEBUG", raising=False)
    monkeypatch.setattr(registry, "entries", broken)
    res = invoke(["list", "units"], tmp_path)
    err = one_line_error(res, "RuntimeError: simulated bug", "traceback in", status=1, prefix="internal error: ")
    saved = err.split("traceback in ", 1)[1].split(";", 1)[0]
    assert "simulated bug" in open(saved).read()


# (The console entry point on bad numbers, in a real process: test_cli.py's
# test_real_process_bad_numbers_no_traceback, which shares that module's one process.)


@pytest.mark.parametrize("command", [["analyze", "perturb", "--model", "rnn", "--task", "smnist", "-q"],
                                     ["analyze", "lyapunov", "--model", "rnn", "--task", "psmnist", "-q"],
                                     ["train", "--task", "smnist", "-q"],
                                     ["run", "smnist.toml", "-q"]])
def test_every_command_that_reads_data_takes_data_dir(command, tmp_path):
    """Item 16: the missing-file message points at --data-dir, so every data-reading command has it."""
    (tmp_path / "smnist.toml").write_text('[model]\nunit = "rnn"\nhidden = 4\n[task]\nname = "smnist"\n')
    missing = tmp_path / "empty-data"
    err = one_line_error(invoke([*command, "--data-dir", str(missing)], tmp_path), "missing data file", "(from --data-dir)")
    assert str(missing) in err


# ---------------------------------------------------------------------------------------------
# Issue 48: the hostile-input sweep's cases that fell short


@pytest.mark.parametrize("task, size, needs", [
    ("teacher-chaotic-rnn", "task.n=1000000", "for the teacher"),
    ("teacher-line-attractor", "task.n=1000000000", "for the teacher"),
    ("teacher-flipflop", "task.hidden=1000000", "for one training step"),
])
def test_a_teacher_of_absurd_size_is_refused_before_it_is_built(task, size, needs, tmp_path, monkeypatch):
    """Crashes and bombs: XLA aborted the process (n = 10^6 weights are 4 TB) or the memory
    filled (n = 10^9); the teacher's shapes are now checked against the memory budget first."""
    monkeypatch.setenv("DYNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DYNLAB_MEMORY_LIMIT", "1GB")
    res = invoke(["train", "--task", task, "--set", size, "--out", "r", "-q"], tmp_path)
    one_line_error(res, f"{size} needs about", needs, "limit 1 GB", f"lower {size.split('=')[0]}")
    assert not (tmp_path / "r").exists() and not (tmp_path / "cache").exists()


def test_the_flipflop_teacher_trains_at_most_a_documented_number_of_steps(tmp_path, monkeypatch):
    from dynlab.teachers.flipflop import MAX_TRAIN_STEPS

    monkeypatch.setenv("DYNLAB_CACHE", str(tmp_path / "cache"))
    res = invoke(["train", "--task", "teacher-flipflop", "--set", f"task.train_steps={MAX_TRAIN_STEPS + 1}",
                  "--out", "r", "-q"], tmp_path)
    one_line_error(res, "task.train_steps = 100,001", "at most 100,000")
    assert not (tmp_path / "r").exists() and not (tmp_path / "cache").exists()


def test_a_teacher_stopped_while_training_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    """A partial teacher was cached (and resumed); now training happens beside the entry, which
    appears only once training returned, and a stopped training removes its temporary directory.
    (The trainer is replaced: what is tested is where it writes and what is left.)"""
    import types

    from dynlab import store
    from dynlab import train as train_module
    from dynlab.teachers.flipflop import flipflop_teacher

    teachers = tmp_path / "cache" / "teachers"
    monkeypatch.setenv("DYNLAB_CACHE", str(tmp_path / "cache"))

    def stopped(exp, run_dir, **kw):
        assert run_dir.parent == teachers and run_dir.name.endswith(".partial") and (run_dir / ".claimed").is_file()
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, "train", stopped)
    with pytest.raises(KeyboardInterrupt):
        flipflop_teacher(bits=1, hidden=2, steps=2, length=4)
    assert list(teachers.iterdir()) == []

    def finished(exp, run_dir, **kw):
        assert [p.name for p in teachers.iterdir()] == [run_dir.name]  # no entry until training is done
        (run_dir / store.MODEL).write_bytes(b"")
        store.save_metrics(run_dir, xr.Dataset({"loss": ("step", [1.0, 0.5])}, coords={"step": [0, 1]}))
        return types.SimpleNamespace(model=exp.model)

    monkeypatch.setattr(train_module, "train", finished)
    teacher = flipflop_teacher(bits=1, hidden=2, steps=2, length=4)
    (entry,) = teachers.iterdir()
    assert entry.name.startswith("flipflop-") and (entry / store.MODEL).is_file() and teacher.state_size == 2


def test_a_read_only_teacher_cache_is_refused_before_training(tmp_path, monkeypatch):
    """A read-only $DYNLAB_CACHE was a raw OSError after the work (a path through a regular file
    stands in for a read-only file system: the tests may run as root)."""
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("DYNLAB_CACHE", str(tmp_path / "afile" / "cache"))
    res = invoke(["train", "--task", "teacher-flipflop", "--set", "task.hidden=2", "--set", "task.train_steps=2",
                  "--out", "r", "-q"], tmp_path)
    one_line_error(res, "the teacher cache", "cannot be written (Not a directory)", "$DYNLAB_CACHE")
    assert not (tmp_path / "r").exists()


RECOVERY_STUDY = """[model]
unit = "rnn"
hidden = 4
[task]
name = "teacher-line-attractor"
n = 4
length = 8
[train]
steps = 4
batch_size = 4
eval_size = 4
[[analyses]]
name = "recovery"
trials = 4
realisations = {realisations}
ics = 4
steps = 20
lyapunov_burn_in = 2
null_draws = 2
[sweep]
seed = [0]
"""


@pytest.mark.parametrize("realisations, cache, fragments", [
    (1, "cache", ["analyses.recovery", "realisations", "2"]),
    (2, "afile/cache", ["the teacher cache", "cannot be written", "$DYNLAB_CACHE"]),
])
def test_a_recovery_study_that_cannot_finish_is_refused_before_any_cell_trains(realisations, cache, fragments,
                                                                              tmp_path, monkeypatch):
    """``realisations = 1`` and a read-only cache were refused only after the cell trained."""
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("DYNLAB_CACHE", str(tmp_path / cache))
    (tmp_path / "s.toml").write_text(RECOVERY_STUDY.format(realisations=realisations))
    one_line_error(invoke(["run", "s.toml", "--out", "o", "-q"], tmp_path), *fragments)
    assert not (tmp_path / "o").exists()


def test_deeply_nested_toml_is_refused_where_it_is_read(tmp_path):
    """Deeply nested TOML was an internal RecursionError (tomllib recurses once per level)."""
    deep = "[" * 5000 + "]" * 5000
    (tmp_path / "deep.toml").write_text(f'[model]\nunit = "rnn"\nfoo = {deep}\n')
    one_line_error(invoke(["run", "deep.toml", "--out", "o", "-q"], tmp_path), "'deep.toml' is nested too deeply")
    one_line_error(invoke(["train", "--set", f"model.foo={deep}", "--out", "o", "-q"], tmp_path),
                   "--set model.foo is nested too deeply")
    with pytest.raises(ConfigError, match="nested too deeply"):
        cfgmod.parse_value(deep)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, fragments", [
    (["train", "--set", "train.steps=5\nx=3"], ["--set train.steps", "holds more than one value", "x = "]),
    (["train", "--set", 'model.unit="rnn"\n[train]\nsteps=1'], ["--set model.unit", "holds more than one value"]),
    (["analyze", "lyapunov", "--k", "2\nx=3"], ["--k", "holds more than one value"]),
])
def test_a_value_that_carries_more_toml_is_refused(args, fragments, tmp_path):
    """The rest after the first value was dropped silently (``train.steps=5`` trained, ``x=3`` vanished)."""
    one_line_error(invoke([*args, "--out", "o", "-q"], tmp_path), *fragments)
    assert not (tmp_path / "o").exists()
    assert cfgmod.parse_value("5  # a comment") == 5  # a comment is not a value


@pytest.mark.parametrize("sets, fragments", [
    (["task.kwargs={dt=0}"], ["task.kwargs.dt must be a positive number of milliseconds, got 0"]),
    (["task.kwargs={timing={stimulus=1e12}}"], ["1e+10 steps, more than 2,147,483,647", "task.kwargs.timing"]),
    (['task.env="Null-v0"'], ["'Null-v0' is not a trial-based environment", "PerceptualDecisionMaking-v0"]),
    (['task.env="Bandit-v0"'], ["'Bandit-v0' is not a trial-based environment"]),
])
def test_neurogym_settings_that_make_no_trials_are_named(sets, fragments, tmp_path):
    """dt = 0 was a ZeroDivisionError, timing 1e12 a JAX TypeError (an unhashable timing table),
    Null-v0 and Bandit-v0 "task.length ... got 0"."""
    pytest.importorskip("neurogym")
    args = ["train", "--set", 'task.name="neurogym"', *[a for s in sets for a in ("--set", s)], "--out", "o", "-q"]
    err = one_line_error(invoke(args, tmp_path), *fragments)
    assert "task.length" not in err and not (tmp_path / "o").exists()


def test_a_timing_table_reaches_neurogym():
    """A ``timing`` table in ``kwargs`` is kept (hashably) and given back to neurogym as a table."""
    pytest.importorskip("neurogym")
    from dynlab.tasks.neurogym_env import NeurogymTask

    task = NeurogymTask(kwargs={"timing": {"fixation": 100, "stimulus": 500, "delay": 0, "decision": 100}})
    assert task.length == 7 and hash(task.kwargs)  # (100 + 500 + 0 + 100) ms / 100 ms


@pytest.mark.parametrize("dt, fragments", [
    ("1e-300", ["task.dt = 1e-300 ms", "3.2e+303 steps, more than 2,147,483,647", "raise task.dt"]),
    ("1e-5", ["a trial of 320,000,000 steps needs about", "lower the trial length"]),
])
def test_a_tiny_dt_is_blamed_on_the_trial_not_on_the_model(dt, fragments, tmp_path):
    """``delayed-match`` with ``dt = 1e-300`` blamed ``model.hidden`` and printed a 300-digit number."""
    err = one_line_error(invoke(["train", "--set", 'task.name="delayed-match"', "--set", f"task.dt={dt}",
                                 "--out", "o", "-q"], tmp_path), *fragments)
    assert "model.hidden" not in err and len(err) < 300 and not (tmp_path / "o").exists()


def _fake_run(folder):
    """A run directory's files as ``dynlab train`` leaves them (their contents do not matter here)."""
    folder.mkdir()
    (folder / "config.toml").write_text('[model]\nunit = "rnn"\n')
    xr.Dataset({"eval_loss": ("eval_step", [1.0, 0.5])}, attrs={"analysis": "training", "metric": "mse"}).to_netcdf(
        folder / "metrics.nc", engine="h5netcdf")
    (folder / "learning_curve.png").write_bytes(b"the run's own figure")
    return folder


def test_every_file_in_a_run_directory_is_refused_even_with_overwrite(tmp_path):
    """``dynlab plot RUN/metrics.nc --out RUN/learning_curve.png --overwrite`` replaced the run's own
    learning curve; a default figure name skips the run's files, never replaces them."""
    run = _fake_run(tmp_path / "r")
    res = invoke(["plot", "r/metrics.nc", "--out", "r/learning_curve.png", "--overwrite"], tmp_path)
    one_line_error(res, "--out 'r/learning_curve.png' is the file learning_curve.png of the run directory",
                   "not even with --overwrite")
    assert (run / "learning_curve.png").read_bytes() == b"the run's own figure"
    for expected in ("metrics.png", "metrics-2.png"):  # the second default does not replace the first
        res = invoke(["plot", "r/metrics.nc", "--overwrite"], tmp_path)
        assert res.exit_code == 0 and f"figure: r/{expected}" in res.output, (res.output, res.stderr)
    invoke(["plot", "r/metrics.nc", "--out", "r/new.png"], tmp_path)
    assert (run / "new.png").is_file()  # a new name in a run directory is free


def test_a_sweep_into_a_training_run_is_refused(tmp_path):
    """``dynlab run tiny.toml --out EXISTING_RUN`` wrote the sweep's files beside the run's own."""
    run = _fake_run(tmp_path / "r")
    before = sorted(p.name for p in run.iterdir())
    (tmp_path / "tiny.toml").write_text('[model]\nunit = "rnn"\nhidden = 4\n[sweep]\nseed = [0]\n')
    one_line_error(invoke(["run", "tiny.toml", "--out", "r", "-q"], tmp_path),
                   "'r' already holds a run (config.toml, metrics.nc)", "choose another --out")
    assert sorted(p.name for p in run.iterdir()) == before


def test_a_result_file_declaring_gigabytes_is_refused_without_a_memory_limit_set(tmp_path, monkeypatch):
    """A 6 KB netCDF declaring 4 GB was read: only the available memory bounded it. Now a
    fraction of it does (1/8) when ``$DYNLAB_MEMORY_LIMIT`` is not set."""
    import h5netcdf

    from dynlab import budget

    path = tmp_path / "bomb.nc"
    with h5netcdf.File(path, "w") as f:  # declared, never written: the file stays small
        f.dimensions = {"t": 10**9}
        f.create_variable("x", ("t",), "f4", chunks=(2**20,))
    assert path.stat().st_size < 100_000
    monkeypatch.delenv("DYNLAB_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(budget, "_meminfo_available", lambda: 16 * 10**9)
    monkeypatch.setattr(budget, "_device_free", lambda: None)
    monkeypatch.setattr(budget, "_address_space_left", lambda: None)
    one_line_error(invoke(["plot", "bomb.nc"], tmp_path), "declares 4 GB of data", "more than the 2 GB limit",
                   "1/8 of available memory", "$DYNLAB_MEMORY_LIMIT sets it")
    assert budget.result_limit() == (2 * 10**9, "1/8 of available memory; $DYNLAB_MEMORY_LIMIT sets it")
    monkeypatch.setenv("DYNLAB_MEMORY_LIMIT", "3GB")
    assert budget.result_limit() == (3 * 10**9, "$DYNLAB_MEMORY_LIMIT")  # a limit given is the user's


def test_a_transfer_onto_a_full_disk_leaves_nothing_that_blocks_the_retry(tmp_path, monkeypatch):
    """``transfer`` onto a full disk left ``.claimed`` and ``config.toml``: the retry was refused."""
    import errno

    from dynlab import experiment, store

    exp = experiment.build({"model": {"unit": "aru", "hidden": 4, "n_g": 2}, "task": {"name": "adding", "length": 6}})
    donor = store.claim_run_dir(tmp_path / "donor")
    store.write_config(donor, exp.config)
    store.save_model(donor, exp.model)

    def full(run_dir, model):
        raise store.storage_error(OSError(errno.ENOSPC, "No space left on device"), run_dir / store.MODEL)

    monkeypatch.setattr(store, "save_model", full)
    res = invoke(["transfer", "isolate", "--checkpoint", "donor", "--out", "iso"], tmp_path)
    one_line_error(res, "the file system is full")
    assert not (tmp_path / "iso").exists()  # the retry's --out is free again


def test_two_analyses_of_one_name_and_stage_are_refused_at_parse(tmp_path):
    """Two ``[[analyses]]`` with one name: every cell ran, then the figure failed."""
    from dynlab.scenarios import spec

    two = '[model]\nunit = "rnn"\nhidden = 4\n[[analyses]]\nname = "lyapunov"\nk = 1\n[[analyses]]\nname = "lyapunov"\nk = 2\n'
    (tmp_path / "two.toml").write_text(two + "[sweep]\nseed = [0, 1]\n")
    one_line_error(invoke(["run", "two.toml", "--out", "o", "-q"], tmp_path),
                   "two [[analyses]] named 'lyapunov' run at stage 'trained'", "different stages")
    assert not (tmp_path / "o").exists()
    (tmp_path / "staged.toml").write_text(two.replace('k = 2', 'k = 2\nstages = ["init"]'))
    assert len(spec.load(str(tmp_path / "staged.toml")).cell_analyses) == 2  # different stages: two results


def test_a_plugin_interrupting_its_import_is_named(tmp_path, monkeypatch):
    """A plug-in raising KeyboardInterrupt at import exited 130 with only "aborted". (In-process:
    the entry points are replaced by one whose import raises it.)"""
    import importlib.metadata

    from dynlab import registry

    class Interrupting:
        name, value = "interrupting", "interrupting_plugin"

        def load(self):
            raise KeyboardInterrupt

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [Interrupting()])
    monkeypatch.setattr(registry, "_loading", False)
    res = invoke(["list", "units"], tmp_path)
    assert res.exit_code == 130 and "Traceback" not in res.stderr, (res.exit_code, res.stderr)
    assert res.stderr.strip().startswith("aborted while importing dynlab plug-in 'interrupting' (interrupting_plugin)")


def test_a_full_disk_during_a_sweep_is_only_its_one_line(tmp_path, monkeypatch, caplog):
    """Dask's "Compute Failed" block, with the traceback, was printed before the one line."""
    import errno

    from cli_runner import TINY_CELL
    from dynlab import store

    def full(run_dir, *args, **kwargs):
        raise store.storage_error(OSError(errno.ENOSPC, "No space left on device"), run_dir / store.METRICS)

    monkeypatch.setattr(store, "save_checkpoint", full)
    (tmp_path / "s.toml").write_text(TINY_CELL + "[sweep]\nseed = [0]\n")
    res = invoke(["run", "s.toml", "--out", "o", "-q"], tmp_path)
    one_line_error(res, "metrics.nc': the file system is full")
    failed = [r.getMessage() for r in caplog.records if "Compute Failed" in r.getMessage()]
    assert not failed, failed  # not logged at all, so no handler prints it
