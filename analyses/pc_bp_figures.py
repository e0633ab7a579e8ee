"""Figures of the PC–BP comparison ([`dynlab.analyses.pc_bp`][]), matplotlib.

The second grid axis is the depth $L$ (feed-forward) or the sequence length $T$ (recurrent,
PC through time vs BPTT): [`dynlab.analyses.pc_grid.grid_axis`][].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.analyses.pc_grid import grid_axis
from dynlab.figures import subplots, without_paths


def _title(ds: xr.Dataset) -> str:
    if grid_axis(ds).dim == "length":
        kind = f"RNN (gain {ds.attrs.get('gain', '')}) {ds.attrs.get('activation', '')}, PC through time vs BPTT"
    else:
        kind = (f"alpha={ds.attrs.get('alpha', '')}, {'residual' if ds.attrs.get('residual', 1) else 'MLP'} "
                f"{ds.attrs.get('activation', '')}")
    task = str(ds.attrs.get("task", ""))
    if grid_axis(ds).dim == "length":  # the grid's lengths, never one of them (datasets before the fix said "T=2")
        import re

        task = re.sub(r"\bT=\d+", "T=" + ", ".join(str(int(t)) for t in ds["length"].values), task, count=1)
    return (f"{ds.attrs.get('param', '')}, {kind}, {ds.attrs.get('energy', '')}, {ds.attrs.get('optimizer', '')} "
            f"— {without_paths(task)}")


def cosine_heatmap(ds: xr.Dataset):
    """Mean PC–BP gradient cosine over width (rows) x depth or length (columns), values annotated (Fig. 1)."""
    axis = grid_axis(ds)
    values = ds["mean_cosine"].values
    fig, ax = subplots(figsize=(1.2 * ds.sizes[axis.dim] + 2.5, 0.6 * ds.sizes["width"] + 1.8))
    im = ax.imshow(values, cmap="viridis", vmin=min(0.0, np.nanmin(values)) if np.isfinite(values).any() else 0, vmax=1,
                   origin="lower", aspect="auto")
    ax.set_xticks(range(ds.sizes[axis.dim]), [str(int(v)) for v in ds[axis.dim].values])
    ax.set_yticks(range(ds.sizes["width"]), [str(int(v)) for v in ds.width.values])
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            ax.text(j, i, "n/c" if v != v else f"{v:.3f}", ha="center", va="center", fontsize=7,
                    color="black" if v == v and v > 0.6 else "white")
    ax.set(xlabel=axis.long_name, ylabel="width N",
           title=f"cos(g_PC, g_BP), mean over {ds.sizes['seed']} seeds x {ds.sizes['step']} steps")
    fig.colorbar(im, ax=ax, label="cosine similarity")
    fig.suptitle(_title(ds), fontsize=7)
    fig.tight_layout()
    return fig


def rescaling_vs_l_over_n(ds: xr.Dataset):
    """s(θ) − 1 against L/N (or T/N) on log axes, one colour per depth (length), with the L/N line (Fig. 3)."""
    axis = grid_axis(ds)
    fig, ax = subplots(figsize=(5.2, 4.2))
    s1 = ds["s_minus_1"]
    if not np.isfinite(s1.values).any():
        ax.text(0.5, 0.5, "s(θ) is defined for linear networks only", ha="center", va="center", transform=ax.transAxes)
    else:
        mean = s1.mean(("seed", "step"))
        lo, hi = s1.min(("seed", "step")), s1.max(("seed", "step"))
        for v in ds[axis.dim].values:
            x = ds[axis.ratio].sel({axis.dim: v}).values
            m = mean.sel({axis.dim: v}).values
            # as lists: matplotlib's errorbar tests its first element with math.isfinite, which a
            # one-element array only passes with NumPy's deprecation warning (one width)
            err = [(m - lo.sel({axis.dim: v}).values).tolist(), (hi.sel({axis.dim: v}).values - m).tolist()]
            ax.errorbar(x, m, yerr=err, fmt="o-", ms=4, capsize=2, label=f"{axis.symbol} = {int(v)}")
        grid = np.geomspace(ds[axis.ratio].values.min(), ds[axis.ratio].values.max(), 50)
        ax.plot(grid, grid, "k--", lw=1, label=f"{axis.symbol} / N")
        ax.set(xscale="log", yscale="log", xlabel=f"{axis.symbol} / N", ylabel="s(θ) − 1  (tr(S)/d_out − 1)",
               title=f"rescaling; log-log slope {ds.attrs.get('rescaling_slope', float('nan')):.2f}")
        ax.legend(fontsize=7)
    fig.suptitle(_title(ds), fontsize=7)
    fig.tight_layout()
    return fig


def loss_curves(ds: xr.Dataset):
    """PC and BP training losses per step (mean over seeds), one panel per depth (length), one colour per width."""
    import matplotlib

    axis = grid_axis(ds)
    values = ds[axis.dim].values
    fig, axes = subplots(1, len(values), figsize=(3.6 * len(values), 3.4), squeeze=False, sharey=True)
    colors = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, ds.sizes["width"]))
    for ax, v in zip(axes[0], values):
        for c, n in zip(colors, ds.width.values):
            sel = ds.sel({"width": n, axis.dim: v}).mean("seed")
            ax.plot(sel.step, sel.loss_bp, color=c, lw=1.2, label=f"N={int(n)} BP")
            ax.plot(sel.step, sel.loss_pc, color=c, lw=1.2, ls="--", label=f"N={int(n)} PC")
        ax.set(xlabel="training step", title=f"{axis.symbol} = {int(v)}", yscale="log")
    axes[0][0].set_ylabel("loss (solid BP, dashed PC)")
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.suptitle(_title(ds), fontsize=7)
    fig.tight_layout()
    return fig


def overview(ds: xr.Dataset):
    """The figure ``dynlab plot`` draws for a ``pc-bp`` / ``pc-bptt`` dataset: the gradient cosine
    over the grid (``compare pc-bp`` also writes [`rescaling_vs_l_over_n`][] and
    [`loss_curves`][] beside it)."""
    return cosine_heatmap(ds)


def time_law(law: xr.Dataset):
    """The ``pc-time-law`` scenario's figure ([`dynlab.scenarios.pc_time_law`][]). Left: $s - 1$ against $T/N$ per recurrence (fitted slope in the legend; dashed: the large-$N$
    prediction). Right: $1 - \\cos$ against $N$ for each $T$, plain (dotted) and $T^{-1}$ (solid)."""
    import matplotlib.ticker

    fig, (left, right) = subplots(1, 2, figsize=(11, 4.2))
    ratio = law.T_over_N if "T_over_N" in law else law.length / law.width
    for rec in law.recurrence.values:
        sel = law.sel(recurrence=rec)
        x, y = np.asarray(ratio).ravel(), sel.s_minus_1.values.ravel()
        order = np.argsort(x)
        line, = left.plot(x[order], y[order], "o", ms=4, label=f"{rec}: slope {float(sel.slope):.2f}")
        theory = sel.s_minus_1_theory.values.ravel()
        if np.isfinite(theory).any():
            left.plot(x[order], theory[order], "--", lw=0.8, color=line.get_color())
    left.set(xscale="log", yscale="log", xlabel="T / N", ylabel="s - 1", title="energy rescaling (linear RNN, mean-field)")
    left.legend(fontsize=7)
    styles = {"plain": ":", "T^-1": "-"}
    for rec, style in styles.items():
        if rec not in law.recurrence.values:
            continue
        for i, length in enumerate(law.length.values):
            defect = 1 - law.mean_cosine.sel(recurrence=rec, length=length).values
            right.plot(law.width.values, np.maximum(defect, 1e-8), style, marker="o", ms=3, color=f"C{i}",
                       label=f"{rec}, T={int(length)}")
    right.set(xscale="log", yscale="log", xlabel="width N", ylabel="1 - cos(PC, BPTT)", title="alignment as N grows")
    right.set_xticks(law.width.values, [str(int(n)) for n in law.width.values])
    right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    right.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


FIGURES = {"cosine": cosine_heatmap, "rescaling": rescaling_vs_l_over_n, "loss": loss_curves}
"""The figures ``compare pc-bp`` writes beside its dataset, as ``<stem>_<name>.png``."""


def figure_paths(nc: Path) -> dict[str, Path]:
    """The figures written next to the dataset ``nc``: ``<stem>_cosine.png``, ``_rescaling``, ``_loss``."""
    return {name: nc.with_name(f"{nc.stem}_{name}.png") for name in FIGURES}


def pc_bp_summary(ds: xr.Dataset) -> str:
    """What the command line prints after a comparison (the registered summary of ``pc-bp`` and
    ``pc-bptt``): the mean gradient cosine per cell (width x depth or length; — where no step
    converged) and, when $s-1$ is defined, its log-log slope against $L/N$ (or $T/N$) with the theory's."""
    axis = grid_axis(ds)
    columns = [str(int(v)) for v in ds[axis.dim].values]
    width, corner = max(8, *(len(c) + 2 for c in columns)), "N \\ " + axis.symbol
    lines = [f"mean PC-BP gradient cosine (over {ds.sizes['seed']} seeds x {ds.sizes['step']} steps)",
             f"{corner:>8}" + "".join(f"{c:>{width}}" for c in columns)]
    for n in ds.width.values:
        row = ds.mean_cosine.sel(width=n).values
        lines.append(f"{int(n):>8}" + "".join(f"{'—' if v != v else f'{v:.4f}':>{width}}" for v in row))
    slope = ds.attrs.get("rescaling_slope", float("nan"))
    if slope == slope:
        theory = "1" if axis.dim == "depth" else "s - 1 ~ (T-1)/(gamma0^2 N) with the read-out at the last step"
        lines.append(f"log-log slope of s - 1 against {axis.symbol}/N: {slope:.3f} (s = tr(S)/d_out); "
                     f"{ds.attrs['rescaling_max_slope']:.3f} (s = lambda_max(S)); theory: {theory}")
    return "\n".join(lines)

