r"""The eigenspectrum of an activity covariance and its power-law decay, with a confidence interval.

[`covariance_spectrum`][]: the eigenvalues $\lambda_1 \ge \lambda_2 \ge \dots$ of the covariance
of recorded activity and the exponent $\alpha$ of $\lambda_n \propto n^{-\alpha}$ (Stringer et
al. 2019) over a fit range capped where eigenvalue bias would dominate, with a half-sample or
block-bootstrap interval over time points ([`effective_samples`][] says how many are independent).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Literal

import numpy as np
import xarray as xr
from jax.typing import ArrayLike

from dynlab.analyses.spectra.power_law import power_law_exponent, truncated_power_law_fit
from dynlab.errors import ConfigError
from dynlab.provenance import stamp_attrs
from dynlab.statistics import (
    BATCH_FACTOR,
    block_resample_indices,
    bootstrap_interval,
    half_sample_interval,
    half_sample_weights,
    integrated_autocorrelation_time,
)


FIT_RANK_FACTOR = 0.7
r"""The default fit range ends at rank $\lfloor 0.7\sqrt{M_{\rm eff}}\rfloor$ (and at least 3); see
[`covariance_spectrum`][]."""

BIAS_CORRECTION_ERROR = 2.0
r"""The half-sample interval's half-width is multiplied by $1 + 2/\sqrt{M_{\rm eff}}$: the error of
its bias correction, which the half-samples' spread does not include (see [`covariance_spectrum`][])."""


def effective_samples(centred: np.ndarray, n_components: int = 8) -> tuple[float, float, float]:
    r"""$(M_{\rm eff}, \hat\tau_2, \hat\tau_1)$ of rows in time order, from the leading `n_components` principal components.

    $\hat\tau_1$ and $\hat\tau_2$ are the largest integrated autocorrelation times
    ([`dynlab.statistics.integrated_autocorrelation_time`][]) of the scores $s_{t,j}$ and of
    their squares $s_{t,j}^2$. A covariance is a mean of products, so $\hat\tau_2$ sets its
    error: $M_{\rm eff} = M/(2\hat\tau_2)$ rows carry independent information on it (for
    Gaussian AR(1) rows $\tau_2 = (1+\rho^2)/(2(1-\rho^2))$, $\tau_1 = (1+\rho)/(2(1-\rho))$:
    4.8 and 9.5 at $\rho = 0.9$). Resampling blocks are made longer than either memory
    ([`covariance_spectrum`][]). White rows give $\hat\tau \approx 1/2$, $M_{\rm eff} \approx M$."""
    m, n = centred.shape
    _, vectors = np.linalg.eigh(centred.T @ centred)
    scores = centred @ vectors[:, ::-1][:, : min(n_components, n)]
    tau_1 = float(np.max(integrated_autocorrelation_time(scores.T)))
    tau_2 = float(np.max(integrated_autocorrelation_time((scores**2).T)))
    return m / (2.0 * tau_2), tau_2, tau_1


def _half_sample_eigenvalues(centred: np.ndarray, block: int, n_half: int, rng: np.random.Generator) -> np.ndarray:
    r"""Covariance eigenvalues (descending) of `n_half` half-samples, `[B, N]`: each the rows of a random half
    of the $\lfloor M/L \rfloor$ non-overlapping blocks of $L$ rows ([`dynlab.statistics.half_sample_weights`][]),
    re-centred. A half-sample's Gram matrix is a sum of block Gram matrices (computed once), so it
    costs $n_b N^2$ (one matrix product for all)."""
    m, n = centred.shape
    n_blocks = m // block
    rows = centred[: n_blocks * block].reshape(n_blocks, block, n)
    gram = np.matmul(np.swapaxes(rows, 1, 2), rows).reshape(n_blocks, n * n)
    sums = rows.sum(axis=1)
    weights = half_sample_weights(n_blocks, n_half, rng)
    size = (n_blocks // 2) * block
    mean = weights @ sums / size
    cov = ((weights @ gram).reshape(-1, n, n) - size * mean[:, :, None] * mean[:, None, :]) / (size - 1)
    return np.linalg.eigvalsh(cov)[:, ::-1]


def _resampled_eigenvalues(centred: np.ndarray, block: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    r"""Covariance eigenvalues (descending) of `n_boot` circular block-bootstrap resamples, `[B, N]`.

    A resample is $\lceil M/L\rceil$ blocks of $L$ consecutive rows (circular) with uniform random
    starts, cut to $M$ rows ([`dynlab.statistics.block_resample_indices`][]); it is re-centred and
    its covariance eigendecomposed in float64. With $L > 1$ the Gram matrix of a resample is a sum
    of block Gram matrices, read off prefix sums of the rows' outer products (exact up to
    rounding of order $\epsilon M \lambda_1$), so a resample costs $\lceil M/L\rceil N^2$ instead of
    $M N^2$; when $M N^2$ is large, or $L = 1$, rows are gathered in batches of bounded memory.
    """
    m, n = centred.shape
    n_blocks = -(-m // block)
    if block > 1 and m * n * n <= (1 << 24):
        extended = np.concatenate([centred, centred[: block]])  # circular blocks
        outer = (extended[:, :, None] * extended[:, None, :]).reshape(len(extended), -1)
        gram = np.concatenate([np.zeros((1, n * n)), np.cumsum(outer, axis=0)])
        sums = np.concatenate([np.zeros((1, n)), np.cumsum(extended, axis=0)])
        block_gram, block_sum = gram[block : block + m] - gram[:m], sums[block : block + m] - sums[:m]
        starts = block_resample_indices(m, block, n_boot, rng)[:, ::block][:, :n_blocks]
        last = m - (n_blocks - 1) * block  # the last block is cut to this many rows
        tail_gram = gram[starts[:, -1] + last] - gram[starts[:, -1]]
        tail_sum = sums[starts[:, -1] + last] - sums[starts[:, -1]]
        counts = np.zeros((n_boot, m))  # how often each full block is drawn, per resample
        np.add.at(counts, (np.repeat(np.arange(n_boot), n_blocks - 1), starts[:, :-1].ravel()), 1.0)
        total = counts @ block_gram + tail_gram
        mean = (counts @ block_sum + tail_sum) / m
        cov = (total.reshape(-1, n, n) - m * mean[:, :, None] * mean[:, None, :]) / (m - 1)
        return np.linalg.eigvalsh(cov)[:, ::-1]
    out = np.empty((n_boot, n))
    batch = max(1, min(n_boot, (1 << 24) // (m * n)))
    for first in range(0, n_boot, batch):
        idx = block_resample_indices(m, block, min(batch, n_boot - first), rng)
        sample = centred[idx]
        sample = sample - sample.mean(axis=1, keepdims=True)
        cov = np.matmul(np.swapaxes(sample, 1, 2), sample) / (m - 1)
        out[first : first + len(idx)] = np.linalg.eigvalsh(cov)[:, ::-1]
    return out


def covariance_spectrum(
    activity: ArrayLike,
    *,
    fit_range: tuple[int, int] | None = None,
    n_boot: int = 200,
    seed: int = 0,
    block_size: int | Literal["auto"] = "auto",
    confidence: float = 0.95,
    rel_floor: float = 1e-10,
    ci_method: Literal["half-sample", "basic", "percentile"] = "half-sample",
) -> xr.Dataset:
    r"""Eigenspectrum of the activity covariance and its power-law decay.

    With activity $X \in \mathbb{R}^{M \times N}$ ($M$ samples of $N$ units; `[trials, T, N]`
    is pooled into $M = \text{trials}\cdot T$ rows, and centred by the pooled mean) the
    covariance and its eigenvalues are

    $$C = \frac{1}{M-1} (X - \bar X)^\top (X - \bar X), \qquad
      C u_n = \lambda_n u_n, \quad \lambda_1 \ge \dots \ge \lambda_N \ge 0,$$

    with the explained-variance ratio $\lambda_n / \sum_m \lambda_m$ and the participation
    ratio $(\sum_n \lambda_n)^2 / \sum_n \lambda_n^2$. $C$ has rank at most
    $r = \min(M-1, N)$: the eigenvalues beyond $r$ are exactly zero and are stored as 0
    (rounding would otherwise leave arbitrary tiny values); rounding negatives are clipped
    to 0.

    Over the ranks $n \in [n_{\min}, n_{\max}]$ (`fit_range`) two fits are made by least
    squares in log–log coordinates (see [`power_law_exponent`][] and
    [`truncated_power_law_fit`][]):

    $$\lambda_n \approx A\, n^{-\alpha}, \qquad \lambda_n \approx A'\, n^{-\alpha'} e^{-n/n_c}.$$

    The default range is $n_{\min} = 1$ and $n_{\max}$ = the smallest of
    $\lfloor r/2 \rfloor$ (that is $\lfloor N/2 \rfloor$ when $M > N$), the number of
    eigenvalues above `rel_floor` $\cdot\lambda_1$, and
    $\max(3, \lfloor 0.7\sqrt{M_{\rm eff}}\rfloor)$ ([`FIT_RANK_FACTOR`][]), where
    $M_{\rm eff} = M/(2\hat\tau_2)$ is the number of effectively independent rows
    ([`effective_samples`][]). Why: sample eigenvalues are biased, to first order
    (Lawley 1956) by $\frac{\lambda_n}{M}\sum_{m \ne n}\frac{\lambda_m}{\lambda_n - \lambda_m}$, which for
    $\lambda_n \propto n^{-\alpha}$ grows like $\frac{n}{M}\ln\frac{N}{n}$ relative to $\lambda_n$: the
    tail of the fitted range is lifted and $\hat\alpha$ comes out too small, and beyond
    $n \sim \sqrt{M_{\rm eff}}$ that bias outgrows the sampling error any interval describes.
    Measured with $\lambda_n = n^{-1}$, $N = 64$ (200 data sets each): i.i.d. rows, $M = 200$,
    ranks 1–32: $\mathrm E\hat\alpha = 1.017$ (sd 0.019), 95% percentile-bootstrap coverage 0.09,
    basic 0.67; ranks 1–16: $0.978$, 0.88 / 0.88; ranks $1$–$\lfloor 0.7\sqrt{M_{\rm eff}}\rfloor$
    (≈ 8): $0.973$ (sd 0.05). AR(1) rows with $\rho = 0.9$, $M = 2000$, ranks 1–32: $1.023$
    (sd 0.018), 0.07 / 0.74; ranks 1–8 by the rule: $0.975$ (sd 0.05). Eigenvalues at the level of float64 rounding carry no
    signal; and when $M \le N$ a bootstrap resample (about $0.63 M$ distinct rows) has rank near
    $0.63 r$, so fitting at most the first half of the nonzero eigenvalues keeps every
    replicate's fit defined. An explicit `fit_range` beyond the rule is fitted as asked, and its
    interval may then miss the truth more often than its level says.

    **Confidence interval.** The rows are resampled `n_boot` times in
    blocks of $L$ consecutive rows (`block_size`; `"auto"`, the default: the rule of
    [`dynlab.statistics.auto_block_length`][], $L = \lceil 10\max(\hat\tau_1, \hat\tau_2)\rceil$
    with the autocorrelation times of [`effective_samples`][], at most $M/10$; about 6 for i.i.d.
    rows), which keeps the temporal
    autocorrelation of a time series within blocks; blocks run across trial boundaries of pooled
    `[trials, T, N]` input. Each replicate's covariance is eigendecomposed (float64) and fitted
    over the same ranks. The interval (`ci_method`):

    - `"half-sample"` (default): `n_boot` half-samples, each the rows of a random half of the
      $\lfloor M/L\rfloor$ non-overlapping blocks; the bias-corrected centre
      $2\hat\alpha - \bar\alpha_h$ $\pm\, t_{n_b-1}$ times the sd of the half-sample exponents
      ([`dynlab.statistics.half_sample_interval`][]). A half-sample is a real sample of half the
      size, so it measures the estimator's small-sample bias directly;
      Then the half-width is multiplied by $1 + 2/\sqrt{M_{\rm eff}}$ ([`BIAS_CORRECTION_ERROR`][]):
      the bias correction is itself an estimate, whose error the half-samples' spread does not
      include. Measured (the same spectrum, 200 data sets per cell, `n_boot=100`): the sd of
      the corrected centre over data sets exceeds the mean half-sample sd by a factor 1.08
      (i.i.d., $M = 1000$, $M_{\rm eff} \approx 875$), 1.17–1.21 ($M_{\rm eff} \approx 150$–230:
      i.i.d. $M = 200$; AR(1) $\rho = 0.5$, $M = 500$; $\rho = 0.9$, $M = 2000$), 1.35
      ($\rho = 0.9$, $M = 1000$, $M_{\rm eff} \approx 66$) and 1.47 ($\rho = 0.9$, $M = 500$,
      $M_{\rm eff} \approx 31$, with 3–4 ranks fitted); $1 + 2/\sqrt{M_{\rm eff}}$ follows this
      (a calibration of this estimator, not a theorem). Without it those cells covered
      0.84–0.955; with it (`benchmarks/coverage_spectra.py`, another seed) $\rho = 0.9$ at
      $M$ = 500, 1000, 2000: 0.95, 0.98, 0.935; $\rho = 0.5$, $M = 500$: 0.955; i.i.d. $M$ = 200,
      1000: 0.945, 0.94;
    - `"basic"`: circular block-bootstrap resamples of $M$ rows and the basic interval
      $[2\hat\alpha - q_{1-a}, 2\hat\alpha - q_a]$, which removes the bias the resamples
      reproduce; but a resample's repeated rows spread its eigenvalues more than the data's, so
      it over-corrects;
    - `"percentile"`: $[q_a, q_{1-a}]$, which keeps the bias ($q$ the quantiles of the replicate
      exponents, $a = (1 - c)/2$).

    Measured coverage of the default 95% interval of $\alpha = 1$ ($N = 64$, $\lambda_n = n^{-1}$,
    200 data sets per cell, `n_boot=100`; `benchmarks/coverage_spectra.py` prints the table):
    see the widening above; before it, AR(1) rows $\rho = 0.9$, $M = 2000$: 0.92–0.945, $M = 500$:
    0.805–0.84; i.i.d. $M = 1000$: 0.91–0.96; i.i.d. $M = 200$: 0.89–0.95. The basic bootstrap over the same ranks: 0.86–0.92. The old percentile interval
    over ranks 1–32: 0.09 at i.i.d. $M = 200$, 0.07 for the AR(1) rows. Its population is one
    recording: it describes the error of $\hat\alpha$ from this finite stretch of activity, not
    the variation between networks or seeds. Replicates whose spectrum has a zero eigenvalue in
    the fit range (possible when $M$ is small) are dropped; if more than half are dropped the
    interval is NaN and a `RuntimeWarning` is emitted. `n_boot=0` skips the bootstrap
    (interval NaN).

    **Arguments:**

    - `activity`: `[T, N]` or `[trials, T, N]`, real.
    - `fit_range`: `(n_min, n_max)`, inclusive 1-based ranks, at least 3 of them, all with
      nonzero eigenvalues; `None` for the default above.
    - `n_boot`: the number of half-samples or bootstrap resamples ($\ge 0$).
    - `seed`: the seed of their `numpy.random.default_rng`.
    - `block_size`: $L$, the bootstrap block length in rows ($L = 1$: i.i.d. rows), or
      `"auto"` (from the autocorrelation, above).
    - `confidence`: the level of the interval, in $(0, 1)$.
    - `rel_floor`: eigenvalues at or below `rel_floor` $\cdot\lambda_1$ end the default fit
      range.
    - `ci_method`: `"half-sample"` (default), `"basic"` or `"percentile"`.

    **Returns:**

    An `xr.Dataset` with coordinate `rank` $= 1, \dots, N$ and `bootstrap`
    $= 0, \dots, B-1$:

    - `eigenvalue` (`rank`): $\lambda_n$, descending, in squared activity units;
    - `explained_variance_ratio` (`rank`): $\lambda_n / \sum_m \lambda_m$ (sums to 1);
    - `in_fit_range` (`rank`): whether rank $n$ was used by the fits;
    - `alpha`, `power_law_amplitude` ($A$), `power_law_r2`: the power-law fit;
    - `alpha_ci_low`, `alpha_ci_high`: the bootstrap interval of $\alpha$ (attrs `ci_level`,
      `ci_population`, `ci_method`, `ci_n` say which);
    - `alpha_ci_centre`: the interval's centre (bias-corrected);
    - `alpha_bootstrap` (`bootstrap`): the replicate exponents (half-samples or bootstrap
      resamples; NaN where dropped);
    - `truncated_alpha`, `truncated_n_c`, `truncated_amplitude`, `truncated_r2`: the
      truncated fit ($n_c = +\infty$ when the best fit has no cut-off);
    - `participation_ratio`;
    - attrs `analysis="covariance_spectrum"`, `dynlab_version`, `n_samples` ($M$),
      `n_units` ($N$), `n_trials`, `rank_limit` ($r$), `fit_rank_min`, `fit_rank_max`,
      `n_boot`, `n_boot_valid`, `seed`, `block_size` ($L$ used), `confidence`, `ci_method`,
      `ci_level`, `ci_population`, `ci_n`, `rel_floor`, `effective_samples` ($M_{\rm eff}$),
      `autocorrelation_time` ($\hat\tau_1$, rows), `autocorrelation_time_products` ($\hat\tau_2$).
    """
    x = np.asarray(activity)
    if x.ndim not in (2, 3) or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ConfigError(
            "activity must be a real array [T, N] or [trials, T, N]; "
            f"got shape {x.shape} and dtype {x.dtype}."
        )
    n_trials = x.shape[0] if x.ndim == 3 else 1
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)
    m, n = x.shape
    if m < 2 or n < 3:
        raise ConfigError(f"activity needs at least 2 samples and 3 units; got M={m}, N={n}.")
    if not np.all(np.isfinite(x)):
        raise ConfigError("activity contains NaN or infinite values.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ConfigError(f"n_boot must be a non-negative integer; got {n_boot!r}.")
    if block_size != "auto" and (isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer))
                                 or block_size < 1):
        raise ConfigError(f"block_size must be a positive integer or 'auto'; got {block_size!r}.")
    if block_size != "auto" and block_size > m:
        raise ConfigError(f"a bootstrap block of {block_size} rows is longer than the data (M = {m} rows).")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1); got {confidence!r}.")
    if ci_method not in ("half-sample", "basic", "percentile"):
        raise ConfigError(f"ci_method must be 'half-sample', 'basic' or 'percentile'; got {ci_method!r}.")

    centred = x - x.mean(axis=0)
    m_eff, tau, tau_rows = effective_samples(centred)
    if block_size == "auto":  # the rule of dynlab.statistics.auto_block_length, on the longer memory
        block_size = int(max(1, min(np.ceil(BATCH_FACTOR * max(tau, tau_rows)), m // 10)))
    eigenvalues = np.linalg.eigvalsh(centred.T @ centred / (m - 1))[::-1]
    rank_limit = min(m - 1, n)
    eigenvalues = np.clip(eigenvalues, 0.0, None)
    eigenvalues[rank_limit:] = 0.0
    if eigenvalues[0] <= 0:
        raise ConfigError("activity has zero variance in every unit; there is no spectrum.")

    default_range = fit_range is None
    if default_range:
        above_floor = int(np.sum(eigenvalues > rel_floor * eigenvalues[0]))
        fit_range = (1, min(rank_limit // 2, above_floor, max(3, int(FIT_RANK_FACTOR * np.sqrt(m_eff)))))
    n_min, n_max = (int(r) for r in fit_range)
    if not 1 <= n_min <= n_max - 2 or n_max > n:
        raise ConfigError(
            f"fit_range must be (n_min, n_max) with 1 <= n_min, n_max - n_min >= 2 and "
            f"n_max <= N = {n}; got {tuple(fit_range)}"
            + (
                f" (the default: half the rank {rank_limit} of the covariance, cut where "
                "eigenvalues fall below rel_floor * lambda_1; pass fit_range explicitly)."
                if default_range
                else "."
            )
        )
    if eigenvalues[n_max - 1] <= 0:
        raise ConfigError(
            f"fit_range {tuple(fit_range)} includes zero eigenvalues: only the first "
            f"{int(np.sum(eigenvalues > 0))} are nonzero (the covariance has rank at most "
            f"min(M - 1, N) = {rank_limit}). Choose n_max at most that."
        )
    ranks = np.arange(n_min, n_max + 1)
    fit = power_law_exponent(eigenvalues[n_min - 1 : n_max], ranks)
    truncated = truncated_power_law_fit(eigenvalues[n_min - 1 : n_max], ranks)

    alpha_boot = np.full(n_boot, np.nan)
    half_sampled = ci_method == "half-sample"
    if half_sampled and m // int(block_size) < 2:
        raise ConfigError(f"half-sampling needs at least 2 blocks of {block_size} rows; the data have M = {m} rows "
                          "(use a shorter block_size)")
    population = (f"half-samples of this recording ({m // int(block_size)} blocks of {int(block_size)} rows)"
                  if half_sampled else f"bootstrap resamples of this recording's rows (blocks of {int(block_size)})")

    inflation = 1.0 + BIAS_CORRECTION_ERROR / np.sqrt(m_eff)

    def interval(replicates):
        if half_sampled:
            ci = half_sample_interval(fit.alpha, replicates, n_blocks=m // int(block_size), level=confidence,
                                      population=population)
            half = inflation * ci.half_width
            return dataclasses.replace(ci, low=ci.estimate - half, high=ci.estimate + half,
                                       method=ci.method + f", widened x{inflation:.2f} for the bias correction's error")
        return bootstrap_interval(fit.alpha, replicates, level=confidence, method=ci_method, population=population)

    ci = interval(np.full(2, np.nan))
    if n_boot:
        # float64 throughout: the tail of a steep spectrum sits far below float32 resolution of lambda_1.
        rng = np.random.default_rng(seed)
        if half_sampled:
            boot = _half_sample_eigenvalues(centred, int(block_size), int(n_boot), rng)
        else:
            boot = _resampled_eigenvalues(centred, int(block_size), int(n_boot), rng)
        # A resample's zero eigenvalues come out as +-rounding; anything this small is zero.
        in_range = boot[:, n_min - 1 : n_max]
        in_range = np.where(in_range > rel_floor * boot[:, :1], in_range, 0.0)
        alpha_boot = power_law_exponent(in_range, ranks).alpha
        valid = alpha_boot[np.isfinite(alpha_boot)]
        ci = interval(alpha_boot)
        if 2 * valid.size <= n_boot:
            warnings.warn(
                f"covariance_spectrum: only {valid.size} of {n_boot} bootstrap replicates have "
                f"nonzero eigenvalues over ranks {n_min}..{n_max} (too few samples, M={m}); "
                "the confidence interval is NaN. Narrow fit_range.",
                RuntimeWarning,
                stacklevel=2,
            )
    n_boot_valid = int(np.isfinite(alpha_boot).sum())

    total = eigenvalues.sum()
    power = "activity^2"  # squared units of whatever `activity` is measured in
    exponent = {"units": "1"}
    return xr.Dataset(
        {
            "eigenvalue": (
                "rank", eigenvalues, {"long_name": "covariance eigenvalue", "units": power}
            ),
            "explained_variance_ratio": (
                "rank", eigenvalues / total, {"long_name": "explained variance ratio", "units": "1"}
            ),
            "in_fit_range": (
                "rank", (ranks[0] <= np.arange(1, n + 1)) & (np.arange(1, n + 1) <= ranks[-1]),
                {"long_name": "rank used by the power-law fits"},
            ),
            "alpha": ((), fit.alpha, {**exponent, "long_name": "power-law exponent alpha (least-squares fit)"}),
            "alpha_ci_centre": ((), float(ci.estimate), {
                **exponent, "long_name": "centre of the alpha interval (bias-corrected for 'half-sample' "
                                         "and, in effect, for 'basic'; the fit itself for 'percentile')"}),
            "power_law_amplitude": (
                (), fit.amplitude, {"units": power, "long_name": "power-law amplitude A"}
            ),
            "power_law_r2": ((), fit.r2, {"units": "1", "long_name": "power-law fit R^2 (log)"}),
            "alpha_ci_low": (
                (), float(ci.low), {**exponent, "long_name": f"alpha, lower bound of the {ci.label}", **ci.attrs()}
            ),
            "alpha_ci_high": (
                (), float(ci.high), {**exponent, "long_name": f"alpha, upper bound of the {ci.label}", **ci.attrs()}
            ),
            "alpha_bootstrap": (
                "bootstrap", alpha_boot, {**exponent, "long_name": "bootstrap replicate alpha"}
            ),
            "truncated_alpha": (
                (), truncated.alpha, {**exponent, "long_name": "truncated power-law exponent"}
            ),
            "truncated_n_c": (
                (), truncated.n_c, {"units": "rank", "long_name": "truncated power-law cut-off n_c"}
            ),
            "truncated_amplitude": (
                (),
                truncated.amplitude,
                {"units": power, "long_name": "truncated power-law amplitude"},
            ),
            "truncated_r2": (
                (), truncated.r2, {"units": "1", "long_name": "truncated power-law fit R^2 (log)"}
            ),
            "participation_ratio": (
                (), total**2 / np.sum(eigenvalues**2),
                {"units": "1", "long_name": "participation ratio (sum lambda)^2 / sum lambda^2"},
            ),
        },
        coords={
            "rank": ("rank", np.arange(1, n + 1), {"long_name": "eigenvalue rank (descending)"}),
            "bootstrap": ("bootstrap", np.arange(n_boot), {"long_name": "bootstrap replicate"}),
        },
        attrs=stamp_attrs(analysis="covariance_spectrum", seed=int(seed), config={
            "n_samples": m,
            "n_units": n,
            "n_trials": n_trials,
            "rank_limit": rank_limit,
            "fit_rank_min": n_min,
            "fit_rank_max": n_max,
            "n_boot": int(n_boot),
            "n_boot_valid": n_boot_valid,
            "block_size": int(block_size),
            "confidence": float(confidence),
            **ci.attrs(),
            "ci_label": ci.label,
            "rel_floor": float(rel_floor),
            "effective_samples": float(m_eff),
            "autocorrelation_time": float(tau_rows),
            "autocorrelation_time_products": float(tau),
        }),
    )
