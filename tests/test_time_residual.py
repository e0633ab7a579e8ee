"""The depth factor over time for any unit (``dynlab.time_residual``) and the linearised energy
rescaling ``pc_time.rescaling``, against a hand recurrence, the closed form and finite differences.
The JAX work runs compiled (``eqx.filter_jit``): op by op it compiled every primitive on its own."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from jax.flatten_util import ravel_pytree

from dynlab import ffmodels
from dynlab.errors import ConfigError
from dynlab.models import SequenceModel
from dynlab.rnn_param import ParamRNN
from dynlab.rules import pc_time
from dynlab.time_residual import TimeResidual


def _rnn(hidden=6, key=0):
    return dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(key), hidden=hidden)


def test_time_residual_is_the_hand_written_residual_recurrence_with_a_mean_field_read_out():
    """h_t = h_{t-1} + T^-alpha (tanh(a_t) - h_{t-1}), o_t = W h_t / (gamma0 sqrt N) + b, written out."""
    model, T, alpha, gamma0 = _rnn(), 7, 1.0, 2.0
    wrapped = TimeResidual(model, T, alpha=alpha, gamma0=gamma0)
    assert isinstance(wrapped, SequenceModel)  # every rule and analysis takes it
    xs = jax.random.normal(jax.random.key(1), (T, 2))
    ys, (states,) = wrapped.trajectory(xs)
    cell, w, b = model.cells[0], np.asarray(model.readout.weight), np.asarray(model.readout.bias)
    h, want_h, want_y = np.zeros(6, np.float32), [], []
    for t in range(T):
        new = np.tanh(np.asarray(cell.preactivation(jnp.asarray(h), xs[t], None)))
        want_y.append(w @ new / (gamma0 * np.sqrt(6)) + b)  # the read-out reads the unit's output
        h = h + T**-alpha * (new - h)
        want_h.append(h)
    np.testing.assert_allclose(np.asarray(states), np.stack(want_h), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ys), np.stack(want_y), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(wrapped(xs)), np.asarray(ys))


def test_rescaling_of_a_linear_rnn_is_the_closed_forms():
    """For an affine model the linearisation is exact: tr(D J J^T D)/K from row norms equals the
    closed form's tr(S - I)/K from the eigenvalues of the Gram matrix."""
    with jax.enable_x64(True):
        m = ffmodels.astype(ParamRNN(2, 1, width=8, activation="linear", key=jax.random.key(0)), jnp.float64)
        x = jax.random.normal(jax.random.key(1), (3, 5, 2), jnp.float64)
        y = jax.random.normal(jax.random.key(2), (3, 5, 1), jnp.float64)
        mask = jnp.array([[0, 1, 0, 1, 1], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]], jnp.float64)
        exact = eqx.filter_jit(pc_time.closed_form)(m, x, y, mask).s_minus_1
        np.testing.assert_allclose(float(eqx.filter_jit(pc_time.rescaling)(m, x, mask)), float(exact), rtol=1e-10)


def test_rescaling_of_a_gru_matches_finite_differences():
    """sum over scored read-outs of |d o / d e|^2 by central differences of the unrolled network."""
    with jax.enable_x64(True):
        m = dynlab.build("model", unit="gru", input_size=2, output_size=1, key=jax.random.key(0), hidden=4)
        m = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, m)
        T = 4
        xs = jax.random.normal(jax.random.key(3), (1, T, 2), jnp.float64)
        mask = jnp.array([[0.0, 1.0, 0.0, 1.0]])
        zero = jax.tree_util.tree_map(jnp.zeros_like, m.trajectory(xs[0])[1])
        flat, unravel = ravel_pytree(zero)
        out = eqx.filter_jit(jax.vmap(lambda v: pc_time._unroll(m, xs[0], unravel(v))[0][:, 0]))  # a batch of states
        eps = 1e-6
        steps = eps * jnp.eye(flat.size, dtype=flat.dtype)  # one central difference per state entry
        jac = (np.asarray(out(flat + steps)) - np.asarray(out(flat - steps))).T / (2 * eps)  # [T, n]
        d2 = np.asarray(mask[0])
        want = np.sum(d2[:, None] * jac**2) / d2.sum()
        np.testing.assert_allclose(float(eqx.filter_jit(pc_time.rescaling)(m, xs, mask)), want, rtol=1e-7)


def test_the_depth_factor_shrinks_the_rescaling_of_a_wide_network():
    """The law the wrapper is for, at two widths (tanh RNN, T = 20): with it s - 1 falls about as
    1/N (factor 4 from N = 16 to 64, within a factor 2), without it and with the standard read-out
    it does not fall by a factor 2."""
    T = 20
    x, _, mask = dynlab.build("task", "adding", length=T).batch(jax.random.key(0), 8)

    def s(width, wrap):
        model = _rnn(width, key=width)
        return float(eqx.filter_jit(pc_time.rescaling)(TimeResidual(model, T) if wrap else model, x, mask))

    residual = s(16, True) / s(64, True)
    plain = s(16, False) / s(64, False)
    print(f"s - 1 at N = 16 over N = 64: {residual:.2f} with the depth factor, {plain:.2f} without")
    assert 2.0 < residual < 8.0, residual
    assert plain < 2.0, plain


@pytest.mark.parametrize("kwargs, message", [
    (dict(length=0), "length must be a positive integer"),
    (dict(length=5, alpha=-1.0), "alpha must be a finite number >= 0"),
    (dict(length=5, alpha=float("nan")), "alpha must be a finite number >= 0"),
    (dict(length=5, gamma0=0.0), "gamma0 must be a positive finite number"),
])
def test_bad_depth_factor_settings_are_one_line_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TimeResidual(_rnn(), **kwargs)

