"""The Task contract.

A task makes batches ``(x[B, T, D], y, mask[B, T])`` from an explicit PRNG key, names its loss
([`dynlab.losses`][]), and states the metric a model that learned nothing would get (``chance``).
It never reads the network. ``batch`` is pure and jit-able, so the trainer generates data inside
its compiled step, with no host round-trip. A [`StatefulTask`][] (e.g. character-level language
modelling) also serves consecutive windows of long streams, across which the trainer carries the
model state.
"""

from __future__ import annotations

import abc

import equinox as eqx
from jaxtyping import Array, PRNGKeyArray


class Task(eqx.Module):
    """Base class of tasks. Subclasses set the static fields and implement [`batch`][]."""

    input_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)
    length: int = eqx.field(static=True)
    loss: str = eqx.field(static=True)
    chance: float = eqx.field(static=True)

    @abc.abstractmethod
    def batch(self, key: PRNGKeyArray, batch_size: int, split: str = "train") -> tuple[Array, Array, Array]:
        """``batch_size`` samples ``(x, y, mask)`` for ``split`` in ``("train", "test")``."""

    def describe(self) -> str:
        """One line for progress bars and summaries."""
        return f"{type(self).__name__} (T={self.length}, loss {self.loss}, chance {self.chance:.4g})"


class StatefulTask(Task):
    r"""A task whose samples are consecutive windows of long streams: stateful truncated BPTT.

    A split is cut into ``batch_size`` streams; training step $s$ shows window
    $s \bmod W$ of every stream ([`window`][]), and the trainer starts each stream's window from
    the model state in which the previous window ended, except for streams that [`resets`][]
    marks, which start from the model's initial state. Gradients stay inside a window (the state
    carried in is a constant). Held-out evaluation runs the whole ``"test"`` split as one stream
    (``batch_size`` 1) with one unbroken state. ``batch`` still returns independent windows that
    start from the initial state, so stateless code (analyses, other trainers) can use the task.
    """

    @abc.abstractmethod
    def windows(self, batch_size: int, split: str = "train") -> int:
        """$W$: windows per stream when ``split`` is cut into ``batch_size`` streams."""

    @abc.abstractmethod
    def window(self, index, batch_size: int, split: str = "train") -> tuple[Array, Array, Array]:
        """Window ``index`` mod $W$ of every stream, ``(x[B, T, D], y, mask[B, T])``; pure and jit-able."""

    @abc.abstractmethod
    def resets(self, key: PRNGKeyArray, step, batch_size: int) -> Array:
        """``bool[batch_size]``: the streams whose window at training step ``step`` starts from the initial state."""
