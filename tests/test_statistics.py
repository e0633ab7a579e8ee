"""dynlab.statistics against scipy's own formulas and against coverage of known truths (issue 22)."""

import numpy as np
import pytest
import scipy.stats
from scipy.signal import lfilter

from dynlab import statistics as st
from dynlab.errors import ConfigError


def one_line_config_error(fn, *args, match, **kwargs):
    with pytest.raises(ConfigError, match=match) as err:
        fn(*args, **kwargs)
    assert "\n" not in str(err.value)


# --- independent replicates --------------------------------------------------------------------


def test_t_interval_is_scipys_student_t_interval_and_names_itself():
    x = np.array([[1.0, 2.0], [2.5, 2.0], [4.0, 3.5]])
    ci = st.t_interval(x, population="seeds", level=0.9)
    for j in range(2):
        lo, hi = scipy.stats.t.interval(0.9, 2, loc=x[:, j].mean(), scale=scipy.stats.sem(x[:, j]))
        assert ci.low[j] == pytest.approx(lo) and ci.high[j] == pytest.approx(hi)
    assert ci.label == "90% CI over 3 seeds (Student t, ddof=1)"
    assert ci.attrs() == {"ci_level": 0.9, "ci_population": "3 seeds", "ci_method": "Student t, ddof=1", "ci_n": 3}
    # the helper replacing "mean +- std" with ddof=0: 80 and 82 have sd sqrt(2), not 1
    mean, sd = st.mean_sd([80.0, 82.0])
    assert mean == 81.0 and sd == pytest.approx(np.sqrt(2.0))


def test_t_interval_leaves_out_nan_replicates_slice_by_slice():
    x = np.array([[1.0, np.nan], [3.0, np.nan], [np.nan, 5.0]])
    ci = st.t_interval(x, population="runs")
    assert ci.estimate[0] == 2.0 and np.isnan(ci.low[1]) and np.isnan(ci.high[1])


def test_mean_over_three_seeds_of_a_normal_variable_covers_at_its_level():
    """2000 experiments of 3 seeds each: the 95% interval covers the true mean 93-97% of the time
    (ddof=0 and a normal quantile, the old "mean +- std" reading, would cover ~71% with 1 sd)."""
    x = np.random.default_rng(0).normal(3.0, 2.0, size=(2000, 3))
    ci = st.t_interval(x, population="seeds", axis=1)
    rate = float(np.mean(ci.covers(3.0)))
    assert 0.93 <= rate <= 0.97, rate
    old = np.abs(x.mean(1) - 3.0) <= x.std(axis=1, ddof=0)
    assert np.mean(old) < 0.8


@pytest.mark.parametrize("values", [[1.0], np.zeros((1, 4))])
def test_fewer_than_two_replicates_is_a_one_line_config_error(values):
    one_line_config_error(st.t_interval, values, population="seeds", match="at least 2 seeds")
    one_line_config_error(st.mean_sd, values, match="at least 2")


def test_bad_level_is_a_config_error():
    one_line_config_error(st.t_interval, [1.0, 2.0], population="seeds", level=95, match="level")


# --- time averages -------------------------------------------------------------------------------


def ar1(rho, n, series, seed):
    """x_t = rho x_{t-1} + z_t, started from the stationary distribution N(0, 1/(1 - rho^2))."""
    z = np.random.default_rng(seed).standard_normal((series, n))
    z[:, 0] /= np.sqrt(1 - rho**2)
    return lfilter([1.0], [1.0, -rho], z, axis=1)


def test_integrated_autocorrelation_time_of_ar1():
    """tau_int = (1 + rho) / (2 (1 - rho)) for AR(1); 1/2 for white noise and constants."""
    for rho, n in [(0.0, 4000), (0.5, 4000), (0.9, 20000)]:
        tau = st.integrated_autocorrelation_time(ar1(rho, n, 40, seed=1))
        assert np.median(tau) == pytest.approx((1 + rho) / (2 * (1 - rho)), rel=0.15)
    assert st.integrated_autocorrelation_time(np.ones(50)) == 0.5


def test_batch_means_interval_covers_the_mean_of_an_ar1_series():
    """400 AR(1) runs (rho = 0.9, tau_int = 9.5, 2000 steps): the 95% batch-means interval of the
    time average covers the true mean 0 in 90-99% of runs (batches of ceil(10 tau) steps); treating
    the steps as independent would cover far less."""
    x = ar1(0.9, 2000, 400, seed=2)
    covered, naive = [], []
    for row in x:
        bm = st.batch_means(row)
        covered.append(bool(bm.interval().covers(0.0)))
        naive.append(abs(row.mean()) <= 1.96 * row.std(ddof=1) / np.sqrt(row.size))
    rate = float(np.mean(covered))
    assert 0.90 <= rate <= 0.99, rate
    assert np.mean(naive) < 0.5
    bm = st.batch_means(x[0])
    assert bm.block == int(np.ceil(10 * bm.tau)) and bm.n_batches == 2000 // bm.block
    assert "batches of" in bm.interval().population


def test_batch_longer_than_half_the_run_is_a_config_error():
    one_line_config_error(st.batch_means, np.arange(10.0), block=6, match="longer than half the run")
    one_line_config_error(st.block_resample_indices, 10, 11, 5, np.random.default_rng(0), match="longer than the data")


# --- bootstrap -----------------------------------------------------------------------------------


def test_block_resample_indices_are_circular_runs():
    idx = st.block_resample_indices(10, 4, 50, np.random.default_rng(0))
    assert idx.shape == (50, 10)
    steps = np.diff(idx[:, :4], axis=1) % 10
    assert np.all(steps == 1)  # consecutive rows (mod 10) inside a block


def test_basic_and_percentile_intervals_from_replicates():
    reps = np.arange(1.0, 1001.0) / 1000  # quantiles 0.025 -> ~0.025, 0.975 -> ~0.975
    basic = st.bootstrap_interval(0.6, reps, population="rows")
    pct = st.bootstrap_interval(0.6, reps, population="rows", method="percentile")
    lo, hi = np.quantile(reps, [0.025, 0.975])
    assert (pct.low, pct.high) == pytest.approx((lo, hi))
    assert (basic.low, basic.high) == pytest.approx((1.2 - hi, 1.2 - lo))
    assert basic.method == "basic bootstrap" and basic.population == "rows"


def test_iid_bootstrap_is_scipys_bca_and_blocks_refuse_bca():
    x = np.random.default_rng(3).exponential(size=60)
    ci = st.bootstrap(x, np.mean, population="rows", n_resamples=500, seed=4)
    ref = scipy.stats.bootstrap((np.arange(60),), lambda i: np.mean(x[i]), vectorized=False, n_resamples=500,
                                method="BCa", random_state=np.random.default_rng(4)).confidence_interval
    assert (ci.low, ci.high) == pytest.approx((ref.low, ref.high))
    one_line_config_error(st.bootstrap, x, np.mean, population="rows", block=5, match="BCa needs independent rows")
    blocked = st.bootstrap(x, np.mean, population="rows", block="auto", method="basic", n_resamples=200)
    assert blocked.low < x.mean() < blocked.high and "blocks of" in blocked.population


def test_half_sample_interval_removes_a_one_over_m_bias():
    """The plug-in variance (divides by M) has bias -sigma^2/M; half-samples remove it exactly
    to first order, and their spread is the full estimate's standard error."""
    rng = np.random.default_rng(5)
    centres, covered = [], []
    for _ in range(400):
        x = rng.normal(0.0, 1.0, 40)
        w = st.half_sample_weights(40, 200, rng)
        halves = np.array([x[row > 0].var() for row in w])
        ci = st.half_sample_interval(x.var(), halves, n_blocks=40, population="rows")
        centres.append(float(ci.estimate))
        covered.append(bool(ci.covers(1.0)))
    assert np.mean(centres) == pytest.approx(1.0, abs=0.03)  # plug-in alone: 1 - 1/40 = 0.975
    assert 0.90 <= np.mean(covered) <= 0.99
    one_line_config_error(st.half_sample_weights, 1, 3, rng, match="at least 2 blocks")


# --- comparisons ---------------------------------------------------------------------------------


def test_spearman_is_exact_on_monotone_data_and_drops_nan_pairs():
    x = np.arange(12.0)
    assert st.spearman(x, -(x**3))[0] == -1.0
    y = -(x**3)
    y[4] = np.nan
    rho, p, n = st.spearman(x, y)
    assert rho == -1.0 and n == 11 and p < 1e-6


def test_welch_is_scipys_unequal_variance_t_test():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0, 10.0]
    t, p = st.welch(a, b)
    ref = scipy.stats.ttest_ind(a, b, equal_var=False)
    assert (t, p) == pytest.approx((ref.statistic, ref.pvalue))
    one_line_config_error(st.welch, [1.0], [1.0, 2.0], match="at least 2")


def test_welch_interval_is_the_pooled_interval_when_sizes_and_spreads_agree():
    # equal sizes n = 4 and equal sample variances 5/3: Welch-Satterthwaite gives nu = 2(n - 1) = 6,
    # and t_{0.975, 6} = 2.446912 (printed tables), so the half-width is 2.446912 * sqrt(2 (5/3) / 4)
    x, y = [0.0, 1.0, 2.0, 3.0, np.nan], [10.0, 11.0, 12.0, 13.0]
    ci = st.welch_interval(x, y)
    assert ci.estimate == -10.0 and ci.n == 8 and ci.population == "4 and 4 values"
    half = 2.446912 * np.sqrt(2 * (5 / 3) / 4)
    assert (ci.low, ci.high) == pytest.approx((-10.0 - half, -10.0 + half), abs=1e-5)
    t, p = st.welch(x, y)  # the test of the same difference, by the same computation
    assert t == pytest.approx(-10.0 / np.sqrt(2 * (5 / 3) / 4)) and p < 0.05
    assert st.welch_interval([1.0, 1.0, 1.0], [2.0, 2.0]).half_width == 0  # no spread: zero width, not NaN
    assert st.welch_interval([1.0], [1.0, 2.0]) is None


def test_no_spread_over_seeds_uses_ddof_0():
    """Issue 22, item 4: every sd over seeds is the sample sd. xarray's and numpy's ``std`` default
    to ddof = 0, so a ``std("seed")`` / ``std(..., "seed")`` without ``ddof=1`` anywhere in the
    package is a bug."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"""\.std\(\s*["']seed["']\s*\)""")
    found = [f"{p.relative_to(root)}:{i}" for folder in ("dynlab", "analyses", "scenarios", "rules")
             for p in (root / folder).rglob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert not found, found


# --- quantities with a range (issue 48 item 3) --------------------------------------------------


def test_bounded_interval_stays_in_range_where_the_t_interval_does_not():
    """Two seeds of an accuracy difference, -0.075 apart on average: Student t runs to about -1.9 and
    1.7 (the issue's [-1.866, 1.716]); inside [-1, 1] it must not. A count: its interval stops at 0."""
    d = np.array([-0.2, 0.05])
    t = st.t_interval(d, population="seeds")
    assert float(t.low) < -1 and float(t.high) > 1  # what the range check below would catch
    ci = st.bounded_interval(d, bounds=(-1, 1), population="seeds")
    assert -1 <= ci.low < ci.estimate < ci.high <= 1 and ci.estimate == pytest.approx(-0.075)
    counts = st.bounded_interval([0, 1, 0, 2], bounds=(0, np.inf), population="seeds")
    assert counts.low == 0 < counts.high and "cut at the range's bound" in counts.method
    # near the middle of a range the arcsine scale changes nothing: the plain t interval
    mid = st.bounded_interval([0.48, 0.5, 0.53, 0.51], bounds=(0, 1), population="seeds")
    plain = st.t_interval(np.array([0.48, 0.5, 0.53, 0.51]), population="seeds")
    assert mid.low == pytest.approx(float(plain.low), abs=2e-3) and mid.high == pytest.approx(float(plain.high), abs=2e-3)


def test_agreeing_replicates_get_a_distribution_free_interval_not_zero_width():
    """n replicates that all agree at v: P(another differs) < p_n = 1 - 0.05^(1/(n-1)), so the mean of a
    quantity in [a, b] lies in [v - p_n (v - a), v + p_n (b - v)]. Checked by simulation: the worst
    case, a two-valued quantity at the edge of the bound, agrees and misses at most 5% of the time."""
    ci = st.bounded_interval([1.0, 1.0, 1.0, 1.0], bounds=(0, 1), population="seeds")
    p = 1 - 0.05 ** (1 / 3)
    assert ci.low == pytest.approx(1 - p) and ci.high == 1.0 and "all 4 agree" in ci.method
    count = st.bounded_interval([0, 0], bounds=(0, np.inf), population="seeds")
    assert count.low == 0 and count.high == np.inf  # nothing bounds an unbounded count from above
    rng = np.random.default_rng(1)
    for n in (2, 3, 6):
        q = 1 - 0.05 ** (1 / (n - 1)) + 0.02  # a chance of differing just beyond what agreement excludes
        x = rng.random((20000, n)) < q  # 1 with probability q, else 0: mean q
        agree = (x == x[:, :1]).all(1)
        misses = [not st.agreement_interval(float(v), n, bounds=(0, 1)).covers(q) for v in x[agree, 0]]
        assert sum(misses) / len(x) <= 0.05, (n, sum(misses) / len(x))


def test_seeds_to_decide_inverts_the_agreement_interval():
    for value, threshold, bounds in ((1.0, 0.95, (0, 1)), (0.0, -0.5, (-1, 1)), (3.0, 1.0, (0, np.inf))):
        n = st.seeds_to_decide(value, threshold, bounds=bounds)
        outside = lambda m: not st.agreement_interval(value, m, bounds=bounds).covers(threshold)  # noqa: E731
        assert outside(n) and not outside(n - 1), (value, threshold, n)
    assert st.seeds_to_decide(1.0, 0.95, bounds=(0, 1)) == 60
    assert st.seeds_to_decide(0.0, 8.0, bounds=(0, np.inf)) is None  # a count, from above
    assert st.seeds_to_decide(1.0, 1.0, bounds=(0, 1)) is None  # on the threshold itself


def test_interval_text_prints_the_digits_the_width_supports():
    assert st.interval_text(0.99948, 0.99896, 1.0) == "0.99948 ± 0.00052"  # not "1 ± 0.00052"
    assert st.interval_text(7.0, 0.0, 20.0) == "7 [0, 20]"  # a count cut at 0, not "7 ± 13"
    assert st.interval_text(0.0123, 0.0112, 0.0134) == "0.0123 ± 0.0011"
    assert st.interval_text(0.0, 0.0, np.inf) == "0.0 [0.0, ∞]"
    assert st.interval_text(1.5) == "1.5" and st.interval_text(np.nan) == "—"
