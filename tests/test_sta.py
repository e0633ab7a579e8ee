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
    bad = invoke(["analyze", "sta", "--model", "gru", "--task", "recall", "--quantile", "1.5"], tmp_path)
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output
