r"""Teachers that are dynlab models: the chaotic rate network, the line attractor, and any
[`SequenceModel`][dynlab.models.SequenceModel] (the task-trained flip-flop network,
[`dynlab.teachers.flipflop`][]).

A [`NetworkTeacher`][] is a model and an input protocol; its latent state is the model's flat
state, its output the model's read-out. A student of the same unit and sizes with the teacher's
arrays copied *is* the teacher: same states, same outputs, same fingerprint.

- [`chaotic_rnn`][]: the rate network of Sompolinsky, Crisanti & Sommers (1988),
  ([`dynlab.units.rate`][]) with $N = 200$, $g = 1.5$, $\Delta t/\tau = 1/30$ by default, kicked by
  Gaussian pulses at the start of each trial. For $g > 1$ and $N \to \infty$ the
  autonomous network is chaotic (largest Lyapunov exponent $> 0$), and the Jacobian at its fixed
  point 0 is $(1-\alpha)I + \alpha W$.
- [`line_attractor`][]: a linear rate network with $W = u u^\top$, $\lVert u\rVert = 1$: at zero
  input every point $c\,u$ is a fixed point, and the Jacobian (everywhere) has the eigenvalue 1
  along $u$ and $1 - \alpha$ in the $N - 1$ other directions: exactly one marginal direction.
  Its read-out is $u^\top h$ (the integrated input) and its input Gaussian pulses at every step
  with probability ``rate``, which it integrates along $u$.
"""

from __future__ import annotations

import hashlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from dynlab.errors import require_positive
from dynlab.models import SequenceModel
from dynlab.teachers.base import Teacher
from dynlab.teachers.pulses import Pulses


def array_digest(tree) -> str:
    """SHA-256 (16 hex digits) of the arrays of ``tree`` (their bytes, shapes and dtypes)."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_array)):
        a = np.asarray(leaf)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


class NetworkTeacher(Teacher):
    """A dynlab ``model`` driven by ``protocol`` (a module ``(key, batch, length) -> inputs``
    with an ``identity()``) as a teacher."""

    model: SequenceModel
    protocol: eqx.Module

    def __init__(self, model: SequenceModel, protocol: eqx.Module):
        self.model, self.protocol = model, protocol
        self.input_size, self.output_size = model.input_size, model.output_size
        self.state_size = int(ravel_pytree(model.init_state())[0].shape[0])

    def initial_state(self):
        return ravel_pytree(self.model.init_state())[0]

    def transition(self, h, x):
        unravel = ravel_pytree(self.model.init_state())[1]
        state, y = self.model.step(unravel(h), x)
        return ravel_pytree(state)[0], y

    def inputs(self, key, batch_size, length):
        return self.protocol(key, batch_size, length)

    def identity(self) -> dict:
        return {"unit": self.model.unit, "arrays": array_digest(self.model), "protocol": self.protocol.identity()}


def chaotic_rnn(key, *, n: int = 200, g: float = 1.5, alpha: float = 1 / 30, outputs: int = 3,
                pulses: Pulses | None = None) -> NetworkTeacher:
    """The chaotic rate network (module docstring) drawn from ``key``; ``outputs`` random read-outs
    of its rates, kicked by ``pulses`` (default: one channel, a pulse of scale 1 at each of the
    first 30 steps)."""
    pulses = Pulses(1, scale=1.0, steps=30) if pulses is None else pulses
    model = SequenceModel("rate", pulses.channels, outputs, hidden=n, g=g, alpha=alpha, key=key)
    return NetworkTeacher(model, pulses)


def line_attractor(key, *, n: int = 16, alpha: float = 0.1, pulses: Pulses | None = None) -> NetworkTeacher:
    r"""The line attractor (module docstring) along a unit vector $u$ drawn from ``key``, read out
    as $u^\top h$; driven by ``pulses`` (default: one channel, a pulse of scale 1 with probability
    0.1 at every step)."""
    require_positive("n", n)
    pulses = Pulses(1, rate=0.1, scale=1.0) if pulses is None else pulses
    k_u, k_model = jax.random.split(key)
    u = jax.random.normal(k_u, (n,))
    u = u / jnp.linalg.norm(u)
    model = SequenceModel("rate", pulses.channels, 1, hidden=n, alpha=alpha, activation="linear", key=k_model)
    model = eqx.tree_at(lambda m: (m.cells[0].w, m.readout.weight, m.readout.bias), model,
                        (jnp.outer(u, u), u[None, :], jnp.zeros(1)))
    return NetworkTeacher(model, pulses)
