r"""PC versus BP across width and depth: gradient cosines, $s-1$, $\mathcal L/\mathcal F^*$, loss curves.

The paper's comparison (Innocenti et al., Figs. 1–3, §A.8): for every width $N$, depth $L$ and
seed, a PC network and a BP network start from *identical* weights and are trained as two
separate runs on the same data — one fixed batch, or (``batches="stream"``) the same stream of
fresh batches; at every step $t$

$$ \cos_t = \frac{\langle g^{PC}_t, g^{BP}_t \rangle}{\|g^{PC}_t\|\,\|g^{BP}_t\|}, \qquad
   g^{PC}_t = \nabla_\theta \mathcal F^*(\theta^{PC}_t) \text{ (or } \partial_\theta\mathcal F(z_T, \theta^{PC}_t)
   \text{ after numerical inference)}, \quad g^{BP}_t = \nabla_\theta \mathcal L(\theta^{BP}_t), $$

over the flattened vector of all parameters (0 when $\|g^{PC}\|\|g^{BP}\| < 10^{-10}$, as in
the public code). Also recorded per step: both losses, the PC energy, $s(\theta)-1$ and
$\mathcal L/\mathcal F^*$ (linear networks; $s$ as the mean eigenvalue of $S$ and as its largest,
[`dynlab.rules.pc_closed_form`][]), and for numerical inference whether it converged,
its step count and — for linear networks — the distance of the inferred activities to the exact
ones. A step whose inference did not converge keeps its cosine only in ``cosine_unconverged``;
``cosine`` is NaN there, so no summary uses it unknowingly.

Where the paper is silent: seeds vary the weight initialisation only (the task's fixed batch, or
its stream, is the same for every seed and cell); both runs use the same optimiser with the
parameterisation's per-layer rates ([`dynlab.ffmodels.learning_rates`][]).

**Batches.** ``batches="fixed"`` (default) trains on the task's one fixed batch, as the paper's
public code does (jpc ``experiments/limits_paper/train.py`` takes the first batch of 64 of its
loader and trains on it throughout). ``batches="stream"`` draws batch $t$ at step $t$ from the
task's training pool ([`stream_pool`][dynlab.tasks.pc_tasks.MNISTBatchTask.stream_pool]: rows
$tP, \dots, tP + P - 1$ modulo the pool size, the pool in its seeded order, the same order every
epoch). Step 0's batch is the fixed batch. With a stream, the recorded losses, energy and $s - 1$ are those of the
step's batch. Streaming matters for long runs: on one fixed batch the networks eventually
interpolate it, and both gradients shrink towards zero.

**Recurrent models** ([`compare_pc_bptt`][], ``model="rnn"``): the same comparison with time
in the role of depth — a [`ParamRNN`][dynlab.rnn_param.ParamRNN] of width $N$ on sequences of
length $T$, PC through time ([`dynlab.rules.pc_time`][]) against BPTT of the same objective
([`dynlab.rules.pc_time.loss`][]), over ``width`` × ``length`` × ``seed`` × ``step``, with the
coordinate ``T_over_N`` in place of ``L_over_N``. For the linear RNN the closed form gives $s-1$
([`dynlab.rules.pc_time.closed_form`][]); with the read-out at the last step only and the
marginal gain $g = 1$, $\mathbb E[s - 1] \approx (T-1)/(\gamma_0^2 N)$
([`dynlab.rnn_param`][]). The fixed batch of each length is the task's first batch
(``jax.random.key(0)``), the same for every width and seed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import Annotated, Any, Callable, Literal, get_type_hints

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr
from jaxtyping import Array

from dynlab import budget, ffmodels, registry, train
from dynlab.rules import pc_closed_form as cf
from dynlab.config import Count, Flag, Range, number_list
from dynlab.errors import ConfigError, require_positive
from dynlab.option_groups import OptionGroup, legacy_keywords
from dynlab.analyses import pc_bp_figures
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register
from dynlab.analyses.pc_grid import DEPTH, LENGTH, GridAxis, grid_axis  # noqa: F401  (grid_axis re-exported)
from dynlab.rnn_param import ParamRNN
from dynlab.rnn_residual import ResidualParamRNN
from dynlab.rules import pc, pc_inference, pc_time
from dynlab.rules.bp import BP

MODELS = ("mlp", "rnn")
INFERENCES = ("discrete", "ode", "gauss-newton", "levenberg-marquardt", "lbfgs")
"""Numerical inference methods of the comparison (spellings of [`dynlab.rules.pc_inference.from_config`][])."""


COSINE_EPS = 1e-10
"""Below this product of the two gradient norms the cosine is set to 0 (the public code's convention)."""


def cosine(g1, g2, eps: float = COSINE_EPS) -> jax.Array:
    """Cosine similarity of two gradient PyTrees over all their leaves (0 if the product of their norms is below ``eps``)."""
    a = jax.tree_util.tree_leaves(eqx.filter(g1, eqx.is_inexact_array))
    b = jax.tree_util.tree_leaves(eqx.filter(g2, eqx.is_inexact_array))
    dot = sum(jnp.vdot(x, y) for x, y in zip(a, b))
    na = jnp.sqrt(sum(jnp.vdot(x, x) for x in a))
    nb = jnp.sqrt(sum(jnp.vdot(y, y) for y in b))
    return jnp.where(na * nb > eps, dot / jnp.maximum(na * nb, eps), 0.0)


Energy = Literal["closed-form", "inference"]
"""How the PC gradient is computed: at the exact equilibrium, or after numerical inference."""
Inference = Literal[INFERENCES]
"""A numerical inference method by its spelling ([`INFERENCES`][]); a caller in Python may give a value of
[`dynlab.rules.pc_inference`][] instead."""


@dataclasses.dataclass(frozen=True)
class InferenceSettings(OptionGroup):
    r"""How the comparison computes the PC gradient, as one value: at the exact equilibrium
    (``energy="closed-form"``, linear networks: $\nabla_\theta\mathcal F^*$) or after numerical
    inference (``energy="inference"``: $\partial_\theta\mathcal F(z_T, \theta)$ at the activities
    $z_T$ the method reaches), with the method's settings. [`value`][] is the value of
    [`dynlab.rules.pc_inference`][] they spell.

    | Python | command line |
    |---|---|
    | `inference=InferenceSettings(energy="inference", inference="lbfgs", patience=10)` | `--inference energy=inference,inference=lbfgs,patience=10` |
    | `energy="inference", inference="lbfgs", patience=10` | `--energy inference --inference lbfgs --patience 10` |
    | `inference=pc_inference.lbfgs(Criterion(...))` | — |

    Every key is also a keyword (an option) of its own, the comparison's spelling before this
    value existed ([`dynlab.option_groups.fold_legacy`][]); a method's name or an inference
    value given as ``inference`` is that key alone (``inference="lbfgs"`` is
    ``{inference = "lbfgs"}``). A value says it all: ``energy`` follows from it.

    **Enforces** one check of every setting, whichever spelling gave it: the value is built
    when the settings are ([`dynlab.rules.pc_inference.from_config`][]), the numerical keys
    included under the closed form.

    Args:
        energy: the PC gradient from the closed-form equilibrated energy (linear) or after numerical inference.
        inference: numerical inference (with energy inference): optax steps on the activities, a
            diffrax ODE solve, or Gauss-Newton / Levenberg-Marquardt / L-BFGS in the error
            coordinates (mse loss); or a value of [`dynlab.rules.pc_inference`][].
        patience: Gauss-Newton / Levenberg-Marquardt / L-BFGS: give up once |grad_z F| has not
            halved in this many steps (nonsmooth energies); None: the whole budget.
        smoothing: decreasing smoothing widths, e.g. 1e-2,1e-3: run the inference on energies
            whose ReLU / max kinks are smoothed to within each width in turn.
        smoothing_x64: run the smoothed solves in float64; the rest stays in float32.
        inference_steps: inference budget (steps).
        activity_optimizer: optimiser of the activities (discrete inference); momentum is heavy ball 0.9.
        beta: activity step size (discrete inference).
        rtol: inference converged when |grad_z F| <= atol + rtol |grad_z F|_0.
        atol: see rtol.
        ftol: inference converged when the energy changes by less than this, relatively (None: not used).
    """

    energy: Energy = "closed-form"
    inference: Inference | pc_inference.AbstractInference = "discrete"
    patience: int | None = None
    smoothing: list[Annotated[float, Range(above=0)]] | None = None
    smoothing_x64: bool = False
    inference_steps: int = 500
    activity_optimizer: Literal["sgd", "momentum", "adam"] = "sgd"
    beta: float = 0.3
    rtol: float = 1e-4
    atol: float = 0.0
    ftol: float | None = None

    def __post_init__(self):
        if self.energy not in ("closed-form", "inference"):
            raise ConfigError(f"unknown energy {self.energy!r}; valid: closed-form, inference")
        if isinstance(self.inference, str) and self.inference not in INFERENCES:
            raise ConfigError(f"unknown inference {self.inference!r}; valid: {', '.join(INFERENCES)}")
        if isinstance(self.inference, pc_inference.AbstractInference) and self.energy != _energy_of(self.inference):
            raise ConfigError(f"energy {self.energy!r} contradicts the inference value {type(self.inference).__name__} "
                              f"(energy {_energy_of(self.inference)!r}); leave energy out, a value says it all")
        require_positive("inference_steps", self.inference_steps)
        self.value  # every key checked, whichever method it serves

    @property
    def value(self) -> pc_inference.AbstractInference:
        """The inference value: ``ClosedForm()`` for the closed form, else the method the keys
        spell ([`dynlab.rules.pc_inference.from_config`][]; a value as itself)."""
        method = pc_inference.from_config(self.inference, optimizer=self.activity_optimizer, beta=self.beta,
                                          max_steps=self.inference_steps, atol=self.atol, rtol=self.rtol,
                                          ftol=self.ftol, patience=self.patience, smoothing=self.smoothing,
                                          smoothing_x64=self.smoothing_x64, where="inference")
        return pc_inference.ClosedForm() if self.energy == "closed-form" else method

    @classmethod
    def parse(cls, value: Any, *, default: OptionGroup | None = None) -> InferenceSettings:
        """The settings from a table of their keys (keys left out: ``default``'s, else the class's;
        ``energy`` left out beside an inference value: the value's), from a method's name or an
        inference value alone (the key ``inference``), or a value of the class as itself."""
        if isinstance(value, InferenceSettings):
            return value
        table = value if isinstance(value, dict) else {"inference": value}
        keys = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise ConfigError(f"unknown inference setting(s) {', '.join(unknown)}; valid: {', '.join(keys)}")
        if isinstance(table.get("inference"), pc_inference.AbstractInference) and "energy" not in table:
            table = {**table, "energy": _energy_of(table["inference"])}
        return dataclasses.replace(default if isinstance(default, InferenceSettings) else cls(), **table)


# every key, with its annotation, is also a keyword of its own: the comparison's before the settings were one value
InferenceSettings.legacy = {name: hint for name, hint in get_type_hints(InferenceSettings, include_extras=True).items()
                            if name in {f.name for f in dataclasses.fields(InferenceSettings)}}


def _energy_of(value: pc_inference.AbstractInference) -> str:
    """The ``energy`` an inference value says: ``closed-form`` for ``ClosedForm()``, else ``inference``."""
    return "closed-form" if isinstance(value, pc_inference.ClosedForm) else "inference"


class CompareConfig(eqx.Module):
    r"""Everything except the grid axes (its non-array fields are static in the compiled cell).

    ``model``: ``mlp`` ([`FeedForward`][dynlab.ffmodels.FeedForward]; ``alpha``, ``residual``, ``batches``
    apply, and ``batch_size`` — the size of each streamed batch — with ``batches="stream"``) or
    ``rnn`` ([`ParamRNN`][dynlab.rnn_param.ParamRNN]; ``gain`` and ``batch_size``, the size of the
    fixed batch drawn from the sequence task, apply).

    ``inference``: how the PC gradient is computed, as a value of [`dynlab.rules.pc_inference`][]:
    ``ClosedForm()`` (default; linear networks: $\nabla_\theta\mathcal F^*$ at the exact
    equilibrium) or a numerical method, e.g. ``Descent(optax.sgd(0.3), Criterion(max_steps=500))``
    or ``lbfgs(Criterion(...))``. Its spellings ([`InferenceSettings`][]) become this value in one
    place, [`from_options`][].
    """

    model: Literal["mlp", "rnn"] = "mlp"
    param: str = "mf"
    alpha: float | None = None  # the parameterisation's: 1/2, 0 for sp
    gamma0: float = 1.0
    residual: bool = True
    activation: str = "linear"
    steps: int = 100
    inference: pc_inference.AbstractInference = pc_inference.ClosedForm()
    optimizer: Literal["gd", "adam"] = "adam"
    lr: float | None = None
    x64: bool = False
    gain: float = 1.0
    time_alpha: float | None = None
    batch_size: int = 32
    batches: Literal["fixed", "stream"] = "fixed"

    @classmethod
    @legacy_keywords
    def from_options(cls, *, inference: InferenceSettings = InferenceSettings(), **fields) -> CompareConfig:
        """The config from spelled options: ``inference`` as [`InferenceSettings`][] (or its keys,
        each a keyword of its own) becomes its
        [`value`][dynlab.analyses.pc_bp.InferenceSettings.value]; the rest are fields."""
        return cls(inference=inference.value, **fields)

    def __check_init__(self):
        if self.model not in MODELS:
            raise ConfigError(f"unknown model {self.model!r}; valid: {', '.join(MODELS)}")
        ffmodels.parameterisation(self.param, alpha=self.alpha, gamma0=self.gamma0)  # validates name, alpha, gamma0
        require_positive("gain", self.gain, integer=False)
        require_positive("batch_size", self.batch_size)
        require_positive("steps", self.steps)
        if self.batches not in ("fixed", "stream"):
            raise ConfigError(f"unknown batches {self.batches!r}; valid: fixed, stream")
        if self.time_alpha is not None:
            if self.model != "rnn":
                raise ConfigError("time_alpha (the residual recurrence's depth factor T^-alpha) applies to --model rnn only")
            if isinstance(self.time_alpha, bool) or not isinstance(self.time_alpha, (int, float)) \
                    or not np.isfinite(self.time_alpha) or self.time_alpha < 0:
                raise ConfigError(f"time_alpha must be a finite number >= 0, got {self.time_alpha!r}")
        if self.batches == "stream" and self.model != "mlp":
            raise ConfigError("batches 'stream' applies to feed-forward models (model 'mlp') only")
        if self.optimizer not in ("gd", "adam"):
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; valid: gd, adam")
        if not isinstance(self.inference, pc_inference.AbstractInference):
            raise ConfigError(f"inference must be a value of dynlab.rules.pc_inference (or use CompareConfig.from_options "
                              f"with its spelling), got {self.inference!r}")
        if self.activation not in ffmodels.ACTIVATIONS:
            raise ConfigError(f"unknown activation {self.activation!r}; valid: {', '.join(ffmodels.ACTIVATIONS)}")
        if self.closed_form and self.activation != "linear":
            raise ConfigError(f"energy 'closed-form' needs a linear network, got activation {self.activation!r}; "
                              "use energy 'inference'")
        if self.lr is not None:
            require_positive("lr", self.lr, integer=False)

    @property
    def closed_form(self) -> bool:
        """Is the PC gradient that at the exact equilibrium (``ClosedForm()``)?"""
        return isinstance(self.inference, pc_inference.ClosedForm)

    @property
    def energy(self) -> str:
        """The spelling of [`closed_form`][]: ``closed-form`` or ``inference``."""
        return "closed-form" if self.closed_form else "inference"

    @property
    def base_lr(self) -> float:
        """η0: the given ``lr``, else the paper's (Adam 1e-3, GD 0.025)."""
        return self.lr if self.lr is not None else (1e-3 if self.optimizer == "adam" else 0.025)

    def describe(self) -> dict:
        """The fields as plain values for the dataset's ``config`` attr (``inference`` as its one-line repr)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["energy"] = self.energy
        out["inference"] = "closed-form" if self.closed_form else eqx.tree_pformat(self.inference, width=10**6)
        return out


def make_model(cfg: CompareConfig, width: int, depth: int, input_size: int, output_size: int, seed: int):
    """The cell's initial network (the same for PC and BP)."""
    model = ffmodels.FeedForward(input_size, output_size, width=width, depth=depth, param=cfg.param, alpha=cfg.alpha,
                                 gamma0=cfg.gamma0, residual=cfg.residual, activation=cfg.activation,
                                 key=jax.random.key(seed))
    return ffmodels.astype(model, jnp.float64 if cfg.x64 else jnp.float32)


def make_rnn(cfg: CompareConfig, width: int, input_size: int, output_size: int, seed: int, length: int | None = None):
    """The recurrent cell's initial network (the same for PC through time and BPTT): a
    [`ParamRNN`][dynlab.rnn_param.ParamRNN], or with ``cfg.time_alpha`` the residual recurrence with the depth
    factor ``length ** -time_alpha`` ([`ResidualParamRNN`][dynlab.rnn_residual.ResidualParamRNN])."""
    options = dict(width=width, param=cfg.param, gamma0=cfg.gamma0, gain=cfg.gain, activation=cfg.activation,
                   key=jax.random.key(seed))
    if cfg.time_alpha is None:
        model = ParamRNN(input_size, output_size, **options)
    else:
        model = ResidualParamRNN(input_size, output_size, length=length, alpha=cfg.time_alpha, **options)
    return ffmodels.astype(model, jnp.float64 if cfg.x64 else jnp.float32)


def _closed_form_diagnostics(model, x, y, output, inf):
    """The comparison's per-step record of a feed-forward PC step at the exact equilibrium."""
    res = cf.closed_form(model, x, y)
    nan = jnp.asarray(jnp.nan, x.dtype)
    return dict(loss_pc=res.loss, s_minus_1=res.s_minus_1, s_max_minus_1=res.s_max_minus_1, activity_distance=nan)


def _inference_diagnostics(model, x, y, output, inf):
    """... after numerical inference: $s-1$ and the distance to the exact activities (linear networks)."""
    nan = jnp.asarray(jnp.nan, x.dtype)
    if model.activation != "linear":
        return dict(loss_pc=pc.loss(model, x, y), s_minus_1=nan, s_max_minus_1=nan, activity_distance=nan)
    z_exact = cf.exact_activities(model, x, y)
    res = cf.closed_form(model, x, y)
    return dict(loss_pc=pc.loss(model, x, y), s_minus_1=res.s_minus_1, s_max_minus_1=res.s_max_minus_1,
                activity_distance=jnp.linalg.norm(inf.z - z_exact) / jnp.linalg.norm(z_exact))


def _sequence_diagnostics(model, x, y, mask, output, inf, *, distance: bool = True):
    """The comparison's per-step record of a PC-through-time step: the loss on the energy's scale and,
    for linear models with the ``mse`` loss, $s-1$ and (with ``distance``) the distance to the exact
    activities."""
    nan = jnp.asarray(jnp.nan, x.dtype)
    out = dict(loss_pc=pc_time.loss(model, x, y, mask, output), s_minus_1=nan, s_max_minus_1=nan,
               activity_distance=nan)
    if getattr(model, "is_linear", False) and output == "mse":
        exact = pc_time.closed_form(model, x, y, mask)
        out.update(s_minus_1=exact.s_minus_1, s_max_minus_1=exact.s_max_minus_1)
        if distance:
            diff = jax.tree_util.tree_map(jnp.subtract, inf.z, exact.z)
            out["activity_distance"] = optax.tree.norm(diff) / optax.tree.norm(exact.z)
    return out


def _sequence_closed_form_diagnostics(model, x, y, mask, output, inf):
    """... at the exact equilibrium (no distance to report)."""
    return _sequence_diagnostics(model, x, y, mask, output, inf, distance=False)


def rules(cfg: CompareConfig, output: str = "mse"):
    r"""The two rules the comparison trains: ``(pc_rule, bp_rule)``.

    Feed-forward (``cfg.model == "mlp"``): [`PC`][dynlab.rules.pc.PC] (closed-form or numerical
    inference) and [`BP`][dynlab.rules.bp.BP], both on the energy's scale. Recurrent:
    [`PCTime`][dynlab.rules.pc_time.PCTime] and [`matching_bptt`][dynlab.rules.pc_time.matching_bptt]. The PC
    rule carries the comparison's diagnostics ([`VARIABLES`][]) as a value.
    """
    closed = cfg.closed_form
    inference = cfg.inference
    if cfg.model == "mlp":
        pc_rule = pc.PC("mse", inference, diagnostics=_closed_form_diagnostics if closed else _inference_diagnostics)
        return pc_rule, BP("mse")
    diagnostics = _sequence_closed_form_diagnostics if closed else _sequence_diagnostics
    return pc_time.PCTime(output, inference, diagnostics=diagnostics), pc_time.matching_bptt(output)


def _record(pc_metrics: dict, bp_metrics: dict, g_pc, g_bp, dtype) -> dict:
    """One step's entry of [`VARIABLES`][] from the two rules' metrics and gradients."""
    nan = jnp.asarray(jnp.nan, dtype)
    return dict(
        energy=pc_metrics["energy"], loss_pc=pc_metrics["loss_pc"], s_minus_1=pc_metrics["s_minus_1"],
        s_max_minus_1=pc_metrics["s_max_minus_1"], activity_distance=pc_metrics["activity_distance"],
        converged=pc_metrics["converged"] > 0, inference_steps=pc_metrics["inference_steps"],
        grad_ratio=pc_metrics.get("activity_grad_ratio", nan), energy_change=pc_metrics.get("energy_change", nan),
        smoothing=pc_metrics.get("smoothing", jnp.zeros((), dtype)), loss_bp=bp_metrics["objective"], cosine=cosine(g_pc, g_bp), grad_norm_pc=optax.tree.norm(g_pc),
        grad_norm_bp=optax.tree.norm(g_bp),
    )


def train_both(model, steps: int, pc_rule, bp_rule, batch: Callable[[Array], tuple], optimizer):
    r"""Train ``pc_rule`` and ``bp_rule`` from the same ``model`` for ``steps`` steps in lockstep (one
    ``lax.scan``), each through the trainer's step ([`dynlab.train.update`][]) with ``optimizer``;
    ``batch(t)`` is step $t$'s task batch ``(x, y, mask)``. Per-step records (`_record`).

    The rules are deterministic, so the key they are given does not matter.
    """
    params, static = eqx.partition(model, eqx.is_inexact_array)
    key = jax.random.key(0)

    def step(carry, t):
        p_pc, s_pc, p_bp, s_bp = carry
        b = batch(t)
        p_pc, s_pc, g_pc, m_pc = train.update(pc_rule, optimizer, p_pc, static, s_pc, b, key)
        p_bp, s_bp, g_bp, m_bp = train.update(bp_rule, optimizer, p_bp, static, s_bp, b, key)
        return (p_pc, s_pc, p_bp, s_bp), _record(m_pc, m_bp, g_pc, g_bp, b[0].dtype)

    state = optimizer.init(params)
    _, out = jax.lax.scan(step, (params, state, params, state), jnp.arange(steps))
    return out


@eqx.filter_jit
def run_cell(model, x, y, cfg: CompareConfig):
    r"""Train PC and BP from ``model`` for ``cfg.steps`` steps ([`train_both`][]); per-step metrics.

    ``x[P, D]``, ``y[P, d_out]``: the fixed batch; with ``cfg.batches == "stream"``, the pool
    that step $t$ takes rows $tP' \dots tP' + P' - 1$ (modulo its size) from, $P'$ = ``cfg.batch_size``.
    Both rules use the parameterisation's optimiser ([`dynlab.ffmodels.optimizer`][]).
    """
    if cfg.batches == "stream":
        def rows(t):
            idx = (t * cfg.batch_size + jnp.arange(cfg.batch_size)) % x.shape[0]
            return x[idx], y[idx]
    else:
        def rows(t):
            return x, y

    def batch(t):
        xs, ys = rows(t)
        return xs[:, None, :], ys[:, None, :], jnp.ones((xs.shape[0], 1), xs.dtype)

    optimizer = ffmodels.optimizer(model, cfg.optimizer, cfg.base_lr)
    return train_both(model, cfg.steps, *rules(cfg), batch, optimizer)


@eqx.filter_jit
def run_sequence_cell(model, x, y, mask, cfg: CompareConfig, output: str, plain: bool = False):
    """Train PC through time and BPTT (of [`dynlab.rules.pc_time.loss`][]) from ``model`` on the
    fixed batch ``(x, y, mask)`` ([`train_both`][]); per-step metrics.

    ``plain=True``: for any registered unit's [`SequenceModel`][dynlab.models.SequenceModel] (no width
    parameterisation), both rules train with plain ``optax.adam`` / ``optax.sgd`` at ``cfg.base_lr``.
    """
    if plain:
        optimizer = optax.adam(cfg.base_lr) if cfg.optimizer == "adam" else optax.sgd(cfg.base_lr)
    else:
        optimizer = ffmodels.optimizer(model, cfg.optimizer, cfg.base_lr)
    return train_both(model, cfg.steps, *rules(cfg, output), lambda t: (x, y, mask), optimizer)


VARIABLES = {
    "cosine": "cosine similarity of PC and BP gradients (NaN where inference did not converge)",
    "cosine_unconverged": "cosine similarity at every step, converged or not",
    "loss_pc": "loss of the PC-trained network (MSE: 1/2P sum |y - f|^2, over the scored steps for sequences)",
    "loss_bp": "loss of the BP(TT)-trained network (MSE: 1/2P sum |y - f|^2, over the scored steps for sequences)",
    "energy": "PC energy: F* (closed form) or F(z_T) after inference, at the PC network",
    "s_minus_1": "energy rescaling s(theta) - 1 = tr(S - I)/d_out, the mean eigenvalue (linear networks)",
    "s_max_minus_1": "lambda_max(S) - 1, the largest eigenvalue (jpc's s; linear networks)",
    "loss_over_energy": "L / F (equals s for scalar output at equilibrium)",
    "grad_norm_pc": "norm of the PC gradient over all parameters",
    "grad_norm_bp": f"norm of the BP gradient over all parameters (cosine := 0 where the product of the norms is below {COSINE_EPS:g})",
    "converged": "inference met its convergence criterion",
    "inference_steps": "inference steps taken (0 for the closed form)",
    "grad_ratio": "final residual of inference: worst-sample |grad_z F| / its initial value (NaN for the closed form)",
    "energy_change": "relative energy change over inference's last step (NaN for the closed form)",
    "activity_distance": "|z_T - z*| / |z*| of inferred to exact activities (linear networks)",
}


@register(
    "analysis",
    "pc-bp",
    "PC vs BP gradient cosine, s - 1, L/F* and losses over a width x depth grid",
    figure=pc_bp_figures.overview,
    summary=pc_bp_figures.pc_bp_summary,
    outputs=(*Output.each(" ".join(VARIABLES), "real", ("width", "depth", "seed", "step")),
             *Output.each("mean_cosine seconds", "real", ("width", "depth"))),
)
@legacy_keywords
def compare_pc_bp(
    task: str | tuple | Any = "mnist",
    widths: list[Count] = (8, 32, 128, 512),
    depths: list[Count] = (2, 4, 8),
    seeds: int | list[int] = 3,
    *,
    progress: Callable[[int, int, dict], None] | None = None,
    param: str = "mf",
    alpha: float | None = None,
    gamma0: float = 1.0,
    residual: Annotated[bool, Flag("--skips")] = True,
    activation: Literal["linear", "tanh", "relu"] = "linear",
    batches: Literal["fixed", "stream"] = "fixed",
    batch_size: int | None = None,
    steps: int = 100,
    optimizer: Literal["gd", "adam"] = "adam",
    lr: float | None = None,
    x64: bool = False,
    inference: InferenceSettings = InferenceSettings(),
) -> xr.Dataset:
    r"""PC vs BP gradients across width x depth: cosine, s - 1, L/F*, loss curves.

    PC and BP train as separate runs from identical weights on one fixed batch (or, with
    ``batches="stream"``, on the same stream of fresh batches); every step records the cosine of
    their gradients, both losses, the PC energy and $s(\theta) - 1$, over ``widths`` × ``depths`` × ``seeds``.

    Args:
        task: toy (x in R^40, 20 samples, y = +-1), mnist or cifar10 (one fixed batch of 64
            images, synthetic if absent; [`FEEDFORWARD_TASKS`][]); from Python also a fixed-batch
            task, or a pair (x[P, D], y[P, d_out]) (with batches stream: pc-mnist, or a pair holding the pool).
        widths: the widths N (positive integers).
        depths: the depths L (weight matrices, >= 2).
        seeds: a number of seeds (weight initialisations 0..seeds-1) or a list of seeds.
        progress: called as ``progress(cells_done, cells_total, {"N": .., "L": .., "cos": ..})``.
        param: parameterisation: sp, ntk, mf, mup.
        alpha: residual depth exponent in [0, 1] (None: the parameterisation's, 1/2; 0 for sp).
        gamma0: output scale gamma0.
        residual: residual (skip) connections.
        activation: the network's activation.
        batches: train on the task's one fixed batch (as the paper's code does), or on a stream of
            fresh batches from the image pool (batch t at step t).
        batch_size: with batches stream, the size of each streamed batch (None: the task's batch,
            64); compare_pc_bptt: the size of each length's fixed batch (32).
        steps: training steps.
        optimizer: the optimiser of both runs.
        lr: base learning rate eta0 (None: adam 1e-3, gd 0.025), scaled per layer.
        x64: compute in float64.
        inference: how the PC gradient is computed ([`InferenceSettings`][]: the energy, the
            numerical method and its settings), as key=value pairs
            (energy=inference,inference=lbfgs,patience=10) or each key as an option (a keyword) of its own;
            or the method alone, used with energy inference: discrete (optax steps on the
            activities; the default), ode (a diffrax ODE solve), gauss-newton,
            levenberg-marquardt or lbfgs (in the error coordinates; mse loss); from Python also a
            value of [`dynlab.rules.pc_inference`][].

    Returns variables over (``width``, ``depth``, ``seed``, ``step``) — see [`VARIABLES`][] —
    plus ``mean_cosine`` over (``width``, ``depth``) (mean over seeds and steps, converged steps
    only), the coordinate ``L_over_N`` and, when $s-1$ is defined, the log–log slope of the
    per-cell mean $s-1$ against $L/N$ (attr ``rescaling_slope``; the theory says 1).
    """
    cfg = _compare_config("mlp", locals())  # everything checked before any work
    widths, depths, seeds = _int_list("widths", widths), _int_list("depths", depths), _seed_list(seeds)
    task = registry.build("task", feedforward_name(task)) if isinstance(task, str) else task  # reads --data-dir
    fixed = task.fixed_batch("train") if hasattr(task, "fixed_batch") else task
    cfg = dataclasses.replace(cfg, batch_size=batch_size or int(np.shape(fixed[0])[0]))
    if min(depths) < 2:
        raise ConfigError(f"depths must be at least 2, got {min(depths)}")
    x, y = task.stream_pool() if cfg.batches == "stream" and hasattr(task, "stream_pool") else fixed
    if cfg.batches == "stream" and np.shape(x)[0] < cfg.batch_size:
        raise ConfigError(f"batch_size {cfg.batch_size} is larger than the pool to stream from ({np.shape(x)[0]} samples)")
    dtype = jnp.float64 if cfg.x64 else jnp.float32
    with _precision(cfg):
        xj, yj = jnp.asarray(x, dtype), jnp.asarray(np.reshape(y, (np.shape(y)[0], -1)), dtype)

        def cell(n, depth, seed):
            return run_cell(make_model(cfg, n, depth, xj.shape[1], yj.shape[1], seed), xj, yj, cfg)

        data, seconds = _grid(cell, widths, depths, seeds, cfg.steps, "L", progress)
    return _dataset(data, seconds, widths, depths, seeds, cfg, getattr(task, "describe", lambda: "arrays")(), DEPTH)


@register(
    "analysis",
    "pc-bptt",
    "PC through time vs BPTT on recurrent models: gradient cosine, s - 1, losses over width x length",
    figure=pc_bp_figures.overview,
    summary=pc_bp_figures.pc_bp_summary,
    outputs=(*Output.each(" ".join(VARIABLES), "real", ("width", "length", "seed", "step")),
             *Output.each("mean_cosine seconds", "real", ("width", "length"))),
)
@legacy_keywords
def compare_pc_bptt(
    task: str | Callable = "adding",
    widths: list[Count] = (8, 32, 128, 512),
    lengths: list[Count] = (2, 8, 32),
    seeds: int | list[int] = 3,
    *,
    progress: Callable[[int, int, dict], None] | None = None,
    param: str = "mf",
    gamma0: float = 1.0,
    gain: float = 1.0,
    time_alpha: float | None = None,
    activation: Literal["linear", "tanh", "relu"] = "linear",
    batch_size: int = 32,
    steps: int = 100,
    optimizer: Literal["gd", "adam"] = "adam",
    lr: float | None = None,
    x64: bool = False,
    inference: InferenceSettings = InferenceSettings(),
) -> xr.Dataset:
    r"""PC through time vs BPTT across width x sequence length: cosine, s - 1, loss curves.

    The network is an RNN under the same parameterisation ([`ParamRNN`][dynlab.rnn_param.ParamRNN]),
    PC runs through time (rule pc-time) against BPTT, and the sequence length T takes the place of
    the depth of [`compare_pc_bp`][] (s - 1 against T/N).

    Args:
        task: a registered sequence task with a length (e.g. adding); from Python also a function
            length -> Task. Each length's fixed batch is task.batch(key(0), batch_size).
        widths: the RNN widths N (positive integers).
        lengths: the sequence lengths T (positive integers).
        seeds: a number of seeds (weight initialisations 0..seeds-1) or a list of seeds.
        progress: called as ``progress(cells_done, cells_total, {"N": .., "T": .., "cos": ..})``.
        param, gamma0, activation, steps, optimizer, lr, x64, inference: as for [`compare_pc_bp`][].
        gain: recurrent gain g (1: the marginal network).
        time_alpha: None: the parameterised RNN; a number: the residual recurrence with depth factor T^-time_alpha.
        batch_size: size of each length's fixed batch.

    Returns the variables of [`compare_pc_bp`][] over (``width``, ``length``, ``seed``,
    ``step``), ``mean_cosine`` over (``width``, ``length``), the coordinate ``T_over_N`` and the
    log–log slope of $s-1$ against $T/N$ (attr ``rescaling_slope``; linear RNNs).
    """
    cfg = _compare_config("rnn", locals())  # everything checked before any work
    widths, lengths, seeds = _int_list("widths", widths), _int_list("lengths", lengths), _seed_list(seeds)
    make_task = length_task(task) if isinstance(task, str) else task
    first = make_task(lengths[0])
    if first.loss not in pc_time.OUTPUTS:
        raise ConfigError(f"task loss {first.loss!r} is not supported; valid: {', '.join(pc_time.OUTPUTS)}")
    if cfg.closed_form and first.loss != "mse":
        raise ConfigError(f"energy 'closed-form' needs the mse loss, the task has {first.loss!r}; use energy 'inference'")
    cfg.inference.check_loss(first.loss)
    dtype = jnp.float64 if cfg.x64 else jnp.float32
    with _precision(cfg):
        batches = {}
        draw = eqx.filter_jit(lambda t: t.batch(jax.random.key(0), cfg.batch_size, "train"))  # one compile per length
        for length in lengths:
            t = make_task(length)
            x, y, mask = draw(t)
            batches[length] = (jnp.asarray(x, dtype), jnp.asarray(y, y.dtype if t.loss != "mse" else dtype),
                               jnp.asarray(mask, dtype))

        def cell(n, length, seed):
            x, y, mask = batches[length]
            model = make_rnn(cfg, n, first.input_size, first.output_size, seed, length)
            return run_sequence_cell(model, x, y, mask, cfg, first.loss)

        data, seconds = _grid(cell, widths, lengths, seeds, cfg.steps, "T", progress)
    # the task at every length of the grid, not at the first only ("T=2" for T = 2, 8, 32)
    described = re.sub(r"\bT=\d+", "T=" + ", ".join(str(int(t)) for t in lengths), first.describe(), count=1)
    return _dataset(data, seconds, widths, lengths, seeds, cfg, described, LENGTH)


GRID_ARGUMENTS = ("task", "widths", "depths", "lengths", "seeds", "progress")
"""The arguments of [`compare_pc_bp`][] and [`compare_pc_bptt`][] that are not settings of [`CompareConfig`][]."""


def _compare_config(model: str, arguments: dict) -> CompareConfig:
    """The comparison's settings from its function's arguments (the signature holds their
    defaults): every argument but the grid's ([`GRID_ARGUMENTS`][]), through [`CompareConfig.from_options`][].

    **Enforces** "a mistake is found before any work": the settings, the grid, the seeds, a task
    named by its name, and the memory the grid needs ([`require_memory`][]) are checked here."""
    options = {k: v for k, v in arguments.items() if k not in GRID_ARGUMENTS and not (k == "batch_size" and v is None)}
    cfg = CompareConfig.from_options(model=model, **options)
    recurrent, task, batch_size = model == "rnn", arguments["task"], arguments["batch_size"]
    if not recurrent and batch_size is not None and cfg.batches != "stream":
        raise ConfigError("batch_size applies to streamed batches (batches stream) only; a fixed batch is the task's")
    if isinstance(task, str) and recurrent:
        length_task(task)
    elif isinstance(task, str):
        feedforward_name(task)
    second = _int_list("lengths" if recurrent else "depths", arguments["lengths" if recurrent else "depths"])
    _seed_list(arguments["seeds"])
    require_memory(model, _int_list("widths", arguments["widths"]), second,
                   cfg.batch_size if recurrent else batch_size or 64)
    return cfg


def pc_bp_warnings(ds: xr.Dataset) -> list[str]:
    """What a comparison's user must be told about its cosines (printed as warnings): steps whose
    inference did not converge, and steps whose gradients vanished (cosine set to 0)."""
    notes = []
    if ds.attrs["n_unconverged"]:
        notes.append(f"inference did not converge at {ds.attrs['n_unconverged']} of {ds['converged'].size} steps; "
                     "their cosines are excluded (NaN in 'cosine', kept in 'cosine_unconverged')")
    if ds.attrs["n_vanishing_gradients"]:
        notes.append(f"at {ds.attrs['n_vanishing_gradients']} steps the product of the PC and BP gradient norms was "
                     f"below {COSINE_EPS:g} (the network fits its batch); their cosine is set to 0 (the public code's "
                     "convention): see grad_norm_pc, grad_norm_bp")
    return notes


def length_task(name: str):
    """``length -> Task`` for a registered task name that has a ``length`` config key."""
    entry = registry.get("task", name)
    if "length" not in registry.config_keys(entry.obj):
        with_length = [n for n in registry.names("task") if "length" in registry.config_keys(registry.get("task", n).obj)]
        raise ConfigError(f"task {name!r} has no length to vary; tasks with a length: {', '.join(with_length)}")
    return lambda length: registry.build("task", name, length=length)


def _seed_list(seeds) -> list[int]:
    seeds = list(range(seeds)) if isinstance(seeds, int) and not isinstance(seeds, bool) else _int_list("seeds", seeds, zero=True)
    if not seeds:
        raise ConfigError("seeds must be a positive integer or a non-empty list")
    return seeds


def _precision(cfg: CompareConfig):
    return jax.enable_x64(True) if cfg.x64 else contextlib.nullcontext()


def _grid(cell, widths, second, seeds, steps, symbol, progress):
    """Run ``cell(width, second, seed)`` (per-step metrics) over the grid; the arrays of [`VARIABLES`][]."""
    shape = (len(widths), len(second), len(seeds), steps)
    data = {k: np.full(shape, np.nan) for k in VARIABLES}
    seconds = np.zeros(shape[:2])
    total, done = len(widths) * len(second), 0
    for i, n in enumerate(widths):
        for j, v in enumerate(second):
            t0 = time.perf_counter()
            for k, seed in enumerate(seeds):
                out = jax.device_get(cell(n, v, seed))
                conv = np.asarray(out["converged"], bool)
                cos = np.asarray(out["cosine"], np.float64)
                data["cosine_unconverged"][i, j, k] = cos
                data["cosine"][i, j, k] = np.where(conv, cos, np.nan)
                for name in ("loss_pc", "loss_bp", "energy", "s_minus_1", "s_max_minus_1", "inference_steps", "grad_ratio",
                             "energy_change",
                             "activity_distance", "grad_norm_pc", "grad_norm_bp"):
                    data[name][i, j, k] = np.asarray(out[name], np.float64)
                data["converged"][i, j, k] = conv
                data["loss_over_energy"][i, j, k] = np.asarray(out["loss_pc"], np.float64) / np.asarray(out["energy"], np.float64)
            seconds[i, j] = time.perf_counter() - t0
            done += 1
            if progress is not None:
                cos = data["cosine"][i, j]
                progress(done, total, {"N": n, symbol: v, "cos": float(np.nanmean(cos)) if np.isfinite(cos).any() else np.nan})
    return data, seconds


def _int_list(name, values, zero=False):
    return number_list(name, values, integer=True, minimum=0 if zero else 1)


FEEDFORWARD_TASKS = {"toy": "pc-toy", "mnist": "pc-mnist", "cifar10": "pc-cifar10"}
"""The tasks of the feed-forward comparison by their short names (recurrent models take any
registered task that has a ``length``)."""
def feedforward_name(name: str) -> str:
    """The registered task of the feed-forward comparison's short name ([`FEEDFORWARD_TASKS`][]);
    an unknown name is a [`ConfigError`][] listing the valid ones."""
    if name not in FEEDFORWARD_TASKS:
        raise ConfigError(f"unknown task {name!r} for --model mlp; valid: {', '.join(sorted(FEEDFORWARD_TASKS))}")
    return FEEDFORWARD_TASKS[name]


def require_memory(model: str, widths: list[int], second: list[int], rows: int) -> None:
    """**Enforces** "a grid whose widest network does not fit in memory is refused before any
    work" ([`dynlab.budget.require`][]): the widest network at the deepest depth (``model``
    ``"mlp"``) or the longest sequence (``"rnn"``, ``rows`` sequences of length ``max(second)``)."""
    recurrent = model == "rnn"
    nbytes = budget.dense_bytes(widths, depth=1 if recurrent else max(second),
                                batch=rows * (max(second) if recurrent else 1))
    budget.require(nbytes, size=f"--widths {max(widths)}", lower="--widths",
                   what=f"a {'recurrent' if recurrent else 'dense'} network of that width")


def plan(model: str, arguments: dict) -> str:
    """One line saying what a comparison will run, from the arguments of [`compare_pc_bp`][]
    (``model`` ``"mlp"``) or [`compare_pc_bptt`][] (``"rnn"``), defaults included: the task,
    parameterisation, network, energy, optimiser and the size of the grid. The settings and the
    memory the grid needs are checked on the way ([`CompareConfig`][], [`require_memory`][]), so a
    mistake is found before any work."""
    cfg = _compare_config(model, arguments)
    recurrent = model == "rnn"
    second = _int_list("lengths" if recurrent else "depths", arguments["lengths" if recurrent else "depths"])
    task = arguments["task"] if isinstance(arguments["task"], str) else "the given task"
    network = "RNN" if recurrent else "residual" if cfg.residual else "MLP"
    kind = f"{network} {cfg.activation}" + (", PC through time vs BPTT" if recurrent else "")
    on = f"{task} (T = {', '.join(map(str, second))}, P = {cfg.batch_size})" if recurrent else task
    return (f"PC vs BP on {on}: param {cfg.param}, {kind}, energy {cfg.energy}, {cfg.optimizer}, "
            f"{len(_int_list('widths', arguments['widths']))} widths x {len(second)} {'lengths' if recurrent else 'depths'} "
            f"x {len(_seed_list(arguments['seeds']))} seeds x {cfg.steps} steps")


def rescaling_slope(ds: xr.Dataset, variable: str = "s_minus_1") -> tuple[float, float]:
    r"""Least-squares slope and intercept of $\log(s-1)$ against $\log(L/N)$ (or $\log(T/N)$) over the cells
    (mean over seeds and steps).

    ``variable``: ``s_minus_1`` ($\operatorname{tr}(S-I)/d_{out}$) or ``s_max_minus_1`` ($\lambda_{\max}(S) - 1$).
    """
    s1 = ds[variable].mean(("seed", "step")).values.ravel()
    ln = ds[grid_axis(ds).ratio].values.ravel()
    ok = np.isfinite(s1) & (s1 > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    slope, intercept = np.polyfit(np.log(ln[ok]), np.log(s1[ok]), 1)
    return float(slope), float(intercept)


def _dataset(data, seconds, widths, second, seeds, cfg, task_name: str, axis: GridAxis) -> xr.Dataset:
    from dynlab.config import dumps

    dims = ("width", axis.dim, "seed", "step")
    variables = {}
    for name, long_name in VARIABLES.items():
        values = data[name]
        if name == "converged":
            values = values.astype(bool)
        elif name == "inference_steps":
            values = values.astype(np.int64)
        variables[name] = (dims, values, {"long_name": long_name})
    w, d = np.meshgrid(np.asarray(widths, float), np.asarray(second, float), indexing="ij")
    coords = {
        "width": ("width", np.asarray(widths), {"long_name": "width N"}),
        axis.dim: (axis.dim, np.asarray(second), {"long_name": axis.long_name}),
        "seed": ("seed", np.asarray(seeds)),
        "step": ("step", np.arange(cfg.steps), {"long_name": "training step"}),
        axis.ratio: (("width", axis.dim), d / w, {"long_name": f"{axis.symbol} / N"}),
    }
    ds = xr.Dataset(variables, coords=coords)
    ds["mean_cosine"] = ds["cosine"].mean(("seed", "step"), skipna=True)
    ds["mean_cosine"].attrs["long_name"] = "cosine averaged over seeds and steps (converged steps only)"
    ds["seconds"] = (("width", axis.dim), seconds, {"long_name": "wall-clock seconds per cell (all seeds)", "units": "s"})
    slope, intercept = rescaling_slope(ds)
    slope_max, _ = rescaling_slope(ds, "s_max_minus_1")
    n_unconverged = int((~ds["converged"].values).sum())
    n_vanishing = int((ds["grad_norm_pc"] * ds["grad_norm_bp"] <= COSINE_EPS).sum())
    config = cfg.describe()
    unused = ("alpha", "residual", "batches") if cfg.model == "rnn" else ("gain", "time_alpha")
    config = {k: v for k, v in config.items() if v is not None and k not in unused}
    if cfg.model == "rnn":
        ds.attrs.update(model="rnn-param" if cfg.time_alpha is None else "rnn-residual", gain=float(cfg.gain),
                        batch_size=cfg.batch_size)
        if cfg.time_alpha is not None:
            ds.attrs["time_alpha"] = float(cfg.time_alpha)
    else:
        ds.attrs.update(model="mlp", alpha=float(ffmodels.parameterisation(cfg.param, alpha=cfg.alpha).alpha),
                        residual=int(cfg.residual), batches=cfg.batches, batch_size=cfg.batch_size)
    return stamp(ds, analysis="pc-bptt" if cfg.model == "rnn" else "pc-bp", config=dict(
        config=dumps({"compare": config, "widths": list(widths), axis.config_key: list(second), "seeds": list(seeds)}),
        seeds=np.asarray(seeds),
        task=task_name,
        param=cfg.param,
        activation=cfg.activation,
        energy=cfg.energy,
        optimizer=cfg.optimizer,
        lr=cfg.base_lr,
        dtype="float64" if cfg.x64 else "float32",
        rescaling_slope=slope,
        rescaling_intercept=intercept,
        rescaling_max_slope=slope_max,
        n_unconverged=n_unconverged,
        n_vanishing_gradients=n_vanishing,
    ))
