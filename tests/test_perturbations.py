"""Perturbations against hand-written equations: step drive, noisy drive statistics, contrast formula."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import dynlab
from dynlab.errors import ConfigError
from dynlab.analyses.perturb import perturb_analysis
from dynlab.perturbations import (Contrast, NoisyDrive, StepDrive, compose, default_window, evaluate_under,
                                  perturbation)
from cli_runner import invoke


@pytest.fixture(scope="module")
def relu_rnn():
    return dynlab.build("model", unit="rnn", input_size=1, output_size=2, key=jax.random.key(0), hidden=4,
                        activation="relu")


def test_step_drive_is_xi_added_to_every_preactivation(relu_rnn):
    T, onset, tau, xi = 12, 3, 5, 0.7
    x = np.asarray(jax.random.normal(jax.random.key(1), (T, 1)))
    xp, drive = perturbation("step", xi, length=T, onset=onset, duration=tau)(jax.random.key(2), jnp.asarray(x), 4)
    np.testing.assert_array_equal(xp, x)
    cell, ro = relu_rnn.cells[0], relu_rnn.readout
    W, U, b = (np.asarray(a, np.float64) for a in (cell.w_hh, cell.w_xh, cell.b_h))
    h, ys = np.zeros(4), []
    for t in range(T):
        h = np.maximum(W @ h + U @ x[t] + b + (xi if onset <= t < onset + tau else 0.0), 0.0)
        ys.append(np.asarray(ro.weight) @ h + np.asarray(ro.bias))
    np.testing.assert_allclose(relu_rnn(jnp.asarray(x), drive), np.array(ys), rtol=1e-5, atol=1e-6)


def test_step_drive_closed_form_on_a_scalar_relu_recurrence(relu_rnn):
    # W_hh = c I, no input, no bias: inside the window h_k = xi (1 - c^k) / (1 - c), after it h decays as c^m
    c, xi, onset, tau, T = 0.8, 1.5, 4, 6, 16
    model = eqx.tree_at(lambda m: (m.cells[0].w_hh, m.cells[0].w_xh, m.cells[0].b_h), relu_rnn,
                        (c * jnp.eye(4), jnp.zeros((4, 1)), jnp.zeros(4)))
    _, drive = StepDrive(xi, onset, tau)(jax.random.key(0), jnp.zeros((T, 1)), 4)
    h = np.asarray(model.trajectory(jnp.zeros((T, 1)), drive)[1][0])
    t = np.arange(T)
    k = np.clip(t - onset + 1, 0, tau)
    expect = xi * (1 - c**k) / (1 - c) * c ** np.clip(t - (onset + tau - 1), 0, None)
    np.testing.assert_allclose(h, np.broadcast_to(expect[:, None], (T, 4)), rtol=1e-5, atol=1e-7)


def test_noisy_drive_statistics():
    T, N, onset, tau = 80, 250, 10, 50
    _, d = NoisyDrive(5.0, 2.0, onset, tau)(jax.random.key(3), jnp.zeros((T, 1)), N)
    d = np.asarray(d, np.float64)
    inside = d[onset:onset + tau]
    assert np.all(d[:onset] == 0) and np.all(d[onset + tau:] == 0)
    n = inside.size  # 12,500 draws: mean within 5 sigma/sqrt(n), std within ~5 standard errors
    assert abs(inside.mean() - 5.0) < 5 * 2.0 / np.sqrt(n)
    assert abs(inside.std() - 2.0) < 5 * 2.0 / np.sqrt(2 * n)
    z = (inside - 5.0) / 2.0  # i.i.d.: no correlation across neurons or steps
    assert abs(np.mean(z[:, 1:] * z[:, :-1])) < 5 / np.sqrt(n) and abs(np.mean(z[1:] * z[:-1])) < 5 / np.sqrt(n)
    _, d2 = NoisyDrive(5.0, 2.0, onset, tau)(jax.random.key(4), jnp.zeros((T, 1)), N)
    assert not np.allclose(d2, d)
    p = perturbation("noisy", 5.0, length=784)  # the paper's N(5, 2^2) on [200, 400) of T = 784
    assert (float(p.mean), float(p.std), int(p.onset), int(p.duration)) == (5.0, 2.0, 200, 200)
    assert default_window(196, None, None) == (50, 50)


def test_contrast_formula_and_composition():
    T, alpha, f, phi = 40, 0.6, 2.0, 0.3
    x = np.asarray(jax.random.uniform(jax.random.key(5), (T, 3)))
    xp, drive = Contrast(alpha, f, phi)(jax.random.key(0), jnp.asarray(x), 7)
    t = np.arange(T)
    np.testing.assert_allclose(xp, x * (1 + alpha * np.sin(2 * np.pi * f * t / T + phi))[:, None], rtol=1e-5, atol=1e-6)
    assert drive is None
    both = compose(StepDrive(1.0, 2, 5), Contrast(alpha, f, phi), StepDrive(0.5, 4, 10))
    xc, dc = both(jax.random.key(0), jnp.asarray(x), 7)
    np.testing.assert_allclose(xc, xp, rtol=1e-6)
    expect = 1.0 * ((t >= 2) & (t < 7)) + 0.5 * ((t >= 4) & (t < 14))
    np.testing.assert_allclose(dc, np.broadcast_to(expect[:, None], (T, 7)))
    with pytest.raises(ConfigError, match="unknown perturbation kind"):
        perturbation("rotate", 1.0, length=T)


def test_evaluate_under_and_the_analysis():
    model = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(1), hidden=5)
    task = dynlab.build("task", "adding", length=12)
    key = jax.random.key(0)
    clean = evaluate_under(model, task, None, key, 32, chunk=16)
    x, y, mask = task.batch(jax.random.split(key)[0], 32, split="test")  # the documented samples
    by_hand = jnp.mean((jax.vmap(model)(x)[:, -1, 0] - y[:, -1, 0]) ** 2)
    np.testing.assert_allclose(clean["mse"], by_hand, rtol=1e-5)
    ds = perturb_analysis(model, task=task, kind="step", strengths=[0.0, 0.5, 3.0], n=32, chunk=16)
    assert ds.attrs["onset"] == 3 and ds.attrs["duration"] == 3  # 200/784 of T = 12, rounded
    np.testing.assert_allclose(ds.mse.sel(strength=0.0), clean["mse"], rtol=1e-6)
    assert not np.isclose(ds.mse.sel(strength=3.0), ds.mse.sel(strength=0.0))


def test_cli_perturb(tmp_path):
    args = ["analyze", "perturb", "--model", "rnn", "--task", "adding", "--set", "model.hidden=4", "--set",
            "task.length=8", "--n", "32", "--kind", "contrast", "--strength", "0,0.5"]
    res = invoke(args + ["--out", str(tmp_path / "p.nc"), "-q"], tmp_path)
    assert res.exit_code == 0, res.output
    ds = xr.load_dataset(tmp_path / "p.nc")
    assert list(ds.strength.values) == [0.0, 0.5] and (tmp_path / "p.png").is_file() and ds.attrs["kind"] == "contrast"
    for bad, says in (("--strength=0,x", "--strength must be a number"), ("--kind=shake", "--kind must be one of step, noisy, contrast, got 'shake'")):
        res = invoke(args[:-4] + [bad], tmp_path)
        assert res.exit_code == 2 and says in res.output, res.output


def test_aru_table1_scenario_validates_with_matched_baselines():
    from dynlab.scenarios import load
    from dynlab.scenarios.aru_table1 import model_sections
    from dynlab.sizing import model_params

    program = load("aru-table1")  # entry importable, params checked against its signature
    p = program.params
    sections = model_sections(p["networks"], p["hidden"], p["n_g"], 0.05)
    budget = model_params("aru", p["hidden"], 1, 10, n_g=p["n_g"])
    for net in ("gru", "lstm"):
        s = sections[net]
        assert abs(model_params(s["unit"], s["hidden"], 1, 10) - budget) <= 0.05 * budget
    assert sections["rnn-relu"] == {"unit": "rnn", "activation": "relu", "hidden": p["hidden"]}
    with pytest.raises(ConfigError, match="unknown network"):
        model_sections(["rnn-tanh"], 8, 2, 0.05)
