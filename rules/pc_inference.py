r"""Inference for predictive coding as values: how the activities reach the energy's minimum.

A PC rule ([`pc`][dynlab.rules.pc], [`pc_time`][dynlab.rules.pc_time]) states its inference problem
as a [`Problem`][] — the per-sample energies $\mathcal F_\mu(z)$ over a PyTree of
activities, where to start (the forward pass), and, when the energy is a sum of squares, that
structure ([`SumOfSquares`][]) — and hands it to an inference **value**, the way diffrax takes
a solver and a step-size controller:

* [`Descent`][] — steps of any optax optimiser on the activities (the paper's gradient
  descent, heavy-ball momentum, Adam; [`minimise`][]);
* [`GradientFlow`][] — $\dot z = -\nabla_z \mathcal F$ solved by diffrax
  ([`minimise_ode`][]);
* [`ErrorCoordinates`][] — an optimistix solver on the energy in the error coordinates below:
  [`gauss_newton`][] ([`DampedGaussNewton`][]: Gauss–Newton steps with a line search that
  tolerates the energy's rounding, [`EnergyBacktracking`][]), [`levenberg_marquardt`][]
  ([`LevenbergMarquardt`][]), their linear subproblems solved by lineax (matrix free,
  [`lsmr`][]), or [`lbfgs`][] (quasi-Newton on the same coordinates); or any other
  ``optimistix.AbstractGaussNewton`` or line-search minimiser;
* [`ClosedForm`][] — the exact minimiser (linear networks with the mse loss);
* [`Smoothed`][] — any of the iterative ones, continued over smoothed energies where the energy
  has kinks (ReLU, max).

All of them stop on one [`Criterion`][], and all return an [`Inference`][].
Configs spell them as strings (``inference = "gauss-newton"``); [`from_config`][] is the one
place where a spelling becomes a value.

**The energy as a sum of squares.** For one sample, with the state errors
$e_k = z_k - f_k(z_{k-1})$ ($k$ the layer, or the time step; $z_0$ clamped) and the scored
output residuals $\rho = \sqrt{m}\odot(y - o)$ (loss ``mse``),

$$ \mathcal F_\mu = \tfrac12 \|e\|^2 + \tfrac12 \|\rho\|^2 . $$

**Error coordinates.** Gauss–Newton in the activities solves $\min_\delta \|r + J_z \delta\|$
at every step, and $J_z$ is ill-conditioned when the network has slow memories: the block of
$\partial e / \partial z = L$ is lower bidiagonal with $-\partial f_k / \partial z_{k-1}$ under
the identity, and a trace that keeps a fraction $\kappa$ per step gives the energy a curvature
$\propto (1 - \kappa)^2$ along it (condition number $\propto \tau^2$). The map $z \mapsto e$ is
invertible — $z_k = f_k(z_{k-1}) + e_k$ is the forward pass with the errors added — so the
solver works in $e$, which is Gauss–Newton in $z$ preconditioned by $L^{-1}$ (applied exactly
by that forward pass). There the residual is $r(e) = (e, \rho(z(e)))$ with Jacobian
$\begin{pmatrix} I \\ -M \end{pmatrix}$, $M = \partial o / \partial e$ ($K \times n$, $K$ the
scored read-out entries of the sample), and the Gauss–Newton matrix is

$$ J_e^\top J_e = I + M^\top M , $$

with eigenvalues 1 and $1 + \sigma_i(M)^2$: its condition number is $1 + \|M\|^2$ whatever
the time constants, and a Krylov solver on it ([`lsmr`][], one JVP and one VJP of the forward
pass per iteration) ends in at most $K + 1$ iterations. The direction
is the one Gauss–Newton takes in $z$ ($J_z = J_e L$, so $\delta z = L^{-1}\delta e$ to first
order); the step is applied through the network's own forward pass. For a network that is
affine in its activities, $r(e)$ is affine and one step lands on the exact minimiser
$e^* = M^\top (I + M M^\top)^{-1} \rho_0$ — the closed form of
[`dynlab.rules.pc_time.closed_form`][] and [`dynlab.rules.pc_closed_form.exact_activities`][].
Samples do not interact, so each sample is solved on its own (``vmap``).

Gauss–Newton's model leaves out the residuals times the read-out's second derivatives, which
matter where the loss is far from fitted: full steps then overshoot (the vanilla tanh RNN
cycles), hence the line search of [`DampedGaussNewton`][], and its convergence is only
linear (on the narrow tanh and block-diagonal RNNs at T = 50 neither it nor
Levenberg–Marquardt meets the criterion below within 100–300 steps on every cell). L-BFGS in
the same coordinates learns that curvature and needs 4–40 steps on every cell of the ARU, GRU,
LSTM, block-diagonal and tanh RNNs of ``cross-pc-alignment``, where heavy-ball momentum
needs 170–2000 (``benchmarks/pc_time.py``).

**Nonsmooth energies.** Where the energy is not differentiable — ReLU kinks (the ELM neuron's
dendritic MLP, the ELM network's read-out), ties of a max (SITH-RNN's max over τ) — its
minimum can sit on a kink, where no gradient vanishes: no method then meets the gradient test.
Measured on the ELM neuron (width 16, T = 5, float64): Levenberg–Marquardt stops with
$g/g_0 \approx 10^{-2}$ at a point where one ReLU pre-activation is $3\cdot10^{-6}$ and the
others at least $1.5\cdot10^{-2}$; there, gradients at points within $10^{-7}$ of it have a
convex combination of norm $4\cdot10^{-5}\,g_0$ — a kink minimum (Clarke stationary), which the
gradient test cannot certify. With a squared ReLU (differentiable) the same solve converges.
[`Smoothed`][] is the remedy: the same method on energies whose kinks are smoothed to within
$\mu$ ([`dynlab.rules.smoothing`][]), for decreasing $\mu$; their gradients do vanish, and the
solutions approach a Clarke-stationary point of the exact energy as $\mu \to 0$ (measured on the
ELM neuron in float64: consecutive solutions for $\mu = 10^{-2}, 10^{-3}, 10^{-4}, 10^{-5}$ differ
by 0.044, 0.0057, 0.00072 — the $O(\mu)$ rate).

**The criterion** ([`Criterion`][]). After iteration $k$, with
$g = \|\nabla_z \mathcal F\|$ in the activities' own coordinates (for every method), inference
has converged when

$$ g_k \le \text{atol} + \text{rtol}\, g_0 \quad\text{and}\quad
   \frac{|\mathcal F_k - \mathcal F_{k-1}|}{\max(|\mathcal F_k|, |\mathcal F_{k-1}|)} \le \text{ftol} , $$

the relative gradient norm and the relative energy change of the last iteration. $g$ is the
worst sample's and $g_0$ the worst at the start; the first-order methods move the batch together
and test the batch energy, [`ErrorCoordinates`][] solves each sample on its own and tests each
sample's gradient against that threshold and its own energy change (which implies the batch
test); [`GradientFlow`][] reads the energy change as the flow's rate
$\|\nabla_z\mathcal F\|^2 / \mathcal F$. The gradient threshold also includes the rounding floor
$16\,\epsilon\,\|z\|$ ([`rounding_floor`][]; $10^{-5}$–$10^{-4}$ in float32 at the
``cross-pc-alignment`` sizes): a gradient below it is noise. A run that stops at ``max_steps``
without meeting both tests is *not converged*; the result carries the final $g / g_0$ and energy
change either way.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import math
from typing import Callable, Literal, NamedTuple, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import optax
import optimistix as optx
from jaxtyping import Array, PyTree

from dynlab import ffmodels
from dynlab.errors import ConfigError, require_positive
from dynlab.rules import smoothing

INFERENCES = ("discrete", "ode", "closed-form", "gauss-newton", "levenberg-marquardt", "lbfgs")
"""The config spellings of [`from_config`][]."""


# ------------------------------------------------------------------------------------------------
# The model-free core: first-order descent and gradient flow on any per-sample energy


def energy_gradient(sample_energies: Callable[[PyTree], Array], z: PyTree, sample_axis: int):
    r"""$(\sum_\mu \mathcal F_\mu, \nabla_z \sum_\mu \mathcal F_\mu, g)$ for any per-sample energy ``z -> [P]``.

    ``z`` is any PyTree whose leaves hold the samples along ``sample_axis``; $g$ is the worst
    sample's gradient norm over all leaves.
    """
    total, grad = jax.value_and_grad(lambda z: jnp.sum(sample_energies(z)))(z)
    per_sample = sum(jnp.sum(g**2, axis=tuple(i for i in range(g.ndim) if i != sample_axis))
                     for g in jax.tree_util.tree_leaves(grad))
    return total, grad, jnp.sqrt(jnp.max(per_sample))


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
    grad_norm0: Array | None = None  # worst-sample |grad_z F| at the start (the criterion's g_0)
    energy_change: Array | None = None  # relative energy change over the last iteration (Criterion)
    smoothing: Array | None = None  # Smoothed: the width mu of the energy the result is for (0: the exact energy)


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
    ftol: float | None = None,
    g0: Array | None = None,
) -> Inference:
    r"""Optax steps on the activities ``z`` until $g \le \text{atol} + \text{rtol}\,g_0$ or ``max_steps``.

    The model-free core of [`dynlab.rules.pc.infer`][]: ``sample_energies`` maps a PyTree of activities (samples
    along ``sample_axis`` of every leaf) to the per-sample energies ``[P]``; the steps descend
    their sum, inside one ``lax.while_loop``. Arguments as in [`dynlab.rules.pc.infer`][]; with ``ftol`` the
    criterion also asks the batch energy to be stationary, $|\mathcal F_k - \mathcal F_{k-1}| \le
    \text{ftol}\,\max(|\mathcal F_k|, |\mathcal F_{k-1}|)$ (at $k = 0$, before any step, the
    change counts as 0), the [`Criterion`][dynlab.rules.pc_inference.Criterion]. ``g0``: the criterion's
    $g_0$ (default: the gradient norm at ``z0``).
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
        k, z, state, previous, _, _, g0, _, buffers = carry
        total, grad, g = energy_gradient(sample_energies, z, sample_axis)
        g0 = jnp.where(k == 0, g, g0) if given is None else g0
        threshold = atol + rtol * g0
        change = relative_change(total, jnp.where(k == 0, total, previous))
        buffers = diagnostics(k, z, total, g, buffers)
        met = (g <= threshold) if ftol is None else (g <= threshold + rounding_floor(z, sample_axis)) & (change <= ftol)
        done = met | (k >= max_steps)
        updates, new_state = optimizer.update(grad, state, z)

        def keep(old, new):
            return jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), old, new)

        return k + jnp.where(done, 0, 1), keep(z, optax.apply_updates(z, updates)), keep(state, new_state), total, \
            change, g, g0, done, buffers

    zero, given = jnp.zeros((), dtype), g0
    carry = (jnp.asarray(0), z0, optimizer.init(z0), zero, zero, zero, zero if g0 is None else jnp.asarray(g0, dtype),
             jnp.asarray(False), (nan, nan, nan))
    k, z, _, total, change, g, g0, _, (be, bg, bd) = jax.lax.while_loop(lambda c: ~c[7], body, carry)
    traces = (be, bg, bd if z_exact is not None else None) if record else (None, None, None)
    converged = (g <= atol + rtol * g0) if ftol is None else \
        (g <= atol + rtol * g0 + rounding_floor(z, sample_axis)) & (change <= ftol)
    return Inference(z, k, converged, total / p, g, *traces, grad_norm0=g0, energy_change=change)


def relative_change(new: Array, old: Array) -> Array:
    r"""$|\mathcal F_{new} - \mathcal F_{old}| / \max(|\mathcal F_{new}|, |\mathcal F_{old}|)$ (0 when both are 0)."""
    scale = jnp.maximum(jnp.abs(new), jnp.abs(old))
    return jnp.where(scale > 0, jnp.abs(new - old) / jnp.where(scale > 0, scale, 1.0), 0.0)


def minimise_ode(
    sample_energies: Callable[[PyTree], Array],
    z0: PyTree,
    *,
    sample_axis: int,
    t1: float = 1e4,
    max_steps: int = 4096,
    atol: float = 0.0,
    rtol: float = 1e-4,
    solver=None,
    controller=None,
    ftol: float | None = None,
    g0: Array | None = None,
) -> Inference:
    r"""The gradient flow $\dot z = -\nabla_z \sum_\mu \mathcal F_\mu$ of any per-sample energy, solved by diffrax.

    The model-free core of [`dynlab.rules.pc.infer_ode`][] (arguments as there; ``sample_energies`` and
    ``sample_axis`` as in [`minimise`][]). ``solver``: a diffrax solver (default ``Tsit5()``);
    ``controller``: a diffrax step-size controller (default ``PIDController(rtol=1e-6, atol=1e-8)``). With ``ftol`` the event also asks the energy to be
    stationary: along the flow $d\mathcal F/dt = -\|\nabla_z\mathcal F\|^2$, so the relative change
    per unit time $\|\nabla_z \sum_\mu\mathcal F_\mu\|^2 / \sum_\mu\mathcal F_\mu \le \text{ftol}$
    (reported as ``energy_change``). ``g0`` as in [`minimise`][].
    """
    import diffrax

    require_positive("max_steps", max_steps)
    p = _samples(z0, sample_axis)
    if g0 is None:
        _, _, g0 = energy_gradient(sample_energies, z0, sample_axis)
    threshold = atol + rtol * g0

    def vector_field(t, z, args):
        return jax.tree_util.tree_map(jnp.negative, energy_gradient(sample_energies, z, sample_axis)[1])

    def rate(total, grad):  # |dF/dt| / F
        return optax.tree.norm(grad, squared=True) / jnp.maximum(jnp.abs(total), jnp.finfo(total.dtype).tiny)

    def met(z):
        total, grad, g = energy_gradient(sample_energies, z, sample_axis)
        return (g <= threshold) if ftol is None else \
            (g <= threshold + rounding_floor(z, sample_axis)) & (rate(total, grad) <= ftol)

    def steady(t, z, args, **kwargs):
        return met(z)

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Tsit5() if solver is None else solver,
        t0=0.0,
        t1=t1,
        dt0=None,
        y0=z0,
        stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8) if controller is None else controller,
        event=diffrax.Event(steady),
        saveat=diffrax.SaveAt(t1=True),
        max_steps=max_steps,
        throw=False,
    )
    z = jax.tree_util.tree_map(lambda leaf: leaf[-1], sol.ys)
    total, grad, g = energy_gradient(sample_energies, z, sample_axis)
    converged = (sol.result == diffrax.RESULTS.event_occurred) | met(z)
    return Inference(z, sol.stats["num_accepted_steps"], converged, total / p, g, grad_norm0=g0,
                     energy_change=rate(total, grad))


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


# ------------------------------------------------------------------------------------------------
# The criterion and the problem


def _tolerance(name: str, value, *, positive: bool = False) -> None:
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    if bad or value < 0 or (positive and value == 0):
        raise ConfigError(f"{name} must be a {'positive' if positive else 'non-negative'} finite number, got {value!r}")


class Criterion(eqx.Module):
    r"""When inference has converged (module docstring): $g_k \le \text{atol} + \text{rtol}\,g_0$ and the
    relative energy change of the last iteration $\le$ ``ftol`` (``None``: the gradient test alone);
    at most ``max_steps`` iterations.

    ``rtol = atol = 0`` never meets the gradient test: inference runs its whole budget.
    """

    rtol: float = eqx.field(static=True, default=1e-4)
    atol: float = eqx.field(static=True, default=0.0)
    ftol: float | None = eqx.field(static=True, default=1e-6)
    max_steps: int = eqx.field(static=True, default=100)

    def __check_init__(self):
        _tolerance("rtol", self.rtol)
        _tolerance("atol", self.atol)
        if self.ftol is not None:
            _tolerance("ftol", self.ftol, positive=True)
        require_positive("max_steps", self.max_steps)

    def met(self, g: Array, g0: Array, change: Array, floor: Array | float = 0.0) -> Array:
        """Both tests, elementwise (``floor``: [`rounding_floor`][], added to the gradient threshold)."""
        ok = g <= self.atol + self.rtol * g0 + floor
        return ok if self.ftol is None else ok & (change <= self.ftol)


ROUNDING = 16.0
"""The gradient test's floor in units of the dtype's epsilon times the activities' norm ([`rounding_floor`][])."""


def rounding_floor(z: PyTree, sample_axis: int | None = None) -> Array:
    r"""$16\,\epsilon\,\|z\|$ (the worst sample's with ``sample_axis``): the size of the energy gradient that the
    rounding of the prediction errors $z_k - f_k(z_{k-1})$ alone produces ($\epsilon$ the dtype's machine
    epsilon). A gradient below it is noise, so the criterion counts it as vanished: in float32 a relative
    test $g \le 10^{-4} g_0$ is otherwise out of reach where the forward pass is already close to the
    equilibrium ($g_0$ small).
    """
    leaves = jax.tree_util.tree_leaves(z)
    eps = jnp.finfo(leaves[0].dtype).eps
    if sample_axis is None:
        return ROUNDING * eps * optax.tree.norm(z)
    sq = sum(jnp.sum(leaf**2, axis=tuple(i for i in range(leaf.ndim) if i != sample_axis)) for leaf in leaves)
    return ROUNDING * eps * jnp.sqrt(jnp.max(sq))


class SumOfSquares(NamedTuple):
    r"""The energy of one sample as $\tfrac12\|e\|^2 + \tfrac12\|\rho\|^2$ (module docstring).

    ``data``: the per-sample inputs, samples along axis 0 of every leaf (the solver ``vmap``s over them).
    ``residuals(z, d) -> (e, rho)``: the state errors (shaped like ``z``) and output residuals of one sample.
    ``unroll(e, d) -> (z, rho)``: the forward pass with the errors ``e`` added, and its output residuals,
    so that ``residuals(unroll(e, d)[0], d) == (e, rho)``.
    """

    data: PyTree
    residuals: Callable[[PyTree, PyTree], tuple[PyTree, Array]]
    unroll: Callable[[PyTree, PyTree], tuple[PyTree, Array]]


class Problem(NamedTuple):
    """What a rule hands to an inference value.

    ``sample_energies(z) -> [P]``; ``z0`` the start (leaves hold the samples along ``sample_axis``);
    ``least_squares`` the energy as a [`SumOfSquares`][] (``None`` when it is not one, e.g. a
    cross-entropy output); ``exact()`` the exact minimiser (raises [`ConfigError`][] where there
    is none); ``reference`` the activities where the [`Criterion`][]'s $g_0$ is measured (default
    ``z0``; a warm start keeps the forward pass's); ``astype(dtype)`` the same problem with every
    floating array — the model's weights, the batch, ``z0`` — cast to ``dtype`` (call it under
    ``jax.enable_x64`` for float64; ``None`` where the rule cannot restate its problem).
    """

    sample_energies: Callable[[PyTree], Array]
    z0: PyTree
    sample_axis: int
    least_squares: SumOfSquares | None = None
    exact: Callable[[], PyTree] | None = None
    reference: PyTree | None = None
    astype: Callable[[object], "Problem"] | None = None

    def initial_gradient(self) -> Array:
        """The criterion's $g_0$: the worst sample's gradient norm at ``reference`` (default ``z0``)."""
        return energy_gradient(self.sample_energies, self.z0 if self.reference is None else self.reference,
                               self.sample_axis)[2]


# ------------------------------------------------------------------------------------------------
# Inference values


class AbstractInference(eqx.Module):
    """An inference method: ``method(problem)`` is an [`Inference`][dynlab.rules.pc_inference.Inference]."""

    @abc.abstractmethod
    def __call__(self, problem: Problem) -> Inference:
        """Minimise ``problem``'s energy over the activities."""

    def check_loss(self, output: str) -> None:
        """Raise [`ConfigError`][] if the method cannot minimise the energy of the ``output`` loss."""


class Descent(AbstractInference):
    """Optax steps on the activities (``optax.sgd(β)`` is the paper's $z \\leftarrow z - \\beta\\nabla_z\\mathcal F$)."""

    optimizer: optax.GradientTransformation = eqx.field(static=True)
    criterion: Criterion = Criterion()

    def __call__(self, problem: Problem) -> Inference:
        c = self.criterion
        g0 = None if problem.reference is None else problem.initial_gradient()
        return minimise(problem.sample_energies, problem.z0, sample_axis=problem.sample_axis,
                        optimizer=self.optimizer, max_steps=c.max_steps, atol=c.atol, rtol=c.rtol, ftol=c.ftol, g0=g0)


class GradientFlow(AbstractInference):
    """$\\dot z = -\\nabla_z\\mathcal F$ by diffrax up to ``t1``, as diffrax takes it: a ``solver``
    (default ``diffrax.Tsit5()``) and a step-size ``controller`` (default
    ``diffrax.PIDController(rtol=1e-6, atol=1e-8)``) passed as values; ``criterion.max_steps``
    bounds the solver steps."""

    solver: object = eqx.field(static=True, default=None)
    controller: object = eqx.field(static=True, default=None)
    t1: float = eqx.field(static=True, default=1e4)
    criterion: Criterion = Criterion(max_steps=4096)

    def __check_init__(self):
        require_positive("t1", self.t1, integer=False)

    def __call__(self, problem: Problem) -> Inference:
        c = self.criterion
        return minimise_ode(problem.sample_energies, problem.z0, sample_axis=problem.sample_axis, t1=self.t1,
                               max_steps=c.max_steps, atol=c.atol, rtol=c.rtol, solver=self.solver,
                               controller=self.controller, ftol=c.ftol, g0=problem.initial_gradient())


class ClosedForm(AbstractInference):
    """The exact minimiser, from the rule (linear networks with the mse loss)."""

    def __call__(self, problem: Problem) -> Inference:
        if problem.exact is None:
            raise ConfigError("closed-form inference needs a linear network with the mse loss")
        z = problem.exact()
        total, _, g = energy_gradient(problem.sample_energies, z, problem.sample_axis)
        p = jax.tree_util.tree_leaves(z)[0].shape[problem.sample_axis]
        return Inference(z, jnp.asarray(0), jnp.asarray(True), total / p, g)

    def check_loss(self, output: str) -> None:
        if output != "mse":
            raise ConfigError(f"closed-form inference needs the mse loss, got {output!r}")


def lsmr(rtol: float = 1e-6, max_steps: int = 50) -> lx.AbstractLinearSolver:
    r"""The default linear solver: LSMR (``lineax.LSMR``; Fong & Saunders 2011), matrix free — one JVP and one
    VJP of the forward pass per iteration —, stopped when $\|J^\top r\| \le \text{rtol}\,\|J\|\,\|r\|$.

    In the error coordinates it is MINRES on $I + M^\top M$: at most $K + 1$ iterations. (``lineax.CG`` on
    the normal equations does as well, but its elementwise stopping test never passes on the exact zeros
    the errors of the last step give — they reach no read-out — and its NaN ends the solve after one step.)
    """
    _tolerance("linear solver rtol", rtol, positive=True)
    require_positive("linear solver max_steps", max_steps)
    return lx.LSMR(rtol=rtol, atol=0.0, max_steps=max_steps)


class ErrorCoordinates(AbstractInference):
    r"""An optimistix solver on the energy in the error coordinates (module docstring), each sample on its own.

    ``solver``: an ``optimistix.AbstractGaussNewton`` (``GaussNewton``, ``LevenbergMarquardt``,
    ``Dogleg``, [`DampedGaussNewton`][], [`LevenbergMarquardt`][], ...) on the residuals
    $r(e)$, with a lineax linear solver for $\min_\delta\|r + J\delta\|$ (matrix free: [`lsmr`][]),
    or an ``optimistix.AbstractMinimiser`` (e.g. L-BFGS, [`lbfgs`][]) on
    $\tfrac12\|r(e)\|^2$. Its own termination tolerances are not used: the [`Criterion`][]
    decides, on the activities. Each iteration is one solver step (Gauss–Newton: one linearisation
    of the forward pass and one linear solve; L-BFGS: one energy and gradient, i.e. a forward and
    a backward scan). See [`gauss_newton`][], [`levenberg_marquardt`][], [`lbfgs`][].

    ``patience``: give a sample up (not converged) once its gradient norm has not halved in that many
    steps — what happens on the nonsmooth energies, whose gradient cannot vanish (module docstring);
    ``None`` spends the whole budget.
    """

    solver: optx.AbstractGaussNewton  # a PyTree: it holds arrays (its line search's step size)
    criterion: Criterion = Criterion(max_steps=50)
    patience: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.patience is not None:
            require_positive("patience", self.patience)
        if not isinstance(self.solver, (optx.AbstractGaussNewton, optx.AbstractMinimiser)) \
                or not hasattr(self.solver, "search"):
            raise ConfigError(f"error-coordinate inference needs an optimistix Gauss-Newton-type solver (GaussNewton, "
                              f"LevenbergMarquardt, Dogleg) or a line-search minimiser (LBFGS, BFGS), got "
                              f"{type(self.solver).__name__}")

    def check_loss(self, output: str) -> None:
        if output != "mse":
            raise ConfigError(f"inference in the error coordinates (gauss-newton, levenberg-marquardt, lbfgs) needs an "
                              f"energy that is a sum of squares (loss mse), got loss "
                              f"{output!r}; use inference 'discrete' or 'ode'")

    def __call__(self, problem: Problem) -> Inference:
        form = problem.least_squares
        if form is None:
            raise ConfigError("inference in the error coordinates needs an energy that is a sum of squares (loss mse); "
                              "use inference 'discrete' or 'ode'")
        g0 = problem.initial_gradient()
        one = jax.vmap(lambda z0, d: _solve_one(self.solver, self.criterion, form, z0, d, g0, self.patience),
                       in_axes=(problem.sample_axis, 0), out_axes=(problem.sample_axis, 0, 0, 0, 0, 0))
        z, steps, converged, energy, g, change = one(problem.z0, form.data)
        return Inference(z, jnp.max(steps), jnp.all(converged), jnp.mean(energy), jnp.max(g), grad_norm0=g0,
                         energy_change=jnp.max(change))


def _sum_squares(tree) -> Array:
    return sum(jnp.sum(leaf**2) for leaf in jax.tree_util.tree_leaves(tree))


def _solve_one(solver, criterion: Criterion, form: SumOfSquares, z0: PyTree, data: PyTree, g0_worst: Array,
               patience: int | None = None):
    """One sample: (z, steps, converged, F, g, relative energy change). Its gradient test is the batch's,
    against the worst sample's initial gradient ``g0_worst`` (so all samples converged is the batch test).

    The criterion is read at the solver's accepted point, after each step. The solver's function
    returns the unrolled activities as its auxiliary output, so the test costs one gradient of the
    energy in the activities (parallel over time) and no forward pass of its own: each step is one
    linearised forward scan and its transpose.
    """

    def residuals(e, args):  # optimistix's y -> (residuals, aux), in error coordinates; aux: the activities
        z, rho = form.unroll(e, data)
        return (e, rho), z

    if isinstance(solver, optx.AbstractMinimiser):  # a minimiser takes the energy itself
        def residuals(e, args):  # noqa: F811
            z, rho = form.unroll(e, data)
            return 0.5 * (_sum_squares(e) + _sum_squares(rho)), z

    def energy(z):
        e, rho = form.residuals(z, data)
        return 0.5 * (_sum_squares(e) + _sum_squares(rho))

    e0 = form.residuals(z0, data)[0]
    f_struct, aux_struct = jax.eval_shape(lambda: residuals(e0, None))
    state = solver.init(residuals, e0, None, {}, f_struct, aux_struct, frozenset())
    # optimistix's first step only evaluates the start (and accepts it); every later one moves.
    y, state, _ = solver.step(residuals, e0, None, {}, state, frozenset())
    dynamic, static = eqx.partition(state, eqx.is_array)
    f0, grad0 = jax.value_and_grad(energy)(state.aux)
    g0 = optax.tree.norm(grad0)

    # y: the solver's last accepted point, z its activities (the solver's aux), f its energy;
    # change: the relative energy change at the last acceptance (a rejected trial leaves y, and
    # the test, as they were). mark, since: the gradient norm to halve, and the steps taken since
    # it last halved (for ``patience``).
    def body(carry):
        k, y, dynamic, accepted, _, f, _, change, mark, since, _ = carry
        state = eqx.combine(dynamic, static)
        y, state, _ = solver.step(residuals, y, None, {}, state, frozenset())
        z = state.aux
        f_new, grad = jax.value_and_grad(energy)(z)
        g = optax.tree.norm(grad)
        change = jnp.where(state.num_accepted_steps > accepted, relative_change(f_new, f), change)
        halved = g <= 0.5 * mark
        mark, since = jnp.where(halved, g, mark), jnp.where(halved, 0, since + 1)
        stalled = False if patience is None else since >= patience
        done = criterion.met(g, g0_worst, change, rounding_floor(z)) | (k + 1 >= criterion.max_steps) | stalled
        return (k + 1, y, eqx.partition(state, eqx.is_array)[0], state.num_accepted_steps, z, f_new, g, change, mark,
                since, done)

    zero = jnp.zeros((), f0.dtype)
    carry = (jnp.asarray(0), y, dynamic, state.num_accepted_steps, state.aux, f0, g0, zero, g0, jnp.asarray(0),
             jnp.asarray(False))
    k, _, _, _, z, f, g, change, _, _, _ = jax.lax.while_loop(lambda c: ~c[-1], body, carry)
    return z, k, criterion.met(g, g0_worst, change, rounding_floor(z)), f, g, change


class _SearchState(eqx.Module):
    step_size: Array


class EnergyBacktracking(optx.AbstractSearch):
    r"""Backtracking on the energy that tolerates its rounding: a step $\delta$ (scaled by the step size) is
    accepted when

    $$ \mathcal F(y + \delta) \le \mathcal F(y) + c\,\nabla\mathcal F(y)^\top\delta + r\,\epsilon\,|\mathcal F(y)| $$

    ($c$ = ``slope``, $\epsilon$ the dtype's machine epsilon, $r$ = ``rounding``), else the step size is
    multiplied by ``decrease_factor``; accepted steps restart at 1. Without the last term (optimistix's
    ``BacktrackingArmijo``) a float32 solve stalls once the energy changes less than its rounding, long
    before the gradient is small: the damped steps are then rejected forever.
    """

    decrease_factor: float = eqx.field(static=True, default=0.5)
    slope: float = eqx.field(static=True, default=0.1)
    rounding: float = eqx.field(static=True, default=16.0)

    def init(self, y, f_info_struct):
        return _SearchState(jnp.array(1.0))

    def step(self, first_step, y, y_eval, f_info, f_eval_info, state):
        predicted = f_info.compute_grad_dot(jax.tree_util.tree_map(jnp.subtract, y_eval, y))
        f, f_new = f_info.as_min(), f_eval_info.as_min()
        slack = self.rounding * jnp.finfo(f.dtype).eps * jnp.abs(f)
        accept = first_step | ((f_new <= f + self.slope * predicted + slack) & (predicted <= 0))
        step_size = jnp.where(accept, 1.0, self.decrease_factor * state.step_size).astype(state.step_size.dtype)
        return step_size, accept, optx.RESULTS.successful, _SearchState(step_size)


class DampedGaussNewton(optx.AbstractGaussNewton):
    """Gauss–Newton steps (``optimistix.NewtonDescent`` with ``linear_solver``) shortened by a line search
    (default [`EnergyBacktracking`][]): full steps where they lower the energy, so the fast local
    convergence stays, and shorter ones where a full step would overshoot (the vanilla tanh RNN)."""

    rtol: float
    atol: float
    norm: Callable
    descent: optx.NewtonDescent
    search: optx.AbstractSearch
    verbose: Callable

    def __init__(self, linear_solver: lx.AbstractLinearSolver | None = None, search: optx.AbstractSearch | None = None):
        self.rtol, self.atol, self.norm = 1e-8, 1e-8, optx.max_norm  # optimistix's own termination: unused here
        self.descent = optx.NewtonDescent(linear_solver=lsmr() if linear_solver is None else linear_solver)
        self.search = EnergyBacktracking() if search is None else search
        self.verbose = _quiet


def _quiet(**kwargs) -> None:
    return None


class RoundingTrustRegion(optx.ClassicalTrustRegion):
    r"""optimistix's classical trust region (accept when the energy falls by at least ``low_cutoff`` of the
    Gauss–Newton model's prediction; grow the region on good agreement, shrink it on rejection) that also
    accepts, without shrinking, a step whose energy change is within the rounding $r\,\epsilon\,|\mathcal F|$:
    near the minimum a float32 energy cannot confirm a predicted decrease, and the region would otherwise
    shrink to nothing before the gradient is small."""

    rounding: float = eqx.field(static=True, default=16.0)

    def step(self, first_step, y, y_eval, f_info, f_eval_info, state):
        predicted = self.predict_reduction(jax.tree_util.tree_map(jnp.subtract, y_eval, y), f_info)
        f, f_new = f_info.as_min(), f_eval_info.as_min()
        diff = f_new - f
        slack = self.rounding * jnp.finfo(f.dtype).eps * jnp.abs(f)
        ratio_ok = diff <= self.low_cutoff * predicted
        accept = first_step | ratio_ok | (jnp.abs(diff) <= slack)
        good = (diff < self.high_cutoff * predicted) & (predicted < 0) & ~first_step
        mul = jnp.where(good, self.high_constant, 1.0)
        mul = jnp.where(accept, mul, self.low_constant)
        step_size = (mul * state.step_size).astype(state.step_size.dtype)
        return step_size, accept, optx.RESULTS.successful, type(state)(step_size=step_size)


class LevenbergMarquardt(optx.AbstractGaussNewton):
    r"""Levenberg–Marquardt: damped Gauss–Newton steps $(J^\top J + \lambda I)\delta = -J^\top r$
    (``optimistix.DampedNewtonDescent``, $\lambda$ = 1 / the trust region's step size) in a
    [`RoundingTrustRegion`][]; ``optimistix.LevenbergMarquardt`` with a trust region that does not
    collapse on float32 rounding."""

    rtol: float
    atol: float
    norm: Callable
    descent: optx.DampedNewtonDescent
    search: optx.AbstractSearch
    verbose: Callable

    def __init__(self, linear_solver: lx.AbstractLinearSolver | None = None, search: optx.AbstractSearch | None = None):
        self.rtol, self.atol, self.norm = 1e-8, 1e-8, optx.max_norm  # optimistix's own termination: unused here
        self.descent = optx.DampedNewtonDescent(linear_solver=lsmr() if linear_solver is None else linear_solver)
        self.search = RoundingTrustRegion() if search is None else search
        self.verbose = _quiet


def gauss_newton(criterion: Criterion = Criterion(max_steps=50), linear_solver: lx.AbstractLinearSolver | None = None,
                 patience: int | None = None) -> ErrorCoordinates:
    """Gauss–Newton in the error coordinates with a line search ([`DampedGaussNewton`][]); each step is one
    linear solve (default [`lsmr`][]). Full steps: ``ErrorCoordinates(optimistix.GaussNewton(...))``."""
    return ErrorCoordinates(DampedGaussNewton(linear_solver), criterion, patience)


def levenberg_marquardt(criterion: Criterion = Criterion(max_steps=50),
                        linear_solver: lx.AbstractLinearSolver | None = None, patience: int | None = None) -> ErrorCoordinates:
    """Levenberg–Marquardt ([`LevenbergMarquardt`][]: damped steps in a trust region) in the error coordinates."""
    return ErrorCoordinates(LevenbergMarquardt(linear_solver), criterion, patience)


def lbfgs(criterion: Criterion = Criterion(max_steps=100), history_length: int = 10, patience: int | None = None
          ) -> ErrorCoordinates:
    """L-BFGS (``optimistix.LBFGS``, its line search replaced by [`EnergyBacktracking`][]) on the energy in
    the error coordinates: a quasi-Newton method preconditioned by the forward pass. It learns the
    curvature Gauss–Newton leaves out (large residuals times the read-out's second derivatives) at
    the cost of one forward and one backward scan per step."""
    require_positive("history_length", history_length)
    solver = optx.LBFGS(rtol=1e-8, atol=1e-8, history_length=history_length)
    return ErrorCoordinates(eqx.tree_at(lambda s: s.search, solver, EnergyBacktracking()), criterion, patience)


class Smoothed(AbstractInference):
    r"""Inference on nonsmooth energies by continuation: the ``inner`` method on the smoothed energy
    $\mathcal F_\mu$ ([`dynlab.rules.smoothing`][]: every ReLU, ``max`` and max over an axis that depends
    on the activities replaced by a smooth function within $\mu$ of it) for each width $\mu$ of
    ``widths`` in turn, each solve started where the last ended — where the exact energy needs it:
    ``inner`` runs on the exact energy first, and its result stands if it meets the criterion (an energy
    whose kinks do not touch its minimum, e.g. the ARU's floor on its gain, which smoothing would only
    bend). ``Inference.smoothing`` says which: 0, or the last width. The smoothed solves run without
    ``inner``'s patience (which gives up where a kink stops the gradient from vanishing; a smoothed
    energy has no kink), to the criterion or the budget.

    $\mathcal F_\mu$ is differentiable, so the [`Criterion`][] means what it says on it; its $g_0$ is
    $|\nabla\mathcal F_\mu|$ at the forward pass ``z0``, not at the warm start (which would make the test
    stricter with every width). The result
    of the continuation is the last solve's: activities where $\nabla\mathcal F_\mu$ vanishes at the
    smallest $\mu$, its energy, convergence and gradient norm, and the steps of all solves (the exact
    attempt's included). As $\mu \to 0$ such points
    approach Clarke-stationary points of $\mathcal F$ (gradient consistency; [`dynlab.rules.smoothing`][]),
    and the smoothed energy is within $O(\mu)$ of $\mathcal F$, per kink. On an energy without kinks
    (the GRU, LSTM, block-diagonal and tanh RNNs) this is ``inner`` itself, bit for bit.

    The widths are absolute, in the units of the kinks' operands (pre-activations of order 1 in the
    built-in units); the default $10^{-2}, 10^{-3}$ is a choice, not from a paper: the last width is
    the accuracy asked for, the decrease by 10 keeps each solve's start close to its solution. The
    curvature at a kink grows like $1/\mu$ ($1/(4\mu)$ for CHKS, $\ln n/\mu$ for a max over $n$), and in
    float32 the energy then changes by less than its rounding before the gradient test is met:
    measured on SITH-RNN (width 16, T = 20, L-BFGS), $10^{-2}$ converges in 170 steps and $10^{-3}$
    stalls at $g/g_0 = 5\cdot10^{-3}$ in 1000, while the float32 gradient there agrees with float64's to
    1% (it is not noise); the ELM neuron converges down to $10^{-4}$ in float32 at width 64, T = 5.
    Hence ``x64``: the smoothed solves run in float64 (the problem restated by ``Problem.astype``
    under ``jax.enable_x64``; the result is cast back, so the rest of the program stays in its
    precision). The same SITH-RNN cell then converges at $10^{-3}$ in 133 steps.
    """

    inner: AbstractInference
    widths: tuple[float, ...] = eqx.field(static=True, default=(1e-2, 1e-3),
                                          converter=lambda w: tuple(w) if isinstance(w, list) else w)
    x64: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        widths = self.widths
        if isinstance(widths, (str, bytes)) or not isinstance(widths, (tuple, list)) or not widths:
            raise ConfigError(f"smoothing widths must be a non-empty list of positive numbers, got {widths!r}")
        for w in widths:
            _tolerance("smoothing width", w, positive=True)
        if any(b >= a for a, b in zip(widths, widths[1:])):
            raise ConfigError(f"smoothing widths must decrease, got {list(widths)}")
        if isinstance(self.inner, (Smoothed, ClosedForm)):
            raise ConfigError(f"smoothing continues an iterative inference, not {type(self.inner).__name__}")
        if not isinstance(self.x64, bool):
            raise ConfigError(f"smoothing x64 must be true or false, got {self.x64!r}")

    def check_loss(self, output: str) -> None:
        self.inner.check_loss(output)

    def __call__(self, problem: Problem) -> Inference:
        if not smoothing.kinks(problem.sample_energies, problem.z0):
            return self.inner(problem)
        exact = self.inner(problem)
        reference = problem.z0 if problem.reference is None else problem.reference
        zero = jnp.zeros((), jax.tree_util.tree_leaves(problem.z0)[0].dtype)
        # patience gives up on a kink, where the gradient cannot vanish; a smoothed energy has none
        inner = dataclasses.replace(self.inner, patience=None) if getattr(self.inner, "patience", None) else self.inner

        def continuation(exact: Inference) -> Inference:
            with jax.enable_x64(True) if self.x64 else contextlib.nullcontext():
                base, z, ref = problem, exact.z, reference
                if self.x64:
                    if problem.astype is None:
                        raise ConfigError("smoothing in float64 needs a problem that can be restated in float64 "
                                          "(Problem.astype); this rule's cannot")
                    base = problem.astype(jnp.float64)
                    z, ref = ffmodels.astype((z, ref), jnp.float64)

                def solve(carry, mu):  # one program for every width: compiled once, not once per width
                    z, steps = carry
                    result = inner(smoothed_problem(base, mu)._replace(z0=z, reference=ref))
                    return (result.z, (steps + result.steps).astype(steps.dtype)), result

                dtype = jax.tree_util.tree_leaves(z)[0].dtype
                (_, steps), results = jax.lax.scan(solve, (z, exact.steps), jnp.asarray(self.widths, dtype))
                result = jax.tree_util.tree_map(lambda a: a[-1], results)
                result = result._replace(steps=steps, smoothing=zero + self.widths[-1])
            # back in the caller's types (float64 and int64 ones from an x64 solve)
            return jax.tree_util.tree_map(lambda r, e: r.astype(e.dtype), result, exact._replace(smoothing=zero))

        return jax.lax.cond(exact.converged, lambda r: r._replace(smoothing=zero), continuation, exact)


def smoothed_problem(problem: Problem, mu: float) -> Problem:
    """``problem`` with its energy, residuals and forward pass smoothed at width ``mu`` in the activities
    (or errors) ([`dynlab.rules.smoothing.smooth`][]); it has no closed form."""
    form = problem.least_squares
    if form is not None:
        form = form._replace(residuals=smoothing.smooth(form.residuals, mu), unroll=smoothing.smooth(form.unroll, mu))
    return problem._replace(sample_energies=smoothing.smooth(problem.sample_energies, mu), least_squares=form,
                            exact=None)


# ------------------------------------------------------------------------------------------------
# Config spellings -> values


def from_config(
    inference: str | AbstractInference = "discrete",
    *,
    optimizer: Literal["sgd", "momentum", "adam"] = "sgd",
    beta: float = 0.3,
    max_steps: int = 100,
    atol: float = 0.0,
    rtol: float = 1e-4,
    ftol: float | None = 1e-6,
    t1: float = 1e4,
    patience: int | None = None,
    smoothing: Sequence[float] | None = None,
    smoothing_x64: bool = False,
    where: str = "rule",
) -> AbstractInference:
    """The inference value a config spells: ``discrete`` (``optimizer`` at step ``beta``), ``ode`` (up to
    ``t1``), ``closed-form``, ``gauss-newton`` or ``levenberg-marquardt``, each with the
    [`Criterion`][] (``rtol``, ``atol``, ``ftol``, ``max_steps``); ``patience`` for the last three
    ([`ErrorCoordinates`][]); ``smoothing``, a decreasing list of widths, continues the method over
    smoothed energies ([`Smoothed`][]), in float64 with ``smoothing_x64``. A value passes through unchanged."""
    if isinstance(inference, AbstractInference):
        return inference
    if inference not in INFERENCES:
        raise ConfigError(f"{where}.inference must be one of {', '.join(map(repr, INFERENCES))} or an inference value "
                          f"(dynlab.rules.pc_inference), got {inference!r}")
    criterion = Criterion(rtol=rtol, atol=atol, ftol=ftol, max_steps=max_steps)
    descent = activity_optimizer(optimizer, beta)  # every key is checked, whichever method it serves
    require_positive("t1", t1, integer=False)
    if patience is not None:
        require_positive("patience", patience)
    if smoothing is None and smoothing_x64:
        raise ConfigError(f"{where}.smoothing_x64 runs the smoothed solves in float64; it needs {where}.smoothing")
    if smoothing is not None:
        if inference == "closed-form":
            raise ConfigError(f"{where}.smoothing continues an iterative inference; closed-form has no kinks to smooth")
        return Smoothed(from_config(inference, optimizer=optimizer, beta=beta, max_steps=max_steps, atol=atol,
                                    rtol=rtol, ftol=ftol, t1=t1, patience=patience, where=where), smoothing,
                        smoothing_x64)
    if inference == "discrete":
        return Descent(descent, criterion)
    if inference == "ode":
        return GradientFlow(t1=t1, criterion=criterion)
    if inference == "closed-form":
        return ClosedForm()
    if inference == "gauss-newton":
        return gauss_newton(criterion, patience=patience)
    if inference == "lbfgs":
        return lbfgs(criterion, patience=patience)
    return levenberg_marquardt(criterion, patience=patience)
