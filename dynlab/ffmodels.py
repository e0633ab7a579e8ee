r"""Feed-forward networks under width/depth parameterisations (MLP and residual MLP).

These are the models of the predictive-coding width/depth study (Innocenti, Achour & Bogacz,
"On the infinite width and depth limits of predictive coding networks", Eqs. 7–12, 18, 95–98).
A network of depth $L$ has $L$ weight matrices and $L-1$ hidden layers of width $N$:

$$ h^{(1)} = \frac{1}{N^{a_1}\sqrt{D}} W^{(1)} x, \qquad
   h^{(\ell)} = \underbrace{h^{(\ell-1)}}_{\text{residual only}}
                + \frac{1}{L^{\alpha}_{\text{res}} N^{a}} W^{(\ell)} \phi(h^{(\ell-1)}),
   \quad \ell = 2,\dots,L-1, \qquad
   f = \frac{1}{\gamma N^{a}} W^{(L)} \phi(h^{(L-1)}), $$

with $W^{(1)}_{ij} \sim \mathcal N(0, N^{-b_1})$, $W^{(\ell)}_{ij} \sim \mathcal N(0, N^{-b})$ for
$\ell \ge 2$, output scale $\gamma = \gamma_0 N^{d}$ and $L^{\alpha}_{\text{res}} = L^{\alpha}$ for
residual networks (1 without skips). The skip connections span the hidden→hidden layers only; the
first and last layers are never residual (Eq. 18). The activation $\phi$ is applied to the
*input* of layers $\ell \ge 2$ (jpc's ordering, and the issue's $h + W\phi(h)/(L^\alpha\sqrt N)$);
for linear networks there is no difference.

Parameterisations are *values* ([`Parameterisation`][]), with the presets of the paper's
Table 2 (``sp``, ``ntk``, ``mf``, ``mup``). Every member of the stable feature-learning family
(Eq. 15) satisfies $2a+b=1$, $2a+c=1$, $2a_1+b_1=0$, $2a_1+c=0$, $d=\tfrac12$.

Learning rates ([`learning_rates`][]):

* GD (Eq. 14): one global rate $\eta = \eta_0 \gamma^2 N^{-c}$.
* Adam (§A.6): Adam is scale invariant, so the rates are set per layer so that every feature moves
  by $\Theta(1)$ per step. For the feature-learning presets (``mf``, ``mup``) this gives
  $\eta_0 N^{a_1}$ (input), $\eta_0 N^{a-1} L^{\alpha-1}$ (hidden; $L^{\alpha-1}$ only with skips)
  and $\eta_0 N^{a+d-1}$ (output) — for ``mf`` exactly the paper's rule "hidden matrices
  $\times N^{-1/2} L^{\alpha-1}$, others unchanged". The general exponents are derived here [D];
  the paper states only the ``mf`` case. ``sp`` and ``ntk`` use one global rate $\eta_0$ (the
  standard practice they stand for). Note: the public jpc experiment code instead scales *every*
  layer by $1/\sqrt{NL}$; we follow the paper.

Biases are off by default, as in the theory; with ``bias=True`` each layer gets an unscaled bias
initialised at zero.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, PRNGKeyArray, PyTree

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register

ACTIVATIONS = {"linear": lambda x: x, "tanh": jnp.tanh, "relu": jax.nn.relu}


def check_alpha(alpha) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"alpha must be a number in [0, 1] (0, 1/2 or 1 in the paper), got {alpha!r}")


@dataclasses.dataclass(frozen=True)
class Parameterisation:
    r"""Width exponents $(a_1, b_1, a, b, c, d)$ of the abcd parameterisation, $\gamma_0$ and $\alpha$.

    ``a``/``b`` apply to every layer $\ell \ge 2$ (hidden and output), as in Table 2.
    ``alpha`` scales the residual branches by $L^{-\alpha}$ (ignored without skips).
    ``adam_scaling``: whether Adam's per-layer rates follow the width/depth rule (see the module
    docstring) or one global rate is used.
    """

    name: str
    a1: float
    b1: float
    a: float
    b: float
    c: float
    d: float
    gamma0: float = 1.0
    alpha: float = 0.5
    adam_scaling: bool = True

    def __post_init__(self):
        check_alpha(self.alpha)
        require_positive("gamma0", self.gamma0, integer=False)

    def gamma(self, width: int) -> float:
        r"""Output scale $\gamma = \gamma_0 N^{d}$ (Eq. 11)."""
        return self.gamma0 * width**self.d

    def replace(self, **changes) -> "Parameterisation":
        return dataclasses.replace(self, **changes)

    def is_feature_learning(self) -> bool:
        """Does it satisfy Eq. 15 (the stable feature-learning family)?"""
        ok = math.isclose
        return (ok(2 * self.a + self.b, 1) and ok(2 * self.a + self.c, 1) and ok(2 * self.a1 + self.b1, 0, abs_tol=1e-12)
                and ok(2 * self.a1 + self.c, 0, abs_tol=1e-12) and ok(self.d, 0.5))


PRESETS: dict[str, Parameterisation] = {
    # Table 2 of the paper (the same table holds for BP and PC).
    "sp": Parameterisation("sp", a1=0.0, b1=0.0, a=0.0, b=1.0, c=0.0, d=0.0, alpha=0.0, adam_scaling=False),
    "ntk": Parameterisation("ntk", a1=0.0, b1=0.0, a=0.5, b=0.0, c=0.0, d=0.0, adam_scaling=False),
    "mf": Parameterisation("mf", a1=0.0, b1=0.0, a=0.5, b=0.0, c=0.0, d=0.5),
    "mup": Parameterisation("mup", a1=-0.5, b1=1.0, a=0.0, b=1.0, c=1.0, d=0.5),
}


def parameterisation(name: str | Parameterisation, *, alpha: float | None = None, gamma0: float | None = None,
                     **exponents: float) -> Parameterisation:
    """A preset by name (``sp``, ``ntk``, ``mf``, ``mup``), with optional overrides.

    ``alpha`` defaults to 1/2 (0 for ``sp``); ``exponents`` may override ``a1``, ``b1``, ``a``,
    ``b``, ``c``, ``d`` to make a custom parameterisation.
    """
    if isinstance(name, Parameterisation):
        base = name
    elif name not in PRESETS:
        raise ConfigError(f"unknown parameterisation {name!r}; valid: {', '.join(PRESETS)}")
    else:
        base = PRESETS[name]
    unknown = set(exponents) - {"a1", "b1", "a", "b", "c", "d"}
    if unknown:
        raise ConfigError(f"unknown parameterisation exponent(s) {', '.join(sorted(unknown))}; valid: a1, b1, a, b, c, d")
    changes = dict(exponents)
    if alpha is not None:
        changes["alpha"] = alpha
    if gamma0 is not None:
        changes["gamma0"] = gamma0
    if exponents:
        changes["name"] = f"{base.name}+custom"
    return base.replace(**changes) if changes else base


@register("model", "mlp", "feed-forward MLP / residual MLP under an abcd width parameterisation and depth exponent alpha")
class FeedForward(eqx.Module):
    r"""An MLP or residual MLP of depth ``depth`` (= $L$ weight matrices) and width ``width`` (= $N$).

    Args:
        input_size: $D$.
        output_size: $d_{out}$.
        width: $N$, the width of every hidden layer.
        depth: $L \ge 2$, the number of weight matrices ($L-1$ hidden layers, $L-2$ of them
            $N \times N$).
        param: a preset name (``sp``, ``ntk``, ``mf``, ``mup``) or a [`Parameterisation`][].
        alpha: depth exponent of the residual branches, in $[0, 1]$ (default: the preset's, 1/2).
        gamma0: $\gamma_0$ (default 1).
        residual: skip connections around the hidden→hidden layers.
        activation: ``linear``, ``tanh`` or ``relu``.
        bias: add (unscaled, zero-initialised) biases.
        key: PRNG key.

    ``model(x)`` maps one sample ``x[D]`` to ``f[d_out]``; ``x[T, D]`` gives ``[T, d_out]`` (so
    the sequence-task trainer and [`evaluate`][dynlab.rules.base.Rule.evaluate] work with ``T = 1``).
    Hidden weights are stored stacked, ``w_hidden[L-2, N, N]``, and the hidden layers run in a
    ``lax.scan``.
    """

    w_in: Array
    w_hidden: Array
    w_out: Array
    b_in: Array | None
    b_hidden: Array | None
    b_out: Array | None
    width: int = eqx.field(static=True)
    depth: int = eqx.field(static=True)
    input_size: int = eqx.field(static=True)
    output_size: int = eqx.field(static=True)
    residual: bool = eqx.field(static=True)
    activation: str = eqx.field(static=True)
    param: Parameterisation = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        width: int = 128,
        depth: int = 4,
        param: str | Parameterisation = "mf",
        alpha: float | None = None,
        gamma0: float = 1.0,
        residual: bool = True,
        activation: Literal["linear", "tanh", "relu"] = "linear",
        bias: bool = False,
        key: PRNGKeyArray,
    ):
        for name, value in (("input_size", input_size), ("output_size", output_size), ("width", width), ("depth", depth)):
            require_positive(name, value)
        if depth < 2:
            raise ConfigError(f"depth must be at least 2 (input and output layers), got {depth}")
        if activation not in ACTIVATIONS:
            raise ConfigError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        p = parameterisation(param, alpha=alpha, gamma0=gamma0)
        self.param, self.width, self.depth = p, width, depth
        self.input_size, self.output_size = input_size, output_size
        self.residual, self.activation = bool(residual), activation
        k_in, k_hid, k_out = jax.random.split(key, 3)
        n = float(width)
        self.w_in = jax.random.normal(k_in, (width, input_size)) * n ** (-p.b1 / 2)
        self.w_hidden = jax.random.normal(k_hid, (depth - 2, width, width)) * n ** (-p.b / 2)
        self.w_out = jax.random.normal(k_out, (output_size, width)) * n ** (-p.b / 2)
        if bias:
            self.b_in = jnp.zeros(width)
            self.b_hidden = jnp.zeros((depth - 2, width))
            self.b_out = jnp.zeros(output_size)
        else:
            self.b_in = self.b_hidden = self.b_out = None

    # -- multipliers ------------------------------------------------------------------------------

    @property
    def m_in(self) -> float:
        r"""$N^{-a_1} D^{-1/2}$ (Eq. 10)."""
        return self.width ** (-self.param.a1) / math.sqrt(self.input_size)

    @property
    def m_hidden(self) -> float:
        r"""$N^{-a}$, times $L^{-\alpha}$ with skips (Eq. 18)."""
        m = self.width ** (-self.param.a)
        return m * self.depth ** (-self.param.alpha) if self.residual else m

    @property
    def m_out(self) -> float:
        r"""$N^{-a} / \gamma$ with $\gamma = \gamma_0 N^d$ (Eqs. 7–8)."""
        return self.width ** (-self.param.a) / self.param.gamma(self.width)

    def phi(self, h: Array) -> Array:
        return ACTIVATIONS[self.activation](h)

    @property
    def is_linear(self) -> bool:
        return self.activation == "linear" and self.b_in is None

    # -- layer maps (batched over a leading sample axis) ------------------------------------------

    def first(self, x: Array) -> Array:
        """$f_1(x)$ for ``x[..., D]``."""
        h = self.m_in * (x @ self.w_in.T)
        return h if self.b_in is None else h + self.b_in

    def hidden(self, w: Array, b: Array | None, z: Array) -> Array:
        r"""$f_\ell(z)$ of the hidden layer with weights ``w[N, N]`` (and bias ``b``, or ``None``)."""
        h = self.m_hidden * (self.phi(z) @ w.T)
        if b is not None:
            h = h + b
        return z + h if self.residual else h

    def _scan_hidden(self, h: Array, keep: bool):
        def body(h, wb):
            h = self.hidden(wb[0], wb[1], h)
            return h, (h if keep else None)

        return jax.lax.scan(body, h, (self.w_hidden, self.b_hidden))

    def hidden_all(self, zs: Array) -> Array:
        r"""$f_{\ell}(z_{\ell-1})$ for all hidden layers at once: ``zs[L-2, ..., N]`` are the inputs."""
        h = self.m_hidden * jnp.einsum("lij,l...j->l...i", self.w_hidden, self.phi(zs))
        if self.b_hidden is not None:
            h = h + self.b_hidden.reshape(self.b_hidden.shape[:1] + (1,) * (zs.ndim - 2) + self.b_hidden.shape[1:])
        return zs + h if self.residual else h

    def last(self, z: Array) -> Array:
        """$f_L(z)$, the network output, for ``z[..., N]``."""
        out = self.m_out * (self.phi(z) @ self.w_out.T)
        return out if self.b_out is None else out + self.b_out

    # -- passes -----------------------------------------------------------------------------------

    def activations(self, x: Array) -> Array:
        r"""Feed-forward hidden activities $h^{(1)},\dots,h^{(L-1)}$: ``[L-1, ..., N]`` for ``x[..., D]``."""
        h1 = self.first(x)
        _, rest = self._scan_hidden(h1, keep=True)
        return jnp.concatenate([h1[None], rest], axis=0)

    def forward(self, x: Array) -> Array:
        """Output for ``x[..., D]`` (any leading axes)."""
        h, _ = self._scan_hidden(self.first(x), keep=False)
        return self.last(h)

    def __call__(self, x: Array) -> Array:
        if x.shape[-1] != self.input_size:
            raise ConfigError(f"model expects inputs with last axis {self.input_size}, got shape {tuple(x.shape)}")
        return self.forward(x)

    def param_count(self) -> dict[str, int]:
        leaves = jax.tree_util.tree_leaves(eqx.filter(self, eqx.is_inexact_array))
        return {"total": int(sum(l.size for l in leaves)), "N": self.width, "L": self.depth}


def astype(model: PyTree, dtype) -> PyTree:
    """The model (or any PyTree: a batch, activities) with every floating array cast to ``dtype`` (call
    under ``jax.enable_x64`` for float64)."""
    return jax.tree_util.tree_map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, model)


def _labels(model):
    """Per-leaf layer kind: ``in``, ``hidden``, ``out``, as a PyTree like ``model``'s arrays (by array name;
    the recurrent matrix ``w_rec`` of [`dynlab.rnn_param.ParamRNN`][] is a hidden layer)."""
    kinds = {"w_in": "in", "b_in": "in", "w_hidden": "hidden", "b_hidden": "hidden", "w_rec": "hidden",
             "w_out": "out", "b_out": "out"}
    params = eqx.filter(model, eqx.is_inexact_array)
    return jax.tree_util.tree_map_with_path(lambda path, _: kinds[path[-1].name], params)


def learning_rates(model, optimizer: Literal["gd", "adam"], lr: float):
    r"""Per-leaf learning rates (a PyTree like the model's arrays) for ``optimizer`` and base rate $\eta_0$.

    ``model``: a [`FeedForward`][] or a [`ParamRNN`][dynlab.rnn_param.ParamRNN] (no skips, so no
    depth factor). GD: $\eta_0 \gamma^2 N^{-c}$ everywhere (Eq. 14). Adam: see the module docstring.
    """
    require_positive("lr", lr, integer=False)
    p, n = model.param, float(model.width)
    if optimizer == "gd":
        rates = {k: lr * p.gamma(model.width) ** 2 * n ** (-p.c) for k in ("in", "hidden", "out")}
    elif optimizer == "adam":
        if p.adam_scaling:
            depth_factor = float(model.depth) ** (p.alpha - 1.0) if getattr(model, "residual", False) else 1.0
            rates = {"in": lr * n**p.a1, "hidden": lr * n ** (p.a - 1.0) * depth_factor, "out": lr * n ** (p.a + p.d - 1.0)}
        else:
            rates = {k: lr for k in ("in", "hidden", "out")}
    else:
        raise ConfigError(f"unknown optimizer {optimizer!r}; valid: gd, adam")
    return jax.tree_util.tree_map(lambda kind: rates[kind], _labels(model))


def scale_by_tree(rates) -> optax.GradientTransformation:
    """Multiply each leaf's update by minus its rate (a descent step with per-leaf learning rates)."""

    def init(params):
        return optax.EmptyState()

    def update(updates, state, params=None):
        return jax.tree_util.tree_map(lambda u, r: -r * u, updates, rates), state

    return optax.GradientTransformation(init, update)


def optimizer(model, name: Literal["gd", "adam"], lr: float) -> optax.GradientTransformation:
    """The parameterisation's optimiser: GD or Adam with the per-layer rates of [`learning_rates`][]."""
    rates = learning_rates(model, name, lr)
    base = optax.identity() if name == "gd" else optax.scale_by_adam()
    return optax.chain(base, scale_by_tree(rates))
