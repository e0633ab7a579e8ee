r"""Power-law fits of a spectrum in log–log coordinates: $\lambda_n \approx A\, n^{-\alpha}$
([`power_law_exponent`][]) and the truncated $\lambda_n \approx A\, n^{-\alpha} e^{-n/n_c}$
([`truncated_power_law_fit`][]), both closed-form least squares, vectorised over batch axes."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from jax.typing import ArrayLike

from dynlab.errors import ConfigError


class PowerLawFit(NamedTuple):
    r"""A fit $\lambda_n \approx A\, n^{-\alpha}$ (arrays shaped like the batch axes)."""

    alpha: np.ndarray
    amplitude: np.ndarray
    r2: np.ndarray


class TruncatedPowerLawFit(NamedTuple):
    r"""A fit $\lambda_n \approx A\, n^{-\alpha} e^{-n/n_c}$ (arrays shaped like the batch axes).

    `n_c` is $+\infty$ where the best fit has no exponential cut-off.
    """

    alpha: np.ndarray
    n_c: np.ndarray
    amplitude: np.ndarray
    r2: np.ndarray


def _log_fit_inputs(
    eigenvalues: ArrayLike, ranks: ArrayLike, min_points: int
) -> tuple[np.ndarray, np.ndarray]:
    """`log(lambda)` (NaN where lambda <= 0) and the float64 ranks, checked."""
    lam = np.asarray(eigenvalues, np.float64)
    n = np.asarray(ranks, np.float64)
    if n.ndim != 1 or lam.ndim < 1 or lam.shape[-1] != n.size:
        raise ConfigError(
            "eigenvalues must be [..., K] and ranks [K] with the same K; "
            f"got shapes {lam.shape} and {n.shape}."
        )
    if n.size < min_points or np.unique(n).size < min_points or np.any(n <= 0):
        raise ConfigError(
            f"The fit needs at least {min_points} distinct positive ranks; got {n.tolist()}."
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(lam > 0, np.log(lam), np.nan)
    return y, n


def _r_squared(y: np.ndarray, y_fit: np.ndarray) -> np.ndarray:
    residual = np.sum((y - y_fit) ** 2, axis=-1)
    total = np.sum((y - y.mean(axis=-1, keepdims=True)) ** 2, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - residual / total


def power_law_exponent(eigenvalues: ArrayLike, ranks: ArrayLike) -> PowerLawFit:
    r"""Least-squares power law $\lambda_n \approx A\, n^{-\alpha}$ in log–log coordinates.

    With $x_n = \ln n$ and $y_n = \ln \lambda_n$ over the given ranks, ordinary least squares
    of $y = \ln A - \alpha x$ gives

    $$\alpha = -\frac{\sum_n (x_n - \bar x)(y_n - \bar y)}{\sum_n (x_n - \bar x)^2}, \qquad
      \ln A = \bar y + \alpha \bar x, \qquad
      R^2 = 1 - \frac{\sum_n (y_n - \ln A + \alpha x_n)^2}{\sum_n (y_n - \bar y)^2}.$$

    **Arguments:**

    - `eigenvalues`: $\lambda_n$ at the given ranks, `[..., K]`; leading axes are a batch
      (e.g. bootstrap replicates) fitted independently.
    - `ranks`: the ranks $n$ (1-based), `[K]`, at least 2 distinct positive values.

    **Returns:**

    A [`PowerLawFit`][] `(alpha, amplitude, r2)`, each shaped like the batch axes (0-d for a
    single spectrum). A spectrum with any $\lambda_n \le 0$ has no logarithm: its fit is NaN.
    $R^2$ is measured in log space.
    """
    y, n = _log_fit_inputs(eigenvalues, ranks, min_points=2)
    x = np.log(n)
    xc = x - x.mean()
    y_mean = y.mean(axis=-1)
    alpha = -((y - y_mean[..., None]) @ xc) / (xc @ xc)
    log_amplitude = y_mean + alpha * x.mean()
    r2 = _r_squared(y, log_amplitude[..., None] - alpha[..., None] * x)
    return PowerLawFit(alpha=alpha, amplitude=np.exp(log_amplitude), r2=r2)


def truncated_power_law_fit(eigenvalues: ArrayLike, ranks: ArrayLike) -> TruncatedPowerLawFit:
    r"""Least-squares truncated power law $\lambda_n \approx A\, n^{-\alpha} e^{-n/n_c}$.

    In log space the model is linear in its parameters,

    $$\ln \lambda_n = \ln A - \alpha \ln n - \beta n, \qquad \beta = 1/n_c \ge 0,$$

    so the least-squares fit of $\ln\lambda_n$ is a linear least-squares problem in
    $(\ln A, \alpha, \beta)$ (no iterative optimiser, no starting point). The constraint
    $\beta \ge 0$ (a cut-off, not an exponential growth) is imposed exactly: the objective is
    a convex quadratic, so when the unconstrained minimiser has $\beta < 0$ the constrained
    one lies on $\beta = 0$, which is the plain power law of [`power_law_exponent`][]; then
    $n_c = +\infty$. $R^2$ is measured in log space.

    **Arguments:**

    - `eigenvalues`: $\lambda_n$ at the given ranks, `[..., K]`; leading axes are a batch.
    - `ranks`: the ranks $n$ (1-based), `[K]`, at least 3 distinct positive values.

    **Returns:**

    A [`TruncatedPowerLawFit`][] `(alpha, n_c, amplitude, r2)`, each shaped like the batch
    axes. A spectrum with any $\lambda_n \le 0$ has no logarithm: its fit is NaN.
    """
    y, n = _log_fit_inputs(eigenvalues, ranks, min_points=3)
    design = np.stack([np.ones_like(n), -np.log(n), -n], axis=-1)  # [K, 3]
    # Solve all batch members at once: the design is shared, so one pseudo-inverse does.
    coefficients = y @ np.linalg.pinv(design).T  # [..., 3] = (ln A, alpha, beta)
    power_law = power_law_exponent(eigenvalues, ranks)
    cut_off = coefficients[..., 2] > 0
    log_amplitude = np.where(cut_off, coefficients[..., 0], np.log(power_law.amplitude))
    alpha = np.where(cut_off, coefficients[..., 1], power_law.alpha)
    beta = np.where(cut_off, coefficients[..., 2], 0.0)
    with np.errstate(divide="ignore"):
        n_c = np.where(np.isnan(beta), np.nan, 1.0 / beta)
    y_fit = log_amplitude[..., None] - alpha[..., None] * np.log(n) - beta[..., None] * n
    return TruncatedPowerLawFit(
        alpha=alpha, n_c=n_c, amplitude=np.exp(log_amplitude), r2=_r_squared(y, y_fit)
    )

