r"""Backpropagation through time: exact gradients of the task loss through the unrolled scan.

$$ \nabla_\theta \mathcal{L}, \qquad
   \mathcal{L}(\theta) = \ell\big(\{\mathrm{readout}(h_t(\theta))\}_{t \le T},\, y,\, \text{mask}\big) $$

computed by reverse-mode autodiff of the model's ``lax.scan`` over time, batched with ``vmap``.

**Truncated BPTT** ([`BPTT.grads_from`][], stateful tasks): a window continues from carried
states $h_0$ (where the previous window ended) that are treated as constants,
$\nabla_\theta \mathcal{L}(\theta; \operatorname{stop\_gradient}(h_0))$, so gradients flow
through the window's $T$ steps only; the window's final states are returned to be carried on.

**Regularisers**: unless ``penalties=False``, when the model is ``penalised`` ([`penalised`][dynlab.models.SequenceModel.penalised]: a
[`Regularised`][dynlab.units.base.Regularised] layer such as an ELM network with non-zero ``mlp_l2`` or
``activity_l1``), the gradient is that of $\mathcal{L} + \text{mean}_b\,\text{penalty}_b$
([`penalty`][dynlab.models.SequenceModel.penalty] on each sample's trajectory); the reported ``loss`` is
the task loss alone, comparable with the held-out loss.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from dynlab.losses import get_loss
from dynlab.models import SequenceModel
from dynlab.registry import register
from dynlab.rules.base import Rule, continue_from


@register("rule", "bptt", "backpropagation through time (exact gradients through the unrolled scan)")
class BPTT(Rule):
    """Backpropagation through time.

    Config: ``loss`` is set from the task (a registered name, or a [`Loss`][dynlab.losses.Loss]
    value). ``penalties``: add the model's regularisers to the objective (module docstring);
    ``False`` trains on the loss alone, e.g. to compare with a rule whose objective has no penalty.
    """

    penalties: bool = eqx.field(default=True, static=True)

    def grads(self, model, batch, key):
        grads, metrics, _ = self._grads(model, batch, None)
        return grads, metrics

    def grads_from(self, model, batch, state, key):
        return self._grads(model, batch, jax.lax.stop_gradient(state))

    def _grads(self, model, batch, state):
        x, y, mask = batch
        spec = get_loss(self.loss)

        def objective(m):
            if not (self.penalties and isinstance(m, SequenceModel) and m.penalised):
                ys, final = (jax.vmap(m)(x), None) if state is None else continue_from(m, x, state)
                loss = spec.loss(ys, y, mask)
                return loss, (loss, spec.metric(ys, y, mask), final)
            starts = jax.vmap(lambda _: m.init_state())(x) if state is None else state
            ys, states = jax.vmap(lambda xs, s: m.trajectory(xs, state=s))(x, starts)
            final = None if state is None else jax.tree_util.tree_map(lambda a: a[:, -1], states)
            loss = spec.loss(ys, y, mask)
            penalty = jnp.mean(jax.vmap(m.penalty)(x, states, starts))
            return loss + penalty, (loss, spec.metric(ys, y, mask), final)

        (_, (loss, metric, final)), grads = eqx.filter_value_and_grad(objective, has_aux=True)(model)
        return grads, {"loss": loss, spec.metric_name: metric}, final
