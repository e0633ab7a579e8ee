r"""Regularisers of a layer's trajectory: values passed to a [`Regularised`][dynlab.units.base.Regularised]
cell (``ElmNet(regularisers=(MlpL2(1e-5), ActivityL1(1e-3)))``).

A regulariser is a small value, as an optax transformation is: a strength $\lambda \ge 0$ and an
unweighted term $R$ of one sample's trajectory; it contributes $\lambda R$ to the layer's
[`penalty`][dynlab.units.base.Regularised.penalty], which the BPTT rule adds to the training loss
through [`penalty`][dynlab.models.SequenceModel.penalty]. A new regulariser is one subclass with one
method, [`Regulariser.term`][].

The two of the ELM scaling paper (App. A.2), both with "per-neuron scaling" (summed over neurons):

$$ R_{\text{mlp\_l2}} = \sum_{i=1}^{N} \sum_{k=1}^{d_m} \Big(\frac1T \sum_t |o_{t,ik}|\Big)^2, \qquad
   R_{\text{activity\_l1}} = \sum_{i=1}^{N} \frac1T \sum_t |a_{t,i}| , $$

$o_t$ the neurons' MLP outputs (the tanh's argument), $a_t$ their activity; strengths 1e-5 and 1e-3,
the paper's Pareto-search values. In TOML and on the command line they are spelled
``mlp_l2 = ...`` and ``activity_l1 = ...``
([`ElmNet.from_config`][dynlab.units.elm_net.ElmNet.from_config]).
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from dynlab.errors import ConfigError

MLP_L2 = 1e-5
"""The paper's strength of [`MlpL2`][]."""
ACTIVITY_L1 = 1e-3
"""The paper's strength of [`ActivityL1`][]."""


class Regulariser(eqx.Module):
    r"""A penalty $\lambda\, R(\text{trajectory})$ on one sample's trajectory through one layer.

    Args:
        strength: $\lambda$, a finite number $\ge 0$; 0 keeps the term but weighs it by nothing
            (a cell is ``penalised`` only when some strength is positive).

    Subclasses implement [`term`][]; ``name`` (a class attribute) names the strength in error
    messages (the config key it is spelled as, where there is one).
    """

    strength: float = eqx.field(static=True)
    name: ClassVar[str] = "strength"

    def __init__(self, strength: float):
        if isinstance(strength, bool) or not isinstance(strength, (int, float)) or not math.isfinite(strength) \
                or strength < 0:
            raise ConfigError(f"{self.name} must be a number >= 0, got {strength!r}")
        self.strength = float(strength)

    @abc.abstractmethod
    def term(self, cell, us: Array, states: PyTree, state0: PyTree) -> Array:
        r"""The unweighted $R$ (a scalar) of one sample: the ``cell``, its inputs ``us[T, input_size]``,
        its states after every step (leading axis $T$) and its state before the first."""

    def __call__(self, cell, us: Array, states: PyTree, state0: PyTree) -> Array:
        r"""$\lambda R$: what the regulariser adds to the loss."""
        return self.strength * self.term(cell, us, states, state0)


class MlpL2(Regulariser):
    r"""Per-neuron L2 of the time-averaged MLP output magnitude,
    $R = \sum_{i,k} \big(\frac1T \sum_t |o_{t,ik}|\big)^2$ (App. A.2; default strength 1e-5).

    The cell provides $o_t$ for all $t$ (``cell.mlp_outputs(us, states, state0)``, ``[T, N, d_m]``:
    [`mlp_outputs`][dynlab.units.elm_net.ElmNet.mlp_outputs]).
    """

    name: ClassVar[str] = "mlp_l2"

    def __init__(self, strength: float = MLP_L2):
        super().__init__(strength)

    def term(self, cell, us: Array, states: PyTree, state0: PyTree) -> Array:
        o = cell.mlp_outputs(us, states, state0)
        return jnp.sum(jnp.square(jnp.mean(jnp.abs(o), axis=0)))


class ActivityL1(Regulariser):
    r"""Population L1 of the time-averaged activity, $R = \sum_i \frac1T \sum_t |a_{t,i}|$
    (App. A.2; default strength 1e-3). Reads the states' activity ``states.h`` (``[T, N]``)."""

    name: ClassVar[str] = "activity_l1"

    def __init__(self, strength: float = ACTIVITY_L1):
        super().__init__(strength)

    def term(self, cell, us: Array, states: PyTree, state0: PyTree) -> Array:
        return jnp.sum(jnp.mean(jnp.abs(states.h), axis=0))
