"""Within one run: the local exponents of its QR blocks and the standard error of their time average.

Used by the interval over realisations ([`replicates`][dynlab.analyses.lyapunov.replicates]) and by the
choice of the re-orthonormalisation interval ([`reortho`][dynlab.analyses.lyapunov.reortho]), which
sizes its tolerance from a pilot run's error.
"""

from __future__ import annotations

import warnings

import numpy as np
from jaxtyping import ArrayLike

from dynlab.statistics import BATCH_FACTOR, batch_means, integrated_autocorrelation_time

__all__ = ["ROUNDING_FACTOR", "block_growth", "boundary_error", "rounding_se", "se_of_realisation_mean", "time_average_se", "unit_roundoff",
           "within_run_errors"]

ROUNDING_FACTOR = 4.0
r"""$c$ of [`rounding_se`][]."""


def unit_roundoff(x64: bool) -> float:
    r"""$\epsilon$: $2^{-53}$ in float64, $2^{-24}$ in float32."""
    return 2.0**-53 if x64 else 2.0**-24


def block_growth(running: ArrayLike, times: ArrayLike) -> np.ndarray:
    r"""The log growth of every QR block, $g_{i,b} = \ln R'_{ii}$ of block $b$, from `running`.

    `running[..., b, i]` is $\frac{1}{t_b}\sum_{b' \le b} g_{i,b'}$ with $t_b$ = `times[b]` steps, so
    $g_{i,b} = t_b\, r_{b,i} - t_{b-1}\, r_{b-1,i}$ (float64; float32 `running` leaves a rounding
    of about $\epsilon\, |\lambda| t_b$ in each). Divided by the block length this is the *local*
    exponent of the block, whose time average is the exponent. Returns `[..., n_qr, k]`.
    """
    r = np.asarray(running, np.float64)
    t = np.asarray(times, np.float64)
    total = r * t[:, None]
    with np.errstate(invalid="ignore"):  # inf - inf in a diverged run is NaN, as it should be
        return np.diff(total, axis=-2, prepend=np.zeros_like(total[..., :1, :]))


def within_run_errors(running: ArrayLike, times: ArrayLike, valid: ArrayLike | None = None) -> tuple[np.ndarray, int]:
    r"""Batch-means standard error of each run's exponents, from its local exponents.

    The local exponent of QR block $b$ is $g_{i,b}/m$ ([`block_growth`][]); the exponent is
    their time average over the equal-length blocks (the shorter last block is left out here).
    Their standard error is [`dynlab.statistics.batch_means`][] over consecutive blocks, the
    batch length $\lceil 10\,\hat\tau_{\rm int}\rceil$ blocks from the largest integrated
    autocorrelation time over the `valid` runs and exponents (at most a tenth of the run).
    `running` is `[..., n_qr, k]`; returns `(se [..., k], batch length in blocks)`. Runs that are
    not `valid` (diverged) or whose local exponents are not finite get NaN; fewer than 2 full
    blocks give NaN everywhere and a batch length of 0.

    The error is conservative (too large) where the local exponents are anti-correlated in time:
    for a pair of nearly equal exponents whose frame rotates in their plane (a complex pair of a
    fixed point's Jacobian, or the logistic map's tent-map conjugacy), the time average telescopes
    and its error falls like $1/T$, not $1/\sqrt T$, which batch means cannot see. Measured on a
    trained ARU under the adding task: for such pairs the realisations agreed about 5 times better
    than this error says; the interval over realisations is the one to read.
    """
    times = np.asarray(times)
    m = int(times[0])
    n_full = int(np.sum(np.diff(np.concatenate([[0], times])) == m))
    local = block_growth(running, times)[..., :n_full, :] / m  # [..., n_full, k]
    shape = local.shape[:-2] + local.shape[-1:]
    valid = np.ones(local.shape[:-2], bool) if valid is None else np.asarray(valid, bool)
    series_ok = valid[..., None] & np.all(np.isfinite(local), axis=-2)
    if n_full < 2 or not series_ok.any():
        return np.full(shape, np.nan), 0
    series = np.swapaxes(np.where(series_ok[..., None, :], local, 0.0), -1, -2)  # [..., k, n_full]
    tau = float(np.max(integrated_autocorrelation_time(series[series_ok])))
    block = int(max(1, min(np.ceil(BATCH_FACTOR * tau), n_full // 10)))
    if n_full // block < 2:
        block = max(1, n_full // 2)
    result = batch_means(series, block=block)
    return np.where(series_ok, result.se, np.nan), block


def se_of_realisation_mean(se: ArrayLike) -> np.ndarray:
    r"""The time-averaging standard error of the mean over realisations, from each run's own.

    `se` is `[R, I, k]` ([`within_run_errors`][] of `I` runs in each of `R` realisations). A
    realisation's value is the mean of its runs, whose SE is taken as the mean of theirs
    (conservative: runs of one realisation share an input and are correlated); the mean of `R`
    independent realisations then has $\sqrt{\sum_r \mathrm{SE}_r^2}/R$. Realisations with a
    non-finite SE (every run diverged) are left out column by column; none left gives NaN.
    Returns `[k]`.
    """
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns give NaN, as they should
        se_real = np.nanmean(np.asarray(se, float), axis=1)
        used = np.isfinite(se_real)
        return np.sqrt(np.sum(np.where(used, se_real, 0.0) ** 2, axis=0)) / used.sum(axis=0)


def rounding_se(estimate: ArrayLike, x64: bool) -> np.ndarray:
    r"""The error the arithmetic alone leaves in an exponent: $c\,\epsilon\,\max(1, |\lambda|)$.

    Where every run settles onto one fixed point of a real leading eigenvalue, the local exponents
    are constant, the realisations agree to the last bit and both the spread and the batch-means
    error are 0, but the value still carries the rounding of $h^*$, of $J(h^*)$ and of the logs:
    an interval of width 0 would claim more digits than the dtype has. Measured on the
    `lyapunov-grid` of a 16-unit network against $\ln\rho(J(h^*))$ computed in float64: at most
    $2.2\,\epsilon|\lambda|$ in float32 and below $\epsilon|\lambda|$ in float64. $c$ =
    [`ROUNDING_FACTOR`][] = 4 (with the $t$ quantile of 5 realisations, a half-width of
    $11\,\epsilon|\lambda|$: five times the largest seen); $\epsilon$ = $2^{-24}$ or $2^{-53}$.
    """
    return ROUNDING_FACTOR * unit_roundoff(x64) * np.fmax(1.0, np.abs(np.asarray(estimate, float)))


def time_average_se(running: ArrayLike, times: ArrayLike, valid: ArrayLike | None = None,
                    pool: bool = False) -> tuple[np.ndarray, int]:
    r"""Standard error of each run's time average from the autocovariances of its local exponents.

    With $\hat\gamma_t$ the sample autocovariances of the local exponents $x_b$ of the $n$ full QR
    blocks ([`block_growth`][] / block length),

    $$\mathrm{SE}^2 = \frac{1}{n}\Big(\hat\gamma_0 + 2\sum_{t=1}^{W}\hat\gamma_t\Big)^+,$$

    $W$ Sokal's window (the first $W$ with $W \ge 5\,\hat\tau(W)$, $\hat\tau(W) = \tfrac12 +
    \sum_{t \le W}\hat\gamma_t/\hat\gamma_0$), the largest over the `valid` series. Unlike batch
    means ([`within_run_errors`][]) and the clamped $\tau_{\rm int} \ge 1/2$ of
    [`dynlab.statistics.integrated_autocorrelation_time`][], negative autocovariances count: where
    the local exponents telescope (a frame that rotates in the plane of a complex pair, the
    logistic map's conjugacy to the tent map, whose local exponents are $\ln 2$ plus a
    coboundary), the time average's error falls like $1/T$, and this estimate falls with it.
    Measured (95% intervals over 5 realisations, 200 repetitions, as the interval's floor): batch
    means made the logistic map's interval 27x and the Henon map's 1.5x wider than needed (both
    covered 100%).

    ``pool=True``: the runs on the leading axis are independent repeats of one measurement (the
    realisations), and the standard error of *their mean* is returned (`[k]`), from the mean of
    their long-run variances before the clamp at 0: where the true value is near 0 (telescoping)
    the runs' sampling noise then cancels instead of piling up as positive parts. Returns
    `(se [..., k], W)`; not valid or non-finite series get NaN.
    """
    times = np.asarray(times)
    m = int(times[0])
    n_full = int(np.sum(np.diff(np.concatenate([[0], times])) == m))
    local = block_growth(running, times)[..., :n_full, :] / m
    shape = local.shape[:-2] + local.shape[-1:]
    valid = np.ones(local.shape[:-2], bool) if valid is None else np.asarray(valid, bool)
    ok = valid[..., None] & np.all(np.isfinite(local), axis=-2)
    if n_full < 4 or not ok.any():
        return np.full(shape[1:] if pool else shape, np.nan), 0
    x = np.swapaxes(np.where(ok[..., None, :], local, 0.0), -1, -2)  # [..., k, n]
    xc = x - x.mean(axis=-1, keepdims=True)
    spectrum = np.fft.rfft(xc, 2 * n_full, axis=-1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), axis=-1)[..., :n_full] / n_full
    var = acov[..., :1]
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = 0.5 + np.cumsum(np.where(var > 0, acov[..., 1:] / np.where(var > 0, var, 1), 0.0), axis=-1)
    lags = np.arange(1, n_full)
    reached = lags >= 5.0 * tau
    first = np.where(reached.any(axis=-1), np.argmax(reached, axis=-1), n_full - 2)
    window = int(min(np.max(first[ok]) + 1, n_full // 2))
    long_run = acov[..., 0] + 2 * acov[..., 1 : window + 1].sum(axis=-1)
    if pool:
        used = ok.reshape(ok.shape[0], -1, ok.shape[-1])
        lrv = np.where(ok, long_run, 0.0).reshape(used.shape)
        count = used.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            pooled = lrv.sum(axis=0) / count  # mean long-run variance of one run, [..., k]
            se = np.sqrt(np.maximum(pooled, 0.0) / n_full / count)
        return np.where(count > 0, se, np.nan).reshape(ok.shape[1:]), window
    se = np.sqrt(np.maximum(long_run, 0.0) / n_full)
    return np.where(ok, se, np.nan), window


def boundary_error(running: ArrayLike, times: ArrayLike, valid: ArrayLike | None = None) -> np.ndarray:
    r"""The $O(1/T)$ error a telescoping time average keeps: $\mathrm{sd}_t(S_t)/n$ per run.

    $S_t = \sum_{b \le t} (x_b - \bar x)$ are the cumulative deviations of the $n$ local exponents
    $x_b$ from their mean. Where the local exponents telescope ($x_b = \lambda + \phi_b -
    \phi_{b-1}$: a frame rotating in the plane of a complex pair), the time average's error is
    $(\phi_n - \phi_0)/n$, which [`time_average_se`][] cannot see, and $S_t = \phi_t - \phi_0 -
    t(\ldots)$ shows the size of $\phi$. At a fixed point the frames of all realisations lock to
    one rotation, so the realisations share this error and their spread does not show it either:
    measured on float32 tanh networks at fixed points, pairs missed by 2.4 half-widths. For a
    series that does not telescope (a random walk $S_t$) this is about $0.4$ of one run's standard
    error, below the $t$ half-width of the mean over 5 realisations in most samples (the Henon
    map's printed interval covers 0.985 with it). Returns `[..., k]`; not valid runs get NaN.
    """
    times = np.asarray(times)
    m = int(times[0])
    n_full = int(np.sum(np.diff(np.concatenate([[0], times])) == m))
    local = block_growth(running, times)[..., :n_full, :] / m
    valid = np.ones(local.shape[:-2], bool) if valid is None else np.asarray(valid, bool)
    if n_full < 2:
        return np.full(local.shape[:-2] + local.shape[-1:], np.nan)
    cumulative = np.cumsum(local - local.mean(axis=-2, keepdims=True), axis=-2)
    return np.where(valid[..., None], cumulative.std(axis=-2) / n_full, np.nan)
