"""The figure of the ``lyapunov`` analysis (``dynlab plot`` of its dataset; matplotlib)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots

MIN_SPAN = 0.02
"""Smallest height of a value axis (per step). Exponents that agree to far better than this (all
≈ 0 at a neutral fixed point, say) are drawn on an axis this tall around them rather than on one
stretched to their last digits, whose ticks would need an offset label ("1e-8", "-0.41") to be
read; the table and the dataset hold the digits."""


def readable_axis(ax, *values) -> None:
    """Value limits that include 0 and all of ``values`` (NaN ignored), at least [`MIN_SPAN`][] tall,
    with plain tick labels: never an offset or multiplier label beside the axis."""
    finite = np.concatenate([np.ravel(np.asarray(v, float)) for v in values])
    finite = finite[np.isfinite(finite)]
    if finite.size:
        lo, hi = min(finite.min(), 0.0), max(finite.max(), 0.0)
        pad = max(0.05 * (hi - lo), (MIN_SPAN - (hi - lo)) / 2, 0.0)
        ax.set_ylim(lo - pad, hi + pad)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)


def plot_lyapunov(ds: xr.Dataset, *, max_running: int = 8):
    """Spectrum (mean and CI, over the population the dataset names) and convergence of the running estimates."""
    fig, (ax_s, ax_r) = subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 1.15]})
    idx = ds.exponent.values
    mean = ds["mean"].values
    # lists, not arrays: with k = 1 matplotlib turns a one-element array into a scalar with a NumPy warning
    err = [list(mean - ds.ci_low.values), list(ds.ci_high.values - mean)]
    level = int(round(100 * ds.attrs.get("ci_level", ds.attrs.get("confidence", 0.95))))
    population = ds.attrs.get("ci_population", "initial conditions")
    ax_s.errorbar(idx, mean, yerr=err, fmt="o", ms=3, capsize=2)
    ax_s.axhline(0, color="grey", lw=0.8)
    ax_s.set(xlabel="exponent index i", ylabel="λ_i (per step)")
    readable_axis(ax_s, mean, ds.ci_low.values, ds.ci_high.values)
    low, high = ax_s.get_ylim()
    widest = np.nanmax(ds.ci_high.values - ds.ci_low.values) if np.isfinite(mean).any() else np.nan
    hidden = " (all narrower than the markers)" if widest < 0.01 * (high - low) else ""  # say so: not missing
    ax_s.set_title(f"Lyapunov spectrum: mean ± {level}% CI\nover {population}{hidden}", fontsize=10)
    over = [d for d in ("realisation", "ic") if d in ds.running.dims]
    running = ds.running.mean(over) if over else ds.running
    shown = idx[:max_running]
    for i in shown:
        ax_r.plot(running.time, running.sel(exponent=i), lw=1, label=f"λ{i}")
    ax_r.axhline(0, color="grey", lw=0.8)
    ax_r.set(xlabel="steps accumulated (after burn-in)", ylabel="running estimate (per step)", xscale="log")
    ax_r.set_title("convergence (mean over runs)", fontsize=10)
    readable_axis(ax_r, running.sel(exponent=shown).values)
    ax_r.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)  # beside, never on the lines
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
    fig.tight_layout()
    return fig
