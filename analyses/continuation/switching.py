r"""Branch switching at a branch point: starting points on the branches that cross there.

At a branch point $x^*$ of $G(h, p) = F^k(h, p) - h$ a real multiplier of
$\partial F^k/\partial h$ is 1 with eigenvector $v$ ($G_h v = 0$), so the kernel of
$G_x = (G_h \; G_p)$ is two-dimensional: it holds the tangent $t_1$ of the branch being followed
and $(v, 0)$ (in a pitchfork or transcritical bifurcation, $G_p$ lies in the range of $G_h$).
Every branch through $x^*$ is tangent to this plane. The direction across,

$$d = \frac{(v, 0) - \big((v, 0)^\top t_1\big)\, t_1}{\lVert\cdot\rVert},$$

is the tangent of the new branch of a symmetric pitchfork (which is vertical in $p$ at $x^*$) and
leaves a transcritical one at a nonzero angle. From $x^* \pm \varepsilon d$, Newton on
$G(x) = 0,\ d^\top(x - x^* \mp \varepsilon d) = 0$ lands on the crossing branch (the followed
branch, tangent to $t_1 \perp d$, meets that hyperplane only at distance $O(\sqrt\varepsilon)$), one
point on each side: both halves of a pitchfork. The same construction, applied to $F^{2k}$ with
the eigenvector of the multiplier $-1$, starts the period-doubled cycles of a flip
([`dynlab.analyses.continuation.cycles`][]).
"""

from __future__ import annotations

import numpy as np

from dynlab.analyses.continuation.branch import start
from dynlab.analyses.continuation.detect import Located
from dynlab.analyses.continuation.multipliers import eigenvector
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.system import FixedPoints

__all__ = ["across", "branch_point_starts"]


def across(R: FixedPoints, x_star: np.ndarray, t1: np.ndarray, v: np.ndarray, settings: ContinuationSettings,
           dense: bool, eps: float | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Corrected points on the curve of `R` at $x^* \\pm \\varepsilon d$ (see the module), each with its
    tangent oriented away from $x^*$; points that fall back onto $x^*$ are dropped."""
    eps = float(settings.ds) if eps is None else eps
    d = np.append(v, 0.0)
    d = d - (d @ t1) * t1
    d /= np.linalg.norm(d)
    found = []
    for sign in (1.0, -1.0):
        begun = start(R, x_star + sign * eps * d, sign * d, settings, dense)
        if begun is not None and np.linalg.norm(begun[0] - x_star) > eps / 2:
            found.append(begun)
    return found


def branch_point_starts(F, located: Located, period: int, settings: ContinuationSettings,
                        dense: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """Starting points (x, t) of the branches crossing the branch of $F^k$ at a located branch point."""
    R = FixedPoints(F, period)
    _, v = eigenvector(R, located.x, 1.0, settings)
    return across(R, located.x, located.t, v, settings, dense)
