"""ARU-family units against independent NumPy re-implementations of the paper's equations."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from dynlab.errors import ConfigError
from dynlab.units.aru import ARUState


def np_gamma(x, n, s):
    return (1 - s) * np.logaddexp(0, n * x) / n + s / (1 + np.exp(-n * x))


def np_aru_step(cell, h, g, x, xi):
    """Eqs. 3–5, one neuron at a time (an explicit loop: the reference the vectorised code must match)."""
    p = {k: np.asarray(getattr(cell, k), np.float64) for k in ("w_hh", "w_xh", "b_h", "w_ag", "w_gg", "b_g", "w_gn", "w_gs", "b_n", "b_s")}
    H = h.shape[0]
    h_new, g_new = np.zeros(H), np.zeros_like(g)
    b_n, b_s = np.broadcast_to(p["b_n"], (H,)), np.broadcast_to(p["b_s"], (H,))
    for i in range(H):
        a = p["w_hh"][i] @ h + p["w_xh"][i] @ x + p["b_h"][i] + xi
        g_new[i] = np.tanh(p["w_ag"] * a + p["w_gg"] @ g[i] + p["b_g"])
        n = p["w_gn"] @ g_new[i] + b_n[i]
        s = p["w_gs"] @ g_new[i] + b_s[i]
        h_new[i] = np_gamma(a, n, s)
    return h_new, g_new


@pytest.mark.parametrize("prior", ["per-neuron", "shared"])
def test_aru_matches_per_neuron_reference(prior):
    key = jax.random.key(3)
    cell = dynlab.build("unit", "aru", input_size=3, key=key, hidden=7, n_g=5, prior=prior, readout_scale=0.5)
    rng = np.random.default_rng(0)
    h, g = np.zeros(7), np.zeros((7, 5))
    state = cell.init_state()
    step = eqx.filter_jit(lambda c, s, x, xi: c(s, x, drive=xi))  # one program (op by op costs more CPU)
    for t in range(6):
        x = rng.normal(size=3)
        xi = 0.3 * t
        h, g = np_aru_step(cell, h, g, x, xi)
        state, out = step(cell, state, jnp.asarray(x, jnp.float32), jnp.float32(xi))
        np.testing.assert_allclose(state.h, h, rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(state.g, g, rtol=2e-5, atol=1e-6)
        np.testing.assert_array_equal(out, state.h)


def test_aru_initial_gain_follows_prior():
    H = 400  # tolerances are 4 standard errors: mean 2/sqrt(H), std 2/sqrt(2H)
    cell = dynlab.build("unit", "aru", input_size=1, key=jax.random.key(0), hidden=H, n_g=8)
    g, n, s = cell.controller(jnp.zeros(H), jnp.zeros((H, 8)))
    assert abs(float(n.mean()) - 5.0) < 0.4 and abs(float(n.std()) - 2.0) < 0.28
    assert float(jnp.abs(s).max()) < 0.05


def test_rnn_gamma_heterogeneous_and_homogeneous():
    het = dynlab.build("unit", "rnn-gamma", input_size=2, key=jax.random.key(1), hidden=5)
    hom = dynlab.build("unit", "rnn-gamma", input_size=2, key=jax.random.key(1), hidden=5, heterogeneous=False)
    assert het.n.shape == (5,) and hom.n.shape == ()
    x = jnp.array([0.5, -1.0])
    h0 = jnp.linspace(-1, 1, 5)
    a = np.asarray(hom.w_hh) @ np.asarray(h0) + np.asarray(hom.w_xh) @ np.asarray(x)
    np.testing.assert_allclose(hom(h0, x)[0], np_gamma(a, 5.0, 0.0), rtol=1e-5)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_rnn_step_and_drive(activation):
    cell = dynlab.build("unit", "rnn", input_size=2, key=jax.random.key(2), hidden=6, activation=activation)
    h, x = jnp.linspace(-1, 1, 6), jnp.array([1.0, 2.0])
    a = np.asarray(cell.w_hh) @ np.asarray(h) + np.asarray(cell.w_xh) @ np.asarray(x) + 0.7
    f = np.tanh if activation == "tanh" else (lambda v: np.maximum(v, 0))
    np.testing.assert_allclose(cell(h, x, drive=0.7)[0], f(a), rtol=1e-5, atol=1e-6)


def test_leaky_rnn_is_the_euler_step_of_the_rate_equation():
    # tau dh/dt = -h + tanh(W h + U x + b): one Euler step of dt = alpha tau from h, in numpy;
    # at h = 0 (tanh' = 1) the Jacobian's eigenvalues are 1 - alpha + alpha g lambda(O), O the unscaled orthogonal W
    alpha, g = 0.1, 0.3
    cell = dynlab.build("unit", "rnn", input_size=2, key=jax.random.key(2), hidden=6, alpha=alpha, gain=g)
    plain = dynlab.build("unit", "rnn", input_size=2, key=jax.random.key(2), hidden=6)
    np.testing.assert_allclose(cell.w_hh, g * np.asarray(plain.w_hh), rtol=1e-6)
    h, x = jnp.linspace(-1, 1, 6), jnp.array([1.0, 2.0])
    a = np.asarray(cell.w_hh) @ np.asarray(h) + np.asarray(cell.w_xh) @ np.asarray(x)
    np.testing.assert_allclose(cell(h, x)[0], np.asarray(h) + alpha * (-np.asarray(h) + np.tanh(a)), rtol=1e-5, atol=1e-6)
    jac = np.asarray(jax.jacfwd(lambda v: cell(v, jnp.zeros(2))[0])(jnp.zeros(6)))
    expected = 1 - alpha + alpha * g * np.linalg.eigvals(np.asarray(plain.w_hh, np.float64))
    np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(jac)), np.sort_complex(expected), atol=1e-5)


@pytest.mark.parametrize("key, value", [("alpha", 0.0), ("alpha", 1.5), ("gain", -1.0)])
def test_leaky_rnn_refuses_out_of_range_settings(key, value):
    with pytest.raises(ConfigError, match=key):
        dynlab.build("unit", "rnn", input_size=2, key=jax.random.key(2), hidden=6, **{key: value})


def test_orthogonal_recurrence_and_isolation():
    cell = dynlab.build("unit", "aru", input_size=1, key=jax.random.key(4), hidden=16, n_g=4)
    w = np.asarray(cell.w_hh)
    np.testing.assert_allclose(w @ w.T, np.eye(16), atol=1e-5)
    iso = cell.isolate()
    assert iso.isolated and iso.w_hh.shape == (16,)
    h, x = jnp.linspace(-1, 1, 16), jnp.ones(1)
    dense = eqx.tree_at(lambda c: c.w_hh, cell, jnp.diag(jnp.diagonal(cell.w_hh)))
    s0 = ARUState(h=h, g=jnp.zeros((16, 4)))
    call = eqx.filter_jit(lambda c, s, x: c(s, x)[1])  # one program per cell (op by op costs more CPU)
    np.testing.assert_allclose(call(iso, s0, x), call(dense, s0, x), rtol=1e-6)
    fresh = dynlab.build("unit", "aru", input_size=1, key=jax.random.key(4), hidden=16, n_g=4, isolated=True)
    np.testing.assert_array_equal(fresh.w_hh, jnp.diagonal(cell.w_hh))
    assert fresh.param_count()["total"] == cell.param_count()["total"] - 16 * 15


def test_param_counts():
    H, G = 10, 4
    aru = dynlab.build("unit", "aru", input_size=3, key=jax.random.key(0), hidden=H, n_g=G, prior="shared")
    main = H * H + H * 3 + H
    assert aru.param_count()["total"] == main + G * G + 4 * G + 2  # notes §1: N_g^2 + 4 N_g + 2
    per = dynlab.build("unit", "aru", input_size=3, key=jax.random.key(0), hidden=H, n_g=G)
    assert per.param_count()["total"] == main + G * G + 4 * G + 2 * H  # b_n, b_s per neuron
    assert dynlab.build("unit", "rnn", input_size=3, key=jax.random.key(0), hidden=H).param_count() == {"total": main}


def test_model_stack_and_trajectory():
    model = dynlab.build("model", unit="aru", input_size=2, output_size=3, key=jax.random.key(0),
                         hidden=8, n_g=4, layers=2, encoder_size=5)
    xs = jax.random.normal(jax.random.key(1), (11, 2))
    # compiled, one program each, as training and the analyses run them (op by op costs more CPU)
    ys, states = eqx.filter_jit(lambda m, xs: m.trajectory(xs))(model, xs)
    assert ys.shape == (11, 3) and len(states) == 2 and states[1].g.shape == (11, 8, 4)
    np.testing.assert_array_equal(eqx.filter_jit(lambda m, xs: m(xs))(model, xs), ys)
    # trajectory == stepping by hand through model.step
    state = model.init_state()
    step = eqx.filter_jit(lambda m, s, x: m.step(s, x))
    for t in range(11):
        state, y = step(model, state, xs[t])
        np.testing.assert_allclose(y, ys[t], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(state[1].h, states[1].h[-1], rtol=1e-6)


@pytest.mark.parametrize("unit", ["aru", "gru"])
def test_remat_changes_neither_values_nor_gradients(unit):
    """Checkpointed BPTT (``remat``: states every sqrt(T) steps, the rest recomputed) is an
    implementation choice: the loss and every gradient equal those of plain BPTT (float64, two
    layers, a drive)."""
    with jax.enable_x64(True):
        xs = jax.random.normal(jax.random.key(1), (10, 3), jnp.float64)  # segments of 4, 4 and a plain tail of 2
        drive = 0.3 * jnp.arange(10.0)

        def build(remat):
            m = dynlab.build("model", unit=unit, input_size=3, output_size=2, layers=2, remat=remat, hidden=5,
                             key=jax.random.key(0))
            return jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, m)

        loss = lambda m: jnp.sum(jnp.sin(m(xs, drive)))  # noqa: E731
        # compiled, as training runs it (op by op, the eager calls cost more CPU than the compilation)
        (la, ga), (lb, gb) = (eqx.filter_jit(eqx.filter_value_and_grad(loss))(build(r)) for r in (True, False))
        np.testing.assert_allclose(la, lb, rtol=1e-13)
        for a, b in zip(jax.tree_util.tree_leaves(ga), jax.tree_util.tree_leaves(gb)):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)
    # the default is the unit's preference: the ARU's controller arrays make checkpointing pay
    # (``remat`` is a static field: shapes suffice, without running the default-size initialisers)
    def default(unit):
        return jax.eval_shape(lambda: dynlab.build("model", unit=unit, input_size=1, output_size=1, key=jax.random.key(0)))

    assert default("aru").remat and not default("gru").remat


@pytest.mark.parametrize("unit", dynlab.names("unit"))
def test_hoisted_input_projection_equals_the_plain_step(unit):
    """``SequenceModel`` runs a stack layer by layer, each layer's input projected for all steps
    before its time loop (``Cell.project_input`` / ``step_projected`` / ``run_sequence``); values,
    states and gradients must equal calling the cells step by step on the raw inputs. Two layers for
    the units that project their inputs or run their own sequence, and for a plain and a
    checkpointed (remat) one; one layer for the rest, to keep the compile time down."""
    small = {"elm-net": dict(hidden=12, d_tree=4, d_branch=5, readout_neurons=3)}  # the default N = 96 compiles for 20 s
    layers = 2 if unit in ("elm", "elm-net", "gru", "aru") else 1
    model = dynlab.build("model", unit=unit, input_size=3, output_size=2, layers=layers, key=jax.random.key(0),
                         **small.get(unit, {}))
    xs = jax.random.normal(jax.random.key(1), (7, 3))

    def plain(m):
        def body(s, x):
            new, h = [], x
            for cell, st in zip(m.cells, s):
                st, h = cell(st, h)
                new.append(st)
            return tuple(new), m.readout(h)

        return jax.lax.scan(body, m.init_state(), xs)[1]

    @eqx.filter_jit  # one program, as training runs it (op by op, the eager calls cost 2-4x the CPU)
    def both_ways(model):
        _, states = model.trajectory(xs)
        _, last = model.step(jax.tree_util.tree_map(lambda a: a[-2], states), xs[-1])
        # each way's outputs come out of its own gradient's forward pass (aux): no second forward pass to compile
        def loss(m, way):
            ys = way(m)
            return jnp.sum(ys**2), ys

        (_, fast), g_fast = eqx.filter_value_and_grad(loss, has_aux=True)(model, lambda m: m(xs))
        (_, slow), g_plain = eqx.filter_value_and_grad(loss, has_aux=True)(model, plain)
        return fast, slow, last, g_fast, g_plain

    fast, slow, last, g_fast, g_plain = both_ways(model)
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(last, fast[-1], rtol=1e-5, atol=1e-6)  # trajectory's states are the step map's
    for a, b in zip(jax.tree_util.tree_leaves(g_fast), jax.tree_util.tree_leaves(g_plain)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
