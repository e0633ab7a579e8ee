"""Spectra of weights, state Jacobians and activity covariance against known truths.

Every expected value is built here independently of `dynlab.analyses.spectra`: closed-form
eigenvalues of rotation-scaling blocks, `numpy.linalg` on explicit matrices, the closed-form
Jacobian of tanh(W h + U x + b), and activity sampled with a prescribed covariance spectrum.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

from dynlab.analyses.spectra import (
    covariance_spectrum,
    jacobian_spectra,
    power_law_exponent,
    truncated_power_law_fit,
    weight_eigenvalues,
)


def rotation(theta):
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


def random_orthogonal(n, rng):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def sorted_eigs(matrix):
    """Reference order: modulus descending, then imaginary part descending."""
    mu = np.linalg.eigvals(matrix)
    return mu[np.lexsort((-mu.imag, -np.round(np.abs(mu), 9)))]


# ---------------------------------------------------------------------------------------------
# Weight eigenvalues
# ---------------------------------------------------------------------------------------------


def test_rotation_scaling_blocks_have_known_eigenvalues():
    r1, t1, r2, t2, d = 1.3, 0.4, 0.7, 2.0, -0.2
    w = np.zeros((5, 5))
    w[:2, :2] = r1 * rotation(t1)
    w[2:4, 2:4] = r2 * rotation(t2)
    w[4, 4] = d
    # Hide the block structure behind a similarity transform (eigenvalues unchanged).
    p = np.random.default_rng(0).standard_normal((5, 5)) + 3 * np.eye(5)
    ds = weight_eigenvalues({"layer0": p @ w @ np.linalg.inv(p)})

    expected = np.array([r1 * np.exp(1j * t1), r1 * np.exp(-1j * t1),
                         r2 * np.exp(1j * t2), r2 * np.exp(-1j * t2), d])  # fmt: skip
    got = ds.eig_real.sel(matrix="layer0").values + 1j * ds.eig_imag.sel(matrix="layer0").values
    np.testing.assert_allclose(got, expected, atol=1e-10)
    modulus = ds.eig_modulus.sel(matrix="layer0")
    np.testing.assert_allclose(modulus, [r1, r1, r2, r2, -d], atol=1e-10)
    assert float(ds.spectral_radius.sel(matrix="layer0")) == pytest.approx(r1, abs=1e-10)
    assert ds.eig_modulus.dims == ("matrix", "eigenvalue")
    assert list(ds.eigenvalue.values) == [1, 2, 3, 4, 5]
    assert ds.attrs["analysis"] == "weight_eigenvalues"


def test_orthogonal_matrix_has_unit_moduli():
    q = random_orthogonal(16, np.random.default_rng(1))
    ds = weight_eigenvalues({"W_hh": jnp.asarray(q, jnp.float32)})
    np.testing.assert_allclose(ds.eig_modulus.values, 1.0, atol=1e-5)
    assert float(ds.spectral_radius.squeeze()) == pytest.approx(1.0, abs=1e-5)


def test_diagonal_vector_is_a_diagonal_recurrence_and_sizes_are_padded():
    w = np.array([0.5, -0.9, 0.2])
    ds = weight_eigenvalues({"diag": w, "dense": np.diag([0.1, 2.0, 0.3, -0.4, 0.0])})
    diag = ds.sel(matrix="diag")
    np.testing.assert_allclose(diag.eig_real[:3], [-0.9, 0.5, 0.2])
    np.testing.assert_allclose(diag.eig_imag[:3], 0.0)
    np.testing.assert_allclose(diag.eig_modulus[:3], [0.9, 0.5, 0.2])
    assert np.isnan(diag.eig_modulus[3:]).all()
    assert diag.eig_modulus.dropna("eigenvalue").size == 3
    np.testing.assert_allclose(ds.eig_modulus.sel(matrix="dense"), [2.0, 0.4, 0.3, 0.1, 0.0])
    assert ds["n_eigenvalues"].values.tolist() == [3, 5]
    np.testing.assert_allclose(ds.spectral_radius, [0.9, 2.0])


@pytest.mark.parametrize("bad", [{}, {"w": np.ones((2, 3))}, {"w": np.ones((2, 2, 2))}])
def test_weight_eigenvalues_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        weight_eigenvalues(bad)


# ---------------------------------------------------------------------------------------------
# Jacobian spectra
# ---------------------------------------------------------------------------------------------


def test_linear_map_jacobian_spectrum_is_that_of_the_matrix():
    rng = np.random.default_rng(2)
    n, steps, every = 6, 11, 3
    a = rng.standard_normal((n, n)) / np.sqrt(n)
    a_j = jnp.asarray(a, jnp.float32)
    ds = jacobian_spectra(
        lambda h, x: a_j @ h + x, rng.standard_normal(n), jnp.zeros((steps, n)), every=every
    )

    assert ds.time.values.tolist() == [0, 3, 6, 9]
    a32 = np.asarray(a_j, np.float64)  # the matrix the map actually applies
    mu = sorted_eigs(a32)
    for t in ds.time.values:
        got = ds.eig_real.sel(time=t).values + 1j * ds.eig_imag.sel(time=t).values
        np.testing.assert_allclose(got, mu, atol=1e-6)
        np.testing.assert_allclose(ds.eig_modulus.sel(time=t), np.abs(mu), atol=1e-6)
    np.testing.assert_allclose(
        ds.singular_values, np.broadcast_to(np.linalg.svd(a32, compute_uv=False), (4, n)), atol=1e-6
    )
    np.testing.assert_allclose(ds.spectral_radius, np.abs(mu[0]), atol=1e-6)
    assert ds.eig_real.dims == ("time", "eigenvalue")
    assert ds.singular_values.dims == ("time", "singular_value")
    assert ds.attrs["analysis"] == "jacobian_spectra"
    assert ds.attrs["n_nonfinite"] == 0


def test_tanh_rnn_jacobian_matches_closed_form_with_pytree_inputs():
    rng = np.random.default_rng(3)
    n, d, steps, t_check = 8, 3, 12, 7
    w = 1.5 * rng.standard_normal((n, n)) / np.sqrt(n)
    u = rng.standard_normal((n, d))
    xs = rng.standard_normal((steps, d))
    bs = 0.1 * rng.standard_normal((steps, n))
    h0 = 0.5 * rng.standard_normal(n)

    def step(h, inp):
        x, b = inp
        return jnp.tanh(w @ h + u @ x + b)

    ds = jacobian_spectra(step, h0, (xs, bs), x64=True)

    h = h0
    for t in range(t_check + 1):  # reference trajectory in numpy
        h_prev, h = h, np.tanh(w @ h + u @ xs[t] + bs[t])
    jac = (1.0 - h**2)[:, None] * w  # diag(1 - h_{t+1}^2) W at t = t_check
    mu = sorted_eigs(jac)
    got = ds.eig_real.sel(time=t_check).values + 1j * ds.eig_imag.sel(time=t_check).values
    np.testing.assert_allclose(got, mu, atol=1e-10)
    np.testing.assert_allclose(
        ds.singular_values.sel(time=t_check), np.linalg.svd(jac, compute_uv=False), atol=1e-10
    )
    assert ds.sizes == {"time": steps, "eigenvalue": n, "singular_value": n}
    assert ds.attrs["dtype"] == "float64"


def test_jacobian_spectra_rejects_bad_input():
    step = lambda h, x: h  # noqa: E731
    with pytest.raises(ValueError, match="every"):
        jacobian_spectra(step, jnp.zeros(3), jnp.zeros((5, 1)), every=0)
    with pytest.raises(ValueError, match="h0"):
        jacobian_spectra(step, jnp.zeros((3, 3)), jnp.zeros((5, 1)))
    with pytest.raises(ValueError, match="shape of h0"):
        jacobian_spectra(lambda h, x: h[:2], jnp.zeros(3), jnp.zeros((5, 1)))


# ---------------------------------------------------------------------------------------------
# Power-law fits and the covariance spectrum
# ---------------------------------------------------------------------------------------------


def sample_activity(spectrum, samples, seed):
    """Gaussian activity whose covariance is Q diag(spectrum) Q^T for a random orthogonal Q."""
    rng = np.random.default_rng(seed)
    q = random_orthogonal(spectrum.size, rng)
    return (rng.standard_normal((samples, spectrum.size)) * np.sqrt(spectrum)) @ q.T + 3.0


def test_fits_are_exact_on_exact_spectra():
    ranks = np.arange(1, 41)
    exact = power_law_exponent(2.5 * ranks**-1.7, ranks)
    assert float(exact.alpha) == pytest.approx(1.7, abs=1e-12)
    assert float(exact.amplitude) == pytest.approx(2.5, rel=1e-12)
    assert float(exact.r2) == pytest.approx(1.0, abs=1e-12)

    truncated = truncated_power_law_fit(0.8 * ranks**-0.6 * np.exp(-ranks / 12.0), ranks)
    assert float(truncated.alpha) == pytest.approx(0.6, abs=1e-9)
    assert float(truncated.n_c) == pytest.approx(12.0, rel=1e-9)
    assert float(truncated.amplitude) == pytest.approx(0.8, rel=1e-9)

    # A spectrum that bends upwards has no cut-off: the fit falls back to the power law.
    upward = truncated_power_law_fit(ranks**-1.0 * np.exp(ranks / 30.0), ranks)
    assert np.isinf(upward.n_c)

    # Batched: one fit per row; a row with a zero eigenvalue has no log and gives NaN.
    batch = np.stack([ranks**-1.0, ranks**-2.0, np.where(ranks < 40, ranks**-1.0, 0.0)])
    np.testing.assert_allclose(power_law_exponent(batch, ranks).alpha, [1.0, 2.0, np.nan])


@pytest.mark.parametrize("alpha", [1.0, 2.0])
def test_power_law_exponent_and_bootstrap_interval_recover_truth(alpha):
    n = 100
    spectrum = np.arange(1, n + 1) ** -alpha
    activity = sample_activity(spectrum, 20_000, seed=int(10 * alpha))
    ds = covariance_spectrum(activity, n_boot=100, seed=1)

    assert float(ds.alpha) == pytest.approx(alpha, abs=0.05)
    assert float(ds.alpha_ci_low) <= alpha <= float(ds.alpha_ci_high)
    assert float(ds.alpha_ci_high) - float(ds.alpha_ci_low) < 0.1
    assert float(ds.power_law_r2) > 0.99
    assert (ds.attrs["fit_rank_min"], ds.attrs["fit_rank_max"]) == (1, 50)
    assert int(ds.in_fit_range.sum()) == 50
    assert ds.attrs["n_boot_valid"] == 100 == ds.sizes["bootstrap"]
    assert float(ds.explained_variance_ratio.sum()) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(ds.eigenvalue[:5], spectrum[:5], rtol=0.05)
    assert np.all(np.diff(ds.eigenvalue.values) <= 0)
    assert ds.eigenvalue.dims == ("rank",) and ds["rank"].values[0] == 1
    assert ds.alpha.attrs["long_name"] and ds.eigenvalue.attrs["units"]
    assert ds.attrs["analysis"] == "covariance_spectrum"


def test_truncated_fit_recovers_cutoff_and_trials_are_pooled(tmp_path):
    n, n_c = 100, 25.0
    ranks = np.arange(1, n + 1)
    activity = sample_activity(ranks**-0.8 * np.exp(-ranks / n_c), 20_000, seed=4)
    ds = covariance_spectrum(activity.reshape(4, 5_000, n), n_boot=50, block_size=10)

    assert float(ds.truncated_n_c) == pytest.approx(n_c, rel=0.15)
    assert float(ds.truncated_alpha) == pytest.approx(0.8, abs=0.1)
    assert float(ds.truncated_r2) > float(ds.power_law_r2)
    assert ds.attrs["n_trials"] == 4 and ds.attrs["n_samples"] == 20_000
    assert float(ds.explained_variance_ratio.sum()) == pytest.approx(1.0, abs=1e-12)

    path = tmp_path / "spectrum.nc"
    ds.to_netcdf(path, engine="h5netcdf")
    with xr.open_dataset(path, engine="h5netcdf") as back:
        np.testing.assert_allclose(back.eigenvalue, ds.eigenvalue)


def test_rank_deficient_covariance_fits_only_meaningful_eigenvalues():
    rng = np.random.default_rng(5)
    samples, n = 30, 100
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ds = covariance_spectrum(rng.standard_normal((samples, n)), n_boot=50)

    # 30 centred samples span at most 29 dimensions; the default fit uses at most half of them,
    # and (issue 22) at most 0.7 sqrt(M_eff) ranks, beyond which eigenvalue bias outgrows the error.
    assert ds.attrs["rank_limit"] == samples - 1
    assert np.all(ds.eigenvalue[: samples - 1] > 0)
    assert np.all(ds.eigenvalue[samples - 1 :] == 0)
    expected = min((samples - 1) // 2, max(3, int(0.7 * np.sqrt(ds.attrs["effective_samples"]))))
    assert ds.attrs["fit_rank_max"] == expected <= (samples - 1) // 2
    assert np.isfinite([float(ds.alpha), float(ds.alpha_ci_low), float(ds.alpha_ci_high)]).all()
    assert ds.attrs["n_boot_valid"] == 50
    assert float(ds.explained_variance_ratio.sum()) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ValueError, match="zero eigenvalues"):
        covariance_spectrum(rng.standard_normal((samples, n)), fit_range=(1, 50), n_boot=0)


@pytest.mark.parametrize(
    "kwargs",
    [{"fit_range": (1, 2)}, {"fit_range": (0, 10)}, {"n_boot": -1}, {"confidence": 1.5}],
)
def test_covariance_spectrum_rejects_bad_options(kwargs):
    with pytest.raises(ValueError):
        covariance_spectrum(np.random.default_rng(6).standard_normal((200, 20)), **kwargs)


def test_alpha_interval_covers_at_short_correlated_recordings():
    """Issue 38 item 7, cut down: AR(1) rows rho = 0.9, M = 500 (M_eff ~ 30, 3-5 ranks fitted),
    120 recordings with eigenvalues n^-1: the default interval covers alpha = 1 in 0.88-0.99 of them
    (3 binomial sd around 0.95 at 120; the half-sample interval without its widening covered
    0.805-0.84, with it 0.93-0.95 over 200). ``benchmarks/coverage_spectra.py`` runs the full table. In a
    child process with single-threaded BLAS (see tests/test_coverage.py)."""
    import os
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(__file__).parents[1] / "benchmarks" / "coverage_spectra.py"
    code = (f"import runpy, json; c = runpy.run_path({str(script)!r})['coverage'](500, 0.9, 120, 7); "
            "print(json.dumps(c))")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         cwd=pathlib.Path(script).parent)
    assert out.returncode == 0, out.stderr
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert 0.88 <= result["coverage"] <= 0.99, result
    assert result["ranks"][0] >= 3 and result["ranks"][1] <= 6, result  # few ranks: the short-recording regime
