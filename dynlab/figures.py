"""Figures drawn from result datasets (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import xarray as xr  # noqa: E402


def learning_curve(metrics: xr.Dataset):
    """Training loss per step and held-out metric per evaluation, with the chance level."""
    metric = metrics.attrs.get("metric", "loss")
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax_loss.plot(metrics.step, metrics.loss, lw=0.8, label="train (batch)")
    ax_loss.plot(metrics.eval_step, metrics.eval_loss, "o-", ms=3, label="held-out")
    ax_loss.set(xlabel="optimiser step", ylabel="loss", yscale="log", title="loss")
    ax_loss.legend()
    ax_metric.plot(metrics.eval_step, metrics[f"eval_{metric}"], "o-", ms=3, label="held-out")
    if "chance" in metrics.attrs:
        ax_metric.axhline(metrics.attrs["chance"], color="grey", ls="--", label="chance")
    ax_metric.set(xlabel="optimiser step", ylabel=metric, title=metric)
    if metric == "mse":
        ax_metric.set_yscale("log")
    ax_metric.legend()
    fig.suptitle(metrics.attrs.get("task", ""), fontsize=9)
    fig.tight_layout()
    return fig


def lyapunov_spectrum(ds: xr.Dataset, *, max_running: int = 8):
    """Spectrum (mean and CI over initial conditions) and convergence of the running estimates."""
    fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(10, 3.8))
    idx = ds.exponent.values
    mean = ds["mean"].values
    err = [mean - ds.ci_low.values, ds.ci_high.values - mean]
    ax_s.errorbar(idx, mean, yerr=err, fmt="o", ms=3, capsize=2, label=f"mean ± {int(100 * ds.attrs.get('confidence', 0.95))}% CI")
    ax_s.axhline(0, color="grey", lw=0.8)
    ax_s.set(xlabel="exponent index i", ylabel="λ_i (per step)", title="Lyapunov spectrum")
    ax_s.legend(fontsize=8)
    running = ds.running.mean("ic") if "ic" in ds.running.dims else ds.running
    for i in idx[:max_running]:
        ax_r.plot(running.time, running.sel(exponent=i), lw=1, label=f"λ{i}")
    ax_r.axhline(0, color="grey", lw=0.8)
    ax_r.set(xlabel="steps accumulated (after burn-in)", ylabel="running estimate (per step)", xscale="log",
             title="convergence (mean over initial conditions)")
    ax_r.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
    fig.tight_layout()
    return fig


def spectra(ds: xr.Dataset):
    """Weight eigenvalues vs the unit circle, Jacobian spectra over time, covariance spectrum."""
    import numpy as np

    fig, (ax_w, ax_j, ax_c) = plt.subplots(1, 3, figsize=(14, 4))
    theta = np.linspace(0, 2 * np.pi, 200)
    ax_w.plot(np.cos(theta), np.sin(theta), color="grey", lw=0.8, label="unit circle")
    if "weight_eig_real" in ds:
        for name in ds.matrix.values:
            sel = ds.sel(matrix=name)
            ax_w.plot(sel.weight_eig_real, sel.weight_eig_imag, ".", ms=4, label=str(name))
    ax_w.set(xlabel="Re λ", ylabel="Im λ", title="recurrent weight eigenvalues", aspect="equal")
    ax_w.legend(fontsize=7)
    t = ds.time.values
    sv = ds.jacobian_singular_values
    ax_j.plot(t, ds.jacobian_spectral_radius, "o-", ms=3, label="spectral radius ρ(J_t)")
    ax_j.plot(t, sv.isel(jacobian_singular_value=0), "s-", ms=3, label="largest singular value")
    ax_j.axhline(1, color="grey", ls="--", lw=0.8)
    ax_j.set(xlabel="step", ylabel="magnitude", title="state Jacobian along the trajectory", yscale="log")
    ax_j.legend(fontsize=7)
    if "covariance_eigenvalue" in ds:
        rank, ev = ds["rank"].values, ds.covariance_eigenvalue.values
        ax_c.loglog(rank, ev, ".", label="eigenvalues")
        fit = ds.covariance_in_fit_range.values.astype(bool)
        amp, alpha = float(ds.covariance_power_law_amplitude), float(ds.covariance_alpha)
        ax_c.loglog(rank[fit], amp * rank[fit] ** -alpha, "-",
                    label=f"α = {alpha:.2f} [{float(ds.covariance_alpha_ci_low):.2f}, {float(ds.covariance_alpha_ci_high):.2f}]")
        ax_c.legend(fontsize=7)
    else:
        ax_c.text(0.5, 0.5, "activity constant\n(no covariance spectrum)", ha="center", va="center",
                  transform=ax_c.transAxes)
    ax_c.set(xlabel="rank n", ylabel="variance λ_n", title="activity covariance spectrum")
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
    fig.tight_layout()
    return fig
