"""The figure of the ``spectra`` analysis (``dynlab plot`` of its dataset; matplotlib)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots


def plot_spectra(ds: xr.Dataset):
    """Weight eigenvalues vs the unit circle, Jacobian spectra over time, covariance spectrum."""
    from dynlab.figures import legend_beside

    fig, (ax_w, ax_j, ax_c) = subplots(1, 3, figsize=(14, 4.8), layout="constrained")
    theta = np.linspace(0, 2 * np.pi, 200)
    ax_w.plot(np.cos(theta), np.sin(theta), color="grey", lw=0.8, label="unit circle")
    if "weight_eig_real" in ds:
        for name in ds.matrix.values:
            sel = ds.sel(matrix=name)
            ax_w.plot(sel.weight_eig_real, sel.weight_eig_imag, ".", ms=4, label=str(name))
    ax_w.set(xlabel="Re λ", ylabel="Im λ", title="recurrent weight eigenvalues", aspect="equal")
    legend_beside(ax_w, below=True, fontsize=7)
    t = ds.time.values
    sv = ds.jacobian_singular_values
    ax_j.plot(t, ds.jacobian_spectral_radius, "o-", ms=3, label="spectral radius ρ(J_t)")
    ax_j.plot(t, sv.isel(jacobian_singular_value=0), "s-", ms=3, label="largest singular value")
    ax_j.axhline(1, color="grey", ls="--", lw=0.8)
    ax_j.set(xlabel="step", ylabel="magnitude", title="state Jacobian along the trajectory", yscale="log")
    legend_beside(ax_j, below=True, fontsize=7)
    import textwrap

    note = ds.attrs.get("covariance_note", "")
    why = note.split(": ", 1)[-1] if note else "the activity is constant"
    if "covariance_eigenvalue" in ds:
        rank, ev = ds["rank"].values, ds.covariance_eigenvalue.values
        shown = ev > 0  # zero eigenvalues (beyond the covariance's rank) have no place on a log axis
        ax_c.loglog(rank[shown], ev[shown], ".", label="eigenvalues")
        if "covariance_alpha" in ds:
            fit = ds.covariance_in_fit_range.values.astype(bool)
            amp, alpha = float(ds.covariance_power_law_amplitude), float(ds.covariance_alpha)
            ax_c.loglog(rank[fit], amp * rank[fit] ** -alpha, "-",
                        label=f"α = {alpha:.2f} [{float(ds.covariance_alpha_ci_low):.2f}, "
                              f"{float(ds.covariance_alpha_ci_high):.2f}]")
        # why there is no fit goes under the panel with the legend, off the data
        legend = legend_beside(ax_c, below=True, fontsize=7,
                               title=textwrap.fill("no power-law fit: " + why, 60) if note else None)
        if note:
            legend.get_title().set_fontsize(7)
    else:
        ax_c.text(0.5, 0.5, "no covariance spectrum:\n" + textwrap.fill(why, 38), ha="center", va="center",
                  transform=ax_c.transAxes, fontsize=8)
    ax_c.set(xlabel="rank n", ylabel="variance λ_n", title="activity covariance spectrum")
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
    return fig


def spectra_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze spectra`` prints: the spectral radii of the recurrent matrices and of
    the state Jacobian, and the covariance spectrum's power-law fit with its interval."""
    rho = ds.jacobian_spectral_radius.values
    lines = ["spectral radius of recurrent matrices: " + ", ".join(
                 f"{m} {float(r):.4f}" for m, r in zip(ds.matrix.values, ds.weight_spectral_radius.values)),
             f"state Jacobian: spectral radius {rho.mean():.4f} (range {rho.min():.4f}–{rho.max():.4f}), "
             f"largest singular value {float(ds.jacobian_singular_values[:, 0].mean()):.4f} (mean over {rho.size} samples)"]
    if "covariance_alpha" in ds:
        ranks = (f" over ranks {ds.attrs['covariance_fit_rank_min']}–{ds.attrs['covariance_fit_rank_max']} "
                 f"(M_eff {ds.attrs['covariance_effective_samples']:.0f} of {ds.attrs['covariance_n_samples']} samples)"
                 if "covariance_fit_rank_max" in ds.attrs else "")
        lines.append(f"activity covariance: alpha {float(ds.covariance_alpha):.3f}{ranks} "
                     f"[{float(ds.covariance_alpha_ci_low):.3f}, {float(ds.covariance_alpha_ci_high):.3f}]"
                     f"{', ' + ds.attrs['covariance_ci_label'] if 'covariance_ci_label' in ds.attrs else ''}; R² "
                     f"{float(ds.covariance_power_law_r2):.3f}; truncated power law alpha "
                     f"{float(ds.covariance_truncated_alpha):.3f}, n_c {float(ds.covariance_truncated_n_c):.3g}; "
                     f"participation ratio {float(ds.covariance_participation_ratio):.2f}")
    return "\n".join(lines)
