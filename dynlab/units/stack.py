r"""A stack of layers with shared structure inside one Cell: the optional capability
"a forward pass that exposes per-layer states" (SITHCon and the SITH continuum's Nets 1–5).

Analyses that need each layer's output (temporal receptive windows, [`dynlab.analyses.trw`][])
check ``isinstance(cell, LayerStack)``; the concrete stacks live beside their families
([`dynlab.units.continuum`][], [`dynlab.units.sith`][]).
"""

from __future__ import annotations

import copy
import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from dynlab.errors import ConfigError, require_positive
from dynlab.units.base import Cell, width_multiple

ACTIVATIONS = ("none", "relu", "tanh")
HIDDEN_INPUTS = ("hold", "pulse")


def check_layers(layers, n_features, activation):
    require_positive("n_layers", layers)
    require_positive("n_features", n_features)
    if activation not in ACTIVATIONS:
        raise ConfigError(f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got {activation!r}")


def _uniform(key, shape, fan_in):
    return jax.random.uniform(key, shape, minval=-1.0, maxval=1.0) / math.sqrt(fan_in)


def _phi(a, activation):
    return a if activation == "none" else (jax.nn.relu(a) if activation == "relu" else jnp.tanh(a))


class LayerStack(Cell):
    """A stack of ``layers`` layers with shared weights inside one Cell.

    Subclasses define one layer: ``layer_state_shape()``, ``layer_step(h, u, drive, hold)``,
    ``layer_features(h)`` (``[n_f, n_tau]`` before convolution and max, or ``[n_f]`` when there
    is none) and ``layer_features_sequence(u[T, n_f], drive[T] | None, hold)`` (the fast path);
    ``hold`` says whether this layer takes its input as held over each step (``hidden_input``
    in the module doc; layers with trained input weights ignore it).

    ``hidden`` is the number of neurons per layer; the Cell's output (what a read-out sees) is
    the last layer's $o \\in \\mathbb{R}^{n_f}$. [`layer_outputs`][] gives every layer's output
    from a state; [`sequence`][] every layer's outputs over a whole input.
    """

    @classmethod
    def sized(cls, width: int) -> dict:
        """``n_features = width / 4`` features per layer, each with ``n_taus = 16`` time cells (the
        SITH-RNN sizing of the cross-unit scenarios; ``width`` a multiple of 4); stacks with a dense
        hidden layer override it."""
        return {"n_features": width_multiple(width, 4) // 4, "n_taus": 16}

    n_features: int = eqx.field(static=True)
    layers: int = eqx.field(static=True)
    activation: str = eqx.field(static=True)
    hidden_input: str = eqx.field(static=True)
    g: Array | None
    w_in: Array | None

    def _init_stack(self, input_size, n_features, layers, activation, hidden, key, hidden_input="pulse"):
        require_positive("input_size", input_size)
        check_layers(layers, n_features, activation)
        if hidden_input not in HIDDEN_INPUTS:
            raise ConfigError(f"hidden_input must be one of {', '.join(map(repr, HIDDEN_INPUTS))}, got {hidden_input!r}")
        self.hidden_input = hidden_input
        self.input_size, self.hidden = input_size, hidden
        self.n_features, self.layers, self.activation = n_features, layers, activation
        self.w_in = None if input_size == n_features else _uniform(key, (n_features, input_size), input_size)
        self.g = None

    def with_hidden(self, hidden: int):
        new = copy.copy(self)
        object.__setattr__(new, "hidden", hidden)
        return new

    @property
    def output_size(self) -> int:
        return self.n_features

    def init_state(self):
        return jnp.zeros((self.layers,) + tuple(self.layer_state_shape()))

    def _input(self, x):
        return x if self.w_in is None else x @ self.w_in.T

    def _hold(self, l: int) -> bool:
        """Whether layer ``l`` (0 = first) takes its input as held over each step (``hidden_input``)."""
        return l > 0 and self.hidden_input == "hold"

    def pool(self, feats: Array) -> Array:
        """Convolution (width 1 over τ) and max over τ: ``[..., n_f, n_tau] -> [..., n_f]``."""
        if self.g is None:
            return _phi(feats, self.activation)
        mixed = jnp.einsum("ab,...bi->...ai", self.g, feats)
        return _phi(jnp.max(mixed, axis=-1), self.activation)

    def __call__(self, state, x, *, drive=None):
        state, outs = self.step_all(state, x, drive=drive)
        return state, outs[-1]

    def step_all(self, state, x, *, drive=None):
        """One step returning every layer's output: ``(state', outs[layers, n_f])``."""
        u = self._input(x)
        new, outs = [], []
        for l in range(self.layers):
            h = self.layer_step(state[l], u, drive, hold=self._hold(l))
            u = self.pool(self.layer_features(h))
            new.append(h)
            outs.append(u)
        return jnp.stack(new), jnp.stack(outs)

    def scan_layers(self, xs: Array, drive: Array | None = None) -> Array:
        """Every layer's outputs ``[layers, T, n_f]`` by scanning [`step_all`][] over time.

        The efficient form for many short sequences (``vmap`` over the batch); [`sequence`][]
        is the one for long single sequences.
        """
        d = jnp.zeros(xs.shape[:1], xs.dtype) if drive is None else jnp.broadcast_to(jnp.asarray(drive, xs.dtype), xs.shape[:1])

        def body(s, inp):
            s, o = self.step_all(s, inp[0], drive=inp[1])
            return s, o

        return jnp.moveaxis(jax.lax.scan(body, self.init_state(), (xs, d))[1], 0, 1)

    def layer_outputs(self, state) -> Array:
        """Every layer's output ``[layers, n_f]`` given the state after a step."""
        return jnp.stack([self.pool(self.layer_features(state[l])) for l in range(self.layers)])

    def sequence(self, xs: Array, drive: Array | None = None) -> Array:
        """Every layer's outputs over a whole input ``xs[T, input_size]`` -> ``[layers, T, n_f]``.

        Same numbers as scanning [`__call__`][] (tested), computed layer by layer with the
        long-sequence fast path (chunked diagonal scans / FFT convolution). ``drive``: ``None``
        or ``[T]``. Because every feature's temporal subspace has the same linear dynamics, the
        feature mixing $g$ commutes with them and is applied to the layer's *input* (a
        ``[T, n_f]`` array) rather than to the ``[T, n_f, n_tau]`` read-out; the drive then
        enters feature $a$ as $\\xi_t \\sum_b g_{ab}$.
        """
        return jnp.stack([o for _, o in self._layer_sequences(xs, drive)])

    def pooled_sequence(self, xs: Array, drive: Array | None = None) -> tuple[Array, Array]:
        """What each layer's max over τ sees, $\\sum_b g_{ab} (h L^\\top)_{b,i}$, over a whole input
        (``[layers, T, n_f, n_tau]``), and every layer's output (``[layers, T, n_f]``, as
        [`sequence`][]); units with a convolution and max over τ only."""
        if self.g is None:
            raise ConfigError(f"{type(self).__name__} has no convolution and max over tau")
        feats, outs = zip(*self._layer_sequences(xs, drive))
        return jnp.stack(feats), jnp.stack(outs)

    def _layer_sequences(self, xs, drive):
        """Per layer ``(features before pooling, output)`` over a whole input (see [`sequence`][])."""
        u = self._input(xs)
        d = None if drive is None else jnp.broadcast_to(jnp.asarray(drive, xs.dtype), xs.shape[:1])
        for l in range(self.layers):
            if self.g is None:
                feats = self.layer_features_sequence(u, d, hold=self._hold(l))
                u = self.pool(feats)
            else:
                dd = None if d is None else d[:, None] * jnp.sum(self.g, axis=1)[None, :]
                feats = self.layer_features_sequence(u @ self.g.T, dd, hold=self._hold(l))
                u = _phi(jnp.max(feats, axis=-1), self.activation)
            yield feats, u

    def impulse_response(self, steps: int, feature: int = 0) -> tuple[Array, Array]:
        """First layer's response to a unit pulse into ``feature`` at t = 0 (no pooling).

        Returns ``(h[steps, n_units], Lh[steps, n_units])``: the hidden state and the read-out
        before convolution/max for that feature's temporal subspace (Net 1: the whole $h$ and $Lh$).
        """
        u = jnp.zeros((steps, self.n_features)).at[0, feature].set(1.0)
        h = self.layer_hidden_sequence(u)
        if h.ndim == 3:
            h = h[:, feature]
        return h, self.readout_when(h)

    def param_count(self) -> dict[str, int]:
        counts = super().param_count()
        for name in ("g", "w_in"):
            v = getattr(self, name)
            if v is not None:
                counts[name] = int(v.size)
        return counts
