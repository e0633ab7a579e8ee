r"""The time-shifted null of a receptive field, and the layer trend with its interval.

A spike-triggered average is never exactly zero: a finite number of high steps averages a finite
sample of the stimulus, so every neuron has some selectivity (the rms of its receptive field)
whether or not it responds to the stimulus. The yardstick is the same statistic with the response
**circularly shifted in time** against the stimulus by $s$ steps,

$$ r^{(s)}_t = r_{(t - s) \bmod T}, \qquad s \in [w, T - w], $$

within each trial ($T$ steps; the hierarchical language's stream is periodic, shown twice, so its
stimulus history is too). With $w$ the STA window (``lags`` items of ``item_steps`` steps) every
lag of the shifted average pairs the response with stimulus items that the unshifted average
does not reach, while the response keeps its own statistics (rate, smoothness, number of high
steps), which set the size of the noise. Where no shift clears the window ($T < 2w$: a level
with at most ``2 lags`` items, e.g. the hierarchical language's sequences) the shifts are
$[\text{item\_steps}, T - \text{item\_steps}]$ and the level is marked
(``null_clears_window`` False): there a shifted average still contains the true receptive
field at other lags, so the null cannot reject and the level's selectivity is not testable.

[`shift_null`][] gives per neuron the null's quantiles, the p-value
$p = (1 + \#\{s : \text{sel}^{(s)} \ge \text{sel}\})/(1 + S)$ (valid when the response's
relation to the stimulus is the only thing a shift destroys), the z-score against the null and
the **excess selectivity** $\text{sel} - \overline{\text{sel}^{(s)}}$: the part the null does not
explain. [`layer_trend`][] fits a layer trend with a Student-t interval over neurons, and
[`trend_sentence`][] says it in words, so that a trend of the raw selectivity that the null
explains reads as such.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["NullTest", "Trend", "layer_trend", "null_shifts", "shift_null", "shifted_selectivity", "trend_sentence"]

N_SHIFTS = 99
"""Shifts of the null by default: the smallest p-value is 1/100."""
NULL_LEVEL = 0.05
"""A neuron beats the null when its p-value is at most this."""


def null_shifts(steps: int, window: int, item_steps: int = 1, n_shifts: int = N_SHIFTS) -> tuple[np.ndarray, bool]:
    """``(shifts, clears_window)``: up to ``n_shifts`` distinct shifts (in steps) spread evenly over
    ``[window, steps - window]``, or over ``[item_steps, steps - item_steps]`` (and ``False``)
    when the window is longer than half the ``steps`` (module docstring); none for a single item."""
    clears = steps - window >= window
    low, high = (window, steps - window) if clears else (item_steps, steps - item_steps)
    if high < low:  # a single item: nothing to shift against
        return np.zeros(0, np.int64), False
    return np.unique(np.round(np.linspace(low, high, n_shifts)).astype(np.int64)), bool(clears)


@partial(jax.jit, static_argnames=("lags", "symbols"))
def _shifted(stimulus, response, index, shifts, quantile, lags: int, symbols: int):
    b, t, n = response.shape
    items = stimulus.shape[1]
    threshold = jnp.quantile(response.reshape(b * t, n), quantile, axis=0)
    high = (response > threshold).astype(stimulus.dtype)

    def lagged(k, positions):  # stimulus k items before each position, 0 where that is before the start
        j = positions - k
        valid = (j >= 0).astype(stimulus.dtype)
        return stimulus[:, jnp.maximum(j, 0), :symbols] * valid[None, :, None], valid

    def base(k):
        lag, valid = lagged(k, index)
        return lag.sum(axis=(0, 1)) / (b * valid.sum())

    baseline = jax.lax.map(base, jnp.arange(lags))  # [K, D]

    def one(s):
        # high steps per item (a trigger's stimulus depends only on its item), after the shift
        per_item = jax.ops.segment_sum(jnp.moveaxis(jnp.roll(high, s, axis=1), 1, 0), index, num_segments=items)

        def rf(k):
            lag, valid = lagged(k, jnp.arange(items))
            total = jnp.einsum("jbn,bjd->nd", per_item, lag)
            count = jnp.einsum("jbn,j->n", per_item, valid)
            return total / count[:, None] - baseline[k]

        return jnp.sqrt(jnp.mean(jax.lax.map(rf, jnp.arange(lags)) ** 2, axis=(0, 2)))

    return jax.lax.map(one, shifts)


def shifted_selectivity(stimulus, response, shifts, *, lags: int, quantile: float, index=None,
                        symbols: int | None = None) -> np.ndarray:
    """``[S, N]``: the selectivity (rms of the receptive field over lags and the first ``symbols``
    stimulus channels, as [`sta_analysis`][dynlab.analyses.sta.model.sta_analysis]) of every neuron
    with its response rolled by each of ``shifts`` steps within each trial. Shift 0 is the
    selectivity itself. Arguments as [`spike_triggered_average`][dynlab.analyses.sta.core.spike_triggered_average]
    (``[(B,) J, D]`` stimulus, ``[(B,) T, N]`` response); NaN for a neuron with no high step.
    One compiled pass: the high steps are summed per item, then averaged over lags."""
    stimulus, response = np.asarray(stimulus), np.asarray(response)
    if stimulus.ndim == 2:
        stimulus, response = stimulus[None], response[None]
    index = np.arange(response.shape[1]) if index is None else np.asarray(index)
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    out = _shifted(jnp.asarray(stimulus, dtype), jnp.asarray(response, dtype), jnp.asarray(index),
                   jnp.asarray(shifts), jnp.asarray(float(quantile), dtype), int(lags),
                   int(stimulus.shape[-1] if symbols is None else symbols))
    return np.asarray(out, np.float64)


class NullTest(NamedTuple):
    """Each neuron's selectivity against its time-shifted null (module docstring)."""

    observed: np.ndarray
    """``[N]`` the selectivity (no shift)."""
    null: np.ndarray
    """``[S, N]`` the selectivity under each shift."""
    shifts: np.ndarray
    """``[S]`` the shifts, in steps."""
    clears_window: bool
    """Whether every shift is longer than the STA window."""

    @property
    def p_value(self) -> np.ndarray:
        """``[N]``: $(1 + \\#\\{\\text{null} \\ge \\text{observed}\\}) / (1 + S)$; NaN without high steps."""
        p = (1 + np.sum(self.null >= self.observed, axis=0)) / (1 + len(self.shifts))
        return np.where(np.isfinite(self.observed) & (len(self.shifts) > 0), p, np.nan)

    @property
    def excess(self) -> np.ndarray:
        """``[N]``: the selectivity minus the null's mean (NaN without shifts)."""
        return self.observed - self.quantile(None)

    def quantile(self, q: float | None) -> np.ndarray:
        """``[N]``: the null's ``q``-quantile (its mean for ``None``); NaN without shifts."""
        if not len(self.shifts):
            return np.full(self.observed.shape, np.nan)
        return np.mean(self.null, axis=0) if q is None else np.quantile(self.null, q, axis=0)

    @property
    def z(self) -> np.ndarray:
        """``[N]``: the excess in units of the null's standard deviation."""
        if len(self.shifts) < 2:
            return np.full(self.observed.shape, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.excess / np.std(self.null, axis=0, ddof=1)


def shift_null(stimulus, response, *, lags: int, quantile: float, index=None, item_steps: int = 1,
               symbols: int | None = None, n_shifts: int = N_SHIFTS) -> NullTest:
    """Every neuron's selectivity and its time-shifted null: shifts from [`null_shifts`][] over
    the response's ``T`` steps with the window ``lags * item_steps``."""
    steps = np.asarray(response).shape[-2]
    shifts, clears = null_shifts(steps, lags * item_steps, item_steps, n_shifts)
    sel = shifted_selectivity(stimulus, response, np.concatenate([[0], shifts]), lags=lags, quantile=quantile,
                              index=index, symbols=symbols)
    return NullTest(sel[0], sel[1:], shifts, clears)


class Trend(NamedTuple):
    """A layer trend: the least-squares slope of the layers' mean values on the layer number."""

    slope: float
    low: float
    high: float
    se: float
    df: float


def layer_trend(values, layers, *, level: float = 0.95) -> Trend:
    r"""The slope $\hat\beta = \sum_\ell c_\ell \bar v_\ell$ of the per-layer means $\bar v_\ell$
    (NaN values left out) on the layer number $\ell$, with $c_\ell = (\ell - \bar\ell)/\sum(\ell-\bar\ell)^2$
    (each layer weighted once), and its Student-t interval
    $\hat\beta \pm t_{(1+c)/2,\nu}\,\mathrm{se}$, $\mathrm{se}^2 = \sum_\ell c_\ell^2 s_\ell^2/n_\ell$,
    $\nu$ by Welch–Satterthwaite. The population is the layers' neurons: the interval says how
    far the slope could move with other neurons of the same layers on the same stimulus. NaN with
    fewer than two layers or a layer with fewer than two finite values."""
    import scipy.stats

    values, layers = np.asarray(values, float), np.asarray(layers)
    keep = np.isfinite(values)
    numbers = np.unique(layers)
    nan = Trend(np.nan, np.nan, np.nan, np.nan, np.nan)
    if numbers.size < 2:
        return nan
    groups = [values[keep & (layers == ell)] for ell in numbers]
    if min(g.size for g in groups) < 2:
        return nan
    x = numbers.astype(float)
    c = (x - x.mean()) / np.sum((x - x.mean()) ** 2)
    means = np.array([g.mean() for g in groups])
    var = np.array([g.var(ddof=1) / g.size for g in groups])
    se2 = float(np.sum(c**2 * var))
    slope = float(np.sum(c * means))
    if se2 == 0:
        return Trend(slope, slope, slope, 0.0, np.inf)
    df = se2**2 / float(np.sum((c**2 * var) ** 2 / (np.array([g.size for g in groups]) - 1)))
    half = scipy.stats.t.ppf((1 + level) / 2, df) * np.sqrt(se2)
    return Trend(slope, slope - half, slope + half, float(np.sqrt(se2)), df)


def _word(trend: Trend) -> str:
    if not np.isfinite(trend.low):
        return "undecided"
    return "rises" if trend.low > 0 else "falls" if trend.high < 0 else "flat"


def trend_sentence(raw: Trend, excess: Trend) -> str:
    """The layer trend in words: the raw selectivity's slope per layer and the slope of the
    excess over the null, each with its interval; "explained by the null" when the raw slope's
    interval excludes 0 but the excess's does not."""
    if not np.isfinite(raw.slope):
        return "no layer trend (fewer than two layers with two neurons)"
    text = (f"slope per layer {raw.slope:+.4f} [{raw.low:+.4f}, {raw.high:+.4f}], beyond the null "
            f"{excess.slope:+.4f} [{excess.low:+.4f}, {excess.high:+.4f}]: ")
    raw_word, excess_word = _word(raw), _word(excess)
    if excess_word in ("rises", "falls"):
        return text + f"selectivity {excess_word} with depth beyond the null"
    if raw_word in ("rises", "falls"):
        return text + f"the raw trend ({raw_word}) is explained by the null"
    return text + "no trend resolved"
