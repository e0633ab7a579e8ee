r"""Any sequence model with a depth factor over time and a mean-field read-out.

A [`SequenceModel`][dynlab.models.SequenceModel] unrolled over $T$ steps is a network of depth $T$
whose layers share their weights. [`dynlab.rnn_residual`][] derives, for the linear RNN, the
parameterisation under which predictive coding through time tends to BPTT as the width $N$ grows
at any fixed $T$: every step's update scaled by $T^{-\alpha}$ with $\alpha = 1$ (the only exponent
whose limit is the ODE $\dot h = A h$ on $[0, 1]$, bounded in $T$), and a mean-field read-out
($\|c\|^2 \propto 1/(\gamma_0^2 N)$). [`TimeResidual`][] applies the same two changes to any unit:

$$ s_t = s_{t-1} + T^{-\alpha}\big(F_\theta(s_{t-1}, x_t) - s_{t-1}\big), \qquad
   o_t = \frac{1}{\gamma_0\sqrt N}\,W^{out} h_t + b , $$

where $(F_\theta(s, x), h)$ is the unit's own step (its next state, every leaf of the state PyTree,
and its output $h$, which the read-out reads) and $N$ the read-out's fan-in. $W^{out}$ keeps the
unit's standard initialisation (entries of size $1/\sqrt N$), so $\|c\|^2 \approx 1/(3\gamma_0^2N)$.

**Why this should give the law for every unit.** The PC energy's rescaling is
$s - 1 = \sum_\tau \|\partial o_T / \partial e_\tau\|^2$ (the read-out at the scored step against the
state errors, [`dynlab.rules.pc_time.rescaling`][]) and
$\partial o_T/\partial e_\tau = c\,J_h\,R_{T-1}\cdots R_{\tau+1}$ with the one-step Jacobians
$R_t = I + T^{-\alpha}(\partial F/\partial s - I)$. At $\alpha = 1$ their products over up to $T$ steps
stay bounded for any unit whose $\partial F/\partial s$ is bounded, so every term is
$O(\|c\|^2) = O(1/N)$ and $s - 1 = O(T/N)$; as $s - 1 \to 0$ the equilibrium's errors vanish and the PC
gradient tends to BPTT's. Without the depth factor (``alpha = 0``) a unit with a memory keeps
$\|R^k\|$ of order 1 or larger over $T$ steps and with its standard read-out ($\|c\|^2$ of order 1)
$s - 1$ does not fall with $N$. ``dynlab run cross-pc-law`` measures both on the eight units.

Choices the derivation leaves open (parameters): ``alpha`` (default 1), ``gamma0`` (default 1), and
that the read-out bias is not scaled (it does not depend on the state, so it does not enter
$s$ or the errors).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from dynlab.errors import ConfigError, require_positive
from dynlab.models import SequenceModel


def check_depth_factor(alpha: float, gamma0: float) -> None:
    """Raise [`ConfigError`][dynlab.errors.ConfigError] unless ``alpha`` is a finite number >= 0 and
    ``gamma0`` a positive finite one."""
    require_positive("gamma0", gamma0, integer=False)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
        raise ConfigError(f"alpha must be a finite number >= 0, got {alpha!r}")


class TimeResidual(SequenceModel):
    """``model`` with every state update scaled by ``length ** -alpha`` and its read-out weights by
    ``1 / (gamma0 sqrt(N))`` (module docstring): a [`SequenceModel`][dynlab.models.SequenceModel] with
    ``model``'s cells, encoder and (rescaled) read-out, so every rule and analysis takes it; only
    its step, and the scan over steps, differ."""

    length: int = eqx.field(static=True)
    alpha: float = eqx.field(static=True)
    gamma0: float = eqx.field(static=True)

    def __init__(self, model: SequenceModel, length: int, *, alpha: float = 1.0, gamma0: float = 1.0):
        require_positive("length", length)
        check_depth_factor(alpha, gamma0)
        n = model.readout.in_features
        self.cells, self.encoder, self.unit, self.remat = model.cells, model.encoder, model.unit, model.remat
        self.readout = eqx.tree_at(lambda r: r.weight, model.readout, model.readout.weight / (gamma0 * math.sqrt(n)))
        self.length, self.alpha, self.gamma0 = int(length), float(alpha), float(gamma0)

    @property
    def step_size(self) -> float:
        r"""$T^{-\alpha}$."""
        return self.length ** -self.alpha

    def step(self, state: tuple, x: Array, drive: Array | None = None) -> tuple[tuple, Array]:
        """``(states, x) -> (states', y)``: the unit's step, its state update scaled by ``step_size``."""
        new, y = super().step(state, x, drive)
        h = self.step_size
        return jax.tree_util.tree_map(lambda s, n: s + h * (n - s), state, new), y

    def _run(self, xs: Array, drive: Array | None, state: tuple | None, keep_states: bool):
        """A scan of [`step`][dynlab.time_residual.TimeResidual.step] over time (the layers' own
        sequence loops would skip the depth factor)."""
        if xs.ndim != 2 or xs.shape[1] != self.input_size:
            raise ConfigError(f"model expects inputs of shape [T, {self.input_size}], got {tuple(xs.shape)}")
        state = self.init_state() if state is None else state
        drives = jnp.zeros(xs.shape[0], xs.dtype) if drive is None else jnp.asarray(drive)

        def body(s, inputs):
            s, y = self.step(s, *inputs)
            return s, (y, s)

        ys, states = jax.lax.scan(body, state, (xs, drives))[1]
        return (ys, states) if keep_states else ys
