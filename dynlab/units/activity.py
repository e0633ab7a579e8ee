r"""How an ELM network neuron turns its pre-activation into its activity: values passed to
[`ElmNet`][dynlab.units.elm_net.ElmNet] (``activation=``).

The hidden neurons of the ELM network compute a pre-activation $p_t = b + w_r^\top m_t - r_t + \xi_t$
(``[N]``) and then their activity $a_t$, the quantity the layer feeds back and passes on. Which
function does it is a value, as a step-size controller is in diffrax: [`Activity`][] declares
the contract, and the concrete ones beside it are

* [`ReluActivity`][] — the scaling paper's $a_t = \operatorname{ReLU}(p_t)$ (the default);
* [`SpikingActivity`][] — a Heaviside step with the SuperSpike surrogate gradient;
* [`AdaptiveGamma`][] — the ARU's adaptive activation (Geadah et al. Eqs. 3–5): a private
  controller RNN per neuron sets the gain and saturation of $\gamma$ at every step.

The cell never compares strings: it calls the value. A new activity is one subclass. In TOML and
on the command line the same choices are spelled ``adaptation = "none" | "aru"``, ``n_g``,
``n_mean``, ``n_std``, ``n_min``, ``spiking`` and ``surrogate_scale``;
[`ElmNet.from_config`][dynlab.units.elm_net.ElmNet.from_config] turns them into these values.
"""

from __future__ import annotations

import abc
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.units.aru import N_MIN, GainController
from dynlab.units.base import count_params


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def superspike(x: Array, scale: float) -> Array:
    r"""Heaviside step $\Theta(x)$ forward; SuperSpike surrogate $\partial/\partial x = 1/(1 + \beta|x|)^2$ backward."""
    return (x > 0).astype(x.dtype)


def _superspike_fwd(x, scale):
    return superspike(x, scale), x


def _superspike_bwd(scale, x, g):
    return (g / jnp.square(1.0 + scale * jnp.abs(x)),)


superspike.defvjp(_superspike_fwd, _superspike_bwd)


class Activity(eqx.Module):
    r"""The activity function of a layer of $N$ neurons, $(p_t, g_{t-1}) \mapsto (a_t, g_t)$.

    $g$ is the function's own state (``None`` for a memoryless one). A value may carry trainable
    arrays ([`AdaptiveGamma`][]'s controllers); those that need the layer's size to draw them
    are given it by [`init`][], which the cell calls once while it is built.
    """

    def init(self, hidden: int, *, key: PRNGKeyArray) -> "Activity":
        """This value made ready for a layer of ``hidden`` neurons, its parameters drawn from ``key``.

        Default: the value itself (nothing to draw). The cell calls it in its ``__init__``.
        """
        return self

    def init_state(self, hidden: int) -> Array | None:
        r"""$g_0$ for ``hidden`` neurons (default ``None``: no state)."""
        return None

    @abc.abstractmethod
    def __call__(self, pre: Array, state: Array | None) -> tuple[Array, Array | None]:
        r"""One step: the pre-activation ``pre[N]`` and the state $g_{t-1}$ to the activity
        ``a[N]`` and the state $g_t$. Pure and jit-able (analyses differentiate it)."""

    def recurrent_matrices(self) -> dict[str, Array]:
        """Square recurrent matrices of the function's own state (for spectral analyses; default none)."""
        return {}

    def param_count(self) -> int:
        """Trainable parameters of the value (0 for a parameterless one)."""
        return count_params(self)


class ReluActivity(Activity):
    r"""$a_t = \operatorname{ReLU}(p_t) = \max(p_t, 0)$: the scaling paper's activity (Eq. 1), threshold 0."""

    def __call__(self, pre: Array, state: None) -> tuple[Array, None]:
        return jax.nn.relu(pre), None


class SpikingActivity(Activity):
    r"""$a_t = \Theta(p_t)$, a spike when the pre-activation crosses 0, trained through the SuperSpike
    surrogate gradient $\partial a_t / \partial p_t := 1/(1 + \beta |p_t|)^2$ ([`superspike`][]).

    Args:
        surrogate_scale: $\beta > 0$, the surrogate's sharpness (100, SuperSpike's value).

    The surrogate is a ``jax.custom_vjp``: reverse mode only, so the forward-mode analyses
    (Lyapunov spectra, Jacobian spectra) need a non-spiking activity.
    """

    surrogate_scale: float = eqx.field(static=True)

    def __init__(self, surrogate_scale: float = 100.0):
        require_positive("surrogate_scale", surrogate_scale, integer=False)
        self.surrogate_scale = float(surrogate_scale)

    def __call__(self, pre: Array, state: None) -> tuple[Array, None]:
        return superspike(pre, self.surrogate_scale), None


class AdaptiveGamma(Activity):
    r"""The ARU's adaptive activation moved into another unit (Geadah et al. Eqs. 2–5; a cross-paper
    ablation, not in the ELM scaling paper).

    Every neuron $i$ has a private controller RNN (weights shared across neurons,
    [`GainController`][dynlab.units.aru.GainController]) that reads its pre-activation and sets its gain
    $n$ and saturation $s$ at every step:

    $$ g_t = \tanh(W_{ag}\, p_t + W_{gg}\, g_{t-1} + b_g), \qquad
       n_t = \max(W_{gn} g_t + b_n,\ n_{\min}), \qquad s_t = W_{gs} g_t + b_s, $$
    $$ a_t = \gamma(p_t; n_t, s_t) = (1 - s_t)\,\frac{\operatorname{softplus}(n_t p_t)}{n_t}
            + s_t\, \sigma(n_t p_t). $$

    At initialisation $b_n \sim N(n_{mean}, n_{std}^2)$ per neuron and $s = 0$: a softplus close to
    the ReLU it replaces. $g_0 = 0$ (``[N, n_g]``).

    Args:
        n_g: controller units per neuron.
        n_mean, n_std: the prior of the gain's bias $b_n$ (5, 2: the ARU paper's).
        n_min: the gain's floor ([`gamma`][dynlab.units.aru.gamma]).
        controller: the drawn controllers; ``None`` (the default) until [`init`][] draws them
            for a layer. A value that already holds them is used as it is.
    """

    controller: GainController | None
    n_g: int = eqx.field(static=True)
    n_mean: float = eqx.field(static=True)
    n_std: float = eqx.field(static=True)
    n_min: float = eqx.field(static=True)

    def __init__(self, n_g: int = 8, n_mean: float = 5.0, n_std: float = 2.0, n_min: float = N_MIN, *,
                 controller: GainController | None = None):
        require_positive("n_g", n_g)
        require_positive("n_min", n_min, integer=False)
        for name, value in (("n_mean", n_mean), ("n_std", n_std)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{name} must be a number, got {value!r}")
        if controller is not None and (controller.n_g != n_g or controller.n_min != float(n_min)):
            raise ConfigError(f"AdaptiveGamma's controller has n_g = {controller.n_g}, n_min = {controller.n_min}; "
                              f"the value says n_g = {n_g}, n_min = {n_min}")
        self.n_g, self.n_mean, self.n_std, self.n_min = n_g, float(n_mean), float(n_std), float(n_min)
        self.controller = controller

    def init(self, hidden: int, *, key: PRNGKeyArray) -> "AdaptiveGamma":
        """The value with ``hidden`` controllers drawn from ``key`` (or itself when it holds them)."""
        if self.controller is not None:
            if self.controller.b_n.shape != (hidden,):
                raise ConfigError(f"AdaptiveGamma holds controllers for {self.controller.b_n.shape[0]} neurons, "
                                  f"the layer has {hidden}")
            return self
        controller = GainController(hidden, n_g=self.n_g, n_mean=self.n_mean, n_std=self.n_std, n_min=self.n_min,
                                    key=key)
        return AdaptiveGamma(self.n_g, self.n_mean, self.n_std, self.n_min, controller=controller)

    def init_state(self, hidden: int) -> Array:
        return jnp.zeros((hidden, self.n_g))

    def __call__(self, pre: Array, state: Array) -> tuple[Array, Array]:
        if self.controller is None:
            raise ConfigError("AdaptiveGamma has no controllers yet: call .init(hidden, key=...) "
                              "(a cell built with it does so)")
        return self.controller(pre, state)

    def recurrent_matrices(self) -> dict[str, Array]:
        return {} if self.controller is None else {"w_gg": self.controller.w_gg}
