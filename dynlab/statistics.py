r"""Uncertainty that says what it is: intervals, standard errors and rank correlations.

Every interval dynlab reports is an [`Interval`][]: its bounds, the estimate they surround, the
confidence ``level`` and, as data, the ``population`` the replicates were drawn from ("5 input
realisations", "10 training seeds", "bootstrap over rows in blocks of 40 steps") and the
``method``. ``Interval.attrs()`` puts those into a dataset's attrs, ``Interval.label`` into a
printed header, so that no number is shown without saying what its error bar means.

Three kinds of replication, three tools:

- **independent replicates** (seeds, input realisations) of a measurement:
  [`t_interval`][], the Student-t interval of their mean with the sample standard deviation
  ($n - 1$ in the denominator), and [`mean_sd`][];
- **one long, autocorrelated run** whose time average is the measurement:
  [`batch_means`][], with the batch length chosen from the integrated autocorrelation time
  ([`integrated_autocorrelation_time`][], Sokal's window);
- **a statistic of one data set** that has no closed-form error (a fitted exponent):
  the bootstrap. [`bootstrap`][] wraps `scipy.stats.bootstrap` (BCa, basic or percentile) for
  i.i.d. observations and resamples blocks of consecutive rows for a time series
  ([`block_resample_indices`][], [`bootstrap_interval`][]); the block length comes from the
  autocorrelation as for batch means. For estimators with a strong small-sample bias that the
  bootstrap's repeated rows distort, [`half_sample_interval`][] (delete-half block jackknife)
  corrects the bias by extrapolating from half-samples.

**Quantities with a range** (an accuracy in $[0, 1]$, a difference of two in $[-1, 1]$, a count
$\ge 0$): [`bounded_interval`][] keeps the interval of a mean inside the range, and replicates that
all agree get the distribution-free [`agreement_interval`][] instead of a zero-width interval
that would decide anything; [`seeds_to_decide`][] says how many replicates a decision would need.
[`interval_text`][] prints an estimate with its interval in digits that agree with its width.

A statistic of a few replicates (seeds) that is not a mean: [`jackknife_interval`][] (leave one
replicate out), and for a rank correlation of replicate means [`rank_correlation_of_means`][].

Plus [`spearman`][] and [`welch`][], thin wrappers of `scipy.stats.spearmanr` and Welch's
t-test that drop NaN pairs and say how many pairs they used.

Only numpy, scipy and `dynlab.errors` are imported: this is a core module.

`scipy.stats` is imported inside the functions that use it: it costs about 0.8 s, and every
`dynlab` command imports this module while it loads its plug-ins.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dynlab.errors import ConfigError

__all__ = [
    "BATCH_FACTOR",
    "BatchMeans",
    "Interval",
    "SOKAL_WINDOW",
    "agreement_interval",
    "auto_block_length",
    "batch_means",
    "block_resample_indices",
    "bootstrap",
    "bootstrap_interval",
    "bounded_interval",
    "half_sample_interval",
    "half_sample_weights",
    "integrated_autocorrelation_time",
    "interval_text",
    "jackknife_interval",
    "mean_sd",
    "rank_correlation_of_means",
    "seeds_to_decide",
    "spearman",
    "t_interval",
    "welch",
]

SOKAL_WINDOW = 5.0
r"""$c$ in Sokal's automatic window $W = \min\{W : W \ge c\, \hat\tau_{\rm int}(W)\}$."""

BATCH_FACTOR = 10.0
r"""Batches (and bootstrap blocks) are $\lceil 10\, \hat\tau_{\rm int} \rceil$ steps long.

Why 10: for an AR(1) series the variance of a batch mean of length $L$ falls short of its
asymptotic value by a fraction $\approx \tau_{\rm int}/L$, so $L = 10\tau$ leaves about 5% in
the standard error. Measured (2000 series each, 95% t-intervals of the mean with $n_b - 1$
degrees of freedom): AR(1) $\rho = 0.9$, $n = 2000$: coverage 0.86 / 0.91 / 0.93 / 0.94 with
$L = 2, 4, 6, 10\,\hat\tau$; $\rho = 0.95$, $n = 1500$: 0.84 / 0.90 / 0.93 / 0.94; white noise:
0.95 for all.
"""

_MIN_BATCHES = 10


@contextlib.contextmanager
def _quiet():
    """Silence numpy's all-NaN-slice warnings (such slices give NaN by design)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _check_level(level: float) -> float:
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ConfigError(f"the confidence level must lie in (0, 1), e.g. 0.95; got {level!r}")
    return float(level)


def _count(n: int, population: str, what: str = "an interval") -> None:
    if n < 2:
        raise ConfigError(
            f"{what} needs at least 2 {population}; got {n} (ask for more replicates, e.g. seeds or realisations)"
        )


@dataclasses.dataclass(frozen=True)
class Interval:
    r"""A confidence interval with what it is about.

    - ``estimate``, ``low``, ``high``: arrays (or floats) of one shape; NaN where there was too
      little data (fewer than 2 finite replicates in a slice);
    - ``level``: the confidence level, e.g. 0.95;
    - ``population``: what the interval is over, in words, e.g. ``"5 input realisations"``;
    - ``method``: how it was computed, e.g. ``"Student t, ddof=1"``, ``"basic bootstrap"``;
    - ``n``: the number of replicates, batches or resamples it rests on.
    """

    estimate: Any
    low: Any
    high: Any
    level: float
    population: str
    method: str
    n: int

    @property
    def half_width(self) -> np.ndarray:
        """$(\\text{high} - \\text{low}) / 2$."""
        return (np.asarray(self.high, float) - np.asarray(self.low, float)) / 2

    def covers(self, value) -> np.ndarray:
        """Whether ``low <= value <= high`` (elementwise; False where the bounds are NaN)."""
        return (np.asarray(self.low) <= value) & (value <= np.asarray(self.high))

    @property
    def label(self) -> str:
        """E.g. ``"95% CI over 5 input realisations (Student t, ddof=1)"``: for table headers."""
        return f"{100 * self.level:g}% CI over {self.population} ({self.method})"

    def attrs(self, prefix: str = "ci") -> dict[str, Any]:
        """``{prefix}_level``, ``{prefix}_population``, ``{prefix}_method``, ``{prefix}_n`` for dataset attrs."""
        return {f"{prefix}_level": float(self.level), f"{prefix}_population": self.population,
                f"{prefix}_method": self.method, f"{prefix}_n": int(self.n)}


# ---------------------------------------------------------------------------------------------
# Independent replicates


def mean_sd(values, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Mean and sample standard deviation $s = \big(\frac{1}{n-1}\sum_j (x_j - \bar x)^2\big)^{1/2}$.

    NaNs are left out. At least 2 values along ``axis`` are required (ConfigError otherwise):
    a standard deviation of one value is not a spread. The sd describes the replicates; for the
    uncertainty of their mean use [`t_interval`][].
    """
    x = np.asarray(values, float)
    _count(x.shape[axis] if x.ndim else 1, "values", "a standard deviation")
    with np.errstate(invalid="ignore", divide="ignore"), _quiet():
        return np.nanmean(x, axis=axis), np.nanstd(x, axis=axis, ddof=1)


def t_interval(values, *, population: str, level: float = 0.95, axis: int = 0,
               allow_fewer: bool = False, se_floor=None, floor_dof=None) -> Interval:
    r"""Student-t interval of the mean of independent replicates along ``axis``.

    $$\bar x \pm t_{(1+c)/2,\; n-1}\, \frac{s}{\sqrt n}, \qquad
      s^2 = \frac{1}{n-1}\sum_{j=1}^{n} (x_j - \bar x)^2,$$

    exact for normally distributed replicates, with $c$ = ``level``. NaN replicates (e.g.
    diverged runs) are left out slice by slice; a slice with fewer than 2 finite values gets NaN
    bounds. Asking for an interval from fewer than 2 replicates (``values.shape[axis] < 2``)
    is a ConfigError, unless ``allow_fewer``: then one replicate gives its value and NaN bounds,
    none gives NaN everywhere (for callers that report what survived, e.g. the runs of a
    Lyapunov ensemble that did not diverge).

    ``population`` names the replicates, e.g. ``"input realisations"``; the interval's
    population reads ``"<n> <population>"``.

    ``se_floor``: a standard error of the mean known from elsewhere that the replicates' spread
    cannot be smaller than in expectation (e.g. the time-averaging error each replicate carries,
    estimated within each run); the interval then uses $\max(s/\sqrt n, \text{se\_floor})$
    with the same $t$ quantile. With few replicates $s$ can fall below it by chance (5
    realisations: $s/\sigma < 0.6$ one time in ten), and an interval narrower than the error the
    time averaging alone leaves would overstate the precision. The method then says so.

    ``floor_dof``: the degrees of freedom the floor was estimated with (e.g. the batches of all
    the replicates' runs); its half-width is then $t_{(1+c)/2,\,\nu}\,\text{se\_floor}$ with
    $\nu$ = ``floor_dof`` (``np.inf``: the normal quantile, for an error measured directly), and
    the interval's half-width is the larger of the two. Default: the replicates' $n - 1$, i.e.
    $t_{(1+c)/2,\,n-1} \max(s/\sqrt n, \text{se\_floor})$. A floor known to many degrees of
    freedom with the replicates' few would widen the interval beyond its level: with 5
    replicates and an accurate floor, $t_{0.975,4} = 2.78$ standard errors cover 99.4%.
    """
    import scipy.stats

    level = _check_level(level)
    x = np.asarray(values, float)
    if x.ndim == 0:
        x = x[None]
    n_asked = x.shape[axis]
    if not allow_fewer:
        _count(n_asked, population)
    n = np.sum(np.isfinite(x), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"), _quiet():
        mean = np.nanmean(x, axis=axis)
        sem = np.nanstd(x, axis=axis, ddof=1) / np.sqrt(n)
        t_rep = scipy.stats.t.ppf((1 + level) / 2, np.maximum(n - 1, 1))
        if se_floor is not None and floor_dof is None:
            sem = np.fmax(sem, np.asarray(se_floor, float))
        half = t_rep * sem
        if se_floor is not None and floor_dof is not None:
            half = np.fmax(half, scipy.stats.t.ppf((1 + level) / 2, floor_dof) * np.asarray(se_floor, float))
        half = np.where(n >= 2, half, np.nan)
    method = "Student t, ddof=1" + ("" if se_floor is None else ", SE at least the within-run and rounding error"
                                    if floor_dof is None else f", half-width at least t({floor_dof:g} dof) x the "
                                    "within-run and rounding error")
    return Interval(mean, mean - half, mean + half, level, f"{n_asked} {population}", method, n_asked)


# ---------------------------------------------------------------------------------------------
# Quantities with a range

UNBOUNDED = (-math.inf, math.inf)
"""The range of a real quantity that can take any value."""


def _bounds(bounds) -> tuple[float, float]:
    low, high = (float(b) for b in bounds)
    if not low < high:
        raise ConfigError(f"a range must be (low, high) with low < high; got {tuple(bounds)!r}")
    return low, high


def agreement_interval(value: float, n: int, *, bounds=UNBOUNDED, level: float = 0.95,
                       population: str = "seeds") -> Interval:
    r"""Interval of the mean of a random quantity whose ``n`` replicates all took the value $v$.

    Their spread is 0, so a Student-t interval has zero width and would decide any threshold it
    does not touch. Agreement says something weaker and distribution-free: it bounds the
    probability $q$ that a replicate differs from $v$. If every value had probability at most
    $1 - p$, all $n$ replicates would agree on one value with probability at most
    $\sum_v q_v^n \le (1-p)^{n-1}$, so with confidence $c$ (= ``level``)

    $$q < p_n = 1 - (1 - c)^{1/(n-1)},$$

    and since the mean of a quantity in $[a, b]$ (= ``bounds``) moves from $v$ by at most $q$
    times the distance to the range's end,

    $$\mu \in \big[\,v - p_n (v - a),\; v + p_n (b - v)\,\big].$$

    A side where the range is unbounded stays infinite: no number of agreeing replicates bounds
    the mean of an unbounded quantity there (one rare, large value moves it anywhere). Two
    replicates give $p_2 = c$: nearly the whole range. [`seeds_to_decide`][] inverts $p_n$.
    Fewer than 2 replicates give the whole range.
    """
    level = _check_level(level)
    low, high = _bounds(bounds)
    p = 1.0 if n < 2 else 1.0 - (1.0 - level) ** (1.0 / (n - 1))
    lo = value - p * (value - low) if math.isfinite(low) else -math.inf
    hi = value + p * (high - value) if math.isfinite(high) else math.inf
    return Interval(float(value), float(lo), float(hi), level, f"{n} {population}",
                    f"all {n} agree: distribution-free bound on the chance that another differs, "
                    f"within [{low:g}, {high:g}]", n)


def seeds_to_decide(value: float, threshold: float, *, bounds=UNBOUNDED, level: float = 0.95) -> int | None:
    r"""The fewest replicates that, all agreeing at ``value``, give an [`agreement_interval`][] wholly on
    ``value``'s side of ``threshold``: the smallest $n$ with $p_n\,D < |t - v|$, $D$ the distance
    from $v$ to the range's end beyond $t$,

    $$n = \Big\lfloor \frac{\ln(1 - c)}{\ln(1 - |t - v|/D)} \Big\rfloor + 2 .$$

    ``None`` when no number does: the value lies on the threshold, or the range is unbounded on
    the threshold's side (a count, from above: seeds that differ give a Student-t interval instead)."""
    level = _check_level(level)
    low, high = _bounds(bounds)
    distance = abs(threshold - value)
    reach = (high - value) if threshold > value else (value - low)
    if distance == 0 or not math.isfinite(reach):
        return None
    if distance >= reach:
        return 2
    return int(math.floor(math.log(1 - level) / math.log(1 - distance / reach))) + 2


def bounded_interval(values, *, bounds=UNBOUNDED, population: str, level: float = 0.95) -> Interval:
    r"""Interval of the mean of independent replicates of a quantity that lies in ``bounds`` $= [a, b]$.

    - **Replicates that differ**, range bounded on both sides (a fraction, a difference of two):
      the hull of two Student-t intervals, each cut to the range: one of the values themselves, and
      one on the variance-stabilising arcsine-root scale $z = \arcsin\sqrt{(x - a)/(b - a)}$,
      mapped back by $x = a + (b - a)\sin^2 z$ with $z$ in $[0, \pi/2]$. Near the middle of the
      range they agree; near an end the values are skewed and the arcsine scale, which stretches
      the end, keeps the interval from being too narrow on its open side, while the plain interval
      covers where most replicates sit exactly at the end (the transform's mean then lies off the
      mean). Measured on Beta-binomial accuracies (2,000 draws each): near 0.999 with 8 seeds the
      arcsine interval alone covered 0.76 and the plain one 0.93; over the cases of
      `tests/test_claims.py` (accuracies near 0.5, 0.97 and 0.99, 3-8 seeds) the hull covered
      0.905-0.96.
    - **Replicates that differ**, range bounded on one side (a count $\ge 0$): the Student-t
      interval cut at the bound. The mean lies in the range, so cutting the interval there keeps
      every interval that covered it covering it: the coverage is the t interval's.
    - **Replicates that all agree**: [`agreement_interval`][] (never zero width).
    - fewer than 2 finite replicates: NaN bounds.

    NaN replicates are left out. Every bound lies in $[a, b]$.
    """
    level = _check_level(level)
    low, high = _bounds(bounds)
    x = np.asarray(values, float).ravel()
    x = x[np.isfinite(x)]
    n = x.size
    label = f"{n} {population}"
    if n < 2:
        return Interval(float(x[0]) if n else math.nan, math.nan, math.nan, level, label, "fewer than 2 replicates", n)
    if np.ptp(x) == 0:
        return agreement_interval(float(x[0]), n, bounds=(low, high), level=level, population=population)

    def t_bounds(v: np.ndarray) -> tuple[float, float]:  # Student t, n - 1 degrees of freedom, as t_interval's
        import scipy.stats

        low, high = scipy.stats.t.interval(level, n - 1, loc=v.mean(), scale=scipy.stats.sem(v))
        return float(low), float(high)

    t_low, t_high = t_bounds(x)
    lo, hi = max(t_low, low), min(t_high, high)
    if math.isfinite(low) and math.isfinite(high):
        z = np.arcsin(np.sqrt(np.clip((x - low) / (high - low), 0.0, 1.0)))
        back = [low + (high - low) * math.sin(min(max(b, 0.0), math.pi / 2)) ** 2 for b in t_bounds(z)]
        lo, hi = min(lo, back[0]), max(hi, back[1])
        method = f"hull of Student t on the values and on the arcsine-root scale, within [{low:g}, {high:g}]"
    elif math.isfinite(low) or math.isfinite(high):
        method = f"Student t, ddof=1, cut at the range's bound ({low:g}, {high:g}): the mean lies in the range"
    else:
        method = "Student t, ddof=1"
    return Interval(float(x.mean()), lo, hi, level, label, method, n)


def interval_text(estimate: float, low: float = math.nan, high: float = math.nan) -> str:
    r"""An estimate and its interval in digits that agree with the interval's width: ``"7 [0, 20]"``,
    ``"0.99948 [0.99896, 1.00000]"``, ``"0.0123 ± 0.0011"``.

    The half-width sets the decimals (its first two significant digits are shown, and the estimate
    and bounds to the same decimal place), so an accuracy of 0.99948 is not printed "1". A
    symmetric interval prints as ``m ± h``; one cut at a range's end, or mapped back from another
    scale, as ``m [low, high]``. No interval (NaN bounds): the estimate to 4 significant digits;
    an infinite bound prints as ``∞``; a NaN estimate as ``—``.
    """
    if not math.isfinite(estimate):
        return "—"
    if math.isnan(low) or math.isnan(high):
        return f"{estimate:.4g}"
    finite = [abs(v) for v in (low, high) if math.isfinite(v)]
    half = (high - low) / 2 if math.isfinite(high - low) else (max(finite + [abs(estimate)]) or 1.0)
    decimals = 4 if half == 0 else max(0, 1 - math.floor(math.log10(half)))

    def num(v: float) -> str:
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        if decimals > 12 or max(abs(estimate), abs(v)) >= 1e6:
            return f"{v:.3g}"
        return f"{v:.{decimals}f}"

    symmetric = math.isfinite(high - low) and half > 0 and math.isclose(estimate - low, high - estimate,
                                                                        rel_tol=1e-6, abs_tol=1e-12 * half)
    if symmetric:
        return f"{num(estimate)} ± {num(half)}"
    return f"{num(estimate)} [{num(low)}, {num(high)}]"


# ---------------------------------------------------------------------------------------------
# Time averages of one autocorrelated run


def integrated_autocorrelation_time(x, axis: int = -1, window: float = SOKAL_WINDOW) -> np.ndarray:
    r"""Integrated autocorrelation time of a stationary series, with Sokal's automatic window.

    With the sample autocorrelation $\hat\rho(t)$ (FFT, biased normalisation),

    $$\hat\tau_{\rm int}(W) = \tfrac12 + \sum_{t=1}^{W} \hat\rho(t), \qquad
      W^* = \min\{W \ge 1 : W \ge c\, \hat\tau_{\rm int}(W)\},$$

    and $\hat\tau_{\rm int} = \hat\tau_{\rm int}(W^*)$, $c$ = ``window`` (Sokal 1997, "Monte Carlo
    methods in statistical mechanics", §3; $c \approx 5$ for nearly exponential decay). The
    variance of the mean of $n$ steps is then $\approx 2\tau_{\rm int}\, \sigma^2 / n$: white noise has
    $\tau_{\rm int} = 1/2$. A constant series (no variance) gets $1/2$; the result is at least $1/2$.
    Leading axes are independent series.
    """
    x = np.moveaxis(np.asarray(x, float), axis, -1)
    n = x.shape[-1]
    if n < 2:
        raise ConfigError(f"an autocorrelation time needs a series of at least 2 steps; got {n}")
    xc = x - x.mean(axis=-1, keepdims=True)
    spectrum = np.fft.rfft(xc, 2 * n, axis=-1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), axis=-1)[..., :n]
    var = acov[..., :1]
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(var > 0, acov / np.where(var > 0, var, 1), 0.0)
    tau = 0.5 + np.cumsum(rho[..., 1:], axis=-1)
    lags = np.arange(1, n)
    reached = lags >= window * tau
    first = np.where(reached.any(axis=-1), np.argmax(reached, axis=-1), n - 2)
    return np.maximum(np.take_along_axis(tau, first[..., None], axis=-1)[..., 0], 0.5)


def auto_block_length(x, axis: int = -1) -> int:
    r"""$L = \lceil$ [`BATCH_FACTOR`][] $\cdot \max \hat\tau_{\rm int} \rceil$ over the series in ``x``,
    at most $\lfloor n/10 \rfloor$ (so that at least 10 blocks remain) and at least 1."""
    x = np.moveaxis(np.asarray(x, float), axis, -1)
    n = x.shape[-1]
    tau = float(np.max(integrated_autocorrelation_time(x)))
    return int(max(1, min(math.ceil(BATCH_FACTOR * tau), n // _MIN_BATCHES)))


@dataclasses.dataclass(frozen=True)
class BatchMeans:
    r"""The time average of a run and its batch-means standard error (arrays over leading axes).

    ``mean``: the average of the ``n_batches * block`` steps used; ``se``: its standard error;
    ``block``: the batch length (steps); ``n_batches``; ``tau``: $\hat\tau_{\rm int}$ of each series.
    """

    mean: np.ndarray
    se: np.ndarray
    block: int
    n_batches: int
    tau: np.ndarray

    def interval(self, level: float = 0.95, population: str = "batch means of one run") -> Interval:
        r"""$\bar x \pm t_{(1+c)/2,\, n_b - 1}\, \mathrm{SE}$: the Student-t interval of the time average."""
        import scipy.stats

        level = _check_level(level)
        low, high = scipy.stats.t.interval(level, self.n_batches - 1, loc=self.mean, scale=self.se)
        return Interval(self.mean, low, high, level,
                        f"{self.n_batches} {population} (batches of {self.block} steps)",
                        "batch means, Student t", self.n_batches)


def batch_means(x, *, axis: int = -1, block: int | None = None) -> BatchMeans:
    r"""Batch-means standard error of the time average of an autocorrelated series.

    The first $n_b L$ steps ($n_b = \lfloor n / L \rfloor$) are cut into $n_b$ consecutive
    batches of $L$ steps with means $\bar x_b$, and

    $$\bar x = \frac{1}{n_b}\sum_b \bar x_b, \qquad
      \mathrm{SE}(\bar x) = \frac{1}{\sqrt{n_b}}\Big(\frac{1}{n_b - 1}\sum_b (\bar x_b - \bar x)^2\Big)^{1/2}.$$

    Batches much longer than the autocorrelation time have nearly independent means, so this is
    the standard error of a mean of $n_b$ independent values. ``block`` = $L$ defaults to
    [`auto_block_length`][] (the longest $\lceil 10\hat\tau_{\rm int}\rceil$ over the series, at
    most $n/10$) and is shared by all series so that the computation is one reshape. A
    ``block`` that leaves fewer than 2 batches (longer than half the run) is a ConfigError.
    """
    x = np.moveaxis(np.asarray(x, float), axis, -1)
    n = x.shape[-1]
    if n < 2:
        raise ConfigError(f"a batch-means error needs a run of at least 2 steps; got {n}")
    tau = integrated_autocorrelation_time(x)
    if block is None:
        block = int(max(1, min(math.ceil(BATCH_FACTOR * float(np.max(tau))), n // _MIN_BATCHES)))
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ConfigError(f"the batch length must be a positive integer; got {block!r}")
    n_batches = n // int(block)
    if n_batches < 2:
        raise ConfigError(f"a batch of {block} steps is longer than half the run ({n} steps): "
                          "fewer than 2 batches; use a shorter block or a longer run")
    means = x[..., : n_batches * block].reshape(*x.shape[:-1], n_batches, block).mean(axis=-1)
    se = means.std(axis=-1, ddof=1) / np.sqrt(n_batches)
    return BatchMeans(means.mean(axis=-1), se, int(block), int(n_batches), tau)


# ---------------------------------------------------------------------------------------------
# Bootstrap


def block_resample_indices(n: int, block: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    r"""Row indices ``[n_resamples, n]`` of circular block-bootstrap resamples.

    Each resample concatenates $\lceil n/L\rceil$ blocks of $L$ consecutive rows (indices taken
    modulo $n$, so every row is equally likely) with uniformly random starts and keeps the first
    $n$ rows (Politis & Romano 1992). $L = 1$ is the ordinary i.i.d. bootstrap. A block longer
    than the series is a ConfigError.
    """
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ConfigError(f"the bootstrap block length must be a positive integer; got {block!r}")
    if block > n:
        raise ConfigError(f"a bootstrap block of {block} rows is longer than the data ({n} rows)")
    n_blocks = -(-n // block)
    starts = rng.integers(0, n, size=(n_resamples, n_blocks))
    return ((starts[:, :, None] + np.arange(block)) % n).reshape(n_resamples, -1)[:, :n]


def bootstrap_interval(estimate, replicates, *, level: float = 0.95, method: str = "basic",
                       population: str, axis: int = 0) -> Interval:
    r"""An interval from bootstrap replicates $\theta^*_b$ of an estimate $\hat\theta$.

    With $q_p$ the $p$-quantile of the finite replicates and $a = (1 - c)/2$:

    - ``"basic"`` (Davison & Hinkley 1997, Eq. 5.6): $[\,2\hat\theta - q_{1-a},\; 2\hat\theta - q_a\,]$.
      It reflects the bootstrap distribution about $\hat\theta$, so a bias of the estimator that
      the resamples reproduce ($\mathrm E^*\theta^* - \hat\theta \approx \mathrm E\hat\theta - \theta$)
      is removed to first order;
    - ``"percentile"``: $[\,q_a,\; q_{1-a}\,]$, which keeps that bias (twice, in effect: centred on
      $\mathrm E^*\theta^*$, not on $\theta$). Offered for comparison.

    NaN replicates (failed resamples) are left out; fewer than half finite gives NaN bounds.
    """
    level = _check_level(level)
    if method not in ("basic", "percentile"):
        raise ConfigError(f"method must be 'basic' or 'percentile' (BCa: use bootstrap()); got {method!r}")
    reps = np.moveaxis(np.asarray(replicates, float), axis, 0)
    est = np.asarray(estimate, float)
    tail = (1 - level) / 2
    with _quiet():
        lo_q, hi_q = np.nanquantile(reps, [tail, 1 - tail], axis=0)
    enough = 2 * np.sum(np.isfinite(reps), axis=0) > reps.shape[0]
    if method == "basic":
        low, high = 2 * est - hi_q, 2 * est - lo_q
    else:
        low, high = lo_q, hi_q
    low, high = np.where(enough, low, np.nan), np.where(enough, high, np.nan)
    return Interval(est, low, high, level, population, f"{method} bootstrap", reps.shape[0])


def bootstrap(data, statistic: Callable[..., Any], *, population: str, level: float = 0.95,
              method: str = "BCa", n_resamples: int = 999, block: int | str = 1, seed: int = 0) -> Interval:
    r"""Bootstrap interval of ``statistic(data)`` over the rows (axis 0) of ``data``.

    - ``block=1`` (i.i.d. rows): `scipy.stats.bootstrap` with ``method`` ``"BCa"`` (default:
      bias-corrected and accelerated, Efron 1987: the percentiles are shifted by the bias
      $z_0 = \Phi^{-1}(\Pr^*[\theta^* < \hat\theta])$ and the jackknife acceleration),
      ``"basic"`` or ``"percentile"``. ``statistic(sample)`` gets one resample (rows on axis 0).
    - ``block=L > 1`` or ``"auto"`` (a time series): circular block bootstrap
      ([`block_resample_indices`][]); ``"auto"`` takes $L$ from [`auto_block_length`][] of the
      rows. BCa's jackknife acceleration assumes independent rows, so blocks take ``"basic"`` or
      ``"percentile"`` (BCa with blocks is a ConfigError).
    """
    import scipy.stats

    data = np.asarray(data)
    n = data.shape[0]
    _count(n, "observations", "a bootstrap interval")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 2:
        raise ConfigError(f"n_resamples must be an integer >= 2; got {n_resamples!r}")
    if block == "auto":
        block = auto_block_length(data.reshape(n, -1).T)
    estimate = np.asarray(statistic(data), float)
    if block == 1:
        if method not in ("BCa", "basic", "percentile"):
            raise ConfigError(f"method must be 'BCa', 'basic' or 'percentile'; got {method!r}")
        res = scipy.stats.bootstrap((np.arange(n),), lambda i: statistic(data[i]), vectorized=False,
                                    paired=False, confidence_level=_check_level(level), n_resamples=n_resamples,
                                    method=method, random_state=np.random.default_rng(seed))
        low, high = res.confidence_interval
        return Interval(estimate, np.asarray(low), np.asarray(high), level, population,
                        f"{method} bootstrap (scipy)", n_resamples)
    if method == "BCa":
        raise ConfigError("BCa needs independent rows; with blocks use method='basic' (bias-corrected) or 'percentile'")
    idx = block_resample_indices(n, block, n_resamples, np.random.default_rng(seed))
    reps = np.stack([np.asarray(statistic(data[i]), float) for i in idx])
    return bootstrap_interval(estimate, reps, level=level, method=method,
                              population=f"{population} (blocks of {block} rows)")


def half_sample_weights(n_blocks: int, n_replicates: int, rng: np.random.Generator) -> np.ndarray:
    r"""``[n_replicates, n_blocks]`` 0/1 weights, each row choosing $\lfloor n_b/2 \rfloor$ of the $n_b$ blocks
    without replacement (uniformly at random): the half-samples of [`half_sample_interval`][]."""
    if n_blocks < 2:
        raise ConfigError(f"half-sampling needs at least 2 blocks; got {n_blocks} (a block longer than half the data)")
    pick = np.argsort(rng.random((n_replicates, n_blocks)), axis=1)[:, : n_blocks // 2]
    weights = np.zeros((n_replicates, n_blocks))
    np.put_along_axis(weights, pick, 1.0, axis=1)
    return weights


def half_sample_interval(estimate, replicates, *, n_blocks: int, level: float = 0.95, population: str,
                         axis: int = 0) -> Interval:
    r"""Bias-corrected interval from half-samples (the delete-half block jackknife).

    The data are cut into $n_b$ blocks (single rows if they are independent, blocks of consecutive
    rows longer than the autocorrelation time if not); each replicate $\theta_h$ is the statistic
    of a random half of the blocks, drawn without replacement ([`half_sample_weights`][]). Then

    $$\tilde\theta = 2\hat\theta - \bar\theta_h, \qquad
      \tilde\theta \pm t_{(1+c)/2,\; n_b - 1}\; s_h, \qquad
      s_h^2 = \frac{1}{B - 1}\sum_h (\theta_h - \bar\theta_h)^2 .$$

    Why: a half-sample is a genuine sample of half the size from the same process, so for an
    estimator with bias $b/M$, $\mathrm E\,\theta_h - \mathrm E\,\hat\theta = b/M$ exactly to first
    order, and $\tilde\theta$ (Richardson extrapolation to $M = \infty$) removes it; and the variance
    of a half-sample mean drawn without replacement is $(\frac{2}{n_b} - \frac{1}{n_b}) S^2 = S^2/n_b$,
    the variance of the full estimate (Shao & Wu 1989, the delete-$d$ jackknife with $d = n_b/2$;
    Künsch 1989 for blocks). Unlike the bootstrap, no resample holds repeated rows, whose bias
    differs from that of the data (for sample eigenvalues the bootstrap over-estimates it).
    NaN replicates are left out; fewer than half finite gives NaN bounds.
    """
    import scipy.stats

    level = _check_level(level)
    if n_blocks < 2:
        raise ConfigError(f"half-sampling needs at least 2 blocks; got {n_blocks}")
    reps = np.moveaxis(np.asarray(replicates, float), axis, 0)
    est = np.asarray(estimate, float)
    enough = 2 * np.sum(np.isfinite(reps), axis=0) > reps.shape[0]
    with _quiet():
        centre = 2 * est - np.nanmean(reps, axis=0)
        half = scipy.stats.t.ppf((1 + level) / 2, n_blocks - 1) * np.nanstd(reps, axis=0, ddof=1)
    centre = np.where(enough, centre, np.nan)
    return Interval(centre, centre - half, centre + half, level, population,
                    "half-sample (delete-half jackknife), bias-corrected, Student t", reps.shape[0])


# ---------------------------------------------------------------------------------------------
# Comparisons


def fisher_interval(r: float, n: int, *, level: float = 0.95) -> Interval:
    r"""Interval of a Pearson correlation ``r`` over ``n`` points by Fisher's z transform:

    $$\tanh\Big(\operatorname{artanh} r \pm \frac{z_{(1+c)/2}}{\sqrt{n - 3}}\Big),$$

    approximate for bivariate normal points, and valid only with ``n >= 4``. Four points give a
    half-width of 1.96 in z: almost any r is compatible with them."""
    import scipy.stats

    level = _check_level(level)
    if n < 4:
        raise ConfigError(f"a Fisher interval of a correlation needs at least 4 points; got {n}")
    z = np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15))
    half = scipy.stats.norm.ppf((1 + level) / 2) / np.sqrt(n - 3)
    return Interval(r, float(np.tanh(z - half)), float(np.tanh(z + half)), level, f"{n} points",
                    "Fisher z, bivariate normal", n)


def spearman(x, y) -> tuple[float, float, int]:
    r"""Spearman's rank correlation of paired values: ``(rho, p_value, n_pairs)``.

    $\rho$ is Pearson's correlation of the ranks, ties getting their average rank
    (`scipy.stats.spearmanr`); a perfectly monotone decreasing relation gives exactly $-1$.
    Pairs with a NaN in either value are dropped (and counted out of ``n_pairs``); fewer than 3
    pairs give NaN.
    """
    import scipy.stats

    x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
    if x.shape != y.shape:
        raise ConfigError(f"spearman needs paired values of one length; got {x.size} and {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return float("nan"), float("nan"), int(keep.sum())
    res = scipy.stats.spearmanr(x[keep], y[keep])
    return float(res.statistic), float(res.pvalue), int(keep.sum())


def jackknife_interval(value: float, leave_one_out, level: float = 0.95) -> tuple[float, float]:
    r"""Interval of ``value`` from its leave-one-replicate-out values $\theta_{(i)}$, $i = 1..n$:

    $$\hat\theta \pm t_{(1+c)/2,\,n-1}\,\mathrm{SE}, \qquad
      \mathrm{SE}^2 = \frac{n-1}{n}\sum_i \big(\theta_{(i)} - \bar\theta_{(\cdot)}\big)^2,$$

    centred on the reported value. For a mean over replicates this is exactly the Student-t interval
    of the mean ($\mathrm{SE} = s/\sqrt n$); for the other statistics (a minimum or maximum of means,
    a fitted slope) it is the delta-method interval over replicates. It does not correct a bias, so
    for a rank correlation use [`rank_correlation_of_means`][]. NaN bounds with fewer than 2
    replicates or where a leave-one-out value is not finite.
    """
    import scipy.stats

    theta = np.asarray(leave_one_out, float)
    n = theta.size
    if n < 2 or not math.isfinite(value) or not np.isfinite(theta).all():
        return math.nan, math.nan
    se = math.sqrt((n - 1) / n * float(np.sum((theta - theta.mean()) ** 2)))
    half = float(scipy.stats.t.ppf((1 + _check_level(level)) / 2, n - 1)) * se
    return value - half, value + half


def _pooled_spearman(groups: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of ``x`` (one value per group) with the group means of ``y[..., points]``
    (``groups``: points x groups, each column averaging its points), along the last axis."""
    import scipy.stats

    ry = scipy.stats.rankdata(y @ groups, axis=-1)
    rx = scipy.stats.rankdata(x)
    ry, rx = ry - ry.mean(-1, keepdims=True), rx - rx.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (ry * rx).sum(-1) / np.sqrt((ry**2).sum(-1) * (rx**2).sum())


def rank_correlation_of_means(x, replicates, *, population: str, level: float = 0.95, n_boot: int = 400,
                              seed: int = 0) -> Interval:
    r"""Spearman's $\rho$ of ``x`` with the mean over replicates of ``replicates[r, point]``, and its
    interval over the replicates (e.g. the mean cosine of a grid's cells over seeds against L/N).

    **Points that share an ``x`` are pooled** (their means averaged) before ranking. Without this
    the statistic is discontinuous where it matters: if the truth depends on ``x`` alone, tied
    ``x`` give tied true means, so $\rho = -1$ exactly, while any noise breaks those ties at random
    and no number of replicates brings the estimate back to $-1$ (measured: the leave-one-seed-out
    interval over cells then covered 0.00-0.02 on grids where the truth is $-1$).

    **The interval** is the hull of two intervals, each of which alone under-covers somewhere
    (measured in a first exploration on synthetic 6 x 5 grids with 3 and 5 seeds):

    - the leave-one-replicate-out jackknife ([`jackknife_interval`][], Student t with $n - 1$
      degrees of freedom): right where the noise is small against the steps between the pooled
      means, but it does not see the bias of a rank correlation of noisy means (noise breaks
      ranks, so $\hat\rho$ lies nearer 0 than the truth) and covered 0.72-0.85 where the
      noise is large;
    - the basic parametric bootstrap: means redrawn as $\bar y_j + \mathrm{SE}_j\, t_{n-1}$ (each
      point's standard error over the replicates), $\hat\rho^*$ computed from them, the interval
      $[2\hat\rho - q^*_{(1+c)/2},\ 2\hat\rho - q^*_{(1-c)/2}]$, clipped to $[-1, 1]$: it moves
      the interval by the bias the extra noise adds, but trusts each point's SE from a few
      replicates and covered 0.83-0.93 where the noise is small.

    Their hull (`benchmarks/coverage_rank.py`: 18 kinds of synthetic paper-sized grid, 3 and 5 seeds,
    400 grids each) covered 0.927-1.000, against 0.00-0.97 for the previous interval (cells not
    pooled, jackknife alone). It covers 1.000 where the truth is $-1$, the end of the range: the
    interval is clipped there, so only one side can miss. Points without a finite value in every
    replicate are left out. NaN bounds with fewer than 2 replicates; NaN estimate with fewer than
    3 distinct ``x``. ``seed`` fixes the bootstrap draws, so a dataset gives one interval.
    """
    level = _check_level(level)
    x = np.asarray(x, float).ravel()
    y = np.asarray(replicates, float).reshape(-1, x.size)
    keep = np.isfinite(x) & np.isfinite(y).all(axis=0)
    x, y = x[keep], y[:, keep]
    n = y.shape[0]
    values, where = np.unique(x, return_inverse=True)
    groups = np.zeros((x.size, values.size))
    groups[np.arange(x.size), where] = 1.0
    groups /= np.maximum(groups.sum(0), 1.0)
    method = (f"points sharing x pooled; hull of the leave-one-out jackknife (Student t) and the basic "
              f"parametric bootstrap ({n_boot} draws)")
    label = f"{n} {population}"
    if values.size < 3 or n == 0:
        return Interval(math.nan, math.nan, math.nan, level, label, method, n)
    mean = y.mean(0)
    rho = float(_pooled_spearman(groups, values, mean))
    if n < 2 or not math.isfinite(rho):
        return Interval(rho, math.nan, math.nan, level, label, method, n)
    loo = _pooled_spearman(groups, values, (mean * n - y) / (n - 1))
    low, high = jackknife_interval(rho, loo, level)
    se = y.std(0, ddof=1) / math.sqrt(n)
    draws = mean + se * np.random.default_rng(seed).standard_t(n - 1, (n_boot, mean.size))
    boot = _pooled_spearman(groups, values, draws)
    boot = boot[np.isfinite(boot)]
    if boot.size:
        q_low, q_high = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
        low, high = min(low, max(2 * rho - q_high, -1.0)), max(high, min(2 * rho - q_low, 1.0))
    return Interval(rho, float(max(low, -1.0)), float(min(high, 1.0)), level, label, method, n)


def _welch(x, y) -> tuple[np.ndarray, np.ndarray, Any]:
    """``x`` and ``y`` without their NaNs, and Welch's test of them
    (`scipy.stats.ttest_ind(equal_var=False)`), the one computation of [`welch`][] and [`welch_interval`][]."""
    import scipy.stats

    x, y = (np.asarray(v, float).ravel() for v in (x, y))
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if min(x.size, y.size) < 2:
        return x, y, None
    with np.errstate(invalid="ignore", divide="ignore"), _quiet():
        return x, y, scipy.stats.ttest_ind(x, y, equal_var=False)


def welch_interval(x, y, *, level: float = 0.95) -> Interval | None:
    r"""Interval of the difference of two means $\bar x - \bar y$ without assuming equal variances:

    $$\bar x - \bar y \pm t_{(1+c)/2,\,\nu}\sqrt{s_x^2/n_x + s_y^2/n_y},$$

    with the Welch–Satterthwaite degrees of freedom $\nu$ (the confidence interval of
    `scipy.stats.ttest_ind(equal_var=False)`). NaNs are dropped; ``None`` when a side has fewer
    than 2 values; two sides without spread give a zero-width interval at their difference."""
    level = _check_level(level)
    x, y, res = _welch(x, y)
    if res is None:
        return None
    d = float(x.mean() - y.mean())
    low, high = (float(b) for b in res.confidence_interval(level))
    if not (math.isfinite(low) and math.isfinite(high)):  # no spread on either side: nu is 0/0
        low = high = d
    return Interval(d, low, high, level, f"{x.size} and {y.size} values", "Welch t, difference of means",
                    x.size + y.size)


def welch(x, y) -> tuple[float, float]:
    r"""Welch's t-test of equal means without assuming equal variances: ``(t, two-sided p)``.

    $$t = \frac{\bar x - \bar y}{\sqrt{s_x^2/n_x + s_y^2/n_y}}$$ with the Welch–Satterthwaite degrees
    of freedom (`scipy.stats.ttest_ind(equal_var=False)`); NaNs are dropped. Each side needs at
    least 2 values (ConfigError).
    """
    x, y, res = _welch(x, y)
    _count(min(x.size, y.size), "values on each side", "a Welch test")
    return float(res.statistic), float(res.pvalue)
