r"""Period-doubled cycles from flip points: starting points on the branch of $F^{2k}$.

At a flip of a branch of fixed points of $F^k$ (a multiplier $-1$ with eigenvector $v$), a cycle
of twice the period is born. Its points are fixed points of $F^{2k}$: the branch of $F^k$ is also a
branch of $F^{2k}$, whose multiplier there is $(-1)^2 = +1$, so for $F^{2k}$ the flip is a branch
point (a pitchfork, by the symmetry that $F^k$ swaps the two halves of the cycle) with the new
branch tangent to $(v, 0)$. [`across`][dynlab.analyses.continuation.switching.across] starts it; a
start that is still a fixed point of $F^k$ (it fell back onto the old branch) is dropped. On the new
branch, flips of $F^{2k}$ start cycles of period $4k$, and so on up to `max_period`.
"""

from __future__ import annotations

import numpy as np

from dynlab.analyses.continuation.detect import Located
from dynlab.analyses.continuation.multipliers import eigenvector
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.switching import across
from dynlab.analyses.continuation.system import FixedPoints, iterate

__all__ = ["PERIOD_TOL", "cycle_starts", "is_periodic"]

PERIOD_TOL = 1e-7
"""A point counts as a fixed point of $F^j$ when $\\lVert F^j(h) - h\\rVert_\\infty$ is below this."""


def is_periodic(F, j: int, x: np.ndarray) -> bool:
    """Whether $h$ of $x = (h, p)$ is a fixed point of $F^j$ (within [`PERIOD_TOL`][])."""
    h = np.asarray(iterate(F, j, x[:-1], x[-1]))
    return bool(np.max(np.abs(h - x[:-1])) < PERIOD_TOL)


def cycle_starts(F, located: Located, period: int, settings: ContinuationSettings,
                 dense: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Starting points (x, t) of the period-2k branch born at a flip of the branch of $F^k$."""
    _, v = eigenvector(FixedPoints(F, period), located.x, -1.0, settings)
    starts = across(FixedPoints(F, 2 * period), located.x, located.t, v, settings, dense)
    return [(x, t) for x, t in starts if not is_periodic(F, period, x)]
