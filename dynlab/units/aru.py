r"""The Adaptive Recurrent Unit family (Geadah et al., "Neural networks with optimized
single-neuron adaptation uncover biologically plausible regularization"; notes §1).

All three units share the main recurrence (paper Eq. 1)

$$ a_t = W_{hh} h_{t-1} + W_{xh} x_t + b_h + \xi_t, \qquad h_t = \phi(a_t) $$

where $\xi_t$ is the optional ``drive`` and $\phi$ is

* ``rnn``: tanh or ReLU;
* ``rnn-gamma``: the activation family $\gamma(a; n, s)$ with parameters trained but fixed during a
  sequence, shared by all neurons (homogeneous) or one pair per neuron (heterogeneous);
* ``aru``: $\gamma(a^i_t; n^i_t, s^i_t)$ whose $(n, s)$ are set at every step by each neuron's private
  controller RNN (Eqs. 3–5) that sees the neuron's pre-activation $a^i_t$ (drive included).

Initialisation (``init``):

* ``"paper"`` (default) follows the paper where it speaks: an orthogonal $W_{hh}$ (the paper says
  "Henaff"; dynlab draws a Haar-random orthogonal matrix), $n \sim N(5, 2^2)$, $s = 0$. Where the
  paper is silent (notes §1 [gap]) dynlab chooses: $W_{xh} \sim U(\pm 1/\sqrt{H})$, $b_h = 0$, and
  the controller of [`ARUCell`][]. These are dynlab's choices, not the original implementation's.
* ``"public-code"`` is the original implementation (vgeadah/NonlinMod, ``ARUN.init_weights`` and
  the ``RNN`` of ``sMNIST_task.py``, with its defaults ``--iinit kaiming --rinit henaff``):
  Kaiming-normal input weights ($N(0, 2/\text{fan-in})$: $W_{xh}$, and the controller's $W_{ag}$,
  fan-in 1), Henaff's orthogonal recurrence ([`henaff_orthogonal`][]) for $W_{hh}$ and the
  controller's $W_{gg}$, zero biases, read-outs $W_{gn}, W_{gs}$ Xavier-normal with gains 0.1 and
  0.01, and one gain bias $b_n = 5 + 2\,U(0, 1)$ drawn once and shared by all neurons (also the
  static $n$ of RNN+$\gamma$), $s = 0$. ``n_mean``, ``n_std`` and ``readout_scale`` are then unused.

$h_0 = 0$, $g_0 = 0$ either way. Two more differences of the public code are options of the
units: it has no gain floor (``n_min = 0``; see [`gamma`][]) and its softplus turns linear above
$n x > 20$ (``softplus_threshold = 20``; PyTorch's default).

Biases (``split_biases``): by default the main recurrence has one bias $b_h$ and the controller
one $b_g$. The public code gives each of its ``nn.Linear`` maps a bias of its own and adds them:
with ``split_biases=True`` the units hold them apart, $b_h = b_{xh} + b_{hh}$ (``b_xh``,
``b_hh``) and $b_g = b_{ag} + b_{gg}$ (``b_ag``, ``b_gg``): the same function with the code's
parameters ($H + n_g$ more for ``aru``, $H$ more for ``rnn`` and ``rnn-gamma``), each bias
getting its own gradient. They start at zero, except that ``init="public-code"`` draws the
``rnn`` / ``rnn-gamma`` pair as PyTorch's ``nn.Linear`` does, $b_{xh} \sim U(\pm 1/\sqrt{D})$,
$b_{hh} \sim U(\pm 1/\sqrt{H})$: the code's ``RNN`` (built with ``bias=True`` by
``sMNIST_task.py``) never re-initialises them, while ``ARUN.init_weights`` sets its four to
zero. (Without ``split_biases`` the public-code ``rnn`` / ``rnn-gamma`` start from $b_h = 0$.)
"""

from __future__ import annotations

from typing import Annotated, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.config import FloatOrInf, Range
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.units.base import Cell, add_drive, count_params, width_multiple


N_MIN = 0.5
"""Default floor of the gain $n$ (see [`gamma`][])."""

INITS = ("paper", "public-code")


def check_gamma_options(n_min, softplus_threshold) -> None:
    """``n_min >= 0`` (0: no floor) and ``softplus_threshold > 0`` (``inf``: never linear)."""
    if isinstance(n_min, bool) or not isinstance(n_min, (int, float)) or not n_min >= 0 or n_min == float("inf"):
        raise ConfigError(f"n_min must be a finite number >= 0 (0: no gain floor, as the public code), got {n_min!r}")
    if isinstance(softplus_threshold, bool) or not isinstance(softplus_threshold, (int, float)) or not softplus_threshold > 0:
        raise ConfigError(f"softplus_threshold must be a number > 0 (inf: never linear; the public code: 20), "
                          f"got {softplus_threshold!r}")


def check_init(init) -> None:
    if init not in INITS:
        raise ConfigError(f"init must be one of {', '.join(map(repr, INITS))}, got {init!r}")


def henaff_orthogonal(key: PRNGKeyArray, n: int) -> Array:
    r"""Henaff et al.'s orthogonal matrix as the public ARU code builds it: $\exp(A)$ of a
    skew-symmetric $A$ whose only non-zeros are $A_{2i,2i+1} = -A_{2i+1,2i} = \theta_i$,
    $\theta_i \sim U(-\pi, 0)$, $i < \lfloor n/2 \rfloor$: 2x2 rotation blocks
    $\begin{pmatrix}\cos\theta & \sin\theta\\ -\sin\theta & \cos\theta\end{pmatrix}$ (and a 1 last for odd $n$),
    written in closed form."""
    theta = jax.random.uniform(key, (n // 2,), minval=-jnp.pi, maxval=0.0)
    i = 2 * jnp.arange(n // 2)
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.eye(n).at[i, i].set(c).at[i + 1, i + 1].set(c).at[i, i + 1].set(s).at[i + 1, i].set(-s)


def kaiming_normal(key: PRNGKeyArray, shape: tuple[int, ...]) -> Array:
    r"""PyTorch's ``kaiming_normal_`` (fan-in = the last axis, ReLU gain): $N(0, 2/\text{fan-in})$."""
    return (2.0 / shape[-1]) ** 0.5 * jax.random.normal(key, shape)


def public_code_gain(key: PRNGKeyArray) -> Array:
    r"""The public code's gain bias: one draw of $5 + 2\,U(0, 1)$."""
    return 5.0 + 2.0 * jax.random.uniform(key, (), dtype=float)


def gamma(x: Array, n: Array, s: Array, *, n_min: float = N_MIN, softplus_threshold: float = float("inf")) -> Array:
    r"""The ARU activation family (paper Eq. 2 / Eq. 8).

    $$ \gamma(x; n, s) = (1 - s)\,\frac{\operatorname{softplus}(n x)}{n} + s\,\sigma(n x) $$

    $n$ is the gain (large $n$ tends to ReLU at $s = 0$), $s$ the saturation ($s = 0$ softplus,
    $s = 1$ sigmoid). ``softplus`` and ``sigmoid`` are evaluated in their overflow-free forms, so
    the value and its gradients are finite for any $|n x|$.

    The family is defined for $n > 0$ (the domain the original implementation documents; the
    paper's $(n, s)$ grid starts at $n = 1$). At $n \to 0$ it has a pole,
    $\operatorname{softplus}(n x)/n \approx \ln 2 / n + x/2$: a gain that drifts through zero during
    training sends that neuron's output to $\pm\ln 2/|n|$ and, through $W_{hh}$, the network to
    inf (seen: ARUN seed 2 of ``aru-table1`` at Adam lr 1e-3 diverged at step 121, when one
    neuron's gain, drawn near 0 from the prior $N(5, 2^2)$, crossed zero). The paper does not say
    how it keeps $n$ positive, so we floor it: $n \leftarrow \max(n, n_{\min})$ with ``n_min`` = 0.5
    by default ($\gamma(0) \le 2\ln 2$ at the floor), a parameter of the units. The floor is the
    identity (values and gradients) for $n \ge n_{\min}$; below it $\partial\gamma/\partial n = 0$.
    It acts on 1.2% of the prior's draws. ``n_min = 0``: no floor (the public code).

    ``softplus_threshold``: above $n x >$ this value the softplus term is replaced by $x$, as
    PyTorch's ``softplus`` (threshold 20) in the public code does (a change of at most
    $\ln(1 + e^{-20})/n \approx 2\cdot 10^{-9}/n$); default ``inf``: the exact softplus.
    """
    n = jnp.asarray(n)
    if n_min > 0:
        n = jnp.where(n < n_min, n_min, n)  # not jnp.maximum: at n = n_min the gradient must pass whole
    nx = n * x
    soft = jax.nn.softplus(nx)
    if softplus_threshold != float("inf"):
        soft = jnp.where(nx > softplus_threshold, nx, soft)
    return (1 - s) * soft / n + s * jax.nn.sigmoid(nx)


def _uniform(key, shape, bound):
    return jax.random.uniform(key, shape, minval=-bound, maxval=bound)


def controller_params(hidden: int, n_g: int, prior: str, n_mean: float, n_std: float, s_init: float,
                      readout_scale: float, keys, init: str = "paper", split_biases: bool = False) -> dict[str, Array]:
    r"""Initial weights of ``hidden`` per-neuron controller RNNs (Eqs. 3–5; see [`ARUCell`][]).

    ``keys``: five PRNG keys (for $W_{ag}$, $W_{gg}$, $W_{gn}$, $W_{gs}$, $b_n$). Returns the arrays
    ``w_ag[n_g]``, ``w_gg[n_g, n_g]``, ``b_g[n_g]``, ``w_gn[n_g]``, ``w_gs[n_g]`` and ``b_n``, ``b_s``
    (``[hidden]`` with ``prior="per-neuron"``, scalars with ``"shared"``). ``init="public-code"``:
    the original implementation's draws (module doc; ``n_mean``, ``n_std``, ``readout_scale`` unused).
    ``split_biases=True``: ``b_ag[n_g]`` and ``b_gg[n_g]`` (zeros, as the code's) and ``b_g = None``.
    """
    require_positive("n_g", n_g)
    if prior not in ("per-neuron", "shared"):
        raise ConfigError(f"prior must be 'per-neuron' or 'shared', got {prior!r}")
    check_init(init)
    biases = {"b_g": None, "b_ag": jnp.zeros(n_g), "b_gg": jnp.zeros(n_g)} if split_biases else {"b_g": jnp.zeros(n_g)}
    k_ag, k_gg, k_gn, k_gs, k_n = keys
    if init == "public-code":
        xavier = (2.0 / (n_g + 1)) ** 0.5  # Xavier-normal std of a [1, n_g] Linear, before its gain
        b_n = public_code_gain(k_n)
        return {"w_ag": kaiming_normal(k_ag, (n_g, 1))[:, 0], "w_gg": henaff_orthogonal(k_gg, n_g), **biases,
                "w_gn": 0.1 * xavier * jax.random.normal(k_gn, (n_g,)),
                "w_gs": 0.01 * xavier * jax.random.normal(k_gs, (n_g,)),
                "b_n": jnp.full((hidden,), b_n) if prior == "per-neuron" else b_n,
                "b_s": jnp.full((hidden,), float(s_init), dtype=float) if prior == "per-neuron"
                else jnp.asarray(float(s_init), dtype=float)}
    bound = n_g**-0.5
    params = {"w_ag": _uniform(k_ag, (n_g,), bound), "w_gg": _uniform(k_gg, (n_g, n_g), bound), **biases,
              "w_gn": readout_scale * bound * jax.random.normal(k_gn, (n_g,)),
              "w_gs": readout_scale * bound * jax.random.normal(k_gs, (n_g,))}
    if prior == "per-neuron":
        params["b_n"] = n_mean + n_std * jax.random.normal(k_n, (hidden,))
        params["b_s"] = jnp.full((hidden,), float(s_init), dtype=float)
    else:
        params["b_n"] = jnp.asarray(float(n_mean), dtype=float)
        params["b_s"] = jnp.asarray(float(s_init), dtype=float)
    return params


def controller_step(c, a: Array, g: Array) -> tuple[Array, Array, Array]:
    r"""One step of every neuron's controller, $(a[H], g[H, n_g]) \mapsto (g', n[H], s[H])$ (Eqs. 3–5):
    $g' = \tanh(W_{ag} a + W_{gg} g + b_g)$, then the read-outs of [`activation_params`][].
    ``c`` holds the weights of [`controller_params`][] as attributes (an ARU cell, a [`GainController`][]);
    $b_g = b_{ag} + b_{gg}$ where they are split (``c.b_g`` is ``None``)."""
    b_g = c.b_g if c.b_g is not None else c.b_ag + c.b_gg
    g = jnp.tanh(a[:, None] * c.w_ag + g @ c.w_gg.T + b_g)
    return g, *activation_params(c, g)


def activation_params(c, g: Array) -> tuple[Array, Array]:
    """The controller read-outs (Eq. 5): ``g[..., H, n_g] -> (n, s)``, each ``[..., H]``."""
    return g @ c.w_gn + c.b_n, g @ c.w_gs + c.b_s


class GainController(eqx.Module):
    r"""The ARU's adaptive activation as a part that other units can carry: ``hidden`` private
    controller RNNs (shared weights) that set $\gamma(a; n_t, s_t)$ of each neuron from its
    pre-activation (Eqs. 3–5, initialisation as [`ARUCell`][], ``prior="per-neuron"``).

    ``gain(a, g) -> (h, g')`` (``gain`` an instance): the adapted activity $h = \gamma(a; n_t, s_t)$ and the new
    controller state ``g[hidden, n_g]`` (initially zeros).
    """

    w_ag: Array
    w_gg: Array
    b_g: Array
    w_gn: Array
    w_gs: Array
    b_n: Array
    b_s: Array
    n_g: int = eqx.field(static=True)
    n_min: float = eqx.field(static=True)

    def __init__(self, hidden: int, *, n_g: int = 8, n_mean: float = 5.0, n_std: float = 2.0, s_init: float = 0.0,
                 readout_scale: float = 0.01, n_min: float = N_MIN, key: PRNGKeyArray):
        require_positive("n_min", n_min, integer=False)
        self.n_g, self.n_min = n_g, float(n_min)
        params = controller_params(hidden, n_g, "per-neuron", n_mean, n_std, s_init, readout_scale,
                                   jax.random.split(key, 5))
        for name, value in params.items():
            setattr(self, name, value)

    def __call__(self, a: Array, g: Array) -> tuple[Array, Array]:
        g, n, s = controller_step(self, a, g)
        return gamma(a, n, s, n_min=self.n_min), g

    def param_count(self) -> int:
        return count_params(self)


class _Recurrent(Cell):
    r"""Shared part of the family: the pre-activation $a = W_{hh} h + W_{xh} x + b_h + \xi$.

    With ``isolated=True`` the recurrence is diagonal: ``w_hh`` is a vector (each neuron only
    feeds back onto itself, paper Fig. 4c); at initialisation it is the diagonal of the
    orthogonal matrix the non-isolated unit would get from the same key. ``init``: module doc.
    ``split_biases=True`` (module doc): ``b_xh`` and ``b_hh`` in place of ``b_h`` (then ``None``);
    ``public_code_biases``: draw them as the code's ``nn.Linear`` (``rnn``, ``rnn-gamma``), else zeros.
    The weights are those of the same key without the split.
    """

    w_hh: Array
    w_xh: Array
    b_h: Array | None
    b_xh: Array | None
    b_hh: Array | None

    def __init__(self, input_size: int, hidden: int, isolated: bool, key: PRNGKeyArray, init: str = "paper",
                 split_biases: bool = False, public_code_biases: bool = False):
        require_positive("input_size", input_size)
        require_positive("hidden", hidden)
        check_init(init)
        if not isinstance(split_biases, bool):
            raise ConfigError(f"split_biases must be true or false, got {split_biases!r}")
        self.input_size = input_size
        self.hidden = hidden
        k_hh, k_xh = jax.random.split(key)
        if init == "public-code":
            w_hh, self.w_xh = henaff_orthogonal(k_hh, hidden), kaiming_normal(k_xh, (hidden, input_size))
        else:
            w_hh = jax.nn.initializers.orthogonal()(k_hh, (hidden, hidden))
            self.w_xh = _uniform(k_xh, (hidden, input_size), hidden**-0.5)
        self.w_hh = jnp.diagonal(w_hh) if isolated else w_hh
        if not split_biases:
            self.b_h, self.b_xh, self.b_hh = jnp.zeros(hidden), None, None
        elif init == "public-code" and public_code_biases:  # nn.Linear's default: U(+-1/sqrt(fan-in))
            k_bx, k_bh = jax.random.split(jax.random.fold_in(key, 1))
            self.b_h = None
            self.b_xh, self.b_hh = _uniform(k_bx, (hidden,), input_size**-0.5), _uniform(k_bh, (hidden,), hidden**-0.5)
        else:
            self.b_h, self.b_xh, self.b_hh = None, jnp.zeros(hidden), jnp.zeros(hidden)

    @property
    def split_biases(self) -> bool:
        return self.b_h is None

    @property
    def bias(self) -> Array:
        """$b_h$ ($= b_{xh} + b_{hh}$ where they are split)."""
        return self.b_xh + self.b_hh if self.split_biases else self.b_h

    @property
    def isolated(self) -> bool:
        return self.w_hh.ndim == 1

    def isolate(self):
        """The same unit with only the diagonal of its recurrence kept (isolated neurons)."""
        return self if self.isolated else eqx.tree_at(lambda c: c.w_hh, self, jnp.diagonal(self.w_hh))

    def recurrent_matrices(self) -> dict[str, Array]:
        """``w_hh`` as a matrix, isolated neurons' too (their diagonal recurrence)."""
        return {"w_hh": jnp.diag(self.w_hh) if self.isolated else self.w_hh}

    def preactivation(self, h: Array, x: Array, drive: Array | None) -> Array:
        rec = self.w_hh * h if self.isolated else self.w_hh @ h
        return add_drive(rec + self.w_xh @ x + self.bias, drive)


@register("unit", "rnn", "Vanilla RNN h = phi(W_hh h + W_xh x + b), phi = tanh or relu; leaky rate network with alpha = dt/tau < 1")
class RNNCell(_Recurrent):
    r"""Vanilla RNN (the paper's RNN+ReLU baseline with ``activation="relu"``).

    ``alpha`` $= \Delta t/\tau \in (0, 1]$ makes it a leaky rate network, the Euler step of
    $\tau \dot h = -h + \phi(W_{hh} h + W_{xh} x + b_h + \xi)$:

    $$ h_t = (1 - \alpha)\, h_{t-1} + \alpha\, \phi(a_t) ; $$

    ``alpha = 1`` (default) is the plain RNN above. Its Jacobian is
    $(1-\alpha) I + \alpha\,\mathrm{diag}(\phi'(a))\,W_{hh}$: every eigenvalue is near 1 when
    $\alpha$ is small, so only $\alpha$ and the eigenvalues of $\mathrm{diag}(\phi')\,W_{hh}$
    together say how slow a direction is. ``gain`` scales $W_{hh}$ at initialisation (default 1:
    the orthogonal matrix of ``init``, every eigenvalue on the unit circle); with ``gain`` $= g < 1$
    the eigenvalues start at modulus $g$, those of the leaky Jacobian at most $1 - \alpha(1 - g)$,
    and training must create any slower direction (Mante et al. 2013's setting:
    [`dynlab.tasks.cognitive.context_integration`][]).
    """

    activation: str = eqx.field(static=True)
    alpha: float = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        *,
        hidden: int = 64,
        activation: Literal["tanh", "relu"] = "tanh",
        isolated: bool = False,
        init: Literal["paper", "public-code"] = "paper",
        split_biases: bool = False,
        alpha: Annotated[float, Range(above=0, maximum=1)] = 1.0,
        gain: Annotated[float, Range(minimum=0)] = 1.0,
        key: PRNGKeyArray,
    ):
        if activation not in ("tanh", "relu"):
            raise ConfigError(f"activation must be 'tanh' or 'relu', got {activation!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
            raise ConfigError(f"alpha (dt/tau) must be a number in (0, 1], got {alpha!r}")
        super().__init__(input_size, hidden, isolated, key, init, split_biases, public_code_biases=True)
        self.activation = activation
        self.alpha = float(alpha)
        if isinstance(gain, bool) or not isinstance(gain, (int, float)) or not 0 <= gain < float("inf"):
            raise ConfigError(f"gain must be a finite number >= 0, got {gain!r}")
        if gain != 1.0:
            self.w_hh = gain * self.w_hh

    def __call__(self, state, x, *, drive=None):
        a = self.preactivation(state, x, drive)
        h = jnp.tanh(a) if self.activation == "tanh" else jax.nn.relu(a)
        if self.alpha != 1.0:
            h = (1.0 - self.alpha) * state + self.alpha * h
        return h, h


@register("unit", "rnn-gamma", "RNN with the gamma(n, s) activation, n, s trained but static in time")
class RNNGammaCell(_Recurrent):
    r"""RNN+$\gamma$ (static): $h = \gamma(a; n, s)$ with trainable $(n, s)$ fixed during a sequence.

    ``heterogeneous=True`` (the paper's default, "private AF") gives every neuron its own $(n, s)$
    drawn from the prior $n \sim N(n_0, \sigma_n^2)$, $s = s_0$; ``False`` shares one scalar pair,
    initialised at $(n_0, s_0)$. ``init="public-code"``: $n = 5 + 2\,U(0, 1)$, one draw (module doc).
    ``n_min``, ``softplus_threshold``: [`gamma`][].
    """

    n: Array
    s: Array
    n_min: float = eqx.field(static=True)
    softplus_threshold: float = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        *,
        hidden: int = 64,
        heterogeneous: bool = True,
        n_mean: float = 5.0,
        n_std: float = 2.0,
        s_init: float = 0.0,
        n_min: float = N_MIN,
        softplus_threshold: FloatOrInf = float("inf"),
        isolated: bool = False,
        init: Literal["paper", "public-code"] = "paper",
        split_biases: bool = False,
        key: PRNGKeyArray,
    ):
        check_gamma_options(n_min, softplus_threshold)
        self.n_min, self.softplus_threshold = float(n_min), float(softplus_threshold)
        k_rec, k_n = jax.random.split(key)
        super().__init__(input_size, hidden, isolated, k_rec, init, split_biases, public_code_biases=True)
        # dtype=float (here and in ARUCell): a weak-typed leaf turns strong after the first
        # optimiser update, which would retrace and recompile the training step once more.
        if init == "public-code":
            n = public_code_gain(k_n)
            self.n = jnp.full((hidden,), n) if heterogeneous else n
            self.s = jnp.full((hidden,), float(s_init), dtype=float) if heterogeneous else jnp.asarray(float(s_init), dtype=float)
        elif heterogeneous:
            self.n = n_mean + n_std * jax.random.normal(k_n, (hidden,))
            self.s = jnp.full((hidden,), float(s_init), dtype=float)
        else:
            self.n = jnp.asarray(float(n_mean), dtype=float)
            self.s = jnp.asarray(float(s_init), dtype=float)

    def __call__(self, state, x, *, drive=None):
        h = gamma(self.preactivation(state, x, drive), self.n, self.s, n_min=self.n_min,
                  softplus_threshold=self.softplus_threshold)
        return h, h


class ARUState(eqx.Module):
    """State of an ARU layer: activities ``h[hidden]`` and controller states ``g[hidden, n_g]``."""

    h: Array
    g: Array


@register("unit", "aru", "Adaptive Recurrent Unit: a per-neuron controller RNN sets gamma's n, s each step")
class ARUCell(_Recurrent):
    r"""Adaptive Recurrent Unit layer (paper Eqs. 3–5).

    Every neuron $i$ runs a private copy of one small controller RNN (weights shared, states not):

    $$ g^i_t = \tanh(W_{ag}\, a^i_t + W_{gg}\, g^i_{t-1} + b_g), \quad
       n^i_t = W_{gn} g^i_t + b_n, \quad s^i_t = W_{gs} g^i_t + b_s, \quad
       h^i_t = \gamma(a^i_t; n^i_t, s^i_t) $$

    The controllers are evaluated together as one ``[hidden, n_g]`` array (no loop over neurons);
    the controller update comes first, then the activation (paper's order).

    Initialisation of the controller (a gap in the paper, notes §1): $W_{ag}, W_{gg}$ as PyTorch's
    ``nn.RNN`` ($U(\pm 1/\sqrt{n_g})$), $b_g = 0$, read-outs $W_{gn}, W_{gs} \sim N(0, \epsilon^2/n_g)$
    with ``readout_scale`` $\epsilon$ = 0.01, so that at initialisation $n \approx b_n$ and
    $s \approx b_s$ follow the paper's prior $n \sim N(5, 2^2)$, $s = 0$:

    * ``prior="per-neuron"`` (default): $b_n, b_s$ are per-neuron vectors, $b_n \sim N(n_0, \sigma_n^2)$
      — the prior is met neuron by neuron, at the cost of $2H$ extra parameters;
    * ``prior="shared"``: scalar $b_n = n_0$, $b_s = s_0$, exactly the paper's parameter list
      $\{W_{ag}, W_{gg}, b_g, W_{gn}, b_n, W_{gs}, b_s\}$ ($n_g^2 + 4 n_g + 2$ parameters), with every
      neuron starting from the mean of the prior.

    ``init="public-code"`` draws the original implementation's weights instead (module doc); with
    ``prior="shared"``, ``n_min=0`` and ``softplus_threshold=20`` the unit computes NonlinMod's ARUN,
    and ``split_biases=True`` gives it ARUN's parameters (its $H + n_g$ more biases; module doc).
    """

    @classmethod
    def sized(cls, width: int) -> dict:
        """``hidden = width`` and ``n_g = width / 8`` (the paper's N_g / N_h), at least 2."""
        return {"hidden": width_multiple(width, 1), "n_g": max(2, width // 8)}

    w_ag: Array
    w_gg: Array
    b_g: Array | None
    b_ag: Array | None
    b_gg: Array | None
    w_gn: Array
    w_gs: Array
    b_n: Array
    b_s: Array
    n_g: int = eqx.field(static=True)
    n_min: float = eqx.field(static=True)
    softplus_threshold: float = eqx.field(static=True)
    remat_step = True  # checkpointed BPTT: 1.4x faster at the paper's size, 1.6x at T = 196 (benchmarks/aru.py)

    def __init__(
        self,
        input_size: int,
        *,
        hidden: int = 64,
        n_g: int = 16,
        prior: Literal["per-neuron", "shared"] = "per-neuron",
        n_mean: float = 5.0,
        n_std: float = 2.0,
        s_init: float = 0.0,
        readout_scale: float = 0.01,
        n_min: float = N_MIN,
        softplus_threshold: FloatOrInf = float("inf"),
        isolated: bool = False,
        init: Literal["paper", "public-code"] = "paper",
        split_biases: bool = False,
        key: PRNGKeyArray,
    ):
        check_gamma_options(n_min, softplus_threshold)
        self.n_min, self.softplus_threshold = float(n_min), float(softplus_threshold)
        k_rec, *k_controller = jax.random.split(key, 6)
        super().__init__(input_size, hidden, isolated, k_rec, init, split_biases)  # ARUN's four biases start at 0
        self.n_g = n_g
        params = controller_params(hidden, n_g, prior, n_mean, n_std, s_init, readout_scale, k_controller, init,
                                   split_biases)
        self.b_ag, self.b_gg = params.pop("b_ag", None), params.pop("b_gg", None)
        for name, value in params.items():
            setattr(self, name, value)

    def init_state(self) -> ARUState:
        return ARUState(h=jnp.zeros(self.hidden), g=jnp.zeros((self.hidden, self.n_g)))

    def recurrent_matrices(self) -> dict[str, Array]:
        return {**super().recurrent_matrices(), "w_gg": self.w_gg}

    def controller(self, a: Array, g: Array) -> tuple[Array, Array, Array]:
        """One controller step for all neurons: ``(a[H], g[H, n_g]) -> (g', n[H], s[H])``."""
        return controller_step(self, a, g)

    def activation_params(self, g: Array) -> tuple[Array, Array]:
        """The controller's read-outs (Eq. 5) from its states: ``g[..., H, n_g] -> (n, s)``, each ``[..., H]``."""
        return activation_params(self, g)

    def __call__(self, state: ARUState, x, *, drive=None):
        a = self.preactivation(state.h, x, drive)
        g, n, s = self.controller(a, state.g)
        h = gamma(a, n, s, n_min=self.n_min, softplus_threshold=self.softplus_threshold)
        return ARUState(h=h, g=g), h
