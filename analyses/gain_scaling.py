r"""Gain scaling of ARU controllers (Geadah et al. §2.3, Fig. 3b; notes §2).

Protocol: the network receives low noise $N(0, \sigma_0^2)$ ($\sigma_0 = 0.01$) for ``pre`` steps,
then $N(0, \xi^2)$ for ``duration`` steps, then low noise again for ``post`` steps. The steady
state of the activation parameters in the high-noise period, $n_\infty(\xi)$ and $s_\infty(\xi)$,
is fitted by a power law and an exponential:

$$ n_\infty(\xi) = a\, \xi^{\,b}, \qquad s_\infty(\xi) = c + a\, e^{k \xi}. $$

The paper reports a "power-law decay" of the gain and an "exponential ramp-up" of the saturation
and gives no constants. Both fits are separable least squares: the nonlinear parameter ($b$ or
$k$) is scanned on a grid with the linear ones solved exactly at each value, and the best point is
refined by ``scipy.optimize.curve_fit``, which also gives the standard errors.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from dynlab.analyses.aru.frozen_map import aru_layer, number_grid
from dynlab.analyses.aru.plotting import drive_colors, title
from dynlab.analyses.aru.traces import aru_traces
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register
from dynlab.statistics import t_interval

__all__ = ["exponential_fit", "gain_scaling_analysis", "power_law_fit"]


_SE_NOTE = ("asymptotic standard error (1 sd) from scipy.optimize.curve_fit's covariance, scaled by the residual "
            "variance: it measures how far the curve misses the points, assumes the model exact and the residuals "
            "independent Gaussian; it is not the spread over noise seeds (see <name>_ci_low/_ci_high). On synthetic "
            "truths +-1.96 SE covered the true value 86-90% of the time (issue 22)")


def _xy(x: ArrayLike, y: ArrayLike, n_params: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 1 or x.shape != y.shape or x.size <= n_params:
        raise ConfigError(f"a {n_params}-parameter fit needs x and y of one equal length > {n_params}, "
                          f"got {np.shape(x)} and {np.shape(y)}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ConfigError("the data to fit must be finite")
    return x, y


def _separable(x, y, basis, grid) -> tuple[float, np.ndarray]:
    """The grid value of the nonlinear parameter (and its linear coefficients) with the least squares."""
    best = (np.inf, None, None)
    for q in grid:
        A = basis(x, q)
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        sse = float(np.sum((A @ coef - y) ** 2))
        if sse < best[0]:
            best = (sse, q, coef)
    return best[1], best[2]


def _refine(model, x, y, p0, names) -> dict[str, float]:
    import scipy.optimize

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", scipy.optimize.OptimizeWarning)
            popt, pcov = scipy.optimize.curve_fit(model, x, y, p0=p0, maxfev=20000)
    except RuntimeError:  # no convergence: keep the grid optimum, no errors
        popt, pcov = np.asarray(p0, float), np.full((len(p0), len(p0)), np.nan)
    residual = y - model(x, *popt)
    total = np.sum((y - y.mean()) ** 2)
    out = {name: float(v) for name, v in zip(names, popt)}
    out.update({f"{name}_se": float(np.sqrt(v)) if v >= 0 else np.nan for name, v in zip(names, np.diag(pcov))})
    out["r2"] = float(1 - np.sum(residual**2) / total) if total > 0 else np.nan
    return out


def power_law_fit(x: ArrayLike, y: ArrayLike, *, exponents: ArrayLike = np.linspace(-4, 4, 801)) -> dict[str, float]:
    r"""Least-squares fit of $y = a\, x^{b}$ ($x > 0$): ``{"a", "b", "a_se", "b_se", "r2"}``.

    $b$ is first scanned over ``exponents`` (default $[-4, 4]$ by 0.01) with $a$ solved exactly, then
    both are refined jointly. Fitting in linear space (not log–log) lets $y$ take any sign and weighs
    every point's residual alike.
    """
    x, y = _xy(x, y, 2)
    if np.any(x <= 0):
        raise ConfigError("a power law needs x > 0")
    b0, (a0,) = _separable(x, y, lambda x, b: (x**b)[:, None], exponents)
    return _refine(lambda x, a, b: a * x**b, x, y, [a0, b0], ["a", "b"])


def exponential_fit(x: ArrayLike, y: ArrayLike, *, rates: int = 801) -> dict[str, float]:
    r"""Least-squares fit of $y = c + a\, e^{k x}$: ``{"c", "a", "k", "c_se", "a_se", "k_se", "r2"}``.

    $k$ is scanned over ``rates`` values with $|k|\,(x_{\max} - x_{\min}) \le 20$ ($k > 0$: a growing
    exponential, $k < 0$ with $a < 0$: a saturating rise), $c, a$ solved exactly at each, then all
    three refined jointly.
    """
    x, y = _xy(x, y, 3)
    span = float(np.ptp(x))
    if span == 0:
        raise ConfigError("an exponential fit needs at least two distinct x values")
    grid = np.linspace(-20, 20, rates) / span
    grid = grid[grid != 0]
    k0, (c0, a0) = _separable(x - x.min(), y, lambda x, k: np.stack([np.ones_like(x), np.exp(k * x)], 1), grid)
    a0 = a0 * np.exp(-k0 * x.min())  # back from the shifted x used for conditioning
    return _refine(lambda x, c, a, k: c + a * np.exp(k * x), x, y, [c0, a0, k0], ["c", "a", "k"])


def plot_gain_scaling(ds: xr.Dataset):
    """Fig. 3b: n∞ vs noise std (log-log) with the power-law fit, s∞ with the exponential fit, traces."""
    fig, (ax_tr, ax_n, ax_s) = subplots(1, 3, figsize=(15, 4))
    stds = ds["std"].values
    colors, sm = drive_colors(np.log10(stds))
    for i, c in enumerate(colors):
        ax_tr.plot(ds.time, ds.n_trace.isel(std=i), color=c, lw=1)
    ax_tr.axvline(0, color="grey", ls="--", lw=0.8)
    ax_tr.axvline(ds.attrs.get("duration", 0), color="grey", ls="--", lw=0.8)
    ax_tr.set(xlabel="steps since the high noise began", ylabel="n_t (mean)", title="gain during the noise step")
    fig.colorbar(sm, ax=ax_tr, label="log10 ξ")
    x = np.geomspace(stds.min(), stds.max(), 200)
    spread = ds.n_inf.std(("seed", "neuron"), ddof=1).values
    ax_n.errorbar(stds, ds.n_inf_mean, yerr=spread, fmt="o", ms=4, capsize=2, label="n∞ (± std over neurons, seeds)")
    if "power_a" in ds:
        a, b = float(ds.power_a), float(ds.power_b)
        ax_n.plot(x, a * x**b, "--", label=f"{a:.3g} ξ^{b:.3g} (R² {float(ds.power_r2):.3f})")
    ax_n.set(xscale="log", xlabel="noise std ξ", ylabel="n∞", title="steady-state gain")
    if np.all(ds.n_inf_mean.values > 0):
        ax_n.set_yscale("log")
    ax_n.legend(fontsize=7)
    ax_s.errorbar(stds, ds.s_inf_mean, yerr=ds.s_inf.std(("seed", "neuron"), ddof=1).values, fmt="o", ms=4, capsize=2,
                  label="s∞")
    if "exp_k" in ds:
        c0, a, k = float(ds.exp_c), float(ds.exp_a), float(ds.exp_k)
        ax_s.plot(x, c0 + a * np.exp(k * x), "--", label=f"{c0:.3g} + {a:.3g} e^({k:.3g} ξ) (R² {float(ds.exp_r2):.3f})")
    ax_s.set(xscale="log", xlabel="noise std ξ", ylabel="s∞", title="steady-state saturation")
    ax_s.legend(fontsize=7)
    title(fig, ds, f"gain scaling, noise via {ds.attrs.get('channel', '')}, {ds.sizes['seed']} noise seeds")
    return fig


def gain_scaling_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze gain-scaling`` prints: (n_inf, s_inf) per noise std and both fits,
    with their standard errors and intervals over noise seeds."""
    lines = [f"std {xi:<6g} n_inf {n:.5g}   s_inf {s:+.5g}"
             for xi, n, s in zip(ds["std"].values, ds.n_inf_mean.values, ds.s_inf_mean.values)]

    def seed_ci(name):
        if f"{name}_ci_low" not in ds:
            return ""
        return (f"; 95% CI over {ds.sizes['seed']} noise seeds [{float(ds[name + '_ci_low']):.4g}, "
                f"{float(ds[name + '_ci_high']):.4g}]")

    if "power_b" in ds:
        lines.append(f"power law  n_inf = {float(ds.power_a):.4g} * std^({float(ds.power_b):.4g} ± "
                     f"{float(ds.power_b_se):.2g} (1 SE of the fit: misfit, not seed spread){seed_ci('power_b')})"
                     f"   R² {float(ds.power_r2):.4f}")
    if "exp_k" in ds:
        lines.append(f"exponential s_inf = {float(ds.exp_c):.4g} + {float(ds.exp_a):.4g} * exp(({float(ds.exp_k):.4g} ± "
                     f"{float(ds.exp_k_se):.2g} (1 SE of the fit){seed_ci('exp_k')}) std)   R² {float(ds.exp_r2):.4f}")
    return "\n".join(lines)


@register(
    "analysis",
    "gain-scaling",
    "ARU Fig. 3b: steady-state gain, saturation vs noise std (power-law, exponential fits)",
    figure=plot_gain_scaling,
    summary=gain_scaling_summary,
    outputs=(
        *Output.each("n_inf s_inf", "real", ("std", "seed", "neuron")),
        *Output.each("n_inf_mean s_inf_mean", "real", ("std",)),
        *Output.each("n_trace s_trace", "field", ("std", "time")),
        *(o for prefix, names in (("power", ("a", "b")), ("exp", ("c", "a", "k"))) for o in (  # a fit may fail
            *Output.each(" ".join(f"{prefix}_{n} {prefix}_{n}_se" for n in names), optional=True),
            Output(f"{prefix}_r2", "real", bounds=(-math.inf, 1.0), optional=True),
            *Output.each(" ".join(f"{prefix}_{n}_seeds" for n in names), dims=("seed",), optional=True),
            *Output.each(" ".join(f"{prefix}_{n}_ci_low {prefix}_{n}_ci_high" for n in names), optional=True))),
    ),
)
def gain_scaling_analysis(
    model,
    *,
    stds: Sequence[float] = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0),
    base_std: float = 0.01,
    pre: int = 200,
    duration: int = 200,
    post: int = 200,
    window: int = 100,
    seeds: int = 3,
    channel: Literal["drive", "input"] = "drive",
    seed: int = 0,
) -> xr.Dataset:
    r"""The gain-scaling probe of an ARU model (§2.3): $n_\infty(\xi)$ and $s_\infty(\xi)$ against the noise std $\xi$.

    Noise $\sigma_t \varepsilon_t$ with $\varepsilon_t \sim N(0, I)$ i.i.d. over time and
    components and $\sigma_t = \xi$ for ``pre`` $\le t <$ ``pre + duration``, ``base_std`` otherwise,
    enters through ``channel``: ``"drive"`` (default; added to every neuron's pre-activation,
    independently per neuron — the "noisy external drive" of Fig. 3b's caption) or ``"input"``
    (the input $x_t$, every feature; the notes' reading of §2.3). The paper does not say which.
    Every std uses the same $\varepsilon$ (common random numbers) for each of ``seeds`` noise draws.

    $n_\infty, s_\infty$ are the means over the last ``window`` high-noise steps, per neuron and noise
    seed; ``n_inf_mean``/``s_inf_mean`` average them over neurons and seeds (the paper averages over
    3 trained networks: sweep ``seed`` of the model for that), and are fitted by
    [`power_law_fit`][] and [`exponential_fit`][] (``power_*``, ``exp_*`` variables).

    **Uncertainty.** ``<prefix>_<p>_se`` is curve_fit's asymptotic standard error (1 sd): it comes
    from the misfit of the curve to the ``stds`` points and assumes the model exact, so it is
    neither a 95% interval nor the spread over noise draws. With ``seeds >= 2`` the fit is repeated
    on each noise seed's curve (``<prefix>_<p>_seeds``) and ``<prefix>_<p>_ci_low``/``_ci_high``
    give the 95% Student-t interval over those seeds (attrs ``ci_population``, ``ci_level``): the
    error from the noise draws, for this one trained network.
    ``n_trace``/``s_trace`` (``std``, ``time`` = steps since the high noise began) are the
    neuron- and seed-mean traces.

    Args:
        stds: noise stds xi.
        base_std: low-noise std before and after.
        pre: low-noise steps before.
        duration: high-noise steps.
        post: low-noise steps after.
        window: last high-noise steps averaged.
        seeds: noise draws.
        channel: noise on every neuron's pre-activation (drive), or on the input.
        seed: seed of the noise draws.
    """
    for name, value in (("pre", pre), ("duration", duration), ("window", window), ("seeds", seeds)):
        require_positive(name, value)
    if isinstance(post, bool) or not isinstance(post, int) or post < 0:
        raise ConfigError(f"post must be a non-negative integer, got {post!r}")
    require_positive("base_std", base_std, integer=False)
    if window > duration:
        raise ConfigError(f"window must be at most duration = {duration}, got {window}")
    if channel not in ("drive", "input"):
        raise ConfigError(f"channel must be 'drive' or 'input', got {channel!r}")
    stds = number_grid("stds", stds)
    if np.any(stds <= 0):
        raise ConfigError(f"stds must be positive, got {list(stds)!r}")
    cell = aru_layer(model)
    T, H, D, S = pre + duration + post, cell.hidden, model.input_size, stds.size
    high = (np.arange(T) >= pre) & (np.arange(T) < pre + duration)
    sigma = np.where(high[None, :], stds[:, None], base_std)  # [S, T]
    width = H if channel == "drive" else D
    eps = np.asarray(jax.random.normal(jax.random.key(seed), (seeds, T, width)))
    noise = (sigma[:, None, :, None] * eps[None]).reshape(S * seeds, T, width)
    if channel == "drive":
        xs, drives = np.zeros((S * seeds, T, D)), noise
    else:
        xs, drives = noise, np.zeros((S * seeds, T))
    tr = aru_traces(model, jnp.asarray(xs, jnp.float32), jnp.asarray(drives, jnp.float32))
    n = np.asarray(tr["n"], float).reshape(S, seeds, T, H)
    s = np.asarray(tr["s"], float).reshape(S, seeds, T, H)
    last = slice(pre + duration - window, pre + duration)
    n_inf, s_inf = n[:, :, last].mean(2), s[:, :, last].mean(2)  # [S, seeds, H]
    n_mean, s_mean = n_inf.mean((1, 2)), s_inf.mean((1, 2))

    data = {
        "n_inf": (("std", "seed", "neuron"), n_inf, {"long_name": "steady-state gain n_inf"}),
        "s_inf": (("std", "seed", "neuron"), s_inf, {"long_name": "steady-state saturation s_inf"}),
        "n_inf_mean": ("std", n_mean, {"long_name": "n_inf, mean over neurons and seeds"}),
        "s_inf_mean": ("std", s_mean, {"long_name": "s_inf, mean over neurons and seeds"}),
        "n_trace": (("std", "time"), n.mean((1, 3)), {"long_name": "gain n_t, mean over neurons and seeds"}),
        "s_trace": (("std", "time"), s.mean((1, 3)), {"long_name": "saturation s_t, mean over neurons and seeds"}),
    }
    per_seed = {"power": n_inf.mean(2), "exp": s_inf.mean(2)}  # [S, seeds]
    for prefix, fit, y in (("power", power_law_fit, n_mean), ("exp", exponential_fit, s_mean)):
        try:
            params = fit(stds, y)
        except ConfigError as e:  # e.g. too few stds for the fit
            warnings.warn(f"no {prefix} fit: {e}", RuntimeWarning, stacklevel=2)
            params = {}
        for name, value in params.items():
            if name.endswith("_se"):
                data[f"{prefix}_{name}"] = ((), value, {"long_name": _SE_NOTE})
            elif name == "r2":
                data[f"{prefix}_{name}"] = ((), value, {"long_name": "R^2 of the fit to the seed-mean curve"})
            else:
                data[f"{prefix}_{name}"] = ((), value, {"long_name": f"{name}, fitted to the seed-mean curve"})
        if params and seeds >= 2:
            fits = []
            for j in range(seeds):
                try:
                    fits.append(fit(stds, per_seed[prefix][:, j]))
                except ConfigError:
                    fits.append({})
            for name in (n for n in params if not n.endswith("_se") and n != "r2"):
                values = np.array([f.get(name, np.nan) for f in fits])
                ci = t_interval(values, population="noise seeds", level=0.95)
                attrs = {"long_name": f"{name}: lower bound, {ci.label}", **ci.attrs()}
                data[f"{prefix}_{name}_seeds"] = ("seed", values, {"long_name": f"{name} fitted to each noise seed's curve"})
                data[f"{prefix}_{name}_ci_low"] = ((), float(ci.low), attrs)
                data[f"{prefix}_{name}_ci_high"] = ((), float(ci.high), {**attrs, "long_name": f"{name}: upper bound, {ci.label}"})
    ds = xr.Dataset(
        data,
        coords={
            "std": ("std", stds, {"long_name": "noise std xi"}),
            "seed": ("seed", np.arange(seeds), {"long_name": "noise seed"}),
            "neuron": ("neuron", np.arange(H)),
            "time": ("time", np.arange(T) - pre, {"long_name": "steps since the high noise began", "units": "steps"}),
        },
    )
    return stamp(ds, analysis="gain-scaling", seed=seed, config=dict(base_std=base_std, pre=pre, duration=duration,
        post=post, window=window, seeds=seeds, channel=channel, hidden=H, power_law="n_inf = a * std**b",
        exponential="s_inf = c + a * exp(k * std)"))
