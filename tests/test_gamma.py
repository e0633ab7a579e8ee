"""The ARU activation family against the paper's closed forms (Eqs. 2, 8–11)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab.units.aru import N_MIN, gamma

def sig(z):
    return 1.0 / (1.0 + np.exp(-z))

def softplus(z):
    return np.logaddexp(0.0, z)

X = np.linspace(-3, 3, 13)
NS = [0.5, 1.0, 5.0, 12.0]

@pytest.mark.parametrize("n", NS)
def test_endpoints_are_softplus_and_sigmoid(n):
    x = jnp.asarray(X, jnp.float32)
    np.testing.assert_allclose(gamma(x, n, 0.0), softplus(n * X) / n, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gamma(x, n, 1.0), sig(n * X), rtol=1e-6, atol=1e-7)

def test_large_gain_tends_to_relu():
    x = jnp.asarray(X, jnp.float32)
    np.testing.assert_allclose(gamma(x, 1e3, 0.0), np.maximum(X, 0), atol=1e-3)

@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("s", [0.0, 0.3, 1.0])
def test_derivatives_match_eqs_9_to_11(n, s):
    """Closed forms written out from the paper, compared with jax.grad in float64."""
    with jax.enable_x64(True):
        for x in X:
            gx, gn, gs = jax.grad(gamma, argnums=(0, 1, 2))(jnp.float64(x), jnp.float64(n), jnp.float64(s))
            z = n * x
            dx = (1 - s) * sig(z) + n * s * sig(z) * (1 - sig(z))
            dn = ((1 - s) / n) * (x * sig(z) - softplus(z) / n) + s * x * sig(z) * (1 - sig(z))
            ds = sig(z) - softplus(z) / n
            np.testing.assert_allclose([gx, gn, gs], [dx, dn, ds], rtol=1e-10, atol=1e-12)

@pytest.mark.parametrize("nx", [1e4, -1e4, 1e3, -1e3])
def test_finite_for_huge_arguments(nx):
    for n in (1.0, 100.0):
        x = jnp.float32(nx / n)
        for s in (0.0, 0.5, 1.0):
            val = gamma(x, n, s)
            grads = jax.grad(gamma, argnums=(0, 1, 2))(x, jnp.float32(n), jnp.float32(s))
            assert np.isfinite(val) and all(np.isfinite(g) for g in grads)
    # and the value is right: softplus(nx)/n -> max(x, 0) for |nx| >> 1
    np.testing.assert_allclose(gamma(jnp.float32(nx), 1.0, 0.0), max(nx, 0.0), rtol=1e-6)

def test_gain_is_floored_at_n_min():
    """gamma is defined for n > 0 and has a pole ln2/n at n -> 0: gains below n_min (0, negative,
    tiny) act as n_min, the value stays bounded by the floor's, and every gradient is finite."""
    x = jnp.linspace(-2, 2, 5)
    for s in (0.0, 0.5, 1.0):
        at_floor = gamma(x, N_MIN, s)
        for n in (0.0, -0.3, 1e-6):
            np.testing.assert_allclose(gamma(x, n, s), at_floor, rtol=1e-6)
            grads = jax.grad(lambda x, n, s: gamma(x, n, s).sum(), argnums=(0, 1, 2))(x, jnp.float32(n), jnp.float32(s))
            assert all(np.all(np.isfinite(g)) for g in grads)
        # at the floor gamma(0) = (1 - s) ln2 / n_min + s / 2: bounded, where n -> 0 would diverge
        np.testing.assert_allclose(gamma(0.0, 0.0, s), (1 - s) * np.log(2) / N_MIN + s / 2, rtol=1e-6)
    # above the floor nothing changes: a smaller floor gives the same values
    np.testing.assert_allclose(gamma(x, 0.7, 0.3), gamma(x, 0.7, 0.3, n_min=1e-3), rtol=1e-7)
