r"""What continuation returns: branches of fixed points, their special points, and the diagram.

Plain frozen values of NumPy float64 arrays (no JAX arrays), so that they can be stored, compared
and turned into a dataset without a device.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["SPECIAL_KINDS", "Branch", "Diagram", "FoldCurve", "SpecialPoint"]

SPECIAL_KINDS = ("fold", "flip", "neimark-sacker", "branch-point", "cusp")
"""The kinds of [`SpecialPoint`][]: fold (a real multiplier through +1, the branch turns back in
$p$), flip (a real multiplier through $-1$), Neimark–Sacker (a complex pair through $|\\mu| = 1$),
branch point (branches cross: pitchfork or transcritical), cusp (two fold curves meet)."""


@dataclasses.dataclass(frozen=True)
class Branch:
    """A branch of fixed points of $F^k$, ordered along its arclength.

    Attributes:
        p: `[n]`, the parameter at each point.
        h: `[n, N]`, the state at each point.
        multipliers: `[n, n_multipliers]` complex, the leading eigenvalues of
            $\\partial F^k/\\partial h$, by modulus, descending (padded with NaN when N is smaller).
        n_unstable: `[n]`, how many multipliers have $|\\mu| > 1$ (all of them up to `full_spectrum_max`;
            above, among the leading ones only, so a lower bound when every leading one is unstable).
        period: k, for a branch of fixed points of $F^k$ (period-k cycles of $F$).
    """

    p: np.ndarray
    h: np.ndarray
    multipliers: np.ndarray
    n_unstable: np.ndarray
    period: int = 1


@dataclasses.dataclass(frozen=True)
class SpecialPoint:
    """A located bifurcation on a branch (or, for a cusp, on a fold curve).

    Attributes:
        kind: One of [`SPECIAL_KINDS`][].
        p: The parameter there (located to `locate_tol`).
        h: `[N]`, the state there.
        multiplier: The multiplier that crossed ($+1$, $-1$, or on the unit circle; 1 for a cusp, a fold).
        branch: The index of the branch in its [`Diagram`][] (0 from [`continue_branch`][] and
            [`fold_curve`][]).
        index: The point lies between the branch's points `index` and `index + 1`.
        q: The second parameter (fold curves and cusps), else None.
    """

    kind: str
    p: float
    h: np.ndarray
    multiplier: complex
    branch: int
    index: int
    q: float | None = None


@dataclasses.dataclass(frozen=True)
class Diagram:
    """Every branch traced from a set of seeds, and the special points on them.

    Attributes:
        branches: The branches (fixed points of F, branches switched onto, period-k cycles).
        points: The special points, each naming its branch by index into `branches`.
    """

    branches: tuple[Branch, ...]
    points: tuple[SpecialPoint, ...]


@dataclasses.dataclass(frozen=True)
class FoldCurve:
    """A curve of folds in two parameters $(p, q)$, ordered along its arclength.

    Attributes:
        p: `[n]`, the first parameter at each point.
        q: `[n]`, the second parameter at each point.
        h: `[n, N]`, the state at each point (where $\\partial F/\\partial h$ has a multiplier 1).
    """

    p: np.ndarray
    q: np.ndarray
    h: np.ndarray
