r"""The curve being followed, and the linear algebra of its corrector: dense or matrix-free.

Continuation follows the zero set of a smooth map $R: \mathbb{R}^{M+1} \to \mathbb{R}^M$, a
curve in $x = (y, \lambda)$ whose last component $\lambda$ is the continuation parameter:

- fixed points of $F^k$ ([`FixedPoints`][]): $y = h \in \mathbb{R}^N$, $\lambda = p$,
  $R(h, p) = F^k(h, p) - h$ (period-k cycles of $F$ for $k > 1$);
- folds in two parameters ([`dynlab.analyses.continuation.fold_curve`][]): $y = (h, p)$,
  $\lambda = q$, and $R$ adds a test function that vanishes at folds.

Every linear solve is with the **bordered Jacobian**

$$A(x; r) = \begin{pmatrix} \partial R/\partial x(x) \\ r^\top \end{pmatrix}
  \in \mathbb{R}^{(M+1)\times(M+1)},$$

whose last row $r$ is the previous tangent (pseudo-arclength), $e_\lambda$ (a point at fixed
$\lambda$) or a switching direction. It is nonsingular at regular points *and* at folds, which is why
continuation passes folds that stop natural continuation in $\lambda$. Two ways to solve it:

- **dense** ($M \le$ `dense_max`): $\partial R/\partial x$ by `jax.jacfwd`, an LU solve;
- **matrix-free** (above): $A v$ from one Jacobian-vector product (`jax.linearize`), GMRES
  (lineax) on it; no $M \times M$ matrix is ever formed.

Dense, the whole Newton corrector (a `lax.while_loop`) and the tangent are `eqx.filter_jit`-compiled
once per residual and shape (the residual's arrays, such as a model's weights, are traced, so a new
model of the same shapes does not recompile). Matrix-free, one bordered GMRES solve is compiled
([`krylov_solve`][]) and the Newton iterations run in Python around it: GMRES inside a compiled
Newton loop took seconds more to compile, and each iteration is costly enough that the loop's
overhead does not matter.
Everything here expects float64 arrays: call inside `with jax.enable_x64(True):`, as the public
functions of this package do.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, Float, PyTree

__all__ = ["FixedPoints", "Residual", "as_float64", "bordered_logdet", "correct", "corrector", "iterate", "krylov_solve", "residual", "solver_options", "state_jacobians",
           "tangent", "unit_tangent"]

GMRES_RESTART = 40
"""Krylov vectors kept between GMRES restarts (memory $40 (M+1)$ numbers)."""


class Residual(eqx.Module):
    r"""A map $R: \mathbb{R}^{M+1} \to \mathbb{R}^M$ whose zero set is the curve to follow."""

    @abc.abstractmethod
    def __call__(self, x: Float[Array, " m1"], aux: PyTree) -> Float[Array, " m"]:
        """The residual at $x = (y, \\lambda)$; `aux` holds values that the curve does not depend on
        (bordering vectors), updated between steps."""


def iterate(F, k: int, h, p):
    """$F^k(h, p)$: the map applied k times at one parameter (k is small, so unrolled)."""
    for _ in range(k):
        h = F(h, p)
    return h


class FixedPoints(Residual):
    r"""Fixed points of $F^k$: $R(h, p) = F^k(h, p) - h$, with $x = (h, p)$."""

    F: object
    period: int = eqx.field(static=True, default=1)

    def __call__(self, x, aux=None):
        h, p = x[:-1], x[-1]
        return iterate(self.F, self.period, h, p) - h


def _bordered_solve(R: Residual, aux, x, row, rhs, dense: bool, krylov_tol: float):
    """Solve $A(x; r)\\,v = $ `rhs` (see the module's docstring); returns (v, ok)."""
    if dense:
        jac = jax.jacfwd(lambda y: R(y, aux))(x)
        v = jnp.linalg.solve(jnp.concatenate([jac, row[None]], axis=0), rhs)
        return v, jnp.all(jnp.isfinite(v))
    _, jvp = jax.linearize(lambda y: R(y, aux), x)

    def matvec(v):
        return jnp.concatenate([jvp(v), (row @ v)[None]])

    op = lx.FunctionLinearOperator(matvec, jax.ShapeDtypeStruct(x.shape, x.dtype))
    solver = lx.GMRES(rtol=krylov_tol, atol=krylov_tol, restart=GMRES_RESTART, max_steps=20 * x.shape[0])
    sol = lx.linear_solve(op, rhs, solver, throw=False)
    return sol.value, (sol.result == lx.RESULTS.successful) & jnp.all(jnp.isfinite(sol.value))


@eqx.filter_jit
def corrector(R: Residual, aux, x_pred, row, *, tol: float, max_iter: int, dense: bool, krylov_tol: float):
    r"""Newton's method on the extended system $R(x) = 0,\ r^\top (x - x_{pred}) = 0$.

    With $r$ the tangent $t$ at the last point and $x_{pred} = x + \Delta s\, t$, this is
    Keller's pseudo-arclength corrector: the new point lies on the hyperplane through the predicted
    point normal to the tangent. Each iteration solves $A(x; r)\,\delta = (R(x), r^\top (x - x_{pred}))$
    and sets $x \leftarrow x - \delta$; it stops when $\lVert\delta\rVert_\infty \le$ `tol` or after
    `max_iter` iterations. Returns the point, whether it converged, and the iterations used.
    """

    def cond(carry):
        _, k, err, ok = carry
        return (k < max_iter) & (err > tol) & ok

    def body(carry):
        x, k, _, _ = carry
        rhs = jnp.concatenate([R(x, aux), (row @ (x - x_pred))[None]])
        dx, ok = _bordered_solve(R, aux, x, row, rhs, dense, krylov_tol)
        return x - dx, k + 1, jnp.max(jnp.abs(dx)), ok

    x, k, err, ok = jax.lax.while_loop(cond, body, (x_pred, 0, jnp.asarray(jnp.inf, x_pred.dtype), True))
    return x, ok & (err <= tol) & jnp.all(jnp.isfinite(x)), k


@eqx.filter_jit
def tangent(R: Residual, aux, x, row, *, dense: bool, krylov_tol: float):
    r"""The unit tangent of the curve at $x$, oriented along `row`.

    $t$ spans the kernel of $\partial R/\partial x$: it solves $A(x; r)\, t = e_{M+1}$
    ($\partial R/\partial x\; t = 0$, $r^\top t = 1$), then is normalised, so $r^\top t > 0$: with
    $r$ the previous tangent, the new one keeps the direction of travel.
    """
    rhs = jnp.zeros_like(x).at[-1].set(1.0)
    t, ok = _bordered_solve(R, aux, x, row, rhs, dense, krylov_tol)
    return t / jnp.linalg.norm(t), ok


@eqx.filter_jit
def bordered_logdet(R: Residual, x, t):
    r"""$(\operatorname{sign}, \log\lvert\det\rvert)$ of the bordered Jacobian
    $\begin{pmatrix} \partial R/\partial x \\ t^\top \end{pmatrix}$ at $x$ (dense; `jnp.linalg.slogdet`)."""
    jac = jax.jacfwd(lambda y: R(y, None))(x)
    return jnp.linalg.slogdet(jnp.concatenate([jac, t[None]], axis=0))


@eqx.filter_jit
def state_jacobians(R: FixedPoints, xs: Float[Array, "b m1"]) -> Float[Array, "b m m"]:
    r"""$\partial F^k/\partial h = \partial R/\partial h + I$ at each point of a batch (`vmap` of `jacfwd`)."""
    eye = jnp.eye(xs.shape[1] - 1, dtype=xs.dtype)
    return jax.vmap(lambda x: jax.jacfwd(lambda y: R(y))(x)[:, :-1] + eye)(xs)


def as_float64(a) -> np.ndarray:
    """A float64 NumPy copy (the values the results hold)."""
    return np.asarray(a, dtype=np.float64)


def solver_options(settings, dense: bool) -> dict:
    """The keyword options of [`corrector`][] and [`tangent`][] from a `ContinuationSettings`."""
    return {"dense": dense, "krylov_tol": float(settings.krylov_tol)}


@eqx.filter_jit
def residual(R: Residual, aux, x):
    """$R(x)$, compiled (the matrix-free corrector's right-hand side)."""
    return R(x, aux)


@eqx.filter_jit
def krylov_solve(R: Residual, aux, x, row, rhs, *, krylov_tol: float):
    """One matrix-free bordered solve (see [`corrector`][]), compiled once and shared by the
    corrector's iterations and the tangent: GMRES inside a compiled Newton loop took several seconds
    to compile per use, this one solve compiles once per residual and shape."""
    return _bordered_solve(R, aux, x, row, rhs, False, krylov_tol)


def correct(R: Residual, aux, x_pred, row, settings, dense: bool) -> tuple[np.ndarray, bool, int]:
    """[`corrector`][] on NumPy values: the corrected point, whether it converged, the iterations used.

    Matrix-free, the same Newton iterations run as a Python loop over [`krylov_solve`][]."""
    x_pred, row = np.asarray(x_pred, np.float64), np.asarray(row, np.float64)
    if dense:
        x, ok, k = corrector(R, aux, x_pred, row, tol=float(settings.newton_tol),
                             max_iter=int(settings.newton_max_iter), **solver_options(settings, dense))
        return as_float64(x), bool(ok), int(k)
    x = x_pred
    for k in range(int(settings.newton_max_iter)):
        rhs = np.append(as_float64(residual(R, aux, x)), row @ (x - x_pred))
        dx, ok = krylov_solve(R, aux, x, row, rhs, krylov_tol=float(settings.krylov_tol))
        dx = as_float64(dx)
        if not bool(ok):
            return x, False, k + 1
        x = x - dx
        if np.max(np.abs(dx)) <= settings.newton_tol:
            return x, bool(np.all(np.isfinite(x))), k + 1
    return x, False, int(settings.newton_max_iter)


def unit_tangent(R: Residual, aux, x, row, settings, dense: bool) -> tuple[np.ndarray, bool]:
    """[`tangent`][] on NumPy values: the unit tangent and whether its solve succeeded."""
    x, row = np.asarray(x, np.float64), np.asarray(row, np.float64)
    if dense:
        t, ok = tangent(R, aux, x, row, **solver_options(settings, dense))
    else:
        e = np.zeros_like(x)
        e[-1] = 1.0
        t, ok = krylov_solve(R, aux, x, row, e, krylov_tol=float(settings.krylov_tol))
        t = as_float64(t)
        t = t / np.linalg.norm(t)
    t = as_float64(t)
    return t, bool(ok) and bool(np.all(np.isfinite(t)))
