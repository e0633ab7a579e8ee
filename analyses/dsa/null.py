r"""The yardsticks of DSA distances: how far DSA puts a model from itself by chance, whether two
models (or two groups of runs) are further apart than that, and the smallest difference the test
can see.

A DSA distance is estimated from finitely many trials, so a model is not at distance 0 from
itself under another draw of its inputs (0.03-0.5 rad for the default 16 trials). Two nulls:

- **Input draws** ([`pair_null`][]). The statistic and its null are the same kind of comparison:
  distances between operators fitted on **independent** input draws. Every run is driven by
  $K$ draws of its own (``draws``) and by $2P$ more (``null_draws``), the latter taken in disjoint
  pairs. A pair of runs $a, b$ has $K$ **between-run distances** $x_k = \theta(A_k, B_k)$ ($a$ under
  its $k$-th draw, $b$ under its own), independent of each other; each run has $P$
  **self-distances**, its distance from itself between the two draws of a pair. Under the null
  hypothesis "$a$ and $b$ have the same dynamics" (a run and its copy, say), all these operators
  are independent draws of one distribution, so the $K$ between-run distances and the pair's
  $n = 2P$ pooled self-distances $S_{ab}$ are exchangeable, and a permutation test of the mean is
  exact:

  $$ p_{ab} = \frac{\#\{\pi : \bar x_\pi \ge \bar x\}}{\#\pi}, $$

  over every way of choosing which $K$ of the $K + n$ values are "between" (the observed one
  included; [`MAX_RELABELLINGS`][] drawn at random beyond that many). With $K = 1$ it is the
  rank test $p = (1 + \#\{s \ge x\})/(n + 1)$. The pair is **distinguishable** when $p \le \alpha$.
  Its size is $\alpha$ up to the discreteness of $p$, for a run against its copy too (which is not
  at 0: the two are driven by different draws). Not chosen: the distance on one input draw shared
  by both runs, the comparison of Ostrow et al.'s examples. For a deterministic model it is exactly
  0 against its copy, so no null measured on independent draws matches it (the size of such a
  test is 0 and its power is lost to the mismatch: two GRU seeds at 0.028 rad on a shared draw,
  against 0.042-0.046 rad between draws of either), and a null on shared draws is 0 identically;
  the paper leaves the null open. The **null level** ([`null_level`][]) is the distance beyond
  which the test calls a pair distinguishable when its $K$ distances are all that distance (for
  $K = 1$, $d >$ level exactly when $p \le \alpha$; $+\infty$ when there are too few values to
  reach $\alpha$: $n \ge 19$ at $K = 1$ and $\alpha = 0.05$); distances spread around a mean
  need a little more.
- **Power** ([`detectable`][]). The smallest excess $\delta$ of the pair's mean between-run
  distance over its mean self-distance that the test calls distinguishable in 80% of repetitions,
  by the normal approximation of a difference of means with the null's spread $s$:

  $$ \delta_{80} = (z_{1-\alpha} + z_{0.8})\, s \sqrt{1/K + 1/n}. $$

  It falls as $1/\sqrt{K}$ with more ``draws`` (down to the $1/\sqrt n$ of ``null_draws``), and
  with $s$, which more ``trials`` shrink (the operator's estimation error falls as
  $1/\sqrt{\text{trials}}$: measured in ``benchmarks/dsa_power.py`` together with the effect of
  rank and delays).
- **Seeds** ([`group_permutation`][]). Across the cells of a sweep, runs that differ only in the
  seed are replicates of one configuration (a unit). Two groups $g, h$ are further apart than
  their replicates when $T = \bar d_{gh} - \bar d_{\text{within}}$ (the mean distance between a
  run of $g$ and a run of $h$, minus the mean over the pairs of runs of one group) is large
  among its values over every relabelling of the runs of $g \cup h$ into groups of the same sizes
  (a permutation test: $p = \#\{T_\pi \ge T\} / \#\pi$, the identity included). With 2 seeds per
  group there are $\binom{4}{2} = 6$ relabellings, of which the observed one and its mirror image
  split the runs alike, so $p \ge 1/3$: two seeds cannot tell units apart at 5%, whatever the
  distances (4 seeds each: $p \ge 2/70$).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import NamedTuple

import numpy as np

__all__ = ["ALPHA", "POWER", "PairNull", "detectable", "group_permutation", "mean_p_value", "null_level", "null_p_value",
           "pair_null"]

ALPHA = 0.05
"""The level of the "distinguishable" verdict: a pair is called distinguishable when $p \\le$ ``ALPHA``."""

POWER = 0.8
"""The power at which [`detectable`][] states the smallest difference the test sees."""

MAX_RELABELLINGS = 20_000
"""[`group_permutation`][], [`mean_p_value`][] and [`null_level`][] enumerate every relabelling (or
subset) up to this many; beyond, they draw this many at random (the identity always included)."""


@functools.lru_cache(maxsize=64)
def _subsets(n: int, k: int) -> np.ndarray:
    """Every subset of ``k`` of ``range(n)``, ``[C(n, k), k]``, the first one ``range(k)``."""
    return np.array(list(itertools.combinations(range(n), k)), int).reshape(-1, k)


def _subset_means(values: np.ndarray, k: int, rng) -> np.ndarray:
    """The means of every subset of ``k`` of ``values`` (or of [`MAX_RELABELLINGS`][] random ones)."""
    n = values.size
    if math.comb(n, k) <= MAX_RELABELLINGS:
        chosen = _subsets(n, k)
    else:
        chosen = np.argsort(rng.random((MAX_RELABELLINGS, n)), axis=1)[:, :k]
    return values[chosen].mean(axis=1)


def null_level(null, alpha: float = ALPHA, draws: int = 1) -> float:
    r"""The smallest distance a test at level ``alpha`` calls beyond the ``null`` sample ($n$
    values) when each of the pair's ``draws`` ($K$) distances is that distance: for $K = 1$ the
    rank test's, the $k$-th smallest value with $k = \lceil (1-\alpha)(n+1)\rceil$; for $K > 1$
    the permutation test's ([`mean_p_value`][]), found by bisection (its p-value falls as the
    distance grows); $+\infty$ when no distance reaches $\alpha$ (for $K = 1$, fewer than
    $1/\alpha - 1$ values).

    **Enforces**: ``d > null_level(s, draws=K)`` exactly when ``mean_p_value([d] * K, s) <= alpha`` (for
    ``d`` not tied with a value of ``s``); for $K = 1$ that is ``null_p_value(d, s) <= alpha``."""
    s = np.sort(np.asarray(null, np.float64).ravel())
    if draws > 1:
        if s.size == 0 or math.comb(s.size + draws, draws) * alpha < 1:
            return math.inf
        p = lambda d: mean_p_value(np.full(draws, d), s)  # noqa: E731
        low, high = float(s[0]), float(s[-1]) + 1.0  # p(high) is its smallest: no subset mean reaches it
        if p(high) > alpha:
            return math.inf
        for _ in range(50):
            mid = 0.5 * (low + high)
            low, high = (mid, high) if p(mid) > alpha else (low, mid)
        return high
    k = math.ceil((1.0 - alpha) * (s.size + 1) - 1e-12)
    return float(s[k - 1]) if 1 <= k <= s.size else math.inf


def null_p_value(distance: float, null) -> float:
    r"""The rank p-value of ``distance`` against the ``null`` sample: $(1 + \#\{s \ge d\}) / (n + 1)$."""
    s = np.asarray(null, np.float64).ravel()
    return float((1 + np.sum(s >= distance)) / (s.size + 1))


def mean_p_value(between, null, *, seed: int = 0) -> float:
    r"""The permutation p-value of the mean of ``between`` ($K$ values) against the ``null`` sample
    ($n$ values): the fraction of the ways of choosing $K$ of the $K + n$ pooled values whose mean
    is at least the observed one (every way up to [`MAX_RELABELLINGS`][], else that many at random
    with the observed one included). Exact when all $K + n$ values are exchangeable.

    **Enforces**: for $K = 1$ it equals ``null_p_value(between, null)``."""
    x = np.asarray(between, np.float64).ravel()
    s = np.asarray(null, np.float64).ravel()
    pooled = np.concatenate([x, s])
    observed = x.mean()
    means = _subset_means(pooled, x.size, np.random.default_rng(seed))
    if math.comb(pooled.size, x.size) > MAX_RELABELLINGS:
        means[0] = observed
    return float(np.mean(means >= observed - 1e-12 * max(abs(observed), 1.0)))


def detectable(null, draws: int, alpha: float = ALPHA, power: float = POWER) -> float:
    r"""The smallest excess of a pair's mean between-run distance over its mean self-distance that
    the test of [`mean_p_value`][] calls distinguishable with probability ``power``:
    $(z_{1-\alpha} + z_{\text{power}})\, s \sqrt{1/K + 1/n}$ with $s$ the standard deviation of the
    ``null`` sample ($n$ values) and $K$ = ``draws`` (the normal approximation of a difference of
    means; ``inf`` with fewer than 2 null values)."""
    from statistics import NormalDist

    s = np.asarray(null, np.float64).ravel()
    if s.size < 2 or draws < 1:
        return math.inf
    z = NormalDist().inv_cdf(1.0 - alpha) + NormalDist().inv_cdf(power)
    return float(z * np.std(s, ddof=1) * math.sqrt(1.0 / draws + 1.0 / s.size))


class PairNull(NamedTuple):
    """[`pair_null`][] of ``M`` runs: ``[M, M]`` arrays."""

    level: np.ndarray
    """The null level of each pair (radians): mean distances above it are distinguishable."""
    p_value: np.ndarray
    """The permutation p-value of each pair's between-run distances against its pooled self-distances."""
    distinguishable: np.ndarray
    """``p_value <= alpha`` (False on the diagonal)."""
    samples: np.ndarray
    """How many self-distances each pair's null pools."""
    null_mean: np.ndarray
    """The mean of the pair's pooled self-distances (radians)."""
    detectable: np.ndarray
    """The smallest mean distance the pair's test calls distinguishable at [`POWER`][]: ``null_mean``
    plus [`detectable`][] (radians)."""


def pair_null(between, self_distance, alpha: float = ALPHA) -> PairNull:
    """The input-draw null of every pair of runs (module docstring): ``between`` ``[M, M, K]``, the
    pairs' distances between independent draws (``[M, M]``: one each), the runs' ``self_distance``
    ``[M, P]`` (NaN where missing); a pair pools the self-distances of both runs (of one run on the
    diagonal)."""
    x = np.asarray(between, np.float64)
    x = x[..., None] if x.ndim == 2 else x
    own = [s[np.isfinite(s)] for s in np.asarray(self_distance, np.float64)]
    m, k = x.shape[0], x.shape[2]
    level, p, n = np.full((m, m), np.inf), np.ones((m, m)), np.zeros((m, m), int)
    centre, seen = np.full((m, m), np.nan), np.full((m, m), np.inf)
    for i in range(m):
        for j in range(i, m):
            pool = own[i] if i == j else np.concatenate([own[i], own[j]])
            level[i, j] = level[j, i] = null_level(pool, alpha, k)
            n[i, j] = n[j, i] = pool.size
            if pool.size:
                centre[i, j] = centre[j, i] = pool.mean()
                seen[i, j] = seen[j, i] = pool.mean() + detectable(pool, k, alpha)
            if i != j:
                p[i, j] = p[j, i] = mean_p_value(x[i, j], pool, seed=i * m + j)
    distinguishable = (p <= alpha) & ~np.eye(m, dtype=bool)
    return PairNull(level, p, distinguishable, n, centre, seen)


def _relabellings(size: int, first: int, rng) -> np.ndarray:
    """Boolean masks ``[R, size]`` (True: in the first group of ``first`` runs), the identity first."""
    identity = np.arange(size) < first
    if math.comb(size, first) <= MAX_RELABELLINGS:
        masks = np.zeros((math.comb(size, first), size), bool)
        for r, chosen in enumerate(itertools.combinations(range(size), first)):
            masks[r, list(chosen)] = True
        return masks
    masks = np.zeros((MAX_RELABELLINGS, size), bool)
    masks[0] = identity
    for r in range(1, MAX_RELABELLINGS):
        masks[r, rng.permutation(size)[:first]] = True
    return masks


def group_permutation(distance, groups, *, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    r"""The seed null of every pair of groups of runs (module docstring): ``distance`` ``[M, M]``
    between runs, ``groups`` their group names (``M``); returns ``(names, p_value, floor)`` with
    ``[G, G]`` arrays (NaN on the diagonal and where no pair of runs of one group exists): the
    p-value and the smallest p-value the relabellings allow (the observed split of the runs, and
    its mirror image when the groups are of one size, over the number of relabellings).

    **Enforces**: the observed labelling is among the relabellings, so $p \ge$ ``floor``."""
    d = np.asarray(distance, np.float64)
    groups = [str(g) for g in groups]
    names = list(dict.fromkeys(groups))
    rng = np.random.default_rng(seed)
    p = np.full((len(names), len(names)), np.nan)
    floor = np.full((len(names), len(names)), np.nan)
    for a, b in itertools.combinations(range(len(names)), 2):
        runs = [k for k, g in enumerate(groups) if g == names[a]] + [k for k, g in enumerate(groups) if g == names[b]]
        first = groups.count(names[a])
        sub = d[np.ix_(runs, runs)]
        masks = _relabellings(len(runs), first, rng)
        same = masks[:, :, None] == masks[:, None, :]  # [R, n, n]: both runs in one group
        upper = np.triu(np.ones(sub.shape, bool), 1)
        within, between = same & upper, ~same & upper
        if not within[0].any():
            continue
        t = (np.sum(np.where(between, sub, 0.0), axis=(1, 2)) / between.sum(axis=(1, 2))
             - np.sum(np.where(within, sub, 0.0), axis=(1, 2)) / np.maximum(within.sum(axis=(1, 2)), 1))
        t = np.where(within.sum(axis=(1, 2)) > 0, t, -np.inf)
        p[a, b] = p[b, a] = float(np.mean(t >= t[0] - 1e-12 * max(abs(t[0]), 1.0)))
        split = np.all(masks == masks[0], axis=1) | np.all(masks != masks[0], axis=1)  # the same two sets of runs
        floor[a, b] = floor[b, a] = float(np.mean(split))
    return names, p, floor
