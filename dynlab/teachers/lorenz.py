r"""Lorenz-63 as a teacher, integrated with diffrax.

$$ \dot x = \sigma (y - x) + u_1, \qquad \dot y = x(\rho - z) - y + u_2, \qquad
   \dot z = x y - \beta z + u_3, $$

with the classic $\sigma = 10$, $\rho = 28$, $\beta = 8/3$ and the inputs $u$ held constant over
each step. One step of the teacher is one step of ``solver`` (default: Tsit5, 5th order, its stages in a
bounded loop so that the step is differentiable in forward and reverse mode) of size
``dt`` (default 0.01), so that the map's Lyapunov exponents are the flow's times ``dt`` to the
solver's accuracy. The flow's published spectrum (Sprott 2003, *Chaos and Time-Series Analysis*,
Table A.2) is $\lambda = (0.9056, 0, -14.5723)$ per unit time, Kaplan–Yorke dimension 2.0621;
its fixed points are the origin (a saddle with one unstable direction) and
$C^\pm = (\pm\sqrt{\beta(\rho-1)}, \pm\sqrt{\beta(\rho-1)}, \rho - 1)$ (saddle-foci, two unstable
directions, at $\rho = 28 > 24.74$).

Every trial starts from ``start`` (default a point on the attractor) and is kicked by Gaussian
pulses on the three inputs in its first steps ([`Pulses`][dynlab.teachers.pulses.Pulses]). The
output is the state divided by ``scale`` (10: targets of order one).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import equinox as eqx
import jax.numpy as jnp

from dynlab.errors import ConfigError
from dynlab.teachers.base import Teacher
from dynlab.teachers.pulses import Pulses

if TYPE_CHECKING:  # imported where used: diffrax costs ~0.4 s of every command's start
    import diffrax

ON_ATTRACTOR = (0.9661, -0.8635, 22.6868)
"""A state on the attractor (after a burn-in of 100 time units from (1, 1, 1))."""


def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"task.{name} must be a positive finite number, got {value!r}")
    return float(value)


class Lorenz63(Teacher):
    """The Lorenz-63 teacher; see the module docstring."""

    sigma: float = eqx.field(static=True)
    rho: float = eqx.field(static=True)
    beta: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    start: tuple = eqx.field(static=True)
    pulses: Pulses
    solver: diffrax.AbstractSolver = eqx.field(static=True)

    def __init__(self, *, sigma: float = 10.0, rho: float = 28.0, beta: float = 8 / 3, dt: float = 0.01,
                 scale: float = 10.0, start: tuple = ON_ATTRACTOR, pulses: Pulses | None = None,
                 solver: diffrax.AbstractSolver | None = None):
        self.sigma, self.rho, self.beta = _positive("sigma", sigma), _positive("rho", rho), _positive("beta", beta)
        self.dt, self.scale = _positive("dt", dt), _positive("scale", scale)
        self.start = tuple(float(v) for v in start)
        self.pulses = Pulses(3, scale=10.0, steps=20) if pulses is None else pulses
        if self.pulses.channels != 3:
            raise ConfigError(f"Lorenz-63 takes 3 inputs (one per variable), got pulses on {self.pulses.channels}")
        import diffrax

        # "bounded" stages: differentiable in forward and reverse mode (the analyses linearise the step)
        self.solver = diffrax.Tsit5(scan_kind="bounded") if solver is None else solver
        self.input_size, self.state_size, self.output_size = 3, 3, 3

    def vector_field(self, t, h, u):
        x, y, z = h[0], h[1], h[2]
        return jnp.stack([self.sigma * (y - x), x * (self.rho - z) - y, x * y - self.beta * z]) + u

    def initial_state(self):
        return jnp.asarray(self.start)

    def transition(self, h, x):
        import diffrax

        term = diffrax.ODETerm(self.vector_field)
        state = self.solver.init(term, 0.0, self.dt, h, x)
        h_next = self.solver.step(term, 0.0, self.dt, h, x, state, made_jump=False)[0]
        return h_next, h_next / self.scale

    def inputs(self, key, batch_size, length):
        return self.pulses(key, batch_size, length)

    def identity(self) -> dict:
        return {"sigma": self.sigma, "rho": self.rho, "beta": self.beta, "dt": self.dt, "scale": self.scale,
                "start": list(self.start), "solver": type(self.solver).__name__, "pulses": self.pulses.identity()}
