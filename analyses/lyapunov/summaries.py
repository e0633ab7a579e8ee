r"""Summaries of a Lyapunov spectrum (NumPy, vectorised over leading axes; exponents on the last axis):
the largest exponent, the sum of the positive ones (an entropy-rate bound), the Kaplan–Yorke
dimension, and how many are positive or zero."""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike

from dynlab.errors import ConfigError


def _descending(exponents: ArrayLike) -> np.ndarray:
    lam = np.asarray(exponents, dtype=float)
    if lam.ndim == 0 or lam.shape[-1] == 0:
        raise ConfigError("Expected a non-empty array of exponents on the last axis.")
    return -np.sort(-lam, axis=-1)


def largest_exponent(exponents: ArrayLike) -> np.ndarray:
    r"""The largest exponent $\lambda_1 = \max_i \lambda_i$ (NaN if any exponent is NaN)."""
    return np.max(np.asarray(exponents, dtype=float), axis=-1)


def sum_positive_exponents(exponents: ArrayLike) -> np.ndarray:
    r"""Sum of the positive exponents, $\sum_i \max(\lambda_i, 0)$.

    By Ruelle's inequality this bounds the Kolmogorov–Sinai entropy rate from above,
    $h_{\mathrm{KS}} \le \sum_{\lambda_i > 0} \lambda_i$ (nats per step), with equality (Pesin's
    identity) for SRB measures. From $k < N$ exponents it is exact as long as
    $\lambda_k \le 0$, and a lower bound on the full sum otherwise.
    """
    lam = np.asarray(exponents, dtype=float)
    total = np.where(lam > 0, lam, 0.0).sum(axis=-1)
    return np.where(np.isnan(lam).any(axis=-1), np.nan, total)


def count_positive_exponents(exponents: ArrayLike, tol: float = 1e-3) -> np.ndarray:
    r"""Number of exponents with $\lambda_i \ge \texttt{tol}$.

    Exponents within the zero band $|\lambda_i| < \texttt{tol}$ (see [`count_zero_exponents`][])
    are not counted as positive, so positive, zero and negative counts add up to $k$.
    NaNs count as neither.
    """
    return np.sum(np.asarray(exponents, dtype=float) >= tol, axis=-1)


def count_zero_exponents(exponents: ArrayLike, tol: float = 1e-3) -> np.ndarray:
    r"""Number of near-zero exponents, $|\lambda_i| < \texttt{tol}$.

    A flow sampled at discrete times has one exact zero exponent per continuous symmetry (time
    translation); numerically it is zero only to $O(1/T)$, hence the tolerance, in the same
    units (per step) as the exponents.
    """
    return np.sum(np.abs(np.asarray(exponents, dtype=float)) < tol, axis=-1)


def kaplan_yorke_dimension(exponents: ArrayLike) -> np.ndarray:
    r"""Kaplan–Yorke (Lyapunov) dimension of a spectrum.

    With the exponents in descending order and partial sums $S_j = \sum_{i \le j} \lambda_i$,
    let $j$ be the largest index with $S_j \ge 0$. Then

    $$D_{\mathrm{KY}} = j + \frac{S_j}{|\lambda_{j+1}|}.$$

    Since $S_0 = 0$ and the increments $\lambda_i$ decrease, $S$ is concave, so $\{j : S_j \ge 0\}$
    is an initial run $1, \dots, j$. Edge cases:

    - $\lambda_1 < 0$ (no non-negative partial sum): $D_{\mathrm{KY}} = 0$ (a stable fixed point);
    - $S_k \ge 0$ (no partial sum of the $k$ given exponents is negative):
      $D_{\mathrm{KY}} = k$. If $k$ is the full
      state dimension this is exact (no contraction of $k$-volumes); if $k < N$ it is only a
      lower bound, since the missing exponents would be needed to find $j$;
    - $\lambda_{j+1} = -\infty$: $D_{\mathrm{KY}} = j$.

    NaN if any exponent is NaN. Example: the Lorenz spectrum $(0.9056, 0, -14.5723)$ gives
    $2 + 0.9056/14.5723 \approx 2.0621$.
    """
    lam = _descending(exponents)
    k = lam.shape[-1]
    partial = np.cumsum(lam, axis=-1)
    j = np.sum(partial >= 0, axis=-1)  # the concave run S_1..S_j >= 0
    idx = np.clip(j, 1, k)[..., None]
    s_j = np.take_along_axis(partial, idx - 1, axis=-1)[..., 0]
    lam_next = np.take_along_axis(lam, np.minimum(idx, k - 1), axis=-1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        interior = j + s_j / np.abs(lam_next)
    dim = np.where(j == 0, 0.0, np.where(j == k, float(k), interior))
    return np.where(np.isnan(lam).any(axis=-1), np.nan, dim)


def _derived_quantities(exponents: np.ndarray, tol: float) -> dict[str, tuple[np.ndarray, str, str]]:
    """name -> (values over the leading axes, long_name, units) of the spectrum summaries."""
    return {
        "largest": (largest_exponent(exponents), "largest Lyapunov exponent", "per step"),
        "positive_sum": (
            sum_positive_exponents(exponents),
            "sum of positive exponents (entropy-rate bound)",
            "nats per step",
        ),
        "ky_dimension": (kaplan_yorke_dimension(exponents), "Kaplan-Yorke dimension", "1"),
        "n_positive": (count_positive_exponents(exponents, tol), "number of exponents >= tol", "1"),
        "n_zero": (count_zero_exponents(exponents, tol), "number of exponents with |l| < tol", "1"),
    }

