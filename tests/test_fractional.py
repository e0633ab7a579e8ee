"""Fractional-order operator and fit (ARU paper Eqs. 15–16) against closed forms."""

import jax
import numpy as np
import pytest
from scipy.special import gamma as Gamma

import dynlab
from dynlab.analyses.fractional import fit_fractional_order, fractional_derivative, fractional_order_analysis
from dynlab.errors import ConfigError

T, ON, OFF = 400, 100, 200  # the paper's probe: a step on t in [100, 200)


def riemann_liouville_pulse(alpha, t1=ON, t2=OFF, n=T):
    r"""Cell averages over [k, k+1) of the Riemann–Liouville D^alpha of the pulse 1[t1 <= t < t2].

    D^alpha of a step at t1 is (t - t1)_+^(-alpha) / Gamma(1 - alpha); its antiderivative,
    F(t) = (t - t1)_+^(1 - alpha) / Gamma(2 - alpha), is continuous for alpha < 1, so the cell
    average F(k+1) - F(k) is exact (alpha = 1 gives the two unit spikes of the derivative).
    """
    def F(u):
        return np.where(u > 0, np.abs(u) ** (1 - alpha), 0.0) / Gamma(2 - alpha)

    k = np.arange(n, dtype=float)
    pulse = lambda t: F(t - t1) - F(t - t2)  # noqa: E731
    return pulse(k + 1) - pulse(k)


STEP = ((np.arange(T) >= ON) & (np.arange(T) < OFF)).astype(float)
TRUE_ALPHAS = [-1.0, -0.7, -0.3, 0.0, 0.2, 0.5, 0.8, 1.0]


def test_fit_recovers_known_orders_within_0_05():
    """Responses built from the closed form (any offset and scale) give back their order."""
    responses = np.stack([3.0 * riemann_liouville_pulse(a) + 2.0 for a in TRUE_ALPHAS])
    ds = fit_fractional_order(responses, STEP)
    np.testing.assert_allclose(ds.alpha_hat.values, TRUE_ALPHAS, atol=0.05)
    assert np.all(ds.error_min.values < 0.05)
    # the plain periodic FFT (the paper's) is fine for differentiating orders
    periodic = fit_fractional_order(responses[4:], STEP, extension="periodic")
    np.testing.assert_allclose(periodic.alpha_hat.values, TRUE_ALPHAS[4:], atol=0.05)


def test_operator_matches_calculus_on_periodic_signals():
    t = np.arange(256)
    w = 2 * np.pi * 4 / 256
    x = np.sin(w * t)
    np.testing.assert_allclose(fractional_derivative(x, 1.0, extension="periodic"), w * np.cos(w * t), atol=1e-12)
    np.testing.assert_allclose(fractional_derivative(x, -1.0, extension="periodic"), -np.cos(w * t) / w, atol=1e-10)
    half = fractional_derivative(x, 0.5, extension="periodic")
    np.testing.assert_allclose(fractional_derivative(half, 0.5, extension="periodic"),
                               w * np.cos(w * t), atol=1e-12)  # semigroup
    # D^a sin(wt) = w^a sin(wt + a pi / 2)
    np.testing.assert_allclose(fractional_derivative(x, 0.3, extension="periodic"),
                               w**0.3 * np.sin(w * t + 0.3 * np.pi / 2), atol=1e-12)
    # an array of orders gives one signal per order
    both = fractional_derivative(np.stack([x, x]), np.array([1.0, -1.0]), extension="periodic")
    assert both.shape == (2, 2, 256)
    np.testing.assert_allclose(both[1, 0], -np.cos(w * t) / w, atol=1e-10)


def test_bad_input_is_a_config_error():
    with pytest.raises(ConfigError, match="extension"):
        fractional_derivative(STEP, 0.5, extension="zero")
    with pytest.raises(ConfigError, match="same T"):
        fit_fractional_order(STEP[:10], STEP)
    with pytest.raises(ConfigError, match="constant"):
        fit_fractional_order(STEP, np.ones(T))


def test_memoryless_network_has_order_zero():
    """With W_hh = 0 every neuron is an instantaneous function of the drive: its response has the
    step's shape exactly, so alpha = 0 with zero error (isolated or not)."""
    import equinox as eqx

    model = dynlab.build("model", unit="rnn-gamma", input_size=1, output_size=1, key=jax.random.key(1), hidden=5)
    model = eqx.tree_at(lambda m: m.cells[0].w_hh, model, 0 * model.cells[0].w_hh)
    ds = fractional_order_analysis(model, drives=(1.0, 20.0), steps=T, alphas=np.linspace(-1, 1, 41))
    np.testing.assert_array_equal(ds.alpha_hat.values, 0.0)
    np.testing.assert_array_equal(ds.alpha_mean_response.values, 0.0)
    assert float(ds.error_min.max()) < 1e-10
    with pytest.raises(ConfigError, match="onset"):
        fractional_order_analysis(model, onset=350, duration=100, steps=T)
