"""The Cell contract: one recurrent layer, one sample, one time step.

A unit is an `equinox.Module` like `equinox.nn.GRUCell`: batch via ``jax.vmap``,
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


def width_multiple(width, multiple: int) -> int:
    """``width`` if it is a positive multiple of ``multiple``; otherwise a one-line
    [`ConfigError`][dynlab.errors.ConfigError] saying what it must be and the nearest widths."""
    from dynlab.errors import ConfigError

    if isinstance(width, bool) or not isinstance(width, int) or width < multiple or width % multiple:
        near = ""
        if isinstance(width, int) and not isinstance(width, bool) and width > 0:
            below, above = width // multiple * multiple, (width // multiple + 1) * multiple
            near = f" (nearest: {', '.join(str(w) for w in (below, above) if w >= multiple)})"
        what = "a positive integer" if multiple == 1 else f"a positive multiple of {multiple}"
        raise ConfigError(f"model.width must be {what}, got {width!r}{near}")
    return width


class Cell(eqx.Module):
    """Base class of all units. Subclasses set ``input_size`` and ``hidden`` (the layer width)."""

    input_size: int = eqx.field(static=True)
    hidden: int = eqx.field(static=True)

    remat_step: ClassVar[bool] = False
    """Whether BPTT through this unit should be checkpointed (``SequenceModel``'s ``remat``
    default; [`dynlab.models.checkpointed_scan`][]). Worth it when a step's intermediates are
    much larger than its state, as the ARU's ``[hidden, n_g]`` controller arrays: storing all of
    them costs more time in memory traffic than recomputing them."""

    @classmethod
    def sized(cls, width: int) -> dict:
        """The unit's config keys that build it at ``width``: the number of neurons that carry the
        recurrent computation (what cross-unit comparisons hold equal). Default ``hidden = width``;
        units whose width is made of other keys override it and document the mapping. A width the
        unit cannot take exactly is a [`ConfigError`][dynlab.errors.ConfigError] naming the nearest
        ones ([`width_multiple`][]), never rounded silently. ``model.width`` in a config or a
        scenario is expanded through it ([`dynlab.experiment.validate`][])."""
        return {"hidden": width_multiple(width, 1)}

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

        [`SequenceModel`][dynlab.models.SequenceModel] evaluates it for all time steps of a layer at
        once, before the layer's time loop (one large matrix product instead of one small one per step,
        for units that project their input, e.g. the ELM neuron's synaptic routing), and then
        calls [`step_projected`][]. ``cell(state, x)`` must equal
        ``cell.step_projected(state, cell.project_input(x))``.
        """
        return x

    def step_projected(self, state: PyTree, u: Array, *, drive: Array | None = None) -> tuple[PyTree, Array]:
        """One step from the projected input ``u = project_input(x)`` (default: ``__call__``)."""
        return self(state, u, drive=drive)

    def run_sequence(self, state: PyTree, us: Array, drives: Array, scan, keep_states: bool):
        """The layer over a whole sequence: from the projected inputs ``us`` ([`project_input`][] of
        every step, leading axis ``T``) and the per-step ``drives``, the outputs ``[T, output_size]``
        and, with ``keep_states``, ``(outputs, states after every step)``.

        ``scan(body, cell, carry, xs)`` is the time loop to use ([`dynlab.models.plain_scan`][] or
        the checkpointed one). Default: [`step_projected`][] in that loop. A unit may override it
        to take work that does not feed back out of the loop ([`dynlab.units.elm_net.ElmNet.run_sequence`][]);
        the result must equal stepping.
        """
        def body(cell, s, inp):
            s, y = cell.step_projected(s, inp[0], drive=inp[1])
            return s, ((y, s) if keep_states else y)

        return scan(body, self, state, (us, drives))[1]

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


class Regularised(Cell):
    """Optional capability: a unit that adds a regulariser to its training loss.

    A model built of such cells reports [`dynlab.models.SequenceModel.penalised`][] and
    [`penalty`][dynlab.models.SequenceModel.penalty]; the BPTT rule adds the penalty to its objective
    (checked with ``isinstance``, never by probing attributes).
    """

    @property
    @abc.abstractmethod
    def penalised(self) -> bool:
        """Whether training adds [`penalty`][] to the loss (e.g. a non-zero strength)."""

    @abc.abstractmethod
    def penalty(self, us: Array, states: PyTree, state0: PyTree | None = None) -> Array:
        """The regulariser (a scalar) of one sample: the layer's inputs ``us[T, input_size]``,
        its states after every step, and its initial state."""


class TauExtensible(Cell):
    """Optional capability: a memory over a grid of time constants that can be rescaled after
    training (SITH-RNN's frozen geometric decays, SITHCon's SITH memory), so that a network
    trained at one time scale is evaluated zero-shot at another ([`dynlab.analyses.trw`][])."""

    @property
    @abc.abstractmethod
    def taus(self):
        """The time constants of the memory's cells (steps)."""

    @property
    def tau_extensible(self) -> bool:
        """Whether this instance's grid can be rescaled (a subclass may depend on its config)."""
        return True

    @abc.abstractmethod
    def extend_taus(self, factor: float, how: str = "extend") -> "TauExtensible":
        """The same network with its τ grid extended at the slow end by ``factor`` (``"extend"``)
        or scaled by it (``"shift"``)."""
