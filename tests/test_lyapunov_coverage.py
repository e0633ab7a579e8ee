"""Coverage of the Lyapunov intervals users see, through the functions the analysis runs (issue 38).

Every test repeats a whole measurement 200 times in one vmapped call
([`replicate_groups`][dynlab.analyses.lyapunov.replicate_groups], which builds each repetition's
dataset exactly as `lyapunov_replicates` and the `lyapunov` analysis do) on a map whose exponents
are known exactly, and checks the printed interval, not a re-computed one. The full-size cases
(the default ARU under the adding task, fresh and trained, and the quick start against
ln|mu(J*)|) take minutes of accelerator time: `benchmarks/coverage.py` runs them; here the same
code runs in a cut-down form that fails where the old intervals failed.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner
from jax.tree_util import Partial

import dynlab
from dynlab.analyses.lyapunov.burn_in import mser_truncation, truncate_running
from dynlab.analyses.lyapunov.model import lyapunov_analysis_seeds
from dynlab.analyses.lyapunov.replicates import replicate_groups
from dynlab.cli import main
from dynlab.statistics import t_interval
from dynlab.analyses.protocol import TaskStream
from dynlab.analyses.qr_settings import QRSettings

GROUPS, R = 200, 5


def _groups(steps, dim, seed):
    rng = np.random.default_rng(seed)
    return ([np.ones((R, 1, dim)) for _ in range(GROUPS)], [rng.standard_normal((R, steps, dim)) for _ in range(GROUPS)],
            [jax.random.key(g) for g in range(GROUPS)])


def _coverage(datasets, truth, var="ci", i=0):
    low = np.array([float(ds[f"{var}_low"].values.ravel()[i]) for ds in datasets])
    high = np.array([float(ds[f"{var}_high"].values.ravel()[i]) for ds in datasets])
    return float(np.mean((low <= truth) & (truth <= high)))


def slow_frame(h, x):
    r"""$h \mapsto e^{\mu + \sigma x} \odot h$, $\mu = (0, -0.01)$: exponents exactly $(0, -0.01)$; the frame
    turns into $e_1$ at rate 0.01 per step, so a run's first hundred steps underestimate $\lambda_1$."""
    return jnp.exp(jnp.array([0.0, -0.01]) + 0.005 * x) * h


def test_auto_burn_in_covers_where_a_fixed_one_misses():
    """A frame transient that every realisation shares biases the mean below lambda_1 = 0: with 2
    steps of burn-in the 95% interval covers 0.775 of the time (measured); the MSER truncation of
    the window (what burn_in="auto" does) brings it to 0.945 (measured)."""
    h0s, inputs, keys = _groups(600, 2, 0)
    fixed = replicate_groups(slow_frame, h0s, inputs, 1, keys=keys, burn_in=2, reortho_every=1, x64=True)
    auto = replicate_groups(slow_frame, h0s, inputs, 1, keys=keys, burn_in=2, reortho_every=1, x64=True, truncate=True)
    assert _coverage(fixed, 0.0) < 0.85
    assert 0.90 <= _coverage(auto, 0.0) <= 0.99
    assert all(ds.attrs["burn_in"] == 2 + ds.attrs["burn_in_truncated"] for ds in auto)
    assert np.median([ds.attrs["burn_in_truncated"] for ds in auto]) > 50


def test_mser_drops_a_transient_and_keeps_a_stationary_series():
    rng = np.random.default_rng(1)
    noise = rng.standard_normal((2000, 40))
    assert np.mean(mser_truncation(noise) == 0) > 0.5 and np.mean(mser_truncation(noise) == 20) < 0.05
    ramp = noise + np.where(np.arange(40) < 10, 5.0, 0.0)
    d = mser_truncation(ramp)
    assert np.all(d >= 10) and np.median(d) == 10  # the transient always goes, rarely much more
    # truncating the running estimates gives the time average of the kept blocks
    local = rng.standard_normal((3, 12, 2))
    times = np.arange(1, 13) * 4.0
    running = np.cumsum(local * 4.0, axis=1) / times[:, None]
    kept, kept_times = truncate_running(running, times, 5)
    np.testing.assert_allclose(kept[:, -1], local[:, 5:].mean(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(kept_times, times[5:] - times[4])


PERMUTATION = jnp.asarray(np.eye(6)[[3, 0, 4, 1, 5, 2]], jnp.float32)


def neutral(h, x):
    r"""$h \mapsto P h + x$, $P$ a permutation (orthogonal to the bit): all 6 exponents exactly 0, estimated
    to rounding (the float32 QR's)."""
    return PERMUTATION @ h + x


def test_zero_exponents_sum_and_largest_lines_cover_zero():
    """Issue item 8: where the exponents are 0, the plug-in sum of positive exponents is biased upward
    (the positive parts of rounding-sized estimates: its t interval misses 0 nearly always); the
    printed sum's interval (from the exponents' intervals) covers, and the `largest` line is
    exponent 1's interval, not another one."""
    h0s, inputs, keys = _groups(200, 6, 2)
    sets = replicate_groups(neutral, h0s, inputs, 6, keys=keys, burn_in=10, reortho_every=1)
    plug_in = [t_interval(np.nanmean(ds.positive_sum.values, axis=1), population="r") for ds in sets]
    assert np.mean([ci.covers(0.0) for ci in plug_in]) < 0.5  # the old line
    assert _coverage(sets, 0.0, "positive_sum_ci") >= 0.95
    assert all(float(ds.positive_sum_ci_low) <= float(ds.positive_sum_mean) <= float(ds.positive_sum_ci_high)
               for ds in sets)
    assert all(float(ds.largest_ci_low) == float(ds.ci_low[0]) and float(ds.largest_ci_high) == float(ds.ci_high[0])
               for ds in sets)
    assert _coverage(sets, 0.0) >= 0.95


def test_the_analysis_and_the_cli_print_one_interval_per_quantity(tmp_path, monkeypatch):
    """The CLI's dataset is `lyapunov_analysis_seeds` for its seed (what benchmarks/coverage.py repeats),
    its burn-in is 'auto', and λ1's interval is printed once: the `largest` line points at row 1."""
    monkeypatch.chdir(tmp_path)
    tiny = ["--set", "model.hidden=4", "--set", "model.n_g=2"]
    r = CliRunner().invoke(main, ["analyze", "lyapunov", "--model", "aru", "--steps", "200", "--k", "3",
                                  "--task", "adding", "--seed", "1", "--out", "a.nc", *tiny])
    assert r.exit_code == 0, r.output + r.stderr
    import xarray as xr

    ds = xr.load_dataset(tmp_path / "a.nc")
    assert ds.attrs["burn_in_requested"] == "auto" and ds.attrs["burn_in"] >= 50
    assert "largest = λ1, row 1 above" in r.output and "sum of positive exponents" in r.output
    assert f"burn-in {ds.attrs['burn_in']} of" in r.output
    from dynlab import experiment
    from dynlab.config import apply_sets

    exp = experiment.build(apply_sets(experiment.default_config("aru", "adding"), ["model.hidden=4", "model.n_g=2",
                                                                                  "seed=1"]))
    (again, other) = lyapunov_analysis_seeds(exp.model, [1, 2], qr=QRSettings(k=3), steps=200, input=TaskStream(exp.task))
    for v in ("mean", "ci_low", "ci_high"):
        np.testing.assert_allclose(again[v].values, ds[v].values, rtol=1e-5)
    assert not np.allclose(other["mean"].values, ds["mean"].values, rtol=1e-7)
    # float32 and contracting: the rounding floor is measured against a float64 run
    assert "measured" in ds.attrs["rounding_floor"] and np.all(ds.rounding_error.values > 0)


def _tanh_step(w, b, h, x):
    return jnp.tanh(w @ h + b + x)


def test_fixed_point_intervals_cover_the_log_eigenvalue_moduli():
    """The quick start's case in small: float32 runs that settle on a fixed point agree to the bit, so
    the interval is the rounding floor; measured against a float64 run it covers ln|mu_i(J(h*))|."""
    rng = np.random.default_rng(4)
    n, covered, total = 6, 0, 0
    for net in range(5):
        w = jnp.asarray(rng.normal(size=(n, n)) * 0.8 / np.sqrt(n), jnp.float32)
        b = jnp.asarray(rng.normal(size=n), jnp.float32)
        h0s = np.zeros((R, 1, n), np.float32)  # the network's weights are arguments: one program for all 5
        (ds,) = replicate_groups(Partial(_tanh_step, w, b), [h0s], [np.zeros((R, 300, n), np.float32)], n,
                                 keys=[jax.random.key(net)], burn_in=100, reortho_every=1, truncate=True)
        w64, b64 = np.asarray(w, np.float64), np.asarray(b, np.float64)
        h = np.zeros(n)
        for _ in range(300):
            h = np.tanh(w64 @ h + b64)
        jac = (1 - np.tanh(w64 @ h + b64) ** 2)[:, None] * w64
        truth = np.sort(np.log(np.abs(np.linalg.eigvals(jac))))[::-1]
        covered += int(np.sum((ds.ci_low.values <= truth) & (truth <= ds.ci_high.values)))
        total += n
        assert "measured" in ds.attrs["rounding_floor"]
    assert covered / total >= 0.9, (covered, total)


def henon(h, x, a=1.4, b=0.3):
    return jnp.stack([1.0 - a * h[0] ** 2 + h[1], b * h[0]])


def test_chaotic_map_printed_interval_is_not_wider_than_needed():
    """Issue item 11: the printed interval on the Henon map (lambda_1 = 0.41922, Sprott 2003) covered
    100% with the batch-means floor at the realisations' t quantile (1.45x wider than the t interval
    alone); with the pooled time-average floor at its own degrees of freedom it covers 0.985."""
    rng = np.random.default_rng(1)
    h0s = [0.05 * rng.standard_normal((R, 1, 2)) for _ in range(GROUPS)]
    sets = replicate_groups(henon, h0s, [np.zeros((R, 1200, 1))] * GROUPS, 1,
                            keys=[jax.random.key(g) for g in range(GROUPS)], burn_in=200, x64=True)
    assert 0.90 <= _coverage(sets, 0.41922) <= 0.99


def diagonal_map(mu, h, x):
    r"""$h \mapsto e^{\mu + 0.005 x} \odot h$: exponents exactly $\mu$ (the noise has mean 0)."""
    return jnp.exp(mu + 0.005 * x) * h


def test_unresolved_neighbours_intervals_reach_up_to_cover_them():
    r"""A cluster like the fresh ARU's controller modes: $\lambda_{1..4}$ within $1.1\times10^{-4}$ and two
    more $8$-$9\times10^{-4}$ below, which the $k = 4$ frame does not see. After 500 + 1500 steps the frame
    has not separated them ($gT \ll 1$), so every estimate is a mixture and all come out low (by up to
    $3.3\times10^{-4}$, measured): their own intervals covered 0.91, 0.36, 0.55 and 0.11 of 200. With each
    upper bound raised to the highest above it in the cluster they cover 0.91, 0.925, 1.0 and 1.0 (measured)."""
    mu = jnp.array([0.0, -3e-6, -1e-4, -1.1e-4, -8e-4, -9e-4, -0.05, -0.06])
    h0s, inputs, keys = _groups(2000, 8, 3)
    sets = replicate_groups(Partial(diagonal_map, mu), h0s, inputs, 4, keys=keys, burn_in=500, reortho_every=1,
                            x64=True, truncate=True)
    assert all(list(ds.cluster.values) == [1, 1, 1, 1] for ds in sets)
    for i in range(4):
        assert _coverage(sets, float(mu[i]), i=i) >= 0.90, i


def test_resolved_exponents_keep_their_own_intervals():
    """Gaps of 0.02 per step are resolved within the burn-in ($e^{-gB} = e^{-10}$): every exponent is its own
    cluster, and each interval covers at its level, not wider."""
    mu = jnp.array([0.0, -0.02, -0.04, -0.2])
    h0s, inputs, keys = _groups(600, 4, 5)
    sets = replicate_groups(Partial(diagonal_map, mu), h0s, inputs, 4, keys=keys, burn_in=500, reortho_every=1,
                            x64=True, truncate=True)
    assert all(list(ds.cluster.values) == [1, 2, 3, 4] for ds in sets)
    for i in range(4):
        assert 0.90 <= _coverage(sets, float(mu[i]), i=i) <= 0.99, i
