"""The Rule contract: a learning rule turns (model, batch) into parameter gradients.

A rule is a value passed to the trainer, like an optax transformation: the trainer applies the
optimiser to whatever ``grads`` returns, so rules are interchangeable and two rules can be
compared on the same model and batch (e.g. the PC–BP gradient cosine).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
from jaxtyping import Array, PRNGKeyArray, PyTree

from dynlab.losses import get_loss


class Rule(eqx.Module):
    """Base class of learning rules. ``loss`` names the task's loss (:mod:`dynlab.losses`)."""

    loss: str = eqx.field(static=True)

    def __check_init__(self):
        get_loss(self.loss)  # unknown names fail at construction, listing the valid ones

    @abc.abstractmethod
    def grads(self, model: PyTree, batch: tuple[Array, Array, Array], key: PRNGKeyArray) -> tuple[PyTree, dict]:
        """Gradients shaped like ``model`` (``None`` for non-trainable leaves) and metrics.

        The metrics always hold ``"loss"`` and the loss's metric (e.g. ``"accuracy"``), evaluated
        on the batch with the parameters *before* the update.
        """

    def evaluate(self, model: PyTree, batch: tuple[Array, Array, Array]) -> dict[str, Array]:
        """Loss and metric of ``model`` on ``batch`` (no gradients)."""
        x, y, mask = batch
        spec = get_loss(self.loss)
        ys = jax.vmap(model)(x)
        return {"loss": spec.loss(ys, y, mask), spec.metric_name: spec.metric(ys, y, mask)}
