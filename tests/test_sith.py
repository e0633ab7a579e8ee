"""SITH memory against closed forms and independent computations (not against itself)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab.errors import ConfigError
from dynlab.units.sith import SITH, _fd_operator, causal_fft_conv, diagonal_scan, post_kernel, tau_grid


def sequence(mem, f, **kw):
    """``mem.sequence(f, **kw)`` (the FFT fast path) compiled as one program, as the units run it
    inside training (op by op costs more CPU)."""
    return jax.jit(lambda f: mem.sequence(f, **kw))(f)


def scan_memory(mem, f):
    def body(s, x):
        s = mem.step(s, x)
        return s, mem.read(s)

    return jax.lax.scan(body, jnp.zeros(mem.state_shape(f.shape[1])), f)[1]


def test_post_kernel_closed_form_peak_and_area():
    taus = np.array([2.0, 5.0, 20.0])
    u = np.linspace(0, 400, 400001)
    K = post_kernel(taus, 15, u)
    # peak of u^k e^{-ku/tau} at u = tau; unit area
    np.testing.assert_allclose(u[K.argmax(1)], taus, rtol=1e-3)
    np.testing.assert_allclose(np.trapezoid(K, u, axis=1), 1.0, rtol=1e-4)
    # value at the peak from the formula by hand: k^{k+1}/k! e^{-k} / tau
    np.testing.assert_allclose(K.max(1), 15**16 / math.factorial(15) * math.exp(-15) / taus, rtol=1e-6)


def test_cascade_recurrence_equals_filter_bank():
    mem = SITH(1.0, 30.0, 12, k=15)
    f = jax.random.normal(jax.random.key(0), (200, 3))
    rec = scan_memory(mem, f)
    # the filter bank by a direct NumPy convolution with the closed-form kernels
    K = post_kernel(mem.taus, 15, np.arange(200))
    ref = np.stack([[np.convolve(np.asarray(f[:, j], np.float64), K[i])[:200] for i in range(12)] for j in range(3)])
    ref = ref.transpose(2, 0, 1)
    scale = np.abs(ref).max()
    np.testing.assert_allclose(rec, ref, atol=2e-5 * scale)
    np.testing.assert_allclose(sequence(mem, f), ref, atol=2e-5 * scale)  # FFT fast path


def test_impulse_response_peaks_near_tau_star():
    mem = SITH(2.0, 60.0, 8, k=15)
    f = jnp.zeros((300, 1)).at[0, 0].set(1.0)
    r = np.asarray(scan_memory(mem, f))[:, 0, :]
    assert np.all(np.abs(r.argmax(0) - mem.taus) <= 0.5 + 0.02 * mem.taus), (r.argmax(0), mem.taus)


def test_fd_recurrence_approximates_post_filters_and_equals_its_filter_bank():
    mem = SITH(1.0, 81.0, 50, k=4, method="fd")
    lags = np.arange(400)
    fd = mem.kernels(lags)
    post = post_kernel(mem.taus, 4, lags)
    err = np.abs(fd - post).max(1) / post.max(1)
    assert err.max() < 0.02, err.max()  # finite differences over s: ~1% at k = 4
    f = jax.random.normal(jax.random.key(1), (150, 2))
    rec = np.asarray(scan_memory(mem, f))
    ref = np.stack([[np.convolve(np.asarray(f[:, j], np.float64), fd[i])[:150] for i in range(50)] for j in range(2)]).transpose(2, 0, 1)
    # float32 finite differences of order k cancel digits (weights ~ (s/ds)^k): agreement to ~0.3%
    np.testing.assert_allclose(rec, ref, atol=5e-3 * np.abs(ref).max())
    np.testing.assert_allclose(sequence(mem, f), ref, atol=5e-3 * np.abs(ref).max())


@pytest.mark.parametrize("method", ["cascade", "fd"])
def test_held_input_kernels_integrate_the_filters_over_each_step(method):
    """``hold``: the discrete kernel is the continuous filter integrated over each step (scipy quad
    of the closed-form Post filter, or of the fd method's Laplace kernels), and the recurrence,
    the filter bank and these kernels agree."""
    from scipy.integrate import quad

    k = 15 if method == "cascade" else 4
    mem = SITH(1.0, 20.0, 6, k=k, method=method)
    lags = np.arange(60)
    if method == "cascade":
        phi = lambda u, i: post_kernel(mem.taus[i : i + 1], k, [u])[0, 0]  # noqa: E731
    else:
        s, W = _fd_operator(*mem._key(), mem.fd_pad)
        phi = lambda u, i: W[i] @ np.exp(-s * u)  # noqa: E731
    ref = np.array([[quad(phi, n, n + 1, args=(i,), epsabs=1e-13)[0] for n in lags] for i in range(6)])
    np.testing.assert_allclose(mem.kernels(lags, hold=True), ref, atol=1e-9 * np.abs(ref).max())
    f = jax.random.normal(jax.random.key(3), (60, 2))

    def body(state, x):
        state = mem.step(state, x, hold=True)
        return state, mem.read(state)

    rec = np.asarray(jax.lax.scan(body, jnp.zeros(mem.state_shape(2)), f)[1])
    conv = np.stack([[np.convolve(np.asarray(f[:, j], np.float64), ref[i])[:60] for i in range(6)] for j in range(2)])
    conv = conv.transpose(2, 0, 1)
    tol = (2e-5 if method == "cascade" else 5e-3) * np.abs(conv).max()  # fd: float32 cancellation, as above
    np.testing.assert_allclose(rec, conv, atol=tol)
    np.testing.assert_allclose(sequence(mem, f, hold=True), conv, atol=tol)


@pytest.mark.parametrize("method", ["cascade", "fd"])
def test_time_rescaling_translates_memory_along_tau(method):
    # ratio sqrt(3) between neighbouring tau*: dilating the input by 3 shifts the memory by 2 indices
    mem = SITH(1.0, 3.0**6, 13, k=4, method=method)
    rng = np.random.default_rng(0)
    pulses = np.zeros((60, 1), np.float32)
    pulses[rng.choice(60, 12, replace=False), 0] = 1.0
    dil = np.zeros((180, 1), np.float32)
    dil[::3] = pulses
    m1 = np.asarray(sequence(mem, jnp.asarray(pulses)))[:, 0]
    m3 = np.asarray(sequence(mem, jnp.asarray(dil)))[:, 0]
    t = np.arange(60)
    tol = 1e-5 if method == "cascade" else 2e-2
    np.testing.assert_allclose(3 * m3[3 * t, 2:], m1[:, :-2], atol=tol * np.abs(m1).max())


def test_extend_keeps_grid():
    mem = SITH(1.0, 81.0, 50, k=15)
    ext = mem.extend(729)
    np.testing.assert_allclose(ext.taus[:50], mem.taus)
    assert ext.taus[-1] >= 81 * 729 and ext.taus[-2] < 81 * 729
    np.testing.assert_allclose(np.diff(np.log(ext.taus)), np.log(mem.ratio))


def test_diagonal_scan_chunked_matches_loop():
    a = np.exp(-1 / np.array([1.0, 7.0, 60.0]))
    b = np.random.default_rng(0).normal(size=(300, 2, 3))
    h, ref = np.zeros((2, 3)), np.zeros_like(b)
    for t in range(300):
        h = a * h + b[t]
        ref[t] = h
    for chunk in (None, 32):
        scan = jax.jit(lambda a, b, chunk=chunk: diagonal_scan(a, b, chunk=chunk))  # one program (op by op costs more)
        np.testing.assert_allclose(scan(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32)),
                                   ref, rtol=1e-4, atol=1e-4)


def test_fft_conv_is_causal():
    u = jnp.zeros((50, 1)).at[20, 0].set(1.0)
    y = causal_fft_conv(u, jnp.arange(50.0))
    np.testing.assert_allclose(y[:20, 0], 0, atol=1e-5)
    np.testing.assert_allclose(y[20:, 0], np.arange(30.0), atol=1e-4)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(n_taus=5, k=15, method="fd", fd_pad=0), "n_taus = 5 is too small for Post order k = 15"),
    (dict(tau_min=-1.0), "tau_min must be a positive finite number"),
    (dict(tau_min=10.0, tau_max=5.0), "tau_max must be >= tau_min"),
    (dict(k=0), "k must be a positive integer"),
    (dict(method="euler"), "method must be 'cascade' or 'fd'"),
])
def test_bad_memory_config(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        SITH(**kwargs)


def test_tau_grid_geometric():
    t = tau_grid(1, 81, 5)
    np.testing.assert_allclose(t, [1, 3, 9, 27, 81])
