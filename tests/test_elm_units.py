"""ELM neuron (``elm``) and ELM network (``elm-net``) against the papers' numbers and NumPy loops.

Truths used: the published parameter counts (scaling paper Table 1; neuron paper's NeuronIO ELM;
the authors' repository's Branch-ELM counts, models/eval_results.csv), explicit per-synapse /
per-neuron NumPy loops of the papers' equations (routing rebuilt from the paper's description),
the Taylor expansion of the two memory-update forms, the |m| <= lambda bound, and the closed-form
SuperSpike surrogate.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from dynlab import experiment
from dynlab.errors import ConfigError
from dynlab.units.activity import AdaptiveGamma, ReluActivity, SpikingActivity, superspike
from dynlab.units.base import count_params
from dynlab.units.elm import ELMCell, memory_gains, neuronio_routing
from dynlab.units.elm_net import ElmNet, budget_config, sample_wiring
from dynlab.units.regularisers import ActivityL1, MlpL2, Regulariser

from cli_runner import invoke


# ---------------------------------------------------------------------------------------------
# Parameter accounting: param_count() against the papers, and against count_params of the module's
# floating-point leaves (what the trainer optimises; integer wiring excluded), built abstractly


@pytest.mark.parametrize(
    "config, k_e, k_c, P",
    [
        (dict(input_size=700, hidden=96, d_m=5, d_tree=30, d_branch=10), 420, 300, 69_120),  # SHD-Adding
        (dict(input_size=204, hidden=1024, d_m=15, d_tree=50, d_branch=15, readout_neurons=204), 2_460, 750, 3_287_040),
    ],
    ids=["shd", "enwik8"],
)
def test_elm_net_counts_match_table1(config, k_e, k_c, P):
    net = eqx.filter_eval_shape(lambda: ElmNet(key=jax.random.key(0), **config))
    counts = net.param_count()
    assert (counts["N"], counts["k_e"], counts["k_c"], counts["P"]) == (config["hidden"], k_e, k_c, P)
    # total = P + one bias per neuron + read-out layer (19/204 neurons: d_m = 3, l_mlp = 0, same d_tree, d_branch)
    R, d_t, d_b = config.get("readout_neurons", 19), config["d_tree"], config["d_branch"]
    readout = R * (((d_t + 3) * 3 + 3) + 3 + d_t * d_b + 1)
    assert counts["total"] == P + config["hidden"] + readout == count_params(net)


def test_elm_neuron_counts_match_papers():
    def build(**kw):
        return eqx.filter_eval_shape(lambda: dynlab.build("model", unit="elm", output_size=2, key=jax.random.key(0), **kw))

    # NeuronIO ELM: 52,842 without w_s, 54,120 with it (tau_m learnable, read-out w_y with bias)
    for learn_w_s, expected in ((False, 52_842), (True, 54_120)):
        model = build(input_size=1278, d_m=20, d_mlp=40, learn_w_s=learn_w_s)
        assert model.param_count()["total"] == expected == count_params(model)
    # Branch-ELM 45 x 100 with fixed tau_m: the authors' repository lists 4601 / 6827 / 8002 params for d_m = 1 / 15 / 20
    for d_m, expected in ((1, 4_601), (15, 6_827), (20, 8_002)):
        model = build(input_size=1278, d_m=d_m, d_tree=45, d_branch=100, routing="neuronio", learn_tau=False)
        assert model.param_count()["total"] == expected == count_params(model)
    # with tau_m learnable: 7980 + 42 read-out = 8,022 (the paper's text says 8,104, ~4 d_m + 2 more: see the notes)
    cell = eqx.filter_eval_shape(lambda: ELMCell(1278, d_m=20, d_tree=45, d_branch=100, key=jax.random.key(0)))
    assert cell.param_count() == {"mlp": 3460, "tau_m": 20, "w_s": 4500, "total": 7980}
    # no weakly-typed parameter: an optimiser update would change its type and force a recompilation
    assert not any(leaf.weak_type for leaf in jax.tree_util.tree_leaves(cell))


def test_budget_rounding():
    assert budget_config(69_120)["hidden"] == 96 and budget_config(69_119)["hidden"] == 95
    assert budget_config(69_120, solve_for="d_branch", hidden=96)["d_branch"] == 10
    assert budget_config(69_119, solve_for="d_branch", hidden=96)["d_branch"] == 9
    net = eqx.filter_eval_shape(lambda: ElmNet.from_budget(200_000, 700, d_m=10, key=jax.random.key(0)))
    counts = net.param_count()
    assert counts["P"] <= 200_000 < counts["P"] + counts["k_e"] + counts["k_c"]
    with pytest.raises(ConfigError, match="too small for one neuron"):
        budget_config(719)


# ---------------------------------------------------------------------------------------------
# The ELM neuron against NumPy loops over time and synapses


def np_mlp(weights, biases, x, activation="relu"):
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ w + b
        if i < len(weights) - 1:
            x = np.maximum(x, 0) if activation == "relu" else np.maximum(x, 0) ** 2
    return x


def np_neuronio_sources(n, d_tree, d_branch):
    """Input read by each synapse: E/I interleaved, windows of d_branch with stride ceil(n / d_tree)."""
    interleaved = []
    for i in range(n // 2):
        interleaved += [i, n // 2 + i]
    stride = math.ceil(n / d_tree)
    return [interleaved[j * stride + k] if j * stride + k < n else None for j in range(d_tree) for k in range(d_branch)]


def np_elm_run(cell, xs, drives, sources):
    """Eq. 1 with one trace per synapse (the paper's form; branch sums taken after the traces)."""
    f64 = lambda a: np.asarray(a, np.float64)
    weights, biases = [f64(w) for w in cell.mlp.weights], [f64(b) for b in cell.mlp.biases]
    if cell.theta_tau is None:
        tau = np.logspace(np.log10(cell.tau_min), np.log10(cell.tau_max), cell.d_m)
    else:
        lo, hi = cell.tau_bounds
        tau = lo + (hi - lo) / (1 + np.exp(-f64(cell.theta_tau)))
    kappa_m = np.exp(-cell.dt / tau)
    gain = cell.lam * (1 - kappa_m) if cell.memory_update == "lambda" else 1 - np.exp(-cell.dt * cell.lam / tau)
    kappa_s = np.exp(-cell.dt / cell.tau_s)
    w_s = np.full(len(sources), cell.w_s_init) if cell.w_s_raw is None else np.maximum(f64(cell.w_s_raw), 0)
    s, m, out = np.zeros(len(sources)), np.zeros(cell.d_m), []
    for x, xi in zip(xs, drives):
        for k, src in enumerate(sources):
            s[k] = kappa_s * s[k] + w_s[k] * (0.0 if src is None else x[src])
        feat = s if cell.d_tree is None else s.reshape(cell.d_tree, cell.d_branch).sum(1)
        o = np_mlp(weights, biases, np.concatenate([feat, kappa_m * m]), cell.mlp.activation) + xi
        dm = np.tanh(o) if cell.activation == "tanh" else 1.7159 * np.tanh(2 * o / 3)
        m = kappa_m * m + gain * dm
        out.append((feat.copy(), m.copy()))
    return out


def _run(cell, xs, drives):
    def body(state, inp):
        state, _ = cell(state, inp[0], drive=inp[1])
        return state, state

    return jax.lax.scan(body, cell.init_state(), (xs, drives))[1]


run_cell = eqx.filter_jit(_run)


@pytest.mark.parametrize(
    "kw",
    [
        dict(d_m=3, l_mlp=2, d_mlp=5, memory_update="lambda", activation="tanh", learn_w_s=True),
        dict(d_m=3, memory_update="kappa_lambda", activation="scaled-tanh", learn_tau=False, mlp_activation="relu2"),
        dict(d_m=3, d_tree=3, d_branch=3, routing="neuronio", tau_bounds=[0.5, 60.0]),
        dict(d_m=2, d_tree=4, d_branch=2, routing="random", l_mlp=0, memory_update="kappa_lambda"),
    ],
    ids=["vanilla", "kappa-lambda-fixed-tau", "branch-neuronio", "branch-random"],
)
def test_elm_matches_numpy_loop(kw):
    n_in = 6
    cell = ELMCell(n_in, tau_min=2.0, tau_max=40.0, lam=3.0, tau_s=4.0, dt=0.5, key=jax.random.key(1), **kw)
    if cell.w_s_raw is not None:  # make the learnable synapse weights distinct, one of them negative (ReLU'd to 0)
        cell = eqx.tree_at(lambda c: c.w_s_raw, cell, jnp.linspace(-0.2, 1.5, cell.w_s_raw.size))
    rng = np.random.default_rng(0)
    T = 12
    xs = rng.choice([-1.0, 0.0, 1.0], size=(T, n_in))  # NeuronIO-like E/I spikes
    drives = rng.normal(size=T)
    if cell.d_tree is None:
        sources = list(range(n_in))
    elif kw["routing"] == "neuronio":
        sources = np_neuronio_sources(n_in, cell.d_tree, cell.d_branch)
    else:
        sources = [int(i) for i in cell.synapse_index]
    ref = np_elm_run(cell, xs, drives, sources)
    states = run_cell(cell, jnp.asarray(xs, jnp.float32), jnp.asarray(drives, jnp.float32))
    np.testing.assert_allclose(states.s, np.stack([r[0] for r in ref]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(states.h, np.stack([r[1] for r in ref]), rtol=1e-4, atol=2e-5)


def test_neuronio_routing_covers_every_input_and_masks_overflow():
    idx = neuronio_routing(1278, 45, 100)
    expected = [1278 if s is None else s for s in np_neuronio_sources(1278, 45, 100)]
    np.testing.assert_array_equal(idx, expected)
    assert set(idx[idx < 1278]) == set(range(1278))


def test_memory_update_forms_agree_to_first_order():
    lam, dt = 5.0, 1.0
    eps = dt / np.geomspace(200, 5000, 7)
    g_l = lam * (1 - np.exp(-eps))
    g_kl = 1 - np.exp(-lam * eps)
    # Taylor: (1 - e^{-lam eps}) / (lam (1 - e^{-eps})) = 1 - (lam - 1) eps / 2 + O(eps^2)
    assert np.all(np.abs(g_kl / g_l - 1 + (lam - 1) * eps / 2) <= lam**2 * eps**2)

    rng = np.random.default_rng(1)
    xs = jnp.asarray(rng.normal(size=(40, 3)), jnp.float32)
    zeros = jnp.zeros(40)
    # same weights, both forms; tau_m set through its sigmoid parameter (one compilation per form)
    kw = dict(d_m=2, tau_min=100.0, tau_max=200.0, tau_bounds=[0.0, 5000.0], lam=lam, key=jax.random.key(2))
    forms = [ELMCell(3, memory_update=form, **kw) for form in ("lambda", "kappa_lambda")]

    def rel_diff(tau0):
        theta = jnp.log(jnp.array([tau0, 2 * tau0]) / (5000.0 - jnp.array([tau0, 2 * tau0])))
        a, b = (run_cell(eqx.tree_at(lambda c: c.theta_tau, f, theta), xs, zeros).h for f in forms)
        return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(a)))

    r = [rel_diff(t) for t in (250.0, 500.0, 1000.0)]
    assert abs(r[0] / ((lam - 1) * dt / (2 * 250)) - 1) < 0.15  # (lam - 1) dt / (2 tau) of the fastest unit
    assert 1.8 < r[0] / r[1] < 2.2 and 1.8 < r[1] / r[2] < 2.2  # halves when tau doubles: first order


@eqx.filter_jit
def _max_abs_memory(cell, xs, drives):
    return jnp.max(jnp.abs(_run(cell, xs, drives).h))


def test_memory_bounded_by_lambda_for_any_input():
    """|m| <= lam (Eq. 1 form, |tanh| <= 1) under seeded random draws of weights, inputs and drives, extremes included."""
    rng = np.random.default_rng(7)
    for i in range(12):
        lam = 0.5 if i % 2 else 10.0  # lam is static: two compilations
        cell = ELMCell(4, d_m=3, lam=lam, tau_min=1.0, tau_max=300.0, tau_bounds=[0.0, 500.0],
                       memory_update="lambda", key=jax.random.key(i))
        scale = 10.0 ** rng.integers(-2, 4)  # weights up to 1000x their initial size
        cell = jax.tree_util.tree_map(lambda a: a * scale if eqx.is_inexact_array(a) and a.ndim == 2 else a, cell)
        # tau_m anywhere in (0, 500), down to ~1e-4 (kappa_m ~ 0) and up to the bound (kappa_m ~ 1)
        cell = eqx.tree_at(lambda c: c.theta_tau, cell, jnp.asarray(rng.uniform(-15, 15, 3), jnp.float32))
        xs = (10.0 ** rng.integers(-3, 7)) * rng.standard_cauchy(size=(60, 4))  # heavy tails, up to ~1e9
        drives = (10.0 ** rng.integers(-3, 5)) * rng.normal(size=60)
        m = float(_max_abs_memory(cell, jnp.asarray(xs, jnp.float32), jnp.asarray(drives, jnp.float32)))
        assert np.isfinite(m) and m <= lam * (1 + 1e-6), (i, lam, m)


# ---------------------------------------------------------------------------------------------
# The ELM network against a NumPy loop over neurons and time


def np_elm_net_run(net, xs, drives):
    """Scaling paper Eqs. 1-2 and the read-out ELM layer, neuron by neuron; also returns the MLP outputs."""
    f64 = lambda a: np.asarray(a, np.float64)

    def layer_params(layer):
        tau = np.logspace(np.log10(layer.tau_min), np.log10(layer.tau_max), layer.d_m)
        return dict(idx=np.asarray(layer.index), w_s=f64(layer.w_s), w_r=f64(layer.w_r), b=f64(layer.b),
                    W=[f64(w) for w in layer.mlp.weights], B=[f64(b) for b in layer.mlp.biases],
                    kappa_m=np.exp(-1 / tau), gain=1 - np.exp(-layer.lam / tau), c=layer.c,
                    d_tree=layer.d_tree, d_branch=layer.d_branch)

    def neuron(p, i, src, m):
        z = [src[p["idx"][i, k]] * p["w_s"][i, k] for k in range(p["idx"].shape[1])]
        b = p["c"] * np.array([sum(z[j * p["d_branch"] : (j + 1) * p["d_branch"]]) for j in range(p["d_tree"])])
        o = np_mlp([w[i] for w in p["W"]], [bb[i] for bb in p["B"]], np.concatenate([b, p["kappa_m"] * m]), "relu2")
        m = p["kappa_m"] * m + p["gain"] * np.tanh(o)
        return o, m, p["w_r"][i] @ m

    hid, out = layer_params(net.layer), layer_params(net.readout_layer)
    N, R = hid["idx"].shape[0], out["idx"].shape[0]
    kappa_r = np.exp(-1 / net.tau_r)
    m, r, a = np.zeros((N, net.layer.d_m)), np.zeros(N), np.zeros(N)
    names = ("w_ag", "w_gg", "b_g", "w_gn", "w_gs", "b_n", "b_s")
    ctrl = None if net.gain is None else {k: f64(getattr(net.gain, k)) for k in names}
    g = np.zeros((N, 0 if ctrl is None else net.gain.n_g))
    m_out = np.zeros((R, net.readout_layer.d_m))
    ys, acts, mlp_outs = [], [], []
    for x, xi in zip(xs, drives):
        src = np.concatenate([x, a])
        a_new, o_t = np.zeros(N), []
        for i in range(N):
            o, m[i], y = neuron(hid, i, src, m[i])
            r[i] = kappa_r * r[i] + (1 - kappa_r) * y
            pre = hid["b"][i] + y - r[i] + xi
            if ctrl is None:
                a_new[i] = max(0.0, pre)
            else:  # ARU Eqs. 2-5 for neuron i: its controller RNN, then gamma(pre; n, s)
                g[i] = np.tanh(ctrl["w_ag"] * pre + ctrl["w_gg"] @ g[i] + ctrl["b_g"])
                n = max(ctrl["w_gn"] @ g[i] + ctrl["b_n"][i], net.gain.n_min)
                s = ctrl["w_gs"] @ g[i] + ctrl["b_s"][i]
                a_new[i] = (1 - s) * np.log1p(np.exp(n * pre)) / n + s / (1 + np.exp(-n * pre))
            o_t.append(o)
        a = a_new
        y_out = np.zeros(R)
        for j in range(R):
            _, m_out[j], y = neuron(out, j, a, m_out[j])
            y_out[j] = out["b"][j] + y
        ys.append(y_out)
        acts.append(a.copy())
        mlp_outs.append(np.stack(o_t))
    return np.stack(ys), np.stack(acts), np.stack(mlp_outs)


def _tiny_net(wiring="auto"):
    net = ElmNet(3, hidden=5, d_m=3, d_tree=2, d_branch=3, rho_rec=0.5, tau_min=1.0, tau_max=50.0, tau_r=3.0,
                 readout_neurons=2, readout_d_m=2, readout_d_tree=2, readout_d_branch=2, wiring=wiring,
                 key=jax.random.key(3))
    # non-zero biases so the ReLU threshold and the read-out bias are exercised
    return eqx.tree_at(lambda n: (n.layer.b, n.readout_layer.b), net, (jnp.linspace(-0.3, 0.3, 5), jnp.array([0.1, -0.2])))


@pytest.fixture(scope="module")
def tiny_net():
    return _tiny_net()


@eqx.filter_jit
def _net_trajectory(net, xs, drives):
    def body(state, inp):
        state, y = net(state, inp[0], drive=inp[1])
        return state, (state, y)

    return jax.lax.scan(body, net.init_state(), (xs, drives))[1]


def test_elm_net_matches_numpy_loop(tiny_net):
    rng = np.random.default_rng(4)
    xs, drives = rng.normal(size=(15, 3)), 0.2 * rng.normal(size=15)
    y_ref, a_ref, o_ref = np_elm_net_run(tiny_net, xs, drives)
    states, ys = _net_trajectory(tiny_net, jnp.asarray(xs, jnp.float32), jnp.asarray(drives, jnp.float32))
    assert 0 < (a_ref > 0).mean() < 1  # the ReLU is active on some steps, silent on others
    np.testing.assert_allclose(states.h, a_ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ys, y_ref, rtol=1e-4, atol=1e-5)
    # regularisers recomputed from the trajectory equal the ones from the recorded MLP outputs
    assert tiny_net.regularisers == (MlpL2(1e-5), ActivityL1(1e-3))  # the paper's pair by default
    mlp_l2, activity_l1 = tiny_net.regulariser_terms(jnp.asarray(xs, jnp.float32), states)
    np.testing.assert_allclose(mlp_l2, np.sum(np.mean(np.abs(o_ref), axis=0) ** 2), rtol=1e-4)
    np.testing.assert_allclose(activity_l1, np.sum(np.mean(np.abs(a_ref), axis=0)), rtol=1e-5)
    expected = 1e-5 * mlp_l2 + 1e-3 * activity_l1
    np.testing.assert_allclose(tiny_net.penalty(jnp.asarray(xs, jnp.float32), states), expected, rtol=1e-6)


def test_elm_net_with_aru_adaptation_matches_numpy_loop():
    """activation=AdaptiveGamma() (config: adaptation = "aru"): every neuron's activity is the ARU's
    gamma(pre; n_t, s_t) set by its own controller RNN; and tau_r = inf switches the high-pass
    reference off (r_t = 0)."""
    def make(tau_r):
        net = ElmNet(3, hidden=5, d_m=3, d_tree=2, d_branch=3, rho_rec=0.5, tau_min=1.0, tau_max=50.0, tau_r=tau_r,
                     readout_neurons=2, readout_d_m=2, readout_d_tree=2, readout_d_branch=2,
                     activation=AdaptiveGamma(n_g=3), key=jax.random.key(3))
        # controller read-outs far from their ~0 initialisation, so n_t and s_t move with the input
        return eqx.tree_at(lambda n: (n.gain.w_gn, n.gain.w_gs, n.gain.b_s), net,
                           (jnp.array([2.0, -1.5, 1.0]), jnp.array([0.3, 0.2, -0.25]), jnp.full(5, 0.3)))

    rng = np.random.default_rng(5)
    xs, drives = rng.normal(size=(15, 3)), 0.5 * rng.normal(size=15)
    for tau_r in (3.0, math.inf):
        net = make(tau_r)
        y_ref, a_ref, _ = np_elm_net_run(net, xs, drives)
        states, ys = _net_trajectory(net, jnp.asarray(xs, jnp.float32), jnp.asarray(drives, jnp.float32))
        np.testing.assert_allclose(states.h, a_ref, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ys, y_ref, rtol=1e-4, atol=1e-5)
        assert np.ptp(np.asarray(states.g)) > 0.5  # the controllers are doing something
        assert (np.all(np.asarray(states.r) == 0) if tau_r == math.inf else np.abs(states.r).max() > 1e-3)
    counts = net.param_count()
    assert counts["adaptation"] == 3 + 9 + 3 + 3 + 3 + 5 + 5 and counts["total"] == count_params(net)
    with pytest.raises(ConfigError, match="spiking"):
        ElmNet.from_config(3, hidden=4, adaptation="aru", spiking=True, key=jax.random.key(0))


def test_elm_net_wiring_and_fixed_timescales(tiny_net):
    gather, src = _tiny_net("gather"), jnp.linspace(-1.0, 2.0, 8)
    assert (tiny_net.layer.wiring, gather.layer.wiring) == ("dense", "gather")
    np.testing.assert_allclose(gather.layer.branches(src), tiny_net.layer.branches(src), rtol=1e-5, atol=1e-6)
    idx = np.asarray(tiny_net.layer.index)
    w = np.zeros((5, 5))
    for i in range(5):
        for k in range(idx.shape[1]):
            if idx[i, k] >= 3:
                w[i, idx[i, k] - 3] += tiny_net.layer.c * float(tiny_net.layer.w_s[i, k])
    np.testing.assert_allclose(tiny_net.recurrent_matrices()["w_syn"], w, rtol=1e-6, atol=1e-7)
    # tau_m, tau_r, c, lambda are not arrays of the module: nothing the optimiser can touch
    assert tiny_net.param_count()["total"] == count_params(tiny_net)
    # recurrent fraction: ~rho_rec of the synapses read the layer's own activity
    index = np.asarray(sample_wiring(jax.random.key(0), 400, 300, 100, 0.3))
    assert abs((index >= 100).mean() - 0.3) < 0.006  # 120k synapses: 4.5 standard errors
    assert np.bincount(index[index < 100], minlength=100).min() > 0  # uniform over inputs ...
    assert np.bincount(index[index >= 100] - 100, minlength=400).min() > 0  # ... and over neurons


def test_superspike_step_and_surrogate():
    x = jnp.array([-2.0, -0.01, 0.0, 0.003, 1.5])
    np.testing.assert_array_equal(superspike(x, 100.0), [0, 0, 0, 1, 1])
    grad = jax.grad(lambda v: jnp.sum(superspike(v, 100.0) * jnp.arange(1.0, 6.0)))(x)
    np.testing.assert_allclose(grad, np.arange(1.0, 6.0) / (1 + 100 * np.abs(np.asarray(x))) ** 2, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Variants as values: ElmNet(activation=..., regularisers=...) and the config spellings that build them


SMALL_NET = dict(hidden=5, d_m=3, d_tree=2, d_branch=3, rho_rec=0.5, tau_min=1.0, tau_max=50.0, readout_neurons=2,
                 readout_d_m=2, readout_d_tree=2, readout_d_branch=2)


@eqx.filter_jit
def _outputs_and_penalties(model, xs):
    ys, states = jax.vmap(model.trajectory)(xs)
    return ys, jax.vmap(model.penalty)(xs, states)


@pytest.mark.parametrize(
    "spelled, values",
    [
        ({}, {}),
        ({"adaptation": "aru", "n_g": 3, "n_mean": 4.0, "n_std": 1.5, "n_min": 0.25},
         {"activation": AdaptiveGamma(n_g=3, n_mean=4.0, n_std=1.5, n_min=0.25)}),
        ({"spiking": True, "surrogate_scale": 50.0}, {"activation": SpikingActivity(surrogate_scale=50.0)}),
        ({"mlp_l2": 0, "activity_l1": 0.5, "tau_r": math.inf},
         {"regularisers": (MlpL2(0.0), ActivityL1(0.5)), "tau_r": math.inf}),
    ],
    ids=["paper", "aru", "spiking", "strengths"],
)
def test_config_spellings_build_the_values(spelled, values):
    """The TOML/--set keys (through the registry, i.e. ElmNet.from_config) and the values given to
    ElmNet build the same network: the same parameters, and bit for bit the same outputs and
    penalties on a random batch; both through a model and for the unit alone."""
    from_toml = dynlab.build("model", unit="elm-net", input_size=3, output_size=2, key=jax.random.key(0),
                             **SMALL_NET, **spelled)
    from_values = dynlab.build("model", unit="elm-net", input_size=3, output_size=2, key=jax.random.key(0),
                               **SMALL_NET, **values)
    assert jax.tree_util.tree_structure(from_toml) == jax.tree_util.tree_structure(from_values)
    for a, b in zip(jax.tree_util.tree_leaves(from_toml), jax.tree_util.tree_leaves(from_values), strict=True):
        np.testing.assert_array_equal(a, b)
    xs = jax.random.normal(jax.random.key(1), (4, 8, 3))
    (y_toml, p_toml), (y_values, p_values) = (_outputs_and_penalties(m, xs) for m in (from_toml, from_values))
    np.testing.assert_array_equal(y_toml, y_values)
    np.testing.assert_array_equal(p_toml, p_values)
    assert from_toml.penalised == from_values.penalised == (spelled.get("activity_l1", 1) > 0)
    cell = ElmNet(3, key=jax.random.key(2), **SMALL_NET, **values)
    assert eqx.tree_equal(dynlab.build("unit", "elm-net", input_size=3, key=jax.random.key(2), **SMALL_NET, **spelled),
                          cell)
    kind = type(values.get("activation", ReluActivity()))
    assert isinstance(cell.activation, kind) and (cell.gain is None) == (kind is not AdaptiveGamma)


def test_paper_defaults_are_the_same_in_both_forms():
    cell = eqx.filter_eval_shape(lambda: ElmNet(3, key=jax.random.key(0)))
    assert cell.activation == ReluActivity() and cell.regularisers == (MlpL2(1e-5), ActivityL1(1e-3))
    spelled = dynlab.registry.defaults(ElmNet)
    assert (spelled["adaptation"], spelled["spiking"], spelled["mlp_l2"], spelled["activity_l1"]) == ("none", False, 1e-5, 1e-3)
    assert (spelled["n_g"], spelled["n_mean"], spelled["n_std"], spelled["n_min"]) == (8, 5.0, 2.0, 0.5)
    default_gamma = AdaptiveGamma()
    assert (default_gamma.n_g, default_gamma.n_mean, default_gamma.n_std, default_gamma.n_min) == (8, 5.0, 2.0, 0.5)
    assert SpikingActivity().surrogate_scale == spelled["surrogate_scale"] == 100.0


class MemoryL2(Regulariser):
    """A regulariser dynlab does not ship: the time-averaged squared memory, sum_ik mean_t m_tik^2."""

    def term(self, cell, us, states, state0):
        return jnp.sum(jnp.mean(jnp.square(states.m), axis=0))


def test_custom_regulariser_reaches_bptt_through_the_model():
    """A Regulariser subclass defined here is a value like the built-in ones: the model reports it
    (penalised, penalty) and BPTT's gradient is the plain one plus its penalty's gradient."""
    task = dynlab.build("task", "adding", length=8)
    rule = dynlab.build("rule", "bptt", loss=task.loss)

    def build(regularisers):
        return dynlab.build("model", unit="elm-net", input_size=task.input_size, output_size=task.output_size,
                            key=jax.random.key(0), regularisers=regularisers, **SMALL_NET)

    plain, custom = build(()), build((MemoryL2(0.5),))
    assert not plain.penalised and custom.penalised and not build((MemoryL2(0.0),)).penalised
    batch = jax.jit(task.batch, static_argnums=1)(jax.random.key(5), 8)

    def mean_penalty(m):
        _, states = jax.vmap(m.trajectory)(batch[0])
        penalties = jax.vmap(m.penalty)(batch[0], states)
        return jnp.mean(penalties), (penalties, states[0].m)

    # compiled, one program each, as training runs them (op by op, the eager calls cost more CPU)
    g_reg, (penalties, memories) = eqx.filter_jit(eqx.filter_grad(mean_penalty, has_aux=True))(custom)
    np.testing.assert_allclose(penalties, 0.5 * np.sum(np.mean(np.square(np.asarray(memories, np.float64)), axis=1),
                                                       axis=(1, 2)), rtol=1e-6)

    g_plain, m_plain = eqx.filter_jit(rule.grads)(plain, batch, None)
    g_custom, m_custom = eqx.filter_jit(rule.grads)(custom, batch, None)
    np.testing.assert_allclose(m_custom["loss"], m_plain["loss"], rtol=1e-6)  # the task loss, penalty left out

    assert float(jnp.max(jnp.abs(g_reg.cells[0].layer.mlp.weights[0]))) > 1e-4  # the memory term moves the MLP
    for a, b, c in zip(*(jax.tree_util.tree_leaves(g) for g in (g_custom, g_plain, g_reg)), strict=True):
        np.testing.assert_allclose(a, b + c, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: MlpL2(-1.0), r"^mlp_l2 must be a number >= 0, got -1.0"),
        (lambda: ActivityL1(math.nan), "activity_l1 must be a number >= 0"),
        (lambda: MemoryL2(True), "strength must be a number >= 0"),
        (lambda: SpikingActivity(0.0), "surrogate_scale must be a positive finite number"),
        (lambda: AdaptiveGamma(n_g=0), "n_g must be a positive integer"),
        (lambda: ElmNet(3, activation="relu", key=jax.random.key(0)), "activation must be an Activity value"),
        (lambda: ElmNet(3, regularisers=(1e-5,), key=jax.random.key(0)), "regularisers must be a tuple of Regulariser"),
        (lambda: ElmNet(3, hidden=4, activation=AdaptiveGamma(n_g=2).init(5, key=jax.random.key(0)),
                        key=jax.random.key(0)), "controllers for 5 neurons, the layer has 4"),
        (lambda: dynlab.build("unit", "elm-net", input_size=3, key=jax.random.key(0), adaptation="yes"),
         r"adaptation must be one of 'none', 'aru', got 'yes'"),
        (lambda: ElmNet.from_config(3, adaptation="ARU", key=jax.random.key(0)),
         r"^adaptation must be 'none' or 'aru', got 'ARU'"),
        (lambda: dynlab.build("unit", "elm-net", input_size=3, key=jax.random.key(0), mlp_l2=-0.5),
         r"^mlp_l2 must be a number >= 0, got -0.5"),
        (lambda: dynlab.build("unit", "elm-net", input_size=3, key=jax.random.key(0), spiking=True,
                              activation=ReluActivity()), "spiking spells the activation, which is given as a value"),
        (lambda: experiment.check({"model": {"unit": "elm-net", "adaptation": "aru", "n_g": 0}}),
         "n_g must be a positive integer, got 0"),
        (lambda: experiment.check({"model": {"unit": "elm-net", "regularizers": 1}}), "unknown config key model.regularizers"),
    ],
)
def test_bad_variant_values_are_one_line_config_errors(build, match):
    with pytest.raises(ConfigError, match=match) as err:
        eqx.filter_eval_shape(build)
    assert "\n" not in str(err.value)


def test_cli_spellings_of_the_variants(tmp_path):
    """--set model.adaptation=... is checked as it was: a bad spelling exits 2 with one line."""
    res = invoke(["train", "--model", "elm-net", "--set", "model.adaptation=maybe"], tmp_path)
    assert res.exit_code == 2 and "adaptation must be one of 'none', 'aru'" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = invoke(["train", "--model", "elm-net", "--set", "model.mlp_l2=-1"], tmp_path)
    assert res.exit_code == 2 and "mlp_l2 must be a number >= 0, got -1" in res.output


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: ELMCell(10, d_tree=3, d_branch=4, d_s=13, key=jax.random.key(0)), "d_s = 13 must equal"),
        (lambda: ElmNet(10, d_tree=3, d_branch=4, d_s=13, key=jax.random.key(0)), "d_s = 13 must equal"),
        (lambda: ELMCell(10, tau_min=5.0, tau_max=1.0, key=jax.random.key(0)), "tau_min must be <= tau_max"),
        (lambda: ElmNet(10, tau_min=5.0, tau_max=4.0, key=jax.random.key(0)), "tau_min must be <= tau_max"),
        (lambda: ElmNet.from_budget(100, 10, key=jax.random.key(0)), "too small for one neuron"),
        (lambda: ELMCell(10, d_tree=3, d_branch=3, routing="neuronio", key=jax.random.key(0)), "ceil"),
        (lambda: ELMCell(10, d_tree=3, key=jax.random.key(0)), "both d_tree and d_branch"),
    ],
)
def test_bad_config_is_one_line_config_error(build, match):
    with pytest.raises(ConfigError, match=match) as err:
        eqx.filter_eval_shape(build)
    assert "\n" not in str(err.value)


def test_cli_bad_tau_range_exits_2(tmp_path):
    res = invoke(["train", "--model", "elm", "--set", "model.tau_min=5", "--set", "model.tau_max=1"], tmp_path)
    assert res.exit_code == 2 and "tau_min must be <= tau_max" in res.output and "Traceback" not in res.output


def test_constant_tau_ablation_is_expressible():
    """The ELM paper's Fig. 3e ablation, a single constant tau_m: tau_min == tau_max. Fixed, every memory
    decays by exactly exp(-dt / tau) (closed form); learnable, it needs sigmoid bounds with room (else one
    line saying so); the network takes it too."""
    cell = ELMCell(3, d_m=4, tau_min=25.0, tau_max=25.0, learn_tau=False, dt=1.0, key=jax.random.key(0))
    np.testing.assert_allclose(cell.tau_m, 25.0, rtol=1e-7)
    kappa, _ = memory_gains(cell.tau_m, cell.lam, cell.dt, cell.memory_update)
    np.testing.assert_allclose(kappa, np.exp(-1.0 / 25.0), rtol=1e-6)
    with pytest.raises(ConfigError, match="learn_tau = false"):
        ELMCell(3, d_m=4, tau_min=25.0, tau_max=25.0, key=jax.random.key(0))
    learnable = ELMCell(3, d_m=4, tau_min=25.0, tau_max=25.0, tau_bounds=[0.0, 500.0], key=jax.random.key(0))
    np.testing.assert_allclose(learnable.tau_m, 25.0, rtol=1e-4)
    net = ElmNet(3, hidden=5, d_m=3, d_tree=2, d_branch=3, rho_rec=0.5, tau_min=25.0, tau_max=25.0, key=jax.random.key(0))
    _, y = eqx.filter_jit(lambda n: n(n.init_state(), jnp.ones(3)))(net)  # compiled: op by op costs more CPU
    assert np.isfinite(np.asarray(y)).all()
    with pytest.raises(ConfigError, match="tau_min must be <= tau_max"):
        ELMCell(3, tau_min=30.0, tau_max=25.0, key=jax.random.key(0))
