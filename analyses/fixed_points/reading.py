r"""The reading line of a ``fixed-points`` dataset: what was found, in words, computed from it."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.analyses.fixed_points.coverage import unseen_points

__all__ = ["caveats", "continuum", "fixed_points_reading", "found", "nothing_kept"]

WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def _count(k: int) -> str:
    return WORDS.get(int(k), str(int(k)))


def continuum(ds: xr.Dataset) -> bool:
    r"""Whether the points read as a continuum (a line attractor) rather than as isolated points:
    at least 5 marginal points, at least half of all points, most of them found by one run only
    (every run ends at its own point of the continuum)."""
    if "stability" not in ds or ds.sizes.get("point", 0) == 0:
        return False
    marginal = np.asarray(ds["stability"].values, dtype=str) == "marginal"
    once = np.asarray(ds["basin_count"].values) == 1
    m = int(marginal.sum())
    return m >= 5 and m >= 0.5 * marginal.size and int((marginal & once).sum()) >= 0.5 * m


def nothing_kept(ds: xr.Dataset, option: str = "--q-max") -> str:
    """Why no point was kept, and the ``q_max`` (named as ``option``) that would keep the nearest."""
    n_ics = int(ds.attrs.get("n_ics", ds.sizes.get("ic", 0)))
    if "discarded_min_q" not in ds.attrs:  # a dataset written before dynlab recorded it
        return f"no point with q ≤ q_max = {float(ds.attrs['q_max']):.1e}"
    q_min = float(ds.attrs["discarded_min_q"])
    if not np.isfinite(q_min):
        return f"no point: every one of the {n_ics} minimisations ended at a non-finite q (the map diverges there)"
    runs = int(ds.attrs.get("discarded_min_q_runs", 0))
    keeps = float(ds.attrs["q_max_to_keep"])
    return (f"no point with q ≤ q_max = {float(ds.attrs['q_max']):.1e}: the smallest q reached is {q_min:.1e}, "
            f"where {runs} of {n_ics} runs stopped (one slow point); {option} {keeps:.0e} keeps it")


def caveats(ds: xr.Dataset) -> str:
    """What the reading line adds about the count's reach: that every start came from one basin
    (attr ``start_points`` 1) unless a second sampling confirmed the count, and that a second sampling did not confirm it (attr ``confirmed`` 0,
    [`dynlab.analyses.fixed_points.confirmation`][]); ``""`` otherwise."""
    if ds.sizes.get("point", 0) == 0:
        return ""
    text = ""
    if int(ds.attrs.get("start_points", 2)) <= 1 and int(ds.attrs.get("confirmed", -2)) != 1:
        text += "; every start came from one basin, so others may be unseen"
    if int(ds.attrs.get("confirmed", -2)) == 0 and int(ds.attrs.get("confirm_n_ics", 0)):
        new, missed = int(ds.attrs["confirm_n_new_stable"]), int(ds.attrs["confirm_n_missed_stable"])
        text += ("; not confirmed by a second sampling ("
                 + ", ".join(([f"{new} more stable"] if new else []) + ([f"{missed} not found again"] if missed else []))
                 + ")")
    return text


def fixed_points_reading(ds: xr.Dataset, option: str = "--q-max") -> str:
    r"""One line saying what a fixed-points dataset found, computed from its numbers: [`found`][],
    then its [`caveats`][]."""
    return found(ds, option) + caveats(ds)


def found(ds: xr.Dataset, option: str = "--q-max") -> str:
    r"""One line saying what a fixed-points dataset found, computed from its numbers.

    - no point kept: [`nothing_kept`][] (the smallest $q$ reached, the runs that stopped there,
      the `q_max` that keeps it, named as `option`);
    - a continuum ([`continuum`][]): "64 marginal points, one eigenvalue on the unit circle: a
      line attractor" (the most common number of marginal directions);
    - otherwise the points by class, saddles and unstable points with their unstable
      directions, and what the stable ones make: "3 points: 2 stable, 1 saddle with one unstable
      direction: 2 attractors (multistable)"; "1 stable fixed point: a single attractor";
    - then, when the Chao1 estimate (attr `n_unseen_estimate`) is 1 or more and the points are
      not a continuum, how many more are likely unseen;
    - points marked `beyond_visited` (far from every visited state, where a GRU's gates saturate
      and any state is nearly fixed) are read apart, so that they neither make a continuum nor
      hide the attractors among the visited states.
    """
    n = ds.sizes.get("point", 0)
    if n == 0:
        return nothing_kept(ds, option)
    if "beyond_visited" in ds and bool(ds["beyond_visited"].any()):
        beyond = np.asarray(ds["beyond_visited"].values, dtype=bool)
        far = (f"{int(beyond.sum())} more point{'s' if beyond.sum() > 1 else ''} far beyond the visited states "
               "(where the dynamics saturate, e.g. gates at 0 or 1; not reached from the trajectories)")
        if beyond.all():
            return f"no point near the visited states; {far}"
        near = ds.isel(point=np.flatnonzero(~beyond)).drop_vars("beyond_visited")
        once, twice, unseen = unseen_points(near["basin_count"].values)
        fixed = int(np.asarray(near["is_fixed"].values).sum())
        near.attrs.update(n_fixed=fixed, n_slow=near.sizes["point"] - fixed, n_found_once=once, n_found_twice=twice,
                          n_unseen_estimate=unseen)
        return found(near, option) + "; " + far
    classes = np.asarray(ds["stability"].values, dtype=str)
    unstable_dirs = np.asarray(ds["n_unstable"].values)
    n_fixed, n_slow = int(ds.attrs.get("n_fixed", n)), int(ds.attrs.get("n_slow", 0))
    kinds = f" ({n_fixed} fixed, {n_slow} slow)" if n_slow else ""
    if continuum(ds):
        marginal = classes == "marginal"
        k = int(np.bincount(np.asarray(ds["n_marginal"].values)[marginal]).argmax())
        shape = "a line attractor" if k == 1 else f"a continuum of points with {_count(k)} neutral directions"
        others = {c: int((classes == c).sum()) for c in ("stable", "saddle", "unstable") if (classes == c).any()}
        rest = ("; also " + ", ".join(f"{v} {c}" for c, v in others.items())) if others else ""
        return (f"{int(marginal.sum())} marginal points{kinds}, {_count(k)} eigenvalue{'s' if k > 1 else ''} "
                f"on the unit circle: {shape}{rest}")
    parts = []
    for c in ("stable", "marginal", "saddle", "unstable"):
        here = classes == c
        if not here.any():
            continue
        text = f"{int(here.sum())} {c}"
        if c in ("saddle", "unstable"):
            lo, hi = int(unstable_dirs[here].min()), int(unstable_dirs[here].max())
            span = _count(lo) if lo == hi else f"{lo}–{hi}"
            text += f" with {span} unstable direction{'s' if hi > 1 else ''}"
        parts.append(text)
    stable = int((classes == "stable").sum())
    if stable == 1:
        meaning = "a single attractor"
    elif stable > 1:
        meaning = f"{stable} attractors (multistable)"
    elif (classes == "marginal").any():
        meaning = "no stable point; neutral directions (a slow manifold or a ghost)"
    else:
        meaning = "no stable point: the dynamics settle at no point found (a cycle, chaos, or a point missed)"
    if n == 1:
        head = f"1 {classes[0]} {'fixed' if n_fixed else 'slow'} point"
        if classes[0] in ("saddle", "unstable"):
            head += parts[0][len(f"1 {classes[0]}"):]
    else:
        head = f"{n} points{kinds}: " + ", ".join(parts)
    line = f"{head}: {meaning}"
    unseen = float(ds.attrs.get("n_unseen_estimate", 0.0))
    if unseen >= 1:
        line += (f"; likely about {unseen:.0f} more unseen (Chao1: {ds.attrs['n_found_once']} found by one run, "
                 f"{ds.attrs['n_found_twice']} by two)")
    return line
