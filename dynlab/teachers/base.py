r"""The Teacher contract: a dynamical system with a known fingerprint whose outputs, or noisy
observations of its latents, are a student's targets.

A teacher is a driven map on a flat latent state $h \in \mathbb{R}^N$,

$$ h_{t+1} = F(h_t, x_t), \qquad y_t = G(h_{t+1}), $$

started from a fixed [`initial_state`][Teacher.initial_state] at every trial and driven by inputs
$x_t$ that its input protocol draws from a key ([`Pulses`][dynlab.teachers.pulses.Pulses] for
the autonomous teachers: a kick that sets the trial's initial condition). The student sees the
same inputs, so the targets are a function of them: a student that *is* the teacher (weights
copied, [`dynlab.teachers.network`][]) reproduces them exactly. The map ``step`` is pure and
jit-able, so the analyses (fixed points, Lyapunov spectra) run on it as on any map, which is how
a teacher's ground truth is computed ([`dynlab.analyses.recovery.truth`][]).
"""

from __future__ import annotations

import abc
import hashlib
import json

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, PRNGKeyArray


class Teacher(eqx.Module):
    """Base class of teachers; subclasses set the sizes and implement the abstract methods."""

    input_size: int = eqx.field(static=True)
    state_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)

    @abc.abstractmethod
    def initial_state(self) -> Array:
        """$h_0$ ``[state_size]``, the state every trial starts from."""

    @abc.abstractmethod
    def transition(self, h: Array, x: Array) -> tuple[Array, Array]:
        """$(F(h, x), G(F(h, x)))$: the next state and what the teacher reports of it
        (``[output_size]``); pure, jit-able, differentiable in ``h``."""

    def step(self, h: Array, x: Array) -> Array:
        """$F(h, x)$: one step of the latent map, what the analyses differentiate."""
        return self.transition(h, x)[0]

    @abc.abstractmethod
    def inputs(self, key: PRNGKeyArray, batch_size: int, length: int) -> Array:
        """The inputs ``[batch_size, length, input_size]`` of ``batch_size`` trials, from ``key``."""

    @abc.abstractmethod
    def identity(self) -> dict:
        """Everything that determines the teacher's dynamics, as plain values (its [`digest`][])."""

    def digest(self) -> str:
        """16 hex digits of SHA-256 of the class name and [`identity`][]: two teachers with one
        digest have the same dynamics (the key of the cached ground truth)."""
        text = json.dumps({"class": type(self).__name__, **self.identity()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def run(self, xs: Array, h0: Array | None = None) -> tuple[Array, Array]:
        """One trial: ``xs[T, input_size]`` -> ``(latents[T, state_size], outputs[T, output_size])``,
        the state after every step and its output, from ``h0`` (default [`initial_state`][])."""
        def body(h, x):
            h, y = self.transition(h, x)
            return h, (h, y)

        return jax.lax.scan(body, self.initial_state() if h0 is None else h0, xs)[1]


def stand_in(shapes):
    """A module whose arrays are zeros of the shapes ``shapes`` gives (NumPy, so that making them runs
    nothing): what a check evaluates abstractly in place of weights it need not draw."""
    return jax.tree.map(lambda a: np.zeros(a.shape, a.dtype) if isinstance(a, jax.ShapeDtypeStruct) else a, shapes)
