"""The Cell contract: one recurrent layer, one sample, one time step.

A unit is an :class:`equinox.Module` like :class:`equinox.nn.GRUCell`: batch via ``jax.vmap``,
time via ``jax.lax.scan``. Every unit supports an additive ``drive`` (a current added to each
neuron's pre-activation, used by perturbation protocols and driven Lyapunov exponents). The map
``state -> next state`` at fixed input is pure and jit-able, so analyses can ``jax.linearize`` it.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree


class Cell(eqx.Module):
    """Base class of all units. Subclasses set ``input_size`` and ``hidden`` (the layer width)."""

    input_size: int = eqx.field(static=True)
    hidden: int = eqx.field(static=True)

    remat_step: ClassVar[bool] = False
    """Whether BPTT through this unit should be checkpointed (``SequenceModel``'s ``remat``
    default; :func:`dynlab.models.checkpointed_scan`). Worth it when a step's intermediates are
    much larger than its state, as the ARU's ``[hidden, n_g]`` controller arrays: storing all of
    them costs more time in memory traffic than recomputing them."""

    @property
    def output_size(self) -> int:
        """Width of the layer's output (what the next layer or the read-out sees)."""
        return self.hidden

    def init_state(self) -> PyTree:
        """The state at t = 0 (zeros unless the unit says otherwise)."""
        return jnp.zeros(self.hidden)

    @abc.abstractmethod
    def __call__(self, state: PyTree, x: Array, *, drive: Array | None = None) -> tuple[PyTree, Array]:
        """One step: ``(state, x[input_size]) -> (next state, output[hidden])``."""

    def project_input(self, x: Array) -> Array:
        """The part of a step that depends on the input ``x_t`` alone (default: ``x`` itself).

        :class:`~dynlab.models.SequenceModel` evaluates it for all time steps of the first layer
        at once, before its time loop (one large matrix product instead of one small one per step,
        for units that project their input, e.g. the ELM neuron's synaptic routing), and then
        calls :meth:`step_projected`. ``cell(state, x)`` must equal
        ``cell.step_projected(state, cell.project_input(x))``.
        """
        return x

    def step_projected(self, state: PyTree, u: Array, *, drive: Array | None = None) -> tuple[PyTree, Array]:
        """One step from the projected input ``u = project_input(x)`` (default: ``__call__``)."""
        return self(state, u, drive=drive)

    def recurrent_matrices(self) -> dict[str, Array]:
        """The unit's square recurrent weight matrices by name (a vector means a diagonal one).

        Spectral analyses plot their eigenvalues; units without any return ``{}``.
        """
        return {}

    def param_count(self) -> dict[str, int]:
        """Trainable parameter counts; always has ``"total"``."""
        return {"total": count_params(self)}


def count_params(tree: PyTree) -> int:
    """Number of floating-point array elements in ``tree`` (also for ``jax.eval_shape`` outputs)."""

    def floating(x) -> bool:
        return isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) and jnp.issubdtype(x.dtype, jnp.inexact)

    return int(sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(tree) if floating(x)))


def add_drive(a: Array, drive: Array | None) -> Array:
    """``a + drive``, with ``drive`` a scalar or per-neuron vector; ``None`` adds nothing."""
    return a if drive is None else a + drive
