"""Sequence models: encoder -> stack of recurrent cells -> linear read-out.

``model(xs)`` runs a whole sequence with ``jax.lax.scan`` and returns the read-out at every step;
``model.trajectory(xs)`` also returns every layer's states, which is what analyses look at;
``model.step(state, x)`` is the one-step state map that analyses differentiate.
"""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray, PyTree

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import check_config, config_keys, constructor, get, name_of, register
from dynlab.units.base import Cell, Regularised, count_params


@register("model", "sequence", "encoder -> stack of recurrent cells -> linear read-out at every step")
class SequenceModel(eqx.Module):
    """A stack of ``layers`` cells of one unit kind between an optional encoder and a read-out.

    Args:
        unit: the unit's class (a registered [`Cell`][]), or its registered name (``dynlab list units``).
            Given the class, its keys ``unit_config`` are taken as checked (a run config is checked
            once, by [`dynlab.experiment.validate`][]); given a name, they are checked here.
        input_size: features per time step of the input.
        output_size: read-out width (classes, or regression targets).
        layers: number of stacked cells; layer ``l > 0`` reads layer ``l - 1``'s output.
        encoder_size: if given, a linear encoder maps inputs to this width before the first
            cell; by default (``None``) the first cell reads the inputs directly.
        readout_bias: whether the linear read-out has a bias. Networks judged on rescaled
            inputs (e.g. the SITH paper's time dilation of linear networks) need it off: the
            features scale with the input, a fixed bias does not.
        remat: checkpoint BPTT ([`checkpointed_scan`][]): store the state every
            ``sqrt(T)`` steps and recompute the rest in the backward pass, instead of storing every
            step's intermediates. ``None``: the unit's preference ([`Cell.remat_step`][]; on for
            ``aru``). Values and gradients are the same either way; only speed and memory differ.
        key: PRNG key.
        **unit_config: the unit's own config keys (``hidden``, ``n_g``, ...), used for every layer.

    The read-out is linear on the last layer's output at every step (tasks pick the steps they
    score). Input shape ``[T, input_size]`` for one sample; batch with ``jax.vmap``.
    """

    cells: tuple[Cell, ...]
    encoder: eqx.nn.Linear | None
    readout: eqx.nn.Linear
    unit: str = eqx.field(static=True)
    remat: bool = eqx.field(static=True)

    def __init__(
        self,
        unit: type[Cell] | str,
        input_size: int,
        output_size: int,
        *,
        layers: int = 1,
        encoder_size: int | None = None,
        readout_bias: bool = True,
        remat: bool | None = None,
        key: PRNGKeyArray,
        **unit_config: Any,
    ):
        for name, value in (("input_size", input_size), ("output_size", output_size), ("layers", layers)):
            require_positive(name, value)
        if encoder_size is not None:
            require_positive("encoder_size", encoder_size)
        if isinstance(unit, str):
            cell_cls = get("unit", unit).obj
            check_config("model", cell_cls, unit_config, extra=config_keys(SequenceModel))
        else:
            cell_cls, unit = unit, name_of("unit", unit)
        self.unit = unit
        self.remat = cell_cls.remat_step if remat is None else bool(remat)
        k_enc, k_out, *k_cells = jax.random.split(key, 2 + layers)
        self.encoder = None if encoder_size is None else eqx.nn.Linear(input_size, encoder_size, key=k_enc)
        width = input_size if encoder_size is None else encoder_size
        cells = []
        for k in k_cells:
            cells.append(constructor(cell_cls)(width, key=k, **unit_config))  # spellings -> values
            width = cells[-1].output_size
        self.cells = tuple(cells)
        self.readout = eqx.nn.Linear(width, output_size, use_bias=readout_bias, key=k_out)

    @property
    def input_size(self) -> int:
        return self.encoder.in_features if self.encoder is not None else self.cells[0].input_size

    @property
    def output_size(self) -> int:
        return self.readout.out_features

    def init_state(self) -> tuple[PyTree, ...]:
        """Every layer's initial state, as a tuple."""
        return tuple(c.init_state() for c in self.cells)

    def step(self, state: tuple, x: Array, drive: Array | None = None) -> tuple[tuple, Array]:
        """One time step of the whole stack: ``(states, x[input_size]) -> (states', y[output_size])``.

        ``drive`` (scalar, or per-neuron when all layers have the same width) is added to the
        pre-activation of every neuron of every layer.
        """
        h = x if self.encoder is None else self.encoder(x)
        new_state = []
        for cell, s in zip(self.cells, state):
            s, h = cell(s, h, drive=drive)
            new_state.append(s)
        return tuple(new_state), self.readout(h)

    def _run(self, xs: Array, drive: Array | None, state: tuple | None, keep_states: bool):
        if xs.ndim != 2 or xs.shape[1] != self.input_size:
            raise ConfigError(f"model expects inputs of shape [T, {self.input_size}], got {tuple(xs.shape)}")
        state = self.init_state() if state is None else state
        drives = jnp.zeros(xs.shape[0], xs.dtype) if drive is None else jnp.asarray(drive)

        # layer by layer (the stack is feed-forward between layers): each layer's input-only part
        # for all steps at once, outside its time loop, then the layer's loop (Cell.run_sequence)
        scan = checkpointed_scan if self.remat else plain_scan
        us = xs if self.encoder is None else jax.vmap(self.encoder)(xs)
        states = []
        for cell, s in zip(self.cells, state):
            us = cell.run_sequence(s, jax.vmap(cell.project_input)(us), drives, scan, keep_states)
            if keep_states:
                us, s = us
                states.append(s)
        ys = jax.vmap(self.readout)(us)
        return (ys, tuple(states)) if keep_states else ys

    def trajectory(self, xs: Array, drive: Array | None = None, state: tuple | None = None):
        """Run ``xs[T, input_size]``; return ``(ys[T, output_size], states)``.

        ``states`` is a tuple (one entry per layer) of that layer's state PyTree with a leading
        time axis ``T`` (the state *after* each step). ``drive`` is ``None``, or an array with a
        leading time axis ``T`` (``[T]`` or ``[T, hidden]``). ``state`` overrides the initial state.
        """
        return self._run(xs, drive, state, keep_states=True)

    def __call__(self, xs: Array, drive: Array | None = None, state: tuple | None = None) -> Array:
        """Read-out at every step, ``[T, output_size]``."""
        return self._run(xs, drive, state, keep_states=False)

    @property
    def penalised(self) -> bool:
        """Does any layer add a regulariser to the training loss (a
        [`Regularised`][dynlab.units.base.Regularised] cell whose ``penalised`` is true)? The interface
        through which the BPTT rule learns of regularisers."""
        return any(isinstance(c, Regularised) and c.penalised for c in self.cells)

    def penalty(self, xs: Array, states: tuple, state: tuple | None = None) -> Array:
        r"""The layers' regularisers on one sample's trajectory, $\sum_l$ ``cells[l].penalty(u^l, states[l], s0^l)``.

        ``states`` is [`trajectory`][]'s (each layer's states after every step), ``state`` the
        initial states (default [`init_state`][]). Layer $l$'s inputs $u^l_t$ are the (encoded)
        inputs for $l = 0$ and layer $l-1$'s outputs otherwise, recomputed from the stored states
        for all $t$ at once, $u^{l+1}_t = \mathrm{cell}_l(s^l_{t-1}, u^l_t)$ (no scan; no drive, as in
        training). Only cells whose ``penalised`` is true contribute ([`ElmNet.penalty`][dynlab.units.elm_net.ElmNet.penalty]).
        """
        us = xs if self.encoder is None else jax.vmap(self.encoder)(xs)
        total = jnp.zeros((), us.dtype)
        for cell, s, s0 in zip(self.cells, states, self.init_state() if state is None else state):
            if isinstance(cell, Regularised) and cell.penalised:
                total = total + cell.penalty(us, s, s0)
            previous = jax.tree_util.tree_map(lambda a0, a: jnp.concatenate([a0[None], a[:-1]]), s0, s)
            us = jax.vmap(lambda st, u, cell=cell: cell(st, u)[1])(previous, us)
        return total

    def param_count(self) -> dict[str, int]:
        counts = {"total": 0}
        for i, c in enumerate(self.cells):
            counts[f"layer{i}"] = c.param_count()["total"]
        for name, part in (("encoder", self.encoder), ("readout", self.readout)):
            if part is not None:
                counts[name] = count_params(part)
        counts["total"] = sum(v for k, v in counts.items() if k != "total")
        return counts


def plain_scan(body, model, carry, xs):
    """``lax.scan`` of ``body(model, carry, x)`` over the leading axis of ``xs``."""
    return jax.lax.scan(lambda c, x: body(model, c, x), carry, xs)


def checkpointed_scan(body, model, carry, xs):
    r"""The same as [`plain_scan`][], with the memory of BPTT cut from $T$ steps' intermediates to
    $\sqrt T$ states plus one segment's intermediates.

    The $T$ steps are split into segments of $k = \lceil\sqrt T\,\rceil$; reverse mode stores the
    carry only at segment boundaries and recomputes each segment's forward pass when its backward
    pass needs it (``equinox.filter_checkpoint`` around the inner scan): one extra forward pass,
    for memory $O(\sqrt T)$ instead of $O(T)$ (Griewank's checkpointing with one level). Steps left
    over after the last whole segment run plainly. Values and gradients equal [`plain_scan`][]'s.
    """
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    k = max(1, math.ceil(math.sqrt(length)))
    n = length // k
    head = jax.tree_util.tree_map(lambda a: a[: n * k].reshape(n, k, *a.shape[1:]), xs)

    @eqx.filter_checkpoint
    def segment(model, carry, seg):
        return plain_scan(body, model, carry, seg)

    carry, ys = jax.lax.scan(lambda c, seg: segment(model, c, seg), carry, head)
    ys = jax.tree_util.tree_map(lambda a: a.reshape(n * k, *a.shape[2:]), ys)
    if n * k < length:
        carry, rest = plain_scan(body, model, carry, jax.tree_util.tree_map(lambda a: a[n * k:], xs))
        ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, rest)
    return carry, ys
