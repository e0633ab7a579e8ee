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

from pathlib import Path

from dynlab.analyses.paper_claims.pc_width_depth import run_claims
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
    ([`dynlab.analyses.paper_claims.pc_width_depth`][]) are judged on them by the scenario runner,
    which writes ``findings.nc``."""
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


register("program", "pc-width-depth", "PC vs BP width/depth findings (Innocenti et al.), one verdict per claim",
         claims=run_claims)(run_pc_width_depth)
