"""The Task contract.

A task makes batches ``(x[B, T, D], y, mask[B, T])`` from an explicit PRNG key, names its loss
([`dynlab.losses`][]), and states the metric a model that learned nothing would get (``chance``)
and, where the field has one, what a model that learned it reaches (``criterion``, a
[`Criterion`][]: e.g. the flip-flop's sign accuracy >= 0.95); a claim about trained networks
judges only the cells that met it ([`dynlab.scenarios.learning_gate`][]). A task whose solution
is known says what an analysis finds on a network that learned it ([`Task.expected`][], an
[`Expected`][]: the flip-flop's $2^N$ stable fixed points); a sweep's figure draws it.
It never reads the network. ``batch`` is pure and jit-able, so the trainer generates data inside
its compiled step, with no host round-trip. A [`StatefulTask`][] (e.g. character-level language
modelling) also serves consecutive windows of long streams, across which the trainer carries the
model state.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import ClassVar

import equinox as eqx
from jaxtyping import Array, PRNGKeyArray


@dataclasses.dataclass(frozen=True)
class Criterion:
    """What a network must reach on a task to count as having learned it: its held-out ``metric``
    (the name its loss reports, [`dynlab.losses`][]: ``accuracy``, ``sign_accuracy``, ``mse``, …)
    at least ``threshold`` (``higher_is_better``) or at most it; ``source`` says where the
    threshold comes from."""

    metric: str
    threshold: float
    higher_is_better: bool = True
    source: str = ""

    def met(self, value: float) -> bool:
        """Whether a final metric ``value`` meets the criterion (NaN, a run that diverged, does not)."""
        if not math.isfinite(value):
            return False
        return value >= self.threshold if self.higher_is_better else value <= self.threshold

    @property
    def text(self) -> str:
        """E.g. ``"sign_accuracy >= 0.95"``."""
        return f"{self.metric} {'>=' if self.higher_is_better else '<='} {self.threshold:.12g}"


@dataclasses.dataclass(frozen=True)
class Expected:
    """What an analysis finds on a network that learned a task, known from the task's theory:
    ``value`` of the per-network scalar ``variable`` of the analysis ``analysis`` (the flip-flop's
    ``n_points_stable`` of ``fixed-points`` is $2^N$), where the analysis held the input its
    result's ``input`` attribute begins with (``input``; ``""``: any input), as ``source`` says."""

    analysis: str
    variable: str
    value: float
    input: str = ""
    source: str = ""

    def applies(self, attrs: dict) -> bool:
        """Whether a result with ``attrs`` was taken where the value is expected (its input)."""
        return str(attrs.get("input", "")).startswith(self.input)


class Task(eqx.Module):
    """Base class of tasks. Subclasses set the static fields and implement [`batch`][].

    ``criterion``: what a network that learned the task reaches ([`Criterion`][]), declared on the
    class where the field has a standard; ``None`` (the default): no learning gate.
    """

    input_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)
    length: int = eqx.field(static=True)
    loss: str = eqx.field(static=True)
    chance: float = eqx.field(static=True)
    criterion: ClassVar[Criterion | None] = None

    @abc.abstractmethod
    def batch(self, key: PRNGKeyArray, batch_size: int, split: str = "train") -> tuple[Array, Array, Array]:
        """``batch_size`` samples ``(x, y, mask)`` for ``split`` in ``("train", "test")``."""

    def expected(self) -> tuple[Expected, ...]:
        """What analyses find on a network that learned this task ([`Expected`][]); none unless
        the task's solution is known."""
        return ()

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
