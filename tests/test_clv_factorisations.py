"""The forward pass of the CLV core with the factorisations of dynlab.analyses.lyapunov.factorisations:
CholeskyQR (one or two passes) gives the CLVs, growth rates and angles of the Householder QR (LAPACK), a
selector that refuses every frame gives Householder's numbers to the bit, and the windows (frames
recomputed from checkpoints, only R and the snapshots stored) give what one window over the run gives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

from dynlab.analyses.clv import clv_core
from dynlab.analyses.lyapunov.factorisations import CholeskyQR, Householder


def _rnn(params, h, x):
    w, u, b = params
    return jnp.tanh(w @ h + u @ x + b)


def _run(qr, window=50, n=10, gain=2.5):
    """A chaotic driven 10-unit RNN (lambda_1 = 0.06), all 10 CLVs, with a read-out, in float64. Windows of
    50 steps, as long as the forward transient: one compilation of each part."""
    rng = np.random.default_rng(4)
    params = tuple(jnp.asarray(a) for a in (rng.normal(size=(n, n)) * gain / np.sqrt(n), rng.normal(size=(n, 2)) * 0.2,
                                            0.1 * rng.normal(size=n)))
    tf, steps, tb = 50, 200, 150
    xs = rng.normal(size=(tf + steps + tb, 2))
    with jax.enable_x64(True):
        return clv_core(Partial(_rnn, params), jnp.asarray(rng.normal(size=n)), jnp.asarray(xs), n, window=window,
                        transient_forward=tf, transient_backward=tb, snapshots=5, readout=rng.normal(size=(2, n)), qr=qr)


@pytest.fixture(scope="module")
def householder():
    return _run(Householder())


@pytest.mark.parametrize("qr", [None, CholeskyQR()], ids=["default-one-pass", "two-pass"])
def test_cholesky_forward_pass_gives_householders_clvs(householder, qr):
    # One pass leaves Q orthonormal to about kappa^2 u (the selector bounds kappa from below only, by the
    # spread of R's diagonal, so about sqrt(u) = 1.5e-8): per-step values of the last vectors move by up
    # to 4e-8 here, at steps contracting by e^-7, and back at the next step (the non-orthogonality is a
    # boundary term), so time averages agree to rounding; two passes are orthonormal to ~u.
    atol = 1e-7 if qr is None else 1e-9
    result = _run(qr)
    assert not result.diverged
    np.testing.assert_allclose(result.growth, householder.growth, rtol=0, atol=atol)
    np.testing.assert_allclose(result.qr_growth, householder.qr_growth, rtol=0, atol=atol)
    np.testing.assert_allclose(result.angle_pairs, householder.angle_pairs, rtol=0, atol=atol)
    np.testing.assert_allclose(result.angle_rest, householder.angle_rest, rtol=0, atol=atol)
    np.testing.assert_allclose(result.readout_angle, householder.readout_angle, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.abs(result.clv), np.abs(householder.clv), rtol=0, atol=atol)
    np.testing.assert_allclose(result.gram_schmidt, householder.gram_schmidt, rtol=0, atol=atol)
    for name in ("growth", "qr_growth"):  # the exponents over the stretch
        np.testing.assert_allclose(getattr(result, name).mean(axis=0), getattr(householder, name).mean(axis=0),
                                   rtol=0, atol=1e-11, err_msg=name)


def test_a_refusing_selector_is_householder_to_the_bit(householder):
    result = _run(CholeskyQR(passes=1, max_condition=1.0))  # every frame has a diagonal spread > 1
    for name in ("growth", "qr_growth", "angle_rest", "angle_pairs", "readout_angle", "clv", "gram_schmidt"):
        np.testing.assert_array_equal(getattr(result, name), getattr(householder, name), err_msg=name)


def test_windows_give_what_one_window_gives(householder):
    whole = _run(Householder(), window=350)
    for name in ("growth", "angle_rest", "readout_angle", "clv", "gram_schmidt"):
        np.testing.assert_allclose(getattr(whole, name), getattr(householder, name), rtol=0, atol=1e-12,
                                   err_msg=name)
    np.testing.assert_array_equal(whole.snapshot_times, householder.snapshot_times)
