r"""Predictive coding (PC): energy, inference of the activities, and weight gradients at equilibrium.

The energy of a batch of $P$ samples (Eq. 2), with every prediction carrying the
parameterisation's multipliers (:mod:`dynlab.ffmodels`), $z_0 = x$ clamped to the input:

$$ \mathcal F(z, \theta) = \frac{1}{P} \sum_{\mu=1}^{P} \Big[ \sum_{\ell=1}^{L-1}
      \tfrac12 \| z_\mu^{(\ell)} - f_\ell(z_\mu^{(\ell-1)}) \|^2
      + \ell_{out}\big(f_L(z_\mu^{(L-1)}), y_\mu\big) \Big], $$

with $\ell_{out}(f, y) = \tfrac12\|y - f\|^2$ (``mse``, i.e. $z^{(L)} = y$ clamped) or the
softmax cross-entropy $-\sum_c y_c \log \mathrm{softmax}(f)_c$ (``ce``).

**Inference** (Eq. 3) minimises $\mathcal F$ over the free activities $z^{(1)},\dots,z^{(L-1)}$,
starting from the feed-forward pass $z^{(\ell)} = h^{(\ell)}$ (what jpc does; the paper is silent):

* :func:`infer` — discrete steps of any optax optimiser on the activities (``optax.sgd(β)`` is the
  paper's $z_{k+1} = z_k - \beta \nabla_z \mathcal F$), inside one ``lax.while_loop``, for at most
  ``max_steps`` steps or until converged;
* :func:`infer_ode` — the gradient flow $\dot z = -\nabla_z \mathcal F$ solved by diffrax with an
  adaptive (PID) step-size controller, stopped by an event at the same convergence criterion.

Samples do not interact during inference, so both act on $\sum_\mu \mathcal F_\mu$ (the energy
*not* divided by $P$): the step size $\beta$ then means the same thing at every batch size.
(jpc differentiates the batch mean, so its $\beta$ is effectively $\beta/P$.)

Both are thin wrappers of a model-free core, :func:`minimise` and :func:`minimise_ode`, which
minimise any per-sample energy $z \mapsto [\mathcal F_\mu(z)]_\mu$ over any PyTree of activities
whose leaves share one sample axis; predictive coding through time
(:mod:`dynlab.rules.pc_time`) uses the same core on a recurrent model's states.

**Convergence** is judged on the worst sample: with
$g = \max_\mu \|\nabla_{z_\mu} \mathcal F_\mu\|$ (over all hidden layers, i.e. all leaves), inference has converged
when $g \le \text{atol} + \text{rtol}\, g_0$, $g_0$ being its value at the feed-forward
initialisation. A run that stops at ``max_steps`` without meeting it is reported as not
converged (``converged = False``); nothing downstream uses such gradients silently.

**Learning** (Eq. 4): the weight gradient is $\partial \mathcal F(z^*, \theta)/\partial\theta$ at
the inferred activities, with $\mathcal F$ the batch mean. For linear networks at exact
equilibrium this is $\nabla_\theta \mathcal F^*$ (:mod:`dynlab.rules.pc_closed_form`).
"""

from __future__ import annotations

from typing import Callable, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, PyTree

from dynlab import ffmodels  # also registers the feed-forward models the rule trains
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.rules.base import Rule

OUTPUTS = ("mse", "ce")


# ------------------------------------------------------------------------------------------------
# Energy


def errors(model, z: Array, x: Array) -> Array:
    r"""Hidden prediction errors $e_\ell = z_\ell - f_\ell(z_{\ell-1})$, ``[L-1, P, N]``."""
    first = z[:1] - model.first(x)[None]
    rest = z[1:] - model.hidden_all(z[:-1])
    return jnp.concatenate([first, rest], axis=0)


def output_term(model, z_last: Array, y: Array, output: str) -> Array:
    """Per-sample output term ``[P]``: ½|y − f|² (``mse``) or softmax cross-entropy (``ce``)."""
    f = model.last(z_last)
    if output == "mse":
        return 0.5 * jnp.sum((y - f) ** 2, axis=-1)
    return optax.softmax_cross_entropy(f, y)


def sample_energies(model, z: Array, x: Array, y: Array, output: str = "mse") -> Array:
    r"""$\mathcal F_\mu$ for every sample, ``[P]``."""
    e = errors(model, z, x)
    return 0.5 * jnp.sum(e**2, axis=(0, 2)) + output_term(model, z[-1], y, output)


def energy(model, z: Array, x: Array, y: Array, output: str = "mse") -> Array:
    r"""$\mathcal F(z, \theta)$, the batch mean (Eq. 2); ``z[L-1, P, N]``, ``x[P, D]``, ``y[P, d_out]``."""
    return jnp.mean(sample_energies(model, z, x, y, output))


def loss(model, x: Array, y: Array, output: str = "mse") -> Array:
    r"""The BP objective on the same scale: $\frac{1}{P}\sum_\mu \ell_{out}(f(x_\mu), y_\mu)$ (Eq. 1)."""
    f = model.forward(x)
    if output == "mse":
        return 0.5 * jnp.mean(jnp.sum((y - f) ** 2, axis=-1))
    return jnp.mean(optax.softmax_cross_entropy(f, y))


def energy_gradient(sample_energies: Callable[[PyTree], Array], z: PyTree, sample_axis: int):
    r"""$(\sum_\mu \mathcal F_\mu, \nabla_z \sum_\mu \mathcal F_\mu, g)$ for any per-sample energy ``z -> [P]``.

    ``z`` is any PyTree whose leaves hold the samples along ``sample_axis``; $g$ is the worst
    sample's gradient norm over all leaves.
    """
    total, grad = jax.value_and_grad(lambda z: jnp.sum(sample_energies(z)))(z)
    per_sample = sum(jnp.sum(g**2, axis=tuple(i for i in range(g.ndim) if i != sample_axis))
                     for g in jax.tree_util.tree_leaves(grad))
    return total, grad, jnp.sqrt(jnp.max(per_sample))


def activity_gradient(model, z, x, y, output="mse"):
    r"""$(\sum_\mu \mathcal F_\mu, \nabla_z \sum_\mu \mathcal F_\mu, g)$ with $g$ the worst sample's gradient norm."""
    return energy_gradient(lambda z: sample_energies(model, z, x, y, output), z, sample_axis=1)


# ------------------------------------------------------------------------------------------------
# Inference


class Inference(NamedTuple):
    """Result of inference. Traces are ``[max_steps + 1]`` (index k = after k steps; NaN past the end)."""

    z: PyTree  # the activities, e.g. [L-1, P, N] for a feed-forward model
    steps: Array  # int, steps taken
    converged: Array  # bool
    energy: Array  # batch-mean energy at the final z
    grad_norm: Array  # worst-sample |grad_z F| at the final z
    trace_energy: Array | None = None
    trace_grad_norm: Array | None = None
    trace_distance: Array | None = None  # |z_k - z_exact| / |z_exact|, when z_exact is given


def _samples(z: PyTree, sample_axis: int) -> int:
    return jax.tree_util.tree_leaves(z)[0].shape[sample_axis]


def minimise(
    sample_energies: Callable[[PyTree], Array],
    z0: PyTree,
    *,
    sample_axis: int,
    optimizer: optax.GradientTransformation,
    max_steps: int = 100,
    atol: float = 0.0,
    rtol: float = 1e-4,
    z_exact: PyTree | None = None,
    record: bool = False,
) -> Inference:
    r"""Optax steps on the activities ``z`` until $g \le \text{atol} + \text{rtol}\,g_0$ or ``max_steps``.

    The model-free core of :func:`infer`: ``sample_energies`` maps a PyTree of activities (samples
    along ``sample_axis`` of every leaf) to the per-sample energies ``[P]``; the steps descend
    their sum, inside one ``lax.while_loop``. Arguments as in :func:`infer`.
    """
    require_positive("max_steps", max_steps)
    p = _samples(z0, sample_axis)
    dtype = jax.tree_util.tree_leaves(z0)[0].dtype
    nan = jnp.full((max_steps + 1,), jnp.nan, dtype)
    z_norm = None if z_exact is None else optax.tree.norm(z_exact)

    def diagnostics(k, z, total, g, buffers):
        if not record:
            return buffers
        be, bg, bd = buffers
        be, bg = be.at[k].set(total / p), bg.at[k].set(g)
        if z_exact is not None:
            bd = bd.at[k].set(optax.tree.norm(jax.tree_util.tree_map(jnp.subtract, z, z_exact)) / z_norm)
        return be, bg, bd

    # A do-while loop: every iteration evaluates the gradient at the current z (one copy of the energy's
    # graph in the compiled loop), sets the criterion from g_0 on the first, and steps unless done.
    def body(carry):
        k, z, state, _, _, threshold, _, buffers = carry
        total, grad, g = energy_gradient(sample_energies, z, sample_axis)
        threshold = jnp.where(k == 0, atol + rtol * g, threshold)
        buffers = diagnostics(k, z, total, g, buffers)
        done = (g <= threshold) | (k >= max_steps)
        updates, new_state = optimizer.update(grad, state, z)

        def keep(old, new):
            return jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), old, new)

        return k + jnp.where(done, 0, 1), keep(z, optax.apply_updates(z, updates)), keep(state, new_state), total, g, \
            threshold, done, buffers

    zero = jnp.zeros((), dtype)
    carry = (jnp.asarray(0), z0, optimizer.init(z0), zero, zero, zero, jnp.asarray(False), (nan, nan, nan))
    k, z, _, total, g, threshold, _, (be, bg, bd) = jax.lax.while_loop(lambda c: ~c[6], body, carry)
    traces = (be, bg, bd if z_exact is not None else None) if record else (None, None, None)
    return Inference(z, k, g <= threshold, total / p, g, *traces)


def minimise_ode(
    sample_energies: Callable[[PyTree], Array],
    z0: PyTree,
    *,
    sample_axis: int,
    t1: float = 1e4,
    max_steps: int = 4096,
    atol: float = 0.0,
    rtol: float = 1e-4,
    ode_rtol: float = 1e-6,
    ode_atol: float = 1e-8,
    solver=None,
) -> Inference:
    r"""The gradient flow $\dot z = -\nabla_z \sum_\mu \mathcal F_\mu$ of any per-sample energy, solved by diffrax.

    The model-free core of :func:`infer_ode` (arguments as there; ``sample_energies`` and
    ``sample_axis`` as in :func:`minimise`).
    """
    import diffrax

    require_positive("max_steps", max_steps)
    p = _samples(z0, sample_axis)
    _, _, g0 = energy_gradient(sample_energies, z0, sample_axis)
    threshold = atol + rtol * g0

    def vector_field(t, z, args):
        return jax.tree_util.tree_map(jnp.negative, energy_gradient(sample_energies, z, sample_axis)[1])

    def steady(t, z, args, **kwargs):
        return energy_gradient(sample_energies, z, sample_axis)[2] <= threshold

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Tsit5() if solver is None else solver,
        t0=0.0,
        t1=t1,
        dt0=None,
        y0=z0,
        stepsize_controller=diffrax.PIDController(rtol=ode_rtol, atol=ode_atol),
        event=diffrax.Event(steady),
        saveat=diffrax.SaveAt(t1=True),
        max_steps=max_steps,
        throw=False,
    )
    z = jax.tree_util.tree_map(lambda leaf: leaf[-1], sol.ys)
    total, _, g = energy_gradient(sample_energies, z, sample_axis)
    converged = (sol.result == diffrax.RESULTS.event_occurred) | (g <= threshold)
    return Inference(z, sol.stats["num_accepted_steps"], converged, total / p, g)


def _prepare(model, x, y, z0, output):
    if output not in OUTPUTS:
        raise ConfigError(f"unknown output {output!r}; valid: {', '.join(OUTPUTS)}")
    x = jnp.reshape(x, (x.shape[0], -1))
    y = jnp.reshape(y, (y.shape[0], -1))
    z0 = model.activations(x) if z0 is None else z0
    return x, y, z0


def infer(
    model,
    x: Array,
    y: Array,
    z0: Array | None = None,
    *,
    optimizer: optax.GradientTransformation | None = None,
    max_steps: int = 100,
    atol: float = 0.0,
    rtol: float = 1e-4,
    output: str = "mse",
    z_exact: Array | None = None,
    record: bool = False,
) -> Inference:
    r"""Discrete inference: optax steps on the activities until $g \le \text{atol} + \text{rtol}\,g_0$ or ``max_steps``.

    Args:
        model: a :class:`~dynlab.ffmodels.FeedForward`.
        x, y: the batch, ``[P, D]`` and ``[P, d_out]`` (targets one-hot/probabilities for ``ce``).
        z0: initial activities ``[L-1, P, N]`` (default: the feed-forward pass).
        optimizer: any optax transformation (default ``optax.sgd(0.1)``).
        max_steps: the step budget. ``atol``/``rtol``: the convergence criterion (module docstring);
            ``atol = rtol = 0`` runs exactly ``max_steps`` steps.
        z_exact: the known minimiser, to trace the relative distance to it.
        record: keep per-step traces of the energy, gradient norm and distance.
    """
    require_positive("max_steps", max_steps)
    x, y, z0 = _prepare(model, x, y, z0, output)
    return minimise(lambda z: sample_energies(model, z, x, y, output), z0, sample_axis=1,
                    optimizer=optax.sgd(0.1) if optimizer is None else optimizer, max_steps=max_steps, atol=atol,
                    rtol=rtol, z_exact=z_exact, record=record)


def infer_ode(
    model,
    x: Array,
    y: Array,
    z0: Array | None = None,
    *,
    t1: float = 1e4,
    max_steps: int = 4096,
    atol: float = 0.0,
    rtol: float = 1e-4,
    ode_rtol: float = 1e-6,
    ode_atol: float = 1e-8,
    solver=None,
    output: str = "mse",
) -> Inference:
    r"""Inference as the gradient flow $\dot z = -\nabla_z \sum_\mu \mathcal F_\mu$, solved by diffrax.

    Adaptive steps (``PIDController(ode_rtol, ode_atol)``, default solver Tsit5) from $t=0$ up to
    ``t1``; an event stops the solve as soon as $g \le \text{atol} + \text{rtol}\,g_0$ (the same
    criterion as :func:`infer`). ``steps`` is the number of accepted solver steps; the result is
    not converged if the event did not fire (``t1`` or ``max_steps`` reached first).
    """
    require_positive("max_steps", max_steps)
    x, y, z0 = _prepare(model, x, y, z0, output)
    return minimise_ode(lambda z: sample_energies(model, z, x, y, output), z0, sample_axis=1, t1=t1,
                        max_steps=max_steps, atol=atol, rtol=rtol, ode_rtol=ode_rtol, ode_atol=ode_atol, solver=solver)


# ------------------------------------------------------------------------------------------------
# Weight gradients


def weight_grads(model, z: Array, x: Array, y: Array, output: str = "mse") -> tuple[Array, PyTree]:
    r"""$(\mathcal F, \partial\mathcal F(z,\theta)/\partial\theta)$ at fixed activities ``z`` (Eq. 4)."""
    z = jax.lax.stop_gradient(z)
    return eqx.filter_value_and_grad(lambda m: energy(m, z, x, y, output))(model)


def activity_optimizer(name: str, beta: float) -> optax.GradientTransformation:
    """``sgd`` (the paper's GD), ``momentum`` (heavy ball 0.9) or ``adam`` with step size β."""
    require_positive("beta", beta, integer=False)
    if name == "sgd":
        return optax.sgd(beta)
    if name == "momentum":
        return optax.sgd(beta, momentum=0.9)
    if name == "adam":
        return optax.adam(beta)
    raise ConfigError(f"unknown activity optimizer {name!r}; valid: sgd, momentum, adam")


def _flat_batch(model, batch, loss_name):
    """(x[P, D], y[P, d_out], output) from a task batch ``(x[P, 1, D], y, mask)`` or ``(x[P, D], y[P, d_out])``."""
    x, y = batch[0], batch[1]
    x = jnp.reshape(x, (x.shape[0], -1))
    if loss_name == "mse":
        return x, jnp.reshape(y, (y.shape[0], -1)), "mse"
    if loss_name == "ce_last":
        return x, jax.nn.one_hot(jnp.reshape(y, (y.shape[0],)), model.output_size, dtype=x.dtype), "ce"
    raise ConfigError(f"the pc and bp rules support the losses mse and ce_last, got {loss_name!r}")


@register("rule", "pc", "predictive coding: infer activities (optax steps or diffrax ODE), weight grads at equilibrium")
class PC(Rule):
    r"""Predictive coding on a :class:`~dynlab.ffmodels.FeedForward` model (module docstring).

    Config:
        inference: ``discrete`` (optax steps), ``ode`` (diffrax) or ``closed-form`` (linear
            networks with MSE output: the exact equilibrium, $\nabla_\theta\mathcal F^*$).
        optimizer: activity optimiser for ``discrete``: ``sgd``, ``momentum`` or ``adam``.
        beta: its step size.
        max_steps: inference budget (optimiser steps, or ODE solver steps).
        atol, rtol: convergence criterion $g \le \text{atol} + \text{rtol}\,g_0$.
        t1: ODE time horizon.

    Metrics: ``loss`` and the task metric (before the update), ``energy``, ``inference_steps``,
    ``converged`` (1.0/0.0), ``activity_grad_norm``.
    """

    inference: Literal["discrete", "ode", "closed-form"] = eqx.field(static=True, default="discrete")
    optimizer: Literal["sgd", "momentum", "adam"] = eqx.field(static=True, default="sgd")
    beta: float = eqx.field(static=True, default=0.3)
    max_steps: int = eqx.field(static=True, default=100)
    atol: float = eqx.field(static=True, default=0.0)
    rtol: float = eqx.field(static=True, default=1e-4)
    t1: float = eqx.field(static=True, default=1e4)

    def __check_init__(self):
        super().__check_init__()
        if self.inference not in ("discrete", "ode", "closed-form"):
            raise ConfigError(f"unknown inference {self.inference!r}; valid: discrete, ode, closed-form")
        activity_optimizer(self.optimizer, self.beta)
        require_positive("max_steps", self.max_steps)
        for name in ("atol", "rtol"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")

    def equilibrate(self, model, x, y, output) -> Inference:
        """Inferred activities (the rule's inference method) for a flat batch."""
        if self.inference == "ode":
            return infer_ode(model, x, y, max_steps=self.max_steps, atol=self.atol, rtol=self.rtol, t1=self.t1,
                             output=output)
        if self.inference == "closed-form":
            from dynlab.rules.pc_closed_form import exact_activities

            if output != "mse":
                raise ConfigError("closed-form inference needs the mse loss")
            z = exact_activities(model, x, y)
            total, _, g = activity_gradient(model, z, x, y, output)
            return Inference(z, jnp.asarray(0), jnp.asarray(True), total / x.shape[0], g)
        return infer(model, x, y, optimizer=activity_optimizer(self.optimizer, self.beta), max_steps=self.max_steps,
                     atol=self.atol, rtol=self.rtol, output=output)

    def grads(self, model, batch, key):
        if not isinstance(model, ffmodels.FeedForward):
            raise ConfigError(f"rule 'pc' trains feed-forward models (model 'mlp'), got a {type(model).__name__}; "
                              "for recurrent models use rule 'pc-time'")
        x, y, output = _flat_batch(model, batch, self.loss)
        inf = self.equilibrate(model, x, y, output)
        f_value, grads = weight_grads(model, inf.z, x, y, output)
        metrics = self.evaluate(model, batch)
        metrics.update(energy=f_value, inference_steps=inf.steps, converged=inf.converged.astype(x.dtype),
                       activity_grad_norm=inf.grad_norm)
        return grads, metrics
