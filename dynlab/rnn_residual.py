r"""The parameterised RNN with a residual recurrence and a depth factor over time steps.

[`ParamRNN`][dynlab.rnn_param.ParamRNN] unrolled over $T$ steps is a depth-$T$ network without skips.
Its residual counterpart, the recurrent analogue of the paper's residual MLP
([`FeedForward`][dynlab.ffmodels.FeedForward], branches scaled by $L^{-\alpha}$), scales the update of
every step by $T^{-\alpha}$:

$$ h_t = h_{t-1} + T^{-\alpha}\,\phi\big(m_{in} W^{in} x_t + m_{rec} W^{rec} h_{t-1} + b + \xi_t\big),
   \qquad f_t = \frac{1}{\gamma N^{a}} W^{out} h_t , $$

with the multipliers and initialisation of [`dynlab.rnn_param`][] (``param``, ``gamma0``,
``gain``) and $T$ = ``length``, the sequence length the network is built for.

**Why $\alpha = 1$** (derivation; measured in ``dynlab run pc-time-law``). PC through time
rescales the linear RNN's loss by $s = 1 + \sum_t \|\partial o/\partial e_t\|^2$
([`dynlab.rules.pc_time.closed_form`][]). With the read-out at the last step and $R$ the
one-step Jacobian, $s - 1 = \sum_{k=1}^{T-1} \|c\,R^k\|^2$, $c$ the read-out row
($\|c\|^2 \approx 1/(\gamma_0^2 N)$ under mean-field).

* Without skips, $R = A = g W/\sqrt N$. Its powers keep $\mathbb E\|c A^k\|^2 = g^{2k}\|c\|^2$ only
  to leading order in $1/N$: at finite width the spectral radius exceeds $g$ and $\|cA^k\|$ grows
  exponentially once $k \gtrsim \sqrt N$, so at $g = 1$ the law $s - 1 \approx (T-1)/N$ holds only
  for $T \ll \sqrt N$ (log–log slope of $s-1$ against $T/N$ far above 1 on any grid that reaches
  $T \sim N$).
* With skips the weights are **shared** across steps, unlike a residual MLP's:
  $R^k = (I + T^{-\alpha}A)^k \approx \exp(k T^{-\alpha} A)$, whose norm grows like
  $\exp(T^{1-\alpha}\,\mathrm{Re}\,\lambda_{\max}(A))$. The MLP's $\alpha = \tfrac12$ (independent
  layers: a random walk) therefore explodes in time; $\alpha = 1$ is the only exponent with a
  non-trivial limit, the ODE $\dot h = A h$ on $[0, 1]$: $R^{T-t} \to e^{(1 - t/T) A}$, bounded
  uniformly in $T$. Then, as $N \to \infty$ ($\mathbb E\|c\,e^{uA}\|^2 = \|c\|^2 I_0(2u)$ for a
  Ginibre $A$),

$$ s - 1 \;\to\; \kappa\,\frac{T - 1}{\gamma_0^2 N}, \qquad
   \kappa = \int_0^1 I_0(2u)\,du = \sum_{k\ge0} \frac{1}{(2k+1)\,(k!)^2} \approx 1.388 , $$

  the recurrent $L/N$ law with slope 1 at every width and length, and the PC gradient tends to
  BPTT's as $N$ grows at any fixed $T$ (the cosine's defect is of order $(s-1)^2$).
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.ffmodels import ACTIVATIONS
from dynlab.registry import register
from dynlab.rnn_param import ParamRNN, ParamRNNCell
from dynlab.units.base import add_drive

KAPPA = sum(1.0 / ((2 * k + 1) * math.factorial(k) ** 2) for k in range(20))
r"""$\kappa = \int_0^1 I_0(2u)\,du$, the large-$N$, large-$T$ constant of $s - 1 = \kappa (T-1)/(\gamma_0^2 N)$ at $\alpha = 1$."""


class ResidualParamRNNCell(ParamRNNCell):
    r"""$h_t = h_{t-1} + T^{-\alpha}\phi(m_{in} W^{in} x_t + m_{rec} W^{rec} h_{t-1} + b + \xi_t)$."""

    m_time: float = eqx.field(static=True)

    def __init__(self, cell: ParamRNNCell, m_time: float):
        self.input_size, self.hidden, self.activation = cell.input_size, cell.hidden, cell.activation
        self.w_in, self.w_rec, self.b_in = cell.w_in, cell.w_rec, cell.b_in
        self.m_in, self.m_rec, self.m_time = cell.m_in, cell.m_rec, m_time

    def __call__(self, state, x, *, drive=None):
        a = self.m_in * (self.w_in @ x) + self.m_rec * (self.w_rec @ state)
        if self.b_in is not None:
            a = a + self.b_in
        h = state + self.m_time * ACTIVATIONS[self.activation](add_drive(a, drive))
        return h, h

    def recurrent_matrices(self):
        r"""The effective one-step matrix of the linearised recurrence, $I + T^{-\alpha} N^{-a} W^{rec}$."""
        return {"w_rec": jnp.eye(self.hidden, dtype=self.w_rec.dtype) + self.m_time * self.m_rec * self.w_rec}


@register("model", "rnn-residual", "RNN with a residual recurrence scaled by T^-alpha (a depth factor over time steps)")
class ResidualParamRNN(ParamRNN):
    r"""A [`ParamRNN`][dynlab.rnn_param.ParamRNN] whose recurrence is residual with the depth factor
    $T^{-\alpha}$ (module docstring).

    Args: those of [`ParamRNN`][dynlab.rnn_param.ParamRNN], and
        length: $T$, the sequence length the depth factor is computed for.
        alpha: the exponent $\alpha \ge 0$ (default 1, the only one with a finite limit in $T$).
    """

    length: int = eqx.field(static=True)
    alpha: float = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        length: int,
        alpha: float = 1.0,
        width: int = 128,
        param: str = "mf",
        gamma0: float = 1.0,
        gain: float = 1.0,
        activation: Literal["linear", "tanh", "relu"] = "tanh",
        bias: bool = False,
        key: PRNGKeyArray,
    ):
        require_positive("length", length)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
            raise ConfigError(f"alpha must be a finite number >= 0, got {alpha!r}")
        super().__init__(input_size, output_size, width=width, param=param, gamma0=gamma0, gain=gain,
                         activation=activation, bias=bias, key=key)
        self.length, self.alpha = length, float(alpha)
        self.unit = "rnn-residual"
        self.cells = (ResidualParamRNNCell(self.cells[0], float(length) ** (-float(alpha))),)
