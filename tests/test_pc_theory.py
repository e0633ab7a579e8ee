"""PC on linear networks against truths the code does not produce: the paper's formulas (Eqs. 6,
16, 26, 104), dense linear algebra, and agreement of three independent methods (discrete
inference, a diffrax ODE solve, the closed form). float64 throughout. Each test's JAX work runs as
one compiled program (``eqx.filter_jit``): run op by op it compiled every primitive on its own, most
of these tests' time."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dynlab import ffmodels
from dynlab.rules import pc_closed_form as cf
from dynlab.rules import pc
from dynlab.rules.bp import bp_grads


def model64(d_in=6, d_out=3, width=9, depth=5, seed=1, **kw):
    m = ffmodels.FeedForward(d_in, d_out, width=width, depth=depth, key=jax.random.key(seed), **kw)
    return ffmodels.astype(m, jnp.float64)


def batch64(p=7, d_in=6, d_out=3, seed=2):
    kx, ky = jax.random.split(jax.random.key(seed))
    return jax.random.normal(kx, (p, d_in), jnp.float64), jax.random.normal(ky, (p, d_out), jnp.float64)


def leaves(tree):
    return [np.asarray(l) for l in jax.tree_util.tree_leaves(tree)]


def np_weights(m):
    """The effective layer matrices A_1..A_L in NumPy, written out from Eqs. 7-10 / 95-98."""
    n, L, p = m.width, m.depth, m.param
    a1 = np.asarray(m.w_in) / (n**p.a1 * np.sqrt(m.input_size))
    hid = [np.asarray(w) / (n**p.a * (L**p.alpha if m.residual else 1.0)) for w in m.w_hidden]
    hid = [np.eye(n) + h if m.residual else h for h in hid]
    out = np.asarray(m.w_out) / (n**p.a * p.gamma0 * n**p.d)
    return [a1, *hid, out]


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("param", ["mf", "sp"])
def test_forward_pass_matches_the_papers_equations(residual, param):
    with jax.enable_x64(True):
        m = model64(residual=residual, param=param, gamma0=1.5)
        x, _ = batch64()
        got = np.asarray(m(x))
        acts = np.asarray(m.activations(x))
    mats = np_weights(m)
    h = np.asarray(x).T
    hs = []
    for a in mats[:-1]:
        h = a @ h
        hs.append(h.T)
    np.testing.assert_allclose(got, (mats[-1] @ h).T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(acts, np.stack(hs), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("residual", [True, False])
def test_backward_accumulation_equals_dense_products(residual):
    with jax.enable_x64(True):
        m = model64(residual=residual)
        ms = np.asarray(cf.output_maps(m))
    mats = np_weights(m)
    L = m.depth
    for l in range(1, L):  # M_l = A_L ... A_{l+1}
        dense = mats[L - 1]
        for k in range(L - 2, l - 1, -1):
            dense = dense @ mats[k]
        np.testing.assert_allclose(ms[l - 1], dense, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("residual", [True])
def test_closed_form_activities_solve_the_dense_linear_system(residual):
    """z* from the closed form equals the minimiser of the quadratic energy found by a dense Newton solve."""
    with jax.enable_x64(True):
        m = model64(residual=residual, width=5, depth=4)
        x, y = batch64(p=3)

        @eqx.filter_jit
        def both(m, x, y):
            z0 = m.activations(x)
            f = lambda zf: pc.energy(m, zf.reshape(z0.shape), x, y)  # noqa: E731
            hess = jax.hessian(f)(z0.ravel())
            z_dense = z0.ravel() - jnp.linalg.solve(hess, jax.grad(f)(z0.ravel()))
            return z_dense, cf.exact_activities(m, x, y).ravel(), cf.equilibrated_energy(m, x, y), f(z_dense)

        z_dense, z_star, f_star, f_at = (np.asarray(v) for v in both(m, x, y))
        f_star, f_at = float(f_star), float(f_at)
    np.testing.assert_allclose(z_star, z_dense, rtol=1e-9, atol=1e-12)
    assert f_star == pytest.approx(f_at, rel=1e-10)


@pytest.mark.parametrize("residual", [True, False])
def test_discrete_and_ode_inference_converge_to_the_closed_form(residual):
    with jax.enable_x64(True):
        m = model64(residual=residual)
        x, y = batch64()

        @eqx.filter_jit
        def three(m, x, y):
            z_star = cf.exact_activities(m, x, y)
            disc = pc.infer(m, x, y, optimizer=optax.sgd(0.3), max_steps=20_000, rtol=1e-11, z_exact=z_star,
                            record=True)
            ode = pc.infer_ode(m, x, y, rtol=1e-8, controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
                               max_steps=20_000)
            rel = lambda z: jnp.linalg.norm(z - z_star) / jnp.linalg.norm(z_star)  # noqa: E731
            return cf.equilibrated_energy(m, x, y), disc, ode, rel(disc.z), rel(ode.z)

        f_star, disc, ode, d_disc, d_ode = three(m, x, y)
        f_star, d_disc, d_ode = float(f_star), float(d_disc), float(d_ode)
        trace = np.asarray(disc.trace_distance)
        energies = np.asarray(disc.trace_energy)
    assert bool(disc.converged) and bool(ode.converged)
    assert d_disc < 1e-6 and d_ode < 1e-6
    assert float(disc.energy) == pytest.approx(f_star, rel=1e-6)
    assert float(ode.energy) == pytest.approx(f_star, rel=1e-6)
    steps = int(disc.steps)
    assert np.isnan(trace[steps + 1:]).all() and np.isfinite(trace[: steps + 1]).all()
    assert trace[steps] < 1e-6 < trace[0]
    # gradient descent with a stable step never increases a convex quadratic
    assert np.all(np.diff(energies[: steps + 1]) <= 1e-12)
    assert energies[steps] == pytest.approx(f_star, rel=1e-9)


def test_scalar_output_energy_is_loss_over_s():
    """Eq. 5: F* = L / s(θ) with s = 1 + Σ_ℓ |W_{L:ℓ}|² (Eq. 6 with the multipliers, Eq. 25)."""
    with jax.enable_x64(True):
        m = model64(d_out=1, depth=6, gamma0=0.7)
        x, y = batch64(d_out=1)
        res, s, loss = eqx.filter_jit(lambda m: (cf.closed_form(m, x, y), cf.rescaling(m), pc.loss(m, x, y)))(m)
        s, loss = float(s), float(loss)
    mats = np_weights(m)
    s_np, path = 1.0, mats[-1]
    for k in range(len(mats) - 2, 0, -1):  # Σ_{ℓ=2}^{L} |W_{L:ℓ}|²
        s_np += float(np.sum(path**2))
        path = path @ mats[k]
    s_np += float(np.sum(path**2))
    assert s == pytest.approx(s_np, rel=1e-12)
    assert float(res.loss) == pytest.approx(loss, rel=1e-12)
    assert float(res.energy) == pytest.approx(loss / s, rel=1e-12)
    assert float(res.s_minus_1) == pytest.approx(s - 1, rel=1e-10)
    assert float(res.s_max_minus_1) == pytest.approx(s - 1, rel=1e-10)


@pytest.mark.parametrize("param,gamma0", [("mf", 1.0), ("mf", 2.5), ("ntk", 1.0), ("mup", 0.5)])
def test_one_hidden_layer_rescaling(param, gamma0):
    """s = 1 + |w|² with the output multiplier: mean-field gives Eq. 16, 1 + |w|²/(γ0² N²)."""
    n = 12
    with jax.enable_x64(True):
        m = model64(d_out=1, width=n, depth=2, param=param, gamma0=gamma0)
        s = float(cf.rescaling(m))
    w = np.asarray(m.w_out).ravel()
    p = m.param
    assert s == pytest.approx(1 + np.sum(w**2) / (gamma0**2 * n ** (2 * p.a + 2 * p.d)), rel=1e-12)
    if param == "mf":
        assert s == pytest.approx(1 + np.sum(w**2) / (gamma0**2 * n**2), rel=1e-12)


def test_residual_rescaling_is_eq_104():
    """s = 1 + (|w|² + Σ_{ℓ=2}^{L-1} |p^{(L:ℓ)}|²)/(γ0² N²), p^{(L:ℓ)} = w Π_ℓ^{L-1} (I + W/(L^α √N))."""
    n, L, g0, alpha = 7, 6, 1.3, 0.5
    with jax.enable_x64(True):
        m = model64(d_out=1, width=n, depth=L, gamma0=g0, alpha=alpha)
        s = float(cf.rescaling(m))
    w = np.asarray(m.w_out).ravel()
    blocks = [np.eye(n) + np.asarray(wl) / (L**alpha * np.sqrt(n)) for wl in m.w_hidden]  # ℓ = 2..L-1
    total, p = np.sum(w**2), w.copy()
    for b in reversed(blocks):
        p = p @ b
        total += np.sum(p**2)
    assert s == pytest.approx(1 + total / (g0**2 * n**2), rel=1e-12)


def test_energy_gradient_is_eq_26_and_pc_weight_gradient_at_equilibrium():
    """∇F* = ∇L/s − (L/s²) ∇s for scalar output (Eq. 26), and = ∂F(z*, θ)/∂θ (envelope theorem)."""
    with jax.enable_x64(True):
        m = model64(d_out=1, depth=4)
        x, y = batch64(d_out=1)

        @eqx.filter_jit
        def three(m, x, y):
            _, g_star = cf.energy_and_grads(m, x, y)
            loss, g_loss = bp_grads(m, x, y)
            s = cf.rescaling(m)
            g_s = eqx.filter_grad(cf.rescaling)(m)
            expected = jax.tree_util.tree_map(lambda gl, gs: gl / s - loss / s**2 * gs, g_loss, g_s)
            return g_star, expected, pc.weight_grads(m, cf.exact_activities(m, x, y), x, y)[1]

        g_star, expected, g_pc = three(m, x, y)
    for a, b, c in zip(leaves(g_star), leaves(expected), leaves(g_pc)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-13)


def test_pc_rule_closed_form_and_discrete_agree():
    """The registered rule: discrete inference (converged) gives the closed-form gradient."""
    import dynlab

    with jax.enable_x64(True):
        m = model64(d_in=40, d_out=1, width=16, depth=3)
        task = dynlab.build("task", "pc-toy")
        xs, ys = task.fixed_batch()
        batch = (xs.astype(jnp.float64)[:, None], ys.astype(jnp.float64)[:, None], jnp.ones((20, 1)))
        exact = dynlab.build("rule", "pc", loss="mse", inference="closed-form")
        disc = dynlab.build("rule", "pc", loss="mse", beta=0.3, max_steps=5000, rtol=1e-10)
        (g1, m1), (g2, m2) = (eqx.filter_jit(rule.grads)(m, batch, jax.random.key(0)) for rule in (exact, disc))
        f_star = float(eqx.filter_jit(cf.equilibrated_energy)(m, xs.astype(jnp.float64), ys.astype(jnp.float64)))
    assert float(m2["converged"]) == 1.0 and int(m2["inference_steps"]) > 0
    assert float(m1["energy"]) == pytest.approx(f_star, rel=1e-10)
    assert float(m2["energy"]) == pytest.approx(f_star, rel=1e-8)
    for a, b in zip(leaves(g1), leaves(g2)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)


def test_cross_entropy_energy_gradient_matches_autodiff_of_the_loss_at_wide_limit_shape():
    """CE output: inference lowers the energy below its feed-forward value, which is the CE loss."""
    with jax.enable_x64(True):
        m = model64(d_out=4, activation="tanh")
        x, _ = batch64(d_out=4)
        y = jax.nn.one_hot(jnp.arange(7) % 4, 4, dtype=jnp.float64)

        @eqx.filter_jit
        def three(m, x, y):
            f0 = pc.energy(m, m.activations(x), x, y, output="ce")
            inf = pc.infer(m, x, y, output="ce", optimizer=optax.sgd(0.2), max_steps=3000, rtol=1e-8)
            return f0, pc.loss(m, x, y, output="ce"), inf

        f0, ce, inf = three(m, x, y)
        f0, ce = float(f0), float(ce)
    assert f0 == pytest.approx(ce, rel=1e-12)  # at the feed-forward pass every hidden error is zero
    assert bool(inf.converged) and float(inf.energy) < f0
