r"""Spike-triggered averages of any responses to any stimulus: the numerical core.

A stimulus is a sequence of vectors $s_j \in \mathbb{R}^D$ ("items": time steps, or the symbols
of one level of a hierarchy, each lasting several steps), and step $t$ of the response sees item
$j(t)$ (``index``; $j(t) = t$ when items are steps). A neuron's response $r_t$ is **high** at the
steps where it exceeds its own ``quantile`` over all steps,

$$ \mathcal T = \{ t : r_t > q \}, \qquad q = \text{the } \texttt{quantile}\text{-quantile of } \{r_t\}, $$

(a strict inequality: a neuron that is constant has no high steps, and a rectified neuron silent
most of the time triggers on its active steps only, however low the quantile). The spike-triggered
average at lag $k$ (items back; $k = 0$ is the item under way at the trigger) is

$$ \mathrm{STA}(k) = \frac{1}{|\mathcal T_k|}\sum_{t \in \mathcal T_k} s_{j(t) - k},
   \qquad \mathcal T_k = \{ t \in \mathcal T : j(t) - k \ge 0 \}, $$

and the baseline is the same average over all steps with $j(t) - k \ge 0$; the receptive field
is $\mathrm{STA}(k) - \text{baseline}(k)$. Trials (a leading batch axis) are averaged together,
with lags never reaching across a trial's start.

**Truth it reproduces.** For Gaussian white noise $x_t \sim N(0, \sigma^2 I)$ and a linear
response $r_t = \sum_k h_k^\top x_{t-k}$ (so $r \sim N(0, \sigma_r^2)$, $\sigma_r^2 = \sigma^2\sum_k\lVert h_k\rVert^2$),
$E[x_{t-k} \mid r_t] = \sigma^2 h_k\, r_t / \sigma_r^2$, hence

$$ E[\mathrm{STA}(k)] = \frac{\sigma^2 h_k}{\sigma_r}\,\frac{\varphi(z_q)}{1 - q}, \qquad z_q = \Phi^{-1}(q): $$

the kernel itself, scaled by the mean of the standardised response above its quantile
(Bussgang's theorem; tested in ``tests/test_sta.py``).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dynlab.errors import ConfigError, require_positive

__all__ = ["STAResult", "spike_triggered_average"]


class STAResult(NamedTuple):
    """Spike-triggered averages of ``N`` neurons over ``K`` lags of a ``D``-dimensional stimulus."""

    sta: np.ndarray
    """``[N, K, D]``: the average stimulus $k$ items before each high step (NaN where there is none)."""
    baseline: np.ndarray
    """``[K, D]``: the average stimulus $k$ items before any step."""
    threshold: np.ndarray
    """``[N]``: each neuron's quantile $q$."""
    triggers: np.ndarray
    """``[N]``: the number of high steps of each neuron (over all trials)."""

    @property
    def receptive_field(self) -> np.ndarray:
        """``[N, K, D]``: ``sta - baseline``."""
        return self.sta - self.baseline[None]


@partial(jax.jit, static_argnames=("lags",))
def _sta(stimulus, response, index, lags: int, quantile):
    b, t, n = response.shape
    threshold = jnp.quantile(response.reshape(b * t, n), quantile, axis=0)
    high = (response > threshold).astype(stimulus.dtype)

    def one(k):
        j = index - k
        valid = (j >= 0).astype(stimulus.dtype)
        lagged = stimulus[:, jnp.maximum(j, 0), :] * valid[None, :, None]  # [B, T, D]
        total = jnp.einsum("btn,btd->nd", high, lagged)
        count = jnp.einsum("btn,t->n", high, valid)
        base = lagged.sum(axis=(0, 1)) / (b * valid.sum())
        return total / count[:, None], base

    sta, base = jax.lax.map(one, jnp.arange(lags))
    return jnp.swapaxes(sta, 0, 1), base, threshold, high[:, :, :].sum(axis=(0, 1))


def spike_triggered_average(stimulus, response, *, lags: int, quantile: float = 0.9, index=None) -> STAResult:
    r"""Spike-triggered averages (module docstring) of every neuron of ``response``.

    Arguments:
        stimulus: ``[J, D]`` items, or ``[B, J, D]`` for ``B`` trials.
        response: ``[T, N]``, or ``[B, T, N]`` (the same trials).
        lags: the number of lags $k = 0 \dots K-1$ (in items).
        quantile: "high" is above each neuron's ``quantile`` of its responses, in $[0, 1)$.
        index: ``[T]`` integers, the item $j(t)$ each step sees (non-decreasing, in ``[0, J)``);
            default ``arange(T)`` (items are steps, ``J == T``).

    Computed in one compiled pass (``jax.lax.map`` over lags: memory of one lag at a time).
    """
    require_positive("lags", lags)
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile < 1:
        raise ConfigError(f"quantile must be a number in [0, 1), got {quantile!r}")
    stimulus, response = np.asarray(stimulus), np.asarray(response)
    batched = stimulus.ndim == 3
    if not batched:
        stimulus, response = stimulus[None], response[None]
    if stimulus.ndim != 3 or response.ndim != 3 or stimulus.shape[0] != response.shape[0]:
        raise ConfigError(f"stimulus [(B,) J, D] and response [(B,) T, N] must agree in trials; got {stimulus.shape} "
                          f"and {response.shape}")
    J, T = stimulus.shape[1], response.shape[1]
    index = np.arange(T) if index is None else np.asarray(index)
    if index.shape != (T,) or not np.issubdtype(index.dtype, np.integer) or (T and (index.min() < 0 or index.max() >= J)):
        raise ConfigError(f"index must be {T} integers in [0, {J}), one item per response step")
    if np.any(np.diff(index) < 0):
        raise ConfigError("index must be non-decreasing (items follow one another in time)")
    dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
    sta, base, thr, count = _sta(jnp.asarray(stimulus, dtype), jnp.asarray(response, dtype), jnp.asarray(index),
                                 int(lags), jnp.asarray(float(quantile), dtype))
    return STAResult(np.asarray(sta), np.asarray(base), np.asarray(thr), np.asarray(count).round().astype(np.int64))
