r"""The leaky rate network (Sompolinsky, Crisanti & Sommers 1988), one Euler step per time step.

The continuous-time network $\tau \dot h = -h + W\phi(h) + W_x x + b + \xi$ discretised with
step $\Delta t$ and $\alpha = \Delta t / \tau$:

$$ h_{t+1} = (1 - \alpha)\, h_t + \alpha \left( W \phi(h_t) + W_x x_t + b + \xi_t \right), \qquad
   y_t = \phi(h_{t+1}), $$

with $\phi = \tanh$ (``activation="tanh"``) or the identity (``"linear"``). $W$ is drawn with
i.i.d. entries $\mathcal N(0, g^2/N)$: for $g > 1$ and large $N$ the tanh network is chaotic
(its largest Lyapunov exponent is positive; dynamical mean-field theory), for $g < 1$ it decays
to the fixed point 0. The Jacobian of the step at the origin is, in closed form,
$(1 - \alpha) I + \alpha W \phi'(0)$, with eigenvalues $1 - \alpha + \alpha\mu_i(W)$. A
linear network whose $W$ has one eigenvalue 1 is a line attractor
([`dynlab.teachers.network`][]). ``W_x`` has entries $\mathcal N(0, 1/D)$, $b = 0$.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.units.base import Cell, add_drive

ACTIVATIONS = ("tanh", "linear")


@register("unit", "rate", "leaky rate network h' = (1-a) h + a (W phi(h) + W_x x + b), W ~ N(0, g^2/N) (SCS 1988)")
class RateCell(Cell):
    """The leaky rate network; see the module docstring. ``alpha`` ($\\Delta t/\\tau$) is fixed
    (stored static), the weights and bias train."""

    w: Array
    w_x: Array
    b: Array
    alpha: float = eqx.field(static=True)
    activation: str = eqx.field(static=True)

    def __init__(self, input_size: int, *, hidden: int = 64, g: float = 1.5, alpha: float = 0.1,
                 activation: Literal["tanh", "linear"] = "tanh", key: PRNGKeyArray):
        require_positive("input_size", input_size)
        require_positive("hidden", hidden)
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not math.isfinite(g) or g < 0:
            raise ConfigError(f"g (the gain of W) must be a finite number >= 0, got {g!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
            raise ConfigError(f"alpha (dt / tau) must be a number in (0, 1], got {alpha!r}")
        if activation not in ACTIVATIONS:
            raise ConfigError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
        self.input_size, self.hidden = input_size, hidden
        self.alpha, self.activation = float(alpha), activation
        k_w, k_x = jax.random.split(key)
        self.w = g / math.sqrt(hidden) * jax.random.normal(k_w, (hidden, hidden))
        self.w_x = jax.random.normal(k_x, (hidden, input_size)) / math.sqrt(input_size)
        self.b = jnp.zeros(hidden)

    def phi(self, h: Array) -> Array:
        """The activation $\\phi$."""
        return jnp.tanh(h) if self.activation == "tanh" else h

    def __call__(self, state, x, *, drive=None):
        a = add_drive(self.w @ self.phi(state) + self.w_x @ x + self.b, drive)
        h = (1.0 - self.alpha) * state + self.alpha * a
        return h, self.phi(h)

    def recurrent_matrices(self) -> dict[str, Array]:
        return {"w": self.w}
