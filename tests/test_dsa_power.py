"""DSA's test is the test it claims, and says what it can detect (issue 48, item 5). Truths that
do not come from the code: the exact size of a permutation test over exchangeable values
(floor(alpha R) / R over its R relabellings), the power of a difference of means measured by
simulation, and networks whose difference is known by construction: a 3-bit flip-flop built by
hand (three self-exciting tanh units, each set by its own input's pulses), against itself with its
time constant doubled and with one bit's input cut."""

from __future__ import annotations

import copy
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from dynlab.analyses.dsa import dsa_models, dsa_summary
from dynlab.analyses.dsa.null import detectable, mean_p_value, null_level, null_p_value


def test_permutation_test_of_the_mean_has_its_exact_size_and_is_the_rank_test_for_one_draw():
    """K = 4 between-run values exchangeable with n = 20 null values: p <= 0.05 with probability
    floor(0.05 R) / R, R = C(24, 4) (every relabelling is enumerated); ``null_level(.., draws=4)``
    is where 4 equal distances reach p = 0.05; for K = 1 the p-value is the rank test's."""
    rng = np.random.default_rng(0)
    reps = 1000
    values = rng.gamma(2.0, 0.05, (reps, 24))
    p = np.array([mean_p_value(v[:4], v[4:], seed=r) for r, v in enumerate(values)])
    exact = math.floor(0.05 * math.comb(24, 4)) / math.comb(24, 4)
    bound = 4 * math.sqrt(exact * (1 - exact) / reps)
    assert abs(np.mean(p <= 0.05) - exact) <= bound, (np.mean(p <= 0.05), exact)
    for v in values[:10]:  # the level: 4 distances all equal to it are exactly where p reaches 0.05
        level = null_level(v[4:], draws=4)
        assert mean_p_value(np.full(4, level * (1 + 1e-9)), v[4:]) <= 0.05 < mean_p_value(np.full(4, level * (1 - 1e-6)), v[4:])
    for v in values[:20]:
        assert mean_p_value(v[:1], v[4:]) == pytest.approx(null_p_value(v[0], v[4:]))


def test_detectable_difference_is_detected_at_80_percent_power():
    """Between-run values shifted by exactly ``detectable`` above the null's (normal, sd 0.02, 20
    null values and 4 between-run values per pair): the permutation test at 5% detects the shift in
    about 80% of 400 simulated pairs (the normal approximation it rests on); a third of the shift far
    less often."""
    rng = np.random.default_rng(1)
    sd, k, n = 0.02, 4, 20
    null = rng.standard_normal(n)
    null = 0.1 + sd * (null - null.mean()) / null.std(ddof=1)  # a null of exactly this spread
    shift = detectable(null, k)
    assert shift == pytest.approx(2.486 * sd * math.sqrt(1 / k + 1 / n), rel=1e-3)

    def power(delta):
        hits = [mean_p_value(rng.normal(0.1 + delta, sd, k), rng.normal(0.1, sd, n), seed=r) <= 0.05 for r in range(400)]
        return np.mean(hits)

    assert 0.72 <= power(shift) <= 0.88
    assert power(shift / 3) < 0.35


def _flipflop(alpha: float = 1.0, cut: int | None = None):
    """A 3-bit flip-flop by construction (6 tanh units, ``alpha`` = dt/tau): units 0-2 excite
    themselves (weight 2: two stable states +-0.96) and are set by their own input's pulses
    (weight 4); units 3-5 read them and decay. ``cut``: that bit's input weights set to 0."""
    m = dynlab.build("model", unit="rnn", input_size=3, output_size=3, key=jax.random.key(0), hidden=6)
    w = np.zeros((6, 6))
    w[:3, :3] = 2.0 * np.eye(3)
    w[3:] = 0.2 * np.random.default_rng(0).standard_normal((3, 6))
    wx = np.zeros((6, 3))
    wx[:3] = 4.0 * np.eye(3)
    if cut is not None:
        wx[:, cut] = 0.0
    cell = copy.copy(m.cells[0])
    object.__setattr__(cell, "alpha", float(alpha))  # static: the time constant
    cell = eqx.tree_at(lambda c: (c.w_hh, c.w_xh, c.b_h), cell,
                       (jnp.asarray(w, jnp.float32), jnp.asarray(wx, jnp.float32), jnp.zeros(6)))
    return eqx.tree_at(lambda m: m.cells, m, (cell,))


OPTIONS = dict(n_delays=3, rank=6, pcs=6, iterations=300, restarts=2)
TRIALS, LENGTH, DRAWS, NULL, REPS = 8, 40, 4, 20, 5
KINDS = ("itself", "time constant doubled", "bit 0's input cut")


@pytest.fixture(scope="module")
def verdicts():
    """``dsa_models`` of the flip-flop against itself, against itself with its time constant
    doubled (alpha 1 -> 0.5) and with bit 0's input cut, every model under its own independent
    draws, ``REPS`` times (new draws and restarts; one call each, the four models together): for
    each kind, whether the pair was called distinguishable in each repetition; and the last dataset."""
    task = dynlab.build("task", "flipflop", bits=3, length=LENGTH)
    models = [_flipflop(), _flipflop(), _flipflop(alpha=0.5), _flipflop(cut=0)]
    called, ds = [], None
    every = np.asarray(task.batch(jax.random.key(0), REPS * len(models) * (DRAWS + NULL) * TRIALS, split="test")[0])
    every = every.reshape(REPS, len(models), DRAWS + NULL, TRIALS, *every.shape[1:])  # independent samples, one batch
    for rep, x in enumerate(every):
        ds = dsa_models(models, x[:, :DRAWS], null_inputs=x[:, DRAWS:], seed=rep, **OPTIONS)
        called.append(ds["distinguishable"].values[0, 1:])
    return dict(zip(KINDS, np.array(called).T)), ds


@pytest.mark.parametrize("kind", KINDS[1:])
def test_near_miss_controls_are_detected(verdicts, kind):
    """The same flip-flop network with its time constant doubled, or with one bit's input cut, is
    called distinguishable in at least 4 of 5 repetitions (the acceptance's 80%), its distance
    beyond the 80%-power distance the summary states."""
    called, ds = verdicts
    assert called[kind].sum() >= 4, called
    j = 1 + KINDS.index(kind)
    assert float(ds["distance"][0, j]) > float(ds["detectable"][0, j]) > float(ds["null_mean"][0, j]) > 0
    assert "at 80% power" in dsa_summary(ds)


def test_a_network_against_itself_is_not_at_zero_and_rarely_distinguishable(verdicts):
    """The flip-flop against itself, each under its own draws: its distance is not 0 (the two are
    driven by different inputs, as the null is), about its null mean, and it is not called
    distinguishable in at least 4 of 5 repetitions (the test's size is 5%). A network's mean
    distance from itself is the diagonal of ``null_mean``; ``distance_by_draw`` is NaN on the diagonal."""
    called, ds = verdicts
    assert called["itself"].sum() <= 1, called
    d, centre = float(ds["distance"][0, 1]), float(ds["null_mean"][0, 1])
    assert d > 0 and 0.5 * centre < d < 2 * centre
    assert np.isfinite(ds["distance_by_draw"].values[0, 1]).all() and np.isnan(ds["distance_by_draw"].values[0, 0]).all()
    assert float(ds["null_mean"][0, 0]) == pytest.approx(float(ds["self_distance"][0].mean()))
