r"""Backpropagation on feed-forward models, on the same objective scale as [`dynlab.rules.pc`][].

$$ \nabla_\theta \mathcal L, \qquad
   \mathcal L(\theta) = \frac{1}{P}\sum_{\mu=1}^{P} \ell_{out}\big(f(x_\mu;\theta), y_\mu\big), $$

with $\ell_{out} = \tfrac12\|y - f\|^2$ (task loss ``mse``, Eq. 1) or the softmax cross-entropy
(``ce_last``). The ½-sum-over-outputs convention matches the PC energy's output term, so that at
infinite width the PC and BP gradients agree in scale, not only in direction. (``bptt`` uses the
task's own loss, e.g. the mean over outputs for ``mse``, which differs by a constant factor.)
"""

from __future__ import annotations

import equinox as eqx

from dynlab.registry import register
from dynlab.rules.base import Rule
from dynlab.rules.pc import _flat_batch, loss


def bp_grads(model, x, y, output: str = "mse"):
    """``(L, dL/dθ)`` for a flat batch ``x[P, D]``, ``y[P, d_out]``."""
    return eqx.filter_value_and_grad(lambda m: loss(m, x, y, output))(model)


@register("rule", "bp", "backpropagation on feed-forward models (the PC energy's output loss: ½|y−f|² or CE)")
class BP(Rule):
    r"""Backpropagation of the feed-forward objective (module docstring); ``loss`` is set from the task.

    Metrics: ``loss`` and the task metric (the task's loss, before the update) and ``objective``,
    the value of $\mathcal L$ whose gradient this is.
    """

    def grads(self, model, batch, key):
        x, y, output = _flat_batch(model, batch, self.loss)
        value, grads = bp_grads(model, x, y, output)
        return grads, dict(self.evaluate(model, batch), objective=value)
