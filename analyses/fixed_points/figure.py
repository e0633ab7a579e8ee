"""The figure and the printed summary of a ``fixed-points`` dataset."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.analyses.fixed_points.coverage import unseen_points
from dynlab.analyses.fixed_points.reading import continuum, fixed_points_reading
from dynlab.figures import subplots

__all__ = ["EDGE_MARKERS", "MARGIN", "at_edge", "fixed_points_figure", "fixed_points_summary", "sampling_lines",
           "visited_limits"]

COLOURS = {"stable": "tab:blue", "marginal": "tab:green", "saddle": "tab:orange", "unstable": "tab:red"}


def _classes(ds: xr.Dataset) -> np.ndarray:
    return np.asarray(ds["stability"].values, dtype=str)


def _marker_style(cls: str, fixed: bool) -> dict:
    colour = COLOURS.get(cls, "black")
    return {"color": colour, "mfc": colour if fixed else "none", "mec": colour}


EDGE_MARKERS = {"left": "<", "right": ">", "bottom": "v", "top": "^"}
"""The marker of a point drawn on an edge of the state-space panel: it points to where the point lies."""

MARGIN = 0.08
"""The state-space panel's margin around the visited states, as a fraction of their range."""


def visited_limits(x: np.ndarray, y: np.ndarray, near: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """The state-space panel's axis limits: the visited states' range (``x``, ``y``) plus a margin
    of `MARGIN`. Points far beyond them would otherwise set the scale (a GRU's saturated "points"
    at components up to 50 shrink the visited region, and every attractor in it, to one blob). An
    axis along which the states do not move (a trajectory resting at a point) takes its range
    from the ``near`` points `[P, 2]` (those not beyond the visited states) too, else ±1 around it."""
    limits = []
    for values, extra in ((x, near[:, 0]), (y, near[:, 1])):
        lo, hi = float(np.min(values)), float(np.max(values))
        if hi - lo <= 1e-9 * max(1.0, abs(hi)) and extra.size:
            lo, hi = min(lo, float(extra.min())), max(hi, float(extra.max()))
        if hi - lo <= 1e-9 * max(1.0, abs(hi)):
            lo, hi = lo - 1.0, hi + 1.0
        pad = MARGIN * (hi - lo)
        limits.append((lo - pad, hi + pad))
    return limits[0], limits[1]


def at_edge(point: np.ndarray, xlim, ylim) -> tuple[tuple[float, float], str | None]:
    """Where a point is drawn in the state-space panel: itself inside the limits, else clipped onto
    the edge it lies beyond (the farther one, relative to the axis ranges, when beyond two), and
    that edge's name ([`EDGE_MARKERS`][])."""
    x, y = float(point[0]), float(point[1])
    over = {"left": (xlim[0] - x) / (xlim[1] - xlim[0]), "right": (x - xlim[1]) / (xlim[1] - xlim[0]),
            "bottom": (ylim[0] - y) / (ylim[1] - ylim[0]), "top": (y - ylim[1]) / (ylim[1] - ylim[0])}
    side = max(over, key=over.get)
    if over[side] <= 0:
        return (x, y), None
    return (float(np.clip(x, *xlim)), float(np.clip(y, *ylim))), side


def fixed_points_figure(ds: xr.Dataset):
    import matplotlib.lines
    import matplotlib.ticker

    r"""Three panels: the points in the top principal components of the trajectory, scaled by the
    visited states ([`visited_limits`][]; points beyond them on the edge, pointing to them); the
    Jacobian eigenvalues of every point against the unit circle; the speed $q$ of every point
    against the tolerances. Colour: stability class; filled markers: fixed points, open: slow
    points. The legend names only what is drawn."""
    fig, (ax_p, ax_e, ax_q) = subplots(1, 3, figsize=(15, 5.2))
    classes = _classes(ds)
    fixed = ds["is_fixed"].values.astype(bool)
    n_points = ds.sizes.get("point", 0)

    # 1. state space
    drawn: list[tuple[str, bool]] = []  # (class, fixed) of every point drawn, for a legend of only those
    outside = 0
    if "trajectory_pcs" in ds and ds.sizes.get("pc", 0) >= 1:
        traj = ds["trajectory_pcs"].values
        pts = ds["point_pcs"].values
        ratio = ds["pc_variance_ratio"].values
        two = traj.shape[1] >= 2
        tx, ty = (traj[:, 0], traj[:, 1]) if two else (np.arange(traj.shape[0]), traj[:, 0])
        ax_p.plot(tx, ty, ".-", color="0.65", lw=0.25, ms=1.5, alpha=0.6, label="trajectory (visited states)")
        ax_p.plot(tx[:1], ty[:1], "^", color="0.3", ms=6, label="start")
        ax_p.plot(tx[-1:], ty[-1:], "x", color="0.3", ms=6, label="end")
        beyond = np.asarray(ds["beyond_visited"].values, bool) if "beyond_visited" in ds else np.zeros(n_points, bool)
        if two:
            xlim, ylim = visited_limits(tx, ty, pts[~beyond, :2] if n_points else np.zeros((0, 2)))
            ax_p.set(xlim=xlim, ylim=ylim)
            for i in range(n_points):
                (x, y), side = at_edge(pts[i, :2], xlim, ylim)
                style = _marker_style(classes[i], fixed[i])
                if side is None:
                    ax_p.plot(x, y, "o", ms=7, mew=1.5, **style)
                else:  # far away: on the edge, pointing to where it lies
                    ax_p.plot(x, y, EDGE_MARKERS[side], ms=6, mew=1.0, clip_on=False, gid="beyond the axes", **style)
                    outside += 1
                drawn.append((classes[i], bool(fixed[i])))
            ax_p.set(xlabel=f"PC1 ({ratio[0]:.0%} of variance)", ylabel=f"PC2 ({ratio[1]:.0%} of variance)")
        else:
            ax_p.set(xlabel="sample", ylabel=f"PC1 ({ratio[0]:.0%} of variance)")
            for i in range(n_points):
                ax_p.axhline(pts[i, 0], color=COLOURS.get(classes[i], "k"), ls="-" if fixed[i] else ":")
                drawn.append((classes[i], bool(fixed[i])))
        ax_p.set_title("points in the trajectory's principal components"
                       + (f"\n({outside} outside these axes: on the edge, pointing to them)" if outside else ""),
                       fontsize=10)
    elif n_points:  # a dataset of the core alone: the points in their own coordinates
        pts = ds["points"].values
        if pts.shape[1] > 2:
            centred = pts - pts.mean(axis=0)
            pts = centred @ np.linalg.svd(centred, full_matrices=False)[2][:2].T if len(pts) > 1 else pts[:, :2]
            labels = ("PC1 of the points", "PC2 of the points")
        else:
            labels = ("state component 0", "state component 1")
        pts = pts if pts.shape[1] == 2 else np.column_stack([pts[:, 0], np.zeros(len(pts))])
        for i in range(n_points):
            ax_p.plot(pts[i, 0], pts[i, 1], "o", ms=7, mew=1.5, **_marker_style(classes[i], fixed[i]))
            drawn.append((classes[i], bool(fixed[i])))
        ax_p.set(xlabel=labels[0], ylabel=labels[1])
        ax_p.set_title("points in state space (no trajectory in this dataset)", fontsize=10)
    shown = {c for c, _ in drawn}
    handles = [matplotlib.lines.Line2D([], [], ls="", marker="o", **_marker_style(c, True), label=c) for c in COLOURS if c in shown]
    if any(f for _, f in drawn):
        handles.append(matplotlib.lines.Line2D([], [], ls="", marker="o", color="k", mfc="k", label="fixed (q ≤ q_tol)"))
    if any(not f for _, f in drawn):
        handles.append(matplotlib.lines.Line2D([], [], ls="", marker="o", color="k", mfc="none", label="slow (q_tol < q ≤ q_max)"))
    if outside:
        handles.append(matplotlib.lines.Line2D([], [], ls="", marker=">", color="k", mfc="none", label="beyond the axes (at the edge)"))
    ax_p.legend(handles=ax_p.get_legend_handles_labels()[0] + handles, fontsize=7, loc="upper center",
                bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)

    # 2. eigenvalues
    theta = np.linspace(0, 2 * np.pi, 400)
    ax_e.plot(np.cos(theta), np.sin(theta), color="0.4", lw=1, label="|μ| = 1")
    re, im = ds["eig_real"].values, ds["eig_imag"].values
    for i in range(n_points):
        ax_e.plot(re[i], im[i], "o", ms=3.5, alpha=0.7, **_marker_style(classes[i], fixed[i]))
    ax_e.axhline(0, color="0.85", lw=0.6, zorder=0)
    ax_e.axvline(0, color="0.85", lw=0.6, zorder=0)
    ax_e.set(xlabel="Re μ", ylabel="Im μ", aspect="equal")
    ax_e.set_title("Jacobian eigenvalues at each point (|μ| > 1: unstable)", fontsize=10)
    ax_e.legend(fontsize=7, loc="upper left")

    # 3. speed
    q = ds["q"].values
    floor = np.finfo(float).tiny
    for i in range(n_points):
        ax_q.plot(i, max(q[i], floor), "o", ms=6, mew=1.5, **_marker_style(classes[i], fixed[i]))
    ax_q.axhline(ds.attrs["q_tol"], color="k", ls="--", lw=0.8, label=f"q_tol = {ds.attrs['q_tol']:.0e} (fixed below)")
    ax_q.axhline(ds.attrs["q_max"], color="k", ls=":", lw=0.8, label=f"q_max = {ds.attrs['q_max']:.0e} (kept below)")
    ax_q.set_yscale("log")
    ax_q.set_xlim(-0.5, max(n_points, 1) - 0.5)
    ax_q.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True, min_n_ticks=1))
    ax_q.set(xlabel="point (by increasing q)", ylabel="q = ‖F(h*) − h*‖² / 2")
    discarded = int(np.sum(ds["ic_point"].values < 0)) if "ic_point" in ds else 0
    note = f"\n({discarded} of {ds.sizes['ic']} minimisations ended above q_max: discarded)" if discarded else ""
    ax_q.set_title(f"speed at each point: {int(fixed.sum())} fixed, {int((~fixed).sum())} slow{note}", fontsize=10)
    ax_q.legend(fontsize=7, loc="lower right")
    if n_points == 0:
        for ax in (ax_p, ax_q):
            ax.text(0.5, 0.5, "no point with q ≤ q_max", ha="center", va="center", transform=ax.transAxes)
        q_min = float(ds.attrs.get("discarded_min_q", np.nan))
        if np.isfinite(q_min):
            ax_q.axhline(q_min, color="tab:purple", ls="-", lw=0.8,
                         label=f"smallest q reached = {q_min:.1e} ({ds.attrs['discarded_min_q_runs']} runs)")
            ax_q.legend(fontsize=7, loc="lower right")

    title = "fixed and slow points" + (f" — {ds.attrs['model']}" if ds.attrs.get("model") else "")
    details = [ds.attrs.get("protocol", ""), f"points at {ds.attrs['input']}" if "input" in ds.attrs else "",
               f"{ds.attrs.get('n_ics', '?')} initial states"]
    fig.suptitle(title + "\n" + "; ".join(d for d in details if d) + "\n" + fixed_points_reading(ds, "q_max"),
                 fontsize=9)
    fig.tight_layout()
    return fig


def sampling_lines(ds: xr.Dataset) -> list[str]:
    """What the search could see, in words: a line when every start came from one input condition
    or the unperturbed starts all ended at one point (one basin), with how to sample more; and the
    confirmation's line ([`dynlab.analyses.fixed_points.confirmation`][]). Nothing for a dataset
    that does not record them."""
    lines = []
    one_input = int(ds.attrs.get("one_input_condition", 0)) == 1
    one_basin = "start_points" in ds.attrs and int(ds.attrs["start_points"]) <= 1
    if one_input or one_basin:
        why = ([f"from one input condition ({ds.attrs.get('protocol', '')})"] if one_input else []) + (
            ["from one basin (the starts taken as visited all ended at one point)"] if one_basin else [])
        lines.append("sampling: every start came " + " and ".join(why) + "; Chao1 counts only the basins the starts "
                     "reached, so points whose basins they did not reach are not in it. To sample more: --input "
                     "task=NAME (a task's inputs), --input noise=STD, or wider --scales")
    confirmed = int(ds.attrs.get("confirmed", -2))
    if confirmed == -1:
        lines.append("confirmation: not run (--no-confirm): the count is not confirmed")
    elif confirmed in (0, 1):
        n_ics, found = int(ds.attrs["confirm_n_ics"]), int(ds.attrs["confirm_n_stable"])
        second = f"a second, independent sampling ({n_ics} starts along the slowest directions of the points found)"
        new, missed = int(ds.attrs["confirm_n_new_stable"]), int(ds.attrs["confirm_n_missed_stable"])
        if confirmed:
            lines.append(f"confirmation: {second} found the same {found} stable point(s) near the visited states: "
                         "confirmed")
        elif n_ics == 0:
            lines.append("confirmation: NOT confirmed: no point near the visited states to sample around")
        else:
            diff = ", ".join(([f"{new} that this search did not find"] if new else [])
                             + ([f"not {missed} of this search's"] if missed else []))
            lines.append(f"confirmation: NOT confirmed: {second} found {found} stable point(s) near the visited "
                         f"states ({diff}); more --ics, wider --scales or another --input would settle it")
    return lines


def fixed_points_summary(ds: xr.Dataset, max_rows: int = 12) -> str:
    """A table of the points (q, fixed/slow, class, unstable directions, largest |μ|, basin count),
    the completeness estimate, what the sampling could see and its confirmation
    ([`sampling_lines`][]), and the reading line
    ([`fixed_points_reading`][dynlab.analyses.fixed_points.reading.fixed_points_reading]) last."""
    classes = _classes(ds)
    n = ds.sizes.get("point", 0)
    rounds = f" ({ds.attrs['rounds_run']} rounds)" if int(ds.attrs.get("rounds_run", 1)) > 1 else ""
    lines = [f"fixed-points: {n} point(s) ({ds.attrs['n_fixed']} fixed, {ds.attrs['n_slow']} slow) "
             f"from {ds.attrs['n_ics']} initial states{rounds}; q_tol = {ds.attrs['q_tol']:.1e}, "
             f"q_max = {ds.attrs['q_max']:.1e}, unique_tol = {ds.attrs['unique_tol']:.1e}, "
             f"marginal band |μ| = 1 ± {ds.attrs['marginal_tol']:.1e}"]
    if "input" in ds.attrs:
        lines.append(f"at {ds.attrs['input']}; {ds.attrs.get('protocol', '')}")
    discarded = int(np.sum(ds["ic_point"].values < 0))
    if discarded:
        lines.append(f"{discarded} minimisation(s) ended with q > q_max and were discarded")
    beyond = np.asarray(ds["beyond_visited"].values, dtype=bool) if "beyond_visited" in ds else np.zeros(n, bool)
    near = ds.isel(point=np.flatnonzero(~beyond))
    if "n_unseen_estimate" in ds.attrs and near.sizes.get("point", 0):
        once, twice, unseen = unseen_points(near["basin_count"].values)
        among = f" among the {near.sizes['point']} near the visited states" if beyond.any() else ""
        lines.append(f"completeness{among}: {once} point(s) found by one run, {twice} by two: about {unseen:.3g} "
                     "unseen (Chao1)"
                     + ("" if unseen < 1 else " — a continuum of marginal points, not missing ones" if continuum(near)
                        else " — points are likely missing; more --ics or wider --scales would find them"))
    lines += sampling_lines(ds)
    if n:
        lines.append(f"{'point':>5} {'q':>10} {'kind':>5} {'class':>9} {'unstable':>8} {'max|μ|':>8} {'basin':>5}")
    for i in range(min(n, max_rows)):
        lines.append(f"{i:>5} {float(ds.q[i]):>10.2e} {'fixed' if bool(ds.is_fixed[i]) else 'slow':>5} "
                     f"{classes[i]:>9} {int(ds.n_unstable[i]):>8} {float(ds.eig_abs[i, 0]):>8.4f} "
                     f"{int(ds.basin_count[i]):>5}")
    if n > max_rows:
        lines.append(f"... {n - max_rows} more")
    counts = {c: int(np.sum(classes == c)) for c in COLOURS if np.any(classes == c)}
    if counts:
        lines.append("classes: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    lines.append(fixed_points_reading(ds))
    return "\n".join(lines)
