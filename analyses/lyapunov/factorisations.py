r"""How the tangent frame is re-factorised: Householder QR, CholeskyQR, and the row-pivoted LU.

The QR (Benettin) method needs, after the frame $Z \in \mathbb{R}^{N\times k}$ has been pushed
forward, a new frame with **the same flag** (the same nested spans of its first $1, 2, \dots, k$
columns) and the logarithms of the diagonal of the triangular factor that maps one to the other.
Everything the exponents need is in that flag and those logs:

**Why any triangular factor will do.** Let $Z_s = J Z_{s-1} T_s^{-1}$ with $T_s$ upper triangular
(any such factorisation, orthonormal or not). Then $J^t Z_0 = Z_t T_t \cdots T_1$, and the
$j$-volume of the first $j$ columns is

$$\operatorname{vol}_j\big(J^t Z_0\big) = \operatorname{vol}_j(Z_t)\,\prod_{s\le t}\prod_{i\le j}|(T_s)_{ii}|,$$

so $\sum_{i \le j}\lambda_i = \lim \frac1t\big[\sum_s \sum_{i\le j} \ln|(T_s)_{ii}| + \ln\operatorname{vol}_j(Z_t)\big]$.
With an orthonormal $Z_t$ the last term is $0$; with any other it is a *boundary term*, not a sum
over steps, and it is exactly $\sum_{i\le j}\ln|R_{ii}|$ of one Householder QR of $Z_t$. So the
exponents do not need an orthonormal frame at every step, only a flag-preserving, well-conditioned
one, and an orthonormal one wherever a running estimate is read off.

- [`Householder`][] — LAPACK's `geqrf` + `orgqr` (`jnp.linalg.qr`): backward stable at any
  condition, orthonormal to rounding; $4Nk^2 - \tfrac43 k^3$ flops at LAPACK's (single-threaded)
  rate. The default.
- [`CholeskyQR`][] — $G = Z^\top Z$, $R = \operatorname{chol}(G)^\top$, $Q = Z R^{-1}$, repeated
  (`passes`); matmul-, Cholesky- and triangular-solve-bound. Falls back to Householder where the
  Cholesky factor says the frame is too ill-conditioned for it (see the class).
- [`PivotedLU`][] — $P Z = L U$ with partial pivoting; the new frame is $P^\top L$ (not
  orthonormal). $Nk^2 - k^3/3$ flops in LAPACK's `getrf`, the fastest of the three. Used *inside*
  a block between orthonormalisations (`lu_every` of [`lyapunov_core`][]): its frame has unit
  diagonal and entries $|L_{ij}| \le 1$, so $1 \le \operatorname{vol}_j(P^\top L) \le N^{j/2}$
  (Cauchy–Binet: the squared volume is the sum of the squared $j\times j$ minors, one of which is
  the unit-triangular top block), and its columns never over- or underflow nor collapse together.

Measured per factorisation of a $256\times256$ frame (float64, 2-core CPU shared with other jobs,
OpenBLAS single-threaded, inside a jit-compiled scan, medians of 7; the push $JQ$ of a tanh RNN,
one $256^3$ matmul, is 0.31-0.33 ms): Householder 1.8-2.2 ms, CholeskyQR 1 pass 1.4-1.45 ms, 2 passes
2.9-3.4 ms (its Gram product alone 0.65 ms, the Cholesky 0.3 ms, the triangular solve 0.45 ms), pivoted
LU 0.51-0.54 ms. At $64\times64$: 52, 25, 51 and 27 $\mu$s. In float32 at $256\times256$: 1.4-2.0, 0.87,
1.6 and 0.34-0.43 ms.

Every class is an `equinox.Module` with static fields (a hashable value: passing one to a
jit-compiled function compiles once per distinct value), called as `factor(z) -> (frame,
log_abs_diag)`.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from dynlab.errors import ConfigError

__all__ = ["CholeskyQR", "Householder", "PivotedLU", "QRMethod"]

_HIGHEST = jax.lax.Precision.HIGHEST


def _sign_fix(q, r):
    sign = jnp.where(jnp.diagonal(r) < 0, -1, 1).astype(r.dtype)
    return q * sign, r * sign[:, None]


class Householder(eqx.Module):
    r"""Householder QR, `jnp.linalg.qr` (LAPACK `geqrf` + `orgqr` on CPU).

    `factor(z)` returns $Q$ and $\ln|R_{ii}|$ with whatever signs LAPACK gives (the exponents need
    only $|R_{ii}|$; see `dynlab.analyses.lyapunov.core._qr_log_diag`). `qr(z)` returns $(Q, R)$ with
    $R_{ii} \ge 0$.
    """

    orthonormal = True

    def __call__(self, z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, " k"]]:
        q, r = jnp.linalg.qr(z)
        return q, jnp.log(jnp.abs(jnp.diagonal(r)))

    def qr(self, z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, "k k"]]:
        return _sign_fix(*jnp.linalg.qr(z))


def _cholesky_pass(y, shift=None):
    """One CholeskyQR pass: (Q, R) with Y = Q R, R = chol(Y^T Y [+ shift I])^T upper, positive diagonal."""
    g = jnp.matmul(y.T, y, precision=_HIGHEST)
    if shift is not None:
        g = g + shift * jnp.eye(g.shape[0], dtype=g.dtype)
    lower = jnp.linalg.cholesky(g)
    q = jax.lax.linalg.triangular_solve(lower, y, left_side=False, lower=True, transpose_a=True)
    return q, lower.T


class CholeskyQR(eqx.Module):
    r"""CholeskyQR with `passes` passes, and a Householder fallback where it would be inaccurate.

    **One pass** (Yamamoto et al. 2015; Fukaya et al. 2020): $G = Z^\top Z$,
    $R = \operatorname{chol}(G)^\top$, $Q = Z R^{-1}$ (a triangular solve). Rounding in $G$ is
    amplified by $\kappa(Z)^2$: $\lVert Q^\top Q - I\rVert \approx \kappa^2 u$ ($u$ the unit
    roundoff), and the Cholesky factorisation breaks down when $\kappa^2 u \gtrsim 1$. A second pass
    on $Q$ (**CholeskyQR2**) makes $Q$ orthonormal to $O(u)$ as long as the first pass did not
    break down, with $R = R_2 R_1$ ($\ln R_{ii}$ add up). For the Lyapunov exponents alone one pass
    is enough: $Q = Z R^{-1}$ has exactly the flag of $Z$ for *any* upper-triangular $R$, so the
    non-orthogonality is a boundary term that does not accumulate (module docstring; measured on a
    256-unit RNN in float64 with a factorisation every step: exponents within $3.5\cdot10^{-13}$ of
    Householder's for one pass and for two).

    **Selector.** The factorisation is used only when the first pass's Cholesky factor is finite
    and its diagonal spread, a lower bound on $\kappa(Z)$, satisfies
    $\max_i R_{ii} / \min_i R_{ii} \le$ `max_condition`. By default that is, for two passes,
    $(k u)^{-1/2}/10$ (the CholeskyQR2 condition of Yamamoto et al. up to a constant: $6\cdot10^5$ for
    float64 and $k = 256$, $24$ for float32 and $k = 256$), and for one pass $u^{-1/4}$
    ($1.2\cdot10^4$ in float64, $64$ in float32), so that the one-pass $Q$ is orthonormal to about
    $\kappa^2 u \approx \sqrt u$ (about, because the spread bounds $\kappa$ only from below). Otherwise the whole factorisation is Householder's,
    chosen at run time (`jax.lax.cond`; under `vmap` both branches run). With `shifted=True` the
    fallback is instead the shifted CholeskyQR3 of Fukaya et al. (2020): a first pass on
    $G + sI$, $s = 11(Nk + k(k+1))\,u\,\lVert Z\rVert_F^2$, which cannot break down and leaves
    $\kappa(Q_1) \lesssim u^{-1/2}$, then CholeskyQR2 on $Q_1$; all matmul-bound, for devices where
    LAPACK's QR is slow. Either way the result has the flag of $Z$.

    **Cost** (measured, see the module docstring): on this CPU one pass is 1.4-2x faster than
    Householder, two passes about as fast (256: 2.9 vs 2.0-2.2 ms, 64: 51 vs 52 $\mu$s), so
    CholeskyQR2 does not pay here; the pivoted LU inside blocks ([`PivotedLU`][]) is what does.
    """

    passes: int = eqx.field(default=2, static=True)
    shifted: bool = eqx.field(default=False, static=True)
    max_condition: float | None = eqx.field(default=None, static=True)

    orthonormal = True

    def __check_init__(self):
        if self.passes not in (1, 2):
            raise ConfigError(f"CholeskyQR: passes must be 1 or 2; got {self.passes!r}")

    def condition_limit(self, k: int, dtype) -> float:
        """The largest diagonal spread of the first pass's factor that the selector accepts."""
        if self.max_condition is not None:
            return float(self.max_condition)
        u = float(jnp.finfo(dtype).eps) / 2
        return u**-0.25 if self.passes == 1 else (k * u) ** -0.5 / 10

    def _factor(self, z) -> tuple[Float[Array, "n k"], Float[Array, "k k"], Bool[Array, ""]]:
        """(Q, R with positive diagonal, whether the Cholesky path was taken)."""
        k = z.shape[1]
        q1, r1 = _cholesky_pass(z)
        d = jnp.diagonal(r1)
        ok = jnp.all(jnp.isfinite(r1)) & (jnp.min(d) > 0) & (jnp.max(d) <= self.condition_limit(k, z.dtype) * jnp.min(d))

        def cholesky(_):
            if self.passes == 1:
                return q1, r1
            q, r2 = _cholesky_pass(q1)
            return q, jnp.matmul(r2, r1, precision=_HIGHEST)

        def fallback(_):
            if not self.shifted:
                return _sign_fix(*jnp.linalg.qr(z))
            n = z.shape[0]
            u = jnp.finfo(z.dtype).eps / 2
            shift = 11 * (n * k + k * (k + 1)) * u * jnp.sum(z * z)
            qa, ra = _cholesky_pass(z, shift)
            qb, rb = _cholesky_pass(qa)
            q, rc = _cholesky_pass(qb)
            return q, jnp.matmul(rc, jnp.matmul(rb, ra, precision=_HIGHEST), precision=_HIGHEST)

        q, r = jax.lax.cond(ok, cholesky, fallback, None)
        return q, r, ok

    def __call__(self, z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, " k"]]:
        q, r, _ = self._factor(z)
        return q, jnp.log(jnp.abs(jnp.diagonal(r)))

    def qr(self, z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, "k k"]]:
        """$(Q, R)$ with $R_{ii} > 0$ (a factorisation with a zero pivot falls back to Householder)."""
        q, r, _ = self._factor(z)
        return q, r

    def used_cholesky(self, z: Float[Array, "n k"]) -> Bool[Array, ""]:
        """Whether the selector takes the Cholesky path for `z` (False: the fallback)."""
        return self._factor(z)[2]


class PivotedLU(eqx.Module):
    r"""Row-pivoted LU, $P Z = L U$ (LAPACK `getrf`): the new frame is $P^\top L$, the growths $\ln|U_{ii}|$.

    Not orthonormal, but flag-preserving ($Z = (P^\top L) U$, $U$ upper triangular) with a bounded
    volume, $1 \le \operatorname{vol}_j(P^\top L) \le N^{j/2}$ (module docstring), so the growths
    summed between two orthonormal frames are exactly the QR method's. Rounding: the computed flag
    is perturbed by about $u\,\kappa(Z)$, as Householder's, with $\kappa(Z) \le \kappa(L)\,\kappa(U)$;
    $\kappa(L)$ of a partially pivoted factor is modest in practice (growth is rare) but not
    bounded a priori: the reported bound ([`blocking_error_bound`][] with `lu_every`) uses a calibrated
    constant, and `reortho_every="auto"` chooses the LU only in float64 (in float32 an LU every step
    moved the smallest exponents of a 256-unit RNN by 0.17 of their statistical error).
    """

    orthonormal = False

    def __call__(self, z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, " k"]]:
        n, k = z.shape
        lu, _, perm = jax.lax.linalg.lu(z)
        lower = jnp.tril(lu, -1) + jnp.eye(n, k, dtype=z.dtype)
        frame = jnp.zeros_like(lower).at[perm].set(lower)  # P^T L: row perm[i] of the frame is row i of L
        return frame, jnp.log(jnp.abs(jnp.diagonal(lu)))


QRMethod = Householder | CholeskyQR
"""The orthonormalising factorisations accepted as `qr` by [`lyapunov_core`][]."""
