r"""Predictive coding through time: PC on the unrolled computation graph of a recurrent model.

A [`SequenceModel`][dynlab.models.SequenceModel] is a one-step map ``model.step``,
$(s_t, o_t) = F_\theta(s_{t-1}, x_t)$: the next state of every layer (a PyTree) and the read-out.
PC through time gives every time step $t = 1..T$ of every sample its own activity $z_t$, a PyTree
shaped like the state (all layers, and all parts of a PyTree state such as the LSTM's
$(h, c)$ — units work unchanged), clamps $z_0 = s_0$ (``model.init_state()``) and predicts each
activity and each read-out from the activity one step earlier:

$$ (\hat z_t, \hat o_t) = F_\theta(z_{t-1}, x_t), \qquad
   \mathcal F(z, \theta) = \frac{1}{P}\sum_{\mu=1}^{P}\Big[\sum_{t=1}^{T} \tfrac12
      \|z_{\mu,t} - \hat z_{\mu,t}\|^2 + \sum_{t=1}^{T} m_{\mu t}\, \ell(\hat o_{\mu,t}, y_{\mu,t})\Big], $$

with the task's mask $m$ and $\ell = \tfrac12\|y - o\|^2$ (task loss ``mse``) or the softmax
cross-entropy (``ce_last``: the last step only; ``ce_all``: where $m > 0$).

**Inference** minimises $\mathcal F$ over all $z_t$ at once with the feed-forward rule's machinery
([`dynlab.rules.pc.minimise`][] — optax steps in a ``lax.while_loop`` — or
[`minimise_ode`][dynlab.rules.pc.minimise_ode] — a diffrax gradient flow —, with the same worst-sample
convergence criterion), on activities with leaves ``[P, T, ...]``. Each evaluation of
$\mathcal F$ is **one** call of ``model.step`` vectorised over samples and time steps (``vmap``
of ``vmap``; no scan inside an inference step), and its gradient is that call's VJP, so an
inference step costs about one BPTT forward + backward but runs in parallel over $t$.
Activities start from the forward pass (``model.trajectory``), where every state error is zero.
The rule takes any inference value of [`dynlab.rules.pc_inference`][] ([`problem`][] states
the problem): with the ``mse`` loss also Gauss–Newton in the error coordinates $e_t$, where the
forward pass with the errors added (a scan) preconditions the slow memories' ill-conditioning
away; each of its steps costs a few forward and backward scans, and it needs 3–20 of them where
momentum needs hundreds (``benchmarks/pc_time.py``).

**Learning**: the weight gradient is $\partial\mathcal F(z^*, \theta)/\partial\theta$ at the
inferred activities — a sum of local terms $e_t^\top \partial F_\theta/\partial\theta$ over steps,
again one vectorised evaluation. As the errors vanish (wide networks, short sequences) it tends to
the BPTT gradient of [`loss`][], which is the same objective without the state errors.

**Closed form** (models whose step is affine in the state, ``model.is_linear``, with ``mse``):
the read-outs are affine in the errors $e_t = z_t - \hat z_t$, $o = o^{ff} + J e$, so the
minimum is a minimum-norm problem as in [`dynlab.rules.pc_closed_form`][]. With
$\tilde r = \sqrt m \odot (y - o^{ff})$, $\tilde J = \operatorname{diag}(\sqrt m)\, J$ (rows: the
$K = T d_{out}$ read-out entries) and $S = I_K + \tilde J \tilde J^\top$,

$$ e^* = \tilde J^\top S^{-1} \tilde r, \qquad
   \mathcal F^* = \frac{1}{2P}\sum_\mu \tilde r_\mu^\top S_\mu^{-1} \tilde r_\mu, \qquad
   s - 1 = \frac{\operatorname{tr}(S - I)}{K_{scored}} , $$

and $z^*$ is the forward pass with $e^*$ added at every step. $J$ does not depend on the sample
(the map is affine); its Gram matrix costs $K$ VJPs of the unrolled network.

Choices where the papers are silent (Salvatori et al. 2021 treat one-layer RNNs):

* One activity per time step for the whole stack: inside a step, layer $\ell$ reads layer
  $\ell - 1$'s *predicted* output (a cell's output is a function of its previous state and input,
  not of its new state alone, so this is what works for every unit). For one-layer models it is
  node-per-state PC, except that the read-out at $t$ is predicted from $z_{t-1}$ through the step.
* Scale: the output term sums $\tfrac12\|y - o\|^2$ (or the cross-entropy) over the scored steps,
  like the feed-forward energy's output layer; [`loss`][] is the BPTT objective on the same
  scale. (The ``bptt`` rule uses the task's loss, a mean; the two differ by a constant factor.)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, PyTree

from dynlab import ffmodels
from dynlab.errors import ConfigError
from dynlab.losses import Loss, objective_of
from dynlab.models import SequenceModel
from dynlab.registry import register
from dynlab.rules import pc, pc_inference
from dynlab.rules.bptt import BPTT

OUTPUTS = ("mse", "ce_last", "ce_all")


def _check_output(output: str) -> None:
    if output not in OUTPUTS:
        raise ConfigError(f"predictive coding through time supports the losses {', '.join(OUTPUTS)}, got {output!r}")


# ------------------------------------------------------------------------------------------------
# Energy


def initial_activities(model, x: Array) -> PyTree:
    """The forward pass: every layer's state after every step, leaves ``[P, T, ...]``."""
    return jax.vmap(model.trajectory)(x)[1]


def previous_activities(model, z: PyTree) -> PyTree:
    """$(z_0, z_1, \\dots, z_{T-1})$ with $z_0$ the clamped initial state, leaves ``[P, T, ...]``."""

    def shift(s0, zl):
        s0 = jnp.broadcast_to(jnp.asarray(s0, zl.dtype), (zl.shape[0], 1) + zl.shape[2:])
        return jnp.concatenate([s0, zl[:, :-1]], axis=1)

    return jax.tree_util.tree_map(shift, model.init_state(), z)


def predictions(model, z: PyTree, x: Array) -> tuple[PyTree, Array]:
    r"""$(\hat z_t, \hat o_t) = F_\theta(z_{t-1}, x_t)$ for every sample and step: one ``vmap``-ed ``model.step``."""
    return jax.vmap(jax.vmap(lambda s, xt: model.step(s, xt)))(previous_activities(model, z), x)


def output_terms(ys: Array, y: Array, mask: Array, output: str) -> Array:
    r"""Per-sample output term ``[P]``: $\sum_t m_t\,\ell(o_t, y_t)$ for read-outs ``ys[P, T, O]``."""
    if output == "mse":
        return 0.5 * jnp.sum(mask[..., None] * (y - ys) ** 2, axis=(1, 2))
    if output == "ce_last":
        return optax.softmax_cross_entropy_with_integer_labels(ys[:, -1], y)
    return jnp.sum(mask * optax.softmax_cross_entropy_with_integer_labels(ys, y), axis=1)


def sample_energies(model, z: PyTree, x: Array, y: Array, mask: Array, output: str = "mse") -> Array:
    r"""$\mathcal F_\mu$ for every sample, ``[P]``."""
    pred, ys = predictions(model, z, x)
    errors = jax.tree_util.tree_map(jnp.subtract, z, pred)
    squares = sum(jnp.sum(e**2, axis=tuple(range(1, e.ndim))) for e in jax.tree_util.tree_leaves(errors))
    return 0.5 * squares + output_terms(ys, y, mask, output)


def energy(model, z: PyTree, x: Array, y: Array, mask: Array, output: str = "mse") -> Array:
    r"""$\mathcal F(z, \theta)$, the batch mean; ``x[P, T, D]``, targets and ``mask[P, T]`` as the task gives them."""
    return jnp.mean(sample_energies(model, z, x, y, mask, output))


def loss(model, x: Array, y: Array, mask: Array, output: str = "mse") -> Array:
    r"""The BPTT objective on the energy's scale: $\frac1P\sum_\mu\sum_t m_{\mu t}\,\ell(o_{\mu,t}, y_{\mu,t})$."""
    return jnp.mean(output_terms(jax.vmap(model)(x), y, mask, output))


# ------------------------------------------------------------------------------------------------
# Inference


def infer(
    model,
    x: Array,
    y: Array,
    mask: Array,
    z0: PyTree | None = None,
    *,
    optimizer: optax.GradientTransformation | None = None,
    max_steps: int = 100,
    atol: float = 0.0,
    rtol: float = 1e-4,
    output: str = "mse",
    z_exact: PyTree | None = None,
    record: bool = False,
) -> pc.Inference:
    r"""Discrete inference on all time steps in parallel (optax steps; arguments as [`dynlab.rules.pc.infer`][]).

    ``x[P, T, D]``, ``y``, ``mask[P, T]``: a task batch. ``z0``: initial activities (default: the
    forward pass), leaves ``[P, T, ...]``.
    """
    _check_output(output)
    z0 = initial_activities(model, x) if z0 is None else z0
    return pc.minimise(lambda z: sample_energies(model, z, x, y, mask, output), z0, sample_axis=0,
                       optimizer=optax.sgd(0.1) if optimizer is None else optimizer, max_steps=max_steps, atol=atol,
                       rtol=rtol, z_exact=z_exact, record=record)


def infer_ode(model, x: Array, y: Array, mask: Array, z0: PyTree | None = None, *, output: str = "mse",
              **options) -> pc.Inference:
    r"""Inference as the gradient flow $\dot z = -\nabla_z \sum_\mu \mathcal F_\mu$.

    ``options``: those of [`dynlab.rules.pc.infer_ode`][] (``t1``, ``max_steps``, ``atol``, ``rtol``, ...).
    """
    _check_output(output)
    z0 = initial_activities(model, x) if z0 is None else z0
    return pc.minimise_ode(lambda z: sample_energies(model, z, x, y, mask, output), z0, sample_axis=0, **options)


class ClosedForm(NamedTuple):
    z: PyTree  # the exact activities z*, leaves [P, T, ...]
    energy: Array  # F*
    loss: Array  # L = F at the forward pass
    s_minus_1: Array  # tr(S - I) / K_scored, mean over samples
    s_max_minus_1: Array  # lambda_max(S) - 1, mean over samples


def _unroll(model, x: Array, e: PyTree) -> tuple[Array, PyTree]:
    """One sample run with the errors ``e`` (leaves ``[T, ...]``) added to every state: (read-outs, states)."""

    def body(s, inputs):
        xt, et = inputs
        s, o = model.step(s, xt)
        s = jax.tree_util.tree_map(jnp.add, s, et)
        return s, (o, s)

    return jax.lax.scan(body, model.init_state(), (x, e))[1]


def closed_form(model, x: Array, y: Array, mask: Array) -> ClosedForm:
    """Exact equilibrium of an affine recurrent model with the ``mse`` output (module docstring)."""
    if not getattr(model, "is_linear", False):
        raise ConfigError("the closed-form PC equilibrium needs a linear recurrent model "
                          "(rnn-param with activation linear)")
    zero = jax.tree_util.tree_map(jnp.zeros_like, model.trajectory(x[0])[1])  # no errors, leaves [T, ...]
    _, vjp = jax.vjp(lambda e: _unroll(model, x[0], e)[0], zero)  # e -> J e (+ const), the same for every sample
    ys_ff = jax.vmap(lambda xs: _unroll(model, xs, zero)[0])(x)  # [P, T, O]
    shape = ys_ff.shape[1:]
    k = ys_ff[0].size
    rows = jax.vmap(vjp)(jnp.eye(k, dtype=ys_ff.dtype).reshape((k,) + shape))[0]  # J^T e_k, leaves [K, T, ...]
    gram = sum(jnp.tensordot(r, r, axes=(tuple(range(1, r.ndim)),) * 2) for r in jax.tree_util.tree_leaves(rows))
    d = jnp.sqrt(jnp.broadcast_to(mask[..., None], ys_ff.shape).reshape(x.shape[0], k))  # [P, K]
    r = d * (y - ys_ff).reshape(x.shape[0], k)
    lam, vec = jnp.linalg.eigh(d[:, :, None] * gram[None] * d[:, None, :])  # S - I = D J J^T D = V diag(lam) V^T
    v = jnp.einsum("pij,pj,pkj,pk->pi", vec, 1.0 / (1.0 + lam), vec, r)  # S^-1 r
    e_star = jax.vmap(lambda u: vjp(u.reshape(shape))[0])(d * v)
    z = jax.vmap(lambda xs, e: _unroll(model, xs, e)[1])(x, e_star)
    scored = jnp.maximum(jnp.sum(d**2, axis=1), 1.0)
    return ClosedForm(
        z=z,
        energy=0.5 * jnp.mean(jnp.sum(r * v, axis=1)),
        loss=0.5 * jnp.mean(jnp.sum(r**2, axis=1)),
        s_minus_1=jnp.mean(jnp.sum(lam, axis=1) / scored),
        s_max_minus_1=jnp.mean(lam[:, -1]),
    )


def rescaling(model, x: Array, mask: Array) -> Array:
    r"""$s - 1$ of the energy linearised at the forward pass, the mean over samples of
    $\operatorname{tr}(\tilde J \tilde J^\top) / K_{scored}$, $\tilde J = \operatorname{diag}(\sqrt m)\,
    \partial o / \partial e$ at $e = 0$ (the read-outs against the state errors of every step): for an
    affine model, where $J$ is the same at every $e$, [`closed_form`][]'s ``s_minus_1``; for any other,
    the same quantity for its linearisation, which governs the equilibrium's errors when they are
    small ($e^* \approx \tilde J^\top (I + \tilde J \tilde J^\top)^{-1}\tilde r$). One VJP of the unrolled
    network per read-out entry $K = T\,d_{out}$ of a sample."""

    def one(xs, m):
        zero = jax.tree_util.tree_map(jnp.zeros_like, model.trajectory(xs)[1])
        ys, vjp = jax.vjp(lambda e: _unroll(model, xs, e)[0], zero)
        k = ys.size
        rows = jax.vmap(vjp)(jnp.eye(k, dtype=ys.dtype).reshape((k,) + ys.shape))[0]  # J^T e_k, leaves [K, T, ...]
        norms = sum(jnp.sum(r**2, axis=tuple(range(1, r.ndim))) for r in jax.tree_util.tree_leaves(rows))  # (J J^T)_kk
        d2 = jnp.broadcast_to(m[:, None], ys.shape).reshape(k)
        return jnp.sum(d2 * norms) / jnp.maximum(jnp.sum(d2), 1.0)

    return jnp.mean(jax.vmap(one)(x, mask.astype(x.dtype)))


def problem(model, x: Array, y: Array, mask: Array, output: str = "mse", z0: PyTree | None = None) -> pc_inference.Problem:
    r"""The inference problem of a task batch for an inference value ([`dynlab.rules.pc_inference`][]).

    With the ``mse`` loss the energy of one sample is a sum of squares, the state errors
    $e_t = z_t - \hat z_t$ and the scored read-out residuals $\sqrt{m_t}(y_t - \hat o_t)$; the forward
    pass with the errors added (`_unroll`) inverts $z \mapsto e$. ``exact()`` is
    [`closed_form`][]'s $z^*$. ``z0``: the start (default: the forward pass).
    """
    _check_output(output)
    z0 = initial_activities(model, x) if z0 is None else z0

    def residuals(z, data):  # one sample, leaves [T, ...]
        xs, ys, m = data
        one = jax.tree_util.tree_map(lambda leaf: leaf[None], z)
        pred, outs = predictions(model, one, xs[None])
        e = jax.tree_util.tree_map(lambda a, b: (a - b)[0], one, pred)
        return e, jnp.sqrt(m)[:, None] * (ys - outs[0])

    def unroll(e, data):
        xs, ys, m = data
        outs, z = _unroll(model, xs, e)
        return z, jnp.sqrt(m)[:, None] * (ys - outs)

    def exact():
        if output != "mse":
            raise ConfigError("closed-form inference needs the mse loss")
        return closed_form(model, x, y, mask).z

    def astype(dtype):
        cast = functools.partial(ffmodels.astype, dtype=dtype)
        return problem(cast(model), cast(x), cast(y), cast(mask), output, cast(z0))

    least = pc_inference.SumOfSquares((x, y, mask), residuals, unroll) if output == "mse" else None
    return pc_inference.Problem(lambda z: sample_energies(model, z, x, y, mask, output), z0, 0, least, exact,
                                astype=astype)


# ------------------------------------------------------------------------------------------------
# Weight gradients and the rule


def weight_grads(model, z: PyTree, x: Array, y: Array, mask: Array, output: str = "mse") -> tuple[Array, PyTree]:
    r"""$(\mathcal F, \partial\mathcal F(z,\theta)/\partial\theta)$ at fixed activities ``z`` (the local errors)."""
    z = jax.lax.stop_gradient(z)
    return eqx.filter_value_and_grad(lambda m: energy(m, z, x, y, mask, output))(model)


@register("rule", "pc-time", "predictive coding through time: an activity per step, inferred in parallel over t")
class PCTime(pc.PC):
    r"""Predictive coding through time on any [`SequenceModel`][dynlab.models.SequenceModel] (module docstring).

    The config is the ``pc`` rule's (``inference``: a value of [`dynlab.rules.pc_inference`][] or
    ``discrete``, ``ode``, ``gauss-newton``, ``levenberg-marquardt`` — these two with the ``mse``
    loss — or ``closed-form`` — for linear ``rnn-param`` models with the ``mse`` loss —,
    ``optimizer``, ``beta``, ``max_steps``, ``atol``, ``rtol``, ``ftol``, ``t1``; ``diagnostics`` is
    called as ``diagnostics(model, x, y, mask, output, inference)``). It is a rule of its own, not a branch of ``pc``,
    because its energy, batch layout and closed form differ; ``pc`` refuses recurrent models
    with a pointer here. Metrics as ``pc``'s.
    """

    def __check_init__(self):
        _check_output(self.output)

    @property
    def output(self) -> str:
        """The energy's output term: the objective of the task's loss (``mse_sign`` trains on ``mse``)."""
        return objective_of(self.loss)

    def equilibrate(self, model, x, y, mask) -> pc.Inference:
        """Inferred activities (the rule's inference method) for a task batch."""
        return self.inference(problem(model, x, y, mask, self.output))

    def grads(self, model, batch, key):
        if not isinstance(model, SequenceModel):
            raise ConfigError(f"rule 'pc-time' trains recurrent sequence models, got a {type(model).__name__}; "
                              "for feed-forward models use rule 'pc'")
        x, y, mask = batch
        inf = self.equilibrate(model, x, y, mask)
        f_value, grads = weight_grads(model, inf.z, x, y, mask, self.output)
        metrics = self.evaluate(model, batch)
        metrics.update(energy=f_value, **pc.inference_metrics(inf, x.dtype))
        if self.diagnostics is not None:
            metrics.update(self.diagnostics(model, x, y, mask, self.output, inf))
        return grads, metrics


def _objective(output: str):
    def objective(ys, y, mask):
        return jnp.mean(output_terms(ys, y, mask, output))

    return objective


OBJECTIVES = {o: Loss(_objective(o), _objective(o), "objective", False) for o in OUTPUTS}
r"""[`loss`][] (the energy's output term at the forward pass, $\frac1P\sum_\mu\sum_t m_{\mu t}\,\ell$)
as a loss value per output, for a rule to train on."""


def matching_bptt(output: str) -> BPTT:
    """BPTT of the objective PC through time approaches ([`loss`][] on the energy's scale, and no
    regulariser: the energy has none), the rule the PC-through-time comparisons train against."""
    _check_output(output)
    return BPTT(loss=OBJECTIVES[output], penalties=False)
