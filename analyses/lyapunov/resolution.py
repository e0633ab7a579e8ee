r"""Exponents a run cannot tell apart, and how far up their intervals then reach.

A QR run estimates $\lambda_i$ from the growth of the $i$-th column of its frame, which turns
into the $i$-th Oseledets direction only as fast as the gaps allow. By Cauchy–Binet, a frame
$Q_0$ of $k$ columns grows its $k$-volume under a product with exponents $\lambda_j$ as

$$\mathrm{vol}_k(M_t Q_0)^2 = \sum_{|I| = k} \det(Q_0[I, :])^2\, e^{2t \sum_{j \in I} \lambda_j},$$

so the local growth rate is a weighted mean of the subsets' sums whose weight on any subset
other than the top one decays as $e^{-g t}$, $g$ the gap it loses to the top. Until then the
partial sums $\lambda_1 + \dots + \lambda_i$ come out low, and each estimate of a cluster of
nearly equal exponents is a mixture of its members: biased by up to their gaps. An interval over
realisations does not show it (every realisation shares it), nor does the MSER burn-in rule
when $1/g$ is much longer than the run (the drift is then a steady offset, not a trend).

**The rule.** Adjacent exponents are resolved when the frame has separated them over the
window: the weight left on the neighbour, averaged over the $T$ steps of the window after $B$
steps of burn-in,

$$w(g) = \frac{1}{T}\int_B^{B+T} e^{-g t}\, dt = e^{-gB}\, \frac{1 - e^{-gT}}{gT}
\qquad (g = \hat\lambda_i - \hat\lambda_{i+1};\ w \to 1 \text{ as } g \to 0),$$

is below $e^{-c}$, $c$ = [`RESOLUTION`][] (5%). A run of unresolved neighbours is a cluster.
Its truths are ordered, $\lambda_j \ge \lambda_i$ for $j$ above $i$, and its estimates come out
low, not high: the partial sums are underestimated while the frame mixes (above), most for the
last members, which also mix with the exponents below $k$ that the run does not see. So each
member's upper bound is raised to the highest upper bound of the members above it in its
cluster ([`widened`][]), $u_i' = \max_{j \le i} u_j$, which holds $\lambda_i \le \lambda_j \le u_j$
whenever any of them covers; its lower bound and the first member's interval are kept, and
resolved exponents keep their own.

The Lorenz flow at $dt = 0.01$ ($g = 0.009$ per step) is resolved after 300 steps of
burn-in and 2,700 in the window ($w = 0.003$). The last computed exponent may still mix with
$\lambda_{k+1}$, which the run does not see.

Measured on a fresh 64-neuron ARU under the adding task (its 64 controller modes give exponents
within $10^{-4}$ of one another; truth from float64 runs of 80,000 steps, within
$2.4\times10^{-6}$ of runs of 160,000; `benchmarks/coverage.py`): the default analysis with
$k = 4$ (2,000 steps, repeated over 4,000, burn-in 3,000) gave exponents 2-4 biased by $-5.8$,
$-9.0$ and $-24.6\times10^{-5}$ against half-widths of 7-15 $\times10^{-5}$, and $\lambda_1$ by
$+0.1\times10^{-5}$. With their own
intervals the four together covered 0.604 of 800; with the raised upper bounds 0.981 of 800, and
$\lambda_1$ 0.930 of 200. A symmetric hull of each cluster (tried first) covered $\lambda_1$ 0.995, five
times wider than needed. The quick start's 13 models x 16 exponents at their fixed points cover
0.981 of 208, a trained ARU's resolved exponents 0.960 of 800, unchanged.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxtyping import ArrayLike

from dynlab.statistics import Interval

__all__ = ["RESOLUTION", "clusters", "widened"]

RESOLUTION = float(np.log(20))
r"""$c = \ln 20$: adjacent exponents are resolved when the frame's mean weight on the neighbour
over the window, $w(g)$, is below $e^{-c}$ = 5%. A weight $w$ leaves a bias of about $w g$ at
most: the quick start's exponents 13 and 14 ($g = 3\times10^{-3}$ after 1,050 steps of burn-in,
$w = 1.4\%$) may be off by $4\times10^{-5}$, and a 1% threshold, tried first, joined them in a
cluster whose interval was $\pm 1.5\times10^{-3}$."""


def clusters(estimate: ArrayLike, burn_in: int, window: int, resolution: float = RESOLUTION) -> np.ndarray:
    r"""The cluster of each exponent: the 1-based index of the first exponent of its run of
    unresolved neighbours ($w(\hat\lambda_i - \hat\lambda_{i+1}) \ge e^{-c}$ after ``burn_in``
    steps, over a ``window`` of steps; ``estimate`` in descending order; a gap $\le 0$ is
    unresolved, a NaN one resolved). ``[k]`` integers; ``1, 2, …, k`` when all are resolved."""
    lam = np.asarray(estimate, float)
    gap = lam[:-1] - lam[1:]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        g = np.where(gap > 0, gap, 0.0)
        spread = np.where(g * window > 0, -np.expm1(-g * window) / (g * window), 1.0)
        weight = np.exp(-g * burn_in) * spread
    resolved = np.isnan(gap) | (weight < np.exp(-resolution))
    starts = np.concatenate([[True], resolved])
    index = np.arange(1, lam.size + 1)
    return np.maximum.accumulate(np.where(starts, index, 0))


def widened(interval: Interval, groups: ArrayLike) -> Interval:
    """``interval`` (over exponents, in descending order) with each exponent's upper bound raised to the
    highest upper bound of the members above it in its cluster ([`clusters`][]); lower bounds and
    estimates unchanged. Where every exponent is its own cluster, ``interval`` itself."""
    groups = np.asarray(groups)
    if np.array_equal(groups, np.arange(1, groups.size + 1)):
        return interval
    high = np.array(interval.high, float)
    for g in np.unique(groups):
        members = groups == g
        high[members] = np.fmax.accumulate(high[members])
    return dataclasses.replace(interval, high=high, method=f"{interval.method}; the upper bound of an exponent the "
                                                         "frame has not separated from those above it is theirs")
