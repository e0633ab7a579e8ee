r"""Trial periods with variable durations: the timing of the cognitive tasks.

A trial is a sequence of named periods (fixation, stimulus, delay, decision, …), each with a
duration in milliseconds that is either fixed ([`Fixed`][]) or drawn per trial from a truncated
exponential ([`TruncatedExponential`][]), as in neurogym's ``timing`` dictionaries. With a step
of ``dt`` ms, period $p$ of a trial occupies the steps

$$ \lfloor S_p / dt \rfloor \le t < \lfloor (S_p + d_p) / dt \rfloor, \qquad S_p = \sum_{q<p} d_q , $$

neurogym's rounding (``TrialEnv.add_period``). Trials of one batch differ in length; every
array has the length of the longest possible trial ([`Periods.steps`][]), and the steps after a
trial's end belong to no period (its mask is 0 there). Everything is drawn from an explicit key
inside ``jit``.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError

MAX_STEPS = 2**31 - 1
"""The most steps a trial may last: step indices are int32 (a longer trial is refused where
``dt`` and the periods are given, not met as an overflow inside JAX)."""


def _finite_nonnegative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a finite number of milliseconds >= 0, got {value!r}")
    return float(value)


class Fixed(eqx.Module):
    """A period of ``ms`` milliseconds in every trial."""

    ms: float = eqx.field(static=True)

    def __init__(self, ms: float):
        self.ms = _finite_nonnegative("a period's duration", ms)

    @property
    def longest(self) -> float:
        return self.ms

    def draw(self, key: PRNGKeyArray, n: int) -> Array:
        return jnp.full((n,), self.ms)


class TruncatedExponential(eqx.Module):
    r"""A duration drawn per trial from an exponential of mean ``mean`` ms restricted to
    ``[low, high)`` (neurogym's ``TruncExp(mean, low, high)``, which rejects draws outside).

    Drawn by inverting the truncated distribution's CDF, $F(d) \propto 1 - e^{-(d-a)/m}$ on
    $[a, b)$: $d = a - m \ln\!\bigl(1 - u\,(1 - e^{-(b-a)/m})\bigr)$ with $u \sim U(0, 1)$; the
    same law as rejection of $\mathrm{Exp}(m)$ draws outside $[a, b)$, by memorylessness.
    """

    mean: float = eqx.field(static=True)
    low: float = eqx.field(static=True)
    high: float = eqx.field(static=True)

    def __init__(self, mean: float, low: float, high: float):
        self.mean = _finite_nonnegative("a truncated exponential's mean", mean)
        self.low = _finite_nonnegative("a truncated exponential's low end", low)
        self.high = _finite_nonnegative("a truncated exponential's high end", high)
        if not self.low < self.high or self.mean <= 0:
            raise ConfigError(f"a truncated exponential needs mean > 0 and low < high, got "
                              f"mean {mean!r}, low {low!r}, high {high!r}")

    @property
    def longest(self) -> float:
        return self.high

    def draw(self, key: PRNGKeyArray, n: int) -> Array:
        u = jax.random.uniform(key, (n,))
        span = -jnp.expm1(-(self.high - self.low) / self.mean)
        return self.low - self.mean * jnp.log1p(-u * span)


Duration = Fixed | TruncatedExponential


def duration(name: str, value) -> Duration:
    """A duration from a config value: a number of ms, ``[mean, low, high]`` (a truncated
    exponential), or a [`Fixed`][] / [`TruncatedExponential`][] value."""
    if isinstance(value, (Fixed, TruncatedExponential)):
        return value
    if isinstance(value, (list, tuple)) and len(value) == 3:
        return TruncatedExponential(*value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Fixed(value)
    raise ConfigError(f"the duration of period {name!r} must be a number of ms or [mean, low, high] "
                      f"(a truncated exponential), got {value!r}")


class Periods(eqx.Module):
    """The ordered periods of a trial and the step ``dt`` (ms)."""

    names: tuple[str, ...] = eqx.field(static=True)
    durations: tuple[Duration, ...] = eqx.field(static=True)
    dt: float = eqx.field(static=True)

    def __init__(self, timing: dict, dt: float):
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
            raise ConfigError(f"task.dt must be a positive number of milliseconds, got {dt!r}")
        self.names = tuple(timing)
        self.durations = tuple(duration(k, v) for k, v in timing.items())
        self.dt = float(dt)
        longest = sum(d.longest for d in self.durations)
        if not longest / self.dt <= MAX_STEPS:
            raise ConfigError(f"task.dt = {dt:.6g} ms makes the longest trial ({longest:.6g} ms) {longest / self.dt:.3g} "
                              f"steps, more than {MAX_STEPS:,}; raise task.dt or shorten task.timing")
        if self.steps < 1:
            raise ConfigError(f"a trial must last at least one step of dt = {dt} ms; the periods {timing} last "
                              f"{sum(d.longest for d in self.durations)} ms")

    @property
    def steps(self) -> int:
        """$T$: the steps of the longest possible trial."""
        return int(math.floor(sum(d.longest for d in self.durations) / self.dt + 1e-9))

    def bounds(self, key: PRNGKeyArray, n: int) -> tuple[Array, Array]:
        """``(start, end)``, each ``int[n, P]``: the first step of each period and one past its last."""
        keys = jax.random.split(key, len(self.durations))
        ms = jnp.stack([d.draw(k, n) for d, k in zip(self.durations, keys)], axis=1)
        ends = jnp.floor(jnp.cumsum(ms, axis=1) / self.dt + 1e-6).astype(jnp.int32)
        ends = jnp.minimum(ends, self.steps)
        return jnp.concatenate([jnp.zeros_like(ends[:, :1]), ends[:, :-1]], axis=1), ends

    def masks(self, key: PRNGKeyArray, n: int) -> dict[str, Array]:
        """Period name -> ``float[n, T]``, 1 at the steps of that period of each trial."""
        start, end = self.bounds(key, n)
        t = jnp.arange(self.steps)[None, :]
        return {name: ((t >= start[:, i, None]) & (t < end[:, i, None])).astype(jnp.float32)
                for i, name in enumerate(self.names)}
