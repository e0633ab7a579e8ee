"""Activity statistics against spike trains whose statistics are known in closed form.

A Bernoulli train with probability p per step has geometric ISIs (mean 1/p, CV sqrt(1 - p)) and
binomial window counts (Fano 1 - p); both tend to the Poisson value 1 as p -> 0. Tolerances are
four standard errors of the population averages, computed from the spread over the independent
neurons. Periodic trains have CV 0 (and Fano 0 over whole periods); independent trains have
sample correlations of mean 0 and sd 1/sqrt(M - 1) over M samples; identical trains correlate 1.
"""

import jax
import numpy as np
import pytest

import dynlab
from dynlab.analyses.activity import activity_analysis, activity_statistics
from dynlab.errors import ConfigError

P_SPIKE, STEPS, NEURONS, WINDOW = 0.05, 20_000, 40, 10


@pytest.fixture(scope="module")
def bernoulli():
    rng = np.random.default_rng(0)
    spikes = (rng.random((STEPS, NEURONS)) < P_SPIKE).astype(np.float32)
    return spikes, activity_statistics(spikes, window=WINDOW)


def four_se(values):
    return 4 * np.std(values, ddof=1) / np.sqrt(len(values))


def test_bernoulli_trains_have_poisson_like_cv_and_fano(bernoulli):
    _, ds = bernoulli
    cv, fano = ds.isi_cv.values, ds.fano.values
    assert abs(cv.mean() - np.sqrt(1 - P_SPIKE)) < four_se(cv)
    assert abs(fano.mean() - (1 - P_SPIKE)) < four_se(fano)
    assert abs(float(ds.isi_cv_mean) - 1) < 0.05 and abs(float(ds.fano_mean) - 1) < 0.07  # ~ Poisson
    isi_mean = ds.isi_mean.values
    assert abs(isi_mean.mean() - 1 / P_SPIKE) < four_se(isi_mean)
    # Geometric ISI distribution: P(isi = 1) = p, P(isi = 2) = p (1 - p).
    freq = ds.isi_histogram.values / ds.isi_histogram.sum().item()
    n_isi = ds.n_intervals.sum().item()
    for j, expected in enumerate([P_SPIKE, P_SPIKE * (1 - P_SPIKE)]):
        assert abs(freq[j] - expected) < 4 * np.sqrt(expected * (1 - expected) / n_isi)
    assert float(ds.mean_fraction_active) == pytest.approx(P_SPIKE, abs=4 * np.sqrt(P_SPIKE / (STEPS * NEURONS)))


def test_independent_trains_are_uncorrelated(bernoulli):
    _, ds = bernoulli
    m = ds.attrs["n_windows"]
    pairs = NEURONS * (NEURONS - 1) // 2
    assert ds.n_pairs.item() == pairs and ds.correlation_histogram.sum().item() == pairs
    assert abs(float(ds.correlation_mean)) < 4 / np.sqrt(m * pairs)
    assert float(ds.correlation_std) == pytest.approx(1 / np.sqrt(m - 1), rel=0.1)


def test_identical_trains_correlate_one(bernoulli):
    spikes, _ = bernoulli
    twins = np.concatenate([spikes[:2000, :3]] * 2, axis=1)
    for of in ("counts", "activity"):
        ds = activity_statistics(twins, correlation_of=of)
        pairs = np.corrcoef(twins.T)[np.triu_indices(6, 1)]  # 3 twin pairs correlate 1, the rest not
        assert ds.n_pairs.item() == 15
        assert ds.correlation_histogram.values[-1] == 3  # r = 1 exactly; independent pairs are far below 0.95
        if of == "activity":
            np.testing.assert_allclose(float(ds.correlation_mean), pairs.mean(), rtol=1e-9)


def test_regular_trains_have_zero_cv_and_fano():
    period = 10
    spikes = np.zeros((2, 500, 4))
    for n in range(4):
        spikes[:, n * 2 :: period, n] = 1.0  # different phases
    for window in (period, 3 * period):
        with pytest.warns(RuntimeWarning, match="no pairwise correlations"):  # constant counts
            ds = activity_statistics(spikes, window=window)
        np.testing.assert_array_equal(ds.isi_cv.values, 0.0)
        np.testing.assert_array_equal(ds.fano.values, 0.0)
    np.testing.assert_array_equal(ds.isi_mean.values, period)
    np.testing.assert_array_equal(ds.fraction_active.values, np.tile([0.25, 0, 0.25, 0, 0.25, 0, 0.25, 0, 0, 0], 50))
    assert ds.n_intervals.values.tolist() == [2 * 49] * 4  # 50 spikes per trial, no interval across trials


def test_onset_events_count_bursts_once():
    rates = np.zeros((600, 2))
    for start in range(0, 600, 20):
        rates[start : start + 4, 0] = [0.5, 1.0, 2.0, 0.7]  # a 4-step burst every 20 steps
    rates[::3, 1] = 0.05  # below the threshold: never active
    with pytest.warns(RuntimeWarning, match="no pairwise correlations"):  # one count per window; one silent
        active = activity_statistics(rates, threshold=0.1, window=20)
        onset = activity_statistics(rates, threshold=0.1, events="onset", window=20)
    assert onset.event_rate.values[0] == pytest.approx(1 / 20) and onset.isi_cv.values[0] == 0.0
    assert active.event_rate.values[0] == pytest.approx(4 / 20)
    assert active.isi_histogram.sel(isi=1).item() == 3 * 30 and active.isi_histogram.sel(isi=17).item() == 29
    assert active.neuron_fraction_active.values[1] == 0 and np.isnan(active.fano.values[1])


def test_bad_input_is_a_clear_error():
    with pytest.raises(ConfigError, match="counting windows"):
        activity_statistics(np.zeros((15, 3)), window=10)
    with pytest.raises(ConfigError, match="events"):
        activity_statistics(np.zeros((50, 3)), events="spikes")
    with pytest.raises(ConfigError, match=r"\[T, N\]"):
        activity_statistics(np.zeros(50))


def test_registered_analysis_reads_the_named_state_component():
    model = dynlab.build("model", unit="rnn", input_size=1, output_size=2, key=jax.random.key(0), hidden=6)
    ds = activity_analysis(model, steps=150, burn_in=10, drive=0.3, window=5)
    xs = jax.numpy.zeros((160, 1))
    _, states = model.trajectory(xs, drive=jax.numpy.full((160,), 0.3))
    h = np.asarray(states[0])[10:]
    np.testing.assert_allclose(ds.neuron_fraction_active, (h > 0).mean(axis=0))
    assert ds.attrs["component"] == "layer0.h" and "activity" in dynlab.names("analysis")
    with pytest.raises(ConfigError, match="valid: layer0.h"):
        activity_analysis(model, component="layer0.m")
