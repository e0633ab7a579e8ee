r"""A dynamical system's fingerprint, measured the same way for a teacher and for its student.

A [`System`][] is a flat map $h_{t+1} = F(h_t, x_t)$ with its initial state: a teacher
([`of_teacher`][]) or a dynlab model ([`of_model`][], its full state map with zero drive). Its
[`fingerprint`][] under the teacher's inputs ``xs`` ``[trials, T, D]`` is

- **fixed points** at zero input, with their stability, by dynlab's speed minimisation from the
  states visited under ``xs`` after ``burn_in`` steps
  ([`fixed_points_from_visited`][dynlab.analyses.fixed_points.fixed_points_from_visited]);
- **the Lyapunov spectrum** (all $N$ exponents, per step) of the autonomous map (zero input),
  replicated over ``realisations`` initial states, the last states of the first trials, with its
  Student-t intervals, $\lambda_1$, the number of positive exponents and the Kaplan–Yorke dimension
  ([`lyapunov_replicates`][dynlab.analyses.lyapunov.lyapunov_replicates], re-orthonormalising at
  the interval its ``"auto"`` rule chooses: every $N$ exponents are needed for the dimension).

Both are computed in float64 (``jax.enable_x64``), so that a fixed point's residual and a
marginal eigenvalue are resolved well below the tolerances.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.fixed_points import fixed_points_from_visited
from dynlab.analyses.lyapunov import lyapunov_replicates
from dynlab.errors import ConfigError, require_positive


class System(NamedTuple):
    """A flat map ``step(h, x) -> h'`` and the state ``h0`` every trial starts from."""

    step: Callable
    h0: jax.Array

    def visit(self, xs) -> np.ndarray:
        """The states after every step of every trial, ``[trials, T, N]`` (float64)."""
        def run(x):
            def body(h, u):
                h = self.step(h, u).astype(h.dtype)
                return h, h

            return jax.lax.scan(body, self.h0.astype(x.dtype), x)[1]

        with jax.enable_x64(True):
            states = np.asarray(jax.jit(jax.vmap(run))(jnp.asarray(xs, jnp.float64)))
        if not np.isfinite(states).all():
            raise ConfigError("the state became NaN or inf under the teacher's inputs: no fingerprint to measure")
        return states


def of_teacher(teacher) -> System:
    """A [`Teacher`][dynlab.teachers.base.Teacher] as a system."""
    return System(teacher.step, teacher.initial_state())


def of_model(model) -> System:
    """A dynlab sequence model's full state map at zero drive as a system."""
    from dynlab.analyses.state_map import state_map

    smap = state_map(model)
    return System(lambda h, x: smap.step(h, (x, jnp.zeros((), x.dtype))), smap.h0)


@dataclasses.dataclass(frozen=True)
class FingerprintOptions:
    """How a fingerprint is measured (module docstring): ``trials`` of the teacher's inputs
    (from ``seed``), the first ``burn_in`` steps of each left out of the visited states,
    ``ics`` initial states of the fixed-point search, ``realisations`` and ``steps`` (of which
    ``lyapunov_burn_in`` are not accumulated) of the spectrum."""

    trials: int = 8
    burn_in: int = 0
    ics: int = 64
    realisations: int = 5
    steps: int = 2000
    lyapunov_burn_in: int = 200
    seed: int = 0

    def __post_init__(self):
        for name in ("trials", "ics", "realisations", "steps"):
            require_positive(name, getattr(self, name))
        for name in ("burn_in", "lyapunov_burn_in", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        if self.realisations < 2:
            raise ConfigError(f"realisations must be at least 2 (an interval needs two), got {self.realisations}")
        if self.realisations > self.trials:
            raise ConfigError(f"realisations ({self.realisations}) must be at most trials ({self.trials}): "
                              "each starts from the last state of one trial")
        if self.lyapunov_burn_in >= self.steps:
            raise ConfigError(f"lyapunov_burn_in ({self.lyapunov_burn_in}) must be below steps ({self.steps})")


def fingerprint(system: System, xs, options: FingerprintOptions = FingerprintOptions()) -> tuple[xr.Dataset, xr.Dataset]:
    """``(fixed points, Lyapunov spectrum)`` of ``system`` under the inputs ``xs`` ``[trials, T, D]``
    (module docstring); the datasets of the two analyses' cores."""
    xs = np.asarray(xs)
    if xs.ndim != 3 or xs.shape[1] <= options.burn_in:
        raise ConfigError(f"inputs must be [trials, T > burn_in ({options.burn_in}), D], got shape {xs.shape}")
    states = system.visit(xs)
    n, d = states.shape[-1], xs.shape[-1]
    with jax.enable_x64(True):
        zero = jnp.zeros(d, jnp.float64)
        fixed = fixed_points_from_visited(system.step, states[:, options.burn_in:].reshape(-1, n), zero,
                                          ics=options.ics, seed=options.seed)
        h0s = jnp.asarray(states[: options.realisations, -1][:, None])
        inputs = jnp.zeros((options.realisations, options.steps, d), jnp.float64)
        spectrum = lyapunov_replicates(system.step, h0s, inputs, n, population="states at the end of the teacher's "
                                       "trials", burn_in=options.lyapunov_burn_in, x64=True, reortho_every="auto",
                                       key=jax.random.key(options.seed))
    return fixed, spectrum
