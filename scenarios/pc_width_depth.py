"""Scenario ``pc-width-depth``: Innocenti et al.'s width/depth findings at full size, one verdict per claim.

Three PC-vs-BP comparisons (:func:`dynlab.analyses.pc_bp.compare_pc_bp`: separate PC and BP runs
from identical weights, closed-form equilibrated energy, Adam, one fixed MNIST batch of 64):

* ``mf-residual`` — the paper's Fig. 1/3 grid: linear residual networks, mean-field, α = 1/2,
  N ∈ {2, 8, 32, 128, 512, 2048} × L ∈ {2, 4, 8, 16, 32} × 3 seeds × 100 steps (most of the run's
  35 min on 2 CPU cores, measured);
* ``sp-mlp`` — the standard parameterisation, linear MLP, L = 5 (Figs. A.19/A.20);
* ``mf-mlp`` — mean-field MLPs without skips at L = 8 and 32 (Fig. A.7).

Each writes ``<name>.nc`` and its three figures (cosine heat map, s − 1 against L/N, loss curves);
``findings.nc`` holds one row per claim of the issue with the measured value and whether it holds,
and the same table is printed. A claim that does not hold is reported, not tuned away.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.registry import register

COMPARISONS = {
    "mf-residual": dict(param="mf", alpha=0.5, residual=True),
    "sp-mlp": dict(param="sp", residual=False),
    "mf-mlp": dict(param="mf", residual=False),
}


@register("program", "pc-width-depth", "PC vs BP width/depth findings (Innocenti et al.), one verdict per claim")
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
) -> dict:
    """Run the three comparisons; returns ``{name: dataset, "findings": dataset}`` (all also written)."""
    import click

    from dynlab import registry, store
    from dynlab.analyses import pc_bp_figures as figures_pc
    from dynlab.analyses.pc_bp import compare_pc_bp
    from dynlab.analyses.pc_bp import FEEDFORWARD_TASKS as TASKS
    from dynlab.errors import ConfigError

    if task not in TASKS:
        raise ConfigError(f"params.task must be one of {', '.join(sorted(TASKS))}, got {task!r}")
    data = registry.build("task", TASKS[task])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    grids = {"mf-residual": (widths, depths), "sp-mlp": (sp_widths, [sp_depth]), "mf-mlp": (mlp_widths, mlp_depths)}
    total = sum(len(w) * len(d) for w, d in grids.values())
    done, results = 0, {}
    for name, options in COMPARISONS.items():
        w, d = grids[name]

        def cell_done(_, __, info, name=name):
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, {"comparison": name, **info})

        ds = compare_pc_bp(data, list(w), list(d), seeds, progress=cell_done, steps=steps, **options)
        store.write_dataset(out / f"{name}.nc", ds)
        for figure, fn in (("cosine", figures_pc.cosine_heatmap), ("rescaling", figures_pc.rescaling_vs_l_over_n),
                           ("loss", figures_pc.loss_curves)):
            store.write_figure(out / f"{name}_{figure}.png", fn(ds))
        results[name] = ds
    results["findings"] = findings(results["mf-residual"], results["sp-mlp"], results["mf-mlp"])
    store.write_dataset(out / "findings.nc", results["findings"])
    click.echo(format_findings(results["findings"]))
    return results


def findings(residual: xr.Dataset, sp: xr.Dataset, mlp: xr.Dataset) -> xr.Dataset:
    """The issue's claims, each as ``(claim, value, holds)`` from the three comparisons' mean cosines and
    slopes (``value`` NaN and ``holds`` false where the grid has no cells the claim is about)."""
    from dynlab.statistics import spearman

    cos = residual.mean_cosine
    wide = cos.where((cos.width >= 512) & (cos.depth <= 8))
    ratio = residual.L_over_N.values.ravel()
    ranks = spearman(ratio, cos.values.ravel())[0]  # average ranks for ties, NaN cells left out
    slope = residual.attrs["rescaling_slope"]
    sp_cos = sp.mean_cosine.isel(depth=0)
    mf_deep = mlp.mean_cosine.sel(depth=mlp.depth.max())
    rows = [
        ("mf residual: min mean cosine over N >= 512, L <= 8 (>= 0.99)", float(wide.min()), float(wide.min()) >= 0.99),
        ("mf residual: rank correlation of mean cosine with L/N (decreasing: <= -0.8)", float(ranks), ranks <= -0.8),
        ("mf residual: log-log slope of s - 1 against L/N (in [0.8, 1.2])", float(slope), 0.8 <= slope <= 1.2),
        ("sp MLP: mean cosine at the widest N (does not approach 1: < 0.9)", float(sp_cos[-1]), float(sp_cos[-1]) < 0.9),
        (f"mf MLP without skips, L = {int(mlp.depth.max())}: best mean cosine over N (breaks down at any width: < 0.9)",
         float(mf_deep.max()), float(mf_deep.max()) < 0.9),
    ]
    claims, values, holds = zip(*rows)
    return xr.Dataset({"value": ("claim", np.asarray(values)), "holds": ("claim", np.asarray(holds, bool))},
                      coords={"claim": list(claims)}, attrs={"analysis": "pc-width-depth findings"})


def format_findings(ds: xr.Dataset) -> str:
    lines = ["claim | measured | holds"]
    for c, v, h in zip(ds.claim.values, ds.value.values, ds.holds.values):
        lines.append(f"{c} | {v:.4f} | {'yes' if h else 'NO'}" if np.isfinite(v) else f"{c} | n/a (no such cells) | -")
    return "\n".join(lines)
