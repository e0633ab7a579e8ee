r"""Recurrent networks under width parameterisations: the abcd family of [`dynlab.ffmodels`][] in time.

A one-layer RNN of width $N$ reading $x_t \in \mathbb R^{D}$ and reading out $f_t \in \mathbb R^{d_{out}}$
at every step, with $h_0 = 0$:

$$ a_t = \frac{1}{N^{a_1}\sqrt D} W^{in} x_t + \frac{1}{N^{a}} W^{rec} h_{t-1} + b + \xi_t, \qquad
   h_t = \phi(a_t), \qquad
   f_t = \frac{1}{\gamma N^{a}} W^{out} h_t, $$

with $W^{in}_{ij} \sim \mathcal N(0, N^{-b_1})$, $W^{rec}_{ij} \sim \mathcal N(0, g^2 N^{-b})$,
$W^{out}_{ij} \sim \mathcal N(0, N^{-b})$, $\gamma = \gamma_0 N^{d}$, the optional ``drive``
$\xi_t$ and the optional bias $b$ (unscaled, zero at initialisation; off by default, as in the
theory). The exponents are a [`Parameterisation`][dynlab.ffmodels.Parameterisation] (presets ``sp``, ``ntk``,
``mf``, ``mup`` of the paper's Table 2): the input matrix is the first layer ($a_1, b_1$), the
recurrent matrix takes the place of the hidden layers ($a, b$; one matrix applied at every step)
and the read-out is the output layer ($a, b, d$). Unrolled over $T$ steps the network is a
depth-$T$ network with shared hidden weights and an input at every layer, so **time plays the
role of depth** — without skips, so the depth exponent $\alpha$ is unused and no multiplier
depends on $T$.

Under the stable feature-learning family (Eq. 15; ``mf``, ``mup``) the same counting as for the
MLP gives, at initialisation, pre-activations $a_{t,i} = \Theta_N(1)$ (the input term because
$2a_1 + b_1 = 0$, the recurrent term because $2a + b = 1$) and read-outs $f_t = \Theta(N^{-1/2})$
($d = \tfrac12$); the learning rates of [`dynlab.ffmodels.learning_rates`][] (GD $\eta_0\gamma^2N^{-c}$,
Adam per layer) apply unchanged, the recurrent matrix taking the hidden layers' rate.

The recurrent gain $g$ (the paper is silent; the classical random-network parameter of
Sompolinsky et al. 1988) sets the spectral radius of the effective recurrent matrix
$N^{-a} W^{rec}$ to $g$ as $N \to \infty$ (circular law; at every width its mean-square gain is
exactly $g^2$ for the parameterisations with $2a + b = 1$). The default $g = 1$ is the marginal
case: a linear network then neither forgets nor amplifies on average, and for read-outs at the
last step the PC rescaling grows as $s - 1 \approx (T-1)/(\gamma_0^2 N)$ — the recurrent analogue
of $L/N$ ([`dynlab.rules.pc_time`][]). This is the leading order: at finite width the
recurrent matrix's powers grow faster than $g^k$ (measured at initialisation: $s - 1$ is
1.06–1.15 times $(T-1)/N$ at $N = 256$, $T \le 32$), and a narrow marginal network explodes over
long sequences (its largest eigenvalue exceeds 1: at $N = 16$, $T = 32$ the adding task's
initial loss is $\sim 10^4$) — the recurrent counterpart of deep MLPs' fragile forward pass.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.ffmodels import ACTIVATIONS, Parameterisation, parameterisation
from dynlab.models import SequenceModel
from dynlab.registry import register
from dynlab.units.base import Cell, add_drive


class ParamRNNCell(Cell):
    r"""The recurrent layer: $h_t = \phi(m_{in} W^{in} x_t + m_{rec} W^{rec} h_{t-1} + b + \xi_t)$."""

    w_in: Array
    w_rec: Array
    b_in: Array | None
    m_in: float = eqx.field(static=True)
    m_rec: float = eqx.field(static=True)
    activation: str = eqx.field(static=True)

    def __init__(self, input_size: int, width: int, p: Parameterisation, gain: float, activation: str, bias: bool,
                 key: PRNGKeyArray):
        self.input_size, self.hidden, self.activation = input_size, width, activation
        k_in, k_rec = jax.random.split(key)
        n = float(width)
        self.w_in = jax.random.normal(k_in, (width, input_size)) * n ** (-p.b1 / 2)
        self.w_rec = jax.random.normal(k_rec, (width, width)) * (gain * n ** (-p.b / 2))
        self.b_in = jnp.zeros(width) if bias else None
        self.m_in = n ** (-p.a1) / math.sqrt(input_size)
        self.m_rec = n ** (-p.a)

    def __call__(self, state, x, *, drive=None):
        a = self.m_in * (self.w_in @ x) + self.m_rec * (self.w_rec @ state)
        if self.b_in is not None:
            a = a + self.b_in
        h = ACTIVATIONS[self.activation](add_drive(a, drive))
        return h, h

    def recurrent_matrices(self) -> dict[str, Array]:
        """The effective recurrent matrix $N^{-a} W^{rec}$."""
        return {"w_rec": self.m_rec * self.w_rec}


class ParamReadout(eqx.Module):
    r"""The read-out $f = \frac{1}{\gamma N^a} W^{out} h\ [+ b^{out}]$."""

    w_out: Array
    b_out: Array | None
    m_out: float = eqx.field(static=True)

    def __init__(self, width: int, output_size: int, p: Parameterisation, bias: bool, key: PRNGKeyArray):
        n = float(width)
        self.w_out = jax.random.normal(key, (output_size, width)) * n ** (-p.b / 2)
        self.b_out = jnp.zeros(output_size) if bias else None
        self.m_out = n ** (-p.a) / p.gamma(width)

    @property
    def in_features(self) -> int:
        return self.w_out.shape[1]

    @property
    def out_features(self) -> int:
        return self.w_out.shape[0]

    def __call__(self, h: Array) -> Array:
        f = self.m_out * (self.w_out @ h)
        return f if self.b_out is None else f + self.b_out


@register("model", "rnn-param", "one-layer RNN under an abcd width parameterisation (sp, ntk, mf, mup) with gamma0")
class ParamRNN(SequenceModel):
    r"""A one-layer RNN of width ``width`` under a width parameterisation (module docstring).

    Args:
        input_size: $D$.
        output_size: $d_{out}$.
        width: $N$.
        param: a preset name (``sp``, ``ntk``, ``mf``, ``mup``) or a
            [`Parameterisation`][dynlab.ffmodels.Parameterisation].
        gamma0: $\gamma_0$ (default 1).
        gain: recurrent gain $g > 0$ (default 1, the marginal network).
        activation: ``tanh`` (the vanilla ``rnn`` unit's recurrence) or ``relu``, or ``linear``
            (the linear RNN).
        bias: unscaled, zero-initialised biases on the pre-activation and the read-out.
        key: PRNG key.

    A [`SequenceModel`][dynlab.models.SequenceModel] (one cell, no encoder), so ``model(xs)``,
    ``model.trajectory(xs)`` and ``model.step(state, x)`` behave as for every unit; its state is
    the 1-tuple ``(h,)``.
    """

    param: Parameterisation = eqx.field(static=True)
    width: int = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        width: int = 128,
        param: str | Parameterisation = "mf",
        gamma0: float = 1.0,
        gain: float = 1.0,
        activation: Literal["linear", "tanh", "relu"] = "tanh",
        bias: bool = False,
        key: PRNGKeyArray,
    ):
        for name, value in (("input_size", input_size), ("output_size", output_size), ("width", width)):
            require_positive(name, value)
        require_positive("gain", gain, integer=False)
        if activation not in ACTIVATIONS:
            raise ConfigError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        p = parameterisation(param, gamma0=gamma0)
        k_cell, k_out = jax.random.split(key)
        self.param, self.width, self.unit, self.encoder, self.remat = p, width, "rnn-param", None, False
        self.cells = (ParamRNNCell(input_size, width, p, float(gain), activation, bias, k_cell),)
        self.readout = ParamReadout(width, output_size, p, bias, k_out)

    @property
    def is_linear(self) -> bool:
        """Is the state map affine in the state and the read-out linear (closed-form PC applies)?"""
        return self.cells[0].activation == "linear"
