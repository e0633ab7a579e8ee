r"""Backpropagation through time: exact gradients of the task loss through the unrolled scan.

$$ \nabla_\theta \mathcal{L}, \qquad
   \mathcal{L}(\theta) = \ell\big(\{\mathrm{readout}(h_t(\theta))\}_{t \le T},\, y,\, \text{mask}\big) $$

computed by reverse-mode autodiff of the model's ``lax.scan`` over time, batched with ``vmap``.
"""

from __future__ import annotations

import equinox as eqx
import jax

from dynlab.losses import get_loss
from dynlab.registry import register
from dynlab.rules.base import Rule


@register("rule", "bptt", "backpropagation through time (exact gradients through the unrolled scan)")
class BPTT(Rule):
    """Backpropagation through time. Config: ``loss`` is set from the task."""

    def grads(self, model, batch, key):
        x, y, mask = batch
        spec = get_loss(self.loss)

        def objective(m):
            ys = jax.vmap(m)(x)
            return spec.loss(ys, y, mask), spec.metric(ys, y, mask)

        (loss, metric), grads = eqx.filter_value_and_grad(objective, has_aux=True)(model)
        return grads, {"loss": loss, spec.metric_name: metric}
