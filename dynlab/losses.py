"""Losses and their metrics, chosen by tasks by name.

Every loss takes the model's read-out for a batch, ``ys[B, T, O]``, the targets ``y`` and a mask
``mask[B, T]`` of the steps that are scored, and returns a scalar. The matching metric is what
progress bars and evaluations report; ``higher_is_better`` says which way is good.

========  =================================  ========================  =============
name      targets ``y``                      scored steps              metric
========  =================================  ========================  =============
ce_last   class ids ``[B]``                  the last step only        accuracy
ce_all    class ids ``[B, T]``               where ``mask`` > 0        accuracy
mse       values ``[B, T, O]``               where ``mask`` > 0        mse
ce_bits   class ids ``[B, T]``               where ``mask`` > 0        bpc
mse_sign  values ``[B, T, O]``               where ``mask`` > 0        sign_accuracy
========  =================================  ========================  =============

``ce_bits`` is ``ce_all`` reported in bits: the metric ``bpc`` (bits per character of a language
model) is the cross-entropy (in nats) divided by ln 2. ``mse_sign`` is ``mse`` whose metric is the fraction
of scored steps and outputs with the target's sign (a flip-flop's bit accuracy; targets of 0 are
not counted).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp
import optax
from jaxtyping import Array

from dynlab.registry import get, register


@dataclasses.dataclass(frozen=True)
class Loss:
    loss: Callable[[Array, Array, Array], Array]
    metric: Callable[[Array, Array, Array], Array]
    metric_name: str
    higher_is_better: bool
    objective: str | None = None
    """The registered loss whose objective this one computes, when it differs only in its metric
    (``mse_sign`` is ``mse``); rules whose energies know a fixed set of objectives (predictive
    coding through time) read this."""


def _masked_mean(values: Array, mask: Array) -> Array:
    return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def _ce_last(ys, y, mask):
    return optax.softmax_cross_entropy_with_integer_labels(ys[:, -1], y).mean()


def _acc_last(ys, y, mask):
    return jnp.mean(jnp.argmax(ys[:, -1], -1) == y)


def _ce_all(ys, y, mask):
    return _masked_mean(optax.softmax_cross_entropy_with_integer_labels(ys, y), mask)


def _acc_all(ys, y, mask):
    return _masked_mean((jnp.argmax(ys, -1) == y).astype(ys.dtype), mask)


def _mse(ys, y, mask):
    return _masked_mean(jnp.mean((ys - y) ** 2, axis=-1), mask)


def _sign_accuracy(ys, y, mask):
    scored = mask[..., None] * (y != 0)
    return jnp.sum((jnp.sign(ys) == jnp.sign(y)) * scored) / jnp.maximum(jnp.sum(scored), 1.0)


def _bits_all(ys, y, mask):
    return _ce_all(ys, y, mask) / jnp.log(2.0)


register("loss", "ce_last", "cross-entropy of the last step's read-out (sequence classification)")(
    Loss(_ce_last, _acc_last, "accuracy", True)
)
register("loss", "ce_all", "cross-entropy at every masked step (sequence-to-sequence)")(
    Loss(_ce_all, _acc_all, "accuracy", True)
)
register("loss", "mse", "mean squared error at every masked step (regression)")(Loss(_mse, _mse, "mse", False))
register("loss", "mse_sign", "mean squared error at every masked step, metric the fraction with the target's sign")(
    Loss(_mse, _sign_accuracy, "sign_accuracy", True, objective="mse")
)
register("loss", "ce_bits", "cross-entropy at every masked step, metric in bits per character (language models)")(
    Loss(_ce_all, _bits_all, "bpc", False)
)


def objective_of(name: str) -> str:
    """The name of the objective the registered loss ``name`` computes (its own name, or its
    [`Loss.objective`][dynlab.losses.Loss.objective])."""
    return get_loss(name).objective or name


def get_loss(name: str | Loss) -> Loss:
    """The registered loss ``name``; a [`Loss`][] value passes through (a rule may train on a
    loss of its own, e.g. [`dynlab.rules.pc_time.OBJECTIVES`][])."""
    return name if isinstance(name, Loss) else get("loss", name).obj

