r"""A general block-diagonal recurrent unit (an ordinary one-layer Cell).

$$ h_t = \phi\big(W_{hh} h_{t-1} + W_{xh} x_t + b + \xi_t\big), \qquad
   W_{hh} = \operatorname{blockdiag}(B_1, \dots, B_{n_b}) $$

``n_blocks`` blocks of ``block_size`` neurons (``hidden = n_blocks * block_size``); with
``shared_blocks`` all blocks are one trainable $B$ ($W_{hh} = 1_{n_b} \otimes B$, the What × When
prior of Sarkar & Howard). $\phi$ is ``tanh`` (default), ``relu`` or ``none`` (linear).
Initialisation: blocks $U(\pm 1/\sqrt{\text{block\_size}})$, $W_{xh}$ $U(\pm 1/\sqrt{\text{input\_size}})$, $b = 0$.
The recurrence is applied block by block (``einsum`` over ``[n_b, b, b]``), never as the dense matrix.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.units.base import Cell, add_drive, width_multiple


@register("unit", "blockdiag", "block-diagonal RNN: n_blocks dense blocks (optionally shared), tanh/relu/none")
class BlockDiagCell(Cell):
    """Block-diagonal RNN layer. Config: ``n_blocks``, ``block_size``, ``shared_blocks``, ``activation``."""

    @classmethod
    def sized(cls, width: int) -> dict:
        """4 dense blocks of ``width / 4`` neurons (``width`` a multiple of 4)."""
        return {"n_blocks": 4, "block_size": width_multiple(width, 4) // 4}

    blocks: jax.Array
    w_xh: jax.Array
    b_h: jax.Array
    n_blocks: int = eqx.field(static=True)
    block_size: int = eqx.field(static=True)
    activation: str = eqx.field(static=True)

    def __init__(self, input_size: int, *, n_blocks: int = 8, block_size: int = 8, shared_blocks: bool = False,
                 activation: Literal["tanh", "relu", "none"] = "tanh", key: PRNGKeyArray):
        require_positive("input_size", input_size)
        require_positive("n_blocks", n_blocks)
        require_positive("block_size", block_size)
        if activation not in ("tanh", "relu", "none"):
            raise ConfigError(f"activation must be 'tanh', 'relu' or 'none', got {activation!r}")
        self.input_size, self.hidden = input_size, n_blocks * block_size
        self.n_blocks, self.block_size, self.activation = n_blocks, block_size, activation
        k_b, k_x = jax.random.split(key)
        shape = (1 if shared_blocks else n_blocks, block_size, block_size)
        self.blocks = jax.random.uniform(k_b, shape, minval=-1, maxval=1) / math.sqrt(block_size)
        self.w_xh = jax.random.uniform(k_x, (self.hidden, input_size), minval=-1, maxval=1) / math.sqrt(input_size)
        self.b_h = jnp.zeros(self.hidden)

    @property
    def shared_blocks(self) -> bool:
        return self.blocks.shape[0] == 1 and self.n_blocks > 1

    def full_matrix(self) -> jax.Array:
        """The dense ``[hidden, hidden]`` block-diagonal matrix (for spectra; not used in the forward)."""
        blocks = jnp.broadcast_to(self.blocks, (self.n_blocks, self.block_size, self.block_size))
        return jax.scipy.linalg.block_diag(*blocks)

    def recurrent_matrices(self):
        return {"w_hh": self.full_matrix()}

    def __call__(self, state, x, *, drive=None):
        h = state.reshape(self.n_blocks, self.block_size)
        blocks = jnp.broadcast_to(self.blocks, (self.n_blocks, self.block_size, self.block_size))
        rec = jnp.einsum("kij,kj->ki", blocks, h).reshape(-1)
        a = add_drive(rec + self.w_xh @ x + self.b_h, drive)
        h = a if self.activation == "none" else (jnp.tanh(a) if self.activation == "tanh" else jax.nn.relu(a))
        return h, h
