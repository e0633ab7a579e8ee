"""Issue 49: the registered analysis ``continuation`` (paths, seeds, dataset, figure, summary, validation).

Truths that do not come from the code:

- a 1-unit tanh RNN built as $h \\leftarrow \\tanh(w h + u)$ has its folds in $u$ where
  $h^{*2} = 1 - 1/w$ and $u^* = \\operatorname{atanh}(h^*) - w h^*$ ($\\pm 0.532840$ at $w = 2$), and the
  same folds along a parameter path (the bias) and a homotopy (its end model's input weight);
- every fold the analysis finds on random 8-unit tanh networks is confirmed by an independent
  method: the ``fixed-points`` search (speed minimisation from many starts) counts two fixed points
  more on one side of it than on the other;
- the command line, a scenario entry and Python give the same options and the same dataset.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import dynlab
from cli_runner import invoke, one_line_error
from dynlab import registry, store
from dynlab.analyses.continuation.figure import continuation_figure, continuation_summary
from dynlab.analyses.continuation.model import Settings, continuation_analysis
from dynlab.analyses.continuation.paths import HomotopyPath, ParameterPath
from dynlab.analyses.protocol import Noise

W = 2.0
H_FOLD = np.sqrt(1 - 1 / W)
U_FOLD = abs(np.arctanh(H_FOLD) - W * H_FOLD)  # 0.532840...; the folds are at -+ this
FAST = {"ics": 16, "steps": 200, "burn_in": 20}
SETTINGS = {"ds": 0.02, "ds_max": 0.1, "max_points": 300}


def scalar_tanh(w: float = W, bias: float = 0.0, input_weight: float = 1.0):
    """The experiment of a 1-unit tanh RNN on the 1-bit flip-flop, $h \\leftarrow \\tanh(w h + a x + b)$."""
    exp = dynlab.model("rnn", task={"name": "flipflop", "bits": 1, "length": 20}, hidden=1)
    cell = exp.model.cells[0]
    model = eqx.tree_at(lambda m: (m.cells[0].w_hh, m.cells[0].w_xh, m.cells[0].b_h), exp.model,
                        (jnp.full_like(cell.w_hh, w), jnp.full_like(cell.w_xh, input_weight), jnp.full_like(cell.b_h, bias)))
    model = eqx.tree_at(lambda m: (m.readout.weight, m.readout.bias), model,
                        (jnp.ones_like(model.readout.weight), jnp.zeros_like(model.readout.bias)))
    return dataclasses.replace(exp, model=model)


def run_holding(template, out, model, hidden: int = 1):
    """A copy of the run directory ``template`` that holds ``model`` (its config's hidden size set to ``hidden``)."""
    shutil.copytree(template, out)
    config = (out / "config.toml").read_text()
    (out / "config.toml").write_text(config.replace("hidden = 1", f"hidden = {hidden}"))
    store.save_model(out, model)
    return out


@pytest.fixture(scope="module")
def tanh_run(tmp_path_factory):
    """A run directory holding the 1-unit map h <- tanh(2h + u) (trained 1 step, then its weights set)."""
    out = tmp_path_factory.mktemp("cont") / "run"
    dynlab.fit("rnn", task={"name": "flipflop", "bits": 1, "length": 20}, hidden=1, steps=1, out=out, progress=False,
               train={"batch_size": 4, "eval_size": 4, "eval_every": 1, "log_every": 1})
    store.save_model(out, scalar_tanh().model)
    return out


@pytest.fixture(scope="module")
def tanh_dataset():
    return continuation_analysis(scalar_tanh().model, settings=Settings(**SETTINGS), **FAST)


def test_the_folds_of_a_scalar_tanh_network_are_at_the_closed_form(tanh_dataset):
    ds = tanh_dataset
    folds = ds.special_kind.values == "fold"
    assert int(ds.n_seeds) == 3 and int(ds.n_folds) == 2, continuation_summary(ds)
    np.testing.assert_allclose(np.sort(ds.special_parameter.values[folds]), [-U_FOLD, U_FOLD], atol=1e-6)
    np.testing.assert_allclose(np.sort(ds.special_states.values[folds, 0]), [-H_FOLD, H_FOLD], atol=1e-5)
    # a stable point and a saddle meet at each: their unstable counts on either side are 0 and 1
    pairs = {tuple(sorted((int(a), int(b)))) for a, b in zip(ds.special_unstable_before.values[folds],
                                                              ds.special_unstable_after.values[folds])}
    assert pairs == {(0, 1)}
    # every stored point is a fixed point of the map at its parameter, stable exactly where |F'| < 1
    n = int(ds.n_points[0])
    h, u = ds.states.values[0, :n, 0], ds.parameter.values[0, :n]
    np.testing.assert_allclose(np.tanh(W * h + u), h, atol=1e-9)
    slope = W * (1 - np.tanh(W * h + u) ** 2)
    away = np.abs(slope - 1) > 1e-3
    assert np.array_equal(ds.stable.values[0, :n][away], slope[away] < 1)


def test_the_summary_names_each_fold_and_what_meets_there(tanh_dataset):
    text = continuation_summary(tanh_dataset)
    lines = [line for line in text.splitlines() if line.startswith("fold at u = ")]
    assert len(lines) == 2, text
    assert f"fold at u = {-U_FOLD:.6g}" in text and f"fold at u = {U_FOLD:.6g}" in text
    # one state component: the point with one unstable direction is a repeller ("unstable point")
    assert all("a stable point" in line and "an unstable point" in line and "meet" in line for line in lines)


def test_the_diagram_draws_stable_solid_unstable_dashed_and_marks_the_folds(tanh_dataset):
    ds = tanh_dataset
    fig = continuation_figure(ds)
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if line.get_linestyle() in ("-", "--")]
    for line in lines:  # read-out weight 1, bias 0: the read-out y0 is the state
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        np.testing.assert_allclose(np.tanh(W * y + x), y, atol=1e-9)
        slope = W * (1 - y[:-1] ** 2)  # the last point is shared with the next stretch, of the other stability
        inside = np.abs(slope - 1) > 1e-3
        assert np.all((slope[inside] < 1) == (line.get_linestyle() == "-"))
    assert {line.get_linestyle() for line in lines} == {"-", "--"}
    marks = [line for line in ax.get_lines() if line.get_marker() == "o" and line.get_linestyle() == "None"]
    assert len(marks) == 1 and marks[0].get_label().startswith("F: fold")
    np.testing.assert_allclose(np.sort(marks[0].get_xdata()), [-U_FOLD, U_FOLD], atol=1e-6)
    assert sorted(t.get_text() for t in ax.texts) == ["F", "F"]


@pytest.mark.parametrize("path, truth", [
    # the bias b along its own value: the same folds, at b = -+u*
    (ParameterPath("cells.0.b_h", index=(0,), span=(-1.0, 1.0)), U_FOLD),
    # from the model with input weight 0 (p = 0) to the one with input weight 1, input held at x0 = 0.8:
    # the input is 0.8 p, so the fold u* is at p = u* / 0.8
    ("homotopy", U_FOLD / 0.8),
])
def test_a_parameter_path_and_a_homotopy_find_the_same_folds(path, truth, tanh_run, tmp_path):
    model = scalar_tanh().model
    if path == "homotopy":
        other = run_holding(tanh_run, tmp_path / "a", scalar_tanh(input_weight=0.0).model)
        path = HomotopyPath(str(other), base=(0.8,), span=(0.0, 1.0), start=0.0)
    ds = continuation_analysis(model, path=path, settings=Settings(**SETTINGS), **FAST)
    folds = ds.special_parameter.values[ds.special_kind.values == "fold"]
    assert len(folds) >= 1 and np.min(np.abs(np.abs(folds) - truth)) < 1e-6, continuation_summary(ds)


def _cli(run, tmp_path, *options):
    return invoke(["analyze", "continuation", "--checkpoint", str(run), "--out", str(tmp_path / "c.nc"), *options],
                  tmp_path)


def _without_time(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if k not in ("created", "time", "path", "figure")}
    return ds


def test_the_command_prints_the_folds_and_writes_the_python_dataset(tanh_run, tmp_path):
    result = _cli(tanh_run, tmp_path, "--path", "channel=0,span=[-1,1]", "--ics", "16", "--steps", "200",
                  "--burn-in", "20", "--settings", "ds=0.02,max_points=300")
    assert result.exit_code == 0, result.output + result.stderr
    assert f"fold at u = {-U_FOLD:.6g}" in result.output and f"fold at u = {U_FOLD:.6g}" in result.output
    assert (tmp_path / "c.png").is_file()
    written = xr.load_dataset(tmp_path / "c.nc", engine="h5netcdf")
    returned = dynlab.analyze("continuation", dynlab.load(tanh_run), path={"channel": 0, "span": [-1, 1]}, ics=16,
                              steps=200, burn_in=20, settings={"ds": 0.02, "max_points": 300})
    xr.testing.assert_identical(_without_time(written), _without_time(returned))


class Recorded(Exception):
    """Raised by the recorder once it has the arguments."""


def test_options_as_text_as_toml_and_as_python_values_reach_the_analysis_alike(tanh_run, tmp_path, monkeypatch):
    from dynlab.scenarios.spec import _check_analysis, analysis_options

    entry = registry.get("analysis", "continuation")
    calls: list = []

    @functools.wraps(entry.obj)
    def record(model, **options):
        calls.append({k: v for k, v in options.items() if k != "task"})
        raise Recorded

    monkeypatch.setitem(registry._REGISTRY["analysis"], "continuation", dataclasses.replace(entry, obj=record))
    values = {"path": {"parameter": "cells.0.b_h", "index": [0], "span": [-1.5, 1.5]},
              "settings": {"ds": 0.005, "max_period": 4}, "switch": False, "input": "autonomous"}
    invoke(["analyze", "continuation", "--checkpoint", str(tanh_run), "--path",
            "parameter=cells.0.b_h,index=[0],span=[-1.5,1.5]", "--settings", "ds=0.005,max_period=4", "--no-switch",
            "--input", "autonomous", "-q"], tmp_path)
    run = dynlab.load(tanh_run)
    with pytest.raises(Recorded):
        dynlab.analyze("continuation", run, **values)
    with pytest.raises(Recorded):
        registry.get("analysis", "continuation").obj(run.model, **analysis_options(
            _check_analysis({"name": "continuation", **values}), run.task, run.seed))
    assert len(calls) == 3, calls
    assert calls[0] == calls[1] == calls[2]
    assert calls[0]["path"] == ParameterPath("cells.0.b_h", index=(0,), span=(-1.5, 1.5))
    assert calls[0]["settings"] == Settings(ds=0.005, max_period=4)


@pytest.mark.parametrize("options, fragments", [
    (["--path", "channel=1"], ("channel = 1", "0 <= channel <= 0")),
    (["--path", "direction=[1.0,0.0]"], ("direction has 2", "1 input channel")),
    (["--path", "parameter=cells.0.gain,span=[0,1]"], ("'cells.0.gain'", "cells[0].b_h", "cells[0].w_hh")),
    (["--path", "parameter=cells.0.w_hh,span=[0,1]"], ("shape (1, 1)", "index", "scale = true")),
    (["--path", "channel=0,span=[1,1]"], ("span", "empty")),
    (["--path", "channel=0,span=[0,nan]"], ("nan",)),
    (["--path", "channel=0,span=[0.5,1]"], ("start = 0", "outside span")),
    (["--path", "homotopy=nowhere"], ("'nowhere'", "run directory")),
    (["--settings", "ds=-0.1"], ("settings.ds", "> 0")),
])
def test_a_path_outside_the_model_is_one_line_before_any_work(options, fragments, tanh_run, tmp_path):
    one_line_error(_cli(tanh_run, tmp_path, *options), *fragments)


def test_a_homotopy_between_models_of_different_shapes_is_one_line(tanh_run, tmp_path):
    wide = dynlab.model("rnn", task={"name": "flipflop", "bits": 1, "length": 20}, hidden=2).model
    other = run_holding(tanh_run, tmp_path / "wide", wide, hidden=2)
    one_line_error(_cli(tanh_run, tmp_path, "--path", f'homotopy="{other}"'), "shape (2, 2)", "(1, 1)",
                   "one architecture")


def _fixed_point_count(model, u: float, starts: np.ndarray) -> tuple[int, np.ndarray]:
    """The fixed points that the ``fixed-points`` search (speed minimisation, not continuation)
    finds of ``model`` at the constant input ``u`` on channel 0, from ``starts``."""
    from dynlab.analyses.fixed_points.core import fixed_points
    from dynlab.analyses.state_map import state_map

    with jax.enable_x64(True):
        m = jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model)
        x = jnp.zeros(m.input_size, jnp.float64).at[0].set(u)
        found = fixed_points(state_map(m).step, jnp.asarray(starts), (x, jnp.zeros((), jnp.float64)),
                             q_tol=1e-14, q_max=1e-14, unique_tol=1e-6)
    return int(found.is_fixed.values.sum()), found.points.values


def random_tanh_network(seed: int):
    """A random 8-unit tanh network $h \\leftarrow \\tanh(J h + B x + b)$ with a few fixed points:
    $J = 2\\,(m_1 m_1^\\top + m_2 m_2^\\top)/N + 0.3\\,G/\\sqrt N$ (a random rank-2 part that makes it
    multistable, a random full-rank part), $B$, $b$ Gaussian; on 3 inputs."""
    k = jax.random.split(jax.random.key(100 + seed), 5)
    m = jax.random.normal(k[0], (8, 2))
    J = 2.0 * m @ m.T / 8 + 0.3 * jax.random.normal(k[1], (8, 8)) / np.sqrt(8)
    exp = dynlab.model("rnn", task={"name": "flipflop", "bits": 3, "length": 20}, hidden=8, seed=seed)
    return eqx.tree_at(lambda m: (m.cells[0].w_hh, m.cells[0].w_xh, m.cells[0].b_h), exp.model,
                       (J, jax.random.normal(k[2], (8, 3)), 0.1 * jax.random.normal(k[3], (8,))))


@pytest.mark.parametrize("seed", [1, 3])
def test_every_fold_of_a_random_tanh_network_changes_the_fixed_point_count_by_two(seed):
    """At every fold $u^*$ that the analysis reports on a random 8-unit tanh network, the independent
    search (speed minimisation from 256 random starts and 32 around the fold's state, then again from
    the points it found on both sides, so that a point away from the fold is not missed on one side only) finds two
    fixed points more on one side ($u^* \\pm 0.002$) than on the other, and the two within 0.2 of
    the fold's state."""
    model = random_tanh_network(seed)
    ds = continuation_analysis(model, input=Noise(1.0), settings=Settings(**SETTINGS), cycles=False, ics=32, steps=400,
                               burn_in=20)
    folds = np.flatnonzero(ds.special_kind.values == "fold")
    assert len(folds), continuation_summary(ds)
    starts = np.asarray(jax.random.uniform(jax.random.key(seed), (256, 8), minval=-1, maxval=1))
    for i in folds:
        u, h = float(ds.special_parameter[i]), ds.special_states.values[i]
        near_fold = h + 0.05 * np.asarray(jax.random.normal(jax.random.key(7), (32, 8)))
        found = {side: _fixed_point_count(model, u + side * 2e-3, np.concatenate([starts, near_fold]))[1] for side in (-1, 1)}
        counts = {}
        for side in (-1, 1):  # again, from the points found on both sides: a point away from the fold moves by O(0.002)
            n, points = _fixed_point_count(model, u + side * 2e-3, np.concatenate([starts, near_fold, *found.values()]))
            counts[side] = (n, int(np.sum(np.linalg.norm(points - h, axis=1) < 0.2)))
        (n_lo, near_lo), (n_hi, near_hi) = counts[-1], counts[1]
        assert abs(n_hi - n_lo) == 2, (u, counts, continuation_summary(ds))
        assert abs(near_hi - near_lo) == 2, (u, counts)


def test_branches_born_inside_the_span_are_seeded_from_its_ends():
    """$h \\leftarrow \\tanh(3h + u - 2)$ has one fixed point at $u = 0$; the pair born at the fold
    $u^* = 2 - 1.303274 = 0.696726$ (closed form, as above with $w = 3$ shifted by the bias) never
    reaches $u = 0$: only the search at the span's end $u = 1$ finds it."""
    w, bias = 3.0, -2.0
    h_star = np.sqrt(1 - 1 / w)
    fold = -bias - (w * h_star - np.arctanh(h_star))  # the upper pair's fold: u* + bias = atanh(h*) - w h* < 0
    model = scalar_tanh(w, bias=bias).model
    with_ends = continuation_analysis(model, settings=Settings(**SETTINGS), **FAST)
    without = continuation_analysis(model, settings=Settings(**SETTINGS), ends=False, **FAST)
    folds = lambda ds: ds.special_parameter.values[ds.special_kind.values == "fold"]  # noqa: E731
    assert len(folds(without)) == 0 and int(without.n_seeds) == 1
    assert len(folds(with_ends)) == 1 and abs(folds(with_ends)[0] - fold) < 1e-6, (folds(with_ends), fold)
    assert int(with_ends.n_seeds) == 1  # the seeds counted are those at the start


def test_states_relaxed_at_an_end_reach_the_attractors_there_that_their_starts_lie_in_the_basins_of():
    """The end seeds' search also starts where the visited states go with the map held at the end
    (``relaxed_states``). For $h \\leftarrow \\tanh(3h + u - 2)$ held at $u = 1$, starts on either side of
    the unstable fixed point go to the two stable ones, each the root of $h = \\tanh(3h - 1)$ found by
    bisection (an independent solver)."""
    from scipy.optimize import brentq

    from dynlab.analyses.continuation.model import relaxed_states
    from dynlab.analyses.continuation.paths import InputPath

    g = lambda h: np.tanh(3 * h - 1) - h  # noqa: E731
    low, middle, high = brentq(g, -1, -0.5), brentq(g, 0.5, 0.6), brentq(g, 0.6, 1)
    with jax.enable_x64(True):
        model = jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a,
                             scalar_tanh(3.0, bias=-2.0).model)
        family = InputPath(channel=0).family(model)
        starts = np.linspace(-0.9, 0.9, 40)[:, None]
        relaxed = relaxed_states(family.F, 1.0, starts, starts=40)
    last = relaxed.reshape(-1, 40)[-1]  # every tenth state of the second half: the last row is where each went
    below = starts[:, 0] < middle
    np.testing.assert_allclose(last[below], low, atol=1e-9)
    np.testing.assert_allclose(last[~below], high, atol=1e-9)


FLIPFLOP_1 = {"name": "flipflop", "bits": 1, "length": 20}
TINY_TRAIN = {"batch_size": 4, "eval_size": 4, "eval_every": 1, "log_every": 1}


def _arrays(model) -> list[tuple[str, np.ndarray]]:
    leaves = jax.tree_util.tree_flatten_with_path(eqx.filter(model, eqx.is_array))[0]
    return [(jax.tree_util.keystr(p), np.asarray(x)) for p, x in leaves]


def test_the_initial_model_is_the_arrays_training_began_with(tmp_path):
    """``homotopy = "init"`` rebuilds a run's initial model from its config (issue 49). The truth is
    the trainer's own: a run whose recurrent cells were frozen (``train.freeze``) still holds, after
    training, the arrays it began with, and they are the rebuilt ones to the bit; the read-out,
    which trained, is not."""
    from dynlab.experiment import initial_model

    dynlab.fit("rnn", task=FLIPFLOP_1, hidden=2, steps=2, out=tmp_path / "r", progress=False,
               train={**TINY_TRAIN, "freeze": ["cells*"]})
    run = dynlab.load(tmp_path / "r")
    pairs = list(zip(_arrays(run.model), _arrays(initial_model(run))))
    assert all(a[0] == b[0] for a, b in pairs)
    assert {a[0]: np.array_equal(a[1], b[1]) for a, b in pairs} == {
        ".cells[0].w_hh": True, ".cells[0].w_xh": True, ".cells[0].b_h": True,
        ".readout.weight": False, ".readout.bias": False}


def test_a_homotopy_from_init_is_the_homotopy_from_a_run_holding_the_initial_model(tanh_run, tmp_path):
    """``--path homotopy=init`` on a run follows the homotopy from the model that run started from:
    the same dataset as ``homotopy = RUN_DIR`` with RUN_DIR holding that model, from the command
    line and from Python; the dataset names where it started."""
    from dynlab.experiment import initial_model

    options = ["--ics", "16", "--steps", "200", "--burn-in", "20", "--settings", "ds=0.02,max_points=300"]
    result = _cli(tanh_run, tmp_path, "--path", "homotopy=init,base=[0.8]", *options)
    assert result.exit_code == 0, result.output + result.stderr
    from_init = xr.load_dataset(tmp_path / "c.nc", engine="h5netcdf")
    assert from_init.attrs["path"].startswith("homotopy from this run's initial model (p = 0)"), from_init.attrs
    start = run_holding(tanh_run, tmp_path / "init", initial_model(dynlab.load(tanh_run)))
    explicit = dynlab.analyze("continuation", dynlab.load(tanh_run), path={"homotopy": str(start), "base": [0.8]},
                              ics=16, steps=200, burn_in=20, settings={"ds": 0.02, "max_points": 300})
    assert int(explicit.n_branches) >= 1
    for name in explicit.data_vars:
        xr.testing.assert_equal(from_init[name], explicit[name])


def test_a_homotopy_from_init_needs_a_run_dynlab_trained(tanh_run, tmp_path):
    """Called on a bare model, or on an imported run (whose initial weights dynlab never saw),
    ``homotopy = "init"`` is one line naming what to give instead."""
    from dynlab.errors import ConfigError

    with pytest.raises(ConfigError, match="needs the run the model was trained in"):
        continuation_analysis(scalar_tanh().model, path=HomotopyPath("init"), **FAST)
    imported = shutil.copytree(tanh_run, tmp_path / "imported")
    (imported / store.IMPORTED).write_text('format = "torch-rnn"\n')
    one_line_error(_cli(imported, tmp_path, "--path", "homotopy=init"), "imported", "initial weights", "step 0")


def test_a_study_continues_each_cell_from_its_own_initial_model(tmp_path):
    """In a study, ``path = {homotopy = "init"}`` starts from the cell's model before training (its
    stage ``init``), kept for it; the dataset is the one ``dynlab.analyze`` gives on the cell's run
    directory, whose initial model is rebuilt from its config instead."""
    (tmp_path / "s.toml").write_text(
        'name = "from-init"\nseed = 0\n[model]\nunit = "rnn"\nhidden = 1\n'
        '[task]\nname = "flipflop"\nbits = 1\nlength = 20\n'
        '[train]\nsteps = 2\nbatch_size = 4\neval_size = 4\neval_every = 1\nlog_every = 1\ncheckpoint_every = 2\n'
        '[[analyses]]\nname = "continuation"\npath = {homotopy = "init", base = [0.8]}\nics = 16\nsteps = 200\n'
        'burn_in = 20\nsettings = {ds = 0.02, max_points = 300}\n')
    result = invoke(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"), "-q"], tmp_path)
    assert result.exit_code == 0, result.output + result.stderr
    (written,) = (tmp_path / "out").rglob("continuation.nc")
    in_study = xr.load_dataset(written, engine="h5netcdf")
    again = dynlab.analyze("continuation", dynlab.load(written.parent), path={"homotopy": "init", "base": [0.8]},
                           ics=16, steps=200, burn_in=20, settings={"ds": 0.02, "max_points": 300})
    assert int(again.n_branches) >= 1
    for name in again.data_vars:
        xr.testing.assert_equal(in_study[name], again[name])
