"""Fixed points say what happened and how many were missed (issue 37, issue 38 item 5).

The truths do not come from the code under test: every fixed point of a small tanh network is
found by scipy.optimize.root (MINPACK hybrd) from a dense set of starts in float64, and
classified by numpy's eigenvalues of the Jacobian, diag(1 - h*^2) W^T, with the definition of
the classes (unstable |mu| > 1 + tau, stable |mu| < 1 - tau). The reference networks are
FixedPointFinder's: h <- tanh(h W) with W[i, :] = -roll(linspace(-1, 1, n), -i), which have
3, 3 and 9 fixed points for n = 2, 3, 4."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from jax.tree_util import Partial

import dynlab
from cli_runner import invoke
from dynlab.analyses.fixed_points import (fixed_points, fixed_points_analysis, fixed_points_from_visited,
                                          fixed_points_reading, fixed_points_summary, unseen_points)

TAU = 1e-3  # the default marginal band


def reference_w(n: int) -> np.ndarray:
    base = np.linspace(-1, 1, n)
    return np.stack([-np.roll(base, -i) for i in range(n)])


def _row_tanh(w, h, x):
    return jnp.tanh(h @ w)


def true_fixed_points(w: np.ndarray, starts: int = 600) -> list[tuple[np.ndarray, str, int]]:
    """Every fixed point of h <- tanh(h W) with its class and number of unstable directions."""
    n = w.shape[0]
    rng = np.random.default_rng(0)
    points: list[np.ndarray] = []
    for s in rng.uniform(-1.5, 1.5, (starts, n)):
        sol = scipy.optimize.root(lambda h: np.tanh(h @ w) - h, s, method="hybr", tol=1e-14)
        if sol.success and np.abs(np.tanh(sol.x @ w) - sol.x).max() < 1e-12:
            if all(np.linalg.norm(sol.x - p) > 1e-6 for p in points):
                points.append(sol.x)
    out = []
    for p in points:
        jac = (w * (1 - np.tanh(p @ w) ** 2)[None, :]).T  # dF_j/dh_i = W_ij (1 - F_j^2)
        mu = np.abs(np.linalg.eigvals(jac))
        unstable, stable = int(np.sum(mu > 1 + TAU)), int(np.sum(mu < 1 - TAU))
        cls = ("stable" if len(mu) == stable else "marginal") if not unstable else ("saddle" if stable else "unstable")
        out.append((p, cls, unstable))
    return out


def _assert_matches(ds, truth):
    points = ds.points.values
    assert ds.sizes["point"] == len(truth), fixed_points_summary(ds)
    for p, cls, unstable in truth:
        i = int(np.argmin(np.linalg.norm(points - p, axis=1)))
        assert np.linalg.norm(points[i] - p) < 1e-6, (p, points)
        assert str(ds.stability.values[i]) == cls and int(ds.n_unstable.values[i]) == unstable, (p, cls, unstable)


@pytest.mark.parametrize("n, count", [(2, 3), (3, 3), (4, 9)])
def test_reference_networks_give_all_their_fixed_points(n, count):
    """The plain map, from the states of one trajectory (from a random state, after 100 steps),
    with the search's defaults: every point, with its class and unstable directions."""
    w = reference_w(n)
    truth = true_fixed_points(w)
    assert len(truth) == count  # the truth itself is FixedPointFinder's
    rng = np.random.default_rng(n)
    h, visited = rng.normal(size=n) * 0.5, []
    for _ in range(300):
        h = np.tanh(h @ w)
        visited.append(h)
    with jax.enable_x64(True):
        ds = fixed_points_from_visited(Partial(_row_tanh, jnp.asarray(w)), jnp.asarray(np.array(visited[100:])), None,
                                       q_tol=1e-20)
    _assert_matches(ds, truth)
    assert ds.attrs["n_unseen_estimate"] < 1


def _tanh_rnn(w_hh: np.ndarray):
    """A dynlab tanh RNN whose autonomous map is h <- tanh(W_hh h) (zero bias, zero input)."""
    model = dynlab.build("model", unit="rnn", input_size=1, output_size=1, key=jax.random.key(0), hidden=len(w_hh))
    return eqx.tree_at(lambda m: m.cells[0].w_hh, model, jnp.asarray(w_hh, jnp.float32))


def test_nine_point_network_found_at_the_defaults():
    """h <- tanh(1.5 h) on 2 units rests at its unstable origin, the only state it visits (the
    search from visited states alone found that point only). Through the analysis users run, at
    its defaults, every one of the 9 is found, with its class, and nothing is said to be missing."""
    model = _tanh_rnn(1.5 * np.eye(2))
    truth = true_fixed_points(1.5 * np.eye(2))
    assert len(truth) == 9
    ds = fixed_points_analysis(model)
    assert np.abs(ds.trajectory_pcs.values).max() == 0  # the trajectory never left the origin
    _assert_matches(ds, truth)
    assert ds.attrs["n_unseen_estimate"] < 1
    assert fixed_points_reading(ds).startswith("9 points: 4 stable, 4 saddle with one unstable direction, "
                                               "1 unstable with two unstable directions: 4 attractors")


def test_missing_points_are_estimated_and_warned():
    """Ten initial states on the 9-point map: fewer points than exist, points found once, and
    the output says points are likely missing, with Chao1's estimate."""
    with jax.enable_x64(True):
        h0s = jax.random.uniform(jax.random.key(1), (10, 2), jnp.float64, minval=-1.2, maxval=1.2)
        with pytest.warns(UserWarning, match="points are likely missing"):
            ds = fixed_points(Partial(lambda w, h, x: jnp.tanh(w * h), 1.5), h0s, None)
    f1, f2, unseen = unseen_points(ds.basin_count.values)
    assert ds.sizes["point"] < 9 and unseen >= 1
    assert (ds.attrs["n_found_once"], ds.attrs["n_found_twice"], ds.attrs["n_unseen_estimate"]) == (f1, f2, unseen)
    assert f"likely about {unseen:.0f} more unseen" in fixed_points_reading(ds)
    assert "points are likely missing" in fixed_points_summary(ds)


def test_chao1_estimate():
    assert unseen_points([1, 1, 2, 5]) == (2, 1, 2.0)  # f1^2 / (2 f2)
    assert unseen_points([1, 1, 1, 3]) == (3, 0, 3.0)  # f1 (f1 - 1) / 2 when f2 = 0
    assert unseen_points([4, 2, 7]) == (0, 1, 0.0)


def _ghost(a, h, x):
    """h <- h + a + h^2: past a saddle-node bifurcation, no fixed point; its ghost at h = 0 is a
    slow point with q = a^2 / 2, where every minimisation of q = (a + h^2)^2 / 2 ends."""
    return h + a + h * h


def test_all_discarded_names_the_smallest_q_and_the_option():
    a = 0.038  # q at the ghost = 7.22e-4, above the default q_max = 1e-4
    with jax.enable_x64(True):
        visited = jnp.linspace(-0.3, 0.3, 50)[:, None]
        ds = fixed_points_from_visited(Partial(_ghost, a), visited, None)
        kept = fixed_points_from_visited(Partial(_ghost, a), visited, None, q_max=1e-3)
    assert ds.sizes["point"] == 0
    assert ds.attrs["discarded_min_q"] == pytest.approx(a * a / 2, rel=1e-6)
    assert ds.attrs["discarded_min_q_runs"] == ds.attrs["n_ics"] == 64
    assert ds.attrs["q_max_to_keep"] == pytest.approx(1e-3)
    summary = fixed_points_summary(ds)
    assert "smallest q reached is 7.2e-04, where 64 of 64 runs stopped" in summary
    assert "--q-max 1e-03 keeps it" in summary
    assert ds.attrs["reading"] == fixed_points_reading(ds, "q_max") and "q_max 1e-03 keeps it" in ds.attrs["reading"]
    assert kept.sizes["point"] == 1 and not bool(kept.is_fixed[0])  # the option named keeps it, as a slow point


def test_reading_lines():
    """What the reading line says for one attractor, for several points, and for a line attractor."""
    with jax.enable_x64(True):
        stable = fixed_points(Partial(lambda h, x: 0.5 * h + 1.0), jnp.ones((8, 3)) * jnp.arange(8.0)[:, None], None)
        w = jnp.asarray(reference_w(2))
        visited = jnp.asarray([[0.3, -0.2]]) * jnp.ones((20, 1))
        three = fixed_points_from_visited(Partial(_row_tanh, w), visited, None)
        a = jnp.asarray(np.diag([1.0, 0.5, 0.2]))  # every point of the first axis is fixed
        h0s = 2.0 * jax.random.normal(jax.random.key(5), (48, 3), jnp.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a continuum is not "points likely missing"
            line = fixed_points(Partial(lambda a, h, x: a @ h, a), h0s, None)
    assert fixed_points_reading(stable) == "1 stable fixed point: a single attractor"
    assert fixed_points_reading(three) == ("3 points: 2 stable, 1 saddle with one unstable direction: "
                                           "2 attractors (multistable)")
    assert fixed_points_reading(line) == (f"{line.sizes['point']} marginal points, one eigenvalue on the unit circle: "
                                          "a line attractor")
    assert fixed_points_summary(line).endswith(fixed_points_reading(line))
    assert "a continuum of marginal points, not missing ones" in fixed_points_summary(line)


def test_cli_all_discarded_and_reading(tmp_path):
    """The command names the smallest q and the --q-max that keeps it when every minimum is
    discarded (here: one solver step and q_max = 1e-30), the dataset holds the same numbers, and the reading line
    closes the summary."""
    import xarray as xr

    nc = tmp_path / "fp.nc"
    ran = invoke(["analyze", "fixed-points", "--model", "rnn", "--set", "model.hidden=4", "--steps", "60",
                  "--burn-in", "10", "--ics", "6", "--drive", "0.3", "--max-steps", "1",
                  "--q-tol", "1e-30", "--q-max", "1e-30", "--out", str(nc), "-q"], tmp_path)
    assert ran.exit_code == 0, ran.output
    with xr.open_dataset(nc) as ds:
        q_min, runs, keeps = (ds.attrs[k] for k in ("discarded_min_q", "discarded_min_q_runs", "q_max_to_keep"))
        assert ds.sizes["point"] == 0 and q_min > ds.attrs["q_max"]
    assert q_min <= keeps < 10 * q_min and np.log10(keeps) == round(np.log10(keeps))
    assert f"the smallest q reached is {q_min:.1e}, where {runs} of " in ran.output
    assert f"--q-max {keeps:.0e} keeps it" in ran.output
