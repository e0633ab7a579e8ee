"""#35: the registered analysis ``context-modes`` (Mante et al. 2013's reading, per context).

Its search is the one `tests/test_context_integration_truth.py` checks against the paper's solution
(through `benchmarks/context_integration.py`, which calls the same `slow_modes`). Here: the choice
axis against its closed form for a unit whose output is linear in its state, that each context's
numbers are its cued stream's (not the other's), and a task without contexts as one line."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from cli_runner import invoke, one_line_error
from dynlab import experiment
from dynlab.analyses.fixed_points import choice_axis, context_modes
from dynlab.analyses.state_map import run_in, state_map
from dynlab.errors import ConfigError


@pytest.fixture(scope="module")
def fresh():
    config = experiment.default_config("rnn", "context-integration")
    config["model"]["hidden"] = 8
    return experiment.build(config, training=False)


def test_the_choice_axis_of_a_linear_read_out_is_its_weights(fresh):
    """For ``rnn`` the output is ``W_out h + b``: the least-squares axis is exactly ``W_out^T (e_2 - e_1)``."""
    model, task = fresh.model, fresh.task
    x, _, _ = task.batch(jax.random.key(0), 16)
    smap = state_map(model)
    states = np.asarray(jax.vmap(lambda xs: run_in(smap, (xs, np.zeros(xs.shape[0], xs.dtype))))(x), np.float64)
    out = np.asarray(jax.vmap(model)(x), np.float64)
    w = choice_axis(states.reshape(-1, 8), (out[..., 2] - out[..., 1]).ravel())
    weight = np.asarray(model.readout.weight, np.float64)
    np.testing.assert_allclose(w, weight[2] - weight[1], rtol=1e-4, atol=1e-5)


def test_each_context_reads_its_own_cued_stream(fresh):
    ds = context_modes(fresh.model, task=fresh.task, trials=32, ics=8)
    for c in (0, 1):
        sel = ds.point_selection.sel(context=c)
        assert int(ds.n_slow.sel(context=c)) == int(np.isfinite(ds.point_mu_abs.sel(context=c)).sum()) > 0
        assert float(ds.selection_cued.sel(context=c)) == pytest.approx(float(sel.isel(input=c).median(skipna=True)))
        assert float(ds.selection_other.sel(context=c)) == pytest.approx(float(sel.isel(input=1 - c).median(skipna=True)))
    assert float(ds.selection_ratio_min) == pytest.approx(float(ds.selection_ratio.min()))
    far = int(np.argmax(np.abs(np.log(ds.mu1_abs.values))))
    assert float(ds.mu1_farthest) == float(ds.mu1_abs.values[far])


def test_a_task_without_contexts_is_one_line(tmp_path):
    adding = experiment.build(experiment.default_config("rnn", "adding"), training=False)
    with pytest.raises(ConfigError, match="train on \\(or give --task\\) context-integration"):
        context_modes(adding.model, task=adding.task)
    one_line_error(invoke(["analyze", "context-modes", "--model", "rnn", "--task", "adding", "-q"], tmp_path),
                   "context-modes reads a network trained on context-dependent integration")
