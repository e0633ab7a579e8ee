"""Predictive coding through time, the parameterised RNN and `compare pc-bp --model rnn`.

Truths the code does not produce: the unrolled linear RNN's equilibrium by dense least squares
in NumPy, finite differences of that equilibrated energy (the weight gradient at equilibrium),
a NumPy loop of the RNN's equations, the random-matrix expectation of s - 1, and the
first-order descent identity E(z - beta g) = E(z) - beta |g|^2 + O(beta^2).
"""

import tomllib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import xarray as xr

import dynlab
from cli_runner import invoke
from dynlab import ffmodels
from dynlab.errors import ConfigError
from dynlab.registry import defaults, get
from dynlab.rnn_param import ParamRNN
from dynlab.rules import pc_time as pt

N, T, P, D, O = 6, 4, 3, 2, 2


# ------------------------------------------------------------------------------------------------
# Linear RNN: closed form, numerical inference and weight gradients against dense least squares


def np_equilibrium(A, B, C, x, y, mask):
    """min_z sum_t 1/2|z_t - A z_{t-1} - B x_t|^2 + m_t/2 |y_t - C(A z_{t-1} + B x_t)|^2, z_0 = 0, per sample."""
    energies, zs = [], []
    for mu in range(x.shape[0]):
        rows, rhs = [], []
        for t in range(T):
            r = np.zeros((N, T * N))
            r[:, t * N:(t + 1) * N] = np.eye(N)
            if t > 0:
                r[:, (t - 1) * N:t * N] -= A
            rows.append(r), rhs.append(B @ x[mu, t])
            w = np.sqrt(mask[mu, t])
            r = np.zeros((O, T * N))
            if t > 0:
                r[:, (t - 1) * N:t * N] = w * C @ A
            rows.append(r), rhs.append(w * (y[mu, t] - C @ B @ x[mu, t]))
        R, r = np.vstack(rows), np.concatenate(rhs)
        z = np.linalg.lstsq(R, r, rcond=None)[0]
        energies.append(0.5 * np.sum((R @ z - r) ** 2))
        zs.append(z.reshape(T, N))
    return float(np.mean(energies)), np.stack(zs)


@eqx.filter_jit
def _two_methods(m, x, y, mask):
    cf = pt.closed_form(m, x, y, mask)
    disc = pt.infer(m, x, y, mask, optimizer=optax.sgd(0.3), max_steps=5000, rtol=1e-10)
    return cf, disc, pt.weight_grads(m, cf.z, x, y, mask)[1]


@pytest.fixture(scope="module")
def linear64():
    with jax.enable_x64(True):
        m = ffmodels.astype(ParamRNN(D, O, width=N, activation="linear", key=jax.random.key(0)), jnp.float64)
        kx, ky = jax.random.split(jax.random.key(1))
        x, y = jax.random.normal(kx, (P, T, D), jnp.float64), jax.random.normal(ky, (P, T, O), jnp.float64)
        mask = jnp.array([[0, 1, 0, 1], [1, 1, 1, 1], [0, 0, 0, 1]], jnp.float64)
        cf, disc, grads = _two_methods(m, x, y, mask)
    cell = m.cells[0]
    mats = (cell.m_rec * np.asarray(cell.w_rec), cell.m_in * np.asarray(cell.w_in),
            m.readout.m_out * np.asarray(m.readout.w_out))
    return dict(model=m, data=tuple(map(np.asarray, (x, y, mask))), cf=cf, disc=disc, grads=grads, mats=mats)


def test_closed_form_and_inference_find_the_dense_least_squares_equilibrium(linear64):
    energy, z = np_equilibrium(*linear64["mats"], *linear64["data"])
    cf, disc = linear64["cf"], linear64["disc"]
    assert float(cf.energy) == pytest.approx(energy, rel=1e-10)
    np.testing.assert_allclose(np.asarray(cf.z[0]), z, atol=1e-10)
    assert bool(disc.converged)
    np.testing.assert_allclose(np.asarray(disc.z[0]), z, atol=1e-7)
    assert float(disc.energy) == pytest.approx(energy, rel=1e-10)


def test_weight_gradient_at_equilibrium_is_the_gradient_of_the_equilibrated_energy(linear64):
    """dF*/dθ by central differences of the NumPy least squares equals ∂F/∂θ at z* (envelope theorem)."""
    A, B, C = linear64["mats"]
    g, cell = linear64["grads"], linear64["model"].cells[0]
    h = 1e-6
    g_rec, g_in, g_out = (np.asarray(a) for a in (g.cells[0].w_rec, g.cells[0].w_in, g.readout.w_out))
    for which, i, j, got in (("A", 1, 2, g_rec[1, 2] / cell.m_rec), ("B", 3, 1, g_in[3, 1] / cell.m_in),
                             ("C", 1, 4, g_out[1, 4] / linear64["model"].readout.m_out)):
        values = []
        for sign in (1, -1):
            mats = {"A": A.copy(), "B": B.copy(), "C": C.copy()}
            mats[which][i, j] += sign * h
            values.append(np_equilibrium(mats["A"], mats["B"], mats["C"], *linear64["data"])[0])
        assert float(got) == pytest.approx((values[0] - values[1]) / (2 * h), rel=1e-5, abs=1e-9)


def test_rescaling_follows_t_over_n_and_gamma0():
    """s - 1 = tr(J J^T)/K: exactly ∝ 1/γ0², and E[s - 1] ≈ (T-1)/(γ0² N) with the read-out at the last step
    ((T-1)/(2γ0² N) when every step is scored) — the recurrent L/N (Ginibre recurrence, mean-square gain 1)."""
    n, t, d_out = 128, 8, 4
    x = jax.random.normal(jax.random.key(1), (2, t, 2))
    y = jax.random.normal(jax.random.key(2), (2, t, d_out))
    last, every = jnp.zeros((2, t)).at[:, -1].set(1.0), jnp.ones((2, t))
    ratio_last, ratio_every = [], []
    closed_form = eqx.filter_jit(pt.closed_form)
    for seed in range(4):
        m1, m2 = (ParamRNN(2, d_out, width=n, activation="linear", gamma0=g, key=jax.random.key(seed)) for g in (1.0, 2.0))
        s_last, s_every = closed_form(m1, x, y, last).s_minus_1, closed_form(m1, x, y, every).s_minus_1
        assert float(closed_form(m2, x, y, last).s_minus_1) == pytest.approx(float(s_last) / 4, rel=1e-4)
        ratio_last.append(float(s_last) / ((t - 1) / n))
        ratio_every.append(float(s_every) / ((t - 1) / (2 * n)))
    assert 0.85 < np.mean(ratio_last) < 1.2 and 0.85 < np.mean(ratio_every) < 1.2


# ------------------------------------------------------------------------------------------------
# The parameterised RNN


def test_param_rnn_runs_its_equations_and_scales_with_width():
    m = ParamRNN(3, 2, width=16, param="mf", gamma0=1.5, gain=0.8, activation="tanh", key=jax.random.key(2))
    xs = np.asarray(jax.random.normal(jax.random.key(3), (5, 3)))
    cell = m.cells[0]
    h, outs = np.zeros(16), []
    for t in range(5):  # module docstring: N^-a1 D^-1/2 W_in x + N^-a W_rec h; f = W_out h / (γ0 N^d N^a)
        h = np.tanh(np.asarray(cell.w_in) @ xs[t] / np.sqrt(3) + np.asarray(cell.w_rec) @ h / 4.0)
        outs.append(np.asarray(m.readout.w_out) @ h / (1.5 * 4.0 * 4.0))
    np.testing.assert_allclose(np.asarray(m(jnp.asarray(xs))), np.stack(outs), rtol=1e-5, atol=1e-6)
    # Table 2 variances, the gain, and the rates of ffmodels.learning_rates with the recurrent matrix as hidden layer
    for param, b in (("mf", 0.0), ("mup", 1.0)):
        wide = ParamRNN(3, 2, width=256, param=param, gain=0.8, key=jax.random.key(4))
        assert float(jnp.var(wide.cells[0].w_rec)) == pytest.approx(0.64 * 256.0 ** -b, rel=0.03)
    rates = ffmodels.learning_rates(wide, "adam", 1e-3)  # mup: N^(a-1), N^a1, N^(a+d-1)
    assert rates.cells[0].w_rec == pytest.approx(1e-3 / 256) and rates.cells[0].w_in == pytest.approx(1e-3 / 16)
    assert rates.readout.w_out == pytest.approx(1e-3 / 16)


# ------------------------------------------------------------------------------------------------
# Every registered unit: PC inference descends the energy


TINY = dict(hidden=4, n_g=2, n_blocks=2, block_size=2, n_features=2, n_layers=2, n_taus=6, tau_max=20.0, motif_width=3,
            k=3, d_m=2, d_tree=2, d_branch=2, readout_neurons=2, readout_d_m=2, readout_d_tree=2, readout_d_branch=2)
BETA = 1e-3  # small against every registered unit's activity curvature at these sizes (largest measured: 75)


def tiny_model(unit):
    """The unit with its size keys shrunk (its defaults where the shrunk config is invalid)."""
    keys = defaults(get("unit", unit).obj)
    try:
        return dynlab.build("model", unit=unit, input_size=2, output_size=3, key=jax.random.key(0),
                            **{k: v for k, v in TINY.items() if k in keys})
    except ConfigError:
        return dynlab.build("model", unit=unit, input_size=2, output_size=3, key=jax.random.key(0))


@eqx.filter_jit
def _descend(model, x, y, mask):
    """8 GD steps from random activities shaped like the states (the descent holds from any start; random ones
    also avoid the exact ties that max-pooling units have at the forward pass, where their energy has a kink)."""
    leaves, tree = jax.tree_util.tree_flatten(jax.eval_shape(pt.initial_activities, model, x))
    keys = jax.random.split(jax.random.key(3), len(leaves))
    z = jax.tree_util.tree_unflatten(tree, [0.3 * jax.random.normal(k, l.shape, l.dtype) for l, k in zip(leaves, keys)])
    return pt.infer(model, x, y, mask, z, optimizer=optax.sgd(BETA), max_steps=8, rtol=0.0, record=True)


@pytest.mark.parametrize("unit", dynlab.names("unit"))
def test_inference_descends_the_energy_on_every_unit(unit):
    """One sample, so the recorded worst-sample gradient norm is |∇_z F|: each step lowers F, the first by
    β|∇F|² to first order (a wrong gradient would not), and F falls by a visible amount in all."""
    model = tiny_model(unit)
    x = jax.random.normal(jax.random.key(1), (1, 3, 2))
    y, mask = jax.random.normal(jax.random.key(2), (1, 3, 3)), jnp.ones((1, 3))
    inf = _descend(model, x, y, mask)
    e, g = np.asarray(inf.trace_energy, np.float64), np.asarray(inf.trace_grad_norm, np.float64)
    assert np.isfinite(e).all() and int(inf.steps) == 8
    assert (np.diff(e) <= 1e-6 * abs(e[0])).all(), e
    assert (e[0] - e[1]) / (BETA * g[0] ** 2) == pytest.approx(1.0, abs=0.1)
    assert e[-1] < e[0] - 4 * BETA * g[0] ** 2


# ------------------------------------------------------------------------------------------------
# The rule


def test_rule_gives_gradients_for_pytree_states_and_refuses_the_wrong_model():
    lstm = dynlab.build("model", unit="lstm", input_size=2, output_size=3, key=jax.random.key(0), hidden=4)
    x = jax.random.normal(jax.random.key(1), (2, 4, 2))
    batch = (x, jnp.array([0, 2]), jnp.ones((2, 4)))
    rule = dynlab.build("rule", "pc-time", loss="ce_last", beta=0.1, max_steps=5, rtol=0.0)
    grads, metrics = eqx.filter_jit(rule.grads)(lstm, batch, jax.random.key(0))
    assert jax.tree_util.tree_structure(grads) == jax.tree_util.tree_structure(lstm)
    assert all(np.isfinite(l).all() for l in jax.tree_util.tree_leaves(grads))
    assert int(metrics["inference_steps"]) == 5 and {"loss", "accuracy", "energy", "converged"} <= set(metrics)
    with pytest.raises(ConfigError, match="for recurrent models use rule 'pc-time'"):
        dynlab.build("rule", "pc", loss="ce_last").grads(lstm, batch, jax.random.key(0))
    mlp = dynlab.build("model", "mlp", input_size=2, output_size=1, width=4, depth=2, key=jax.random.key(0))
    with pytest.raises(ConfigError, match="for feed-forward models use rule 'pc'"):
        rule.grads(mlp, batch, jax.random.key(0))
    with pytest.raises(ConfigError, match="needs a linear recurrent model"):
        dynlab.build("rule", "pc-time", loss="mse", inference="closed-form").grads(
            lstm, (x, jnp.zeros((2, 4, 3)), jnp.ones((2, 4))), jax.random.key(0))


# ------------------------------------------------------------------------------------------------
# `dynlab compare pc-bp --model rnn`


def test_compare_rnn_cosine_is_high_when_wide_and_short_and_falls_with_t_over_n(tmp_path):
    """Linear RNN, converged numerical inference: cos ≥ 0.99 at N = 128, T = 2, lower at T = 6, where s - 1 is
    larger (the fall with 1/N is the rescaling test's; full grid: the report's `compare pc-bp --model rnn`)."""
    res = invoke(["compare", "pc-bp", "--model", "rnn", "--widths", "128", "--lengths", "2,6", "--steps", "1",
                  "--seeds", "1", "--batch-size", "4", "--energy", "inference", "--activity-optimizer", "momentum",
                  "--beta", "0.3", "--inference-steps", "2000", "--out", "r/c.nc"], tmp_path)
    assert res.exit_code == 0, (res.output, res.stderr)
    ds = xr.load_dataset(tmp_path / "r/c.nc", engine="h5netcdf")
    assert dict(ds.cosine.sizes) == {"width": 1, "length": 2, "seed": 1, "step": 1}
    assert ds.attrs["analysis"] == "pc-bptt" and tomllib.loads(ds.attrs["config"])["lengths"] == [2, 6]
    assert ds.converged.values.all() and (ds.activity_distance.values < 1e-3).all()
    cos, s1 = ds.mean_cosine.sel(width=128).values, ds.s_minus_1.sel(width=128).values.ravel()
    assert cos[0] >= 0.99 and cos[1] < cos[0] and s1[1] > s1[0] > 0
    for name in ("cosine", "rescaling", "loss"):
        assert (tmp_path / f"r/c_{name}.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--depths", "2,4"], "--depths applies to --model mlp only"),
        (["--lengths", "0"], "--lengths must be an integer >= 1, got '0'"),
        (["--task", "recall"], "task 'recall' has no length to vary; tasks with a length:"),
        (["--gain", "0"], "gain must be a positive finite number"),
        (["--activation", "tanh"], "closed-form' needs a linear network"),
    ],
)
def test_bad_recurrent_comparison_is_one_line_and_exit_2(extra, fragment, tmp_path):
    res = invoke(["compare", "pc-bp", "--model", "rnn", "--widths", "4", "--steps", "1", *extra], tmp_path)
    assert res.exit_code == 2, (res.output, res.stderr)
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and fragment in err, err
    assert not list(tmp_path.iterdir())


def test_matching_bptt_is_the_gradient_of_the_pc_objective_without_regularisers():
    """The comparisons' BPTT rule ([`pc_time.matching_bptt`][]) differentiates [`pc_time.loss`][]
    exactly (the PC energy's scale, no penalty), while the default BPTT of a penalised ELM network
    adds its regularisers: the model interface, not a unit attribute, decides."""
    from dynlab.rules.bptt import BPTT

    model = tiny_model("elm-net")  # the shapes the descent test above compiled
    assert model.penalised
    x, y = jax.random.normal(jax.random.key(1), (2, 3, 2)), jax.random.normal(jax.random.key(2), (2, 3, 3))
    mask = jnp.array([[0.0, 0.0, 1.0], [1.0, 0.0, 1.0]])  # scored steps differ between the samples
    grads = eqx.filter_jit(lambda rule, m: rule.grads(m, (x, y, mask), jax.random.key(0)))  # compiled: eager is slow
    loss, expected = eqx.filter_jit(eqx.filter_value_and_grad(pt.loss))(model, x, y, mask, "mse")
    got, metrics = grads(pt.matching_bptt("mse"), model)
    for a, b in zip(jax.tree_util.tree_leaves(eqx.filter(expected, eqx.is_inexact_array)),
                    jax.tree_util.tree_leaves(eqx.filter(got, eqx.is_inexact_array))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-9)
    assert float(metrics["loss"]) == pytest.approx(float(loss), rel=1e-6)
    penalised, _ = grads(BPTT(loss="mse"), model)
    unpenalised, _ = grads(BPTT(loss="mse", penalties=False), model)
    diff = optax.tree.norm(jax.tree_util.tree_map(jnp.subtract, eqx.filter(penalised, eqx.is_inexact_array),
                                                  eqx.filter(unpenalised, eqx.is_inexact_array)))
    assert float(diff) > 1e-6 * float(optax.tree.norm(eqx.filter(unpenalised, eqx.is_inexact_array)))
