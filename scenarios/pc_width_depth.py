"""Scenario ``pc-width-depth``: Innocenti et al.'s width/depth findings at full size, one verdict per claim.

Three PC-vs-BP comparisons ([`dynlab.analyses.pc_bp.compare_pc_bp`][]: separate PC and BP runs
from identical weights, closed-form equilibrated energy, Adam, one fixed MNIST batch of 64):

* ``mf-residual`` — the paper's Fig. 1/3 grid: linear residual networks, mean-field, α = 1/2,
  N ∈ {2, 8, 32, 128, 512, 2048} × L ∈ {2, 4, 8, 16, 32} × 3 seeds × 100 steps (most of the run's
  35 min on 2 CPU cores, measured);
* ``sp-mlp`` — the standard parameterisation, linear MLP, L = 5 (Figs. A.19/A.20);
* ``mf-mlp`` — mean-field MLPs without skips at L = 8 and 32 (Fig. A.7).

Each writes ``<name>.nc`` and its three figures (cosine heat map, s − 1 against L/N, loss curves);
``findings.nc`` holds one row per claim of the issue with the measured value, whether it holds, its
95% interval over seeds (leave-one-seed-out jackknife, Student t; for the rank correlation its hull with
a parametric bootstrap; none with one seed) and the
``margin``: how far that interval lies from the claim's threshold (> 0 wholly on the side where the
claim holds, < 0 wholly on the other, 0 straddling), and the same table is printed. A claim that
does not hold is reported, not tuned away.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.claims import Claim, Estimate, NotTestable, judge, scale_text
from dynlab.statistics import jackknife_interval
from dynlab.registry import register

COMPARISONS = {
    "mf-residual": dict(param="mf", alpha=0.5, residual=True),
    "sp-mlp": dict(param="sp", residual=False),
    "mf-mlp": dict(param="mf", residual=False),
}


def grids(*, widths, depths, sp_widths, sp_depth: int, mlp_widths, mlp_depths) -> dict[str, tuple[list, list]]:
    """Each comparison's grid, ``{name: (widths, depths)}``, in the order of [`COMPARISONS`][]."""
    return {"mf-residual": (list(widths), list(depths)), "sp-mlp": (list(sp_widths), [sp_depth]),
            "mf-mlp": (list(mlp_widths), list(mlp_depths))}


def task_data(task: str):
    """The fixed-batch task of ``params.task`` (``toy``, ``mnist``, ``cifar10``:
    [`dynlab.analyses.pc_bp.FEEDFORWARD_TASKS`][])."""
    from dynlab import registry
    from dynlab.analyses.pc_bp import FEEDFORWARD_TASKS as TASKS
    from dynlab.errors import ConfigError

    if task not in TASKS:
        raise ConfigError(f"params.task must be one of {', '.join(sorted(TASKS))}, got {task!r}")
    return registry.build("task", TASKS[task])


def run_pc_width_depth(
    out_dir,
    *,
    progress=None,
    task: str = "mnist",
    widths: list[int] = (2, 8, 32, 128, 512, 2048),
    depths: list[int] = (2, 4, 8, 16, 32),
    sp_widths: list[int] = (8, 32, 128, 512),
    sp_depth: int = 5,
    mlp_widths: list[int] = (16, 64, 256, 1024),
    mlp_depths: list[int] = (8, 32),
    seeds: int = 3,
    steps: int = 100,
    x64: bool = False,
) -> dict:
    """Run the three comparisons; returns ``{name: dataset}`` (all also written). The claims
    ([`claims`][]) are judged on them by the scenario runner, which writes ``findings.nc``."""
    from dynlab import store
    from dynlab.analyses import pc_bp_figures as figures_pc
    from dynlab.analyses.pc_bp import compare_pc_bp

    data = task_data(task)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cells = grids(widths=widths, depths=depths, sp_widths=sp_widths, sp_depth=sp_depth, mlp_widths=mlp_widths,
                  mlp_depths=mlp_depths)
    total = sum(len(w) * len(d) for w, d in cells.values())
    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first cell
    done, results = 0, {}
    for name, options in COMPARISONS.items():
        w, d = cells[name]

        def cell_done(_, __, info, name=name):
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, {"comparison": name, **info})

        ds = compare_pc_bp(data, list(w), list(d), seeds, progress=cell_done, steps=steps, x64=x64, **options)
        store.write_dataset(out / f"{name}.nc", ds)
        for figure, fn in (("cosine", figures_pc.cosine_heatmap), ("rescaling", figures_pc.rescaling_vs_l_over_n),
                           ("loss", figures_pc.loss_curves)):
            store.write_figure(out / f"{name}_{figure}.png", fn(ds))
        results[name] = ds
    return results


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


def _claims(params: dict) -> list[Claim]:
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


register("program", "pc-width-depth", "PC vs BP width/depth findings (Innocenti et al.), one verdict per claim",
         claims=_claims)(run_pc_width_depth)
