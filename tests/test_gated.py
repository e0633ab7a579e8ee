"""GRU/LSTM units against NumPy equations written from the papers, and budget sizing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from dynlab.errors import ConfigError
from dynlab.sizing import hidden_for_budget, model_params
from dynlab.analyses.protocol import Drive
from dynlab.analyses.qr_settings import QRSettings


def sig(z):
    return 1 / (1 + np.exp(-z))


def test_gru_equations_with_drive():
    H, D = 5, 3
    unit = dynlab.build("unit", "gru", input_size=D, key=jax.random.key(0), hidden=H)
    c = unit.cell
    W_i, W_h, b, b_n = (np.asarray(a, np.float64) for a in (c.weight_ih, c.weight_hh, c.bias, c.bias_n))
    h, x, xi = np.linspace(-1, 1, H), np.array([0.3, -0.2, 1.0]), 0.7
    gi, gh = W_i @ x + b, W_h @ h
    r = sig(gi[:H] + gh[:H])
    z = sig(gi[H:2 * H] + gh[H:2 * H])
    n = np.tanh(gi[2 * H:] + xi + r * (gh[2 * H:] + b_n))
    expect = (1 - z) * n + z * h
    out = unit(jnp.asarray(h, jnp.float32), jnp.asarray(x, jnp.float32), drive=jnp.float32(xi))[0]
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)


def test_lstm_equations_with_drive():
    H, D = 4, 2
    unit = dynlab.build("unit", "lstm", input_size=D, key=jax.random.key(1), hidden=H)
    c = unit.cell
    W_i, W_h, b = (np.asarray(a, np.float64) for a in (c.weight_ih, c.weight_hh, c.bias))
    h, cc, x, xi = np.linspace(-1, 1, H), np.linspace(0.5, -0.5, H), np.array([1.0, -1.0]), -0.4
    pre = W_i @ x + W_h @ h + b
    i, f, g, o = sig(pre[:H]), sig(pre[H:2 * H]), np.tanh(pre[2 * H:3 * H] + xi), sig(pre[3 * H:])
    c_new = f * cc + i * g
    (h_out, c_out), y = unit((jnp.asarray(h, jnp.float32), jnp.asarray(cc, jnp.float32)),
                             jnp.asarray(x, jnp.float32), drive=jnp.float32(xi))
    np.testing.assert_allclose(c_out, c_new, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h_out, o * np.tanh(c_new), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(y, h_out)


def test_param_counts_and_budget_sizing():
    # equinox GRU: 3H(D + H + 1) + H; LSTM: 4H(D + H + 1); plus a linear read-out H*O + O
    assert model_params("gru", 10, 2, 3) == 3 * 10 * (2 + 10 + 1) + 10 + 10 * 3 + 3
    assert model_params("lstm", 10, 2, 3) == 4 * 10 * (2 + 10 + 1) + 10 * 3 + 3
    budget = model_params("aru", 64, 1, 10, n_g=16)
    for unit in ("gru", "lstm", "rnn"):
        h = hidden_for_budget(unit, budget, 1, 10)
        assert abs(model_params(unit, h, 1, 10) - budget) <= 0.02 * budget
    with pytest.raises(ConfigError, match="no width of 'lstm' is within 2%"):
        hidden_for_budget("lstm", 30, 1, 10)


def test_gated_units_train_and_analyse():
    from dynlab.analyses.lyapunov import lyapunov_analysis

    model = dynlab.build("model", unit="lstm", input_size=2, output_size=1, key=jax.random.key(0), hidden=6)
    ds = lyapunov_analysis(model, qr=QRSettings(k=12), steps=300, burn_in=100, ics=2, input=Drive(0.0))
    assert ds.attrs["state_dim"] == 12 and np.all(np.isfinite(ds["mean"].values))
