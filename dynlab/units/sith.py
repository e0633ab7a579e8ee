r"""SITH: a scale-invariant temporal history (Laplace memory + Post inverse), and SITHCon.

Background (Shankar & Howard 2012; Sarkar & Howard, notes §1). Each input feature $f(t)$ drives a
bank of leaky integrators, the real Laplace transform of the past,

$$ \frac{\partial F(s,t)}{\partial t} = -s F(s,t) + f(t), \qquad
   F(s,t) = \int_{-\infty}^{t} e^{-s (t-t')} f(t')\,dt', $$

and the Post approximation of order $k$ inverts it on a grid of "time cells" $\tau^*$:

$$ \tilde f(\tau^*, t) = \frac{(-1)^k}{k!}\, s^{k+1} \frac{\partial^k F}{\partial s^k}\Big|_{s = k/\tau^*}
   = \int_0^\infty \underbrace{\frac{1}{\tau^*}\frac{k^{k+1}}{k!}\Big(\frac{u}{\tau^*}\Big)^k
     e^{-k u/\tau^*}}_{\text{Post filter } \Phi_{\tau^*}(u)} f(t-u)\,du , $$

a log-time filter that peaks at lag $u = \tau^*$ with unit area. The $\tau^*$ are geometric,
$\tau^*_i = \tau_{\min}(1+c)^i$, $c = (\tau_{\max}/\tau_{\min})^{1/(n-1)} - 1$, so rescaling the input
in time, $f(t) \to f(t/a)$ with $a = (1+c)^m$, translates the memory by $m$ along the index $i$:
$\tilde f_{i+m}(a t) = \tilde f_i(t)$ (for pulse trains, $\tilde f_{i+m}(at) = \tilde f_i(t)/a$).

Time is discrete (dt = 1 step, inputs are values at step onsets, lag $u = 0, 1, \dots$). Three
evaluations of the same memory are provided ([`SITH`][], parameter ``method``):

* ``"cascade"`` (default): the *exact* recurrence. Differentiating the Laplace recurrence
  $F_t = e^{-s}F_{t-1} + f_t$ with respect to $s$ gives a closed upper-triangular recurrence for
  the normalised derivatives $P_j(t) = \frac{s^{j+1}}{j!}\sum_{u\ge0} u^j e^{-su} f_{t-u}$
  ($P_k = \tilde f$):

  $$ P_j(t) = e^{-s} \sum_{m=0}^{j} \frac{s^{j-m}}{(j-m)!} P_m(t-1) + \delta_{j0}\, s f_t , $$

  (binomial expansion of $u^j = ((u-1)+1)^j$). All coefficients are positive, so there is no
  cancellation at $k = 15$; the impulse response is the Post filter sampled at integer lags.
* ``"fd"``: the classic SITH recurrence: Laplace integrators on a geometric $s$ grid
  ($s = k/\tau^*$, extended by ``fd_pad`` nodes on each side), and $\partial^k_s F$ by finite
  differences over $s$ (Fornberg weights on the $k+1$ nearest nodes). It is an approximation:
  on the default grid (50 $\tau^*$ in [1, 81]) each cell's filter deviates from its Post filter
  by at most 0.8–1.2% of the filter's peak at $k = 4$ and 3.4–6.4% at $k = 8$, but at $k = 15$ by
  40–191% of the peak (median 89%; lags 0–399, measured against ``"cascade"``): high-order
  differences of nearly equal exponentials, which a denser grid makes worse through float64
  cancellation. At $k = 15$ the ``"fd"`` filters are not Post filters. Use it for small $k$.
* the causal filter bank ([`SITH.sequence`][] with ``method="cascade"``): FFT convolution with
  the closed-form $\Phi_{\tau^*}(u)$ over the whole sequence, the fast path for long (dilated)
  inputs. It equals the cascade to float rounding (tested), with no truncation of the filters
  (the reference code truncates at 3 τ_max).

**Held inputs** (``hold=True`` in [`SITH.step`][], [`SITH.sequence`][], [`SITH.kernels`][]):
the above is exact for pulses at the step onsets (layer 1's one-hot symbols). A signal of
continuous time known only at the steps (a deeper layer's input) is better taken as constant
over each step $(t-1, t]$; the exact memory of such an input has the Post filter integrated over
each step as its discrete kernel,
$K_n = \int_n^{n+1}\Phi_{\tau^*}(u)\,du = P(k+1, s(n+1)) - P(k+1, s n)$ ($P$ = regularised lower
incomplete gamma function; $\Phi$ is the Erlang density of shape $k+1$ and rate $s$). In the
cascade only the input vector changes: a unit input held over one step leaves
$P_j = \frac{s^{j+1}}{j!}\int_0^1 u^j e^{-su} du = P(j+1, s)$ instead of $s\,\delta_{j0}$; the
transition matrix is the exact one-step propagation either way. For ``"fd"`` the Laplace
integrators' input gain becomes $(1 - e^{-s})/s$.

The $\tau^*$ range can be extended at evaluation time ([`SITH.extend`][]): same ratio, more
cells at the slow end, the first ``n_taus`` unchanged. SITHCon's weights are shared over τ
(width-1 convolution, max over τ), so an extended SITHCon is the same trained network.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.units.base import TauExtensible
from dynlab.units.stack import LayerStack, check_layers


def tau_grid(tau_min: float, tau_max: float, n_taus: int) -> np.ndarray:
    r"""Geometric $\tau^*_i = \tau_{\min}(\tau_{\max}/\tau_{\min})^{i/(n-1)}$, $i = 0..n-1$ (float64)."""
    if n_taus == 1:
        return np.array([float(tau_min)])
    return float(tau_min) * (float(tau_max) / float(tau_min)) ** (np.arange(n_taus) / (n_taus - 1))


def check_taus(tau_min, tau_max, n_taus) -> None:
    require_positive("tau_min", tau_min, integer=False)
    require_positive("tau_max", tau_max, integer=False)
    require_positive("n_taus", n_taus)
    if tau_max < tau_min:
        raise ConfigError(f"tau_max must be >= tau_min = {tau_min}, got {tau_max}")
    if n_taus == 1 and tau_max != tau_min:
        raise ConfigError(f"n_taus = 1 needs tau_max == tau_min; use n_taus >= 2 for the range [{tau_min}, {tau_max}]")


def post_kernel(tau_star, k: int, lags, order: int | None = None) -> np.ndarray:
    r"""Closed-form Post filters $\Phi_{\tau^*}(u) = \frac{1}{\tau^*}\frac{k^{k+1}}{k!}(u/\tau^*)^k e^{-ku/\tau^*}$.

    ``tau_star[n]``, ``lags[L]`` -> ``[n, L]`` (float64; evaluated in log space, no overflow).
    With ``order`` $n \ne k$: the unit-area filter $\frac{s^{n+1}}{n!} u^n e^{-su}$ at the same rate
    $s = k/\tau^*$ (the Erlang density of shape $n+1$; its peak moves to $n\tau^*/k$).
    """
    n = k if order is None else order
    tau = np.asarray(tau_star, np.float64)[:, None]
    u = np.asarray(lags, np.float64)[None, :]
    with np.errstate(divide="ignore"):
        log = (n + 1) * np.log(k) - math.lgamma(n + 1) - np.log(tau) + n * np.log(u / tau) - k * u / tau
    return np.where(u > 0, np.exp(log), 1.0 if n == 0 else 0.0) * np.ones_like(tau)


def fornberg_weights(z: float, x: np.ndarray, m: int) -> np.ndarray:
    """Weights of the ``m``-th derivative at ``z`` from values at nodes ``x`` (Fornberg 1988)."""
    n = len(x) - 1
    c = np.zeros((n + 1, m + 1))
    c1, c4 = 1.0, x[0] - z
    c[0, 0] = 1.0
    for i in range(1, n + 1):
        mn, c2, c5, c4 = min(i, m), 1.0, c4, x[i] - z
        for j in range(i):
            c3 = x[i] - x[j]
            c2 *= c3
            if j == i - 1:
                for kk in range(mn, 0, -1):
                    c[i, kk] = c1 * (kk * c[i - 1, kk - 1] - c5 * c[i - 1, kk]) / c2
                c[i, 0] = -c1 * c5 * c[i - 1, 0] / c2
            for kk in range(mn, 0, -1):
                c[j, kk] = (c4 * c[j, kk] - kk * c[j, kk - 1]) / c3
            c[j, 0] = c4 * c[j, 0] / c3
        c1 = c2
    return c[:, m]


@functools.lru_cache(maxsize=64)
def _fd_operator(tau_min, tau_max, n_taus, k, pad):
    """(s grid [n + 2 pad], Post weights [n, n + 2 pad]) of the finite-difference inverse."""
    ratio = (tau_max / tau_min) ** (1.0 / (n_taus - 1)) if n_taus > 1 else 1.1
    taus = tau_min * ratio ** np.arange(-pad, n_taus + pad)
    s = k / taus
    W = np.zeros((n_taus, len(s)))
    for i in range(n_taus):
        c = i + pad
        lo = min(max(0, c - k // 2), len(s) - (k + 1))
        w = fornberg_weights(s[c], s[lo : lo + k + 1], k)
        W[i, lo : lo + k + 1] = (-1) ** k / math.factorial(k) * s[c] ** (k + 1) * w
    return s, W


@functools.lru_cache(maxsize=64)
def _cascade_matrices(tau_min, tau_max, n_taus, k, order):
    """Per-τ recurrence matrices ``A[n, order+1, order+1]`` and input gains ``s[n]`` of the exact
    cascade (rate $s = k/\\tau^*$)."""
    s = k / tau_grid(tau_min, tau_max, n_taus)
    j = np.arange(order + 1)
    d = j[:, None] - j[None, :]
    logfac = np.array([math.lgamma(x + 1) for x in np.clip(d, 0, None).ravel()]).reshape(d.shape)
    with np.errstate(divide="ignore"):
        log = np.clip(d, 0, None)[None] * np.log(s)[:, None, None] - logfac[None] - s[:, None, None]
    A = np.where(d[None] >= 0, np.exp(log), 0.0)
    return A, s


def _held_input(s: np.ndarray, k: int) -> np.ndarray:
    r"""Cascade state ``[n, k+1]`` after a unit input held over one step: $P_j = P(j+1, s)$."""
    from scipy.special import gammainc  # here, not at import: scipy.special costs ~0.2 s of every start

    return gammainc(np.arange(k + 1)[None, :] + 1.0, np.asarray(s, np.float64)[:, None])


def causal_fft_conv(u: Array, kernel: Array) -> Array:
    """``y[t] = sum_{v=0}^{t} kernel[v] u[t - v]`` along axis 0 of ``u[T, ...]`` (``kernel[T]``)."""
    T = u.shape[0]
    n = 1 << (2 * T - 1).bit_length()
    U = jnp.fft.rfft(u, n=n, axis=0)
    K = jnp.fft.rfft(kernel, n=n).reshape((-1,) + (1,) * (u.ndim - 1))
    return jnp.fft.irfft(U * K, n=n, axis=0)[:T].astype(u.dtype)


def diagonal_scan(a: Array, b: Array, chunk: int | None = None) -> Array:
    r"""$h_t = a \odot h_{t-1} + b_t$ from $h_{-1} = 0$ along axis 0 (``a`` broadcasts to ``b[0]``).

    Short inputs ($T \le 4096$, no ``chunk``): one ``lax.associative_scan``. Long inputs are cut
    into $n$ chunks of $C \approx \sqrt{T}$ steps: a ``lax.scan`` over the $C$ steps of all chunks
    at once (zero initial state), a ``lax.associative_scan`` over the $n$ chunk-end states
    (element $(a^C, \text{end}_j)$), and one correction $h_{jC+i} \mathrel{+}= a^{i+1} h_{jC-1}$:
    about three passes over the ``[T, ...]`` array instead of $2\log_2 T$.
    """

    def combine(x, y):
        return y[0] * x[0], y[0] * x[1] + y[1]

    T = b.shape[0]
    if chunk is None:
        chunk = 0 if T <= 4096 else int(2 ** round(math.log2(math.sqrt(T))))
    if not chunk or chunk >= T:
        return jax.lax.associative_scan(combine, (jnp.broadcast_to(a, b.shape), b), axis=0)[1]
    n = -(-T // chunk)
    rest = b.shape[1:]
    bp = jnp.concatenate([b, jnp.zeros((n * chunk - T,) + rest, b.dtype)]).reshape((n, chunk) + rest)
    a = jnp.broadcast_to(a, rest)

    def inner(h, bt):
        h = a * h + bt
        return h, h

    local = jnp.moveaxis(jax.lax.scan(inner, jnp.zeros((n,) + rest, b.dtype), jnp.moveaxis(bp, 1, 0))[1], 0, 1)
    powers = jnp.exp(jnp.arange(1, chunk + 1, dtype=b.dtype).reshape((chunk,) + (1,) * len(rest)) * jnp.log(a))
    ends = jax.lax.associative_scan(combine, (jnp.broadcast_to(powers[-1], (n,) + rest), local[:, -1]), axis=0)[1]
    prev = jnp.concatenate([jnp.zeros((1,) + rest, b.dtype), ends[:-1]])
    h = local + powers[None] * prev[:, None]
    return h.reshape((n * chunk,) + rest)[:T]


class SITH(eqx.Module):
    """A SITH memory (no trainable parameters; everything is derived from the static config).

    Args:
        tau_min, tau_max, n_taus: the geometric grid of time cells τ* (steps).
        k: Post order (temporal acuity); the filters' relative width is about $1/\\sqrt{k}$.
        method: ``"cascade"`` (exact recurrence, default) or ``"fd"`` (finite differences over s).
        fd_pad: extra s nodes on each side of the grid for ``"fd"`` (default ``(k + 1) // 2``,
            centred stencils everywhere); the stencil needs ``n_taus + 2 fd_pad >= k + 1``.
        filter_order: the power $n$ of the filter $\\frac{s^{n+1}}{n!}u^n e^{-su}$ at rate $s = k/\\tau^*$
            (default ``k``: the Post filter, peak at τ*). The public SITHCon code uses ``k + 1``
            (unit area after its ``k/(k+1)`` scaling, peak at $\\tau^*(k+1)/k$). ``"cascade"`` only.
        lag_offset: the output at step $t$ is $\\sum_{u \\ge 0}\\Phi(u + \\text{lag\\_offset}) f_{t-u}$ (default 0;
            the public code's convolution gives 1: its output at $t$ is the textbook one at $t+1$).
            ``"cascade"`` only.

    The public code's memory is ``SITH(..., filter_order=k + 1, lag_offset=1)`` with every layer's
    input taken as pulses ([`public_code`][]); its impulse response at τ* = 81, k = 15 peaks at
    step 85, the paper's at 81 (tested).
    """

    tau_min: float = eqx.field(static=True)
    tau_max: float = eqx.field(static=True)
    n_taus: int = eqx.field(static=True)
    k: int = eqx.field(static=True)
    method: str = eqx.field(static=True)
    fd_pad: int = eqx.field(static=True)
    filter_order: int = eqx.field(static=True)
    lag_offset: int = eqx.field(static=True)

    def __init__(self, tau_min=1.0, tau_max=81.0, n_taus=50, k=15, method="cascade", fd_pad=None, filter_order=None,
                 lag_offset=0):
        check_taus(tau_min, tau_max, n_taus)
        require_positive("k", k)
        if method not in ("cascade", "fd"):
            raise ConfigError(f"method must be 'cascade' or 'fd', got {method!r}")
        order = k if filter_order is None else filter_order
        if isinstance(order, bool) or not isinstance(order, int) or order < 0:
            raise ConfigError(f"filter_order must be a non-negative integer (default: k), got {filter_order!r}")
        if isinstance(lag_offset, bool) or lag_offset not in (0, 1):
            raise ConfigError(f"lag_offset must be 0 (the paper) or 1 (the public code), got {lag_offset!r}")
        if method == "fd" and (order != k or lag_offset):
            raise ConfigError("filter_order and lag_offset are options of method 'cascade'; method 'fd' computes "
                              "the Post filter of order k only")
        pad = (k + 1) // 2 if fd_pad is None else fd_pad
        if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
            raise ConfigError(f"fd_pad must be a non-negative integer, got {fd_pad!r}")
        if method == "fd" and n_taus + 2 * pad < k + 1:
            raise ConfigError(
                f"n_taus = {n_taus} is too small for Post order k = {k} with method 'fd': the finite-difference "
                f"stencil needs n_taus + 2*fd_pad >= k + 1 = {k + 1} (fd_pad = {pad})")
        self.tau_min, self.tau_max, self.n_taus = float(tau_min), float(tau_max), int(n_taus)
        self.k, self.method, self.fd_pad = int(k), method, int(pad)
        self.filter_order, self.lag_offset = int(order), int(lag_offset)

    @property
    def taus(self) -> np.ndarray:
        return tau_grid(self.tau_min, self.tau_max, self.n_taus)

    @property
    def ratio(self) -> float:
        return (self.tau_max / self.tau_min) ** (1.0 / (self.n_taus - 1)) if self.n_taus > 1 else 1.0

    def extend(self, factor: float) -> "SITH":
        """The same memory with τ_max extended by ``factor`` (>= 1) at the same spacing."""
        if not factor >= 1:
            raise ConfigError(f"the tau range can only be extended (factor >= 1), got {factor}")
        if self.n_taus == 1 or factor == 1:
            return self
        extra = math.ceil(math.log(factor) / math.log(self.ratio) - 1e-9)
        return SITH(self.tau_min, self.tau_min * self.ratio ** (self.n_taus - 1 + extra), self.n_taus + extra,
                    self.k, self.method, self.fd_pad, self.filter_order, self.lag_offset)

    def shift(self, factor: float) -> "SITH":
        """The same memory with every τ* multiplied by ``factor`` (> 0): same count, same spacing.

        For an input dilated by ``factor`` this is the window that sees what the original saw; an
        extended window ([`extend`][]) keeps the fast τ* too, which then see the dilated input's
        fine structure. Measured (sith-trw protocol: SITHCon, 200 steps at 3^0, task mode "pulse"):
        with ``hidden_input="hold"`` (default), 1.00 at every dilation 3^1..3^6 for 3 of 3 seeds
        with shifted windows, 0.11–0.67 with extended ones (seeds 0, 1); with ``"pulse"``,
        0.48–0.52 shifted and 0.15–0.30 extended (3 seeds).
        """
        if not factor > 0:
            raise ConfigError(f"the tau window can only be scaled by a positive factor, got {factor}")
        return self if factor == 1 else SITH(self.tau_min * factor, self.tau_max * factor, self.n_taus, self.k,
                                             self.method, self.fd_pad, self.filter_order, self.lag_offset)

    def rescaled(self, factor: float, how: str = "extend") -> "SITH":
        """[`extend`][] or [`shift`][] by ``factor``."""
        if how not in ("extend", "shift"):
            raise ConfigError(f"how must be 'extend' or 'shift', got {how!r}")
        return self.extend(factor) if how == "extend" else self.shift(factor)

    def _key(self):
        return (self.tau_min, self.tau_max, self.n_taus, self.k)

    def state_shape(self, n_features: int) -> tuple[int, ...]:
        if self.method == "cascade":
            return (n_features, self.n_taus, self.filter_order + 1)
        return (n_features, self.n_taus + 2 * self.fd_pad)

    def step(self, state: Array, f: Array, hold: bool = False) -> Array:
        """Advance by one step with input ``f[n_features]`` (a pulse, or ``hold``: held over the step)."""
        if self.method == "cascade":
            A, s = _cascade_matrices(*self._key(), self.filter_order)
            new = jnp.einsum("tjm,ftm->ftj", jnp.asarray(A, state.dtype), state)
            if hold:
                return new + jnp.asarray(_held_input(s, self.filter_order), state.dtype)[None] * f[:, None, None]
            return new.at[:, :, 0].add(jnp.asarray(s, state.dtype)[None, :] * f[:, None])
        s, _ = _fd_operator(*self._key(), self.fd_pad)
        gain = -np.expm1(-s) / s if hold else np.ones_like(s)
        return jnp.exp(-jnp.asarray(s, state.dtype))[None, :] * state + jnp.asarray(gain, state.dtype)[None, :] * f[:, None]

    def read(self, state: Array) -> Array:
        r"""The time cells $\tilde f$ ``[n_features, n_taus]`` of a state (with ``lag_offset = 1``: of
        the state propagated one more step, $\Phi$ read at lag $u + 1$)."""
        if self.method == "cascade":
            if self.lag_offset:
                A, _ = _cascade_matrices(*self._key(), self.filter_order)
                return jnp.einsum("tm,...tm->...t", jnp.asarray(A[:, -1], state.dtype), state)
            return state[..., self.filter_order]
        _, W = _fd_operator(*self._key(), self.fd_pad)
        return state @ jnp.asarray(W.T, state.dtype)

    def kernels(self, lags, hold: bool = False) -> np.ndarray:
        """The discrete kernels ``[n_taus, len(lags)]`` this method realises (float64): responses to
        a unit pulse, or (``hold``) to a unit input held over one step."""
        lags = np.asarray(lags, np.float64)
        if self.method == "cascade":
            lags, n = lags + self.lag_offset, self.filter_order
            if not hold:
                return post_kernel(self.taus, self.k, lags, n)
            from scipy.special import gammainc

            s = self.k / self.taus[:, None]
            return gammainc(n + 1, s * np.maximum(lags + 1, 0)) - gammainc(n + 1, s * np.maximum(lags, 0))
        s, W = _fd_operator(*self._key(), self.fd_pad)
        gain = -np.expm1(-s) / s if hold else np.ones_like(s)
        return W @ (gain[:, None] * np.exp(-np.outer(s, lags)))

    def sequence(self, f: Array, hold: bool = False) -> Array:
        """Time cells for a whole input ``f[T, n_features]`` -> ``[T, n_features, n_taus]``.

        ``"cascade"``: FFT convolution with the closed-form kernels ([`kernels`][]); ``"fd"``:
        Laplace by ``associative_scan`` then the finite-difference weights.
        """
        T = f.shape[0]
        if self.method == "cascade":
            K = jnp.asarray(self.kernels(np.arange(T), hold), f.dtype)  # [n, T]
            return jax.vmap(lambda kern: causal_fft_conv(f, kern), out_axes=-1)(K)
        s, W = _fd_operator(*self._key(), self.fd_pad)
        gain = jnp.asarray(-np.expm1(-s) / s if hold else np.ones_like(s), f.dtype)
        F = diagonal_scan(jnp.exp(-jnp.asarray(s, f.dtype)), f[:, :, None] * gain)
        return F @ jnp.asarray(W.T, f.dtype)


@register("unit", "sithcon", "SITHCon: SITH memory per feature, shared width-1 conv over tau, max over tau; 4 shared layers")
class SITHConCell(LayerStack, TauExtensible):
    r"""SITHCon (Jacques et al. 2022) in the form of Sarkar & Howard: ``n_layers`` layers, shared weights.

    Layer $l$ maps $o^{l-1}(t) \in \mathbb{R}^{n_f}$ to a SITH memory $M^l(t) \in \mathbb{R}^{n_f\times n_\tau}$
    (one Post memory per feature), mixes features with the width-1 convolution $g \in \mathbb{R}^{n_f \times n_f}$
    (the same at every τ), and takes the max over τ:

    $$ o^l_a(t) = \phi\Big(\max_i \sum_b g_{ab} M^l_{b,i}(t)\Big) $$

    with $\phi$ = ``activation`` (``"none"`` in the paper: the final ReLU was removed). $g$ is shared
    by all layers (81 parameters at $n_f = 9$); the memory has no trainable parameters (its
    geometric τ* and Post order are static config, so neither the optimiser nor weight decay can
    touch them — stronger than ``lax.stop_gradient`` on a stored array, which AdamW's decoupled
    weight decay would still shrink). Layers 2… take their input as held over each step
    (``hidden_input="hold"``, default; ``"pulse"`` treats it like layer 1's pulses; see the module
    doc and [`dynlab.units.continuum`][]). If ``input_size != n_features`` a trainable linear map
    ``w_in`` takes the input to the first layer's features (not in the paper, where both are 9).

    The public code's conventions (compmem/SITHCon, ``iSITH``) are values: ``filter_order``,
    ``lag_offset`` ([`SITH`][]) and ``hidden_input = "pulse"``; [`public_code`][] gives them
    (``--set model.filter_order=16 --set model.lag_offset=1 --set model.hidden_input=pulse`` at k = 15).

    State: every layer's memory state, one array ``[layers, n_f, n_taus, filter_order+1]`` (cascade) or
    ``[layers, n_f, n_taus + 2 fd_pad]`` (fd). ``drive`` is added to each layer's memory input.
    Per-layer outputs: [`layer_outputs`][dynlab.units.stack.LayerStack.layer_outputs] (from a state) and
    [`sequence`][dynlab.units.stack.LayerStack.sequence] (fast path).
    """

    sith: SITH

    def __init__(
        self,
        input_size: int,
        *,
        n_features: int = 9,
        n_layers: int = 4,
        n_taus: int = 50,
        tau_min: float = 1.0,
        tau_max: float = 81.0,
        k: int = 15,
        method: Literal["cascade", "fd"] = "cascade",
        fd_pad: int | None = None,
        activation: Literal["none", "relu", "tanh"] = "none",
        hidden_input: Literal["hold", "pulse"] = "hold",
        filter_order: int | None = None,
        lag_offset: int = 0,
        key: PRNGKeyArray,
    ):
        self.sith = SITH(tau_min, tau_max, n_taus, k, method, fd_pad, filter_order, lag_offset)
        k_g, k_in = jax.random.split(key)
        self._init_stack(input_size, n_features, n_layers, activation, n_features * n_taus, k_in, hidden_input)
        self.g = jax.random.uniform(k_g, (n_features, n_features), minval=-1, maxval=1) / math.sqrt(n_features)

    def layer_state_shape(self):
        return self.sith.state_shape(self.n_features)

    def layer_step(self, h, u, drive, hold=False):
        return self.sith.step(h, u if drive is None else u + drive, hold)

    def layer_features(self, h):
        return self.sith.read(h)

    def layer_features_sequence(self, u, drive, hold=False):
        return self.sith.sequence(u if drive is None else u + (drive if drive.ndim == 2 else drive[:, None]), hold)

    def layer_hidden_sequence(self, u, drive=None, hold=False):
        return self.layer_features_sequence(u, drive, hold)

    def readout_when(self, h):
        return h  # SITHCon's time cells are read directly (no L)

    def extend_taus(self, factor: float, how: str = "extend") -> "SITHConCell":
        """The same network with its τ* range extended (or, ``how="shift"``, scaled; [`SITH.shift`][])
        by ``factor`` (for dilated inputs)."""
        new = self.sith.rescaled(factor, how)
        out = self.with_hidden(self.n_features * new.n_taus)
        object.__setattr__(out, "sith", new)
        return out

    @property
    def taus(self) -> np.ndarray:
        return self.sith.taus


def public_code(k: int) -> dict:
    """The public SITHCon code's conventions at Post order ``k`` as [`SITHConCell`][] keys: the filter
    of order ``k + 1`` at rate ``k/τ*``, read one lag ahead, every layer's input taken as pulses."""
    return {"filter_order": k + 1, "lag_offset": 1, "hidden_input": "pulse"}


__all__ = ["SITH", "public_code", "SITHConCell", "tau_grid", "post_kernel", "causal_fft_conv", "diagonal_scan", "check_layers"]
