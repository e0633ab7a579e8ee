r"""Gated baselines: GRU and LSTM, as `equinox.nn.GRUCell` / `equinox.nn.LSTMCell`.

The gate equations are Equinox's own (PyTorch's convention, except that Equinox's GRU has one
bias vector for the three input gates plus ``bias_n`` inside the reset product, so it has $2H$
fewer parameters than ``torch.nn.GRU``'s $6H$ biases, which enter the reset and update gates
only as sums: the same function, [`dynlab.imports.torch_rnn`][]). The ``drive`` $\xi$ is added to the
pre-activation of the *candidate* — the GRU's new-state candidate
$n = \tanh(W_{in} x + b_{in} + \xi + r \odot (W_{hn} h + b_{hn}))$, the LSTM's cell input
$g = \tanh(W_{ig} x + W_{hg} h + b_g + \xi)$ — i.e. the current that drives each neuron, not its
gates. It is implemented by shifting that bias segment, so the Equinox cell itself runs.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import require_positive
from dynlab.registry import register
from dynlab.units.base import Cell


def _shift_bias(bias: Array, drive: Array | None, segment: int, hidden: int) -> Array:
    """``bias`` with ``drive`` (scalar or per-neuron) added to its ``segment``-th block of ``hidden``."""
    if drive is None:
        return bias
    shift = jnp.broadcast_to(jnp.asarray(drive, bias.dtype), (hidden,))
    return bias.at[segment * hidden : (segment + 1) * hidden].add(shift)


@register("unit", "gru", "gated recurrent unit (equinox.nn.GRUCell); drive enters the candidate")
class GRU(Cell):
    """GRU layer of ``hidden`` units (Cho et al. 2014), Equinox's initialisation."""

    cell: eqx.nn.GRUCell

    def __init__(self, input_size: int, *, hidden: int = 64, key: PRNGKeyArray):
        require_positive("input_size", input_size)
        require_positive("hidden", hidden)
        self.input_size, self.hidden = input_size, hidden
        self.cell = eqx.nn.GRUCell(input_size, hidden, key=key)

    def __call__(self, state, x, *, drive=None):
        cell = self.cell
        if drive is not None:
            cell = eqx.tree_at(lambda c: c.bias, cell, _shift_bias(cell.bias, drive, 2, self.hidden))
        h = cell(x, state)
        return h, h

    def recurrent_matrices(self) -> dict[str, Array]:
        H = self.hidden
        w = self.cell.weight_hh
        return {"w_hr": w[:H], "w_hz": w[H : 2 * H], "w_hn": w[2 * H :]}


@register("unit", "lstm", "long short-term memory (equinox.nn.LSTMCell); drive enters the cell input")
class LSTM(Cell):
    """LSTM layer of ``hidden`` units (Hochreiter & Schmidhuber 1997); state ``(h, c)``."""

    cell: eqx.nn.LSTMCell

    def __init__(self, input_size: int, *, hidden: int = 64, key: PRNGKeyArray):
        require_positive("input_size", input_size)
        require_positive("hidden", hidden)
        self.input_size, self.hidden = input_size, hidden
        self.cell = eqx.nn.LSTMCell(input_size, hidden, key=key)

    def init_state(self):
        return (jnp.zeros(self.hidden), jnp.zeros(self.hidden))

    def __call__(self, state, x, *, drive=None):
        cell = self.cell
        if drive is not None:
            cell = eqx.tree_at(lambda c: c.bias, cell, _shift_bias(cell.bias, drive, 2, self.hidden))
        h, c = cell(x, state)
        return (h, c), h

    def recurrent_matrices(self) -> dict[str, Array]:
        H = self.hidden
        w = self.cell.weight_hh
        return {name: w[i * H : (i + 1) * H] for i, name in enumerate(("w_hi", "w_hf", "w_hg", "w_ho"))}
