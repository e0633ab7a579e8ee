r"""Two-parameter fold curves, continued by the minimally extended system, and their cusps.

A fold of $h \mapsto F(h, p, q)$ is a fixed point where $G_h = \partial F/\partial h - I$ is
singular. In two parameters the folds form curves in $(h, p, q)$, followed here as the zero set of
the **minimally extended system** (Govaerts 2000, §6.1):

$$R(h, p, q) = \begin{pmatrix} G(h, p, q) \\ \psi(h, p, q) \end{pmatrix} = 0, \qquad
  \begin{pmatrix} G_h & b \\ c^\top & 0 \end{pmatrix}
  \begin{pmatrix} v \\ \psi \end{pmatrix} = \begin{pmatrix} 0 \\ 1 \end{pmatrix},$$

$N + 1$ equations in $N + 2$ unknowns, continued in $q$ with the pseudo-arclength machinery of
[`branch`][dynlab.analyses.continuation.branch]. By Cramer's rule $\psi = \det G_h / \det B$
with $B$ the bordered matrix, which is nonsingular near the curve when $b$ and $c$ are close to the
left and right null vectors of $G_h$; so $\psi = 0$ exactly at folds, whatever $b, c$. They are
refreshed after each accepted point ($c \leftarrow v/\lVert v\rVert$, $b \leftarrow w/\lVert w\rVert$,
$w$ from the transposed system) so that $B$ stays well conditioned; the curve does not depend on them.

**Cusps.** A fold is a saddle-node with normal form $\dot\xi = \beta + a\,\xi^2$, where the
quadratic coefficient is

$$a = \tfrac12\, w^\top G_{hh}[v, v], \qquad G_h v = 0,\ w^\top G_h = 0,$$

($G_{hh}[v, v]$ by two nested Jacobian-vector products). Where $a$ changes sign along the fold
curve, two fold curves meet in a cusp (three fixed points collapse into one). It is located as a root
of $w^\top G_{hh}[v, v]$ in the arclength, to `locate_tol`, as the special points of a branch are.
The system is dense: $G_h$ is formed by `jax.jacfwd` and differentiated again for the corrector.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dynlab.analyses.continuation.branch import Curve, follow_both_ways, start
from dynlab.analyses.continuation.detect import bracket_root
from dynlab.analyses.continuation.multipliers import eigenvector
from dynlab.analyses.continuation.results import FoldCurve, SpecialPoint
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.system import FixedPoints, Residual, correct

__all__ = ["FoldPoints", "cusp_test", "fold_curve", "null_vectors"]

Map2 = Callable[[Float[Array, " n"], Float[Array, ""], Float[Array, ""]], Float[Array, " n"]]


def _bordered(gh, b, c):
    n = gh.shape[0]
    top = jnp.concatenate([gh, b[:, None]], axis=1)
    return jnp.concatenate([top, jnp.append(c, 0.0)[None]], axis=0), jnp.zeros(n + 1, gh.dtype).at[-1].set(1.0)


class FoldPoints(Residual):
    r"""The minimally extended system of folds, $x = (h, p, q)$, `aux` = $(b, c)$ (see the module)."""

    F2: object

    def __call__(self, x, aux):
        b, c = aux
        h, p, q = x[:-2], x[-2], x[-1]
        g = self.F2(h, p, q) - h
        gh = jax.jacfwd(lambda y: self.F2(y, p, q) - y)(h)
        mat, e = _bordered(gh, b, c)
        return jnp.append(g, jnp.linalg.solve(mat, e)[-1])


@eqx.filter_jit
def null_vectors(R: FoldPoints, x, aux):
    r"""$(v, w)$: the right and left null vectors of $G_h$ at a fold from the bordered systems, unit length."""
    b, c = aux
    h, p, q = x[:-2], x[-2], x[-1]
    gh = jax.jacfwd(lambda y: R.F2(y, p, q) - y)(h)
    mat, e = _bordered(gh, b, c)
    v = jnp.linalg.solve(mat, e)[:-1]
    w = jnp.linalg.solve(mat.T, e)[:-1]
    return v / jnp.linalg.norm(v), w / jnp.linalg.norm(w)


@eqx.filter_jit
def cusp_test(R: FoldPoints, x, aux):
    r"""$w^\top G_{hh}[v, v]$ at a fold (twice the normal-form coefficient; see the module)."""
    v, w = null_vectors(R, x, aux)
    h, p, q = x[:-2], x[-2], x[-1]

    def along(y):  # G_h(y) v, by one JVP
        return jax.jvp(lambda z: R.F2(z, p, q) - z, (y,), (v,))[1]

    return w @ jax.jvp(along, (h,), (v,))[1]


def fold_curve(F2: Map2, fold: SpecialPoint, q0: float, q_span: tuple[float, float],
               settings: ContinuationSettings = ContinuationSettings()) -> tuple[FoldCurve, tuple[SpecialPoint, ...]]:
    r"""The curve of folds through a located fold, continued in a second parameter $q$, and its cusps.

    Args:
        F2: The map $(h, p, q) \mapsto F(h, p, q)$, JAX-traceable; at $q = q_0$ it is the map in
            which `fold` was found.
        fold: A fold ([`SpecialPoint`][dynlab.analyses.continuation.results.SpecialPoint]), e.g.
            from [`continue_branch`][dynlab.analyses.continuation.continue_branch].
        q0: The second parameter at `fold`.
        q_span: `(q_min, q_max)`: the curve is followed both ways until $q$ leaves it.
        settings: Steps and tolerances (the system is always dense; see the module).

    Returns:
        The [`FoldCurve`][dynlab.analyses.continuation.results.FoldCurve] and its cusps
        (kind ``"cusp"``, with `q`; `multiplier` is 1, the fold's).

    Raises:
        ValueError: `fold` is not a fold of `F2` at $q_0$ (the corrector did not converge).
    """
    with jax.enable_x64(True):
        h0 = np.asarray(fold.h, np.float64)
        n = h0.shape[0]
        _, v = eigenvector(FixedPoints(lambda h, p: F2(h, p, q0), 1), np.append(h0, fold.p), 1.0, settings)
        R = FoldPoints(F2)
        aux = (jnp.asarray(v), jnp.asarray(v))
        row = np.zeros(n + 2)
        row[-1] = 1.0
        x_guess = np.append(h0, [fold.p, float(q0)])
        x0, ok, _ = correct(R, aux, x_guess, row, settings, True)
        if not ok:
            raise ValueError(f"no fold of F2 near the given fold at q = {q0}: the corrector did not converge")

        def refresh(x, _aux):
            v, w = null_vectors(R, x, _aux)
            return (w, v)

        aux = refresh(x0, aux)
        begun = start(R, x0, row, settings, True, aux)
        if begun is None:
            raise ValueError(f"the fold curve through the given fold has no tangent at q = {q0}")
        x0, t0 = begun
        curve = follow_both_ways(R, x0, t0, (float(q_span[0]), float(q_span[1])), settings, True, aux, refresh)
        cusps = _cusps(R, curve, refresh, settings)
        return FoldCurve(p=curve.x[:, -2].copy(), q=curve.x[:, -1].copy(), h=curve.x[:, :-2].copy()), cusps


def _cusps(R: FoldPoints, curve: Curve, refresh, settings: ContinuationSettings) -> tuple[SpecialPoint, ...]:
    auxes = []
    aux = None
    for x in curve.x:  # bordering vectors per point, each from its neighbour's (as when it was found)
        if aux is None:
            e = np.zeros(x.shape[0] - 2)
            e[np.argmax(np.abs(curve.t[0][:-2]))] = 1.0
            aux = refresh(x, (jnp.asarray(curve.t[0][:-2] + e), jnp.asarray(curve.t[0][:-2] + e)))
        aux = refresh(x, aux)
        auxes.append(aux)
    tests = np.array([float(cusp_test(R, x, a)) for x, a in zip(curve.x, auxes)])
    found = []
    for i in np.flatnonzero(tests[:-1] * tests[1:] < 0):
        x_i, t_i, aux_i = curve.x[i], curve.t[i], auxes[i]

        def at(s, x_i=x_i, t_i=t_i, aux_i=aux_i):
            x, ok, _ = correct(R, aux_i, x_i + s * t_i, t_i, settings, True)
            return (x, float(cusp_test(R, x, refresh(x, aux_i)))) if ok else None

        end_a = (x_i, tests[i])
        best = bracket_root(at, lambda end: end[1], end_a, float(t_i @ (curve.x[i + 1] - x_i)), settings.locate_tol / 2)
        if best is None:
            continue
        x = best[0]
        found.append(SpecialPoint(kind="cusp", p=float(x[-2]), h=x[:-2].copy(), multiplier=complex(1.0), branch=0,
                                  index=int(i), q=float(x[-1])))
    return tuple(found)
