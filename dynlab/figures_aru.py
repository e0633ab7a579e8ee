"""Figures of the ARU paper's dynamics analyses (matplotlib, Agg backend), one per analysis.

Each analysis registers its figure (``register(..., figure=...)``); ``dynlab plot`` finds it there.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.colors import LogNorm, Normalize, TwoSlopeNorm  # noqa: E402


def _title(fig, ds: xr.Dataset, text: str) -> None:
    fig.suptitle(f"{ds.attrs.get('model', '')} — {text}", fontsize=9)
    fig.tight_layout()


def _drive_colors(drives: np.ndarray):
    norm = Normalize(vmin=float(drives.min()), vmax=float(max(drives.max(), drives.min() + 1e-9)))
    cmap = plt.get_cmap("viridis")
    return [cmap(norm(d)) for d in drives], plt.cm.ScalarMappable(norm=norm, cmap=cmap)


def _grid_image(ax, ds: xr.Dataset, values: np.ndarray, **kwargs):
    """An (n, s) heatmap with one cell per grid point, n on the x axis."""
    mesh = ax.pcolormesh(np.arange(ds.sizes["n"] + 1) - 0.5, np.arange(ds.sizes["s"] + 1) - 0.5, values.T,
                         shading="flat", **kwargs)
    ax.set_xticks(np.arange(ds.sizes["n"])[::2], [f"{v:g}" for v in ds.n.values[::2]], fontsize=7)
    ax.set_yticks(np.arange(ds.sizes["s"]), [f"{v:g}" for v in ds.s.values], fontsize=7)
    ax.set(xlabel="gain n", ylabel="saturation s")
    return mesh


def jacobian_grid(ds: xr.Dataset):
    """Mean Jacobian norm over (n, s), log colour scale centred on 1, the JN = 1 contour (App. Fig. 6A)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    jn = ds.jacobian_norm.values
    lo, hi = max(float(np.nanmin(jn)), 1e-3), float(np.nanmax(jn))
    mesh = _grid_image(ax, ds, jn, cmap="RdBu_r", norm=LogNorm(vmin=min(lo, 0.99), vmax=max(hi, 1.01)))
    if np.nanmin(jn) < 1 < np.nanmax(jn):
        ax.contour(np.arange(ds.sizes["n"]), np.arange(ds.sizes["s"]), jn.T, levels=[1], colors="k", linewidths=1)
    fig.colorbar(mesh, ax=ax, label=f"mean {ds.attrs.get('norm', '')} norm of D_h F")
    ax.set_title(f"Jacobian norm, h ~ U(-{ds.attrs.get('h_range', 5):g}, {ds.attrs.get('h_range', 5):g}), "
                 f"{ds.attrs.get('samples', '')} states", fontsize=9)
    _title(fig, ds, "static γ network (black: JN = 1)")
    return fig


def lyapunov_grid(ds: xr.Dataset):
    """Mean λ1 over (n, s), diverging colours centred on 0, the λ1 = 0 contour (App. Fig. 6B)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    lam = ds.lambda1_mean.values
    lo, hi = float(np.nanmin(lam)), float(np.nanmax(lam))
    mesh = _grid_image(ax, ds, lam, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, vmin=min(lo, -1e-3), vmax=max(hi, 1e-3)))
    if lo < 0 < hi:
        ax.contour(np.arange(ds.sizes["n"]), np.arange(ds.sizes["s"]), lam.T, levels=[0], colors="k", linewidths=1)
    fig.colorbar(mesh, ax=ax, label="λ1 (per step)")
    over = ds.attrs.get("ci_population", f"{ds.sizes['ic']} initial conditions")
    ax.set_title(f"largest Lyapunov exponent, mean over {over}", fontsize=9)
    _title(fig, ds, "static γ network, zero input")
    return fig


def _ci_line(ax, x, ds, name, **kwargs):
    """Mean ± CI of the finite runs (line and band); runs that escaped to infinity as × at their growth rate."""
    mean = ds[f"{name}_mean"].values
    line, = ax.plot(x, mean, "o-", ms=3, **kwargs)
    ax.fill_between(x, ds[f"{name}_ci_low"].values, ds[f"{name}_ci_high"].values, color=line.get_color(), alpha=0.2)
    escape = ds[f"{name}_escape_mean"].values
    if np.isfinite(escape).any():
        label = f"{kwargs['label']}: escapes (growth rate)" if "label" in kwargs else None
        ax.plot(x, escape, "x--", ms=6, color=line.get_color(), label=label)
    return line


def adaptation(ds: xr.Dataset):
    """Fig. 4a/5c/5d: mean n_t per drive; λ1 vs t̂ per drive; λ1 adapted vs fixed vs drive (mean ± CI)."""
    fig, (ax_n, ax_t, ax_d) = plt.subplots(1, 3, figsize=(15, 4))
    drives = ds.drive.values
    colors, sm = _drive_colors(drives)
    for d, c in zip(drives, colors):
        ax_n.plot(ds.time, ds.n_t.sel(drive=d).mean("neuron"), color=c, lw=1)
    ax_n.axvline(0, color="grey", ls="--", lw=0.8)
    ax_n.set(xlabel="steps since onset", ylabel="gain n_t (mean over neurons)", title="activation gain under a step drive")
    fig.colorbar(sm, ax=ax_n, label="ξ")
    t_hat = ds.t_hat.values
    for i, (d, c) in enumerate(zip(drives, colors)):
        _ci_line(ax_t, t_hat, ds.isel(drive=i), "lambda1_t_hat", color=c)
    ax_t.axhline(float(ds.lambda1_fixed_mean.sel(drive=0)), color="k", lw=1, label="ξ = 0")
    ax_t.axhline(0, color="grey", lw=0.6)
    ax_t.set_xscale("symlog", linthresh=1)
    ax_t.set(xlim=(0, None), xlabel="t̂ (steps after onset)", ylabel="λ1 (per step)",
             title="λ1 with (n, s) frozen at t̂ (Fig. 5c)")
    ax_t.legend(fontsize=7)
    _ci_line(ax_d, drives, ds, "lambda1_adapted", label="adaptive: (n∞(ξ), s∞(ξ))")
    _ci_line(ax_d, drives, ds, "lambda1_fixed", label="fixed: (n∞(0), s∞(0))")
    ax_d.axhline(0, color="grey", lw=0.6)
    ax_d.set(xlabel="drive ξ", ylabel="λ1 (per step)", title="λ1 under a constant drive (Fig. 5d)")
    ax_d.legend(fontsize=7)
    conf = int(100 * ds.attrs.get("confidence", 0.95))
    over = ds.attrs.get("ci_population", f"{ds.sizes['ic']} initial conditions from the driven run")
    _title(fig, ds, f"mean ± {conf}% CI over {over}; "
                    f"{ds.attrs.get('inputs', '')}, drive in map: {bool(ds.attrs.get('drive_in_map', 1))}")
    return fig


def controller(ds: xr.Dataset, neuron: int = 0):
    """Fig. 5a/b: one neuron's controller trajectories in PC space with every neuron's limit points;
    its (n_t, s_t) paths with onset (▲) and end (■) over the γ'(ξ; n, s) = 1 - ε level curves."""
    fig, (ax_pc, ax_ns) = plt.subplots(1, 2, figsize=(11, 4.4))
    drives = ds.drive.values
    colors, sm = _drive_colors(drives)
    after = ds.time.values >= 0
    for i, c in enumerate(colors):
        traj = ds.pc.isel(drive=i, neuron=neuron).values[after]
        ax_pc.plot(traj[:, 0], traj[:, 1] if traj.shape[1] > 1 else 0 * traj[:, 0], color=c, lw=0.8)
        lim = ds.limit_pc.isel(drive=i).values
        ax_pc.scatter(lim[:, 0], lim[:, 1] if lim.shape[1] > 1 else 0 * lim[:, 0], color=c, s=6, alpha=0.5)
        ax_pc.scatter(*ds.limit_pc.isel(drive=i, neuron=neuron).values[:2], color=c, marker="s", s=30,
                      edgecolors="k")
    evr = ds.explained_variance_ratio.values
    ax_pc.set(xlabel=f"PC1 ({100 * evr[0]:.0f}%)", ylabel=f"PC2 ({100 * evr[1]:.0f}%)" if evr.size > 1 else "",
              title=f"controller states, neuron {neuron} (lines), limit points of all neurons (dots)")
    fig.colorbar(sm, ax=ax_pc, label="ξ")
    level = 1 - float(ds.attrs.get("eps", 0.01))
    for i, c in enumerate(colors):
        gp = ds.gamma_prime.isel(drive=i).values
        if gp.min() < level < gp.max():
            ax_ns.contour(ds.n_mesh, ds.s_mesh, gp.T, levels=[level], colors=[c], linestyles="--", linewidths=0.8)
        n, s = ds.n_t.isel(drive=i, neuron=neuron).values[after], ds.s_t.isel(drive=i, neuron=neuron).values[after]
        ax_ns.plot(n, s, color=c, lw=1)
        ax_ns.scatter(n[0], s[0], marker="^", color=c, edgecolors="k", s=30)
        ax_ns.scatter(n[-1], s[-1], marker="s", color=c, edgecolors="k", s=30)
    ax_ns.set(xlabel="gain n", ylabel="saturation s", title=f"(n_t, s_t) of neuron {neuron}; dashed: γ'(ξ) = {level:g}")
    _title(fig, ds, f"controller analysis, {ds.attrs.get('inputs', '')}")
    return fig


def gain_scaling(ds: xr.Dataset):
    """Fig. 3b: n∞ vs noise std (log-log) with the power-law fit, s∞ with the exponential fit, traces."""
    fig, (ax_tr, ax_n, ax_s) = plt.subplots(1, 3, figsize=(15, 4))
    stds = ds["std"].values
    colors, sm = _drive_colors(np.log10(stds))
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
    _title(fig, ds, f"gain scaling, noise via {ds.attrs.get('channel', '')}, {ds.sizes['seed']} noise seeds")
    return fig


def fractional_order(ds: xr.Dataset):
    """Fig. 4b-d: distribution of α̂ over neurons per drive, with the mean response's α̂; responses of
    the neurons with the smallest and largest α̂ (largest drive); α̂ vs drive."""
    fig, (ax_h, ax_r, ax_d) = plt.subplots(1, 3, figsize=(15, 4))
    drives = ds.drive.values
    colors, _ = _drive_colors(drives)
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
    _title(fig, ds, f"fractional order{iso}, {ds.attrs.get('inputs', '')}, extension {ds.attrs.get('extension', '')}")
    return fig


def gradient_by_position(ds: xr.Dataset):
    """Fig. 18: gradient norms by input position (mean ± std over samples) and the batch W_hh gradient."""
    fig, (ax_s, ax_w) = plt.subplots(1, 2, figsize=(11, 4))
    t = ds.time.values
    for name, label in (("input_grad", "|∂L/∂x_t|"), ("preact_grad", "|∂L/∂a_t|"), ("w_hh_grad", "|δ_t h_{t-1}ᵀ|_F")):
        m, sd = ds[f"{name}_mean"].values, ds[f"{name}_std"].values
        line, = ax_s.plot(t, m, lw=1, label=label)
        ax_s.fill_between(t, np.maximum(m - sd, m * 1e-3), m + sd, color=line.get_color(), alpha=0.15)
    ax_s.set(yscale="log", xlabel="input position t", ylabel="norm", title=f"per sample (mean ± std over {ds.sizes['sample']})")
    ax_s.legend(fontsize=7)
    ax_w.plot(t, ds.w_hh_grad_batch, lw=1, label="contribution of position t")
    ax_w.plot(t, ds.w_hh_grad_from, lw=1, label="accumulated from t to the end")
    ax_w.set(yscale="log", xlabel="input position t", ylabel="|·|_F", title="∂L/∂W_hh of the batch-mean loss")
    ax_w.legend(fontsize=7)
    _title(fig, ds, f"gradient by position, {ds.attrs.get('task', '')}")
    return fig


def weight_eigs(ds: xr.Dataset):
    """Fig. 5e: eigenvalues of each W_hh against the unit circle."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    theta = np.linspace(0, 2 * np.pi, 300)
    ax.plot(np.cos(theta), np.sin(theta), color="grey", lw=0.8)
    for name in ds.matrix.values:
        sel = ds.sel(matrix=name)
        ax.plot(sel.eig_real, sel.eig_imag, ".", ms=4,
                label=f"{name}: {int(sel.n_outside)} of {int(sel.n_eigenvalues)} outside, ρ = {float(sel.spectral_radius):.3f}")
    ax.set(xlabel="Re μ", ylabel="Im μ", aspect="equal", title="eigenvalues of W_hh")
    ax.legend(fontsize=7)
    _title(fig, ds, "recurrent weights vs the unit circle")
    return fig
