r"""Fractional-order differentiation and integration, and the order that best explains a response.

Geadah et al. (ARU paper, §2.3, Methods §5.4, Eqs. 15–16; notes §3). The fractional derivative of
order $\alpha \in \mathbb{R}$ is the Fourier multiplier

$$ D^\alpha g = \mathcal{F}^{-1}\!\left[H_\alpha(f)\, \mathcal{F}[g]\right], \qquad
   H_\alpha(f) = (2 i \pi f)^\alpha
   = (2\pi |f|)^\alpha\, e^{\,i \pi \alpha\, \mathrm{sign}(f) / 2} $$

(principal branch, so $H_\alpha(-f) = \overline{H_\alpha(f)}$ and real signals stay real):
$\alpha = 1$ is the derivative, $\alpha = -1$ the integral, and
$D^\alpha D^\beta = D^{\alpha+\beta}$. As in the paper it is computed with the discrete Fourier
transform (``numpy.fft``), frequencies in cycles per step (``dt`` = 1).

The order of a response $r$ to a stimulus $s$ (Eq. 16) is

$$ \hat\alpha = \arg\min_{\alpha \in [-1, 1]} \lVert D^{-\alpha} r - s \rVert_2^2 $$

on a grid of $\alpha$. With this (the equations') sign convention $\alpha > 0$ means that the
response is a fractional *derivative* of the stimulus (an adapting neuron) and $\alpha < 0$ a
fractional integral (a sensitising one). The paper's prose calls $\alpha > 0$ "integration"; that
contradicts its own Eqs. 15–16 and its statement "$\alpha = 1$ is the derivative" (notes §3,
[inconsistency]); we follow the equations.

Three choices the paper leaves open (each a parameter, defaults measured on closed-form truths in
``tests/test_fractional.py``):

* **DC bin** ($f = 0$): $H_\alpha(0) = 0^\alpha$ is $0$ for $\alpha > 0$ but infinite for
  $\alpha < 0$ (the integral of a constant grows without bound). We set $H_\alpha(0) = 0$ for every
  $\alpha \ne 0$ ($H_0 = 1$), i.e. $D^\alpha$ acts on the fluctuations about the mean, so
  $D^{-\alpha} D^{\alpha} g = g - \bar g$. The fit compares mean-free signals, so the mean of a
  response (a neuron's baseline rate) never enters $\hat\alpha$.
* **Boundary** (``extension``): the DFT treats a window as one period of a periodic signal. A
  response that has not returned to its starting value at the end of the window (an integrator
  after the stimulus ends) then has a jump at the wrap-around, whose fractional derivative swamps
  the fit. ``"even"`` (default) applies the operator to the even extension $[g, \text{reversed}(g)]$
  (length $2T$, continuous at both ends) and keeps the first $T$ samples; ``"periodic"`` is the
  plain DFT of the window, as in the paper. On responses $r = D^\alpha$(step) built from the
  closed-form Riemann–Liouville derivative of a pulse, ``"even"`` recovers $\alpha$ within 0.03 over
  $[-1, 1]$ whereas ``"periodic"`` misses integrating orders $\alpha \le -0.5$ by more than 0.05
  (and $\alpha = -1$ entirely).
* **Units** (``gain``): a neuron's activity and the drive have different units, so by default the
  de-filtered response is compared up to the best scale factor $c$,
  $E(\alpha) = \min_c \lVert c\, D^{-\alpha}\tilde r - \tilde s\rVert^2 / \lVert\tilde s\rVert^2$
  (tildes: mean removed), i.e. one minus the squared correlation of the two signals. ``gain=False``
  gives the plain $\lVert D^{-\alpha}\tilde r - \tilde s\rVert^2 / \lVert\tilde s\rVert^2$.

The registered analysis ``fractional-order`` ([`fractional_order_analysis`][]) applies the fit to
every neuron of a model driven by a step (Fig. 4b-d).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from dynlab.analyses.aru.frozen_map import number_grid
from dynlab.analyses.aru.plotting import drive_colors, title
from dynlab.analyses.state_map import protocol_inputs, run_in, state_map
from dynlab.config import Count
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register

__all__ = [
    "ALPHAS", "fit_fractional_order", "fractional_derivative", "fractional_multiplier", "fractional_order_analysis",
]

Extension = Literal["even", "periodic"]

ALPHAS = np.round(np.linspace(-1.0, 1.0, 201), 10)
"""The default grid of orders: $[-1, 1]$ in steps of 0.01."""

_CHUNK_ELEMENTS = 2**22  # complex spectra held at once while scanning the grid of orders


def fractional_multiplier(freqs: ArrayLike, alpha: ArrayLike) -> np.ndarray:
    r"""$H_\alpha(f) = (2 i\pi f)^\alpha$ with $H_\alpha(0) = 0$ for $\alpha \ne 0$ and $H_0 = 1$.

    ``alpha`` may be an array; the result has shape ``alpha.shape + freqs.shape``.
    """
    f = np.asarray(freqs, dtype=float)
    a = np.asarray(alpha, dtype=float)[..., None] if np.ndim(alpha) else float(alpha)
    w = 2 * np.pi * np.abs(f)
    with np.errstate(divide="ignore", invalid="ignore"):
        mag = np.where(f == 0, 0.0, np.power(np.where(f == 0, 1.0, w), a))
    h = mag * np.exp(1j * np.pi * a * np.sign(f) / 2)
    return np.where((f == 0) & (np.asarray(a) == 0), 1.0 + 0j, h)


def _check_extension(extension: str) -> None:
    if extension not in ("even", "periodic"):
        raise ConfigError(f"extension must be 'even' or 'periodic', got {extension!r}")


def fractional_derivative(
    x: ArrayLike, alpha: ArrayLike, *, extension: Extension = "even", dt: float = 1.0
) -> np.ndarray:
    r"""$D^\alpha x$ along the last axis (time), computed in float64 with ``numpy.fft``.

    **Arguments:**

    - ``x``: signals ``[..., T]``.
    - ``alpha``: the order, a number or a 1-D array of orders ``[A]``.
    - ``extension``: ``"even"`` (operate on $[x, \text{reversed}(x)]$, keep the first $T$ samples)
      or ``"periodic"`` (the plain DFT of the window); see the module docstring.
    - ``dt``: the sampling step, so that frequencies are in cycles per unit time.

    **Returns:** ``[..., T]`` for a scalar ``alpha``, ``[A, ..., T]`` for an array of orders.
    The mean of ``x`` is removed for every $\alpha \ne 0$ (DC handling, module docstring).
    """
    _check_extension(extension)
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[-1] < 2:
        raise ConfigError(f"fractional_derivative needs signals [..., T] with T >= 2, got shape {x.shape}")
    if np.ndim(alpha) > 1:
        raise ConfigError("alpha must be a number or a 1-D array of orders")
    T = x.shape[-1]
    y = np.concatenate([x, x[..., ::-1]], axis=-1) if extension == "even" else x
    spectrum = np.fft.rfft(y, axis=-1)
    h = fractional_multiplier(np.fft.rfftfreq(y.shape[-1], d=dt), alpha)
    if np.ndim(alpha):
        h = h.reshape(h.shape[:1] + (1,) * (x.ndim - 1) + h.shape[1:])
    return np.fft.irfft(h * spectrum, n=y.shape[-1], axis=-1)[..., :T]


def fit_fractional_order(
    response: ArrayLike,
    stimulus: ArrayLike,
    *,
    alphas: ArrayLike = ALPHAS,
    extension: Extension = "even",
    gain: bool = True,
) -> xr.Dataset:
    r"""Grid-search fit of Eq. 16, $\hat\alpha = \arg\min_\alpha E(\alpha)$, for every response.

    **Arguments:**

    - ``response``: ``[T]`` or ``[M, T]``, one response per row (e.g. per neuron).
    - ``stimulus``: ``[T]``, the drive that caused them (e.g. a step).
    - ``alphas``: the grid of orders (default [`ALPHAS`][], $[-1, 1]$ by 0.01).
    - ``extension``, ``gain``: see the module docstring.

    **Returns:** an ``xr.Dataset`` with ``alpha_hat`` (``response``), the relative error at the
    minimum ``error_min`` (``response``; 0 is a perfect fit, 1 means no better than a constant), the
    error curve ``error`` (``response``, ``alpha``) and the best scale ``scale`` (``response``).
    A constant response (nothing to fit) gets ``alpha_hat`` NaN.
    """
    r = np.atleast_2d(np.asarray(response, dtype=float))
    s = np.asarray(stimulus, dtype=float)
    alphas = np.asarray(alphas, dtype=float)
    if r.ndim != 2 or s.ndim != 1 or r.shape[1] != s.shape[0]:
        raise ConfigError(
            f"response must be [T] or [M, T] and stimulus [T] with the same T; got {np.shape(response)} and {s.shape}"
        )
    if alphas.ndim != 1 or alphas.size == 0 or not np.all(np.isfinite(alphas)):
        raise ConfigError("alphas must be a non-empty 1-D array of finite orders")
    s0 = s - s.mean()
    s_energy = float(s0 @ s0)
    if s_energy == 0:
        raise ConfigError("the stimulus is constant: there is nothing to fit an order to")
    r = r - r.mean(axis=1, keepdims=True)
    errors = np.empty((r.shape[0], alphas.size))
    scales = np.empty_like(errors)
    per_order = r.size * (2 if extension == "even" else 1)
    for idx in np.array_split(np.arange(alphas.size), max(1, -(-alphas.size * per_order // _CHUNK_ELEMENTS))):
        z = fractional_derivative(r, -alphas[idx], extension=extension)  # [A, M, T]
        z = z - z.mean(axis=-1, keepdims=True)
        zz = np.einsum("amt,amt->am", z, z)
        zs = z @ s0
        c = np.where(zz > 0, zs / np.where(zz > 0, zz, 1), 0.0) if gain else np.ones_like(zz)
        err = (c**2 * zz - 2 * c * zs + s_energy) / s_energy
        errors[:, idx], scales[:, idx] = err.T, c.T
    best = np.argmin(errors, axis=1)
    constant = ~np.any(r != 0, axis=1)
    alpha_hat = np.where(constant, np.nan, alphas[best])
    rows = np.arange(r.shape[0])
    return xr.Dataset(
        {
            "alpha_hat": ("response", alpha_hat, {"long_name": "fitted fractional order (Eq. 16)"}),
            "error_min": ("response", errors[rows, best], {"long_name": "relative error at the fitted order"}),
            "scale": ("response", scales[rows, best], {"long_name": "best scale of the de-filtered response"}),
            "error": (("response", "alpha"), errors, {"long_name": "relative error E(alpha)"}),
        },
        coords={"alpha": ("alpha", alphas, {"long_name": "fractional order"})},
        attrs={"extension": extension, "gain": int(gain)},
    )


def plot_fractional_order(ds: xr.Dataset):
    """Fig. 4b-d: distribution of α̂ over neurons per drive, with the mean response's α̂; responses of
    the neurons with the smallest and largest α̂ (largest drive); α̂ vs drive."""
    fig, (ax_h, ax_r, ax_d) = subplots(1, 3, figsize=(15, 4))
    drives = ds.drive.values
    colors, _ = drive_colors(drives)
    bins = np.linspace(float(ds.alpha.min()), float(ds.alpha.max()), 41)
    for i, c in enumerate(colors):
        a = ds.alpha_hat.isel(drive=i).values
        ax_h.hist(a[np.isfinite(a)], bins=bins, color=c, alpha=0.5, label=f"ξ = {drives[i]:g}")
        ax_h.axvline(float(ds.alpha_mean_response.isel(drive=i)), color=c, ls="-", lw=2)
    ax_h.axvline(0, color="grey", lw=0.6)
    ax_h.set(xlabel="α̂ (> 0: differentiation, < 0: integration)", ylabel="neurons",
             title="fractional order per neuron (line: α̂ of the mean response)")
    ax_h.legend(fontsize=7)
    last = ds.isel(drive=-1)
    stim = last.stimulus.values
    peak = max(np.abs(stim).max(), 1e-30)
    ax_r.plot(ds.time, stim / peak, color="grey", lw=1, label="step drive")
    a = last.alpha_hat.values
    if np.isfinite(a).any():
        for idx in sorted({int(np.nanargmin(a)), int(np.nanargmax(a))}):
            r = last.response.isel(neuron=idx).values
            ax_r.plot(ds.time, r / max(np.abs(r).max(), 1e-30), lw=1, label=f"neuron {idx}, α̂ = {a[idx]:.2f}")
    ax_r.set(xlabel="step", ylabel="normalised", title=f"responses at ξ = {drives[-1]:g}")
    ax_r.legend(fontsize=7)
    ax_d.plot(drives, ds.alpha_mean_response, "o-", ms=4, label="α̂ of the mean response")
    ax_d.plot(drives, ds.alpha_hat.median("neuron"), "s--", ms=4, label="median over neurons")
    ax_d.set(xlabel="drive ξ", ylabel="α̂", title="order vs drive amplitude (Fig. 4d)")
    ax_d.legend(fontsize=7)
    iso = " (isolated)" if ds.attrs.get("isolated") else ""
    title(fig, ds, f"fractional order{iso}, {ds.attrs.get('inputs', '')}, extension {ds.attrs.get('extension', '')}")
    return fig


def fractional_order_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze fractional-order`` prints: per drive, alpha of the mean response and
    the spread of the neurons' alphas."""
    lines = []
    for i, xi in enumerate(ds.drive.values):
        a = ds.alpha_hat[i]
        lines.append(f"xi = {xi:<6g} alpha of the mean response {float(ds.alpha_mean_response[i]):+.2f} "
                     f"(error {float(ds.error_mean_response[i]):.3f}); per neuron median {float(a.median()):+.2f}, "
                     f"range {float(a.min()):+.2f} – {float(a.max()):+.2f}, alpha > 0 for "
                     f"{100 * float(ds.fraction_positive[i]):.0f}%")
    return "\n".join(lines)


@register(
    "analysis",
    "fractional-order",
    "ARU Fig. 4b-d: fractional order of each neuron's response to a step drive",
    figure=plot_fractional_order,
    summary=fractional_order_summary,
    outputs=(
        *Output.each("alpha_hat error_min", "real", ("drive", "neuron")),
        Output("error", "field", ("drive", "neuron", "alpha")),
        *Output.each("alpha_mean_response error_mean_response", "real", ("drive",)),
        Output("error_mean", "field", ("drive", "alpha")), Output("response", "field", ("drive", "time", "neuron")),
        Output("stimulus", "field", ("drive", "time")), Output("fraction_positive", "fraction", ("drive",)),
    ),
)
def fractional_order_analysis(
    model,
    *,
    drives: Sequence[float] = (20.0,),
    onset: int = 100,
    duration: int = 100,
    steps: Count = 400,
    task=None,
    isolated: bool = False,
    alphas: Sequence[float] = tuple(ALPHAS),
    extension: Extension = "even",
    gain: bool = True,
    seed: int = 0,
) -> xr.Dataset:
    r"""The fractional order $\hat\alpha$ (Eq. 16) of every neuron's response to a step drive (Fig. 4).

    The model runs ``steps`` steps, on zero input (or ``task``'s input stream), with the drive
    $\xi$ on every neuron for ``onset`` $\le t <$ ``onset + duration`` (paper: $\xi = 20$ during
    $t \in [100, 200]$), and once more without drive. A neuron's response $r_i$ is the difference of
    its activity $h_i$ between the two runs (what the drive caused; on zero input this is the
    activity minus its resting value); the mean response is the mean over neurons. Each is
    fitted against the step $s_t = \xi\,[\text{onset} \le t < \text{onset} + \text{duration}]$ by
    [`fit_fractional_order`][] (``alphas``, ``extension``, ``gain``). ``isolated=True`` keeps only
    the diagonal of every recurrent matrix (the "isolated" ARUs of Fig. 4c).

    **Returns** (dims ``drive``, ``neuron``, ``time``, ``alpha``): ``alpha_hat``, ``error_min``
    (``drive``, ``neuron``); ``alpha_mean_response``, ``error_mean_response`` (``drive``); the
    error curves ``error`` (``drive``, ``neuron``, ``alpha``) and ``error_mean`` (``drive``, ``alpha``);
    ``response`` (``drive``, ``time``, ``neuron``), ``stimulus`` (``drive``, ``time``); and
    ``fraction_positive`` (``drive``): the share of fitted neurons with $\hat\alpha > 0$
    (fractional differentiation under the equations' convention, see the module docstring).
    Neurons whose response is identically zero get NaN.

    Args:
        drives: step drive amplitudes xi.
        onset: first driven step.
        duration: driven steps.
        steps: length of the window.
        task: the task whose input stream drives the model (default: zero input).
        isolated: keep only the diagonal of W_hh (isolated units, Fig. 4c).
        alphas: the grid of orders alpha searched.
        extension: boundary handling of the FFT operator (periodic: the paper's plain FFT).
        gain: fit a gain with each alpha.
        seed: seed of the task's inputs.
    """
    require_positive("steps", steps)
    require_positive("duration", duration)
    if isinstance(onset, bool) or not isinstance(onset, int) or onset < 0 or onset + duration > steps:
        raise ConfigError(f"need 0 <= onset and onset + duration <= steps = {steps}; got onset {onset!r}, "
                          f"duration {duration}")
    _check_extension(extension)
    drives = number_grid("drives", drives)
    if isolated:
        if not all(hasattr(c, "isolate") for c in model.cells):
            raise ConfigError("isolated=True needs units of the ARU family (rnn, rnn-gamma, aru)")
        model = eqx.tree_at(lambda m: m.cells, model, tuple(c.isolate() for c in model.cells))
    smap = state_map(model)
    activity = np.array([label == "layer0.h" for label in smap.labels])
    xs, _ = protocol_inputs(model, steps, task=task, key=jax.random.key(seed))
    on = ((np.arange(steps) >= onset) & (np.arange(steps) < onset + duration)).astype(float)
    xi = jnp.asarray(np.concatenate([drives[:, None] * on, np.zeros((1, steps))]), xs.dtype)
    states = np.asarray(jax.vmap(lambda d: run_in(smap, (xs, d)))(xi), float)[..., activity]  # [D+1, T, H]
    response = states[:-1] - states[-1]
    stimulus = drives[:, None] * on

    fits = [fit_fractional_order(r.T, s, alphas=alphas, extension=extension, gain=gain)
            for r, s in zip(response, stimulus)]
    means = [fit_fractional_order(r.mean(-1), s, alphas=alphas, extension=extension, gain=gain)
             for r, s in zip(response, stimulus)]
    neurons = xr.concat(fits, "drive").rename(response="neuron")
    mean = xr.concat(means, "drive").isel(response=0, drop=True)
    alpha_hat = neurons.alpha_hat.values
    with np.errstate(invalid="ignore"):
        positive = np.sum(alpha_hat > 0, -1) / np.sum(np.isfinite(alpha_hat), -1)
    ds = xr.Dataset(
        {
            "alpha_hat": neurons.alpha_hat,
            "error_min": neurons.error_min,
            "error": neurons.error,
            "alpha_mean_response": mean.alpha_hat.assign_attrs(long_name="fitted order of the mean response"),
            "error_mean_response": mean.error_min,
            "error_mean": mean.error,
            "response": (("drive", "time", "neuron"), response, {"long_name": "drive-evoked activity"}),
            "stimulus": (("drive", "time"), stimulus, {"long_name": "step drive"}),
            "fraction_positive": ("drive", positive, {"long_name": "share of neurons with alpha_hat > 0"}),
        },
        coords={"drive": ("drive", drives, {"long_name": "step drive xi"}), "neuron": np.arange(response.shape[-1]),
                "time": ("time", np.arange(steps), {"units": "steps"})},
    )
    return stamp(ds, analysis="fractional-order", seed=seed, config=dict(onset=onset, duration=duration,
        steps=steps, isolated=isolated, extension=extension, gain=gain,
        inputs="zero input" if task is None else f"task {type(task).__name__}"))
