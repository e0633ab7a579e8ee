r"""Scenario ``elm-budget``: the fixed-budget N–k_e trade-off of the ELM network scaling paper.

At a fixed layer budget $P = N(k_e + k_c)$ a wider network has smaller neurons: sweeping the
memory size $d_m$ (with $d_{mlp} = 2 d_m$, so $k_e$ grows with $d_m$) and setting
$N = \lfloor P / (k_e + k_c) \rfloor$ ([`dynlab.units.elm_net.budget_config`][],
``solve_for="hidden"``) traces the paper's Fig. 3 curves. Each (budget, $d_m$, seed) is one
``elm-net`` trained with BPTT on ``task`` (synthetic SHD-Adding by default, the real files when
present; ``charlm`` for character-level language modelling); its final held-out loss is a
point of the joint affine fit $L \approx c_0 - c_1 I_{\rm rep}(k_e; P, k_c)$
([`dynlab.analyses.elm_scaling.fit_i_rep`][], paper App. A.4).

Seeds of one (budget, $d_m$) train together as one vmapped computation
([`dynlab.train.train_seeds`][]). A combination whose budget cannot hold one neuron is an
error before any training starts.

Writes ``runs/P<budget>-dm<d_m>-seed<k>/`` (run directories), ``budget.nc`` (dims ``budget``,
``d_m``, ``seed``: ``loss``, the task metric, ``N``, ``k_e``, ``k_c``, ``P``), ``i_rep_fit.nc``
and ``i_rep_fit.png`` (losses against $k_e$ per budget with the fitted curves and their optima).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.provenance import stamp
from dynlab.claims import Claim, Estimate, NotTestable, scale_text
from dynlab.registry import register

TASKS = {  # defaults that make each task CPU-sized; [params] task_options override them
    "shd-adding": {"channel_pool": 5, "bin_ms": 20},
    "charlm": {"reset_steps": 500},
}


def run_configs(
    *,
    budgets: list[int] = (8_000, 16_000, 32_000),
    d_ms: list[int] = (2, 5, 10, 20),
    seeds: list[int] = (0, 1),
    task: str = "shd-adding",
    task_options: dict | None = None,
    model: dict | None = None,
    steps: int = 600,
    batch_size: int = 32,
    lr: float = 5e-3,
    eval_size: int = 512,
) -> dict[tuple[int, int], list[dict]]:
    """The runs [`run_elm_budget`][] trains: ``(budget, d_m)`` -> one run config per seed (what
    [`dynlab.experiment.build`][] takes), $N$ from [`dynlab.units.elm_net.budget_config`][]; every
    combination is checked (built abstractly) before it returns."""
    from dynlab import experiment
    from dynlab.units.elm_net import budget_config

    task_section = {"name": task, **TASKS.get(task, {}), **(task_options or {})}
    train_cfg = {"steps": steps, "batch_size": batch_size, "lr": lr, "clip": 1.0, "eval_every": steps,
                 "eval_size": eval_size, "log_every": min(50, steps), "checkpoint_every": steps}
    configs = {}
    for b in budgets:  # every combination is built (checked) before any training
        for d in d_ms:
            section = {"unit": "elm-net", **budget_config(int(b), d_m=int(d), **(model or {}))}
            configs[int(b), int(d)] = [{"seed": int(s), "model": section, "task": task_section,
                                        "rule": {"name": "bptt"}, "train": train_cfg} for s in seeds]
            experiment.check(configs[int(b), int(d)][0])
    return configs


def check_params(*, budgets=(8_000, 16_000, 32_000), d_ms=(2, 5, 10, 20), seeds=(0, 1), fit: bool = True,
                 **_) -> None:
    """What [`run_elm_budget`][] checks before any training (the scenario runner calls it when it
    reads the file): the I_rep fit's at least 4 trained networks (budgets x d_ms x seeds)."""
    from dynlab.errors import ConfigError

    n_nets = len(budgets) * len(d_ms) * len(seeds)
    if fit and n_nets < 4:  # what _fit needs
        raise ConfigError(f"elm-budget: the I_rep fit needs at least 4 trained networks (budgets x d_ms x seeds), "
                          f"got {len(budgets)} x {len(d_ms)} x {len(seeds)} = {n_nets}; add d_ms, budgets or seeds, "
                          "or set params.fit=false")


def run_elm_budget(
    out_dir,
    *,
    progress=None,
    budgets: list[int] = (8_000, 16_000, 32_000),
    d_ms: list[int] = (2, 5, 10, 20),
    seeds: list[int] = (0, 1),
    task: str = "shd-adding",
    task_options: dict | None = None,
    model: dict | None = None,
    steps: int = 600,
    batch_size: int = 32,
    lr: float = 5e-3,
    eval_size: int = 512,
    fit: bool = True,
) -> dict:
    """Train every (budget, d_m, seed), collect the held-out losses, fit I_rep; returns
    ``{"budget": dataset, "i_rep_fit": dataset}`` (also written to ``out_dir``)."""
    from dynlab import experiment, store
    from dynlab.errors import DivergenceError
    from dynlab.train import train_seeds

    check_params(budgets=budgets, d_ms=d_ms, seeds=seeds, fit=fit)
    budgets, d_ms, seeds = [int(b) for b in budgets], [int(d) for d in d_ms], [int(s) for s in seeds]
    out = Path(out_dir)
    configs = run_configs(budgets=budgets, d_ms=d_ms, seeds=seeds, task=task, task_options=task_options, model=model,
                          steps=steps, batch_size=batch_size, lr=lr, eval_size=eval_size)
    shape = (len(budgets), len(d_ms), len(seeds))
    loss = np.full(shape, np.nan)
    metric_values = np.full(shape, np.nan)
    counts = {k: np.zeros(shape[:2], np.int64) for k in ("N", "k_e", "k_c", "P")}
    metric, source = None, ""
    t0 = time.perf_counter()
    if progress is not None:
        progress(0, len(budgets) * len(d_ms), {})  # the total from the start, not after the first cell
    for i, b in enumerate(budgets):
        for j, d in enumerate(d_ms):
            exps = [experiment.build(c) for c in configs[b, d]]
            source = source or exps[0].task.describe()
            pc = exps[0].model.cells[0].param_count()
            for k in counts:
                counts[k][i, j] = pc[k]
            dirs = [out / "runs" / f"P{b}-dm{d}-seed{s}" for s in seeds]
            for run_dir in dirs:
                run_dir.mkdir(parents=True, exist_ok=True)
            for s_idx, res in enumerate(train_seeds(exps, dirs)):
                if isinstance(res, DivergenceError):
                    continue  # stays NaN: the fit ignores it
                metric = res.metrics.attrs["metric"]
                loss[i, j, s_idx] = res.metrics.eval_loss.values[-1]
                metric_values[i, j, s_idx] = res.metrics[f"eval_{metric}"].values[-1]
            if progress is not None:
                progress(i * len(d_ms) + j + 1, len(budgets) * len(d_ms),
                         {"P": b, "d_m": d, "N": int(counts["N"][i, j]), "loss": float(np.nanmean(loss[i, j])),
                          "s": time.perf_counter() - t0})
    dims3, dims2 = ("budget", "d_m", "seed"), ("budget", "d_m")
    ds = xr.Dataset(
        {"loss": (dims3, loss, {"long_name": "held-out loss at the end of training"}),
         metric or "metric": (dims3, metric_values, {"long_name": f"held-out {metric}"}),
         "N": (dims2, counts["N"], {"long_name": "neurons (hidden)"}),
         "k_e": (dims2, counts["k_e"], {"long_name": "effective parameters per neuron"}),
         "k_c": (dims2, counts["k_c"], {"long_name": "connectivity parameters per neuron"}),
         "P": (dims2, counts["P"], {"long_name": "layer parameters N (k_e + k_c)"})},
        coords={"budget": budgets, "d_m": d_ms, "seed": seeds},
    )
    ds = stamp(ds, analysis="elm-budget", config={"task": task, "steps": steps, "metric": metric or "", "data": source})
    store.write_dataset(out / "budget.nc", ds)
    results = {"budget": ds}
    if fit:
        results["i_rep_fit"] = _fit(ds, out)
    return results


def _fit(ds: xr.Dataset, out: Path) -> xr.Dataset:
    """The joint I_rep fit over every finite point, one group (curve) per budget."""
    from dynlab import store
    from dynlab.analyses.elm_scaling import fit_i_rep
    from dynlab.analyses.elm_scaling_figures import i_rep_fit
    from dynlab.errors import ConfigError

    st = ds.stack(point=("budget", "d_m", "seed"))
    ok = np.isfinite(st.loss.values)
    if ok.sum() < 4:
        raise ConfigError(f"the I_rep fit needs at least 4 finite losses, got {int(ok.sum())}")
    fit = fit_i_rep(st.loss.values[ok], st.k_e.values[ok], st.k_c.values[ok], st.N.values[ok],
                    group=[f"P={b:g}" for b in st.budget.values[ok]], budget=st.budget.values[ok])
    store.write_dataset(out / "i_rep_fit.nc", fit)
    store.write_figure(out / "i_rep_fit.png", i_rep_fit(fit))
    return fit


# ---------------------------------------------------------------------------------------------
# The scaling paper's claims (dynlab.claims), judged on budget.nc and i_rep_fit.nc


def _interior_fraction(datasets) -> Estimate:
    """Statistic: the fraction of budgets whose lowest mean held-out loss over d_m is at an interior d_m."""
    ds = datasets["budget"]
    if ds.sizes["d_m"] < 3:
        raise NotTestable("an interior optimum needs at least 3 values of d_m")
    mean = ds.loss.mean("seed")
    ok = np.isfinite(mean).all("d_m")
    if not bool(ok.any()):
        raise NotTestable("no budget with a finite loss at every d_m")
    best = mean.sel(budget=ok).argmin("d_m").values
    interior = (best > 0) & (best < ds.sizes["d_m"] - 1)
    return Estimate(float(interior.mean()), note=f"{int(interior.sum())} of {interior.size} budgets; losses are "
                                                 f"means over {ds.sizes['seed']} seed(s)")


def _optimum_moves(datasets) -> Estimate:
    """Statistic: Spearman correlation between the budget and the fitted optimum k_e_opt (one per budget)."""
    from dynlab.statistics import spearman

    fit = datasets.get("i_rep_fit")
    if fit is None:
        raise NotTestable("the I_rep fit was not run (params.fit = false)")
    budgets = fit.curve_budget.values
    if np.unique(budgets).size < 2:
        raise NotTestable("needs at least 2 budgets")
    return Estimate(float(spearman(budgets, fit.k_e_opt.values)[0]),
                    note="fitted optima, point estimates (the fit's bootstrap is off by default)")


def _pearson(datasets) -> Estimate:
    fit = datasets.get("i_rep_fit")
    if fit is None:
        raise NotTestable("the I_rep fit was not run (params.fit = false)")
    return Estimate(float(fit.pearson_r), note=f"{fit.sizes['point']} points")


def claims(params: dict) -> list[Claim]:
    """The scaling paper's fixed-budget claims at these parameters."""
    task = params["task"]
    if task == "charlm":
        corpus = (params["task_options"] or {}).get("corpus", "text/tinyshakespeare.txt")
        task = f"charlm on {corpus}"
    scale = scale_text({
        "task": (task, "Enwik8 (and SHD-Adding)"),
        "budgets P": (", ".join(f"{b:,}" for b in params["budgets"]), "1.6M-6.0M (Enwik8)"),
        "d_m": (list(params["d_ms"]), "5-50"), "seeds": (len(params["seeds"]), 1),
        "training": (f"{params['steps']} steps", "full runs"),
    }) + ("; data: the SHD files if present, else a synthetic SHD-like set "
          "(the dataset's attr 'data' says which)" if params["task"] == "shd-adding" else "")
    return [
        Claim("interior-optimum", "At a fixed budget the loss has an interior optimum in k_e (every budget)",
              "Fig. 3c: a fixed budget gives an interior optimum in N vs k_e",
              "lowest mean held-out loss over d_m not at either end, per budget", _interior_fraction, lower=1.0,
              why="the claim is about every budget", scale=scale),
        Claim("optimum-moves-up", "The optimum moves to larger k_e as the budget grows (Spearman >= 0.8)",
              "Fig. 3/16: (N, d_m) = (512, 15) -> (1024, 25) when P is quadrupled",
              "rank correlation of the fitted k_e_opt with P", _optimum_moves, lower=0.8,
              why="monotone up to one swap between neighbouring budgets", scale=scale),
        Claim("i-rep-fit", "The joint I_rep fit describes the losses (Pearson r >= 0.9)",
              "App. A.4: Pearson r = 0.98 over 103 points", "Pearson r of fitted against measured losses", _pearson,
              lower=0.9, why="the paper's 0.98 with room for fewer, noisier points", scale=scale),
        Claim("monotone-in-n-and-k_e", "Accuracy improves monotonically with N and with k_e",
              "Fig. 3a/b", "needs sweeps of N at fixed k_e and of k_e at fixed N", None,
              untestable="elm-budget sweeps at a fixed budget, where N and k_e trade off; not measured here",
              scale=scale),
        Claim("rho-rec-zero-worse", "A feed-forward network (rho_rec = 0) is worse than the default",
              "Fig. 12: about 0.1 BPC worse", "needs a rho_rec = 0 ablation", None,
              untestable="not run by elm-budget; expressible with --set 'params.model={rho_rec=0.0}'", scale=scale),
    ]


run_elm_budget.check = check_params
register("program", "elm-budget", "ELM network at a fixed budget P = N(k_e + k_c): loss vs k_e per budget, I_rep fit",
         claims=claims)(run_elm_budget)
