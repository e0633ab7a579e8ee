r"""Perceptual decision making: two-alternative forced choice on noisy evidence (random-dot-like).

neurogym's ``PerceptualDecisionMaking-v0`` (Britten et al. 1992), with its defaults: ``dt`` =
100 ms; periods fixation 100, stimulus 2000, delay 0, decision 100 ms; coherences
$c \in \{0, 6.4, 12.8, 25.6, 51.2\}$ (%); ``sigma`` = 1.0. Inputs ``[T, 3]``: a fixation
channel, 1 during the fixation period only, and two evidence channels, which during the stimulus
period carry

$$ u_j(t) = \tfrac12 + \tfrac{c}{200}\cos(\theta_j - \theta_g) + \tfrac{\sigma}{\sqrt{dt}}\,\xi_j(t),
\qquad \theta = (0, \pi), $$

for the correct choice $g$ drawn uniformly, and $c$ drawn uniformly from ``cohs``: the channel of
the correct side has mean $\tfrac12 + c/200$, the other $\tfrac12 - c/200$, each with noise
$\sigma/\sqrt{dt}$ (0.1 at the defaults). The target is the choice $g + 1$ during the decision
period (loss ``ce_all``; [`dynlab.tasks.cognitive.trial`][] says which steps are scored). At
$c = 0$ no answer beats chance, so a perfect observer's accuracy is below 1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dynlab.registry import register
from dynlab.tasks.cognitive.trial import TrialTask, check_levels

TIMING = {"fixation": 100, "stimulus": 2000, "delay": 0, "decision": 100}
"""neurogym's default periods (ms)."""
COHERENCES = (0.0, 6.4, 12.8, 25.6, 51.2)
"""neurogym's default coherences (%)."""


@register("task", "perceptual-decision", "two-choice perceptual decision on noisy evidence, neurogym's defaults (ce_all, chance 1/2)")
class PerceptualDecisionTask(TrialTask):
    """Perceptual decision making; see the module docstring."""

    cohs: tuple[float, ...]

    def __init__(self, *, dt: float = 100.0, timing: dict | None = None, cohs=COHERENCES, sigma: float = 1.0,
                 score_fixation: bool = False):
        self._setup({**TIMING, **(timing or {})}, dt, sigma, score_fixation, choices=2)
        self.cohs = check_levels("task.cohs", cohs, 0.0, 100.0)
        self.input_size = 3

    def batch(self, key, batch_size, split="train"):
        k_time, k_choice, k_coh, k_noise = jax.random.split(key, 4)
        masks = self.periods.masks(k_time, batch_size)
        choice = jax.random.randint(k_choice, (batch_size,), 0, 2)
        coh = jnp.asarray(self.cohs)[jax.random.randint(k_coh, (batch_size,), 0, len(self.cohs))]
        side = jnp.where(jax.nn.one_hot(choice, 2) > 0, 1.0, -1.0)        # cos(theta_j - theta_g)
        mean = 0.5 + coh[:, None] / 200.0 * side                           # [B, 2]
        stimulus = masks["stimulus"][..., None]
        noise = self.noise_sd * jax.random.normal(k_noise, (batch_size, self.length, 2))
        evidence = stimulus * (mean[:, None, :] + noise)
        x = jnp.concatenate([masks["fixation"][..., None], evidence], axis=-1)
        y, mask = self.labels(masks, choice + 1)
        return x, y, mask
