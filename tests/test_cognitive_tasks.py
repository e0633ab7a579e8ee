"""Cognitive tasks: targets follow from the inputs by the task's definition, the stimulus
statistics are neurogym's, trial timing has the distribution it names, and keys reproduce."""

import functools
import math

import jax
import numpy as np
import pytest

import dynlab
from dynlab.errors import ConfigError
from dynlab.losses import get_loss
from dynlab.tasks.cognitive.periods import Periods, TruncatedExponential

NAMES = ("flipflop", "perceptual-decision", "delayed-match", "context-integration", "sine-generation")


def batch(task, key, size):
    """``task.batch(key, size)`` compiled as one program, as training runs it (op by op, a batch of
    these tasks costs ~3x the CPU of compiling it)."""
    return jax.jit(task.batch, static_argnums=1)(key, size)


@pytest.mark.parametrize("name", NAMES)
def test_equal_keys_give_equal_batches_and_masks_score_real_steps(name):
    task = dynlab.build("task", name)
    a, b, c = (batch(task, jax.random.key(k), 16) for k in (3, 3, 4))
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])
    x, y, mask = map(np.asarray, a)
    assert x.shape == (16, task.length, task.input_size) and np.all(np.isfinite(x))
    assert mask.shape == (16, task.length) and set(np.unique(mask)) <= {0.0, 1.0} and np.all(mask.sum(1) > 0)


def test_flipflop_targets_hold_the_last_pulse():
    task = dynlab.build("task", "flipflop", bits=4, length=50, p_flip=0.3)
    x, y, mask = map(np.asarray, batch(task, jax.random.key(0), 64))
    held = np.zeros((64, 4))
    for t in range(50):                              # the definition, step by step
        held = np.where(x[:, t] != 0, x[:, t], held)
        np.testing.assert_array_equal(y[:, t], held)
    assert np.all(np.abs(y) == 1)
    rate = np.mean(x[:, 1:] != 0)                    # pulses after step 0 arrive at rate p_flip
    assert abs(rate - 0.3) < 4 * math.sqrt(0.3 * 0.7 / x[:, 1:].size)
    loss = get_loss(task.loss)
    assert float(loss.metric(y, y, mask)) == 1.0 and float(loss.metric(-y, y, mask)) == 0.0
    guess = np.where(np.random.default_rng(0).random(y.shape) < 0.5, 1.0, -1.0)
    assert abs(float(loss.metric(guess, y, mask)) - task.chance) < 0.02


def test_perceptual_decision_stimulus_statistics_are_neurogyms():
    task = dynlab.build("task", "perceptual-decision", cohs=[0.0, 25.6, 51.2])
    x, y, mask = map(np.asarray, batch(task, jax.random.key(1), 3000))
    choice = y.max(axis=1)                           # the decision label, 1 or 2
    stim = x[:, 1:21, 1:]                            # the 20 stimulus steps (fixation 1 step, dt 100)
    assert np.all(x[:, 0, 0] == 1) and np.all(x[:, 1:, 0] == 0)   # fixation input only while fixating
    right = np.take_along_axis(stim, (choice - 1)[:, None, None].repeat(20, 1), axis=2)[..., 0]
    wrong = np.take_along_axis(stim, (2 - choice)[:, None, None].repeat(20, 1), axis=2)[..., 0]
    coh = np.round((right - wrong).mean(1) * 100).astype(int)   # 2c/200 per step, averaged: ~c/100
    for c in (0.0, 25.6, 51.2):
        sel = np.abs(coh - c) < 10
        assert sel.sum() > 500
        assert abs(right[sel].mean() - (0.5 + c / 200)) < 0.005
        assert abs(wrong[sel].mean() - (0.5 - c / 200)) < 0.005
        assert abs(right[sel].std() - 1.0 / math.sqrt(100)) < 0.004   # sigma / sqrt(dt)
    assert np.all(y[:, -1] > 0) and np.all(y[:, :-1] == 0) and np.all(mask[:, :-1] == 0)


def test_delayed_match_label_says_whether_test_equals_sample():
    task = dynlab.build("task", "delayed-match", sigma=0.0)
    x, y, mask = map(np.asarray, batch(task, jax.random.key(2), 200))
    sample, test = x[:, 5, 1:], x[:, 20, 1:]        # sample 300-800 ms, test 2300-2800 ms
    match = np.all(sample == test, axis=1)
    assert 50 < match.sum() < 150
    np.testing.assert_array_equal(y[:, -1], np.where(match, 1, 2))
    assert np.all(x[:, -9:, 0] == 0) and np.all(x[:, :-9, 0] == 1)   # fixation off at the decision


def test_context_integration_answer_is_the_cued_stream():
    task = dynlab.build("task", "context-integration", sigma=0.0)
    x, y, mask = map(np.asarray, batch(task, jax.random.key(3), 400))
    evidence = x[:, 3:11].mean(axis=1)               # stimulus steps 3..10 (fixation 300, stimulus 750 ms)
    streams = evidence[:, 1:5].reshape(-1, 2, 2)
    sides = np.argmax(streams, axis=2) + 1            # the side each stream points to
    context = np.argmax(x[:, 0, 5:7], axis=1)
    answer = (y * mask).max(axis=1)
    np.testing.assert_array_equal(answer, sides[np.arange(400), context])
    ignore = np.mean(answer == sides[:, 0])           # ignoring the cue: right half the other time
    assert 0.65 < ignore < 0.85
    on = mask.sum(1)
    assert np.all(on == 1)                            # one decision step (100 ms) per trial


def test_sine_generation_target_has_the_cued_frequency():
    task = dynlab.build("task", "sine-generation")
    x, y, mask = map(np.asarray, batch(task, jax.random.key(4), 50))
    f = x[:, 0, 0] * max(task.frequencies)
    dt = task.periods.dt / 1000
    for i in range(50):
        target = y[i, 5:, 0]                          # generation starts after 100 ms
        t = np.arange(target.size) * dt
        np.testing.assert_allclose(target, np.sin(2 * np.pi * f[i] * t), atol=1e-5)
    assert np.all(y[:, :5] == 0)


def test_truncated_exponential_durations_have_their_law():
    d = TruncatedExponential(600.0, 300.0, 3000.0)
    draws = np.asarray(d.draw(jax.random.key(5), 200_000))
    a, b, m = 300.0, 3000.0, 600.0
    z = math.exp(-(b - a) / m)
    mean = a + m - (b - a) * z / (1 - z)              # closed form of the truncated mean
    assert draws.min() >= a and draws.max() < b
    assert abs(draws.mean() - mean) < 4 * draws.std() / math.sqrt(draws.size)
    periods = Periods({"fixation": 300, "delay": [600, 300, 3000], "decision": 100}, dt=100)
    assert periods.steps == 34
    start, end = map(np.asarray, periods.bounds(jax.random.key(6), 1000))
    np.testing.assert_array_equal(start[:, 1:], end[:, :-1])   # contiguous, in order
    assert np.all(end[:, 0] == 3) and np.all(end[:, 2] - start[:, 2] == 1)


@pytest.mark.parametrize("bad", [{"p_flip": 0.0}, {"bits": 0}, {"noise": float("nan")}])
def test_bad_flipflop_settings_are_one_line(bad):
    with pytest.raises(ConfigError):
        dynlab.build("task", "flipflop", **bad)


@pytest.mark.parametrize("bad", [{"cohs": []}, {"cohs": [120]}, {"dt": 0}, {"timing": {"delay": [1, 2]}},
                                 {"timing": {"delay": [600, 3000, 300]}}, {"sigma": -1}])
def test_bad_trial_settings_are_one_line(bad):
    with pytest.raises(ConfigError):
        dynlab.build("task", "context-integration", **bad)


def _neurogym_task(**kw):
    return dynlab.build("task", "neurogym", **kw)


def test_neurogym_batches_are_seeded_by_the_key_also_inside_jit():
    task = _neurogym_task(env="ContextDecisionMaking-v0", kwargs={"use_expl_context": True})
    assert (task.input_size, task.output_size, task.length) == (7, 3, 42)   # 300+750+3000+100 ms at dt 100
    a = task.batch(jax.random.key(0), 8)
    b = jax.jit(task.batch, static_argnums=1)(jax.random.key(0), 8)
    c = task.batch(jax.random.key(1), 8)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])
    lengths = np.asarray(a[2]).sum(1)                 # variable delays: rows of different lengths, padding unscored
    assert len(set(lengths)) > 1 and lengths.max() <= 42


def test_neurogym_perceptual_decision_matches_the_native_task():
    """Same task described twice: the evidence means and noise per coherence agree."""
    ngym = _neurogym_task(env="PerceptualDecisionMaking-v0")
    native = dynlab.build("task", "perceptual-decision", score_fixation=True)
    assert (ngym.length, ngym.input_size, ngym.output_size) == (native.length, native.input_size, native.output_size)
    stats = []
    for task in (ngym, native):
        x, y, mask = map(np.asarray, batch(task, jax.random.key(2), 2000))
        np.testing.assert_array_equal(x[:, 0, 0], 1.0)
        choice = y[:, -1]
        stim = x[:, 1:21, 1:]
        right = np.take_along_axis(stim, (choice - 1)[:, None, None].repeat(20, 1), axis=2)[..., 0]
        wrong = np.take_along_axis(stim, (2 - choice)[:, None, None].repeat(20, 1), axis=2)[..., 0]
        coh = (right - wrong).mean(1) * 100
        level = np.array([0, 6.4, 12.8, 25.6, 51.2])[np.argmin(np.abs(coh[:, None] - [0, 6.4, 12.8, 25.6, 51.2]), 1)]
        stats.append({c: (right[level == c].mean(), right[level == c].std(), (level == c).mean()) for c in (0, 25.6, 51.2)})
    for c in (0, 25.6, 51.2):
        (m1, s1, p1), (m2, s2, p2) = stats[0][c], stats[1][c]
        assert abs(m1 - m2) < 0.006 and abs(s1 - s2) < 0.004 and abs(p1 - p2) < 0.06


def test_neurogym_errors_are_one_line(monkeypatch):
    with pytest.raises(ConfigError, match="unknown neurogym environment 'Nope-v0'; valid: .*PerceptualDecisionMaking-v0"):
        _neurogym_task(env="Nope-v0")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "neurogym" else real(name, *a))
    with pytest.raises(ConfigError, match=r"dynlab\[neurogym\]"):
        _neurogym_task(env="PerceptualDecisionMaking-v0")


TRAINING = [("flipflop", {"length": 12}), ("context-integration", {"timing": {"delay": 200}}),
            ("perceptual-decision", {"timing": {"stimulus": 500}}), ("delayed-match", {"timing": {"delay": 300}}),
            ("sine-generation", {"timing": {"generation": 200}})]


@functools.cache
def _grads(name, rule):
    """The rule's gradient for a GRU on a batch of the task, computed once per (task, rule) for the
    module: BPTT's is also what PC's is compared with."""
    import equinox as eqx

    from dynlab import experiment

    config = {"seed": 0, "model": {"unit": "gru", "hidden": 8}, "task": {"name": name, **dict(TRAINING)[name]},
              "rule": {"name": rule}, "train": {}}
    exp = experiment.build(config)

    @eqx.filter_jit  # one program, as training runs it (op by op, the eager calls cost ~2x the CPU)
    def grads(model, key):
        return exp.rule.grads(model, exp.task.batch(key, 16), jax.random.key(1))[0]

    flat = np.concatenate([np.ravel(g) for g in jax.tree.leaves(grads(exp.model, jax.random.key(0)))])
    assert np.all(np.isfinite(flat)) and np.linalg.norm(flat) > 0
    return flat


@pytest.mark.parametrize("name", [t for t, _ in TRAINING])
def test_every_task_trains_under_bptt(name):
    _grads(name, "bptt")


@pytest.mark.parametrize("name", [t for t, _ in TRAINING[:2]])
def test_pc_through_time_trains_on_the_squared_and_the_choice_tasks(name):
    """PC through time on the flip-flop (loss ``mse_sign``, whose energy is ``mse``'s) and on
    context integration (``ce_all``, trials of different lengths): finite gradients that descend
    the task loss (positive cosine with BPTT's; PC's inferred errors are O(1) at initialisation,
    so the two are not expected to agree closely)."""
    a, b = _grads(name, "bptt"), _grads(name, "pc-time")
    cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    print(name, cos)
    assert cos > 0
