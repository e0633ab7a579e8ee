r"""The bifurcation diagram from a set of fixed points: every branch through them, and beyond.

[`trace`][] keeps a queue of starting points. Each seed (a fixed point at $p_0$, stable or not)
starts a branch of $F$ followed both ways across `p_span` ([`follow_both_ways`][dynlab.analyses.continuation.branch.follow_both_ways]);
on it, branch points queue the crossing branches ([`switching`][dynlab.analyses.continuation.switching])
and flips queue the period-doubled cycles ([`cycles`][dynlab.analyses.continuation.cycles]),
whose own flips queue cycles of twice their period, up to `max_period`.

**Branches found twice are merged**: before a start is followed, it is compared with every
branch of the same period: where that branch crosses the start's $p$ (between two consecutive
points), the point interpolated there is corrected at fixed $p$ by Newton; if it lands on the start
(within [`SAME_POINT`][]), the start lies on a known branch and is dropped. For a cycle of period
k, each of its k points is compared, since one cycle shows up as k points of $F^k$ (the branch of
a period-2 cycle holds both of them). A special point found again on another branch (the branch
point of a pitchfork, seen from both branches; a flip, seen as a branch point of $F^2$), or at
another point of the same cycle (a flip of a 2-cycle shows at both of its points), is kept once,
where it was found first.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import jax
import numpy as np
from jaxtyping import ArrayLike

from dynlab.analyses.continuation.branch import Curve, Map, follow_both_ways, start
from dynlab.analyses.continuation.cycles import cycle_starts, is_periodic
from dynlab.analyses.continuation.detect import analyse
from dynlab.analyses.continuation.results import Branch, Diagram, SpecialPoint
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.switching import branch_point_starts
from dynlab.analyses.continuation.system import FixedPoints, correct, iterate

__all__ = ["SAME_POINT", "on_branch", "trace"]

SAME_POINT = 1e-6
"""Two points closer than this (largest component) are the same point."""


@dataclasses.dataclass(frozen=True)
class _Start:
    x: np.ndarray
    t: np.ndarray | None  # None: a seed, whose tangent is found at fixed p
    period: int


def on_branch(R: FixedPoints, x: np.ndarray, curve: Curve, settings: ContinuationSettings, dense: bool) -> bool:
    """Whether the point $x$ lies on the followed `curve` of the same map (see the module)."""
    p = x[-1]
    ps = curve.x[:, -1]
    row = np.zeros_like(x)
    row[-1] = 1.0
    for i in np.flatnonzero((ps[:-1] - p) * (ps[1:] - p) <= 0):
        a, b = curve.x[i], curve.x[i + 1]
        frac = 0.5 if ps[i + 1] == ps[i] else (p - ps[i]) / (ps[i + 1] - ps[i])
        guess = a + frac * (b - a)
        if np.linalg.norm(guess - x) > 2 * np.linalg.norm(b - a) + SAME_POINT:
            continue  # too far for the chord to be near x
        y, ok, _ = correct(R, None, guess, row, settings, dense)
        if ok and np.max(np.abs(y - x)) < SAME_POINT:
            return True
    return False


def _images(F, period: int, x: np.ndarray) -> list[np.ndarray]:
    """The k points of the cycle through $x$, as points $(F^j(h), p)$, j = 0..k-1."""
    out, h = [x], x[:-1]
    for _ in range(period - 1):
        h = np.asarray(iterate(F, 1, h, x[-1]), np.float64)
        out.append(np.append(h, x[-1]))
    return out


def _known(points: list[SpecialPoint], pt: SpecialPoint, F, period: int) -> bool:
    """Whether `pt`, or another point of its cycle (the same bifurcation), is among `points`."""
    images = [y[:-1] for y in _images(F, period, np.append(pt.h, pt.p))]
    return any(abs(q.p - pt.p) < SAME_POINT and np.max(np.abs(q.h - h)) < SAME_POINT for q in points for h in images)


def trace(F: Map, seeds: ArrayLike, p0: float | ArrayLike, p_span: tuple[float, float],
          settings: ContinuationSettings = ContinuationSettings(), *, switch: bool = True,
          cycles: bool = True) -> Diagram:
    r"""Every branch through the seeds within `p_span`, switched branches and cycles included.

    Args:
        F: The map $(h, p) \mapsto F(h, p)$ on $\mathbb{R}^N$, JAX-traceable.
        seeds: `[S, N]`, fixed points of $F$ at $p_0$ (or close guesses), stable and unstable.
        p0: The parameter of the seeds: one for all, or `[S]`, one per seed (seeds found at
            several values of $p$, such as both ends of the span, so that branches which never
            reach one value are found from another; a seed on a branch already followed starts nothing).
        p_span: `(p_min, p_max)`: every branch is followed both ways until $p$ leaves it.
        settings: Steps, tolerances, `max_period`, `max_branches`, the dense/matrix-free switch.
        switch: Follow the branches crossing at branch points.
        cycles: Follow the period-2k cycles born at flips (k up to `max_period` / 2).

    Returns:
        The [`Diagram`][dynlab.analyses.continuation.results.Diagram]: branches in the order found
        (seeds first, in their order, unless merged), special points naming them by index. A seed
        where the corrector does not converge starts nothing.
    """
    with jax.enable_x64(True):
        seeds = np.atleast_2d(np.asarray(seeds, np.float64))
        n = seeds.shape[1]
        dense = n <= settings.dense_max
        span = (float(p_span[0]), float(p_span[1]))
        ps = np.broadcast_to(np.asarray(p0, np.float64), seeds.shape[:1])
        queue = deque(_Start(np.append(s, p), None, 1) for s, p in zip(seeds, ps))
        curves: list[tuple[int, Curve]] = []
        branches: list[Branch] = []
        points: list[SpecialPoint] = []
        e_p = np.zeros(n + 1)
        e_p[-1] = 1.0
        while queue and len(branches) < settings.max_branches:
            st = queue.popleft()
            R = FixedPoints(F, st.period)
            if st.t is None:
                begun = start(R, st.x, e_p, settings, dense)
                if begun is None:
                    continue
                x0, t0 = begun
            else:
                x0, t0 = st.x, st.t
            if st.period > 1 and is_periodic(F, st.period // 2, x0):
                continue
            if any(k == st.period and on_branch(R, y, c, settings, dense)
                   for k, c in curves for y in _images(F, st.period, x0)):
                continue
            curve = follow_both_ways(R, x0, t0, span, settings, dense)
            index = len(branches)
            branch, located = analyse(R, curve, settings, dense, index, tuple(points))
            curves.append((st.period, curve))
            branches.append(branch)
            for lp in located:
                if _known(points, lp.point, F, st.period):
                    continue
                points.append(lp.point)
                if lp.point.kind == "branch-point" and switch:
                    queue.extend(_Start(x, t, st.period) for x, t in branch_point_starts(F, lp, st.period, settings, dense))
                if lp.point.kind == "flip" and cycles and 2 * st.period <= settings.max_period:
                    queue.extend(_Start(x, t, 2 * st.period) for x, t in cycle_starts(F, lp, st.period, settings, dense))
        return Diagram(branches=tuple(branches), points=tuple(points))


def continue_branch(F: Map, h0: ArrayLike, p0: float, p_span: tuple[float, float],
                    settings: ContinuationSettings = ContinuationSettings()) -> tuple[Branch, tuple[SpecialPoint, ...]]:
    r"""The branch of fixed points of $F$ through $(h_0, p_0)$, within `p_span`, and its special points.

    Args:
        F: The map $(h, p) \mapsto F(h, p)$ on $\mathbb{R}^N$, JAX-traceable.
        h0: `[N]`, a fixed point (or a close guess: it is first corrected at $p_0$) at $p_0$.
        p0: The parameter at the start.
        p_span: `(p_min, p_max)`; the branch is followed both ways until $p$ leaves it.
        settings: Steps, tolerances and the dense/matrix-free switch.

    Returns:
        The [`Branch`][dynlab.analyses.continuation.results.Branch] (period 1) and its located
        special points (folds, flips, Neimark–Sacker points, branch points; `branch` = 0).

    Raises:
        ValueError: `h0` is not near a fixed point at $p_0$ (the corrector did not converge).
    """
    with jax.enable_x64(True):
        h0 = np.asarray(h0, np.float64).ravel()
        R = FixedPoints(F, 1)
        dense = h0.shape[0] <= settings.dense_max
        row = np.zeros(h0.shape[0] + 1)
        row[-1] = 1.0
        begun = start(R, np.append(h0, float(p0)), row, settings, dense)
        if begun is None:
            raise ValueError(f"no fixed point of F near h0 at p = {p0}: the corrector did not converge")
        x0, t0 = begun
        curve = follow_both_ways(R, x0, t0, tuple(map(float, p_span)), settings, dense)
        branch, located = analyse(R, curve, settings, dense, index=0)
        return branch, tuple(lp.point for lp in located)
