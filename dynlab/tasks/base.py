"""The Task contract.

A task makes batches ``(x[B, T, D], y, mask[B, T])`` from an explicit PRNG key, names its loss
(:mod:`dynlab.losses`), and states the metric a model that learned nothing would get (``chance``).
It never reads the network. ``batch`` is pure and jit-able, so the trainer generates data inside
its compiled step, with no host round-trip.
"""

from __future__ import annotations

import abc

import equinox as eqx
from jaxtyping import Array, PRNGKeyArray


class Task(eqx.Module):
    """Base class of tasks. Subclasses set the static fields and implement :meth:`batch`."""

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
