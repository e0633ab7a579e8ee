"""The figure and the printed summary of a ``dsa`` dataset."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from dynlab.figures import subplots

__all__ = ["dsa_figure", "dsa_summary"]

ANNOTATE_UP_TO = 12
"""Distance matrices of at most this many runs get their values written in the cells."""


def _null_centre(ds: xr.Dataset) -> float | None:
    """The typical null level of the pairs (the median of their finite levels), or None without a null."""
    if "null_level" not in ds:
        return None
    n = ds.sizes["run"]
    levels = ds["null_level"].values[~np.eye(n, dtype=bool)]
    levels = levels[np.isfinite(levels)]
    return float(np.median(levels)) if levels.size else None


def dsa_figure(ds: xr.Dataset):
    """Two panels: the distance matrix as a heat map labelled by run, and the eigenvalues of every
    run's fitted operator against the unit circle.

    **Enforces**: with a null, the colour scale is diverging and centred at the pairs' median null
    level (white), marked on the colour bar; distances inside the null are blue, beyond it red, and
    the top of the scale is at least twice the null level, so that distances all inside the null do
    not look large. Distinguishable pairs carry a ``*``."""
    import matplotlib
    from matplotlib.colors import TwoSlopeNorm

    labels = [str(v) for v in ds["run"].values]
    n = len(labels)
    d = ds["distance"].values
    side = max(5.0, 0.45 * n + 3.0)
    fig, (ax_d, ax_e) = subplots(1, 2, figsize=(2 * side + 1.0, side), gridspec_kw={"width_ratios": [1.2, 1]})
    centre = _null_centre(ds)
    top = max(float(np.nanmax(d)), 1e-12)
    if centre is None:
        im = ax_d.imshow(d, cmap="viridis", vmin=0.0, vmax=top)
        shade = lambda v: v < 0.6 * top  # noqa: E731  (white text on the dark end)
    else:
        norm = TwoSlopeNorm(vmin=0.0, vcenter=centre, vmax=max(top, 2.0 * centre))
        im = ax_d.imshow(d, cmap="RdBu_r", norm=norm)
        shade = lambda v: abs(norm(v) - 0.5) > 0.35  # noqa: E731  (white text on the saturated ends)
    ax_d.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    ax_d.set_yticks(range(n), labels, fontsize=8)
    marked = ds["distinguishable"].values if "distinguishable" in ds else np.zeros((n, n), bool)
    if n <= ANNOTATE_UP_TO:
        for i in range(n):
            for j in range(n):
                ax_d.text(j, i, f"{d[i, j]:.3g}" + ("*" if marked[i, j] else ""), ha="center", va="center", fontsize=7,
                          color="white" if shade(d[i, j]) else "black")
    bar = fig.colorbar(im, ax=ax_d, fraction=0.046, pad=0.04, label="DSA distance (angle, rad)")
    conv = ds["converged"].values
    off = ~np.eye(n, dtype=bool)
    title = (f"dynamical similarity (Procrustes over vector fields)\n{int(conv[off].sum())}/{int(off.sum())} "
             f"alignments converged; largest asymmetry {float(ds['asymmetry'].max()):.2g} rad")
    if centre is not None:
        bar.ax.axhline(centre, color="black", lw=1.5)
        ticks = [t for t in bar.get_ticks() if 0 <= t <= norm.vmax and abs(t - centre) > 0.08 * norm.vmax]
        bar.set_ticks([*ticks, centre], labels=[f"{t:g}" for t in ticks] + [f"null {centre:.2g}"])
        title += (f"\nwhite: the null level ({centre:.3g} rad, median over pairs; from {ds.attrs.get('null_draws', '?')}"
                  f" input draws per run)\n* distinguishable: beyond the pair's null (p ≤ {ds.attrs.get('alpha', 0.05):g})")
    else:
        title += "\nno null (null_draws < 2): no pair is tested"
    ax_d.set_title(title, fontsize=9)

    circle = np.linspace(0, 2 * np.pi, 200)
    ax_e.plot(np.cos(circle), np.sin(circle), color="0.6", lw=0.8)
    cmap = matplotlib.colormaps.get_cmap("tab10" if n <= 10 else "viridis")
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


PAIR_LINES_UP_TO = 10
"""Summaries of at most this many pairs give each pair's verdict on its own line."""


def dsa_summary(ds: xr.Dataset) -> str:
    """The distance matrix as a table (``*``: distinguishable), each run's fit and distance from
    itself, the verdict on every pair in words, the groups' (across cells), and the optimiser's
    convergence."""
    labels = [str(v) for v in ds["run"].values]
    n = len(labels)
    width = max(8, max(len(label) for label in labels))
    marked = ds["distinguishable"].values if "distinguishable" in ds else np.zeros((n, n), bool)
    lines = [f"dsa: {n} runs, rank {ds.attrs.get('rank', '?')}, {ds.attrs.get('n_delays', '?')} delays; "
             "distance = angle (rad) between the operators after the best orthogonal alignment"]
    lines.append(" " * width + " " + " ".join(f"{i:>7} " for i in range(n)))
    for i, label in enumerate(labels):
        lines.append(f"{label:>{width}} " + " ".join(f"{float(ds.distance[i, j]):>7.4f}" + ("*" if marked[i, j] else " ")
                                                      for j in range(n)) + f"   [{i}]")
    has_null = "self_distance" in ds and ds.sizes.get("draw_pair", 0) > 0
    lines.append(f"{'run':>{width}} {'explained':>10} {'fit error':>10} {'pcs var':>8}"
                 + (f"  {'distance from itself: median [range]':>36}" if has_null else ""))
    for i, label in enumerate(labels):
        row = (f"{label:>{width}} {float(ds.explained[i]):>10.4f} {float(ds.fit_error[i]):>10.4f} "
               f"{float(ds.pcs_variance[i]):>8.4f}")
        if has_null:
            own = ds["self_distance"].values[i]
            row += f"  {f'{np.median(own):.4f} [{own.min():.4f}, {own.max():.4f}]':>36}"
        lines.append(row)
    lines += _null_lines(ds, labels) if has_null else [
        "no null (null_draws < 2): no pair is tested; a run needs two draws of its own inputs to measure how far "
        "DSA puts it from itself"]
    lines += _group_lines(ds)
    off = ~np.eye(n, dtype=bool)
    conv = ds["converged"].values[off]
    own = f", {int(ds['self_converged'].sum())}/{ds['self_converged'].size} of the null's" if has_null else ""
    lines.append(f"alignment: {int(conv.sum())}/{conv.size} converged{own} (|W| <= {ds.attrs.get('tol', '?')}); "
                 f"largest |W| {float(ds.gradient_norm.values[off].max()):.2g}, asymmetry "
                 f"{float(ds.asymmetry.values[off].max()):.2g} rad")
    if "reproduced" in ds:
        again = ds["reproduced"].values[off]
        mine = ds["self_reproduced"].values.ravel() if has_null else np.zeros(0, int)
        every = np.concatenate([again, mine])
        lines.append(f"  optimum reached by 2 or more of the {ds.attrs.get('restarts', '?')} restarts in {int((every >= 2).sum())}"
                     f"/{every.size} alignments (the rest: by one, a smaller angle may exist: raise --restarts); the other "
                     f"restarts' local optima lie up to {float(ds.restart_spread.values[off].max()):.2g} rad above; the "
                     "optimiser's error enters the null as it enters the distances (both are its values)")
    return "\n".join(lines)


def _null_lines(ds: xr.Dataset, labels: list[str]) -> list[str]:
    """What the input-draw null says about every pair, in words ([`dynlab.analyses.dsa.null`][]),
    and the test's power at these draws."""
    alpha = float(ds.attrs.get("alpha", 0.05))
    per_run = ds.sizes["draw_pair"]
    k = ds.sizes.get("draw", 1)
    lines = [f"null: each run's distance from itself between two fresh draws of its inputs, {per_run} times "
             f"({ds.attrs.get('null_draws', '?')} draws of its own); a pair's distance is the mean over {k} draws of "
             f"the two runs' distance under independent inputs, the same comparison, and the pair is distinguishable "
             f"(*) when a permutation test against both runs' distances from themselves gives p <= {alpha:g}"]
    if math.comb(2 * per_run + k, k) * alpha < 1:
        lines.append(f"  {2 * per_run} distances from themselves per pair and {k} draws cannot give p <= {alpha:g}: "
                     f"no pair can be distinguishable; raise null_draws to {2 * math.ceil((1 / alpha - 1) / 2)} or more")
    pairs = [(i, j) for i in range(len(labels)) for j in range(i + 1, len(labels))]
    d, level, p = ds["distance"].values, ds["null_level"].values, ds["p_value"].values
    yes = ds["distinguishable"].values
    seen = ds["detectable"].values if "detectable" in ds else None
    if len(pairs) <= PAIR_LINES_UP_TO:
        for i, j in pairs:
            where = "beyond" if yes[i, j] else "inside"
            power = "" if seen is None else f"; it would be called so from {seen[i, j]:.4f} rad at 80% power"
            lines.append(f"  {labels[i]} vs {labels[j]}: {d[i, j]:.4f} rad, {where} the null (level {level[i, j]:.4f} "
                         f"rad, p = {p[i, j]:.2g}): {'distinguishable' if yes[i, j] else 'not distinguishable'}{power}")
    else:
        inside = [f"[{i}]-[{j}]" for i, j in pairs if not yes[i, j]]
        lines.append(f"  distinguishable: {len(pairs) - len(inside)} of {len(pairs)} pairs (* in the table); "
                     f"not distinguishable (inside the null): {', '.join(inside) or 'none'}")
    if seen is not None and pairs:
        lines += _power_lines(ds, pairs, k, 2 * per_run)
    return lines


def _power_lines(ds: xr.Dataset, pairs: list[tuple[int, int]], k: int, n: int) -> list[str]:
    r"""The test's power at these replicates, for the median pair, and the settings that would
    lower the smallest distance it sees ([`dynlab.analyses.dsa.null.detectable`][]: the excess over
    the null's mean scales as $s\sqrt{1/K + 1/n}$; the null's mean and spread $s$ as
    $1/\sqrt{\text{trials}}$, the estimation error of the operators)."""
    i, j = np.array(pairs).T
    seen, centre = ds["detectable"].values[i, j], ds["null_mean"].values[i, j]
    ok = np.isfinite(seen)
    if not ok.any():
        return []
    seen, centre = float(np.median(seen[ok])), float(np.median(centre[ok]))
    excess = seen - centre
    scale = lambda kk, nn: excess * math.sqrt(1 / kk + 1 / nn) / math.sqrt(1 / k + 1 / n)  # noqa: E731
    trials = ds.attrs.get("trials", "?")
    more_trials = f"--trials {2 * trials}: about {seen / math.sqrt(2):.4f}" if isinstance(trials, (int, np.integer)) else ""
    return [f"power: at {k} draws and {n} distances from themselves a pair is called distinguishable in 80% of "
            f"repetitions from {seen:.4f} rad ({excess:.4f} beyond its runs' distance from themselves, {centre:.4f}; "
            f"median over pairs); smaller differences are missed more often than not",
            f"  to see smaller ones: --draws {2 * k}: {centre + scale(2 * k, n):.4f}; --null-draws {2 * n}: "
            f"{centre + scale(k, 2 * n):.4f}; {more_trials} (a run's distance from itself falls as 1/sqrt(trials)); "
            f"rank and delays move the null and the distances together (benchmarks/dsa_power.py)"]


def _group_lines(ds: xr.Dataset) -> list[str]:
    """When the runs carry groups (cells of a sweep: their values other than the seed,
    [`dynlab.scenarios.across.by_group`][]): the mean distance between the runs of each pair of
    groups (within a group: between its replicates), as a table, and whether two groups are
    further apart than their replicates (the seed null), in words."""
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
    if "distance_group_p_value" not in ds:
        return lines
    alpha = float(ds.attrs.get("alpha", 0.05))
    p, floor = ds["distance_group_p_value"].values, ds["distance_group_p_floor"].values
    lines.append(f"groups against their replicates (permutation test over the runs of the two groups; p <= {alpha:g}: "
                 "further apart than their replicates)")
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            if not np.isfinite(p[a, b]):
                lines.append(f"  {names[a]} vs {names[b]}: not tested (no group has two runs)")
                continue
            verdict = "distinguishable" if p[a, b] <= alpha else "not distinguishable"
            note = (f" (the smallest p these runs allow is {floor[a, b]:.2g}: add replicates)" if floor[a, b] > alpha
                    else "")
            lines.append(f"  {names[a]} vs {names[b]}: p = {p[a, b]:.2g}, {verdict} beyond their replicates{note}")
    return lines
