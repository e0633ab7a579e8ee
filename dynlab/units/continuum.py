r"""The five-network continuum of Sarkar & Howard (Table 1, notes §1): generic RNN -> SITH-RNN.

All five are *deep linear* recurrent networks of ``n_layers`` (default 4; config key ``n_layers`` because ``layers`` is the SequenceModel's number of cells) layers whose weights are
**shared across layers**; one dynlab Cell holds the whole stack (state = every layer's hidden
state, one array ``[layers, ...]``), so they run in a ``SequenceModel`` with ``layers=1``, under
every rule and analysis. Layer $l$ reads $o^{l-1}$ (layer 1 reads the input $x$):

$$ h^l_t = R\, h^l_{t-1} + I\, o^{l-1}_t + \xi_t \qquad \text{(Eq. 3; } \xi \text{ = drive)} $$

* **Net 1** ``rnn-generic``: $h \in \mathbb{R}^{N}$ ($N = n_f n_\tau = 450$), dense trainable $I, R$,
  dense read-out $o^l = L h^l \in \mathbb{R}^{n_f}$ (no convolution, no pooling).
* **Nets 2–5** share the What × When structure (Eqs. 5–7): $h \in \mathbb{R}^{n_f \times n_\tau}$, each
  feature evolves in its own temporal subspace with the same blocks
  ($R = 1_{n_f} \otimes R_\text{when}$, $I = 1_{n_f} \otimes I_\text{when}$, $L = 1_{n_f}\otimes L_\text{when}$),
  then the shared width-1 convolution $g \in \mathbb{R}^{n_f\times n_f}$ and a max over τ (Eq. 7):

  $$ o^l_a(t) = \max_i \sum_b g_{ab} (h^l_t L_\text{when}^\top)_{b,i} . $$

  * **Net 2** ``rnn-blockdiag``: dense trainable $R_\text{when}, I_\text{when}, L_\text{when}$.
  * **Net 3** ``rnn-diag-uniform``: $R_\text{when} = \operatorname{diag}(e^{-1/\tau_i})$, τ linearly spaced
    in [``tau_min``, ``tau_max``]; $I_\text{when}$ fixed; dense trainable $L_\text{when}$.
  * **Net 4** ``rnn-diag-geometric``: as Net 3 with geometric τ.
  * **Net 5** ``sith-rnn``: Net 4's frozen geometric decays; $L_\text{when}$ banded Toeplitz, one motif
    of width ``motif_width`` (7) sliding along the diagonal, constrained to sum to zero (the
    trainable vector $m$ is used as $m - \bar m$).

Choices where the paper is silent or garbled (exposed as parameters):

* ``input_weight``: $I_\text{when}$ of Nets 3–5. The paper's readable text says "$1 \otimes 1$"
  (default ``"ones"``); ``"decay"`` uses $e^{-s_i}$ (the notes' discretisation reading); ``"rate"``
  uses $1 - e^{-1/\tau_i}$ (normalised integrators, DC gain 1 for every τ, like SITH's unit-area
  filters: the slow cells then no longer dominate the max over τ by their gain τ).
* ``train_decays`` (Nets 3–4): the paper does not say whether the diagonal is trained (default
  ``False``: the decays are derived from the static τ grid, not stored as arrays, so neither the
  optimiser nor AdamW's weight decay can change them). ``True`` trains $\log\tau_i$.
* Initialisation "uniform, scaled by 1/sqrt(layer size)": $U(\pm 1/\sqrt{\text{fan-in}})$ for every
  trainable matrix (fan-in 450 for Net 1's $R$ and $L$, $n_\tau$ for Net 2's blocks, 1 for
  $I_\text{when}$, $n_f$ for $g$ and the input map, ``motif_width`` for the motif).
* If ``input_size != n_features``, a trainable input map ``w_in`` precedes layer 1.
* ``hidden_input`` (Nets 3–5 and SITHCon; default ``"hold"``): how the fixed dynamics of layers
  $l \ge 2$ discretise their input. The layers are leaky integrators in continuous time, stepped
  once per time step. Layer 1 reads the one-hot pulses, which are exact at the step onsets
  (``input_weight`` is the response at lag 0: "pulse"). Layers $l \ge 2$ read $o^{l-1}$, a signal
  of continuous time known only at the steps. ``"hold"`` takes it as constant over each step
  $(t-1, t]$ and integrates the kernel over the step: the input gain becomes
  $I_i \int_0^1 e^{-u/\tau_i} du = I_i\, \tau_i (1 - e^{-1/\tau_i})$, which is exact for
  piecewise-constant inputs. ``"pulse"`` uses layer 1's gain everywhere (the paper's text, which
  does not distinguish the layers). Why it matters: at dilation $3^m$ the same memory cell sees
  $o^{l-1}$ sampled $3^m$ times more finely. Under ``"pulse"`` a cell's gain for a slow input is
  $1/(1-e^{-1/\tau}) \approx \tau + 1/2$ steps, so the cell $\tau$ at $3^0$ and its counterpart
  $3\tau$ at $3^1$ have gains $\tau + 1/2$ and $3\tau + 1/2$, not in the ratio 3: a relative error
  of about $1/(2\tau)$, large for the fast cells ($\tau \sim 1$); ``"hold"`` gives exactly $\tau$ and
  $3\tau$. Measured (``dynlab run sith-trw``, sith-rnn, 1000 steps, lr 1e-2, 3 seeds): with
  ``"pulse"`` (and extended τ windows) seed 0 classifies 8 of 9 sequences at $3^1 \dots 3^6$;
  with ``"hold"`` and shifted windows ([`dynlab.units.sith.SITH.shift`][]) every seed
  classifies all 9 at every dilation, and so does SITHCon. Nets 1–2 learn their input
  weights, so their input discretisation is learned too; they keep ``"pulse"``.

Sequence fast path ([`LayerStack.sequence`][]): diagonal recurrences (Nets 3–5) run with
``lax.associative_scan``; dense ones (Nets 1–2) with ``lax.scan`` (an associative scan over dense
matrices costs $O(N^3)$ per combine, far more than the scan).
"""

from __future__ import annotations

import copy
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.units.sith import SITH, check_taus, diagonal_scan, tau_grid
from dynlab.units.base import TauExtensible, width_multiple
from dynlab.units.stack import LayerStack, _uniform

def _dense_scan(R, b):
    """``h_t = h_{t-1} R^T + b_t`` over axis 0 (``lax.scan``)."""

    def body(h, bt):
        h = h @ R.T + bt
        return h, h

    return jax.lax.scan(body, jnp.zeros(b.shape[1:], b.dtype), b)[1]


def _add_drive(b, drive):
    """``b[T, ...] + drive[T]`` or ``drive[T, n_f]`` (broadcast over the rest); ``None`` adds nothing."""
    return b if drive is None else b + drive.reshape(drive.shape + (1,) * (b.ndim - drive.ndim))


def _plus(b, drive):
    """One step: ``drive`` is a scalar, broadcasts to the layer's state, or is a per-neuron vector over
    the flattened state (``[hidden]``, e.g. ``[n_features * n_taus]``); ``None`` adds nothing."""
    if drive is None:
        return b
    drive = jnp.asarray(drive)
    if drive.ndim == 1 and b.ndim > 1 and drive.shape[0] == b.size:
        drive = drive.reshape(b.shape)
    return b + drive


@register("unit", "rnn-generic", "Net 1: deep linear RNN, dense trainable I, R, L shared across 4 layers")
class GenericRNN(LayerStack):
    r"""Net 1, the generic deep linear RNN: $h^l_t = R h^l_{t-1} + I o^{l-1}_t + \xi$, $o^l = L h^l$.

    $R \in \mathbb{R}^{N\times N}$, $I \in \mathbb{R}^{N \times n_f}$, $L \in \mathbb{R}^{n_f \times N}$,
    $N$ = ``hidden`` (450), all trainable and shared by the layers. No convolution, no max.
    """

    @classmethod
    def sized(cls, width: int) -> dict:
        """``hidden = width`` (the dense recurrent layer shared by the 4 layers)."""
        return {"hidden": width_multiple(width, 1)}

    R: Array
    I: Array
    L: Array

    def __init__(self, input_size: int, *, n_features: int = 9, n_layers: int = 4, hidden: int = 450,
                 activation: Literal["none", "relu", "tanh"] = "none", key: PRNGKeyArray):
        require_positive("hidden", hidden)
        k_r, k_i, k_l, k_in = jax.random.split(key, 4)
        self._init_stack(input_size, n_features, n_layers, activation, hidden, k_in)
        self.R = _uniform(k_r, (hidden, hidden), hidden)
        self.I = _uniform(k_i, (hidden, n_features), n_features)
        self.L = _uniform(k_l, (n_features, hidden), hidden)

    def layer_state_shape(self):
        return (self.hidden,)

    def layer_step(self, h, u, drive, hold=False):
        return _plus(self.R @ h + self.I @ u, drive)

    def layer_features(self, h):
        return self.L @ h

    def layer_hidden_sequence(self, u, drive=None):
        return _dense_scan(self.R, _add_drive(u @ self.I.T, drive))

    def layer_features_sequence(self, u, drive, hold=False):
        return self.layer_hidden_sequence(u, drive) @ self.L.T

    def readout_when(self, h):
        return h @ self.L.T

    def recurrent_matrices(self):
        return {"R": self.R}


@register("unit", "rnn-blockdiag", "Net 2: block-diagonal What x When RNN, dense trainable blocks, conv + max over tau")
class BlockDiagonalRNN(LayerStack):
    r"""Net 2: $h \in \mathbb{R}^{n_f\times n_\tau}$, $h_t = h_{t-1} R_\text{when}^\top + o \otimes I_\text{when} + \xi$,
    read-out $h L_\text{when}^\top$, then the shared convolution and max over τ. Dense trainable
    $R_\text{when}, L_\text{when} \in \mathbb{R}^{n_\tau\times n_\tau}$, $I_\text{when}\in\mathbb{R}^{n_\tau}$, $g$.
    """

    R_when: Array
    I_when: Array
    L_when: Array
    n_taus: int = eqx.field(static=True)

    def __init__(self, input_size: int, *, n_features: int = 9, n_layers: int = 4, n_taus: int = 50,
                 activation: Literal["none", "relu", "tanh"] = "none", key: PRNGKeyArray):
        require_positive("n_taus", n_taus)
        k_r, k_i, k_l, k_g, k_in = jax.random.split(key, 5)
        self._init_stack(input_size, n_features, n_layers, activation, n_features * n_taus, k_in)
        self.n_taus = n_taus
        self.R_when = _uniform(k_r, (n_taus, n_taus), n_taus)
        self.I_when = _uniform(k_i, (n_taus,), 1)
        self.L_when = _uniform(k_l, (n_taus, n_taus), n_taus)
        self.g = _uniform(k_g, (n_features, n_features), n_features)

    def layer_state_shape(self):
        return (self.n_features, self.n_taus)

    def layer_step(self, h, u, drive, hold=False):
        return _plus(h @ self.R_when.T + u[:, None] * self.I_when, drive)

    def layer_features(self, h):
        return h @ self.L_when.T

    def readout_when(self, h):
        return h @ self.L_when.T

    def layer_hidden_sequence(self, u, drive=None):
        return _dense_scan(self.R_when, _add_drive(u[..., None] * self.I_when, drive))

    def layer_features_sequence(self, u, drive, hold=False):
        return self.layer_hidden_sequence(u, drive) @ self.L_when.T

    def recurrent_matrices(self):
        return {"R_when": self.R_when}


def linear_taus(tau_min, tau_max, n):
    return np.linspace(float(tau_min), float(tau_max), n)


class DiagonalRNN(LayerStack, TauExtensible):
    r"""Nets 3–5: a bank of leaky integrators per feature, $h_{t} = e^{-1/\tau} \odot h_{t-1} + I_\text{when} o_t + \xi$.

    The decays come from the static τ grid (``spacing``), or from a trainable ``log_tau`` when
    ``train_decays``; the read-out is dense (``readout="dense"``) or the zero-sum Toeplitz motif
    (``readout="toeplitz"``).
    """

    L_when: Array | None
    motif: Array | None
    log_tau: Array | None
    n_taus: int = eqx.field(static=True)
    tau_min: float = eqx.field(static=True)
    tau_max: float = eqx.field(static=True)
    spacing: str = eqx.field(static=True)
    input_weight: str = eqx.field(static=True)

    def _init_diag(self, input_size, n_features, n_layers, n_taus, tau_min, tau_max, spacing, readout,
                   motif_width, input_weight, train_decays, activation, hidden_input, key):

        check_taus(tau_min, tau_max, n_taus)
        if input_weight not in ("ones", "decay", "rate"):
            raise ConfigError(f"input_weight must be 'ones', 'decay' or 'rate', got {input_weight!r}")
        k_l, k_g, k_in = jax.random.split(key, 3)
        self._init_stack(input_size, n_features, n_layers, activation, n_features * n_taus, k_in, hidden_input)
        self.n_taus, self.tau_min, self.tau_max = n_taus, float(tau_min), float(tau_max)
        self.spacing, self.input_weight = spacing, input_weight
        self.log_tau = jnp.log(jnp.asarray(self._grid(), jnp.float32)) if train_decays else None
        if readout == "toeplitz":
            require_positive("motif_width", motif_width)
            if motif_width % 2 == 0:
                raise ConfigError(f"motif_width must be odd (a motif centred on the diagonal), got {motif_width}")
            self.motif, self.L_when = _uniform(k_l, (motif_width,), motif_width), None
        else:
            self.motif, self.L_when = None, _uniform(k_l, (n_taus, n_taus), n_taus)
        self.g = _uniform(k_g, (n_features, n_features), n_features)

    def _grid(self):

        if self.spacing == "geometric":
            return tau_grid(self.tau_min, self.tau_max, self.n_taus)
        return linear_taus(self.tau_min, self.tau_max, self.n_taus)

    @property
    def taus(self):
        return np.exp(np.asarray(self.log_tau, np.float64)) if self.log_tau is not None else self._grid()

    def decays(self, dtype=jnp.float32) -> Array:
        r"""$e^{-1/\tau_i}$: from the static grid (fixed by design) or from the trainable ``log_tau``."""
        if self.log_tau is not None:
            return jnp.exp(-jnp.exp(-self.log_tau)).astype(dtype)
        return jnp.asarray(np.exp(-1.0 / self._grid()), dtype)

    def input_gains(self, dtype=jnp.float32, hold: bool = False) -> Array:
        r"""$I_\text{when}$ (``input_weight``) for pulses; ``hold``: times $\int_0^1 e^{-u/\tau} du = \tau(1 - e^{-1/\tau})$."""
        a = self.decays(dtype)
        gains = {"ones": jnp.ones_like(a), "rate": 1.0 - a, "decay": a}[self.input_weight]
        return gains * (1.0 - a) / -jnp.log(a) if hold else gains  # tau = -1 / log(a)

    def readout_matrix(self) -> Array:
        """$L_\\text{when}$ ``[n_tau, n_tau]`` (for the Toeplitz read-out: built from the zero-sum motif)."""
        if self.L_when is not None:
            return self.L_when
        m = self.motif - jnp.mean(self.motif)
        c = self.motif.shape[0] // 2
        i = np.arange(self.n_taus)
        off = i[None, :] - i[:, None] + c  # L[i, j] = m[j - i + c]
        valid = (off >= 0) & (off < self.motif.shape[0])
        return jnp.where(valid, m[np.clip(off, 0, self.motif.shape[0] - 1)], 0.0)

    def layer_state_shape(self):
        return (self.n_features, self.n_taus)

    def layer_step(self, h, u, drive, hold=False):
        return _plus(self.decays(h.dtype) * h + u[:, None] * self.input_gains(h.dtype, hold), drive)

    def apply_readout(self, h):
        """$h L_\\text{when}^\\top$ over the last axis (the Toeplitz motif as a 1-D correlation)."""
        if self.motif is None:
            return h @ self.L_when.T
        m = self.motif - jnp.mean(self.motif)
        w, c = m.shape[0], m.shape[0] // 2
        hp = jnp.pad(h, [(0, 0)] * (h.ndim - 1) + [(c, c)])
        n = h.shape[-1]
        return sum(m[j] * hp[..., j : j + n] for j in range(w))

    def layer_features(self, h):
        return self.apply_readout(h)

    def readout_when(self, h):
        return self.apply_readout(h)

    def layer_hidden_sequence(self, u, drive=None, hold=False):

        return diagonal_scan(self.decays(u.dtype), _add_drive(u[..., None] * self.input_gains(u.dtype, hold), drive))

    def layer_features_sequence(self, u, drive, hold=False):
        return self.layer_hidden_sequence(u, drive, hold) @ self.readout_matrix().T  # one GEMM beats 7 shifted passes here

    def recurrent_matrices(self):
        return {"R_when": self.decays()}

    @property
    def tau_extensible(self) -> bool:
        """Only a Toeplitz read-out over a fixed geometric τ grid (SITH-RNN) can be rescaled."""
        return self.motif is not None and self.log_tau is None and self.spacing == "geometric"

    def extend_taus(self, factor: float, how: str = "extend"):
        """The same network with the geometric τ grid extended (or, ``how="shift"``, scaled; see
        [`dynlab.units.sith.SITH.shift`][]) by ``factor`` (Toeplitz read-out only)."""
        if not self.tau_extensible:
            raise ConfigError("only a Toeplitz read-out over a fixed geometric tau grid (sith-rnn) can be extended")

        new = SITH(self.tau_min, self.tau_max, self.n_taus, 1).rescaled(factor, how)
        out = copy.copy(self)
        for name, v in (("n_taus", new.n_taus), ("tau_min", new.tau_min), ("tau_max", new.tau_max),
                        ("hidden", self.n_features * new.n_taus)):
            object.__setattr__(out, name, v)
        return out

    def param_count(self):
        counts = super().param_count()
        for name in ("L_when", "motif", "log_tau"):
            v = getattr(self, name)
            if v is not None:
                counts[name] = int(v.size)
        if self.motif is not None:
            counts["motif_free"] = int(self.motif.size) - 1  # zero-sum constraint
        return counts


_DIAG_DOC = """
    Args (beyond the shared ones): ``n_taus`` (50), ``tau_min`` (1), ``tau_max`` (81),
    ``input_weight`` (``"ones"`` | ``"decay"`` | ``"rate"``), ``train_decays`` (False), ``hidden_input``
    (``"hold"`` | ``"pulse"``; module doc).
"""


@register("unit", "rnn-diag-uniform", "Net 3: diagonal leaky integrators, linearly spaced tau, dense read-out, conv + max")
class DiagonalUniformRNN(DiagonalRNN):
    __doc__ = "Net 3: fixed diagonal $R_\\text{when}$ with linearly spaced τ; dense trainable $L_\\text{when}$." + _DIAG_DOC

    def __init__(self, input_size: int, *, n_features: int = 9, n_layers: int = 4, n_taus: int = 50,
                 tau_min: float = 1.0, tau_max: float = 81.0, input_weight: Literal["ones", "decay", "rate"] = "ones",
                 train_decays: bool = False, activation: Literal["none", "relu", "tanh"] = "none",
                 hidden_input: Literal["hold", "pulse"] = "hold", key: PRNGKeyArray):
        self._init_diag(input_size, n_features, n_layers, n_taus, tau_min, tau_max, "linear", "dense", 1,
                        input_weight, train_decays, activation, hidden_input, key)


@register("unit", "rnn-diag-geometric", "Net 4: diagonal leaky integrators, geometric tau, dense read-out, conv + max")
class DiagonalGeometricRNN(DiagonalRNN):
    __doc__ = "Net 4: fixed diagonal $R_\\text{when}$ with geometric τ; dense trainable $L_\\text{when}$." + _DIAG_DOC

    def __init__(self, input_size: int, *, n_features: int = 9, n_layers: int = 4, n_taus: int = 50,
                 tau_min: float = 1.0, tau_max: float = 81.0, input_weight: Literal["ones", "decay", "rate"] = "ones",
                 train_decays: bool = False, activation: Literal["none", "relu", "tanh"] = "none",
                 hidden_input: Literal["hold", "pulse"] = "hold", key: PRNGKeyArray):
        self._init_diag(input_size, n_features, n_layers, n_taus, tau_min, tau_max, "geometric", "dense", 1,
                        input_weight, train_decays, activation, hidden_input, key)


@register("unit", "sith-rnn", "Net 5 SITH-RNN: frozen geometric decays, zero-sum Toeplitz read-out motif, conv + max")
class SITHRNN(DiagonalRNN):
    __doc__ = ("Net 5, SITH-RNN: frozen geometric decays; $L_\\text{when}$ banded Toeplitz from one zero-sum "
               "motif of width ``motif_width`` (7), shared by all layers. Trainable: motif + $g$ (7 + 81). "
               "The τ grid can be extended at evaluation time ([`extend_taus`][])." + _DIAG_DOC)

    def __init__(self, input_size: int, *, n_features: int = 9, n_layers: int = 4, n_taus: int = 50,
                 tau_min: float = 1.0, tau_max: float = 81.0, motif_width: int = 7,
                 input_weight: Literal["ones", "decay", "rate"] = "ones", activation: Literal["none", "relu", "tanh"] = "none",
                 hidden_input: Literal["hold", "pulse"] = "hold", key: PRNGKeyArray):
        self._init_diag(input_size, n_features, n_layers, n_taus, tau_min, tau_max, "geometric", "toeplitz",
                        motif_width, input_weight, False, activation, hidden_input, key)
