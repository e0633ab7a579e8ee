r"""Multipliers of fixed points along a branch: the eigenvalues $\mu$ of $\partial F^k/\partial h$.

A fixed point of a map is stable when every $|\mu| < 1$; bifurcations happen where multipliers
cross the unit circle. Up to `dense_max` every multiplier is computed (the Jacobians by a
`vmap` of `jax.jacfwd` over points, in chunks, then LAPACK's `geev`), so counts of crossings are
exact. Above, the `n_multipliers` leading ones (by modulus) come from Arnoldi iterations (ARPACK,
`scipy.sparse.linalg.eigs`) on a `LinearOperator` whose product is one Jacobian-vector product:
crossings are then seen only among the leading multipliers, which holds while fewer than
`n_multipliers` lie outside the unit circle.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse.linalg as sla

from dynlab.analyses.continuation.system import FixedPoints, state_jacobians, state_jvp

__all__ = ["REAL_TOL", "eigenvector", "leading", "spectra"]

REAL_TOL = 1e-9
r"""A multiplier with $|\mathrm{Im}\,\mu| \le$ this $\cdot \max(1, |\mu|)$ counts as real (LAPACK
returns exact zeros for real eigenvalues; ARPACK nearly)."""

CHUNK_BYTES = 2**26
"""Jacobians computed at once in the dense path (64 MiB of float64)."""


def _arnoldi(R: FixedPoints, x: np.ndarray, k: int, vectors: bool = False):
    m = x.shape[0] - 1
    op = sla.LinearOperator((m, m), matvec=lambda v: np.asarray(state_jvp(R, x, np.asarray(v, np.float64).ravel())),
                            dtype=np.float64)
    return sla.eigs(op, k=min(k, m - 2), which="LM", tol=1e-12, return_eigenvectors=vectors)


def spectra(R: FixedPoints, xs: np.ndarray, dense: bool, k: int) -> list[np.ndarray]:
    """The multipliers at each point of `xs` (`[n, N+1]`): all of them (dense) or the k leading."""
    m = xs.shape[1] - 1
    if dense or m <= k + 2:
        chunk = max(1, CHUNK_BYTES // (8 * m * m))
        out = []
        for i in range(0, len(xs), chunk):
            out.extend(np.linalg.eigvals(np.asarray(state_jacobians(R, xs[i : i + chunk]))))
        return out
    return [_arnoldi(R, x, k) for x in xs]


def leading(mu: np.ndarray, k: int) -> np.ndarray:
    """The k multipliers of largest modulus, descending, padded with NaN to length k."""
    mu = mu[np.argsort(-np.abs(mu), kind="stable")][:k]
    return np.concatenate([mu, np.full(k - len(mu), np.nan + 0j)]).astype(np.complex128)


def eigenvector(R: FixedPoints, x: np.ndarray, target: float, dense: bool, k: int) -> tuple[complex, np.ndarray]:
    """The multiplier nearest the real `target` at $x$ and its real, unit eigenvector."""
    m = x.shape[0] - 1
    if dense or m <= k + 2:
        mu, vec = np.linalg.eig(np.asarray(state_jacobians(R, x[None]))[0])
    else:
        mu, vec = _arnoldi(R, x, k, vectors=True)
    i = int(np.argmin(np.abs(mu - target)))
    v = np.real(vec[:, i])
    return complex(mu[i]), v / np.linalg.norm(v)
