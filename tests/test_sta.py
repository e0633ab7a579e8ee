"""Receptive fields by spike-triggered averaging (issue 19, item 4), against truths that do not come
from the code under test: a linear filter driven by Gaussian white noise (its STA is its kernel
times a closed-form constant, Bussgang's theorem), the hierarchical grammar's own definition (the
unscrambled language's words are the documented triplets), and a network without recurrence whose
neurons are functions of the current letter alone."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm

import dynlab
from cli_runner import invoke
from dynlab.analyses.sta import hierarchy_levels, level_receptive_fields, spike_triggered_average, sta_analysis
from dynlab.analyses.sta.null import layer_trend, shift_null, trend_sentence
from dynlab.errors import ConfigError
from dynlab.tasks.hierarchical import TRIPLETS, HierarchicalLanguageTask


def test_linear_filter_driven_by_white_noise_recovers_its_kernel():
    """r_t = sum_k h_k . x_{t-k}, x ~ N(0, s^2 I): E[STA(k)] = s^2 h_k / s_r * phi(z_q) / (1 - q), with
    s_r^2 = s^2 sum |h_k|^2 and z_q the standard normal q-quantile; zero beyond the kernel. Two
    neurons with different two-channel kernels; every entry within 5 standard errors
    (s / sqrt(high steps)) and the shape to a cosine of 0.999."""
    rng = np.random.default_rng(0)
    steps, lags, sigma, q = 100_000, 10, 1.5, 0.9
    x = sigma * rng.standard_normal((steps, 2))
    k = np.arange(8)
    h = np.zeros((2, 8, 2))
    h[0, :, 0], h[0, :, 1] = np.exp(-k / 3) * np.sin(k / 2 + 0.3), -0.5 * np.exp(-k / 2)
    h[1, :5, 1] = 0.3 * np.cos(k[:5])
    r = sum(np.pad(x, ((j, 0), (0, 0)))[:steps] @ h[:, j].T for j in range(8))
    res = spike_triggered_average(x, r, lags=lags, quantile=q)
    for n in range(2):
        expected = np.zeros((lags, 2))
        expected[:8] = sigma**2 * h[n] / (sigma * np.linalg.norm(h[n])) * norm.pdf(norm.ppf(q)) / (1 - q)
        assert abs(res.triggers[n] - (1 - q) * steps) <= 1
        se = sigma / np.sqrt(res.triggers[n])
        assert np.abs(res.sta[n] - expected).max() < 5 * se
        rf = res.receptive_field[n]
        assert np.sum(rf * expected) / (np.linalg.norm(rf) * np.linalg.norm(expected)) > 0.999
    assert np.abs(res.baseline).max() < 5 * sigma / np.sqrt(steps)


def test_levels_of_the_unscrambled_language_follow_its_definition():
    """A synthetic neuron fires on the last letter of every word '147' (1-based letters; the
    unscrambled grammar's first word, TRIPLETS[0]). Its STA at the letter level is one-hot 7, 4, 1
    at lags 0, 1, 2; at the word level one-hot '147' at lag 0; and at lag 1 the frequencies of the
    words that precede '147' in the stream, counted here from the letters directly."""
    task = HierarchicalLanguageTask(scramble=False)
    letters = task.symbols.reshape(-1)
    words = letters.reshape(-1, 3)
    target = np.array(TRIPLETS[0]) - 1
    hits = np.flatnonzero((words == target).all(axis=1))
    response = np.zeros((letters.size, 1))
    response[3 * hits + 2] = 1.0
    levels = hierarchy_levels(task)
    assert [lv.name for lv in levels] == ["letter", "word", "sentence", "paragraph", "sequence"]
    sta, base, _, triggers = level_receptive_fields(levels, response, lags=3, quantile=0.5)
    assert triggers[0] == hits.size > 0
    for lag, letter in enumerate(target[::-1]):
        np.testing.assert_array_equal(sta[0, 0, lag], np.eye(9)[letter])
    word_labels = list(levels[1].labels)
    np.testing.assert_array_equal(sta[1, 0, 0], np.eye(9)[word_labels.index("147")])
    # the word before each '147' (the stream is shown twice, so the first one's predecessor is the last word)
    before = ["".join(str(c + 1) for c in words[i - 1]) for i in hits]
    counts = np.array([before.count(label) for label in word_labels]) / len(before)
    np.testing.assert_allclose(sta[1, 0, 1], counts, atol=1e-6)
    np.testing.assert_allclose(base[:, 0, :], 1 / 9, atol=1e-6)  # the grammar uses every item equally often


def test_neurons_without_recurrence_see_only_the_current_letter():
    """With W_hh = 0 an RNN neuron is h = tanh(W_xh[:, s] + b) for the current letter s. With
    quantile 0.5 (9 letters equally frequent: the threshold is the 5th largest value) a neuron is
    high on exactly its 4 largest letters, so its letter-level STA at lag 0 is 1/4 on those."""
    model = dynlab.build("model", unit="rnn", input_size=9, output_size=9, key=jax.random.key(0), hidden=3)
    model = eqx.tree_at(lambda m: m.cells[0].w_hh, model, jnp.zeros((3, 3)))
    ds = sta_analysis(model, quantile=0.5, lags=2)
    w = np.asarray(model.cells[0].w_xh)
    for n in range(3):
        top = np.argsort(w[n])[-4:]
        expected = np.zeros(9)
        expected[top] = 0.25
        np.testing.assert_allclose(ds["sta"].values[0, n, 0], expected, atol=1e-6)
    assert list(ds["level_name"].values) == ["letter", "word", "sentence", "paragraph", "sequence"]
    assert ds.attrs["analysis"] == "sta" and set(ds["layer_name"].values) == {"cell0"}


def test_bad_options_are_one_line_config_errors():
    model = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(0), hidden=3)
    for options, match in [
        (dict(), "name the task"),
        (dict(task=dynlab.build("task", "recall")), "gives 5 inputs per step but the model reads 2"),
        (dict(task=dynlab.build("task", "adding", length=10), lags=20), "exceeds the task's 10 steps"),
        (dict(task=dynlab.build("task", "adding", length=10), quantile=1.0), "quantile must be"),
    ]:
        with pytest.raises(ConfigError, match=match) as error:
            sta_analysis(model, **options)
        assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="index must be"):
        spike_triggered_average(np.zeros((5, 1)), np.zeros((5, 1)), lags=2, index=np.array([0, 1, 2, 3, 9]))


def test_cli_run_on_a_task_with_symbols(tmp_path):
    nc = tmp_path / "sta.nc"
    ran = invoke(["analyze", "sta", "--model", "gru", "--set", "model.hidden=3", "--task", "recall", "--lags", "4",
                  "--samples", "16", "--out", str(nc), "-q"], tmp_path)
    assert ran.exit_code == 0, ran.output
    assert "sta:" in ran.output and nc.is_file() and nc.with_suffix(".png").is_file()
    assert "beating a time-shifted null" in ran.output and "layer trend" in ran.output
    bad = invoke(["analyze", "sta", "--model", "gru", "--task", "recall", "--quantile", "1.5"], tmp_path)
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output


def _synthetic_neurons(rng, steps, n_yes, n_no, gain=0.35, smooth=0.0, x=None):
    """A stimulus [steps, 3] of noise low-passed with pole 0.8 (unit variance; or `x`); `n_yes`
    neurons read its channel 0 two steps back (plus unit white noise), `n_no` neurons are noise
    low-passed with pole `smooth`, independent of the stimulus."""
    from scipy.signal import lfilter

    if x is None:
        x = lfilter([0.6], [1.0, -0.8], rng.standard_normal((steps, 3)), axis=0)
    yes = gain * np.roll(x[:, 0], 2)[:, None] + rng.standard_normal((steps, n_yes))
    no = lfilter([1.0], [1.0, -smooth], rng.standard_normal((steps, n_no)), axis=0)
    return x, np.concatenate([yes, no], axis=1)


@pytest.mark.optimised  # runs its programs long: cheaper at -O2 (tests/conftest.py)
def test_time_shifted_null_separates_responding_from_silent_neurons():
    """100 neurons respond to a smooth stimulus at lag 2 (weakly: gain 0.35 against unit noise),
    300 do not (white noise, or noise low-passed with pole 0.9, whose raw selectivity is larger:
    fewer independent high steps). Nominal 5%: the false-positive rate on the silent ones stays
    within 3 binomial sd of 0.05, the power on the responders is at least 0.9. The unshifted
    statistic is the analysis's selectivity."""
    rng = np.random.default_rng(1)
    x, r = _synthetic_neurons(rng, 2000, 100, 150)
    r = np.concatenate([r, _synthetic_neurons(rng, 2000, 0, 150, smooth=0.9, x=x)[1]], axis=1)
    null = shift_null(x, r, lags=5, quantile=0.9)
    res = spike_triggered_average(x, r, lags=5, quantile=0.9)
    np.testing.assert_allclose(null.observed, np.sqrt(np.mean(res.receptive_field**2, axis=(1, 2))), rtol=1e-4)
    assert null.clears_window and null.shifts.min() >= 5 and null.shifts.max() <= 1995
    beats = null.p_value <= 0.05
    fpr, power = beats[100:].mean(), beats[:100].mean()
    assert abs(fpr - 0.05) <= 3 * np.sqrt(0.05 * 0.95 / 300), fpr
    assert power >= 0.9, power
    assert np.median(null.observed[250:]) > 1.2 * np.median(null.observed[100:250])  # smooth noise looks selective


def test_layer_trend_interval_covers_a_known_slope():
    """400 synthetic sets of 3 layers x 12 neurons whose values are skewed (gamma, shape 2) with
    layer means 1.0, 1.1, 1.2 (slope 0.1 per layer): the 95% interval covers 0.1 in 90-99% of them."""
    rng = np.random.default_rng(2)
    layers = np.repeat([1, 2, 3], 12)
    covered = [(t := layer_trend(rng.gamma(2.0, (0.9 + 0.1 * layers) / 2.0), layers)).low <= 0.1 <= t.high
               for _ in range(400)]
    assert 0.90 <= np.mean(covered) <= 0.99, np.mean(covered)
    assert np.isnan(layer_trend(np.ones(5), np.ones(5)).slope)  # one layer: no trend


def test_a_layer_trend_the_null_explains_reads_as_such():
    """Three layers of neurons that ignore the stimulus, each smoother than the last (poles 0, 0.7,
    0.9): fewer independent high steps, so the raw selectivity rises with depth, but not beyond
    the null, and the sentence says so. Responders whose gain rises with depth read as rising
    beyond the null."""
    rng = np.random.default_rng(3)
    layers = np.repeat([1, 2, 3], 30)
    x, _ = _synthetic_neurons(rng, 2000, 0, 0)
    silent = [_synthetic_neurons(rng, 2000, 0, 30, smooth=a, x=x)[1] for a in (0.0, 0.7, 0.9)]
    driven = [_synthetic_neurons(rng, 2000, 30, 0, gain=0.15 * ell, x=x)[1] for ell in (1, 2, 3)]
    null = shift_null(x, np.concatenate(silent + driven, axis=1), lags=5, quantile=0.9)
    raw, excess = layer_trend(null.observed[:90], layers), layer_trend(null.excess[:90], layers)
    assert raw.low > 0 and excess.low <= 0 <= excess.high, (raw, excess)
    assert trend_sentence(raw, excess).endswith("the raw trend (rises) is explained by the null")
    sentence = trend_sentence(layer_trend(null.observed[90:], layers), layer_trend(null.excess[90:], layers))
    assert sentence.endswith("selectivity rises with depth beyond the null"), sentence
