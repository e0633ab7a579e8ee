"""Inference as values (dynlab.rules.pc_inference): Gauss–Newton in error coordinates, the criterion, the spellings.

Truths the code does not produce: the linear RNN's equilibrium by a dense NumPy least-squares solve,
the energy's gradient by ``jax.grad`` at the returned activities, a long first-order run, and the
weight gradients of the rule as it was (heavy-ball momentum on the activities).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
import pytest

import dynlab
from cli_runner import invoke
from dynlab import ffmodels
from dynlab.errors import ConfigError
from dynlab.rnn_param import ParamRNN
from dynlab.rules import pc, pc_inference as pi, pc_time as pt

N, T, P, D, O = 6, 4, 3, 2, 2


def dense_equilibrium(A, B, C, x, y, mask):
    """argmin_z sum_t 1/2|z_t - A z_{t-1} - B x_t|^2 + m_t/2 |y_t - C(A z_{t-1} + B x_t)|^2, z_0 = 0, per sample."""
    zs = []
    for mu in range(x.shape[0]):
        rows, rhs = [], []
        for t in range(T):
            r = np.zeros((N, T * N))
            r[:, t * N:(t + 1) * N] = np.eye(N)
            if t > 0:
                r[:, (t - 1) * N:t * N] -= A
            rows.append(r), rhs.append(B @ x[mu, t])
            r = np.zeros((O, T * N))
            if t > 0:
                r[:, (t - 1) * N:t * N] = np.sqrt(mask[mu, t]) * C @ A
            rows.append(r), rhs.append(np.sqrt(mask[mu, t]) * (y[mu, t] - C @ B @ x[mu, t]))
        zs.append(np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)[0].reshape(T, N))
    return np.stack(zs)


def test_one_gauss_newton_step_is_the_exact_equilibrium_of_a_linear_rnn():
    """The residual is affine in the error coordinates, so one step with an exact linear solve lands on z*;
    the criterion then needs one more (a vanishing step) to see the energy stop changing."""
    with jax.enable_x64(True):
        m = ffmodels.astype(ParamRNN(D, O, width=N, activation="linear", key=jax.random.key(0)), jnp.float64)
        kx, ky = jax.random.split(jax.random.key(1))
        x, y = jax.random.normal(kx, (P, T, D), jnp.float64), jax.random.normal(ky, (P, T, O), jnp.float64)
        mask = jnp.array([[0, 1, 0, 1], [1, 1, 1, 1], [0, 0, 0, 1]], jnp.float64)
        solver = pi.lsmr(rtol=1e-12, max_steps=50)
        one = pi.gauss_newton(pi.Criterion(rtol=0.0, max_steps=1), solver)
        full = pi.gauss_newton(pi.Criterion(rtol=1e-8, ftol=1e-10), solver)
        run = eqx.filter_jit(lambda method, m: method(pt.problem(m, x, y, mask)))
        first, converged = run(one, m), run(full, m)
    cell = m.cells[0]
    z_star = dense_equilibrium(cell.m_rec * np.asarray(cell.w_rec), cell.m_in * np.asarray(cell.w_in),
                               m.readout.m_out * np.asarray(m.readout.w_out), *map(np.asarray, (x, y, mask)))
    assert int(first.steps) == 1 and not bool(first.converged)  # rtol = 0: the gradient test is never met
    np.testing.assert_allclose(np.asarray(first.z[0]), z_star, atol=1e-6 * np.abs(z_star).max())
    assert bool(converged.converged) and int(converged.steps) == 2
    np.testing.assert_allclose(np.asarray(converged.z[0]), z_star, atol=1e-9 * np.abs(z_star).max())
    assert float(converged.grad_norm) <= 1e-8 * float(converged.grad_norm0) and float(converged.energy_change) < 1e-10


def test_gauss_newton_serves_the_feed_forward_rule_too():
    """``pc``: one step on a linear residual MLP is its closed-form equilibrium; the rule takes the spelling."""
    with jax.enable_x64(True):
        m = ffmodels.astype(ffmodels.FeedForward(3, 2, width=5, depth=4, key=jax.random.key(2)), jnp.float64)
        x = jax.random.normal(jax.random.key(3), (4, 3), jnp.float64)
        y = jax.random.normal(jax.random.key(4), (4, 2), jnp.float64)
        method = pi.gauss_newton(pi.Criterion(rtol=0.0, max_steps=1), pi.lsmr(rtol=1e-12))
        inf, exact = eqx.filter_jit(lambda m: (method(pc.problem(m, x, y)), pc.problem(m, x, y).exact()))(m)
    np.testing.assert_allclose(np.asarray(inf.z), np.asarray(exact), atol=1e-9)
    rule = dynlab.build("rule", "pc", loss="mse", inference="gauss-newton")
    assert isinstance(rule.inference, pi.ErrorCoordinates) and isinstance(rule.inference.solver, pi.DampedGaussNewton)


def _gru64():
    m = dynlab.build("model", unit="gru", input_size=2, output_size=2, key=jax.random.key(0), hidden=4)
    x = jax.random.normal(jax.random.key(1), (2, 5, 2))
    y = jax.random.normal(jax.random.key(2), (2, 5, 2))
    return ffmodels.astype(m, jnp.float64), x.astype(jnp.float64), y.astype(jnp.float64), jnp.ones((2, 5), jnp.float64)


def test_gauss_newton_on_a_gru_makes_the_energy_gradient_vanish_and_agrees_with_a_long_descent():
    with jax.enable_x64(True):
        m, x, y, mask = _gru64()
        gn = pi.gauss_newton(pi.Criterion(rtol=1e-10, ftol=1e-13))
        quasi = pi.lbfgs(pi.Criterion(rtol=1e-10, ftol=1e-13))
        descent = pi.Descent(optax.sgd(0.1, momentum=0.9), pi.Criterion(rtol=1e-10, ftol=1e-13, max_steps=20000))
        run = eqx.filter_jit(lambda method, m: method(pt.problem(m, x, y, mask)))
        a, b, c = run(gn, m), run(descent, m), run(quasi, m)
        energy = lambda z: jnp.sum(pt.sample_energies(m, z, x, y, mask))  # noqa: E731
        grad_norm = eqx.filter_jit(lambda z: optax.tree.norm(jax.grad(energy)(z)))  # compiled: op by op is slow
        g_end, g_start = (grad_norm(z) for z in (a.z, eqx.filter_jit(pt.initial_activities)(m, x)))
    assert bool(a.converged) and bool(b.converged) and 5 * int(a.steps) < int(b.steps)
    assert float(g_end) <= 1e-9 * float(g_start)  # the energy gradient vanishes at the returned activities
    for other in (b, c):
        diff = max(float(jnp.max(jnp.abs(u - v))) for u, v in zip(jax.tree_util.tree_leaves(a.z),
                                                                   jax.tree_util.tree_leaves(other.z)))
        assert diff < 1e-7 and float(a.energy) == pytest.approx(float(other.energy), rel=1e-12)
    assert bool(c.converged) and 5 * int(c.steps) < int(b.steps)


@pytest.mark.parametrize("unit", ["aru", "lstm"])
def test_weight_gradients_at_equilibrium_equal_the_momentum_rules(unit):
    """The rule with ``inference = "gauss-newton"`` against the rule as it was (momentum on the activities), both
    converged tightly: the same weight gradients. Two units with pytree states (the ARU's ``(h, g)``, the LSTM's
    ``(h, c)``); the GRU's vector state, the simpler case of the same rule, was a third (4-5 s of CPU, most of it
    compiling Gauss-Newton): its Gauss-Newton equilibrium is checked in
    ``test_gauss_newton_on_a_gru_makes_the_energy_gradient_vanish_and_agrees_with_a_long_descent``."""
    with jax.enable_x64(True):
        keys = dict(hidden=4, n_g=2) if unit == "aru" else dict(hidden=4)
        m = ffmodels.astype(dynlab.build("model", unit=unit, input_size=2, output_size=1, key=jax.random.key(0), **keys),
                            jnp.float64)
        x, y, mask = dynlab.build("task", "adding", length=6).batch(jax.random.key(1), 3)
        batch = (x.astype(jnp.float64), y.astype(jnp.float64), mask.astype(jnp.float64))
        tight = dict(rtol=1e-9, ftol=1e-12)
        new = dynlab.build("rule", "pc-time", loss="mse", inference="gauss-newton", **tight)
        old = dynlab.build("rule", "pc-time", loss="mse", optimizer="momentum", beta=0.1, max_steps=20000, **tight)
        (g_new, m_new), (g_old, m_old) = (eqx.filter_jit(r.grads)(m, batch, jax.random.key(0)) for r in (new, old))
    assert float(m_new["converged"]) == 1.0 and float(m_old["converged"]) == 1.0
    assert int(m_new["inference_steps"]) < int(m_old["inference_steps"])
    a = jax.tree_util.tree_leaves(eqx.filter(g_new, eqx.is_inexact_array))
    b = jax.tree_util.tree_leaves(eqx.filter(g_old, eqx.is_inexact_array))
    scale = max(float(jnp.max(jnp.abs(v))) for v in b)
    assert max(float(jnp.max(jnp.abs(u - v))) for u, v in zip(a, b)) <= 1e-5 * scale


def test_the_criterion_asks_for_a_still_energy_and_records_what_is_left():
    """With ftol the descent runs on past the gradient test until the energy stops changing; the result carries
    g / g_0 and the last relative energy change (the values the datasets record)."""
    with jax.enable_x64(True):
        m, x, y, mask = _gru64()
        run = eqx.filter_jit(lambda method, m: method(pt.problem(m, x, y, mask)))
        sgd = optax.sgd(0.1)
        loose, still = (run(pi.Descent(sgd, pi.Criterion(rtol=1e-2, ftol=f, max_steps=3000)), m) for f in (None, 1e-9))
    assert bool(loose.converged) and bool(still.converged) and int(still.steps) > int(loose.steps)
    assert float(still.grad_norm) <= 1e-2 * float(still.grad_norm0) and float(still.energy_change) <= 1e-9
    assert float(loose.energy_change) > 1e-9


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(loss="ce_last", inference="gauss-newton"), "needs an energy that is a sum of squares (loss mse)"),
        (dict(loss="ce_all", inference="levenberg-marquardt"), "sum of squares"),
        (dict(loss="ce_last", inference="closed-form"), "closed-form inference needs the mse loss"),
        (dict(loss="mse", inference="newton"), "rule.inference must be one of 'discrete', 'ode', 'closed-form', "
                                               "'gauss-newton', 'levenberg-marquardt'"),
        (dict(loss="mse", rtol=-1e-3), "rtol must be a non-negative finite number"),
        (dict(loss="mse", atol=-1.0), "atol must be a non-negative finite number"),
        (dict(loss="mse", ftol=0.0), "ftol must be a positive finite number"),
        (dict(loss="mse", inference="gauss-newton", max_steps=0), "max_steps must be a positive integer"),
        (dict(loss="mse", inference=pi.gauss_newton(), max_steps=10), "rule.max_steps sets up an inference given by name"),
    ],
)
def test_bad_inference_config_is_a_one_line_config_error(kwargs, fragment):
    with pytest.raises(ConfigError) as e:
        dynlab.build("rule", "pc-time", **kwargs)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_solver_that_is_not_gauss_newton_type_is_refused_and_the_cli_says_so_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="needs an optimistix Gauss-Newton-type solver"):
        pi.ErrorCoordinates(optx.Newton(rtol=1e-6, atol=1e-6))  # a root finder: neither least squares nor a minimiser
    with pytest.raises(ConfigError, match="linear solver"):
        pi.lsmr(rtol=0.0)
    res = invoke(["train", "--model", "gru", "--task", "recall", "--rule", "pc-time", "--steps", "1",
                  "--set", "rule.inference=gauss-newton", "--out", "r"], tmp_path)
    assert res.exit_code == 2 and "\n" not in res.stderr.strip() and "sum of squares" in res.stderr
    assert not list(tmp_path.iterdir())


def test_the_residual_recurrence_runs_its_equation_and_its_rescaling_is_the_sum_of_matrix_powers():
    """``rnn-residual``: h_t = h_{t-1} + T^-alpha (A h_{t-1} + B x_t) by a NumPy loop, and with the read-out at the
    last step s - 1 = sum_{k=1}^{T-1} |c R^k|^2, R = I + T^-alpha A (dynlab.rnn_residual), against the closed form."""
    from dynlab.rnn_residual import ResidualParamRNN

    n, t = 8, 6
    with jax.enable_x64(True):
        m = ffmodels.astype(ResidualParamRNN(2, 1, width=n, length=t, alpha=1.0, activation="linear",
                                             key=jax.random.key(5)), jnp.float64)
        x = jax.random.normal(jax.random.key(6), (2, t, 2), jnp.float64)
        y = jax.random.normal(jax.random.key(7), (2, t, 1), jnp.float64)
        mask = jnp.zeros((2, t), jnp.float64).at[:, -1].set(1.0)
        s_minus_1, ys = eqx.filter_jit(lambda m: (pt.closed_form(m, x, y, mask).s_minus_1, m(x[0])))(m)
        s_minus_1, ys = float(s_minus_1), np.asarray(ys)
    cell = m.cells[0]
    A, B = cell.m_rec * np.asarray(cell.w_rec), cell.m_in * np.asarray(cell.w_in)
    c = m.readout.m_out * np.asarray(m.readout.w_out)[0]
    h, outs = np.zeros(n), []
    for step in range(t):
        h = h + (A @ h + B @ np.asarray(x[0, step])) / t
        outs.append(c @ h)
    np.testing.assert_allclose(ys[:, 0], outs, rtol=1e-10)
    R = np.eye(n) + A / t
    assert s_minus_1 == pytest.approx(sum(np.sum((c @ np.linalg.matrix_power(R, k)) ** 2) for k in range(1, t)), rel=1e-10)
    with pytest.raises(ConfigError, match="alpha must be a finite number >= 0"):
        ResidualParamRNN(2, 1, width=4, length=3, alpha=-1.0, key=jax.random.key(0))
