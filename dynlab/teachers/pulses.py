r"""The input protocol of autonomous teachers: Gaussian pulses, a kick at the start of a trial.

At each of the first ``steps`` steps of a trial (every step with ``steps=None``), each input
channel receives, with probability ``rate``, a pulse $\mathcal N(0, \text{scale}^2)$; later
steps get zero. A kick sets the trial's initial condition from the teacher's fixed initial
state, so that trials differ while their targets stay a function of the inputs the student sees.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from dynlab.errors import ConfigError


class Pulses(eqx.Module):
    """Gaussian pulses on ``channels`` inputs; see the module docstring.

    **Enforces** ``channels`` >= 1, ``rate`` in (0, 1], ``scale`` finite >= 0, ``steps`` >= 1 or None.
    """

    channels: int = eqx.field(static=True)
    rate: float = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    steps: int | None = eqx.field(static=True)

    def __init__(self, channels: int = 1, *, rate: float = 1.0, scale: float = 1.0, steps: int | None = None):
        if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
            raise ConfigError(f"the pulses' channels must be a positive integer, got {channels!r}")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
            raise ConfigError(f"task.pulse_rate must be a probability in (0, 1], got {rate!r}")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale < 0:
            raise ConfigError(f"task.pulse_scale must be a finite number >= 0, got {scale!r}")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ConfigError(f"task.kick (steps with pulses) must be a positive integer, got {steps!r}")
        self.channels, self.rate, self.scale, self.steps = channels, float(rate), float(scale), steps

    def __call__(self, key, batch_size: int, length: int):
        """``[batch_size, length, channels]`` pulses."""
        k_on, k_size = jax.random.split(key)
        shape = (batch_size, length, self.channels)
        on = jax.random.bernoulli(k_on, self.rate, shape)
        if self.steps is not None:
            on = on & (jnp.arange(length) < self.steps)[None, :, None]
        return jnp.where(on, self.scale * jax.random.normal(k_size, shape), 0.0)

    def identity(self) -> dict:
        return {"channels": self.channels, "rate": self.rate, "scale": self.scale, "steps": self.steps}
