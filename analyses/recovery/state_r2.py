r"""Held-out state $R^2$: how much of the teacher's latent state a linear read-out of the
student's state explains, on trials it was not fitted on.

With the student's states $S$ and the teacher's latents $L$ on the same inputs (rows: every step
of every trial), the affine map $L \approx S W + b$ is fitted by least squares (``ridge``
$\lambda \ge 0$: $W = (\tilde S^\top \tilde S + \lambda \operatorname{tr}(\tilde S^\top\tilde S)/N_S\, I)^{-1}\tilde S^\top \tilde L$
on the centred $\tilde S, \tilde L$) on the first trials, and scored on the last ``held_out``
fraction of them:

$$ R^2 = 1 - \frac{\sum \lVert L - S W - b \rVert^2}{\sum \lVert L - \bar L \rVert^2}, $$

pooled over the teacher's components (a component's weight is its variance). A student whose
state is an invertible linear function of the teacher's has $R^2 = 1$. The map is also the best
linear map between the state spaces that the fixed-point agreement uses
([`dynlab.analyses.recovery.fixed_point_score`][]).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dynlab.errors import ConfigError


class LinearMap(NamedTuple):
    """$h_T \\approx h_S W + b$: the student's state mapped into the teacher's state space."""

    weight: np.ndarray
    bias: np.ndarray

    def __call__(self, states):
        return np.asarray(states, np.float64) @ self.weight + self.bias


def fit_map(student, teacher, ridge: float = 0.0) -> LinearMap:
    """The least-squares (ridge) affine map from rows of ``student`` ``[rows, N_S]`` to ``teacher`` ``[rows, N_T]``."""
    s, t = np.asarray(student, np.float64), np.asarray(teacher, np.float64)
    s_mean, t_mean = s.mean(axis=0), t.mean(axis=0)
    sc, tc = s - s_mean, t - t_mean
    if ridge > 0:
        gram = sc.T @ sc
        w = np.linalg.solve(gram + ridge * np.trace(gram) / gram.shape[0] * np.eye(gram.shape[0]), sc.T @ tc)
    else:
        w = np.linalg.lstsq(sc, tc, rcond=None)[0]
    return LinearMap(w, t_mean - s_mean @ w)


def state_r2(student_states, teacher_latents, *, held_out: float = 0.5, ridge: float = 0.0) -> tuple[float, LinearMap]:
    """``(R², map)``: the held-out $R^2$ of the module docstring from ``student_states``
    ``[trials, T, N_S]`` and ``teacher_latents`` ``[trials, T, N_T]``, and the map fitted on the
    other trials.

    **Enforces**: at least one trial on each side of the split; ``held_out`` in (0, 1), ``ridge`` >= 0."""
    s, t = np.asarray(student_states, np.float64), np.asarray(teacher_latents, np.float64)
    if s.ndim != 3 or t.ndim != 3 or s.shape[:2] != t.shape[:2]:
        raise ConfigError(f"states must be [trials, T, N] for both systems on the same trials, "
                          f"got {s.shape} and {t.shape}")
    if isinstance(held_out, bool) or not isinstance(held_out, (int, float)) or not 0 < held_out < 1:
        raise ConfigError(f"held_out must be a fraction in (0, 1), got {held_out!r}")
    if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or not np.isfinite(ridge) or ridge < 0:
        raise ConfigError(f"ridge must be a finite number >= 0, got {ridge!r}")
    trials = s.shape[0]
    test = int(round(held_out * trials))
    if test < 1 or test >= trials:
        raise ConfigError(f"{trials} trials cannot be split with held_out = {held_out:g} (at least one on each side)")
    fit = fit_map(s[:-test].reshape(-1, s.shape[2]), t[:-test].reshape(-1, t.shape[2]), ridge)
    truth = t[-test:].reshape(-1, t.shape[2])
    predicted = fit(s[-test:].reshape(-1, s.shape[2]))
    total = np.sum((truth - truth.mean(axis=0)) ** 2)
    return float(1.0 - np.sum((truth - predicted) ** 2) / total) if total > 0 else float("nan"), fit
