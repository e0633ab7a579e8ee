"""Figures of the PC–BP comparison (:mod:`dynlab.analyses.pc_bp`), matplotlib with the Agg backend."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402


def _title(ds: xr.Dataset) -> str:
    kind = "residual" if ds.attrs.get("residual", 1) else "MLP"
    return (f"{ds.attrs.get('param', '')}, alpha={ds.attrs.get('alpha', '')}, {kind} {ds.attrs.get('activation', '')}, "
            f"{ds.attrs.get('energy', '')}, {ds.attrs.get('optimizer', '')} — {ds.attrs.get('task', '')}")


def cosine_heatmap(ds: xr.Dataset):
    """Mean PC–BP gradient cosine over width (rows) x depth (columns), values annotated (Fig. 1)."""
    values = ds["mean_cosine"].values
    fig, ax = plt.subplots(figsize=(1.2 * ds.sizes["depth"] + 2.5, 0.6 * ds.sizes["width"] + 1.8))
    im = ax.imshow(values, cmap="viridis", vmin=min(0.0, np.nanmin(values)) if np.isfinite(values).any() else 0, vmax=1,
                   origin="lower", aspect="auto")
    ax.set_xticks(range(ds.sizes["depth"]), [str(int(v)) for v in ds.depth.values])
    ax.set_yticks(range(ds.sizes["width"]), [str(int(v)) for v in ds.width.values])
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            ax.text(j, i, "n/c" if v != v else f"{v:.3f}", ha="center", va="center", fontsize=7,
                    color="black" if v == v and v > 0.6 else "white")
    ax.set(xlabel="depth L", ylabel="width N",
           title=f"cos(g_PC, g_BP), mean over {ds.sizes['seed']} seeds x {ds.sizes['step']} steps")
    fig.colorbar(im, ax=ax, label="cosine similarity")
    fig.suptitle(_title(ds), fontsize=7)
    fig.tight_layout()
    return fig


def rescaling_vs_l_over_n(ds: xr.Dataset):
    """s(θ) − 1 against L/N on log axes, one colour per depth, with the L/N line (Fig. 3)."""
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    s1 = ds["s_minus_1"]
    if not np.isfinite(s1.values).any():
        ax.text(0.5, 0.5, "s(θ) is defined for linear networks only", ha="center", va="center", transform=ax.transAxes)
    else:
        mean = s1.mean(("seed", "step"))
        lo, hi = s1.min(("seed", "step")), s1.max(("seed", "step"))
        for L in ds.depth.values:
            x = ds["L_over_N"].sel(depth=L).values
            m = mean.sel(depth=L).values
            err = [m - lo.sel(depth=L).values, hi.sel(depth=L).values - m]
            ax.errorbar(x, m, yerr=err, fmt="o-", ms=4, capsize=2, label=f"L = {int(L)}")
        grid = np.geomspace(ds["L_over_N"].values.min(), ds["L_over_N"].values.max(), 50)
        ax.plot(grid, grid, "k--", lw=1, label="L / N")
        ax.set(xscale="log", yscale="log", xlabel="L / N", ylabel="s(θ) − 1  (tr(S)/d_out − 1)",
               title=f"rescaling; log-log slope {ds.attrs.get('rescaling_slope', float('nan')):.2f}")
        ax.legend(fontsize=7)
    fig.suptitle(_title(ds), fontsize=7)
    fig.tight_layout()
    return fig


def loss_curves(ds: xr.Dataset):
    """PC and BP training losses per step (mean over seeds), one panel per depth, one colour per width."""
    depths = ds.depth.values
    fig, axes = plt.subplots(1, len(depths), figsize=(3.6 * len(depths), 3.4), squeeze=False, sharey=True)
    colors = plt.cm.viridis(np.linspace(0, 0.9, ds.sizes["width"]))
    for ax, L in zip(axes[0], depths):
        for c, n in zip(colors, ds.width.values):
            sel = ds.sel(width=n, depth=L).mean("seed")
            ax.plot(sel.step, sel.loss_bp, color=c, lw=1.2, label=f"N={int(n)} BP")
            ax.plot(sel.step, sel.loss_pc, color=c, lw=1.2, ls="--", label=f"N={int(n)} PC")
        ax.set(xlabel="training step", title=f"L = {int(L)}", yscale="log")
    axes[0][0].set_ylabel("MSE loss (solid BP, dashed PC)")
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.suptitle(_title(ds), fontsize=7)
    fig.tight_layout()
    return fig
