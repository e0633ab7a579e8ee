r"""Delayed match-to-sample (Miller, Erickson & Desimone 1996).

neurogym's ``DelayMatchSample-v0`` with its defaults: ``dt`` = 100 ms; periods fixation 300,
sample 500, delay 1000, test 500, decision 900 ms; ``sigma`` = 1.0; a ring of 2 stimulus
directions $\theta \in \{0, \pi\}$. Inputs ``[T, 3]``: a fixation channel, 1 in every period but
the decision, and two stimulus channels carrying $\tfrac12 + \tfrac12\cos(\theta_j - \phi)$ plus
noise $\tfrac{\sigma}{\sqrt{dt}}\xi$ during the sample ($\phi$ = the sample's direction, drawn
uniformly) and the test ($\phi$ = the sample's direction on a match, the opposite one on a
non-match, each with probability ½). The target during the decision period is 1 (match) or 2
(non-match) (loss ``ce_all``); the network must hold the sample through the delay.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dynlab.registry import register
from dynlab.tasks.cognitive.trial import TrialTask

TIMING = {"fixation": 300, "sample": 500, "delay": 1000, "test": 500, "decision": 900}
"""neurogym's default periods (ms)."""


@register("task", "delayed-match", "delayed match-to-sample, neurogym's defaults (ce_all, chance 1/2)")
class DelayedMatchTask(TrialTask):
    """Delayed match-to-sample; see the module docstring."""

    def __init__(self, *, dt: float = 100.0, timing: dict | None = None, sigma: float = 1.0,
                 score_fixation: bool = False):
        self._setup({**TIMING, **(timing or {})}, dt, sigma, score_fixation, choices=2)
        self.input_size = 3

    def batch(self, key, batch_size, split="train"):
        k_time, k_match, k_sample, k_noise = jax.random.split(key, 4)
        masks = self.periods.masks(k_time, batch_size)
        match = jax.random.bernoulli(k_match, 0.5, (batch_size,))
        sample = jax.random.randint(k_sample, (batch_size,), 0, 2)          # direction index: 0 or pi
        test = jnp.where(match, sample, 1 - sample)
        pattern = lambda d: 0.5 + 0.5 * jnp.where(jax.nn.one_hot(d, 2) > 0, 1.0, -1.0)  # noqa: E731
        shown = masks["sample"][..., None] * pattern(sample)[:, None, :] + masks["test"][..., None] * pattern(test)[:, None, :]
        noisy = (masks["sample"] + masks["test"])[..., None]
        noise = self.noise_sd * jax.random.normal(k_noise, (batch_size, self.length, 2))
        fixation = 1.0 - masks["decision"] - (1.0 - sum(masks.values()))   # on in-trial, off at decision
        x = jnp.concatenate([fixation[..., None], shown + noisy * noise], axis=-1)
        y, mask = self.labels(masks, jnp.where(match, 1, 2))
        return x, y, mask
