r"""The yardsticks of DSA distances: how far DSA puts a model from itself by chance, and whether
two models (or two groups of runs) are further apart than that.

A DSA distance is estimated from finitely many trials, so a model is not at distance 0 from
itself under another draw of its inputs (0.1-0.5 rad for the default 16 trials). Two nulls:

- **Input draws** ([`pair_null`][]). The distance matrix drives every model with one draw of
  the inputs; besides, every model is driven by $2K$ draws of its own, taken in disjoint pairs,
  and its $K$ **self-distances** are the distances between its operators of the two draws of a
  pair: independent values, each distributed as the distance of the model from itself under two
  independent draws. For two runs $a, b$ the null sample $S_{ab}$ is their pooled self-distances
  ($n = 2K$ values); the distance $d_{ab}$ is tested by rank (a Monte-Carlo test, exact when
  $d_{ab}$ and the values of $S_{ab}$ are exchangeable, as they are for one model under
  independent draws; distances that share a draw are correlated, and a rank test against them
  rejects too often, so the pairs are disjoint),

  $$ p_{ab} = \frac{1 + \#\{s \in S_{ab} : s \ge d_{ab}\}}{n + 1}, $$

  and the pair is **distinguishable** when $p_{ab} \le \alpha$, i.e. when $d_{ab}$ exceeds the
  **null level**, the $k$-th smallest of $S_{ab}$ with $k = \lceil (1-\alpha)(n+1) \rceil$
  ([`null_level`][]; $+\infty$ when $k > n$: too few draws to reach level $\alpha$, e.g.
  $n \ge 19$ values are needed at $\alpha = 0.05$). $d_{ab}$ is computed on one shared draw while
  the self-distances are between independent draws, whose estimation errors add up; so for two
  models with the same dynamics $d_{ab}$ is, if anything, smaller than $S_{ab}$, and the test is
  conservative for them (a genuinely different pair needs $d_{ab}$ beyond the null level).
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

import itertools
import math
from typing import NamedTuple

import numpy as np

__all__ = ["ALPHA", "PairNull", "group_permutation", "null_level", "null_p_value", "pair_null"]

ALPHA = 0.05
"""The level of the "distinguishable" verdict: a pair is called distinguishable when $p \\le$ ``ALPHA``."""

MAX_RELABELLINGS = 20_000
"""[`group_permutation`][] enumerates every relabelling up to this many; beyond, it draws this many
at random (the identity always included)."""


def null_level(null, alpha: float = ALPHA) -> float:
    r"""The smallest distance a rank test at level ``alpha`` calls beyond the ``null`` sample
    ($n$ values): its $k$-th smallest value with $k = \lceil (1-\alpha)(n+1)\rceil$, or $+\infty$
    when $k > n$ (with fewer than $1/\alpha - 1$ values no distance reaches the level).

    **Enforces**: ``d > null_level(s)`` exactly when ``null_p_value(d, s) <= alpha`` (for ``d``
    not tied with a value of ``s``)."""
    s = np.sort(np.asarray(null, np.float64).ravel())
    k = math.ceil((1.0 - alpha) * (s.size + 1) - 1e-12)
    return float(s[k - 1]) if 1 <= k <= s.size else math.inf


def null_p_value(distance: float, null) -> float:
    r"""The rank p-value of ``distance`` against the ``null`` sample: $(1 + \#\{s \ge d\}) / (n + 1)$."""
    s = np.asarray(null, np.float64).ravel()
    return float((1 + np.sum(s >= distance)) / (s.size + 1))


class PairNull(NamedTuple):
    """[`pair_null`][] of ``M`` runs: ``[M, M]`` arrays."""

    level: np.ndarray
    """The null level of each pair (radians): distances above it are distinguishable."""
    p_value: np.ndarray
    """The rank p-value of each pair's distance against the pair's pooled self-distances."""
    distinguishable: np.ndarray
    """``p_value <= alpha`` (False on the diagonal)."""
    samples: np.ndarray
    """How many self-distances each pair's null pools."""


def pair_null(distance, self_distance, alpha: float = ALPHA) -> PairNull:
    """The input-draw null of every pair of runs (module docstring): ``distance`` ``[M, M]``, the
    runs' ``self_distance`` ``[M, P]`` (NaN where missing); a pair pools the self-distances of
    both runs (of one run on the diagonal)."""
    d = np.asarray(distance, np.float64)
    own = [s[np.isfinite(s)] for s in np.asarray(self_distance, np.float64)]
    m = d.shape[0]
    level, p, n = np.full((m, m), np.inf), np.ones((m, m)), np.zeros((m, m), int)
    for i in range(m):
        for j in range(m):
            pool = own[i] if i == j else np.concatenate([own[i], own[j]])
            level[i, j], n[i, j] = null_level(pool, alpha), pool.size
            p[i, j] = null_p_value(d[i, j], pool)
    distinguishable = (p <= alpha) & ~np.eye(m, dtype=bool)
    return PairNull(level, p, distinguishable, n)


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
        t = (np.sum(between * sub, axis=(1, 2)) / between.sum(axis=(1, 2))
             - np.sum(within * sub, axis=(1, 2)) / np.maximum(within.sum(axis=(1, 2)), 1))
        t = np.where(within.sum(axis=(1, 2)) > 0, t, -np.inf)
        p[a, b] = p[b, a] = float(np.mean(t >= t[0] - 1e-12 * max(abs(t[0]), 1.0)))
        split = np.all(masks == masks[0], axis=1) | np.all(masks != masks[0], axis=1)  # the same two sets of runs
        floor[a, b] = floor[b, a] = float(np.mean(split))
    return names, p, floor
