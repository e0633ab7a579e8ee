"""Tests of the frame factorisations (analyses/lyapunov/factorisations.py) against truths not produced by
the code under test: LAPACK's Householder QR, the published Henon exponents and the exact sum ln b,
closed-form spectra of linear maps, and the volume identity sum(lambda) = <ln |det J|> from
numpy.linalg.slogdet."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.tree_util import Partial

from dynlab.analyses.lyapunov import lyapunov_core, lyapunov_spectrum
from dynlab.analyses.lyapunov.factorisations import CholeskyQR, Householder, PivotedLU
from dynlab.errors import ConfigError

HENON_LAMBDA = (0.41922, -1.62319)  # Sprott (2003), a = 1.4, b = 0.3


def _henon(h, x, a=1.4, b=0.3):
    return jnp.stack([1.0 - a * h[0] ** 2 + h[1], b * h[0]])


def _linear(a, h, x):
    return a @ h


def _rnn(params, h, x):
    w, u, b = params
    return jnp.tanh(w @ h + u @ x + b)


def _rnn_problem(n=6, steps=400, gain=1.2, drive=0.5, seed=0):
    rng = np.random.default_rng(seed)
    params = (rng.normal(size=(n, n)) * gain / np.sqrt(n), rng.normal(size=(n, 2)) * drive, rng.normal(size=n) * 0.1)
    return Partial(_rnn, params), params, rng.normal(size=n), rng.normal(size=(steps, 2))


def _frame_with_condition(n, k, condition, seed=0):
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(n, k)))
    v, _ = np.linalg.qr(rng.normal(size=(k, k)))
    return (u * np.logspace(0, -np.log10(condition), k)) @ v.T


# --- the factorisations themselves ---------------------------------------------------------------


@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("shape", [(40, 12), (64, 64)])
def test_cholesky_qr_equals_householder_on_a_well_conditioned_frame(shape, passes):
    with jax.enable_x64(True):
        z = jnp.asarray(np.random.default_rng(1).normal(size=shape))  # condition 3 and 65
        method = CholeskyQR(passes=passes)
        assert bool(method.used_cholesky(z))
        q, r = method.qr(z)
        q_ref, r_ref = Householder().qr(z)  # positive diagonal, so Q and R are unique
        np.testing.assert_allclose(q, q_ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(r, r_ref, rtol=0, atol=1e-12 * float(jnp.abs(r_ref).max()))
        frame, log_diag = method(z)
        np.testing.assert_allclose(log_diag, np.log(np.diag(np.asarray(r_ref))), rtol=0, atol=1e-12)


def test_selector_falls_back_on_an_ill_conditioned_frame():
    with jax.enable_x64(True):
        z = jnp.asarray(_frame_with_condition(30, 8, 1e10))
        q_ref, r_ref = Householder().qr(z)
        plain = CholeskyQR()
        assert not bool(plain.used_cholesky(z))  # cond^2 eps = 1e4: the Cholesky would break down
        q, r = plain.qr(z)
        np.testing.assert_array_equal(q, q_ref)  # the fallback is Householder's factorisation itself
        np.testing.assert_array_equal(r, r_ref)
        shifted = CholeskyQR(shifted=True)  # shifted CholeskyQR3: matmul-only, still a QR of z
        assert not bool(shifted.used_cholesky(z))
        q, r = shifted.qr(z)
        np.testing.assert_allclose(q.T @ q, np.eye(8), rtol=0, atol=1e-13)
        np.testing.assert_allclose(q @ r, z, rtol=0, atol=1e-13)
        np.testing.assert_allclose(np.log(np.diag(r)), np.log(np.diag(np.asarray(r_ref))), rtol=0, atol=1e-6)


def test_selector_follows_the_condition_of_a_henon_frame():
    # Pushed by the Henon map, a frame's condition grows like e^(m (l1 - l2)) = e^(2.04 m): the selector
    # takes the Cholesky path after a few steps and falls back after many.
    with jax.enable_x64(True):
        def push(_, carry):
            h, z = carry
            return _henon(h, 0.0), jax.jacfwd(lambda u: _henon(u, 0.0))(h) @ z

        @jax.jit
        def used_after(m):  # the selector's choice for a frame pushed m steps from a point on the attractor
            h, _ = jax.lax.fori_loop(0, 200, push, (jnp.array([0.1, 0.1]), jnp.eye(2)))
            _, z = jax.lax.fori_loop(0, m, push, (h, jnp.eye(2)))
            return CholeskyQR().used_cholesky(z)

        used = [bool(used_after(m)) for m in range(1, 13)]
        assert used[:3] == [True] * 3 and used[-3:] == [False] * 3


def test_pivoted_lu_keeps_the_flag_and_bounds_the_frame():
    with jax.enable_x64(True):
        z = jnp.asarray(np.random.default_rng(2).normal(size=(20, 6)))
        frame, log_u = PivotedLU()(z)
        p, lower, upper = scipy.linalg.lu(np.asarray(z))  # an independent LU: z = P L U
        np.testing.assert_allclose(frame, p @ lower, rtol=0, atol=1e-13)
        np.testing.assert_allclose(log_u, np.log(np.abs(np.diag(upper))), rtol=0, atol=1e-13)
        # unit lower trapezoid with |l| <= 1 after the row permutation: vol_j between 1 and N^(j/2)
        assert np.abs(np.asarray(frame)).max() <= 1.0
        r = np.linalg.qr(np.asarray(frame))[1]
        log_vol = np.cumsum(np.log(np.abs(np.diag(r))))
        assert np.all(log_vol >= -1e-12) and np.all(log_vol <= 0.5 * np.arange(1, 7) * np.log(20) + 1e-12)


# --- spectra through the engine --------------------------------------------------------------------


def test_henon_spectrum_with_cholesky_qr_and_fallback():
    xs = np.zeros((10_000, 1))
    options = dict(burn_in=500, x64=True)
    every = lyapunov_spectrum(_henon, np.zeros(2), xs, **options)
    cholesky = lyapunov_spectrum(_henon, np.zeros(2), xs, qr=CholeskyQR(), **options)
    np.testing.assert_allclose(cholesky.exponents.values, every.exponents.values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cholesky.exponents.values, HENON_LAMBDA, rtol=0.01)
    assert abs(cholesky.exponents.values.sum() - math.log(0.3)) < 1e-10
    assert cholesky.attrs["reortho_qr"] == "CholeskyQR()"
    # A QR every 10 steps: the frame's condition is ~1e9, the selector falls back to Householder in
    # most blocks, and the result stays within the bound that blocking itself reports.
    blocked = lyapunov_spectrum(_henon, np.zeros(2), xs, reortho_every=10, qr=CholeskyQR(), **options)
    bound = blocked.attrs["reortho_error_bound"]
    diff = np.abs(blocked.exponents.values - every.exponents.values).max()
    assert diff <= bound and diff < 1e-8, (diff, bound)
    assert abs(blocked.exponents.values.sum() - math.log(0.3)) < 1e-8


@pytest.mark.parametrize("options", [dict(qr=CholeskyQR(passes=1)), dict(reortho_every=6, lu_every=2)],
                         ids=["cholesky-qr-1", "lu-every-2"])
def test_tanh_rnn_sum_equals_mean_log_det_jacobian(options):
    step, params, h0, xs = _rnn_problem()
    burn_in = 100
    with jax.enable_x64(True):  # the truth, in float64, step by step
        jac = jax.jit(jax.jacfwd(lambda h, x: _rnn(params, h, x)))
        h, log_dets = jnp.asarray(h0), []
        for t, x in enumerate(xs):
            if t >= burn_in:
                log_dets.append(np.linalg.slogdet(np.asarray(jac(h, x)))[1])
            h = _rnn(params, h, x)
    ds = lyapunov_spectrum(step, h0, xs, burn_in=burn_in, x64=True, **options)
    assert abs(ds.exponents.values.sum() - np.mean(log_dets)) < 1e-9


def test_lu_inside_blocks_is_exact_on_linear_maps():
    # normal, eigenvalue moduli 1.1, 0.8, 0.6, 0.3 (rotation blocks conjugated by an orthogonal matrix)
    def rotation(r, theta):
        return r * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])

    o, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(7, 7)))
    a = o @ scipy.linalg.block_diag(rotation(1.1, 0.7), rotation(0.8, 2.1), np.array([[-0.6]]),
                                    rotation(0.3, 1.3)) @ o.T
    expected = np.log([1.1, 1.1, 0.8, 0.8, 0.6, 0.3, 0.3])
    ds = lyapunov_spectrum(Partial(_linear, a), np.ones(7), np.zeros((600, 1)), burn_in=300, reortho_every=12,
                           lu_every=3, x64=True)
    np.testing.assert_allclose(ds.exponents.values, expected, rtol=0, atol=1e-10)
    assert ds.attrs["reortho_lu_every"] == 3 and len(ds.time) == 25


def test_auto_uses_lu_in_float64_and_stays_within_its_bound():
    # a chaotic 16-unit RNN, full spectrum (l1 = 0.10, l16 = -5.8): plain blocking stops at m = 2..3
    step, _, h0, xs = _rnn_problem(n=16, steps=600, gain=2.5, drive=0.05, seed=1)
    auto = lyapunov_spectrum(step, h0, xs, burn_in=120, reortho_every="auto", x64=True)
    every = lyapunov_spectrum(step, h0, xs, burn_in=120, x64=True)
    a = auto.attrs
    assert 1 <= a["reortho_lu_every"] < a["reortho_every"] and "pivoted LU" in a["reortho_rule"]
    assert a["reortho_predicted_error"] <= a["reortho_tolerance"]
    diff = np.abs(auto.exponents.values - every.exponents.values).max()
    assert diff <= a["reortho_error_bound"] <= a["reortho_tolerance"], (diff, a["reortho_error_bound"])
    assert every.exponents.values[0] > 0.05  # chaotic, so that the frame matters


def test_lu_every_and_qr_are_validated():
    step, _, h0, xs = _rnn_problem(n=4, steps=50)
    for bad in (dict(lu_every=-1), dict(lu_every=1.5), dict(qr="cholesky")):
        with pytest.raises(ConfigError):
            lyapunov_core(step, jnp.asarray(h0, jnp.float32), jnp.asarray(xs, jnp.float32), **bad)
    with pytest.raises(ConfigError, match="lu_every is chosen"):
        lyapunov_spectrum(step, h0, xs, burn_in=10, reortho_every="auto", lu_every=2)
    with pytest.raises(ConfigError, match="passes"):
        CholeskyQR(passes=3)
