r"""What the trial-structured cognitive tasks share: periods, input noise, choice labels, masks.

Each trial is a sequence of periods ([`dynlab.tasks.cognitive.periods.Periods`][]). As in
neurogym's supervised datasets, the target at every step is a class: 0 ("fixate") outside the
decision period and the correct choice $1, \dots, C$ during it (loss ``ce_all``). Which steps
are scored is a value: the decision period only (``score_fixation = False``, dynlab's default:
the metric is then the decision accuracy, chance $1/C$), or every step of the trial
(``score_fixation = True``, neurogym's form, where fixation steps dominate the metric). Steps
after a short trial's end are never scored.

Input noise follows neurogym: Gaussian of standard deviation $\sigma / \sqrt{dt}$ (``sigma``
per $\sqrt{\text{ms}}$), independent per step and channel, where the task adds it.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp

from dynlab.errors import ConfigError
from dynlab.tasks.base import Task
from dynlab.tasks.cognitive.periods import Periods


def check_nonnegative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_levels(name: str, values, low: float, high: float) -> tuple[float, ...]:
    """A non-empty list of numbers in ``[low, high]``."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ConfigError(f"{name} must be a non-empty list of numbers in [{low}, {high}], got {values!r}")
    values = tuple(values)
    if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high
                         for v in values):
        raise ConfigError(f"{name} must be a non-empty list of numbers in [{low}, {high}], got {list(values)!r}")
    return tuple(float(v) for v in values)


class TrialTask(Task):
    """Base of the trial-structured tasks: ``periods`` (with ``dt``), ``sigma`` and ``score_fixation``."""

    periods: Periods = eqx.field(static=True)
    sigma: float = eqx.field(static=True)
    score_fixation: bool = eqx.field(static=True)

    def _setup(self, timing: dict, dt: float, sigma: float, score_fixation: bool, choices: int):
        self.periods = Periods(timing, dt)
        self.sigma = check_nonnegative("task.sigma", sigma)
        if not isinstance(score_fixation, bool):
            raise ConfigError(f"task.score_fixation must be true or false, got {score_fixation!r}")
        self.score_fixation = score_fixation
        self.length = self.periods.steps
        self.output_size = choices + 1
        self.loss, self.chance = "ce_all", 1.0 / choices

    @property
    def noise_sd(self) -> float:
        r"""$\sigma / \sqrt{dt}$: the input noise per step and channel."""
        return self.sigma / math.sqrt(self.periods.dt)

    def labels(self, masks: dict, choice) -> tuple:
        """``(y[B, T], mask[B, T])``: ``choice`` (``int[B]``, 1-based) during the decision period, else 0."""
        decision = masks["decision"]
        y = (decision * choice[:, None]).astype(jnp.int32)
        trial = sum(masks.values())
        return y, (trial if self.score_fixation else decision)
