"""Dynamical similarity analysis (issue 19, item 3), against truths that do not come from the code
under test: a hidden orthogonal conjugation (distance 0), the Hoffman-Wielandt theorem (for
symmetric matrices the minimum over O(r) of |A - C B C^T|_F aligns the sorted eigenvalues), the
invariance of DSA under an orthogonal change of the data's coordinates (linear systems, and an RNN
whose neurons are re-labelled and sign-flipped, which tanh commutes with), and distinct spectra."""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import xarray as xr

import dynlab
from cli_runner import invoke
from dynlab import experiment, store
from dynlab.analyses.dsa import delay_embed, dsa_distances, dsa_models, havok_dmd, procrustes_vector_fields
from dynlab.errors import ConfigError


def _haar(rng, r, det=1.0):
    q, rr = np.linalg.qr(rng.standard_normal((r, r)))
    q = q * np.sign(np.diag(rr))
    if np.sign(np.linalg.det(q)) != det:
        q[:, 0] = -q[:, 0]
    return q


def _hoffman_wielandt(a, b):
    """The exact angular distance of two symmetric matrices: their unit-norm sorted spectra aligned."""
    la = np.sort(np.linalg.eigvalsh(a / np.linalg.norm(a)))
    lb = np.sort(np.linalg.eigvalsh(b / np.linalg.norm(b)))
    return 2 * np.arcsin(np.linalg.norm(la - lb) / 2)


@pytest.mark.parametrize("start", ["spectral", "random"])
def test_alignment_recovers_a_hidden_orthogonal_conjugation(start):
    """B = Q^T A Q for Haar-random Q of either determinant: the distance is 0 and C B C^T = A, from
    the default starts (the spectral one finds Q) and, for the Riemannian descent alone, from two
    starts far from Q (Q exp(K), K a random skew matrix of norm 1.5: C B C^T is then 20-90 degrees
    from A)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 6, 6))
    qs = [_haar(rng, 6, (-1.0) ** i) for i in range(6)]
    b = np.stack([q.T @ m @ q for q, m in zip(qs, a)])
    starts = None
    if start == "random":
        k = rng.standard_normal((6, 2, 6, 6))
        k = k - np.swapaxes(k, 2, 3)
        k *= 1.5 / np.linalg.norm(k, axis=(2, 3), keepdims=True)
        # C = Q maps B back onto A; start away from it
        starts = np.stack([[q @ scipy.linalg.expm(kk) for kk in ks] for q, ks in zip(qs, k)])
        far = [np.degrees(2 * np.arcsin(np.linalg.norm(m / np.linalg.norm(m) - c @ (bb / np.linalg.norm(bb)) @ c.T) / 2))
               for m, bb, cs in zip(a, b, starts) for c in cs]
        assert min(far) > 20
    res = procrustes_vector_fields(a, b, tol=1e-9, starts=starts)
    assert np.all(res.angle < 1e-7), res.angle
    aligned = res.rotation @ b @ np.swapaxes(res.rotation, 1, 2)
    np.testing.assert_allclose(aligned, a, atol=1e-6 * np.abs(a).max())
    assert np.all(res.orthogonality < 1e-10)
    assert np.all(res.gradient_norm <= 1e-9)  # converged


def test_distance_matrix_of_symmetric_matrices_is_the_hoffman_wielandt_value():
    """Every entry, computed in both orders, equals the closed form: so the matrix is symmetric
    because the optimiser finds the true minimum, and its diagonal is 0."""
    rng = np.random.default_rng(1)
    ops = rng.standard_normal((3, 6, 6))
    ops = ops + np.swapaxes(ops, 1, 2)
    d = dsa_distances(ops)
    exact = np.array([[_hoffman_wielandt(x, y) for y in ops] for x in ops])
    np.testing.assert_allclose(d.angle, exact, atol=1e-8)
    assert np.all(np.diag(d.angle) == 0) and np.array_equal(d.angle, d.angle.T)
    assert d.asymmetry.max() < 1e-8
    assert exact[~np.eye(3, dtype=bool)].min() > 0.1  # the truth is not trivially 0


def _linear_system(blocks, rng, trials=6, steps=150, noise=0.05):
    """x_{t+1} = M x_t + noise with M made of 2x2 rotation-decay blocks (omega, rho), mixed by an orthogonal P."""
    n = 2 * len(blocks)
    m = np.zeros((n, n))
    for i, (omega, rho) in enumerate(blocks):
        c, s = np.cos(omega), np.sin(omega)
        m[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = rho * np.array([[c, -s], [s, c]])
    p = _haar(rng, n)
    m = p @ m @ p.T
    x = np.zeros((trials, steps, n))
    x[:, 0] = rng.standard_normal((trials, n))
    for t in range(1, steps):
        x[:, t] = x[:, t - 1] @ m.T + noise * rng.standard_normal((trials, n))
    return x


def test_orthogonal_change_of_coordinates_gives_zero_distance_and_other_spectra_do_not():
    """The issue's acceptance: one system seen through a random orthogonal change of coordinates is
    at distance ~0 (< 1e-3 relative: |A - C B C^T| / |A| = 2 sin(theta / 2)); systems with other
    eigenvalues are clearly farther, and farther than the same system observed on other noise."""
    rng = np.random.default_rng(2)
    spectrum = [(0.3, 0.95), (0.8, 0.9), (1.6, 0.8)]
    x = _linear_system(spectrum, rng)
    q = _haar(rng, 6, -1.0)
    other_noise = _linear_system(spectrum, np.random.default_rng(3))
    other = _linear_system([(0.15, 0.7), (1.2, 0.97), (2.4, 0.85)], rng)
    ops = np.stack([havok_dmd(y, n_delays=2, rank=6).operator for y in (x, x @ q.T, other_noise, other)])
    i, j = np.array([(0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]).T
    d = dict(zip(zip(i, j), procrustes_vector_fields(ops[i], ops[j]).angle))
    assert 2 * np.sin(d[0, 1] / 2) < 1e-3
    assert d[0, 1] < 1e-9  # in fact rounding: the operators agree once the SVD's signs are fixed
    assert d[0, 3] > 0.3 and d[1, 3] > 0.3 and d[2, 3] > 0.3
    assert d[0, 3] > 4 * d[0, 2]  # beyond the spread of estimates of one system


def test_delay_embedding_rows_are_most_recent_first():
    x = np.arange(12.0).reshape(6, 2)  # x_t = (2t, 2t + 1)
    h = delay_embed(x, 3, interval=2)
    np.testing.assert_array_equal(h, [[8, 9, 4, 5, 0, 1], [10, 11, 6, 7, 2, 3]])


def _permuted_copy(model, perm, signs):
    """The same RNN with its neurons re-labelled and sign-flipped, h' = P h (P a signed permutation):
    tanh(P a) = P tanh(a), so its states are exactly P times the original's."""
    p = np.eye(len(perm))[perm] * signs[:, None]
    p = jnp.asarray(p, jnp.float32)
    cell = model.cells[0]
    cell = eqx.tree_at(lambda c: (c.w_hh, c.w_xh, c.b_h), cell, (p @ cell.w_hh @ p.T, p @ cell.w_xh, p @ cell.b_h))
    model = eqx.tree_at(lambda m: m.cells, model, (cell,))
    return eqx.tree_at(lambda m: m.readout.weight, model, model.readout.weight @ p.T)


def test_dsa_of_models_is_invariant_to_relabelling_neurons():
    """Through the model glue (trajectories, PCA, HAVOK, alignment): a trained-looking RNN and its
    signed-permutation copy are at distance ~0; an RNN with other weights is not."""
    build = lambda seed: dynlab.build("model", unit="rnn", input_size=2, output_size=1,  # noqa: E731
                                      key=jax.random.key(seed), hidden=6)
    rng = np.random.default_rng(4)
    base = build(0)
    copy = _permuted_copy(base, rng.permutation(6), rng.choice([-1.0, 1.0], 6))
    xs = jax.random.normal(jax.random.key(5), (6, 60, 2))
    ds = dsa_models([base, copy, build(1)], xs, labels=["a", "a'", "b"], n_delays=3, rank=6, pcs=6,
                    iterations=1000, restarts=4)
    d = ds["distance"].values
    assert d[0, 1] < 1e-3, d
    assert d[0, 2] > 50 * max(d[0, 1], 1e-4)
    assert np.array_equal(d, d.T) and np.all(np.diag(d) == 0)
    assert ds.attrs["analysis"] == "dsa" and list(ds["run"].values) == ["a", "a'", "b"]


def test_bad_options_are_one_line_config_errors():
    x = np.zeros((2, 10, 3))
    x[..., 0] = np.arange(10)
    for call, match in [
        (lambda: delay_embed(x, 10), "too short for 10 delays"),
        (lambda: havok_dmd(x, n_delays=2, rank=5), "exceeds the rank"),
        (lambda: procrustes_vector_fields(np.eye(3), np.eye(3), restarts=0), "restarts"),
        (lambda: procrustes_vector_fields(np.zeros((3, 3)), np.eye(3)), "is zero"),
        (lambda: dsa_distances(np.eye(3)[None]), "at least 2"),
    ]:
        with pytest.raises(ConfigError, match=match) as error:
            call()
        assert "\n" not in str(error.value)


def _run_dir(path: Path, unit: str, task: dict, seed: int) -> Path:
    cfg = experiment.default_config(unit, task["name"], seed=seed)
    cfg["task"].update(task)
    cfg["model"]["hidden"] = 4
    exp = experiment.build(cfg)
    store.claim_run_dir(path)
    store.write_config(path, exp.config)
    store.save_model(path, exp.model)
    return path


def test_cli_distance_matrix_over_run_directories_and_incomparable_runs(tmp_path):
    adding = {"name": "adding", "length": 20}
    a = _run_dir(tmp_path / "runs" / "a", "rnn", adding, 0)
    b = _run_dir(tmp_path / "runs" / "b", "gru", adding, 1)
    _run_dir(tmp_path / "runs" / "c", "rnn", adding, 2)
    r = _run_dir(tmp_path / "other" / "r", "rnn", {"name": "recall"}, 0)
    small = ["--trials", "4", "--delays", "3", "--rank", "6", "--pcs", "4", "--iterations", "500", "-q"]
    nc = tmp_path / "dsa.nc"
    ran = invoke(["analyze", "dsa", "--runs", str(tmp_path / "runs"), "--out", str(nc), *small], tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "a vs b" in ran.output and "a vs c" in ran.output  # labels: the directories' names
    assert nc.is_file() and nc.with_suffix(".png").is_file()
    ds = xr.load_dataset(nc)
    d = ds["distance"].values
    assert np.array_equal(d, d.T) and np.all(np.diag(d) == 0) and np.all(d[~np.eye(3, dtype=bool)] > 0)
    # a run's mean distance from itself between independent draws: the diagonal of the null's mean
    np.testing.assert_allclose(np.diag(ds["null_mean"].values), ds["self_distance"].mean("draw_pair").values)
    assert list(ds["path"].values) == [str(tmp_path / "runs" / n) for n in "abc"]
    for args, match in [
        ([str(a), str(r)], "different tasks (task.name = 'adding' vs 'recall')"),
        ([str(a), str(r), "--task", "adding"], "reads 5 inputs per step but the task 'adding' gives 2"),
        ([str(a)], "at least 2 run directories"),
        ([str(a), str(tmp_path / "missing")], "does not exist"),
        ([str(a), str(b), "--delays", "30"], "too short for 30 delays"),
    ]:
        bad = invoke(["analyze", "dsa", *small, *args], tmp_path)
        assert bad.exit_code == 2, bad.output
        assert match in bad.output and "Traceback" not in bad.output and len(bad.output.strip().splitlines()) == 1, bad.output
