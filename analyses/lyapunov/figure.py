"""The figure of the ``lyapunov`` analysis (``dynlab plot`` of its dataset; matplotlib, Agg backend)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import xarray as xr  # noqa: E402


def plot_lyapunov(ds: xr.Dataset, *, max_running: int = 8):
    """Spectrum (mean and CI, over the population the dataset names) and convergence of the running estimates."""
    fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(10, 3.8))
    idx = ds.exponent.values
    mean = ds["mean"].values
    err = [mean - ds.ci_low.values, ds.ci_high.values - mean]
    level = int(round(100 * ds.attrs.get("ci_level", ds.attrs.get("confidence", 0.95))))
    population = ds.attrs.get("ci_population", "initial conditions")
    ax_s.errorbar(idx, mean, yerr=err, fmt="o", ms=3, capsize=2, label=f"mean ± {level}% CI over {population}")
    ax_s.axhline(0, color="grey", lw=0.8)
    ax_s.set(xlabel="exponent index i", ylabel="λ_i (per step)", title="Lyapunov spectrum")
    ax_s.legend(fontsize=8)
    over = [d for d in ("realisation", "ic") if d in ds.running.dims]
    running = ds.running.mean(over) if over else ds.running
    for i in idx[:max_running]:
        ax_r.plot(running.time, running.sel(exponent=i), lw=1, label=f"λ{i}")
    ax_r.axhline(0, color="grey", lw=0.8)
    ax_r.set(xlabel="steps accumulated (after burn-in)", ylabel="running estimate (per step)", xscale="log",
             title="convergence (mean over runs)")
    ax_r.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
    fig.tight_layout()
    return fig
