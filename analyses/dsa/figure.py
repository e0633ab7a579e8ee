"""The figure and the printed summary of a ``dsa`` dataset."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

__all__ = ["dsa_figure", "dsa_summary"]

ANNOTATE_UP_TO = 12
"""Distance matrices of at most this many runs get their values written in the cells."""


def dsa_figure(ds: xr.Dataset):
    """Two panels: the distance matrix as a heat map labelled by run, and the eigenvalues of every
    run's fitted operator against the unit circle."""
    labels = [str(v) for v in ds["run"].values]
    n = len(labels)
    d = ds["distance"].values
    side = max(5.0, 0.45 * n + 3.0)
    fig, (ax_d, ax_e) = plt.subplots(1, 2, figsize=(2 * side + 1.0, side), gridspec_kw={"width_ratios": [1.2, 1]})
    im = ax_d.imshow(d, cmap="viridis", vmin=0.0, vmax=max(float(np.nanmax(d)), 1e-12))
    ax_d.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    ax_d.set_yticks(range(n), labels, fontsize=8)
    if n <= ANNOTATE_UP_TO:
        top = float(np.nanmax(d)) or 1.0
        for i in range(n):
            for j in range(n):
                ax_d.text(j, i, f"{d[i, j]:.3g}", ha="center", va="center", fontsize=7,
                          color="white" if d[i, j] < 0.6 * top else "black")
    fig.colorbar(im, ax=ax_d, fraction=0.046, pad=0.04, label="DSA distance (angle, rad)")
    conv = ds["converged"].values
    off = ~np.eye(n, dtype=bool)
    ax_d.set_title(f"dynamical similarity (Procrustes over vector fields)\n{int(conv[off].sum())}/{int(off.sum())} "
                   f"alignments converged; largest asymmetry {float(ds['asymmetry'].max()):.2g} rad", fontsize=9)

    circle = np.linspace(0, 2 * np.pi, 200)
    ax_e.plot(np.cos(circle), np.sin(circle), color="0.6", lw=0.8)
    cmap = plt.get_cmap("tab10" if n <= 10 else "viridis")
    for i, label in enumerate(labels):
        ax_e.plot(ds["eigenvalue_real"].values[i], ds["eigenvalue_imag"].values[i], "o", ms=4, alpha=0.8,
                  color=cmap(i if n <= 10 else i / max(n - 1, 1)), label=label)
    ax_e.set_aspect("equal")
    ax_e.axhline(0, color="0.85", lw=0.6)
    ax_e.axvline(0, color="0.85", lw=0.6)
    ax_e.set(xlabel="Re λ", ylabel="Im λ", title=f"eigenvalues of each run's operator (rank {ds.sizes['eigen']})")
    if n <= 10:
        ax_e.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.suptitle(f"DSA: {ds.attrs.get('trials', '?')} trials of {ds.attrs.get('task', 'the task')}, "
                 f"{ds.attrs.get('n_delays', '?')} delays × {ds.attrs.get('delay_interval', '?')} steps, "
                 f"rank {ds.attrs.get('rank', '?')}, {ds.attrs.get('pcs', '?')} principal components", fontsize=9)
    fig.tight_layout()
    return fig


def dsa_summary(ds: xr.Dataset) -> str:
    """The distance matrix as a table, each run's fit, and the optimiser's convergence."""
    labels = [str(v) for v in ds["run"].values]
    n = len(labels)
    width = max(8, max(len(label) for label in labels))
    lines = [f"dsa: {n} runs, rank {ds.attrs.get('rank', '?')}, {ds.attrs.get('n_delays', '?')} delays; "
             "distance = angle (rad) between the operators after the best orthogonal alignment"]
    lines.append(" " * width + " " + " ".join(f"{i:>7}" for i in range(n)))
    for i, label in enumerate(labels):
        lines.append(f"{label:>{width}} " + " ".join(f"{float(ds.distance[i, j]):>7.4f}" for j in range(n)) + f"   [{i}]")
    lines.append(f"{'run':>{width}} {'explained':>10} {'fit error':>10} {'pcs var':>8}")
    for i, label in enumerate(labels):
        lines.append(f"{label:>{width}} {float(ds.explained[i]):>10.4f} {float(ds.fit_error[i]):>10.4f} "
                     f"{float(ds.pcs_variance[i]):>8.4f}")
    lines += _group_lines(ds)
    off = ~np.eye(n, dtype=bool)
    conv = ds["converged"].values[off]
    lines.append(f"alignment: {int(conv.sum())}/{conv.size} converged (|W| <= {ds.attrs.get('tol', '?')}); "
                 f"largest |W| {float(ds.gradient_norm.values[off].max()):.2g}, asymmetry "
                 f"{float(ds.asymmetry.values[off].max()):.2g} rad, spread over restarts "
                 f"{float(ds.restart_spread.values[off].max()):.2g} rad")
    return "\n".join(lines)


def _group_lines(ds: xr.Dataset) -> list[str]:
    """When the runs carry groups (cells of a sweep: their values other than the seed,
    [`dynlab.scenarios.across.by_group`][]): the mean distance between the runs of each pair of
    groups (within a group: between its replicates), as a table."""
    if "distance_by_group" not in ds:
        return []
    names = [str(g) for g in ds["run_group"].values]
    table = ds["distance_by_group"].values
    width = max(len(g) for g in names)
    lines = ["mean distance between groups (within a group: between its runs)",
             " " * width + " " + " ".join(f"{g:>{max(7, len(g))}}" for g in names)]
    for a, row in zip(names, table):
        cells = [f"{v:>{max(7, len(b))}.4f}" if np.isfinite(v) else f"{'—':>{max(7, len(b))}}" for v, b in zip(row, names)]
        lines.append(f"{a:>{width}} " + " ".join(cells))
    return lines
