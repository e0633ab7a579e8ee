r"""The ELM Network layer (Spieler, Martius & Levina, "Scaling laws and tradeoffs in recurrent
networks of expressive neurons"; notes §1–2).

**Neuron** (paper Eq. 1), $N$ of them, each with its own parameters, $d_m$ memory units and a
scalar activity; $z_{t} \in \mathbb{R}^{d_s}$ its synaptic input, $d_s = d_{tree} d_{branch}$:

$$ b_t = c\,\operatorname{branch\_sum}(z_t \odot w_s), \qquad
   o_t = \mathrm{MLP}_{w_p}([b_t,\ \kappa_m \odot m_{t-1}]), \qquad
   m_t = \kappa_m \odot m_{t-1} + (1-\kappa_\lambda) \odot \tanh(o_t), $$
$$ r_t = \kappa_r r_{t-1} + (1-\kappa_r)\, w_r^\top m_t, \qquad
   a_t = \operatorname{ReLU}(b + w_r^\top m_t - r_t + \xi_t), $$

$\kappa_m = e^{-1/\tau_m}$, $\kappa_\lambda = e^{-\lambda/\tau_m}$, $\kappa_r = e^{-1/\tau_r}$ (time step 1). The
branch sum is over contiguous groups of $d_{branch}$ synapses; the MLP has ``l_mlp`` hidden layers
of width ``d_mlp`` with squared-ReLU, biases, and default ``Linear`` initialisation; $w_s$ gets the
default initialisation "per branch", $U(\pm 1/\sqrt{d_{branch}})$ (unconstrained sign), $w_r$
$U(\pm 1/\sqrt{d_m})$, $b = 0$ (the paper's 0 activity threshold). $m_0 = r_0 = a_0 = 0$.
The drive $\xi$ (scalar or ``[N]``) enters the activity's pre-activation, as written.
The ReLU is the default of a value, ``activation`` ([`dynlab.units.activity`][]):
[`ReluActivity`][dynlab.units.activity.ReluActivity]; [`SpikingActivity`][dynlab.units.activity.SpikingActivity]
replaces it by a Heaviside step with the SuperSpike surrogate gradient $1/(1 + \beta|x|)^2$,
$\beta$ = 100 (a ``jax.custom_vjp``: reverse mode only, so the forward-mode analyses — Lyapunov,
Jacobian spectra — need a non-spiking activity).

**Fixed by design** (not trained): $\tau_m$ (``d_m`` values log-spaced in [``tau_min``, ``tau_max``],
shared by all neurons), $\tau_r$, $c$, $\lambda$. They are derived from the static config, not
stored as arrays, so neither the optimiser nor weight decay can change them. Trainable per
neuron: $w_s$, $w_p$, $w_r$, $b$.

**Layer** (Eq. 2): $z_{t,i} = \operatorname{input\_select}_i([u_t, a_{t-1}])$: neuron $i$ gathers a fixed set
of $d_s$ channels from the concatenated feed-forward input $u_t$ (``input_size``) and the
layer's previous activity, each synapse drawn independently at initialisation: recurrent with
probability $\rho_{rec}$ (a uniform neuron), else a uniform input channel; duplicates allowed.
The wiring is an integer index array ``[N, d_s]`` (not a parameter); it is evaluated either as
that gather or, by default while it fits (``wiring``), as one product with the equivalent dense
matrix ``[d_inp + N, N d_tree]`` built once per sequence — same numbers, much cheaper to
differentiate on CPU. The per-neuron MLPs run as one batched contraction over weights
``[N, fan_in, fan_out]`` (no loop over neurons).

**Network and read-out.** After the recurrent layer comes a feed-forward *read-out ELM layer* of
``readout_neurons`` simple neurons ($l_{mlp} = 0$, ``readout_d_m`` memory units, no high-pass, no
ReLU: output $y_t = b + w_r^\top m_t$), each gathering ``readout_d_tree * readout_d_branch``
channels of the current activity $a_t$ (default: the hidden layer's ``d_tree``, ``d_branch``),
then the paper's final linear layer. In dynlab the Cell is the two ELM layers: its output
(``output_size = readout_neurons``) is the read-out layer's $y_t$, and the
[`SequenceModel`][dynlab.models.SequenceModel]'s linear read-out *is* the paper's final linear layer.
The state is [`ElmNetState`][].

**Parameter accounting** ([`ElmNet.param_count`][]): $k_e = \#w_p + \#w_r$ and $k_c = \#w_s = d_s$
per hidden neuron, $P = N(k_e + k_c)$ the layer budget (Table 1: SHD 69,120, Enwik8 3,287,040);
``total`` adds the $N$ biases $b$ and the read-out layer. [`ElmNet.from_budget`][] /
[`budget_config`][] size a network from $P$ with the paper's rounding (App. A.2): $N$ rounded
down (N–$k_e$ sweeps) or $d_{branch}$ rounded down ($k_e$–$k_c$ sweeps).

**Regularisers** (App. A.2) are values too, ``regularisers`` ([`dynlab.units.regularisers`][]);
[`ElmNet.penalty`][] sums them over a trajectory. The default is the paper's pair — a per-neuron
L2 penalty on the time-averaged $|o_t|$ and a population L1 penalty on the mean activity, both with
"per-neuron scaling" (summed over neurons), ``(MlpL2(1e-5), ActivityL1(1e-3))`` (the paper's
Pareto-search values; Table 2's reference strengths are missing from the text). BPTT adds the
penalty to the training loss whenever a strength is non-zero (``penalised``; see
[`dynlab.rules.bptt`][]); strengths 0 (or ``regularisers=()``) train without them.

**Cross-paper ablation** (``activation=AdaptiveGamma()``; not in the scaling paper): the activity's
ReLU is replaced by the ARU's adaptive activation (Geadah et al. Eqs. 3–5,
[`AdaptiveGamma`][dynlab.units.activity.AdaptiveGamma]): every neuron gets a private controller RNN that reads
its pre-activation $p_t = b + w_r^\top m_t - r_t + \xi_t$ and sets $a_t = \gamma(p_t; n_t, s_t)$. At
initialisation $n \sim N(5, 2^2)$, $s = 0$: a softplus close to the ReLU it replaces. ``tau_r = inf``
switches the high-pass reference off ($\kappa_r = 1$, $r_t = r_0 = 0$), so the two adaptation
mechanisms — the ELM network's subtractive high-pass and the ARU's gain control — can be removed or
combined one by one (scenario ``cross-adaptation``).

**Config spellings.** TOML files and ``--set`` give these values as keys of ``[model]``:
``adaptation = "none" | "aru"`` with ``n_g``, ``n_mean``, ``n_std``, ``n_min`` (the controller),
``spiking = true`` with ``surrogate_scale``, and the strengths ``mlp_l2``, ``activity_l1``.
[`ElmNet.from_config`][] is the one place where they become values; the registry builds the
unit through it ([`dynlab.registry.constructor`][]).

Defaults are the SHD-Adding reference (Table 1): $N = 96$, $d_m = 5$, $d_{tree} = 30$, $d_{branch} = 10$,
$c = 10$, $\lambda = 5$, $\tau_m \in [1, 500]$, $\tau_r = 5$, $\rho_{rec} = 0.25$, 19 read-out neurons with $d_m = 3$.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.config import FloatOrInf
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import defaults, register
from dynlab.units.activity import Activity, AdaptiveGamma, ReluActivity, SpikingActivity
from dynlab.units.aru import N_MIN, GainController
from dynlab.units.base import Regularised, add_drive, width_multiple
from dynlab.units.elm import MLP_ACTIVATIONS, NeuronMLP, check_branches, check_tau_range, memory_gains
from dynlab.units.regularisers import ACTIVITY_L1, MLP_L2, ActivityL1, MlpL2, Regulariser
from dynlab.units.sith import tau_grid


def sample_wiring(key: PRNGKeyArray, n: int, d_s: int, input_size: int, rho_rec: float) -> Array:
    r"""``index[n, d_s]`` into $[u_t, a_{t-1}]$: each synapse independently recurrent with probability
    $\rho_{rec}$ (a uniform neuron, index ``input_size + j``), else a uniform input channel."""
    k_pick, k_rec, k_ff = jax.random.split(key, 3)
    shape = (n, d_s)
    recurrent = jax.random.bernoulli(k_pick, float(rho_rec), shape)
    return jnp.where(recurrent, input_size + jax.random.randint(k_rec, shape, 0, n, jnp.int32),
                     jax.random.randint(k_ff, shape, 0, input_size, jnp.int32))


DENSE_WIRING_MAX = 2**26  # "auto" wiring: dense up to this many matrix entries (256 MB in float32)


class ElmLayer(eqx.Module):
    r"""$N$ independent ELM neurons reading a fixed gather of a source vector (``index[N, d_s]``).

    Computes branches, MLP output and memory update; the high-pass filter and the output
    nonlinearity belong to [`ElmNet`][] (the read-out layer has neither).
    """

    w_s: Array
    mlp: NeuronMLP
    w_r: Array
    b: Array
    index: Array
    d_m: int = eqx.field(static=True)
    d_tree: int = eqx.field(static=True)
    d_branch: int = eqx.field(static=True)
    source_size: int = eqx.field(static=True)
    wiring: str = eqx.field(static=True)
    c: float = eqx.field(static=True)
    lam: float = eqx.field(static=True)
    tau_min: float = eqx.field(static=True)
    tau_max: float = eqx.field(static=True)

    def __init__(self, index: Array, source_size: int, *, d_m, d_mlp, l_mlp, d_tree, d_branch, c, lam, tau_min,
                 tau_max, mlp_activation, wiring, key):
        n = index.shape[0]
        k_s, k_p, k_r = jax.random.split(key, 3)
        self.index = index
        self.w_s = jax.random.uniform(k_s, (n, d_tree * d_branch), minval=-1, maxval=1) / math.sqrt(d_branch)
        self.mlp = NeuronMLP(d_tree + d_m, d_mlp, d_m, l_mlp, mlp_activation, key=k_p, lead=(n,))
        self.w_r = jax.random.uniform(k_r, (n, d_m), minval=-1, maxval=1) / math.sqrt(d_m)
        self.b = jnp.zeros(n)
        self.d_m, self.d_tree, self.d_branch, self.source_size = d_m, d_tree, d_branch, source_size
        if wiring == "auto":
            wiring = "dense" if source_size * n * d_tree <= DENSE_WIRING_MAX else "gather"
        self.wiring = wiring
        self.c, self.lam, self.tau_min, self.tau_max = float(c), float(lam), float(tau_min), float(tau_max)

    @property
    def n(self) -> int:
        return self.index.shape[0]

    def gains(self) -> tuple[Array, Array]:
        r"""$(\kappa_m, 1 - \kappa_\lambda)$ from the fixed log-spaced $\tau_m$ (constants, not parameters)."""
        tau = jnp.asarray(tau_grid(self.tau_min, self.tau_max, self.d_m), jnp.float32)
        return memory_gains(tau, self.lam, 1.0, "kappa_lambda")

    def effective_weights(self) -> Array:
        r"""The wiring as one matrix $W$ (``[source_size, N * d_tree]``): $b_t = W^\top \text{source}_t$,
        $W_{j,(i,\beta)} = c \sum_{k \in \text{branch } \beta \text{ of } i,\ \text{index}_{ik} = j} w_{s,ik}$."""
        d_s = self.index.shape[1]
        rows = jnp.arange(self.n)[:, None] * self.d_tree + jnp.arange(d_s)[None, :] // self.d_branch
        W = jnp.zeros((self.source_size, self.n * self.d_tree), self.w_s.dtype)
        return W.at[self.index, rows].add(self.c * self.w_s)

    def branches(self, source: Array) -> Array:
        r"""$b_t = c \cdot \operatorname{branch\_sum}(z_t \odot w_s)$ for every neuron: ``[N, d_tree]``.

        ``wiring="dense"``: one matrix product with [`effective_weights`][] (built once per
        sequence: XLA hoists it out of the time loop); ``"gather"``: the index gather itself. Same
        numbers; on CPU the dense form trained 5x faster in ``benchmarks/elm.py`` (N = 256,
        d_s = 1600; the gather's transpose is a slow scatter-add), the gather form needs no
        ``[source_size, N d_tree]`` matrix.
        """
        if self.wiring == "dense":
            return (source @ self.effective_weights()).reshape(self.n, self.d_tree)
        z = source[self.index] * self.w_s
        return self.c * z.reshape(self.n, self.d_tree, self.d_branch).sum(-1)

    def mlp_output(self, source: Array, m: Array, branches: Array | None = None) -> Array:
        r"""$o_t = \mathrm{MLP}([b_t, \kappa_m \odot m_{t-1}])$, the tanh's argument: ``[N, d_m]``
        (``branches``: $b_t$ if already computed, else from ``source``)."""
        kappa_m, _ = self.gains()
        b = self.branches(source) if branches is None else branches
        return self.mlp(jnp.concatenate([b, kappa_m * m], axis=-1))

    def update(self, source: Array, m: Array, branches: Array | None = None) -> tuple[Array, Array]:
        """``(m_t, w_r . m_t)``: the new memory ``[N, d_m]`` and its linear read-out ``[N]``."""
        kappa_m, gain = self.gains()
        m = kappa_m * m + gain * jnp.tanh(self.mlp_output(source, m, branches))
        return m, jnp.sum(self.w_r * m, axis=-1)

    def split_branches(self, u_x: Array, h: Array) -> Array:
        r"""$b_t$ from the feed-forward part ``u_x`` = ``x @ W[:d_inp]`` (``[N d_tree]``) and the recurrent
        activity ``h``: dense wiring only, ``(u_x + h @ W[d_inp:])`` reshaped to ``[N, d_tree]``."""
        d_in = self.source_size - self.n
        return (u_x + h @ self.effective_weights()[d_in:]).reshape(self.n, self.d_tree)


class ElmNetState(eqx.Module):
    """State of an ELM network: hidden memory ``m[N, d_m]``, high-pass reference ``r[N]``, activity
    ``h[N]`` (the paper's $a_t$, named ``h`` like every unit's activity) and the read-out layer's
    memory ``m_out[readout_neurons, readout_d_m]``; and the activation's own state ``g``
    ([`init_state`][dynlab.units.activity.Activity.init_state]: ``None``, or the gain controllers'
    ``[N, n_g]`` with [`AdaptiveGamma`][dynlab.units.activity.AdaptiveGamma])."""

    m: Array
    r: Array
    h: Array
    m_out: Array
    g: Array | None = None


def _layer_sizes(d_m, d_mlp, l_mlp, d_tree, d_branch) -> tuple[int, int]:
    r"""$(k_e, k_c)$ of one neuron: $k_e = \#w_p + \#w_r$ (MLP biases counted), $k_c = d_s$."""
    return NeuronMLP.count(d_tree + d_m, d_mlp, d_m, l_mlp) + d_m, d_tree * d_branch


@register("unit", "elm-net", "ELM network layer: N recurrent ELM neurons, random sparse gather, read-out ELM layer")
class ElmNet(Regularised):
    """A recurrent layer of ``hidden`` ELM neurons plus the read-out ELM layer (see the module doc).

    Args:
        input_size: feed-forward channels $u_t$ ($d_{inp}$).
        hidden: recurrent neurons $N$. d_m, d_mlp (default ``2 d_m``), l_mlp: neuron complexity.
        d_tree, d_branch: branches and synapses per branch; d_s: optional check, ``d_tree * d_branch``.
        c: input scale. lam: $\\lambda$. tau_min, tau_max: the fixed $\\tau_m$ range. tau_r: high-pass.
        rho_rec: probability that a synapse is recurrent.
        readout_neurons, readout_d_m, readout_d_tree, readout_d_branch: the read-out ELM layer.
        mlp_activation: ``"relu2"`` (paper), ``"relu"`` or ``"silu"``: the neurons' MLP hidden layers.
        wiring: how the gather is computed ([`ElmLayer.branches`][]): ``"dense"``, ``"gather"``, or
            ``"auto"`` (dense while the layer's matrix has at most 2**26 entries). Same numbers.
        activation: the hidden neurons' activity function, a value ([`dynlab.units.activity`][]):
            [`ReluActivity`][dynlab.units.activity.ReluActivity] (the paper's, default),
            [`SpikingActivity`][dynlab.units.activity.SpikingActivity] or
            [`AdaptiveGamma`][dynlab.units.activity.AdaptiveGamma] (the ARU's adaptive activation, a
            cross-paper ablation: module doc). Its parameters, if any, are drawn here.
        regularisers: the penalties of [`penalty`][], values ([`dynlab.units.regularisers`][]);
            default the paper's ``(MlpL2(1e-5), ActivityL1(1e-3))``.
        key: PRNG key.

    Configs spell ``activation`` and ``regularisers`` as keys (``adaptation``, ``spiking``,
    ``mlp_l2``, ...): [`from_config`][].
    """

    @classmethod
    def sized(cls, width: int) -> dict:
        """``hidden = width`` ELM neurons with ``d_m = 5``, ``d_tree = 8``, ``d_branch = 4`` (32
        synapses each; the SHD-Adding reference has 300, 10x the cost)."""
        return {"hidden": width_multiple(width, 1), "d_m": 5, "d_tree": 8, "d_branch": 4}

    layer: ElmLayer
    readout_layer: ElmLayer
    activation: Activity  # in the place of the former ``gain`` field: checkpoints keep their leaf order
    regularisers: tuple[Regulariser, ...]
    l_mlp: int = eqx.field(static=True)
    d_mlp: int = eqx.field(static=True)
    tau_r: float = eqx.field(static=True)

    def __init__(
        self,
        input_size: int,
        *,
        hidden: int = 96,
        d_m: int = 5,
        d_mlp: int | None = None,
        l_mlp: int = 1,
        d_tree: int = 30,
        d_branch: int = 10,
        d_s: int | None = None,
        c: float = 10.0,
        lam: float = 5.0,
        tau_min: float = 1.0,
        tau_max: float = 500.0,
        tau_r: FloatOrInf = 5.0,
        rho_rec: float = 0.25,
        readout_neurons: int = 19,
        readout_d_m: int = 3,
        readout_d_tree: int | None = None,
        readout_d_branch: int | None = None,
        mlp_activation: Literal["relu2", "relu", "silu"] = "relu2",
        wiring: Literal["auto", "dense", "gather"] = "auto",
        activation: Activity = ReluActivity(),
        regularisers: tuple[Regulariser, ...] = (MlpL2(MLP_L2), ActivityL1(ACTIVITY_L1)),
        key: PRNGKeyArray,
    ):
        for name, value in (("input_size", input_size), ("hidden", hidden), ("d_m", d_m),
                            ("readout_neurons", readout_neurons), ("readout_d_m", readout_d_m)):
            require_positive(name, value)
        d_mlp = 2 * d_m if d_mlp is None else d_mlp
        require_positive("d_mlp", d_mlp)
        if isinstance(l_mlp, bool) or not isinstance(l_mlp, int) or l_mlp < 0:
            raise ConfigError(f"l_mlp must be a non-negative integer, got {l_mlp!r}")
        check_branches(d_tree, d_branch, d_s)
        readout_d_tree = d_tree if readout_d_tree is None else readout_d_tree
        readout_d_branch = d_branch if readout_d_branch is None else readout_d_branch
        require_positive("readout_d_tree", readout_d_tree)
        require_positive("readout_d_branch", readout_d_branch)
        for name, value in (("c", c), ("lam", lam), ("tau_r", tau_r)):
            require_positive(name, value, integer=False, finite=name != "tau_r")
        check_tau_range(tau_min, tau_max)
        if isinstance(rho_rec, bool) or not isinstance(rho_rec, (int, float)) or not 0 <= rho_rec <= 1:
            raise ConfigError(f"rho_rec must be a probability in [0, 1], got {rho_rec!r}")
        if wiring not in ("auto", "dense", "gather"):
            raise ConfigError(f"wiring must be 'auto', 'dense' or 'gather', got {wiring!r}")
        if mlp_activation not in MLP_ACTIVATIONS:
            raise ConfigError(f"mlp_activation must be one of {', '.join(map(repr, MLP_ACTIVATIONS))}, got {mlp_activation!r}")
        if not isinstance(activation, Activity):
            raise ConfigError(f"activation must be an Activity value (ReluActivity(), SpikingActivity(), AdaptiveGamma(); "
                              f"in a config: adaptation, spiking), got {activation!r}")
        if not isinstance(regularisers, (tuple, list)) or not all(isinstance(r, Regulariser) for r in regularisers):
            raise ConfigError(f"regularisers must be a tuple of Regulariser values (MlpL2(), ActivityL1(); "
                              f"in a config: mlp_l2, activity_l1), got {regularisers!r}")
        self.input_size, self.hidden, self.l_mlp, self.d_mlp = input_size, hidden, l_mlp, d_mlp
        self.tau_r = float(tau_r)
        self.regularisers = tuple(regularisers)
        k_in, k_out, k_layer, k_readout = jax.random.split(key, 4)
        self.activation = activation.init(hidden, key=jax.random.fold_in(key, 1))
        index = sample_wiring(k_in, hidden, d_tree * d_branch, input_size, rho_rec)
        common = dict(c=c, lam=lam, tau_min=tau_min, tau_max=tau_max, mlp_activation=mlp_activation, wiring=wiring)
        self.layer = ElmLayer(index, input_size + hidden, d_m=d_m, d_mlp=d_mlp, l_mlp=l_mlp, d_tree=d_tree, d_branch=d_branch,
                              key=k_layer, **common)
        out_index = sample_wiring(k_out, readout_neurons, readout_d_tree * readout_d_branch, hidden, 0.0)
        self.readout_layer = ElmLayer(out_index, hidden, d_m=readout_d_m, d_mlp=readout_d_m, l_mlp=0, d_tree=readout_d_tree,
                                      d_branch=readout_d_branch, key=k_readout, **common)

    @classmethod
    def from_config(
        cls,
        input_size: int,
        *,
        adaptation: Literal["none", "aru"] = "none",
        n_g: int = 8,
        n_mean: float = 5.0,
        n_std: float = 2.0,
        n_min: float = N_MIN,
        spiking: bool = False,
        surrogate_scale: float = 100.0,
        mlp_l2: float = MLP_L2,
        activity_l1: float = ACTIVITY_L1,
        key: PRNGKeyArray,
        **config,
    ) -> "ElmNet":
        """The network a config spells: the one place where TOML / ``--set`` keys become values.

        Args:
            adaptation, n_g, n_mean, n_std, n_min, spiking, surrogate_scale: the ``activation``
                ([`activation_from_config`][]).
            mlp_l2, activity_l1: ``regularisers=(MlpL2(mlp_l2), ActivityL1(activity_l1))``.
            **config: [`ElmNet`][]'s own keywords, passed on (``activation`` and
                ``regularisers`` too: a value given there replaces its spelling, and a spelling
                that differs from its default next to it is a [`ConfigError`][dynlab.errors.ConfigError]).

        The registry builds ``elm-net`` through this ([`dynlab.registry.constructor`][]), and
        its config keys are these plus [`ElmNet`][]'s.
        """
        spelled = dict(adaptation=adaptation, n_g=n_g, n_mean=n_mean, n_std=n_std, n_min=n_min, spiking=spiking,
                       surrogate_scale=surrogate_scale, mlp_l2=mlp_l2, activity_l1=activity_l1)
        for value_key, keys in (("activation", _ACTIVATION_KEYS), ("regularisers", _REGULARISER_KEYS)):
            changed = [k for k in keys if value_key in config and spelled[k] != _SPELLED_DEFAULTS[k]]
            if changed:
                raise ConfigError(f"{changed[0]} spells the {value_key}, which is given as a value; "
                                  f"a value carries its own settings")
        if "activation" not in config:
            config["activation"] = activation_from_config(adaptation, spiking, surrogate_scale, n_g, n_mean, n_std,
                                                          n_min)
        if "regularisers" not in config:
            config["regularisers"] = (MlpL2(mlp_l2), ActivityL1(activity_l1))
        return cls(input_size, key=key, **config)

    @classmethod
    def from_budget(cls, budget: int, input_size: int, *, solve_for: Literal["hidden", "d_branch"] = "hidden",
                    key: PRNGKeyArray, **config) -> "ElmNet":
        """The network whose layer budget $P = N(k_e + k_c)$ fits ``budget`` (see [`budget_config`][]);
        ``config`` as [`from_config`][] takes it (values or their spellings)."""
        return cls.from_config(input_size, key=key, **budget_config(budget, solve_for=solve_for, **config))

    @property
    def output_size(self) -> int:
        return self.readout_layer.n

    @property
    def gain(self) -> GainController | None:
        """The ARU gain controllers when ``activation`` is [`AdaptiveGamma`][dynlab.units.activity.AdaptiveGamma], else ``None``."""
        return self.activation.controller if isinstance(self.activation, AdaptiveGamma) else None

    def init_state(self) -> ElmNetState:
        n, ro = self.layer, self.readout_layer
        return ElmNetState(m=jnp.zeros((n.n, n.d_m)), r=jnp.zeros(n.n), h=jnp.zeros(n.n),
                           m_out=jnp.zeros((ro.n, ro.d_m)), g=self.activation.init_state(n.n))

    def recurrent_matrices(self) -> dict[str, Array]:
        r"""``w_syn[i, j]`` $= c \sum_{k:\ \text{synapse } k \text{ of } i \text{ reads } a_j} w_{s,ik}$, the linear
        weight with which neuron $j$'s activity enters neuron $i$'s branch sums (``[N, N]``)."""
        W = self.layer.effective_weights()[self.input_size :]  # [N presynaptic, N * d_tree]
        w_syn = W.reshape(self.hidden, self.hidden, self.layer.d_tree).sum(-1).T
        return {"w_syn": w_syn, **self.activation.recurrent_matrices()}

    def project_input(self, x: Array) -> Array:
        """Dense wiring: the input's share of every branch sum, ``x @ W[:input_size]`` (``[N d_tree]``),
        computed for all steps at once by a sequence model; gather wiring: ``x`` itself."""
        return x @ self.layer.effective_weights()[: self.input_size] if self.layer.wiring == "dense" else x

    def step_projected(self, state: ElmNetState, u: Array, *, drive: Array | None = None) -> tuple[ElmNetState, Array]:
        """One step from [`project_input`][]'s ``u``."""
        return self._readout_step(self._hidden_projected(state, u, drive))

    def __call__(self, state: ElmNetState, x: Array, *, drive: Array | None = None) -> tuple[ElmNetState, Array]:
        return self._readout_step(self._hidden_step(state, x, None, drive))

    def run_sequence(self, state: ElmNetState, us: Array, drives: Array, scan, keep_states: bool):
        r"""The whole sequence ([`run_sequence`][dynlab.units.base.Cell.run_sequence]), in two loops: the recurrent
        hidden layer first; then the read-out layer, which reads only the current activity $a_t$, so
        its branch sums for all steps are one product ($[T, N] \times [N, n_{ro} d_{tree}]$ with dense
        wiring) outside any loop, and only its small memory update is stepped. Same numbers as
        stepping; at the ``benchmarks/elm.py`` size (N = 256, 204 read-out neurons) a training step
        went from 1015 to 790 ms with it."""
        def hidden(cell, s, inp):
            s = cell._hidden_projected(s, *inp)
            return s, (s if keep_states else s.h)

        states = scan(hidden, self, state, (us, drives))[1]
        hs = states.h if keep_states else states
        ro = self.readout_layer
        branches = jax.vmap(ro.branches)(hs)

        def readout(cell, m, b):
            m, y = cell.readout_layer.update(None, m, b)
            return m, ((m, y) if keep_states else y)

        out = scan(readout, self, state.m_out, branches)[1]
        if not keep_states:
            return ro.b + out
        m_out, y_out = out
        return ro.b + y_out, ElmNetState(m=states.m, r=states.r, h=states.h, m_out=m_out, g=states.g)

    def _hidden_projected(self, state: ElmNetState, u: Array, drive) -> ElmNetState:
        """`_hidden_step` from [`project_input`][]'s ``u``."""
        if self.layer.wiring != "dense":
            return self._hidden_step(state, u, None, drive)
        return self._hidden_step(state, None, self.layer.split_branches(u, state.h), drive)

    def _hidden_step(self, state: ElmNetState, x: Array | None, branches: Array | None, drive) -> ElmNetState:
        """The recurrent layer's step (memory, high-pass reference, activity); ``m_out`` is carried unchanged."""
        layer = self.layer
        source = None if branches is not None else jnp.concatenate([x, state.h])
        m, y = layer.update(source, state.m, branches)
        kappa_r = math.exp(-1.0 / self.tau_r)
        r = kappa_r * state.r + (1 - kappa_r) * y
        h, g = self.activation(add_drive(layer.b + y - r, drive), state.g)
        return ElmNetState(m=m, r=r, h=h, m_out=state.m_out, g=g)

    def _readout_step(self, state: ElmNetState) -> tuple[ElmNetState, Array]:
        """The read-out layer's step on the new activity ``state.h``: the full new state and the output."""
        ro = self.readout_layer
        m_out, y_out = ro.update(state.h, state.m_out)
        return ElmNetState(m=state.m, r=state.r, h=state.h, m_out=m_out, g=state.g), ro.b + y_out

    def mlp_outputs(self, us: Array, states: ElmNetState, state0: ElmNetState | None = None) -> Array:
        r"""The hidden neurons' MLP outputs $o_t$ (the tanh's argument) of a trajectory, ``[T, N, d_m]``.

        ``us[T, input_size]`` are the layer's inputs, ``states`` its states after each step (a
        [`trajectory`][dynlab.models.SequenceModel.trajectory] entry) and ``state0`` the state before the
        first (default: [`init_state`][]). Recomputed from $(u_t, a_{t-1}, m_{t-1})$ for all $t$
        at once (no scan); [`MlpL2`][dynlab.units.regularisers.MlpL2] reads them.
        """
        state0 = self.init_state() if state0 is None else state0
        prev_m = jnp.concatenate([state0.m[None], states.m[:-1]])
        prev_h = jnp.concatenate([state0.h[None], states.h[:-1]])
        return jax.vmap(lambda u, h, m: self.layer.mlp_output(jnp.concatenate([u, h]), m))(us, prev_h, prev_m)

    def regulariser_terms(self, us: Array, states: ElmNetState, state0: ElmNetState | None = None) -> tuple[Array, ...]:
        """The unweighted term of each of [`regularisers`][] on a trajectory (arguments as
        [`mlp_outputs`][]), in their order."""
        state0 = self.init_state() if state0 is None else state0
        return tuple(r.term(self, us, states, state0) for r in self.regularisers)

    @property
    def penalised(self) -> bool:
        """Whether training adds [`penalty`][] to the loss (some regulariser's strength is positive)."""
        return any(r.strength > 0 for r in self.regularisers)

    def penalty(self, us: Array, states: ElmNetState, state0: ElmNetState | None = None) -> Array:
        r"""$\sum_j \lambda_j R_j$ over [`regularisers`][] (a scalar; 0 without any), arguments as
        [`mlp_outputs`][]. With the default pair: ``1e-5 * R_mlp_l2 + 1e-3 * R_activity_l1``."""
        state0 = self.init_state() if state0 is None else state0
        terms = [r(self, us, states, state0) for r in self.regularisers]
        return functools.reduce(operator.add, terms) if terms else jnp.zeros((), us.dtype)

    def param_count(self) -> dict[str, int]:
        """``N``, ``k_e``, ``k_c``, ``P = N (k_e + k_c)``, ``bias`` (N), ``readout``, ``adaptation`` (the
        activation's parameters: [`AdaptiveGamma`][dynlab.units.activity.AdaptiveGamma]'s controllers, else 0)
        and ``total``."""
        n, ro = self.layer, self.readout_layer
        k_e, k_c = _layer_sizes(n.d_m, self.d_mlp, self.l_mlp, n.d_tree, n.d_branch)
        ro_e, ro_c = _layer_sizes(ro.d_m, ro.d_m, 0, ro.d_tree, ro.d_branch)
        counts = {"N": n.n, "k_e": k_e, "k_c": k_c, "P": n.n * (k_e + k_c), "bias": n.n,
                  "readout": ro.n * (ro_e + ro_c + 1), "adaptation": self.activation.param_count()}
        counts["total"] = counts["P"] + counts["bias"] + counts["readout"] + counts["adaptation"]
        return counts


_ACTIVATION_KEYS = ("adaptation", "n_g", "n_mean", "n_std", "n_min", "spiking", "surrogate_scale")
_REGULARISER_KEYS = ("mlp_l2", "activity_l1")
_SPELLED_DEFAULTS = {k: p.default for k, p in inspect.signature(ElmNet.from_config).parameters.items()
                     if k in _ACTIVATION_KEYS + _REGULARISER_KEYS}
"""The defaults of the keys that spell [`ElmNet`][]'s values ([`ElmNet.from_config`][])."""


def activation_from_config(adaptation: str = "none", spiking: bool = False, surrogate_scale: float = 100.0,
                           n_g: int = 8, n_mean: float = 5.0, n_std: float = 2.0, n_min: float = N_MIN) -> Activity:
    """The activation the config keys spell:

    * ``adaptation = "aru"``: ``AdaptiveGamma(n_g, n_mean, n_std, n_min)`` (not with ``spiking``);
    * ``adaptation = "none"``: ``SpikingActivity(surrogate_scale)`` with ``spiking = true``, else
      ``ReluActivity()``; the controller keys are unused.

    ``surrogate_scale`` is checked whichever is chosen (as it always was); a bad spelling is a
    one-line [`ConfigError`][dynlab.errors.ConfigError] naming what is valid.
    """
    if adaptation not in ("none", "aru"):
        raise ConfigError(f"adaptation must be 'none' or 'aru', got {adaptation!r}")
    spike = SpikingActivity(surrogate_scale)
    if adaptation == "aru":
        if spiking:
            raise ConfigError("adaptation 'aru' replaces the ReLU by the adaptive gamma; "
                              "it cannot be combined with spiking")
        return AdaptiveGamma(n_g, n_mean, n_std, n_min)
    return spike if spiking else ReluActivity()


def budget_config(budget: int, *, solve_for: Literal["hidden", "d_branch"] = "hidden", **config) -> dict:
    r"""``config`` with ``hidden`` ($N$) or ``d_branch`` set so that $P = N(k_e + k_c) \le$ ``budget``.

    * ``solve_for="hidden"`` (N vs $k_e$ sweeps): $N = \lfloor P / (k_e + k_c) \rfloor$;
    * ``solve_for="d_branch"`` ($k_e$ vs $k_c$ sweeps): $d_{branch} = \lfloor (P/N - k_e) / d_{tree} \rfloor$.

    Keys not given take [`ElmNet`][]'s defaults. A budget that cannot hold one neuron (or one
    synapse per branch) is a [`ConfigError`][dynlab.errors.ConfigError].
    """
    require_positive("budget", budget)
    if solve_for not in ("hidden", "d_branch"):
        raise ConfigError(f"solve_for must be 'hidden' or 'd_branch', got {solve_for!r}")
    cfg = {**defaults(ElmNet), **config}
    cfg.pop("d_s", None)
    d_mlp = 2 * cfg["d_m"] if cfg["d_mlp"] is None else cfg["d_mlp"]
    if solve_for == "hidden":
        k_e, k_c = _layer_sizes(cfg["d_m"], d_mlp, cfg["l_mlp"], cfg["d_tree"], cfg["d_branch"])
        if budget < k_e + k_c:
            raise ConfigError(f"budget P = {budget} is too small for one neuron: k_e + k_c = {k_e} + {k_c} = {k_e + k_c}")
        return {**config, "hidden": budget // (k_e + k_c)}
    config = {k: v for k, v in config.items() if k != "d_s"}
    k_e, _ = _layer_sizes(cfg["d_m"], d_mlp, cfg["l_mlp"], cfg["d_tree"], 1)
    n, d_tree = cfg["hidden"], cfg["d_tree"]
    d_branch = (budget - n * k_e) // (n * d_tree)
    if d_branch < 1:
        raise ConfigError(f"budget P = {budget} is too small for {n} neurons with one synapse per branch: "
                          f"needs N (k_e + d_tree) = {n} * ({k_e} + {d_tree}) = {n * (k_e + d_tree)}")
    return {**config, "d_branch": d_branch}
