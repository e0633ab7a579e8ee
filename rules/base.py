"""The Rule contract: a learning rule turns (model, batch) into parameter gradients.

A rule is a value passed to the trainer, like an optax transformation: the trainer applies the
optimiser to whatever ``grads`` returns, so rules are interchangeable and two rules can be
compared on the same model and batch (e.g. the PC–BP gradient cosine).

Stateful tasks ([`dynlab.tasks.base.StatefulTask`][]) train on consecutive windows whose batch
continues from the model states in which the previous window ended: rules that support that
implement [`Rule.grads_from`][], which also returns the states at the window's end.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
from jaxtyping import Array, PRNGKeyArray, PyTree

from dynlab.errors import ConfigError
from dynlab.losses import Loss, get_loss


def continue_from(model, x: Array, state: PyTree) -> tuple[Array, PyTree]:
    """Read-outs ``ys[B, T, O]`` of ``model`` on ``x[B, T, D]`` started from the per-sample states
    ``state`` (leading axis ``B``), and the states after the last step."""

    def one(xs, s):
        ys, states = model.trajectory(xs, state=s)
        return ys, jax.tree_util.tree_map(lambda a: a[-1], states)

    return jax.vmap(one)(x, state)


class Rule(eqx.Module):
    """Base class of learning rules. ``loss`` names the task's loss ([`dynlab.losses`][]), or is a
    [`Loss`][dynlab.losses.Loss] value."""

    loss: str | Loss = eqx.field(static=True)

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

    def grads_from(self, model: PyTree, batch: tuple[Array, Array, Array], state: PyTree, key: PRNGKeyArray
                   ) -> tuple[PyTree, dict, PyTree]:
        """[`grads`][] for a batch that continues from the per-sample model states ``state``;
        returns ``(grads, metrics, states at the batch's end)``. Rules without it cannot train
        stateful tasks."""
        raise ConfigError(f"rule {type(self).__name__} cannot carry the model state across batches, "
                          "which this (stateful) task needs; use rule bptt")

    def evaluate_from(self, model: PyTree, batch: tuple[Array, Array, Array], state: PyTree
                      ) -> tuple[dict[str, Array], PyTree]:
        """[`evaluate`][] for a batch that continues from ``state``; also returns the end states."""
        x, y, mask = batch
        spec = get_loss(self.loss)
        ys, final = continue_from(model, x, state)
        return {"loss": spec.loss(ys, y, mask), spec.metric_name: spec.metric(ys, y, mask)}, final
