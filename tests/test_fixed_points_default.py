"""Fixed points that find what a network computes (issue 48, items 1, 2, 6 and the fixed-point options).

The truth is closed-form and does not come from the code under test: a diagonal tanh network
h_i <- tanh(w h_i + w_in x_i + b) with w = 2 has, per unit at zero input, the three roots of
tanh(w h + b) = h (scipy's brentq), so 3^3 = 27 fixed points, of which the 2^3 = 8 with every
unit at an outer root are stable (|tanh'| w < 1 there) — the 3-bit flip-flop's solution, built
by hand rather than trained. Its input weights w_in = 3 let a flip-flop pulse of +-1 flip a unit,
so the task's inputs carry the network through all 8 corners, while the autonomous trajectory
from h = 0 (the bias b > 0 tips it) settles in one corner: one basin.
"""

from __future__ import annotations

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import dynlab
from cli_runner import invoke, one_line_error
from dynlab.analyses.fixed_points import fixed_points_analysis, fixed_points_figure, fixed_points_summary
from dynlab.analyses.protocol import Autonomous, Constant, OwnTask, TaskStream
from dynlab.scenarios.spec import analysis_options

W, W_IN, B = 2.0, 3.0, 0.05
FAST = dict(steps=300, burn_in=20, ics=32)


def roots(u: float = 0.0) -> list[float]:
    """The fixed points of one unit, tanh(W h + W_IN u + B) = h, by brentq on a fine bracket grid."""
    f = lambda h: np.tanh(W * h + W_IN * u + B) - h  # noqa: E731
    grid = np.linspace(-1.0, 1.0, 2001)
    return [scipy.optimize.brentq(f, a, b, xtol=1e-15) for a, b in zip(grid[:-1], grid[1:]) if f(a) * f(b) < 0]


@pytest.fixture(scope="module")
def network():
    """The diagonal flip-flop network (3 units, 3 inputs) and its task, the 3-bit flip-flop."""
    task = dynlab.build("task", "flipflop", bits=3, length=32)
    model = dynlab.build("model", unit="rnn", input_size=3, output_size=3, key=jax.random.key(0), hidden=3)
    cell = model.cells[0]
    cell = eqx.tree_at(lambda c: (c.w_hh, c.w_xh, c.b_h), cell,
                       (W * jnp.eye(3), W_IN * jnp.eye(3), jnp.full(3, B)))
    return eqx.tree_at(lambda m: m.cells[0], model, cell), task


def _stable(ds):
    near = ~ds.beyond_visited.values
    return ds.points.values[(ds.stability.values.astype(str) == "stable") & near]


def test_the_default_samples_under_the_models_task_and_finds_every_corner(network):
    """With the model's task known (a run's, a cell's: the function the command line and a
    scenario use resolves it), the default protocol visits the states under the task's inputs and
    the points are those at zero input: the 8 stable corners at the closed-form roots, confirmed
    by the second sampling."""
    model, task = network
    options = analysis_options({"name": "fixed-points", **FAST}, task)
    assert isinstance(options["input"], OwnTask) and options["input"].task is task
    ds = fixed_points_analysis(model, **options)
    assert ds.attrs["input"] == "zero input" and "the model's task" in ds.attrs["protocol"]
    outer = sorted(roots())[::2]  # the two outer roots of three
    truth = np.array(list(itertools.product(outer, repeat=3)))
    stable = _stable(ds)
    assert len(stable) == 8
    assert max(np.abs(truth - p).sum(axis=1).min() for p in stable) < 1e-8
    assert ds.attrs["one_input_condition"] == 0 and ds.attrs["start_stable_points"] >= 2
    assert ds.attrs["confirmed"] == 1 and ds.attrs["confirm_n_stable"] == 8
    assert "confirmed" in fixed_points_summary(ds) and "sampling:" not in fixed_points_summary(ds)


def test_without_a_task_the_default_is_autonomous(network):
    """A fresh model called from Python with no task keeps the autonomous default."""
    model, _ = network
    assert analysis_options({"name": "fixed-points"}, None)["input"] == Autonomous()
    ds = fixed_points_analysis(model, **FAST)
    assert ds.attrs["protocol"] == "autonomous (zero input)"


def test_one_basin_and_one_input_condition_are_said_with_how_to_sample_more(network):
    """Autonomous, the trajectory settles in the (+, +, +) corner: every start comes from one input
    condition and (unperturbed) from one basin, and the summary says so and names the protocols
    that sample more. With the perturbations switched off (scales = 0) the first search finds only
    that corner; the second sampling, along the slowest directions, finds its neighbours, so the
    count is reported as not confirmed, in the summary and in the reading line."""
    model, _ = network
    ds = fixed_points_analysis(model, input=Autonomous(), **FAST)
    text = fixed_points_summary(ds)
    assert ds.attrs["one_input_condition"] == 1 and ds.attrs["start_points"] == 1
    assert "from one input condition" in text and "from one basin" in text and "--input task=NAME" in text
    narrow = fixed_points_analysis(model, input=Autonomous(), scales=(0.0,), **FAST)
    stable = _stable(narrow)
    assert len(stable) == 1 and np.all(stable[0] > 0)
    assert narrow.attrs["confirmed"] == 0 and narrow.attrs["confirm_n_new_stable"] >= 1
    assert "NOT confirmed" in fixed_points_summary(narrow) and "not confirmed" in narrow.attrs["reading"]
    skipped = fixed_points_analysis(model, input=Autonomous(), scales=(0.0,), confirm=False, **FAST)
    assert skipped.attrs["confirmed"] == -1 and "not run" in fixed_points_summary(skipped)


def test_a_constant_on_one_input_channel_holds_that_bit(network):
    """Holding bit 1 at u = +1 leaves unit 1 one root (tanh(2h + 3 + b) = h), the others three:
    2^2 = 4 stable points, unit 1 at its one root, the others at their outer roots."""
    model, _ = network
    ds = fixed_points_analysis(model, input=Constant([1.0, 0.0, 0.0]), **FAST)
    assert ds.attrs["input"] == "constant input [1, 0, 0]"
    held, free = roots(1.0), sorted(roots())[::2]
    assert len(held) == 1
    truth = np.array([[held[0], a, b] for a, b in itertools.product(free, repeat=2)])
    stable = _stable(ds)
    assert len(stable) == 4
    assert max(np.abs(truth - p).sum(axis=1).min() for p in stable) < 1e-8


def test_the_state_space_panel_is_scaled_by_the_visited_states(network):
    """A point far beyond the visited states does not set the axes: it is drawn on the edge with
    a marker pointing to it, the limits stay those of the trajectory (plus the margin), and the
    legend names only what is drawn (no slow points here, so no 'slow' entry)."""
    import matplotlib.pyplot as plt

    model, task = network
    ds = fixed_points_analysis(model, input=TaskStream(task), at="zero", **FAST)
    assert not (~ds.is_fixed.values).any()
    far = ds.point_pcs.values.copy()
    far[0] = [175.0, -175.0, 0.0][: far.shape[1]]
    ds["point_pcs"] = (("point", "pc"), far)
    fig = fixed_points_figure(ds)
    ax = fig.axes[0]
    traj = ds.trajectory_pcs.values
    span = traj[:, 0].max() - traj[:, 0].min()
    assert ax.get_xlim()[1] < traj[:, 0].max() + 0.2 * span and ax.get_xlim()[0] > traj[:, 0].min() - 0.2 * span
    edge = [line for line in ax.lines if line.get_gid() == "beyond the axes"]
    assert len(edge) == 1 and edge[0].get_marker() in (">", "v")  # it lies right of and below the panel
    x, y = edge[0].get_xydata()[0]
    assert x in ax.get_xlim() or y in ax.get_ylim()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "fixed (q ≤ q_tol)" in labels and not any(label.startswith("slow") for label in labels)
    assert "beyond the axes (at the edge)" in labels
    plt.close(fig)


def test_every_option_of_fixed_points_has_help(tmp_path):
    """Each option's help comes from the docstring's Args: (dynlab.cli.analyze.parameter_help);
    what is left once the generated '[kind; default ...]' is taken off must say something."""
    import re

    from dynlab.cli.analyze import generated_command

    command = generated_command("fixed-points")
    for param in command.params:
        if param.param_type_name != "option" or "--help" in param.opts:
            continue
        text = re.sub(r"\s*[\[(][^\[\]()]*default[^\[\]]*[\])]\s*$", "", param.help or "").strip()
        assert text, f"{param.opts[0]} has no help"
    helped = invoke(["analyze", "fixed-points", "--help"], tmp_path)
    assert helped.exit_code == 0 and "the model's own task" in helped.output


@pytest.mark.parametrize("args, fragments", [
    (["analyze", "fixed-points", "--model", "rnn", "--input", "constant=[1.0,0.0,0.0]"],
     ["gives 3 value(s) but the model has 2 input channel(s)"]),
    (["analyze", "lyapunov", "--model", "rnn", "--input", "constant=[1.0]"], ["the model has 2 input channel(s)"]),
    (["analyze", "fixed-points", "--input", "constant=[]"], ["constant must be one number per input channel"]),
    (["analyze", "fixed-points", "--input", "constant=[1,nan]"], ["nan"]),
])
def test_a_wrong_constant_is_one_line_exit_2(args, fragments, tmp_path):
    one_line_error(invoke(args, tmp_path), *fragments)
