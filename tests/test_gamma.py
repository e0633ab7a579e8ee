"""The ARU activation family against the paper's closed forms (Eqs. 2, 8–11)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab.units.aru import gamma

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

def test_zero_gain_is_finite_and_clamped():
    x = jnp.linspace(-2, 2, 5)
    for s in (0.0, 0.5, 1.0):
        val = gamma(x, 0.0, s)
        assert np.all(np.isfinite(val))
        np.testing.assert_allclose(val, gamma(x, 1e-3, s), rtol=1e-6)
        grads = jax.grad(lambda x, n, s: gamma(x, n, s).sum(), argnums=(0, 1, 2))(x, jnp.float32(0.0), jnp.float32(s))
        assert all(np.all(np.isfinite(g)) for g in grads)
