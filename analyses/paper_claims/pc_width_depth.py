"""Innocenti et al.'s width/depth claims (Figs. 1/3, A.7, A.19/A.20), one verdict each, judged on the
three comparisons of the ``pc-width-depth`` program ([`dynlab.scenarios.pc_width_depth`][]):
``mf-residual``, ``sp-mlp`` and ``mf-mlp``. Each value's 95% interval is over seeds
(leave-one-seed-out jackknife, Student t; for the rank correlation its hull with a parametric
bootstrap; none with one seed)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import xarray as xr

from dynlab.claims import Claim, Estimate, NotTestable, judge, scale_text
from dynlab.statistics import jackknife_interval


LEVEL = 0.95
"""Confidence level of the interval of every claim's value."""
POPULATION = "seeds (weight initialisations)"
METHOD = "leave-one-seed-out jackknife, Student t (n - 1 df)"


def _wide_min(ds: xr.Dataset) -> float:
    cos = ds.mean_cosine
    return float(cos.where((cos.width >= 512) & (cos.depth <= 8)).min())


def _rank_correlation(datasets) -> Estimate:
    """Spearman's rho of the cells' mean cosine with L/N, cells of equal L/N pooled, with its interval
    over seeds ([`dynlab.statistics.rank_correlation_of_means`][]: leave-one-seed-out jackknife and a
    parametric bootstrap, which also sees the rank correlation's bias towards 0 under noise)."""
    from dynlab.statistics import rank_correlation_of_means

    ds = datasets["mf-residual"]
    per_seed = ds.cosine.mean("step", skipna=True).transpose("seed", "width", "depth").values
    ratio = np.broadcast_to(ds.L_over_N.transpose("width", "depth").values, per_seed.shape[1:])
    n = ds.sizes["seed"]
    ci = rank_correlation_of_means(ratio, per_seed, population=POPULATION, level=LEVEL)
    if not math.isfinite(ci.estimate):
        raise NotTestable("fewer than 3 distinct L/N with a finite cosine in every seed")
    if n < 2:
        return Estimate(ci.estimate, note="fewer than 2 seeds", level=LEVEL)
    return Estimate(ci.estimate, ci.low, ci.high, level=LEVEL, population=ci.population, method=ci.method)


def _seed_statistic(source: str, statistic: Callable[[xr.Dataset], float]) -> Callable:
    """A claim statistic on comparison ``source`` with its leave-one-seed-out interval ([`dynlab.statistics.jackknife_interval`][])."""

    def measure(datasets) -> Estimate:
        ds = datasets[source]
        value = float(statistic(ds))
        n = ds.sizes["seed"]
        if not math.isfinite(value):
            raise NotTestable("no such cells in this grid")
        if n < 2:
            return Estimate(value, note="fewer than 2 seeds", level=LEVEL)
        low, high = jackknife_interval(value, [statistic(without_seed(ds, i)) for i in range(n)], LEVEL)
        note = "" if math.isfinite(low) else "a leave-one-seed-out value is undefined"
        return Estimate(value, low, high, note=note, level=LEVEL, population=f"{n} {POPULATION}", method=METHOD)

    return measure


def claims(mlp_depth: int, scale: str = "") -> list[Claim]:
    """The paper's claims, in the order of ``findings.nc`` (``mlp_depth``: the deepest no-skip MLP)."""
    theory = "Innocenti et al.: PC and BP gradients align as N grows when L/N is small (mean-field, alpha = 1/2)"
    return [
        Claim("mf-wide-aligned", "mf residual: min mean cosine over N >= 512, L <= 8 (>= 0.99)",
              "Fig. 1/3: cos(PC, BP) -> 1 for N >> L", "min over those cells of the mean cosine over seeds and steps",
              _seed_statistic("mf-residual", _wide_min), lower=0.99, why=theory, scale=scale),
        Claim("mf-rank-correlation", "mf residual: rank correlation of mean cosine with L/N (decreasing: <= -0.8)",
              "Fig. 3: alignment falls with L/N",
              "Spearman correlation over the grid's distinct L/N (cells of equal L/N pooled; cells with a NaN seed out)",
              _rank_correlation, upper=-0.8,
              why="a strong monotone decrease; -0.8 leaves room for noise between neighbouring cells", scale=scale),
        Claim("mf-rescaling-slope", "mf residual: log-log slope of s - 1 against L/N (in [0.8, 1.2])",
              "Fig. 3: s - 1 proportional to L/N (slope 1)", "least-squares slope of log(s - 1) on log(L/N)",
              _seed_statistic("mf-residual", lambda ds: float(ds.attrs["rescaling_slope"])), lower=0.8, upper=1.2,
              why="slope 1 within 20%", scale=scale),
        Claim("sp-not-aligned", "sp MLP: mean cosine at the widest N (does not approach 1: < 0.9)",
              "Figs. A.19/A.20: under SP the cosine does not approach 1", "mean cosine at the widest N",
              _seed_statistic("sp-mlp", lambda ds: float(ds.mean_cosine.isel(depth=0)[-1])), upper=0.9, strict=True,
              why="clearly below the mean-field residual networks' >= 0.99", scale=scale),
        Claim("mf-mlp-breaks-down",
              f"mf MLP without skips, L = {mlp_depth}: best mean cosine over N (breaks down at any width: < 0.9)",
              "Fig. A.7: without skips alignment breaks down in depth", "the largest mean cosine over widths",
              _seed_statistic("mf-mlp", lambda ds: float(ds.mean_cosine.sel(depth=mlp_depth).max())), upper=0.9,
              strict=True, why="no width reaches the residual networks' alignment", scale=scale),
    ]


def without_seed(ds: xr.Dataset, i: int) -> xr.Dataset:
    """``ds`` without its ``i``-th seed, with ``mean_cosine`` and ``rescaling_slope`` recomputed as
    [`dynlab.analyses.pc_bp.compare_pc_bp`][] computes them (mean over the remaining seeds and steps)."""
    from dynlab.analyses.pc_bp import rescaling_slope

    sub = ds.isel(seed=[j for j in range(ds.sizes["seed"]) if j != i])
    sub["mean_cosine"] = sub["cosine"].mean(("seed", "step"), skipna=True)
    sub.attrs = {**sub.attrs, "rescaling_slope": rescaling_slope(sub)[0]}
    return sub


def findings(residual: xr.Dataset, sp: xr.Dataset, mlp: xr.Dataset, scale: str = "") -> xr.Dataset:
    """The paper's claims judged on the three comparisons ([`dynlab.claims.judge`][]): one row each with
    the value, its interval over seeds ([`dynlab.statistics.jackknife_interval`][], for the rank correlation
    [`dynlab.statistics.rank_correlation_of_means`][]; none with one seed), the thresholds,
    the margin and the verdict in words, e.g. "holds: 95% CI [0.9912, 0.995] lies 0.0012 above the
    threshold 0.99"."""
    data = {"mf-residual": residual, "sp-mlp": sp, "mf-mlp": mlp}
    return judge(claims(int(mlp.depth.max()), scale), data, paper="pc-width-depth", scenario="pc-width-depth")


def run_claims(params: dict) -> list[Claim]:
    """The claims of a run with ``params`` (the program's resolved parameters)."""
    return claims(max(params["mlp_depths"]), scale(params))


def scale(params: dict) -> str:
    """This run's substitutions against the paper's Fig. 1/3 protocol ([`dynlab.claims.scale_text`][])."""
    data = {"mnist": "MNIST", "cifar10": "CIFAR-10", "toy": "the PC toy task"}.get(params["task"], params["task"])
    files = ("" if params["task"] == "toy" else
             "; data: the files if present, else synthetic images (the datasets' attr 'task' says which)")
    return scale_text({
        "data": (data, "CIFAR-10"),
        "N <=": (max(params["widths"]), 2048), "L <=": (max(params["depths"]), 32),
        "seeds": (params["seeds"] if isinstance(params["seeds"], int) else len(params["seeds"]), 3),
        "steps": (params["steps"], 100), "precision": ("float64" if params["x64"] else "float32", "float64"),
    }) + files
