r"""Predictive coding (PC): energy, inference of the activities, and weight gradients at equilibrium.

The energy of a batch of $P$ samples (Eq. 2), with every prediction carrying the
parameterisation's multipliers ([`dynlab.ffmodels`][]), $z_0 = x$ clamped to the input:

$$ \mathcal F(z, \theta) = \frac{1}{P} \sum_{\mu=1}^{P} \Big[ \sum_{\ell=1}^{L-1}
      \tfrac12 \| z_\mu^{(\ell)} - f_\ell(z_\mu^{(\ell-1)}) \|^2
      + \ell_{out}\big(f_L(z_\mu^{(L-1)}), y_\mu\big) \Big], $$

with $\ell_{out}(f, y) = \tfrac12\|y - f\|^2$ (``mse``, i.e. $z^{(L)} = y$ clamped) or the
softmax cross-entropy $-\sum_c y_c \log \mathrm{softmax}(f)_c$ (``ce``).

**Inference** (Eq. 3) minimises $\mathcal F$ over the free activities $z^{(1)},\dots,z^{(L-1)}$,
starting from the feed-forward pass $z^{(\ell)} = h^{(\ell)}$ (what jpc does; the paper is silent):

* [`infer`][] — discrete steps of any optax optimiser on the activities (``optax.sgd(β)`` is the
  paper's $z_{k+1} = z_k - \beta \nabla_z \mathcal F$), inside one ``lax.while_loop``, for at most
  ``max_steps`` steps or until converged;
* [`infer_ode`][] — the gradient flow $\dot z = -\nabla_z \mathcal F$ solved by diffrax with an
  adaptive (PID) step-size controller, stopped by an event at the same convergence criterion.

Samples do not interact during inference, so both act on $\sum_\mu \mathcal F_\mu$ (the energy
*not* divided by $P$): the step size $\beta$ then means the same thing at every batch size.
(jpc differentiates the batch mean, so its $\beta$ is effectively $\beta/P$.)

Both are thin wrappers of a model-free core, [`minimise`][dynlab.rules.pc_inference.minimise] and
[`minimise_ode`][dynlab.rules.pc_inference.minimise_ode], which minimise any per-sample energy
$z \mapsto [\mathcal F_\mu(z)]_\mu$ over any PyTree of activities whose leaves share one sample
axis; predictive coding through time ([`dynlab.rules.pc_time`][]) uses the same core on a
recurrent model's states. The rule takes its inference as a value
([`dynlab.rules.pc_inference`][]: these two, Gauss–Newton and Levenberg–Marquardt on the energy
as a sum of squares, the closed form), built from the config's spelling in one place,
[`from_config`][dynlab.rules.pc_inference.from_config]; [`problem`][] states the inference problem.

**Convergence** is judged on the worst sample: with
$g = \max_\mu \|\nabla_{z_\mu} \mathcal F_\mu\|$ (over all hidden layers, i.e. all leaves), inference has converged
when $g \le \text{atol} + \text{rtol}\, g_0$, $g_0$ being its value at the feed-forward
initialisation. The rule (its [`Criterion`][dynlab.rules.pc_inference.Criterion]) also asks the
energy to be stationary: a relative change of at most ``ftol`` over the last step. A run that
stops at ``max_steps`` without meeting it is reported as not converged (``converged = False``);
nothing downstream uses such gradients silently.

**Learning** (Eq. 4): the weight gradient is $\partial \mathcal F(z^*, \theta)/\partial\theta$ at
the inferred activities, with $\mathcal F$ the batch mean. For linear networks at exact
equilibrium this is $\nabla_\theta \mathcal F^*$ ([`dynlab.rules.pc_closed_form`][]).
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, PyTree

from dynlab import ffmodels  # also registers the feed-forward models the rule trains
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.rules import pc_inference
from dynlab.rules.base import Rule
from dynlab.rules.pc_inference import (  # the model-free core, used here and by pc_time
    Inference,
    activity_optimizer,
    energy_gradient,
    minimise,
    minimise_ode,
    relative_change,
)

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


def activity_gradient(model, z, x, y, output="mse"):
    r"""$(\sum_\mu \mathcal F_\mu, \nabla_z \sum_\mu \mathcal F_\mu, g)$ with $g$ the worst sample's gradient norm."""
    return energy_gradient(lambda z: sample_energies(model, z, x, y, output), z, sample_axis=1)


# ------------------------------------------------------------------------------------------------
# Inference


def problem(model, x: Array, y: Array, output: str = "mse", z0: Array | None = None) -> pc_inference.Problem:
    r"""The inference problem of a flat batch ``x[P, D]``, ``y[P, d_out]`` for an inference value.

    With the ``mse`` output the energy of one sample is a sum of squares: the hidden errors
    $e_\ell = z_\ell - f_\ell(z_{\ell-1})$ and the output residual $y - f_L(z_{L-1})$; the forward
    pass with the errors added, $z_\ell = f_\ell(z_{\ell-1}) + e_\ell$, inverts $z \mapsto e$
    ([`SumOfSquares`][dynlab.rules.pc_inference.SumOfSquares]). ``z0``: the start (default: the forward pass).
    """
    z0 = model.activations(x) if z0 is None else z0

    def residuals(z, data):  # one sample, z[L-1, N]
        xs, ys = data
        return errors(model, z[:, None], xs[None])[:, 0], ys - model.last(z[-1])

    def unroll(e, data):
        xs, ys = data
        z1 = model.first(xs) + e[0]

        def fwd(h, inputs):
            w, b, ek = inputs
            h = model.hidden(w, b, h) + ek
            return h, h

        _, rest = jax.lax.scan(fwd, z1, (model.w_hidden, model.b_hidden, e[1:]))
        z = jnp.concatenate([z1[None], rest], axis=0)
        return z, ys - model.last(z[-1])

    def exact():
        from dynlab.rules.pc_closed_form import exact_activities

        if output != "mse":
            raise ConfigError("closed-form inference needs the mse loss")
        return exact_activities(model, x, y)

    def astype(dtype):
        cast = functools.partial(ffmodels.astype, dtype=dtype)
        return problem(cast(model), cast(x), cast(y), output, cast(z0))

    least = pc_inference.SumOfSquares((x, y), residuals, unroll) if output == "mse" else None
    return pc_inference.Problem(lambda z: sample_energies(model, z, x, y, output), z0, 1, least, exact, astype=astype)


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
        model: a [`FeedForward`][dynlab.ffmodels.FeedForward].
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
    solver=None,
    controller=None,
    output: str = "mse",
) -> Inference:
    r"""Inference as the gradient flow $\dot z = -\nabla_z \sum_\mu \mathcal F_\mu$, solved by diffrax.

    ``solver`` and the step-size ``controller`` are diffrax values (default ``Tsit5()`` and
    ``PIDController(rtol=1e-6, atol=1e-8)``). Adaptive steps from $t=0$ up to
    ``t1``; an event stops the solve as soon as $g \le \text{atol} + \text{rtol}\,g_0$ (the same
    criterion as [`infer`][]). ``steps`` is the number of accepted solver steps; the result is
    not converged if the event did not fire (``t1`` or ``max_steps`` reached first).
    """
    require_positive("max_steps", max_steps)
    x, y, z0 = _prepare(model, x, y, z0, output)
    return minimise_ode(lambda z: sample_energies(model, z, x, y, output), z0, sample_axis=1, t1=t1,
                        max_steps=max_steps, atol=atol, rtol=rtol, solver=solver, controller=controller)


# ------------------------------------------------------------------------------------------------
# Weight gradients


def weight_grads(model, z: Array, x: Array, y: Array, output: str = "mse") -> tuple[Array, PyTree]:
    r"""$(\mathcal F, \partial\mathcal F(z,\theta)/\partial\theta)$ at fixed activities ``z`` (Eq. 4)."""
    z = jax.lax.stop_gradient(z)
    return eqx.filter_value_and_grad(lambda m: energy(m, z, x, y, output))(model)


def _flat_batch(model, batch, loss_name):
    """(x[P, D], y[P, d_out], output) from a task batch ``(x[P, 1, D], y, mask)`` or ``(x[P, D], y[P, d_out])``."""
    x, y = batch[0], batch[1]
    x = jnp.reshape(x, (x.shape[0], -1))
    if loss_name == "mse":
        return x, jnp.reshape(y, (y.shape[0], -1)), "mse"
    if loss_name == "ce_last":
        return x, jax.nn.one_hot(jnp.reshape(y, (y.shape[0],)), model.output_size, dtype=x.dtype), "ce"
    raise ConfigError(f"the pc and bp rules support the losses mse and ce_last, got {loss_name!r}")


@register("rule", "pc", "predictive coding: infer activities (optax steps, diffrax ODE, Gauss-Newton), weight grads at equilibrium")
class PC(Rule):
    r"""Predictive coding on a [`FeedForward`][dynlab.ffmodels.FeedForward] model (module docstring).

    Config:
        inference: an inference value ([`dynlab.rules.pc_inference`][]), or its spelling:
            ``discrete`` (optax steps), ``ode`` (diffrax), ``gauss-newton``, ``levenberg-marquardt``
            or ``lbfgs`` (optimistix, on the energy in the error coordinates: loss ``mse``),
            ``closed-form`` (linear networks with MSE output: the exact equilibrium,
            $\nabla_\theta\mathcal F^*$). The keys below build the spelled value
            ([`from_config`][dynlab.rules.pc_inference.from_config]); a value carries its own.
        optimizer: activity optimiser for ``discrete``: ``sgd``, ``momentum`` or ``adam``.
        beta: its step size.
        max_steps: inference budget (optimiser steps, ODE solver steps, or Gauss-Newton steps).
        atol, rtol, ftol: convergence criterion $g \le \text{atol} + \text{rtol}\,g_0$ and a relative
            energy change of at most ``ftol`` over the last step
            ([`Criterion`][dynlab.rules.pc_inference.Criterion]).
        t1: ODE time horizon.
        patience: ``gauss-newton``, ``levenberg-marquardt``, ``lbfgs``: give a sample up once its
            gradient has not halved in this many steps ([`ErrorCoordinates`][dynlab.rules.pc_inference.ErrorCoordinates]).
        smoothing: a decreasing list of widths $\mu$ (e.g. ``[1e-2, 1e-3]``): continue the method over
            energies whose ReLU / max kinks are smoothed to within $\mu$
            ([`Smoothed`][dynlab.rules.pc_inference.Smoothed]) — for units whose energy is not
            differentiable (ELM neuron, ELM network, SITH-RNN); no effect on the others.
        smoothing_x64: run the smoothed solves in float64 (the float32 energy stops resolving
            progress at small $\mu$ on SITH-RNN's max over τ); the result is cast back.

        diagnostics: optional ``diagnostics(model, x, y, output, inference) -> dict`` of extra
            per-step metrics from the batch (flat ``x[P, D]``, ``y[P, d_out]``) and the
            [`Inference`][dynlab.rules.pc_inference.Inference] result (e.g. the PC–BP comparison's
            $s - 1$ and distance to the exact activities, [`dynlab.analyses.pc_bp`][]). It
            observes; the gradients do not depend on it.

    Metrics: ``loss`` and the task metric (before the update), ``energy``, ``inference_steps``,
    ``converged`` (1.0/0.0), ``activity_grad_norm``, and for iterative inference
    ``activity_grad_ratio`` ($g / g_0$) and ``energy_change``, with ``smoothing`` the width of the energy
    the result is for (0: exact; only with ``smoothing``); then what ``diagnostics`` returns.
    """

    inference: pc_inference.AbstractInference  # a PyTree (a solver may hold arrays); its settings are static
    diagnostics: Callable | None = eqx.field(static=True)

    def __init__(
        self,
        loss: str,
        inference: Literal["discrete", "ode", "closed-form", "gauss-newton", "levenberg-marquardt", "lbfgs"]
        | pc_inference.AbstractInference = "discrete",
        optimizer: Literal["sgd", "momentum", "adam"] = "sgd",
        beta: float = 0.3,
        max_steps: int = 100,
        atol: float = 0.0,
        rtol: float = 1e-4,
        ftol: float = 1e-6,
        t1: float = 1e4,
        patience: int | None = None,
        smoothing: list[float] | None = None,
        smoothing_x64: bool = False,
        diagnostics: Callable | None = None,
    ):
        settings = dict(optimizer=optimizer, beta=beta, max_steps=max_steps, atol=atol, rtol=rtol, ftol=ftol, t1=t1,
                        patience=patience, smoothing=smoothing, smoothing_x64=smoothing_x64)
        if not isinstance(inference, str):
            changed = [k for k, v in settings.items() if v != _SETTINGS[k]]
            if changed:
                raise ConfigError(f"rule.{changed[0]} sets up an inference given by name; an inference value carries "
                                  "its own settings")
        self.loss = loss
        self.diagnostics = diagnostics
        self.inference = pc_inference.from_config(inference, **settings)
        self.inference.check_loss(loss)

    def equilibrate(self, model, x, y, output) -> Inference:
        """Inferred activities (the rule's inference method) for a flat batch."""
        return self.inference(problem(model, x, y, output))

    def grads(self, model, batch, key):
        if not isinstance(model, ffmodels.FeedForward):
            raise ConfigError(f"rule 'pc' trains feed-forward models (model 'mlp'), got a {type(model).__name__}; "
                              "for recurrent models use rule 'pc-time'")
        x, y, output = _flat_batch(model, batch, self.loss)
        inf = self.equilibrate(model, x, y, output)
        f_value, grads = weight_grads(model, inf.z, x, y, output)
        metrics = self.evaluate(model, batch)
        metrics.update(energy=f_value, **inference_metrics(inf, x.dtype))
        if self.diagnostics is not None:
            metrics.update(self.diagnostics(model, x, y, output, inf))
        return grads, metrics


_SETTINGS = {k: p.default for k, p in inspect.signature(PC.__init__).parameters.items()
             if k not in ("self", "loss", "inference", "diagnostics")}
"""The defaults of the keys that build an inference given by name."""


def inference_metrics(inf: Inference, dtype) -> dict[str, Array]:
    """The rule's inference metrics (class docstring) from an inference result."""
    out = dict(inference_steps=inf.steps, converged=inf.converged.astype(dtype), activity_grad_norm=inf.grad_norm)
    if inf.grad_norm0 is not None:
        out["activity_grad_ratio"] = inf.grad_norm / jnp.maximum(inf.grad_norm0, jnp.finfo(dtype).tiny)
    if inf.energy_change is not None:
        out["energy_change"] = inf.energy_change
    if inf.smoothing is not None:
        out["smoothing"] = inf.smoothing
    return out
