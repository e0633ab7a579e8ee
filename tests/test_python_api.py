"""Issue 47, item 2: the Python API is the command line's twin.

- ``dynlab.analyze`` returns the dataset ``dynlab analyze`` writes, stamp included (only the time differs);
- options given as Python values, as command-line text and as a scenario entry reach the analysis as
  the same arguments (the analysis replaced by a recorder, as in ``test_analyze_defaults.py``);
- a run trained in float32 loads under ``jax_enable_x64`` and its analyses run in float64, agreeing
  with the float32 analysis to float32 precision; a genuine mismatch names the array and how it differs;
- ``dynlab.Study`` runs a study and returns its datasets.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil

import jax
import numpy as np
import pytest
import xarray as xr

import dynlab
from cli_runner import invoke, one_line_error
from dynlab import registry
from dynlab.errors import CheckpointError, ConfigError

TINY = dict(task={"name": "adding", "length": 6}, hidden=4,
            train={"batch_size": 8, "eval_size": 16, "eval_every": 2, "log_every": 1})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny trained run (float32), made through the Python API."""
    out = tmp_path_factory.mktemp("api") / "run"
    run = dynlab.fit("rnn", steps=2, out=out, progress=False, **TINY)
    assert run.path == str(out) and (out / "model.eqx").is_file()
    return out


def _without_time(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if k not in ("created", "time", "path", "figure")}
    return ds


def test_the_python_dataset_is_the_one_the_command_writes(run_dir, tmp_path):
    result = invoke(["analyze", "spectra", "--checkpoint", str(run_dir), "--out", str(tmp_path / "s.nc"), "-q"],
                    tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    written = xr.load_dataset(tmp_path / "s.nc", engine="h5netcdf")
    returned = dynlab.analyze("spectra", dynlab.load(str(run_dir)))
    assert returned.attrs["checkpoint"] == str(run_dir) and "config" in returned.attrs
    xr.testing.assert_identical(_without_time(written), _without_time(returned))


class Recorded(Exception):
    """Raised by the recorder once it has the arguments: nothing needs computing."""


def _recorder(entry, calls):
    @functools.wraps(entry.obj)  # its signature: the command's options and the groups are read from it
    def record(model, **options):
        calls.append({k: (type(v).__name__, dataclasses.astuple(v)) if dataclasses.is_dataclass(v) else v
                      for k, v in options.items() if k != "task"})
        raise Recorded

    return dataclasses.replace(entry, obj=record)


@pytest.mark.parametrize("name, text, values", [
    ("lyapunov", ["--qr", "k=3", "--steps", "300", "--burn-in", "20", "--input", "autonomous"],
     {"qr": {"k": 3}, "steps": 300, "burn_in": 20, "input": "autonomous"}),
    ("spectra", ["--every", "5", "--steps", "40"], {"every": 5, "steps": 40}),
])
def test_options_as_text_as_toml_and_as_python_values_reach_the_analysis_alike(name, text, values, run_dir, tmp_path,
                                                                                monkeypatch):
    from dynlab.scenarios.spec import _check_analysis, analysis_options

    entry = registry.get("analysis", name)
    calls: list[dict] = []
    monkeypatch.setitem(registry._REGISTRY["analysis"], name, _recorder(entry, calls))
    invoke(["analyze", name, "--checkpoint", str(run_dir), *text, "-q"], tmp_path)
    run = dynlab.load(run_dir)
    with pytest.raises(Recorded):
        dynlab.analyze(name, run, **values)
    with pytest.raises(Recorded):  # a scenario entry, as a cell resolves it
        registry.get("analysis", name).obj(run.model, **analysis_options(_check_analysis({"name": name, **values}),
                                                                         run.task, run.seed))
    assert len(calls) == 3, calls
    assert calls[0] == calls[1] == calls[2]


def test_a_mistaken_option_is_the_command_line_error_before_any_work(run_dir):
    with pytest.raises(ConfigError, match="steps"):
        dynlab.analyze("lyapunov", dynlab.load(run_dir), steps=0)
    with pytest.raises(ConfigError, match="unknown config key"):
        dynlab.analyze("lyapunov", dynlab.load(run_dir), stpes=10)


def test_a_float32_run_loads_under_x64_and_is_analysed_in_float64(run_dir):
    options = dict(qr={"k": 2}, steps=120, burn_in=20, realisations=2, input="autonomous")
    single_run = dynlab.load(run_dir)
    single = dynlab.analyze("lyapunov", single_run, **options)
    jax.config.update("jax_enable_x64", True)
    try:
        run = dynlab.load(run_dir)
        double = dynlab.analyze("lyapunov", run, **options)
    finally:
        jax.config.update("jax_enable_x64", False)
    pairs = [(a, b) for a, b in zip(jax.tree.leaves(single_run.model), jax.tree.leaves(run.model))
             if isinstance(a, jax.Array) and a.dtype.kind == "f"]
    assert pairs and all(b.dtype == np.float64 for _, b in pairs)
    assert all(np.array_equal(np.asarray(a, np.float64), np.asarray(b)) for a, b in pairs)  # widened exactly
    assert single.attrs["dtype"] == "float32" and double.attrs["dtype"] == "float64"
    # the same network; the realisations' random initial frames are drawn in each precision (other
    # numbers), so over 100 steps the estimates agree only to their transient, not to float32's resolution
    assert np.all(np.isfinite(double.exponents.values))
    np.testing.assert_allclose(double.exponents.values, single.exponents.values, atol=0.02)


def test_a_run_whose_arrays_do_not_fit_its_config_names_the_array(run_dir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    config = (other / "config.toml").read_text()
    assert "hidden = 4" in config
    (other / "config.toml").write_text(config.replace("hidden = 4", "hidden = 5"))
    with pytest.raises(CheckpointError) as e:
        dynlab.load(other)
    message = str(e.value)
    assert "\n" not in message and "in the file" in message and "(4" in message and "(5" in message, message


def test_a_study_runs_from_python_and_returns_its_datasets(tmp_path):
    (tmp_path / "tiny.toml").write_text(
        'name = "tiny-api"\ndescription = "two seeds"\n[model]\nunit = "rnn"\nhidden = 4\n'
        '[task]\nname = "adding"\nlength = 6\n[train]\nsteps = 2\nbatch_size = 8\neval_size = 16\n'
        '[[analyses]]\nname = "spectra"\nsteps = 20\nevery = 5\n[sweep]\nseed = [0, 1]\n')
    study = dynlab.Study.load(tmp_path / "tiny.toml")
    assert study.name == "tiny-api" and len(study.cells) == 2
    result = study.run(tmp_path / "out")
    assert list(result.sweep.seed.values) == [0, 1]
    assert set(result.sweep.status.values) == {"ok"}
    assert (tmp_path / "out" / "sweep.nc").is_file() and result.findings is None


def test_a_programmed_scenario_is_named_as_such(tmp_path):
    with pytest.raises(ConfigError, match="programmed scenario"):
        dynlab.Study.load("pc-width-depth")
    result = invoke(["analyze", "lyapunov", "--steps", "0"], tmp_path)
    one_line_error(result, "steps")


def test_each_config_value_is_checked_once_per_cell_when_a_study_is_parsed(monkeypatch):
    """Issue 47: counted on compare-units (8 cells), a run-config value is checked once per cell that
    holds it — not again for each of the cell's builds (to check its memory, its hooks) — and parsing
    the same study again checks none of them again. Before: 246 checks, ``model.hidden`` 33 times,
    ``model.unit`` 24 times; now 53 (the count below is what this run measures)."""
    import collections

    from dynlab import config, experiment
    from dynlab.scenarios import spec

    counts: collections.Counter = collections.Counter()
    check = config.check_value

    def counted(where, annotation, value, **kw):
        counts[where] += 1
        return check(where, annotation, value, **kw)

    monkeypatch.setattr(registry, "check_value", counted)
    monkeypatch.setattr(experiment, "_VALIDATED", {})
    scenario = spec.load("compare-units")
    cells = len(scenario.cells)
    run_keys = {k: n for k, n in counts.items() if k.split(".")[0] in ("model", "task", "train", "rule")}
    # once per cell; a task key once more for each analysis across cells (it builds the runs' common task)
    assert run_keys and max(run_keys.values()) <= cells + len(scenario.across), run_keys
    assert all(n <= cells for k, n in run_keys.items() if not k.startswith("task.")), run_keys
    assert not any(k in counts for k in ("model.unit", "model.input_size", "model.output_size"))
    counts.clear()
    spec.load("compare-units")  # the cells' configs again: none of their values checked again
    assert not any(k.split(".")[0] in ("model", "train", "rule") for k in counts), counts
    assert all(n <= len(scenario.across) for k, n in counts.items() if k.startswith("task.")), counts


def test_an_analysis_entry_is_parsed_into_its_values_once_not_at_each_cell_and_stage(monkeypatch):
    """Issue 47: compare-units runs lyapunov, with ``qr = {k = 8}``, at 2 stages of 8 cells. Its
    options become values once: one ``QRSettings`` is made for the 16 cell-stages, not one each
    (the model-dependent k <= N stays with the model, once per cell)."""
    from dynlab.analyses import qr_settings
    from dynlab.scenarios import spec

    made = []
    check = qr_settings.QRSettings.__post_init__
    monkeypatch.setattr(qr_settings.QRSettings, "__post_init__", lambda self: (made.append(self), check(self))[1])
    monkeypatch.setattr(spec, "_PARSED", {})
    scenario = spec.load("compare-units")
    task, wanted = registry.build("task", "flipflop"), qr_settings.QRSettings(k=8)
    made.clear()
    runs = [spec.analysis_options(entry, task, 0) for cell in scenario.cells for entry in cell.analyses
            if entry["name"] == "lyapunov" for _ in spec.results_of(entry)]
    assert len(made) == 1, made
    assert len(runs) == 16 and all(r["qr"] == wanted for r in runs)
