r"""The settings of a continuation run: one frozen value, every default once, here.

Steps are measured in pseudo-arclength: the Euclidean length in the space of $x = (h, p)$ (the
state and the parameter together, unweighted), so a step of `ds` moves the state and the parameter
by at most `ds` together.
"""

from __future__ import annotations

import dataclasses

__all__ = ["ContinuationSettings"]


@dataclasses.dataclass(frozen=True)
class ContinuationSettings:
    """How branches are followed, corrected, analysed and where their special points are located.

    Attributes:
        ds: The first pseudo-arclength step.
        ds_min: The smallest step: a branch whose corrector fails at this step ends there.
        ds_max: The largest step: steps grow by 1.5x after an easy correction, up to this.
        max_points: Points per direction of a branch (a branch has at most twice this many).
        newton_tol: The corrector stops when its update's largest component is below this.
        newton_max_iter: Corrector iterations before the step is rejected and halved.
        locate_tol: The largest |Δp| of a located special point (the arclength bracket is closed to
            this; the tangent is a unit vector, so |dp/ds| <= 1).
        n_multipliers: Leading multipliers (by modulus) kept per point in a [`Branch`][].
        dense_max: Dense Jacobians (``jax.jacfwd``, LU solves) up to this state dimension; above,
            matrix-free Jacobian-vector products and GMRES (lineax).
        full_spectrum_max: Every multiplier by a full eigendecomposition up to this state
            dimension (exact counts of crossings); above, the `n_multipliers` leading ones by
            Arnoldi (ARPACK) on Jacobian-vector products.
        max_period: Period-k cycles are continued from flip points for k = 2, 4, ... up to this.
        max_branches: Branches traced by [`trace`][] at most (seeds, switched branches, cycles).
        krylov_tol: The relative and absolute tolerance of the matrix-free GMRES solves.
    """

    ds: float = 0.01
    ds_min: float = 1e-6
    ds_max: float = 0.1
    max_points: int = 2000
    newton_tol: float = 1e-10
    newton_max_iter: int = 8
    locate_tol: float = 1e-8
    n_multipliers: int = 6
    dense_max: int = 1024
    full_spectrum_max: int = 256
    max_period: int = 8
    max_branches: int = 64
    krylov_tol: float = 1e-12
