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
and ``i_rep_fit.png`` (losses against $k_e$ per budget with the fitted curves and their optima); with the
single-axis sweeps and the feed-forward ablation (``n_sweep``, ``k_e_sweep``, ``rho_rec_zero``) also
``axes.nc``, ``rho_rec_zero.nc`` and ``axes.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.provenance import stamp
from dynlab.analyses.paper_claims.elm_scaling import claims
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

    seed_configs = _seed_configs(seeds=seeds, task=task, task_options=task_options, steps=steps,
                                 batch_size=batch_size, lr=lr, eval_size=eval_size)
    configs = {}
    for b in budgets:  # every combination is built (checked) before any training
        for d in d_ms:
            configs[int(b), int(d)] = seed_configs({"unit": "elm-net", **budget_config(int(b), d_m=int(d),
                                                                                       **(model or {}))})
            experiment.check(configs[int(b), int(d)][0])
    return configs


def _seed_configs(*, seeds, task, task_options, steps, batch_size, lr, eval_size):
    """A function from a ``[model]`` section to one run config per seed, with this scenario's task and training."""
    task_section = {"name": task, **TASKS.get(task, {}), **(task_options or {})}
    train_cfg = {"steps": steps, "batch_size": batch_size, "lr": lr, "clip": 1.0, "eval_every": steps,
                 "eval_size": eval_size, "log_every": min(50, steps), "checkpoint_every": steps}
    return lambda section: [{"seed": int(s), "model": section, "task": task_section, "rule": {"name": "bptt"},
                             "train": train_cfg} for s in seeds]


def axis_configs(*, n_sweep: dict | None, k_e_sweep: dict | None, model: dict | None = None, **settings
                 ) -> dict[tuple[int, int], list[dict]]:
    """The runs of the single-axis sweeps (paper Fig. 3a/b): ``(N, d_m)`` -> one run config per seed, for
    ``n_sweep = {d_m, hidden = [...]}`` (N at a fixed neuron) and ``k_e_sweep = {hidden, d_ms = [...]}``
    (the neuron at a fixed N); a point on both sweeps is trained once. ``settings`` are
    [`run_configs`][]'s seeds, task and training. Every run is checked before it returns."""
    from dynlab import experiment

    seed_configs = _seed_configs(**settings)
    configs = {}
    for n, d in dict.fromkeys(_axis_points(n_sweep, k_e_sweep)):
        configs[n, d] = seed_configs({"unit": "elm-net", **(model or {}), "hidden": n, "d_m": d})
        experiment.check(configs[n, d][0])
    return configs


def _axis_points(n_sweep: dict | None, k_e_sweep: dict | None) -> list[tuple[int, int]]:
    """The ``(N, d_m)`` points of the single-axis sweeps, in order (a point on both sweeps appears twice).

    **Enforces** that each sweep given has exactly its two keys and lists at least 3 distinct
    positive integers along its axis, at a positive integer fixed value (one line naming both)."""
    from dynlab.errors import ConfigError

    points = []
    for name, sweep, fixed, axis in (("n_sweep", n_sweep, "d_m", "hidden"), ("k_e_sweep", k_e_sweep, "hidden", "d_ms")):
        if sweep is None:
            continue
        if set(sweep) != {fixed, axis}:
            raise ConfigError(f"params.{name} needs exactly the keys {fixed} and {axis}, got {sorted(sweep)}")
        values = sweep[axis]
        if not isinstance(values, list) or len(values) < 3 or len(set(values)) != len(values) \
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in [*values, sweep[fixed]]):
            raise ConfigError(f"params.{name}: {axis} must list at least 3 distinct positive integers and {fixed} "
                              f"be one, got {axis} = {values!r}, {fixed} = {sweep[fixed]!r}")
        points += [(v, sweep["d_m"]) if axis == "hidden" else (sweep["hidden"], v) for v in values]
    return points


def check_params(*, budgets=(8_000, 16_000, 32_000), d_ms=(2, 5, 10, 20), seeds=(0, 1), fit: bool = True,
                 n_sweep: dict | None = None, k_e_sweep: dict | None = None, **_) -> None:
    """What [`run_elm_budget`][] checks before any training (the scenario runner calls it when it
    reads the file): the I_rep fit's at least 4 trained networks (budgets x d_ms x seeds), and the
    single-axis sweeps' keys and values; both before any network is built."""
    from dynlab.errors import ConfigError

    _axis_points(n_sweep, k_e_sweep)
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
    n_sweep: dict | None = None,
    k_e_sweep: dict | None = None,
    rho_rec_zero: bool = False,
) -> dict:
    r"""Train every (budget, d_m, seed), collect the held-out losses, fit I_rep; returns
    ``{"budget": dataset, "i_rep_fit": dataset}`` (also written to ``out_dir``).

    The paper's other axes, each optional (their claims are "not testable" without them):

    * ``n_sweep = {d_m, hidden = [...]}`` and ``k_e_sweep = {hidden, d_ms = [...]}``: one axis at a
      time, no budget (Fig. 3a/b: monotone gains in $N$ and in $k_e$); adds ``"axes"``
      (``axes.nc``: ``loss_vs_n`` over ``hidden``, ``loss_vs_d_m`` over ``d_m``, per seed);
    * ``rho_rec_zero``: the grid's best (budget, $d_m$) (lowest mean loss) trained again as a
      feed-forward network, $\rho_{rec} = 0$ (Fig. 12; every neuron stays internally recurrent);
      adds ``"rho_rec_zero"`` (``rho_rec_zero.nc``: ``loss`` of both, per seed).
    """
    from dynlab import store

    check_params(budgets=budgets, d_ms=d_ms, seeds=seeds, fit=fit, n_sweep=n_sweep, k_e_sweep=k_e_sweep)
    budgets, d_ms, seeds = [int(b) for b in budgets], [int(d) for d in d_ms], [int(s) for s in seeds]
    out = Path(out_dir)
    settings = dict(seeds=seeds, task=task, task_options=task_options, steps=steps, batch_size=batch_size, lr=lr,
                    eval_size=eval_size)
    configs = run_configs(budgets=budgets, d_ms=d_ms, model=model, **settings)
    axes = axis_configs(n_sweep=n_sweep, k_e_sweep=k_e_sweep, model=model, **settings)
    shape = (len(budgets), len(d_ms), len(seeds))
    loss = np.full(shape, np.nan)
    metric_values = np.full(shape, np.nan)
    counts = {k: np.zeros(shape[:2], np.int64) for k in ("N", "k_e", "k_c", "P")}
    metric, source = None, ""
    t0 = time.perf_counter()
    total = len(configs) + len(axes) + int(bool(rho_rec_zero))
    done = 0

    def report(info):
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total, {**info, "s": time.perf_counter() - t0})

    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first cell
    for i, b in enumerate(budgets):
        for j, d in enumerate(d_ms):
            dirs = [out / "runs" / f"P{b}-dm{d}-seed{s}" for s in seeds]
            loss[i, j], metric_values[i, j], name, source, pc = _train_cell(configs[b, d], dirs)
            metric = metric or name
            for k in counts:
                counts[k][i, j] = pc[k]
            report({"P": b, "d_m": d, "N": pc["N"], "loss": float(np.nanmean(loss[i, j]))})
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
    if axes:
        results["axes"] = _axes(axes, n_sweep, k_e_sweep, seeds, out, report)
    if rho_rec_zero and bool(np.isfinite(ds.loss.mean("seed")).any()):  # else: no best cell, claim not testable
        results["rho_rec_zero"] = _rho_rec_zero(ds, configs, seeds, out, report)
    if axes or "rho_rec_zero" in results:
        from dynlab.analyses.elm_scaling_figures import single_axes

        store.write_figure(out / "axes.png", single_axes(results.get("axes", xr.Dataset()), results.get("rho_rec_zero")))
    return results


def _train_cell(configs: list[dict], dirs: list[Path]):
    """Train one cell's seeds (one config each) into ``dirs``: the final held-out loss and metric per seed
    (NaN where a run diverged), the metric's name, the data source and the layer's ``param_count``."""
    from dynlab import experiment
    from dynlab.errors import DivergenceError
    from dynlab.train import train_seeds

    exps = [experiment.build(c) for c in configs]
    for run_dir in dirs:
        run_dir.mkdir(parents=True, exist_ok=True)
    loss, value, metric = np.full(len(exps), np.nan), np.full(len(exps), np.nan), None
    for k, res in enumerate(train_seeds(exps, dirs)):
        if isinstance(res, DivergenceError):
            continue  # stays NaN: the fit and the claims leave it out
        metric = res.metrics.attrs["metric"]
        loss[k] = res.metrics.eval_loss.values[-1]
        value[k] = res.metrics[f"eval_{metric}"].values[-1]
    return loss, value, metric, exps[0].task.describe(), exps[0].model.cells[0].param_count()


def _axes(configs, n_sweep, k_e_sweep, seeds, out: Path, report) -> xr.Dataset:
    """Train the single-axis sweeps ([`axis_configs`][]); ``axes.nc`` with ``loss_vs_n`` (``hidden``, ``seed``)
    and ``loss_vs_d_m`` (``d_m``, ``seed``, with ``k_e`` per d_m)."""
    from dynlab import store

    trained = {}
    for (n, d), cell in configs.items():
        loss, _, _, _, pc = _train_cell(cell, [out / "runs" / f"N{n}-dm{d}-seed{s}" for s in seeds])
        trained[n, d] = loss, pc
        report({"N": n, "d_m": d, "loss": float(np.nanmean(loss))})
    data, coords = {}, {"seed": seeds}
    if n_sweep is not None:
        ns = sorted(n_sweep["hidden"])
        data["loss_vs_n"] = (("hidden", "seed"), np.stack([trained[n, n_sweep["d_m"]][0] for n in ns]),
                             {"long_name": f"held-out loss, d_m = {n_sweep['d_m']}"})
        coords["hidden"] = ("hidden", ns, {"long_name": "neurons N"})
    if k_e_sweep is not None:
        ds_ = sorted(k_e_sweep["d_ms"])
        data["loss_vs_d_m"] = (("d_m", "seed"), np.stack([trained[k_e_sweep["hidden"], d][0] for d in ds_]),
                               {"long_name": f"held-out loss, N = {k_e_sweep['hidden']}"})
        coords["d_m"] = ("d_m", ds_, {"long_name": "memory units per neuron"})
        coords["k_e"] = ("d_m", [trained[k_e_sweep["hidden"], d][1]["k_e"] for d in ds_],
                         {"long_name": "effective parameters per neuron"})
    ds = stamp(xr.Dataset(data, coords=coords), analysis="elm-axes",
               config={"n_sweep": str(n_sweep), "k_e_sweep": str(k_e_sweep)})
    store.write_dataset(out / "axes.nc", ds)
    return ds


def _rho_rec_zero(grid: xr.Dataset, configs, seeds, out: Path, report) -> xr.Dataset:
    """The grid's best (budget, d_m) trained again with rho_rec = 0; ``rho_rec_zero.nc`` with the loss of
    both per seed (``network`` = default, feed-forward)."""
    from dynlab import registry, store
    from dynlab.config import apply_values

    mean = grid.loss.mean("seed")
    best = mean.where(np.isfinite(mean), np.inf).argmin(...)
    b, d = int(grid.budget[best["budget"]]), int(grid.d_m[best["d_m"]])
    section = configs[b, d][0]["model"]
    default = section.get("rho_rec", registry.defaults(registry.get("unit", "elm-net").obj)["rho_rec"])
    cell = [apply_values(c, {"model.rho_rec": 0.0}) for c in configs[b, d]]
    loss, _, _, _, pc = _train_cell(cell, [out / "runs" / f"P{b}-dm{d}-rho0-seed{s}" for s in seeds])
    report({"P": b, "d_m": d, "rho_rec": 0.0, "loss": float(np.nanmean(loss))})
    ds = xr.Dataset({"loss": (("network", "seed"), np.stack([grid.loss.sel(budget=b, d_m=d).values, loss]),
                              {"long_name": "held-out loss at the end of training"})},
                    coords={"network": ["default", "feed-forward"], "seed": seeds,
                            "rho_rec": ("network", [float(default), 0.0], {"long_name": "recurrent fraction rho_rec"})})
    ds = stamp(ds, analysis="elm-rho-rec-zero", config={"budget": b, "d_m": d, "N": int(pc["N"])})
    store.write_dataset(out / "rho_rec_zero.nc", ds)
    return ds


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
register("program", "elm-budget", "ELM network at a fixed budget P = N(k_e + k_c): loss vs k_e per budget, I_rep fit",
         claims=claims, check=check_params)(run_elm_budget)
