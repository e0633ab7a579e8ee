"""The bifurcation diagram and the printed summary of a ``continuation`` dataset."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots

__all__ = ["MARKERS", "NAMES", "continuation_figure", "continuation_summary", "stability_runs"]

MARKERS = {"fold": ("o", "F"), "flip": ("s", "PD"), "neimark-sacker": ("D", "NS"), "branch-point": ("^", "BP"),
           "cusp": ("*", "CP")}
"""Each kind of special point's marker and its label in the diagram (AUTO's abbreviations)."""

NAMES = {"fold": "fold", "flip": "flip", "neimark-sacker": "Neimark-Sacker point", "branch-point": "branch point",
         "cusp": "cusp"}
"""Each kind of special point in words."""


def stability_runs(stable: np.ndarray) -> list[tuple[int, int, bool]]:
    """The maximal runs of one stability along a branch, as ``(first, last, stable)`` with
    ``last`` inclusive; consecutive runs share their boundary point so that the drawn line is unbroken."""
    runs, start = [], 0
    for i in range(1, len(stable) + 1):
        if i == len(stable) or stable[i] != stable[start]:
            runs.append((start, min(i, len(stable) - 1), bool(stable[start])))
            start = i
    return runs


def continuation_figure(ds: xr.Dataset):
    """The parameter against the model's read-out (or the first principal component of the visited
    states: the dataset's ``diagram_y``), one colour per branch, stable stretches solid and
    unstable ones dashed, every special point marked and labelled (F fold, PD flip, NS
    Neimark-Sacker, BP branch point)."""
    import matplotlib
    from matplotlib.lines import Line2D

    fig, ax = subplots(figsize=(7, 4.5))
    colours = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for b in range(ds.sizes.get("branch", 0)):
        n = int(ds.n_points[b])
        p, y = ds.parameter.values[b, :n], ds.diagram_y.values[b, :n]
        stable = ds.n_unstable.values[b, :n] == 0
        period = int(ds.period[b])
        for first, last, is_stable in stability_runs(stable):
            ax.plot(p[first:last + 1], y[first:last + 1], linestyle="-" if is_stable else "--",
                    color=colours[b % len(colours)], linewidth=1.6 if period == 1 else 1.0,
                    label=f"branch {b + 1}" + ("" if period == 1 else f" (period {period})") if first == 0 else None)
    kinds = np.asarray(ds.special_kind.values, dtype=str)
    for kind in dict.fromkeys(kinds):
        marker, short = MARKERS.get(kind, ("x", kind))
        where = kinds == kind
        ax.plot(ds.special_parameter.values[where], ds.special_y.values[where], linestyle="none", marker=marker,
                color="black", markersize=7, label=f"{short}: {NAMES.get(kind, kind)}")
        for x, y in zip(ds.special_parameter.values[where], ds.special_y.values[where]):
            ax.annotate(short, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    symbol = ds.attrs.get("symbol", "p")
    ax.set_xlabel(f"{symbol}  ({ds.attrs.get('path', '')})", fontsize=8)
    ax.set_ylabel(ds.attrs.get("diagram_y", "y"))
    ax.set_title(f"continuation: {int(ds.n_branches)} branch(es) from {int(ds.n_seeds)} fixed point(s); "
                 f"{int(ds.n_folds)} fold(s)", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    style = [Line2D([], [], color="grey", linestyle="-", label="stable"),
             Line2D([], [], color="grey", linestyle="--", label="unstable")]
    ax.legend(handles=style + handles[-len(dict.fromkeys(kinds)):] if len(kinds) else style, fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def _stability(n: int, dim: int | None) -> str:
    if n < 0:
        return "?"
    if n == 0:
        return "stable point"
    if dim is not None and n >= dim:
        return "unstable point"
    return f"saddle ({n} unstable)"


def _a(words: str) -> str:
    return ("an " if words[0] in "aeiou" else "a ") + words


def continuation_summary(ds: xr.Dataset) -> str:
    """A header (the path, seeds, branches, counts of special points), then one line per special
    point, e.g. ``fold at u = 0.5328 (branch 1): a stable point and a saddle (1 unstable) meet``."""
    symbol = ds.attrs.get("symbol", "p")
    dim = int(ds.attrs["state_dim"]) if "state_dim" in ds.attrs else None
    periods = np.asarray(ds.period.values, int) if "period" in ds else np.zeros(0, int)
    lines = [f"continuation along {ds.attrs.get('path', 'a path')}",
             f"{int(ds.n_seeds)} fixed point(s) at {symbol} = {float(ds.attrs.get('start', np.nan)):g} seeded "
             f"{int(ds.n_branches)} branch(es)" + (f" ({int(np.sum(periods > 1))} of period-k cycles)"
                                                   if np.any(periods > 1) else "")
             + f"; {int(ds.n_folds)} fold(s), {int(ds.n_flips)} flip(s), {int(ds.n_neimark_sacker)} "
               f"Neimark-Sacker, {int(ds.n_branch_points)} branch point(s)"]
    beyond = int(ds.n_seeds_beyond_visited) if "n_seeds_beyond_visited" in ds else 0
    if beyond:
        lines.append(f"{beyond} fixed point(s) at the start lie beyond the visited states (saturated) and were not continued")
    kinds = np.asarray(ds.special_kind.values, dtype=str)
    order = np.argsort(ds.special_parameter.values, kind="stable")
    for i in order:
        kind, p, b = kinds[i], float(ds.special_parameter[i]), int(ds.special_branch[i])
        before, after = _stability(int(ds.special_unstable_before[i]), dim), _stability(int(ds.special_unstable_after[i]), dim)
        period = int(periods[b]) if b < len(periods) else 1
        on = f"branch {b + 1}" + ("" if period == 1 else f", period {period}")
        mu = complex(float(ds.special_multiplier_real[i]), float(ds.special_multiplier_imag[i]))
        if kind == "fold":
            what = f"{_a(before)} and {_a(after)} meet" if before != after else f"two branches meet ({before})"
        elif kind == "flip":
            what = f"a multiplier crosses -1: {before} -> {after}; a period-{2 * period} cycle is born"
        elif kind == "neimark-sacker":
            what = f"a complex pair crosses |mu| = 1 at angle {abs(np.angle(mu)):.4f} rad: {before} -> {after}"
        elif kind == "branch-point":
            what = f"branches cross (pitchfork or transcritical): {before} -> {after}"
        elif kind == "cusp":
            what = f"two fold curves meet at q = {float(ds.special_q[i]):.6g}"
        else:
            what = f"{before} -> {after}"
        lines.append(f"{NAMES.get(kind, kind)} at {symbol} = {p:.6g} ({on}): {what}")
    if not len(kinds):
        lines.append(f"no special point in {symbol} in {list(ds.attrs.get('span', []))}")
    return "\n".join(lines)
