r"""Continuation of fixed points through their bifurcations: the numerical core on any map.

For a map $h \mapsto F(h, p)$ on $\mathbb{R}^N$ with a scalar parameter $p$, the fixed points
$G(h, p) = F(h, p) - h = 0$ form curves (branches) in $(h, p)$. This package follows them by
pseudo-arclength continuation and finds where they bifurcate:

- [`settings`][dynlab.analyses.continuation.settings] — [`ContinuationSettings`][], every default once;
- [`results`][dynlab.analyses.continuation.results] — [`Branch`][], [`SpecialPoint`][], [`Diagram`][],
  [`FoldCurve`][]: frozen values of NumPy arrays;
- [`system`][dynlab.analyses.continuation.system] — the curve $R(x) = 0$ and the bordered
  linear algebra of its corrector, dense (`jax.jacfwd`) or matrix-free (JVPs, lineax GMRES);
- [`multipliers`][dynlab.analyses.continuation.multipliers] — the eigenvalues of
  $\partial F^k/\partial h$ along a branch (all of them, or the leading ones by Arnoldi);
- [`branch`][dynlab.analyses.continuation.branch] — the predictor, corrector and adaptive steps,
  (the curve, before any bifurcation is looked for);
- [`detect`][dynlab.analyses.continuation.detect] — test functions of folds, flips,
  Neimark–Sacker points and branch points, and their location to `locate_tol` in $p$;
- [`switching`][dynlab.analyses.continuation.switching] — the branches crossing at a branch point;
- [`cycles`][dynlab.analyses.continuation.cycles] — period-doubled cycles from flip points;
- [`trace`][dynlab.analyses.continuation.trace] — [`trace`][]: the whole diagram from a set of
  fixed points (merging branches found twice);
- [`fold_curve`][dynlab.analyses.continuation.fold_curve] — [`fold_curve`][]: folds continued in a
  second parameter (the minimally extended system), with their cusps.

The functions take a JAX-traceable map `F(h, p) -> h` and return NumPy float64 values; they run
inside `jax.enable_x64(True)` themselves (a map closing over float32 arrays is promoted). No
option checking happens here: a registered analysis checks its options where they are parsed.

Beyond the API of issue #49's plan (names and signatures as planned), [`ContinuationSettings`][]
has `full_spectrum_max` (every multiplier up to this N, the leading ones by Arnoldi above),
`max_branches` (a bound on [`trace`][]'s work) and `krylov_tol` (GMRES); [`fold_curve`][] returns a
[`FoldCurve`][] (`p`, `q`, `h`) and cusps as [`SpecialPoint`][]s with `q` set and multiplier 1.
Branch switching, cycles and fold curves use a Jacobian's eigenvector (all paths) and, for fold
curves, a dense $G_h$ (any N, at $O(N^3)$ per step).
"""

from dynlab.analyses.continuation.fold_curve import fold_curve
from dynlab.analyses.continuation.results import SPECIAL_KINDS, Branch, Diagram, FoldCurve, SpecialPoint
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.trace import continue_branch, trace

__all__ = ["SPECIAL_KINDS", "Branch", "ContinuationSettings", "Diagram", "FoldCurve", "SpecialPoint", "continue_branch",
           "fold_curve", "trace"]
