r"""Multipliers of fixed points along a branch: the eigenvalues $\mu$ of $\partial F^k/\partial h$.

A fixed point of a map is stable when every $|\mu| < 1$; bifurcations happen where multipliers
cross the unit circle. Up to `full_spectrum_max` every multiplier is computed (the Jacobians by a
`vmap` of `jax.jacfwd` over points, in chunks, then LAPACK's `geev` with one BLAS thread, [`eigenvalues_of`][dynlab.analyses.state_map.eigenvalues_of]), so counts of crossings are
exact. Above (a full eigendecomposition costs $O(N^3)$ per point: about 1 s at N = 1024 and 8 s at
N = 2048 on 2 cores), the `n_multipliers` leading ones (by modulus) come from Arnoldi iterations
(ARPACK, `scipy.sparse.linalg.eigs`) on a `LinearOperator` whose product is one Jacobian-vector
product: crossings are then seen only among the leading multipliers, which holds while fewer than
`n_multipliers` lie outside the unit circle.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dynlab.analyses.continuation.system import FixedPoints, state_jacobians
from dynlab.analyses.state_map import eigenvalues_of

__all__ = ["ARNOLDI_TOL", "REAL_TOL", "eigenvector", "full", "leading", "spectra"]

REAL_TOL = 1e-9
r"""A multiplier with $|\mathrm{Im}\,\mu| \le$ this $\cdot \max(1, |\mu|)$ counts as real (LAPACK
returns exact zeros for real eigenvalues; ARPACK nearly)."""

CHUNK_BYTES = 2**26
"""Jacobians computed at once in the dense path (64 MiB of float64)."""


ARNOLDI_TOL = 1e-8
"""The relative accuracy ARPACK is asked for (crossings of the unit circle need far less)."""


ARNOLDI_VECTORS = 40
"""Arnoldi vectors kept between ARPACK's restarts: more than the default 2k+1, because the spectra of
large networks cluster (on N = 2048 decoupled tanh units, 6 leading eigenvalues took 2228 products
with 13 vectors, 749 with 40, 738 with 64)."""


@functools.lru_cache(maxsize=32)
def _jvp_kernel(static):
    r"""A plain `jax.jit` of $v \mapsto (\partial F^k/\partial h) v$ for the residual's static part:
    ARPACK calls it a thousand times per point, where `eqx.filter_jit`'s per-call cost would dominate."""

    @jax.jit
    def kernel(dynamic, x, v):
        R = eqx.combine(dynamic, static)
        _, out = jax.jvp(lambda h: R(jnp.concatenate([h, x[-1:]])), (x[:-1],), (v,))
        return out + v

    return kernel


def _arnoldi(R: FixedPoints, x: np.ndarray, k: int, v0: np.ndarray | None = None):
    """(multipliers, eigenvectors) of the k leading multipliers at x, by ARPACK from the start vector v0."""
    import scipy.sparse.linalg as sla

    m = x.shape[0] - 1
    dynamic, static = eqx.partition(R, eqx.is_array)
    kernel, x = _jvp_kernel(static), jnp.asarray(x)
    op = sla.LinearOperator((m, m), matvec=lambda v: np.asarray(kernel(dynamic, x, np.asarray(v, np.float64).ravel())),
                            dtype=np.float64)
    return sla.eigs(op, k=min(k, m - 2), which="LM", tol=ARNOLDI_TOL, ncv=min(m, max(2 * k + 1, ARNOLDI_VECTORS)),
                    v0=v0)


def _warm_start(vectors: np.ndarray) -> np.ndarray | None:
    """The next point's start vector: the sum of this point's leading eigenvectors (real parts).

    Along a branch the leading invariant subspace turns slowly, so a start inside it cuts ARPACK's
    products: on 4096 decoupled tanh units, 599-628 from a random start, 136-205 warm."""
    v = np.real(vectors).sum(axis=1)
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 and np.all(np.isfinite(v)) else None


def full(m: int, settings) -> bool:
    """Whether every multiplier is computed at state dimension m (else the leading ones, by Arnoldi)."""
    return m <= settings.full_spectrum_max or m <= settings.n_multipliers + 2


def spectra(R: FixedPoints, xs: np.ndarray, settings) -> list[np.ndarray]:
    """The multipliers at each point of `xs` (`[n, N+1]`): all of them, or the `n_multipliers` leading."""
    m = xs.shape[1] - 1
    k = settings.n_multipliers
    if full(m, settings):
        chunk = max(1, CHUNK_BYTES // (8 * m * m))
        out = []
        for i in range(0, len(xs), chunk):
            part = xs[i : i + chunk]
            # batches padded to a power of two (or the chunk): a few compilations, not one per length
            size = min(chunk, 1 << (len(part) - 1).bit_length())
            padded = np.concatenate([part, np.repeat(part[-1:], size - len(part), axis=0)])
            out.extend(eigenvalues_of(np.asarray(state_jacobians(R, padded))[: len(part)]))  # not the padding's
        return out
    out, v0 = [], None
    for x in xs:
        mu, vectors = _arnoldi(R, x, k, v0)
        out.append(mu)
        v0 = _warm_start(vectors)
    return out


def leading(mu: np.ndarray, k: int) -> np.ndarray:
    """The k multipliers of largest modulus, descending, padded with NaN to length k."""
    mu = mu[np.argsort(-np.abs(mu), kind="stable")][:k]
    return np.concatenate([mu, np.full(k - len(mu), np.nan + 0j)]).astype(np.complex128)


def eigenvector(R: FixedPoints, x: np.ndarray, target: float, settings) -> tuple[complex, np.ndarray]:
    """The multiplier nearest the real `target` at $x$ and its real, unit eigenvector."""
    if full(x.shape[0] - 1, settings):
        mu, vec = eigenvalues_of(np.asarray(state_jacobians(R, x[None]))[0], vectors=True)
    else:
        mu, vec = _arnoldi(R, x, settings.n_multipliers)
    i = int(np.argmin(np.abs(mu - target)))
    v = np.real(vec[:, i])
    return complex(mu[i]), v / np.linalg.norm(v)
