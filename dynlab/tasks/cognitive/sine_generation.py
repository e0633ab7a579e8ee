r"""Pattern generation: a frequency cue sets the frequency of an oscillation the network produces.

A sine-wave generator in the form of Sussillo & Abbott (2009) and Sussillo & Barak (2013, the
third example): a static input of level $u = f / f_\text{max}$ (``cue``) is on for the whole
trial, whose frequency $f$ (Hz) is drawn uniformly from ``frequencies``; after a fixation
period (target 0) the target is

$$ y(t) = \sin\!\bigl(2\pi f\,(t - t_0)\,dt / 1000\bigr), $$

$t_0$ the first step of the generation period. Loss ``mse``; chance 0.5 (the mean square of a
sine, the error of the silent output). neurogym has no such task; the defaults are chosen so
that each trial holds 1–5 full cycles: ``dt`` = 20 ms, fixation 100 ms, generation 1000 ms,
frequencies 1–5 Hz in steps of 0.5 Hz. The known solution: an oscillation per cue, near a limit
cycle around an unstable fixed point whose leading eigenvalue pair has angle
$2\pi f\,dt/1000$ (Sussillo & Barak 2013).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dynlab.registry import register
from dynlab.tasks.cognitive.trial import TrialTask, check_levels

TIMING = {"fixation": 100, "generation": 1000}
"""Default periods (ms)."""
FREQUENCIES = tuple(1.0 + 0.5 * i for i in range(9))
"""Default frequencies (Hz): 1, 1.5, …, 5."""


@register("task", "sine-generation", "frequency cue -> sine oscillation of that frequency (mse, chance 0.5)")
class SineGenerationTask(TrialTask):
    """Pattern generation; see the module docstring."""

    frequencies: tuple[float, ...]

    def __init__(self, *, dt: float = 20.0, timing: dict | None = None, frequencies=FREQUENCIES):
        self._setup({**TIMING, **(timing or {})}, dt, 0.0, False, choices=1)
        self.frequencies = check_levels("task.frequencies", frequencies, 1e-3, 500.0 / float(dt))
        self.input_size, self.output_size = 1, 1
        self.loss, self.chance = "mse", 0.5

    def batch(self, key, batch_size, split="train"):
        k_time, k_freq = jax.random.split(key)
        masks = self.periods.masks(k_time, batch_size)
        f = jnp.asarray(self.frequencies)[jax.random.randint(k_freq, (batch_size,), 0, len(self.frequencies))]
        on = masks["fixation"] + masks["generation"]
        x = (on * f[:, None] / max(self.frequencies))[..., None]
        t0 = jnp.argmax(masks["generation"], axis=1)                      # first generation step
        t = jnp.arange(self.length)[None, :] - t0[:, None]
        y = (masks["generation"] * jnp.sin(2 * jnp.pi * f[:, None] * t * self.periods.dt / 1000.0))[..., None]
        return x, y, on
