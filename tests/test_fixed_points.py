"""Fixed and slow points (issue 19, item 1), against truths that do not come from the code under test:
the closed-form fixed point (I - A)^{-1} b of an affine map and A's eigenvalues (numpy), the
fixed points of tanh(w h) = h found by scipy.optimize.brentq, the line of fixed points of a map
with one unit eigenvalue (numpy.linalg.eig), and the Lyapunov exponents of the QR code at a
stable fixed point."""

from __future__ import annotations

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from jax.tree_util import Partial

import dynlab
from cli_runner import invoke
from dynlab.analyses.fixed_points import (fixed_points, fixed_points_analysis, fixed_points_summary, minimise_speed,
                                          stability)
from dynlab.errors import ConfigError
from dynlab.analyses.protocol import Drive
from dynlab.analyses.qr_settings import QRSettings


def _affine(a, b, h, x):
    return a @ h + b


def _tanh(w, h, x):
    return jnp.tanh(w @ h)


def _with_eigenvalues(eigenvalues, seed):
    """A = S diag(eigenvalues) S^{-1} with a random, well-conditioned S (non-normal A)."""
    rng = np.random.default_rng(seed)
    s = np.eye(len(eigenvalues)) + 0.3 * rng.normal(size=(len(eigenvalues),) * 2)
    return s @ np.diag(eigenvalues) @ np.linalg.inv(s), s


def _sorted(eig):
    eig = np.asarray(eig)
    return eig[np.lexsort((-eig.imag, -np.abs(eig)))]


@pytest.mark.parametrize("eigenvalues, expected", [
    ((0.9, -0.7, 0.5, 0.2, -0.1), "stable"),
    ((1.8, -1.3, 0.6, 0.3, -0.2), "saddle"),
])
def test_affine_map_has_the_closed_form_fixed_point(eigenvalues, expected):
    """h -> A h + b has the single fixed point (I - A)^{-1} b, with A's eigenvalues.

    q is a convex quadratic with this unique minimiser, so BFGS in float64 reaches it to about
    cond(I - A) * eps ~ 1e-14; the issue's 1e-6 leaves a wide margin without being loose enough
    to accept a wrong point (the initial states are O(1) away).
    """
    a, _ = _with_eigenvalues(eigenvalues, seed=1)
    b = np.random.default_rng(2).normal(size=len(eigenvalues))
    truth = np.linalg.solve(np.eye(len(b)) - a, b)
    with jax.enable_x64(True):
        h0s = jax.random.normal(jax.random.key(0), (32, len(b)), jnp.float64)
        ds = fixed_points(Partial(_affine, jnp.asarray(a), jnp.asarray(b)), h0s, None, q_tol=1e-20)
    assert ds.sizes["point"] == 1 and int(ds.basin_count[0]) == 32
    np.testing.assert_allclose(ds.points.values[0], truth, atol=1e-6)
    found = ds.eig_real.values[0] + 1j * ds.eig_imag.values[0]
    np.testing.assert_allclose(found, _sorted(np.linalg.eigvals(a)), atol=1e-6)
    assert str(ds.stability.values[0]) == expected
    assert int(ds.n_unstable[0]) == sum(abs(e) > 1 for e in eigenvalues)
    assert bool(ds.is_fixed[0])
    with jax.enable_x64(True):  # chunks of the batch minimise the same way as the whole batch
        step = Partial(_affine, jnp.asarray(a), jnp.asarray(b))
        whole = minimise_speed(step, h0s, None, batch_size=None)
        chunked = minimise_speed(step, h0s, None, batch_size=5)
    np.testing.assert_allclose(chunked.points, whole.points, rtol=0, atol=1e-12)


def test_two_neuron_tanh_network_has_all_nine_fixed_points():
    """h -> tanh(w h) per neuron, w = 1.5: 0 (|tanh'| = w > 1, unstable) and +-h* with
    tanh(w h*) = h* (|mu| = w (1 - h*^2) < 1, stable), so 3 x 3 = 9 fixed points: the origin
    unstable, four saddles, four stable nodes. h* comes from scipy's brentq."""
    w = 1.5
    h_star = scipy.optimize.brentq(lambda h: np.tanh(w * h) - h, 0.1, 1.0, xtol=1e-15)
    truth = np.array(list(itertools.product((-h_star, 0.0, h_star), repeat=2)))
    with jax.enable_x64(True):
        h0s = jax.random.uniform(jax.random.key(3), (200, 2), jnp.float64, minval=-1.2, maxval=1.2)
        ds = fixed_points(Partial(_tanh, w * jnp.eye(2)), h0s, None, q_tol=1e-20)
    points = ds.points.values
    assert ds.sizes["point"] == 9, points
    for p, cls, n_unstable, mu in zip(points, ds.stability.values, ds.n_unstable.values, ds.eig_abs.values):
        distance = np.linalg.norm(truth - p, axis=1)
        assert distance.min() < 1e-8  # rounding of q ~ 1e-20 -> |h - h*| ~ 1e-10
        t = truth[np.argmin(distance)]
        slopes = w * (1 - t**2)  # the Jacobian is diag(w (1 - h*^2))
        np.testing.assert_allclose(mu, np.sort(np.abs(slopes))[::-1], atol=1e-8)
        unstable = int(np.sum(slopes > 1))
        assert n_unstable == unstable
        assert str(cls) == {0: "stable", 1: "saddle", 2: "unstable"}[unstable]


def test_line_attractor_gives_a_line_of_points():
    """A map with one eigenvalue exactly 1 (eigenvector v) and the rest inside the unit circle
    has every point of span(v) as a fixed point. Minimisations from scattered initial states end
    at many distinct points of that line (numpy's eigenvector, not the code, says where it is),
    each marginal with one |mu| = 1."""
    a, s = _with_eigenvalues((1.0, 0.6, -0.4, 0.2), seed=4)
    v = s[:, 0] / np.linalg.norm(s[:, 0])
    with jax.enable_x64(True):
        h0s = 2.0 * jax.random.normal(jax.random.key(5), (48, 4), jnp.float64)
        ds = fixed_points(Partial(_affine, jnp.asarray(a), jnp.zeros(4)), h0s, None, q_tol=1e-20)
    points = ds.points.values
    off_line = points - np.outer(points @ v, v)
    assert np.abs(off_line).max() < 1e-8
    assert ds.sizes["point"] >= 40  # a continuum: (almost) every minimisation ends somewhere else
    along = points @ v
    assert along.max() - along.min() > 2.0
    assert set(ds.stability.values.astype(str)) == {"marginal"}
    assert np.all(ds.n_marginal.values == 1)
    np.testing.assert_allclose(ds.eig_abs.values[:, 0], 1.0, atol=1e-10)


def test_stability_classes_by_modulus():
    mu = np.array([[0.5, 0.2], [1.0005, 0.3], [1.5, 0.3], [1.5, 1.2], [1.5, 1.0]])
    out = stability(mu, marginal_tol=1e-3)
    assert list(out["stability"]) == ["stable", "marginal", "saddle", "unstable", "unstable"]
    assert list(out["n_unstable"]) == [0, 0, 1, 2, 1]


def _symmetric_rnn(hidden: int = 6):
    """A fresh tanh RNN whose recurrent matrix is made symmetric, so that its Jacobians
    diag(1 - h^2) W (similar to a symmetric matrix) have real eigenvalues of distinct moduli and
    the QR method's exponents converge one by one, not only as sums over complex pairs."""
    model = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(7), hidden=hidden)
    g = np.random.default_rng(8).normal(size=(hidden, hidden))
    w = 0.45 * (g + g.T) / np.sqrt(2 * hidden)  # semicircle radius ~0.9: one stable fixed point
    return eqx.tree_at(lambda m: m.cells[0].w_hh, model, jnp.asarray(w, jnp.float32))


def test_fixed_point_eigenvalues_are_the_lyapunov_exponents():
    """Under a constant drive the network settles to a stable fixed point h*, so its Lyapunov
    exponents (the existing QR code, float64) are ln|mu_i(J(h*))|. Both converge exponentially
    (the QR frame aligns at the rate of the gaps between exponents, ~0.1 per step here, over the
    500-step burn-in), so 1e-4 leaves room only for the 1/T residue of the QR average."""
    from dynlab.analyses.lyapunov import lyapunov_analysis

    model = _symmetric_rnn()
    fp = fixed_points_analysis(model, input=Drive(0.4), steps=300, burn_in=100, ics=8)
    stable = np.flatnonzero(fp.stability.values.astype(str) == "stable")
    assert stable.size == 1, fixed_points_summary(fp)
    log_mu = np.log(fp.eig_abs.values[stable[0]])
    ly = lyapunov_analysis(model, qr=QRSettings(k=6, reortho_every=1), steps=2500, burn_in=500, input=Drive(0.4),
                           realisations=2, ics=1, x64=True)
    np.testing.assert_allclose(np.sort(ly["mean"].values), np.sort(log_mu), atol=1e-4)


def test_bad_options_are_one_line_config_errors():
    model = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(0), hidden=4)
    for options, match in [
        (dict(steps=0), "no trajectory"),
        (dict(steps=50, burn_in=10, ics=41), "cannot be drawn"),
        (dict(steps=50, burn_in=10, ics=4, q_tol=1e-3, q_max=1e-6), "q_max"),
        (dict(steps=50, burn_in=10, ics=4, at="mean"), "at must be"),
    ]:
        with pytest.raises(ConfigError, match=match) as error:
            fixed_points_analysis(model, **options)
        assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="initial states"):
        fixed_points(Partial(_tanh, jnp.eye(2)), jnp.zeros((0, 2)))


def test_cli_help_run_and_plot(tmp_path):
    helped = invoke(["analyze", "fixed-points", "--model", "rnn", "--help"], tmp_path)
    assert helped.exit_code == 0 and "--q-tol" in helped.output and "--ics" in helped.output, helped.output
    nc = tmp_path / "fp.nc"
    ran = invoke(["analyze", "fixed-points", "--model", "rnn", "--set", "model.hidden=4", "--steps", "60",
                  "--burn-in", "10", "--ics", "6", "--drive", "0.3", "--out", str(nc), "-q"], tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "fixed-points:" in ran.output and nc.is_file() and nc.with_suffix(".png").is_file()
    png = tmp_path / "again.png"
    plotted = invoke(["plot", str(nc), "--out", str(png)], tmp_path)
    assert plotted.exit_code == 0 and png.is_file(), plotted.output
    bad = invoke(["analyze", "fixed-points", "--model", "rnn", "--steps", "0", "--out", str(tmp_path / "x.nc")], tmp_path)
    assert bad.exit_code == 2 and "--steps" in bad.output, bad.output
