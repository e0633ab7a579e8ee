r"""The Expressive Leaky Memory (ELM) neuron and Branch-ELM (Spieler et al., ICLR 2024; notes §1).

One neuron with $d_s$ synapses, $d_m$ memory units and a linear read-out (paper Eq. 1):

$$ \kappa_m = e^{-\Delta t/\tau_m}, \quad \kappa_s = e^{-\Delta t/\tau_s}, \qquad
   s_t = \kappa_s \odot s_{t-1} + w_s \odot x_t, $$
$$ \Delta m_t = \tanh\!\big(\mathrm{MLP}_{w_p}([s_t;\ \kappa_m \odot m_{t-1}]) + \xi_t\big), \qquad
   m_t = \kappa_m \odot m_{t-1} + \lambda (1-\kappa_m) \odot \Delta m_t, \qquad y_t = w_y m_t + b_y . $$

* **Read-out.** The Cell's output is $m_t$ (``hidden = d_m``); the read-out $w_y$ is the
  [`SequenceModel`][dynlab.models.SequenceModel]'s linear read-out, so ``dynlab.build("model", unit="elm",
  input_size=1278, output_size=2, d_m=20)`` is the paper's NeuronIO ELM (52,842 parameters with
  $\tau_m$ learnable and $w_s$ fixed, 54,120 with $w_s$ learnable).
* **Drive.** $\xi$ (``drive``, scalar or ``[d_m]``) is added to the pre-activation of the memory
  update, the argument of the tanh (the MLP output), as written above.
* **Memory update** (``memory_update``): ``"lambda"`` is Eq. 1, $\lambda(1-\kappa_m)$; ``"kappa_lambda"``
  is the "improved implementation" (App. A, Fig. S4), $(1-\kappa_\lambda)$ with
  $\kappa_\lambda = e^{-\Delta t/\tau_\lambda}$, $\tau_\lambda = \tau_m/\lambda$. The two agree to first order in
  $\Delta t/\tau_m$: their gains differ by the factor $1 - (\lambda-1)\Delta t/(2\tau_m) + O(\tau_m^{-2})$.
  With the plain tanh, $|\Delta m| \le 1$, so the Eq. 1 form keeps $|m| \le \lambda$ for every input.
* **Timescales.** $\tau_m$ starts log-spaced in [``tau_min``, ``tau_max``] (Table S1's recommendation)
  and is bounded by a scaled sigmoid, $\tau_m = \tau_{lo} + (\tau_{hi}-\tau_{lo})\,\sigma(\theta)$ with
  bounds ``tau_bounds`` (default: the initial range; the NeuronIO runs used (0, 500)); the
  initial $\theta$ is the inverse map, with the end points moved $10^{-6}$ inside the bounds as in
  the authors' code. ``learn_tau=False`` fixes $\tau_m$: it is then derived from the static config,
  not stored as an array, so no optimiser (and no weight decay) can change it. $\tau_s$ is
  always fixed; ``tau_s=0`` switches the synaptic trace off ($\kappa_s = 0$).
* **Synapse weights** $w_s \ge 0$: ``ReLU`` of a trainable raw weight when learnable (initial
  value ``w_s_init`` = 0.5), otherwise the constant ``w_s_init``. Vanilla ELM keeps them fixed
  by default (the paper's NeuronIO count); Branch-ELM needs them learnable.
* **Nonlinearities.** ``activation``: ``"tanh"`` (Eq. 1) or ``"scaled-tanh"``, LeCun's
  $1.7159\tanh(2x/3)$ of the authors' code ($|\Delta m| \le 1.7159$). The MLP has ``l_mlp`` hidden
  layers of width ``d_mlp`` (default $2 d_m$) with ReLU (``mlp_activation="relu2"``: squared ReLU,
  as in the ELM network; ``"silu"``: $x\,\sigma(x)$, the authors' best NeuronIO model) and biases; PyTorch's default (Kaiming-uniform) initialisation
  $U(\pm 1/\sqrt{\text{fan-in}})$ for weights and biases. $s_0 = 0$, $m_0 = 0$.

**Branch-ELM** (Fig. 4a; ``d_tree`` and ``d_branch`` given): $d_s = d_{tree} d_{branch}$ synapses, each
fed by one input channel (``routing``), summed in contiguous groups of $d_{branch}$ into
$d_{tree}$ branch activations that replace $s_t$ in the MLP input. The trace is kept per branch
(the authors' v2): the trace is linear with one shared $\tau_s$, so the branch sum of per-synapse
traces is the trace of the branch sums (tested against the per-synapse form). Routings:

* ``"neuronio"``: the E/I inputs are interleaved (input $i$ and $i + n/2$ side by side, $n$ even)
  and branch $j$ reads the window $[j\,\text{stride}, j\,\text{stride} + d_{branch})$ of them,
  $\text{stride} = \lceil n/d_{tree} \rceil$; slots past the last input read zero;
* ``"random"``: every synapse reads a uniformly drawn input (duplicates allowed), fixed at
  initialisation (the SHD Branch-ELM).

The routing is an integer index array, not a trainable parameter; with the synapse weights it
is applied as one matrix product ([`ELMCell.branch_matrix`][]).
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.units.base import Cell, add_drive, width_multiple
from dynlab.units.sith import tau_grid

MLP_ACTIVATIONS = ("relu", "relu2", "silu")
TAU_EPS = 1e-6  # initial tau_m kept this far inside its sigmoid bounds (authors' code)


def scaled_tanh(x: Array) -> Array:
    """LeCun's scaled tanh, $1.7159 \\tanh(2x/3)$."""
    return 1.7159 * jnp.tanh(x * (2.0 / 3.0))


def check_tau_range(tau_min, tau_max) -> None:
    """``0 < tau_min <= tau_max``; ``tau_min == tau_max`` gives every memory one constant timescale
    (the ELM paper's constant-τ ablation, Fig. 3e)."""
    require_positive("tau_min", tau_min, integer=False)
    require_positive("tau_max", tau_max, integer=False)
    if tau_min > tau_max:
        raise ConfigError(f"tau_min must be <= tau_max, got tau_min = {tau_min}, tau_max = {tau_max}")


def check_branches(d_tree, d_branch, d_s) -> None:
    """``d_tree``, ``d_branch`` positive and, when ``d_s`` is given, ``d_tree * d_branch == d_s``."""
    require_positive("d_tree", d_tree)
    require_positive("d_branch", d_branch)
    if d_s is not None and d_tree * d_branch != d_s:
        raise ConfigError(f"d_s = {d_s} must equal d_tree * d_branch = {d_tree} * {d_branch} = {d_tree * d_branch}")


def memory_gains(tau_m: Array, lam: float, dt: float, form: str) -> tuple[Array, Array]:
    r"""$(\kappa_m, g)$ with $m_t = \kappa_m m_{t-1} + g\,\Delta m_t$: $g = \lambda(1-\kappa_m)$ or $1-\kappa_\lambda$."""
    kappa_m = jnp.exp(-dt / tau_m)
    if form == "lambda":
        return kappa_m, -lam * jnp.expm1(-dt / tau_m)
    return kappa_m, -jnp.expm1(-dt * lam / tau_m)


class NeuronMLP(eqx.Module):
    r"""The dendritic MLP of one neuron, or of many independent neurons evaluated together.

    ``l_mlp`` hidden layers of width ``d_mlp`` (ReLU, squared ReLU or SiLU), biases everywhere, linear
    output. With ``lead=(N,)`` every weight has a leading neuron axis (``[N, fan_in, fan_out]``)
    and one call maps ``x[N, d_in]`` to ``[N, d_out]`` by batched contractions, no loop over
    neurons. Weights and biases $U(\pm 1/\sqrt{\text{fan-in}})$ (PyTorch/Equinox ``Linear``).
    """

    weights: tuple[Array, ...]
    biases: tuple[Array, ...]
    activation: str = eqx.field(static=True)

    def __init__(self, d_in: int, d_mlp: int, d_out: int, l_mlp: int, activation: str, *, key: PRNGKeyArray,
                 lead: tuple[int, ...] = ()):
        sizes = [d_in] + [d_mlp] * l_mlp + [d_out]
        keys = jax.random.split(key, 2 * (len(sizes) - 1))
        weights, biases = [], []
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            bound = 1.0 / math.sqrt(fan_in)
            weights.append(jax.random.uniform(keys[2 * i], lead + (fan_in, fan_out), minval=-bound, maxval=bound))
            biases.append(jax.random.uniform(keys[2 * i + 1], lead + (fan_out,), minval=-bound, maxval=bound))
        self.weights, self.biases = tuple(weights), tuple(biases)
        self.activation = activation

    @staticmethod
    def count(d_in: int, d_mlp: int, d_out: int, l_mlp: int) -> int:
        """Parameters of one neuron's MLP, biases included."""
        sizes = [d_in] + [d_mlp] * l_mlp + [d_out]
        return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))

    def __call__(self, x: Array) -> Array:
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = jnp.einsum("...i,...io->...o", x, w) + b
            if i < last:
                x = {"relu": jax.nn.relu, "silu": jax.nn.silu}.get(self.activation, _relu2)(x)
        return x


def _relu2(x: Array) -> Array:
    return jnp.square(jax.nn.relu(x))


def neuronio_routing(n_inputs: int, d_tree: int, d_branch: int) -> np.ndarray:
    """Synapse -> input index of the NeuronIO routing (``n_inputs`` marks an empty slot)."""
    interleaved = (np.arange(n_inputs) % 2) * (n_inputs // 2) + np.arange(n_inputs) // 2
    stride = -(-n_inputs // d_tree)
    window = np.arange(d_tree)[:, None] * stride + np.arange(d_branch)[None, :]
    return np.where(window < n_inputs, interleaved[np.minimum(window, n_inputs - 1)], n_inputs).reshape(-1)


class ELMState(eqx.Module):
    """State of an ELM neuron: synaptic traces ``s`` (``[d_s]``, or ``[d_tree]`` for Branch-ELM) and
    the memory units ``h`` $= m_t$ (``[d_m]``; named ``h`` like every unit's activity, so the
    analyses that look at activities find it)."""

    s: Array
    h: Array


@register("unit", "elm", "Expressive Leaky Memory neuron (Eq. 1); Branch-ELM with d_tree, d_branch")
class ELMCell(Cell):
    """One ELM (or Branch-ELM) neuron; its output is the memory $m_t$, ``hidden = d_m``.

    Args:
        input_size: input channels $x_t$ (the synapses for vanilla ELM, $d_s$ = ``input_size``).
        d_m: memory units. d_mlp: MLP width (default ``2 * d_m``). l_mlp: MLP hidden layers (0: linear).
        lam: $\\lambda$. memory_update: ``"lambda"`` (Eq. 1) or ``"kappa_lambda"``.
        tau_min, tau_max: initial log-spaced range of $\\tau_m$ (same time unit as ``dt``).
        tau_bounds: ``[lo, hi]`` sigmoid bounds of $\\tau_m$, ``0 <= lo <= tau_min``, ``hi >= tau_max``
            (default: ``[tau_min, tau_max]``). learn_tau: train $\\tau_m$ (the paper) or fix it.
        tau_s: synaptic time constant (0: no trace). dt: time between inputs (same unit as τ).
        w_s_init: initial (or fixed) synapse weight. learn_w_s: train $w_s$ (default: only for Branch-ELM).
        activation: ``"tanh"`` or ``"scaled-tanh"``. mlp_activation: ``"relu"``, ``"relu2"`` or ``"silu"``.
        tau_inset: the log-spaced $\\tau_m$ grid runs over [``tau_min + tau_inset``, ``tau_max - tau_inset``]
            (default 0; the authors' code: 1e-6).
        d_tree, d_branch: Branch-ELM branches and synapses per branch (both, or neither).
        d_s: optional check: the synapse count, must equal ``d_tree * d_branch`` (or ``input_size``).
        routing: ``"random"`` or ``"neuronio"`` (Branch-ELM only).
    """

    @classmethod
    def sized(cls, width: int) -> dict:
        """``d_m = width`` memory units of one ELM neuron (the neuron paper's Eq. 1)."""
        return {"d_m": width_multiple(width, 1)}

    mlp: NeuronMLP
    theta_tau: Array | None
    w_s_raw: Array | None
    synapse_index: Array | None
    d_m: int = eqx.field(static=True)
    d_mlp: int = eqx.field(static=True)
    l_mlp: int = eqx.field(static=True)
    d_tree: int | None = eqx.field(static=True)
    d_branch: int | None = eqx.field(static=True)
    lam: float = eqx.field(static=True)
    memory_update: str = eqx.field(static=True)
    tau_min: float = eqx.field(static=True)
    tau_max: float = eqx.field(static=True)
    tau_bounds: tuple[float, float] = eqx.field(static=True)
    tau_s: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    w_s_init: float = eqx.field(static=True)
    activation: str = eqx.field(static=True)
    tau_inset: float = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        *,
        d_m: int = 20,
        d_mlp: int | None = None,
        l_mlp: int = 1,
        lam: float = 5.0,
        memory_update: Literal["lambda", "kappa_lambda"] = "lambda",
        tau_min: float = 1.0,
        tau_max: float = 100.0,
        tau_bounds: list[float] | None = None,
        learn_tau: bool = True,
        tau_s: float = 5.0,
        dt: float = 1.0,
        w_s_init: float = 0.5,
        learn_w_s: bool | None = None,
        activation: Literal["tanh", "scaled-tanh"] = "tanh",
        mlp_activation: Literal["relu", "relu2", "silu"] = "relu",
        tau_inset: float = 0.0,
        d_tree: int | None = None,
        d_branch: int | None = None,
        d_s: int | None = None,
        routing: Literal["random", "neuronio"] = "random",
        key: PRNGKeyArray,
    ):
        require_positive("input_size", input_size)
        require_positive("d_m", d_m)
        d_mlp = 2 * d_m if d_mlp is None else d_mlp
        require_positive("d_mlp", d_mlp)
        if isinstance(l_mlp, bool) or not isinstance(l_mlp, int) or l_mlp < 0:
            raise ConfigError(f"l_mlp must be a non-negative integer, got {l_mlp!r}")
        require_positive("lam", lam, integer=False)
        require_positive("dt", dt, integer=False)
        check_tau_range(tau_min, tau_max)
        if (isinstance(tau_inset, bool) or not isinstance(tau_inset, (int, float)) or not tau_inset >= 0
                or (tau_inset > 0 and 2 * tau_inset >= tau_max - tau_min)):
            raise ConfigError(f"tau_inset must be 0, or a number > 0 below (tau_max - tau_min) / 2 = "
                              f"{(tau_max - tau_min) / 2}, got {tau_inset!r}")
        lo, hi = (tau_min, tau_max) if tau_bounds is None else tuple(tau_bounds)
        if tau_bounds is not None and (len(tau_bounds) != 2 or not 0 <= lo <= tau_min or hi < tau_max):
            raise ConfigError(f"tau_bounds must be [lo, hi] with 0 <= lo <= tau_min = {tau_min} and "
                              f"hi >= tau_max = {tau_max}, got {tau_bounds!r}")
        if learn_tau and lo >= hi:
            raise ConfigError(f"a learnable tau_m needs sigmoid bounds lo < hi; tau_min = tau_max = {tau_min} (a constant "
                              "tau_m) leaves none: give learn_tau = false to keep it constant, or tau_bounds [lo, hi] "
                              "with lo < hi to learn it from a constant start")
        if isinstance(tau_s, bool) or not isinstance(tau_s, (int, float)) or tau_s < 0:
            raise ConfigError(f"tau_s must be a number >= 0 (0: no synaptic trace), got {tau_s!r}")
        for name, value, valid in (("memory_update", memory_update, ("lambda", "kappa_lambda")),
                                   ("activation", activation, ("tanh", "scaled-tanh")),
                                   ("mlp_activation", mlp_activation, MLP_ACTIVATIONS),
                                   ("routing", routing, ("random", "neuronio"))):
            if value not in valid:
                raise ConfigError(f"{name} must be one of {', '.join(map(repr, valid))}, got {value!r}")
        branched = d_tree is not None or d_branch is not None
        if branched:
            if d_tree is None or d_branch is None:
                raise ConfigError("Branch-ELM needs both d_tree and d_branch (or neither, for vanilla ELM)")
            check_branches(d_tree, d_branch, d_s)
            if learn_w_s is False:
                raise ConfigError("Branch-ELM needs learn_w_s = true: the synapse weights weight the branch sums")
        elif d_s is not None and d_s != input_size:
            raise ConfigError(f"vanilla ELM has one synapse per input: d_s must equal input_size = {input_size}, got {d_s}")
        learn_w_s = branched if learn_w_s is None else learn_w_s
        require_positive("w_s_init", w_s_init, integer=False)

        self.input_size, self.hidden, self.d_m, self.d_mlp, self.l_mlp = input_size, d_m, d_m, d_mlp, l_mlp
        self.d_tree, self.d_branch = (d_tree, d_branch) if branched else (None, None)
        self.lam, self.memory_update, self.activation = float(lam), memory_update, activation
        self.tau_min, self.tau_max, self.tau_bounds = float(tau_min), float(tau_max), (float(lo), float(hi))
        self.tau_s, self.dt, self.w_s_init = float(tau_s), float(dt), float(w_s_init)
        self.tau_inset = float(tau_inset)

        k_mlp, k_route = jax.random.split(key)
        n_syn = d_tree * d_branch if branched else input_size
        self.mlp = NeuronMLP((d_tree if branched else input_size) + d_m, d_mlp, d_m, l_mlp, mlp_activation, key=k_mlp)
        self.theta_tau = jnp.asarray(self._theta_init(), dtype=float) if learn_tau else None
        # explicit dtype: a weakly typed leaf would change type at the first update and force a recompilation
        self.w_s_raw = jnp.full((n_syn,), w_s_init, dtype=float) if learn_w_s else None
        if not branched:
            self.synapse_index = None
        elif routing == "neuronio":
            if input_size % 2:
                raise ConfigError(f"routing 'neuronio' interleaves E/I input pairs: input_size must be even, got {input_size}")
            if -(-input_size // d_tree) > d_branch:
                raise ConfigError(f"routing 'neuronio' skips inputs unless d_branch >= ceil(input_size / d_tree) = "
                                  f"{-(-input_size // d_tree)}, got d_branch = {d_branch}")
            self.synapse_index = jnp.asarray(neuronio_routing(input_size, d_tree, d_branch), jnp.int32)
        else:
            self.synapse_index = jax.random.randint(k_route, (n_syn,), 0, input_size, jnp.int32)

    def _theta_init(self) -> np.ndarray:
        lo, hi = self.tau_bounds
        tau = np.clip(self._tau_grid(), lo + TAU_EPS, hi - TAU_EPS)
        return np.log((tau - lo) / (hi - tau))

    def _tau_grid(self) -> np.ndarray:
        return tau_grid(self.tau_min + self.tau_inset, self.tau_max - self.tau_inset, self.d_m)

    @property
    def tau_m(self) -> Array:
        r"""$\tau_m = \tau_{lo} + (\tau_{hi}-\tau_{lo})\sigma(\theta)$ (learnable) or the fixed log-spaced grid."""
        if self.theta_tau is None:
            return jnp.asarray(self._tau_grid())  # the default float dtype: float64 under x64
        lo, hi = self.tau_bounds
        return jnp.maximum(lo + (hi - lo) * jax.nn.sigmoid(self.theta_tau), TAU_EPS)

    @property
    def w_s(self) -> Array:
        """Synapse weights (``[d_s]``, >= 0), or the fixed scalar."""
        return jnp.asarray(self.w_s_init) if self.w_s_raw is None else jax.nn.relu(self.w_s_raw)

    @property
    def n_synapses(self) -> int:
        """$d_s$: ``input_size`` for vanilla ELM, ``d_tree * d_branch`` for Branch-ELM."""
        return self.input_size if self.d_tree is None else self.d_tree * self.d_branch

    @property
    def kappa_s(self) -> float:
        return 0.0 if self.tau_s == 0 else math.exp(-self.dt / self.tau_s)

    def init_state(self) -> ELMState:
        n_s = self.input_size if self.d_tree is None else self.d_tree
        return ELMState(s=jnp.zeros(n_s), h=jnp.zeros(self.d_m))

    def recurrent_matrices(self) -> dict[str, Array]:
        """The memory's leak $\\kappa_m$ (a diagonal); with ``l_mlp = 0`` also the linear
        memory-to-update block $W_{mm}$ of the MLP (``[d_m, d_m]``, acting on $\\kappa_m \\odot m$)."""
        mats = {"kappa_m": jnp.exp(-self.dt / self.tau_m)}
        if len(self.mlp.weights) == 1:
            mats["w_mm"] = self.mlp.weights[0][-self.d_m :].T
        return mats

    def branch_matrix(self) -> Array:
        r"""Branch-ELM's routing and synapse weights as one matrix $A$ (``[input_size, d_tree]``):
        the branch sums are $A^\top x_t$, $A_{i\beta} = \sum_{k \in \text{branch } \beta,\ \text{input}(k) = i} w_{s,k}$
        (empty slots dropped)."""
        branch = jnp.arange(self.n_synapses) // self.d_branch
        A = jnp.zeros((self.input_size + 1, self.d_tree), self.w_s.dtype).at[self.synapse_index, branch].add(self.w_s)
        return A[:-1]

    def synaptic_input(self, x: Array) -> Array:
        r"""$w_s \odot x_t$, routed and summed into branches for Branch-ELM.

        The Branch-ELM form is one matrix product with [`branch_matrix`][], which does not depend
        on the time step (XLA builds it once per sequence, outside the time loop): on CPU the
        NeuronIO Branch-ELM trains about 4x faster this way than by gathering the routed inputs at
        every step (``benchmarks/elm.py`` configuration, measured).
        """
        if self.synapse_index is None:
            return self.w_s * x
        return x @ self.branch_matrix()

    def __call__(self, state: ELMState, x: Array, *, drive: Array | None = None) -> tuple[ELMState, Array]:
        return self.step_projected(state, self.synaptic_input(x), drive=drive)

    def project_input(self, x: Array) -> Array:
        """[`synaptic_input`][]: linear in $x_t$, so a sequence model computes it for all $t$ at once."""
        return self.synaptic_input(x)

    def step_projected(self, state: ELMState, u: Array, *, drive: Array | None = None) -> tuple[ELMState, Array]:
        """Eq. 1 from the routed synaptic input ``u`` = [`synaptic_input`][] of $x_t$."""
        kappa_m, gain = memory_gains(self.tau_m, self.lam, self.dt, self.memory_update)
        s = self.kappa_s * state.s + u
        pre = add_drive(self.mlp(jnp.concatenate([s, kappa_m * state.h])), drive)
        dm = jnp.tanh(pre) if self.activation == "tanh" else scaled_tanh(pre)
        m = kappa_m * state.h + gain * dm
        return ELMState(s=s, h=m), m

    def param_count(self) -> dict[str, int]:
        """Exact trainable counts: ``mlp`` (biases included), ``tau_m``, ``w_s`` and ``total``."""
        n_in = (self.input_size if self.d_tree is None else self.d_tree) + self.d_m
        counts = {
            "mlp": NeuronMLP.count(n_in, self.d_mlp, self.d_m, self.l_mlp),
            "tau_m": 0 if self.theta_tau is None else self.d_m,
            "w_s": 0 if self.w_s_raw is None else self.n_synapses,
        }
        counts["total"] = sum(counts.values())
        return counts
