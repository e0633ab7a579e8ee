r"""Scenario ``cross-lyapunov``: the Lyapunov spectrum of every unit at initialisation and after
training on the same task.

Each unit of [`UNITS`][dynlab.scenarios.every_unit.UNITS], at the same ``width``
([`model_section`][dynlab.scenarios.every_unit.model_section]), is built from each seed; the ``k`` largest
exponents of its full state map (all layers, PyTree states flattened; [`dynlab.analyses.lyapunov`][])
are measured under the task's own inputs (``task = "train"`` protocol: the same input stream before
and after training), then the model is trained with BPTT on ``task`` and measured again.

Writes ``runs/<unit>-seed<k>/`` (the trained run directories), ``lyapunov.nc`` (dims ``unit``,
``seed``, ``stage`` = init / trained, ``exponent``: the spectrum's mean over initial conditions with
its confidence interval, the largest exponent, held-out loss, state dimension and parameter
count), ``spectra.png`` (one panel per unit) and ``largest.png`` ($\lambda_1$ before vs after).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.provenance import stamp
from dynlab.registry import register
from dynlab.scenarios.every_unit import UNITS, check_units, model_section

STAGES = ("init", "trained")


def lyapunov_spectra(ds: xr.Dataset):
    """One panel per unit: the spectrum at initialisation (dashed) and after training (solid),
    one line per seed, with its 95% interval as a band."""
    from matplotlib.ticker import MaxNLocator

    from dynlab.figures import finish_panels, label_panel, panel_grid

    fig, axes = panel_grid(ds.sizes["unit"])
    styles = {"init": dict(ls="--", color="tab:grey"), "trained": dict(ls="-", color="tab:blue")}
    for ax, unit in zip(axes, ds.unit.values):
        for stage in ds.stage.values:
            for seed in ds.seed.values:
                sel = dict(unit=unit, stage=stage, seed=seed)
                m = ds["mean"].sel(sel)
                if np.all(np.isnan(m)):
                    continue
                label = stage if seed == ds.seed.values[0] else None
                ax.plot(ds.exponent, m, marker="o", ms=2.5, lw=1, label=label, **styles.get(str(stage), {}))
                ax.fill_between(ds.exponent, ds.ci_low.sel(sel), ds.ci_high.sel(sel), alpha=0.15,
                                color=styles.get(str(stage), {}).get("color"))
        ax.axhline(0, color="k", lw=0.5)
        loss = ds.eval_loss.sel(unit=unit, stage="trained").mean("seed")
        label_panel(ax, f"{unit} (dim {int(ds.state_dim.sel(unit=unit))}), loss {float(loss):.3g}", "exponent i",
                    "λ_i per step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # exponents are counted
    return finish_panels(fig, axes, f"Lyapunov spectra at initialisation and after training — {ds.attrs.get('task', '')}, "
                                    f"width {ds.attrs.get('width', '?')}")


def lyapunov_largest(ds: xr.Dataset):
    """The largest exponent of every unit before vs after training (mean ± std over seeds), and
    the held-out loss each reached."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.arange(ds.sizes["unit"])
    for offset, stage, color in ((-0.18, "init", "tab:grey"), (0.18, "trained", "tab:blue")):
        da = ds.largest.sel(stage=stage)
        ax.bar(x + offset, da.mean("seed"), 0.36, yerr=da.std("seed", ddof=1), color=color, label=stage, capsize=2)
        loss = ds.eval_loss.sel(stage=stage)
        ax2.bar(x + offset, loss.mean("seed"), 0.36, yerr=loss.std("seed", ddof=1), color=color, label=stage, capsize=2)
    ax.axhline(0, color="k", lw=0.5)
    ax.set(ylabel="λ_1 per step", title="largest Lyapunov exponent")
    if "chance" in ds.attrs:
        ax2.axhline(ds.attrs["chance"], color="tab:red", ls="--", lw=0.8, label="chance")
    ax2.set(ylabel="held-out loss", title="task loss", yscale="log")
    for a in (ax, ax2):
        a.set_xticks(x, ds.unit.values, rotation=30, fontsize=8)
        a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def summary(datasets: dict) -> str:
    r"""Per unit: $\lambda_1$ and the held-out loss at initialisation and after training (mean and
    95% interval over seeds, [`dynlab.scenarios.summary.over_seeds`][])."""
    from dynlab.scenarios.summary import over_seeds, text_table

    ds = datasets["lyapunov"]
    ok = ds.status == "ok"
    rows = [[str(u), *(over_seeds(ds[v].sel(unit=u, stage=st).where(ok.sel(unit=u)).values, ".4f" if v == "largest" else ".4g")
                       for v in ("largest", "eval_loss") for st in STAGES)] for u in ds.unit.values]
    n = ds.sizes["seed"]
    return (f"λ1 per step (task inputs) and held-out loss (chance {ds.attrs.get('chance', float('nan')):.4g}); "
            f"{'mean ± 95% CI over ' + str(n) + ' seeds' if n > 1 else 'one seed'}:\n"
            + text_table(["unit", "λ1 init", "λ1 trained", "loss init", "loss trained"], rows))


def training_configs(units, seeds, *, width: int, task: str, length: int, steps: int, batch_size: int,
                     lr: float) -> dict:
    """``(unit, seed) -> config`` of the training every unit gets here (also in ``cross-fingerprint``):
    BPTT on ``task`` at ``length``, the unit at ``width`` ([`model_section`][dynlab.scenarios.every_unit.model_section]),
    ``steps`` steps of ``batch_size`` at ``lr``, gradients clipped at 1, evaluated 5 times and
    checkpointed at the end; every config checked ([`dynlab.experiment.check`][]) before any work."""
    from dynlab import experiment

    train_cfg = {"steps": steps, "batch_size": batch_size, "lr": lr, "clip": 1.0, "eval_every": max(steps // 5, 1),
                 "log_every": min(50, steps), "checkpoint_every": steps}
    configs = {(u, s): {"seed": s, "model": model_section(u, width), "task": {"name": task, "length": length},
                        "rule": {"name": "bptt"}, "train": train_cfg} for u in units for s in seeds}
    for cfg in configs.values():  # every config valid before any work
        experiment.check(cfg)
    return configs


@register("program", "cross-lyapunov", "Lyapunov spectra of every unit at initialisation and after training",
          figure=lyapunov_spectra, summary=summary)
def run_cross_lyapunov(
    out_dir,
    *,
    progress=None,
    units: list[str] = UNITS,
    width: int = 32,
    seeds: list[int] = (0, 1),
    task: str = "adding",
    length: int = 20,
    steps: int = 1500,
    batch_size: int = 64,
    lr: float = 3e-3,
    k: int = 8,
    lyapunov_steps: int = 1000,
    burn_in: int = 200,
    ics: int = 3,
    n_test: int = 1000,
) -> dict:
    """Measure, train, measure again, for every unit and seed; returns ``{"lyapunov": dataset}``."""
    import jax

    from dynlab import experiment, store
    from dynlab.analyses.lyapunov import lyapunov_analysis
    from dynlab.errors import DivergenceError
    from dynlab.perturbations import evaluate_under
    from dynlab.train import train

    units, seeds = check_units(units), [int(s) for s in seeds]
    out = Path(out_dir)
    configs = training_configs(units, seeds, width=width, task=task, length=length, steps=steps,
                               batch_size=batch_size, lr=lr)
    shape = (len(units), len(seeds), len(STAGES))
    mean, low, high = (np.full(shape + (k,), np.nan) for _ in range(3))
    largest, loss = np.full(shape, np.nan), np.full(shape, np.nan)
    state_dim, params, seconds = np.zeros(len(units), int), np.zeros(len(units), int), np.zeros((len(units), len(seeds)))
    status = np.full(shape[:2], "ok", dtype=object)
    lyap = dict(k=k, steps=lyapunov_steps, burn_in=burn_in, ics=ics)
    done, total = 0, len(configs)
    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first cell
    for i, unit in enumerate(units):
        for j, seed in enumerate(seeds):
            t0 = time.perf_counter()
            exp = experiment.build(configs[unit, seed])
            params[i] = exp.model.param_count()["total"]
            models = {"init": exp.model}
            run_dir = out / "runs" / f"{unit}-seed{seed}"
            run_dir.mkdir(parents=True, exist_ok=True)
            try:
                models["trained"] = train(exp, run_dir).model
            except DivergenceError as e:
                status[i, j] = f"diverged: {e}"
            for s, stage in enumerate(STAGES):
                if stage not in models:
                    continue
                held_out = evaluate_under(models[stage], exp.task, None, jax.random.key(seed), n_test)
                loss[i, j, s] = float(held_out["loss"])
                ds = lyapunov_analysis(models[stage], task=exp.task, seed=seed, **lyap)
                store.write_dataset(run_dir / f"lyapunov-{stage}.nc", ds)
                mean[i, j, s], low[i, j, s], high[i, j, s] = ds["mean"], ds.ci_low, ds.ci_high
                largest[i, j, s], state_dim[i] = float(ds.largest_mean), ds.attrs["state_dim"]
            seconds[i, j] = time.perf_counter() - t0
            done += 1
            if progress is not None:
                progress(done, total, {"unit": unit, "seed": seed, "l1 init": largest[i, j, 0],
                                       "l1 trained": largest[i, j, 1], "loss": loss[i, j, 1]})
    exponent_dims = ("unit", "seed", "stage", "exponent")
    result = stamp(xr.Dataset(
        {
            "mean": (exponent_dims, mean, {"long_name": "Lyapunov exponent per step, mean over initial conditions"}),
            "ci_low": (exponent_dims, low, {"long_name": "lower end of the confidence interval"}),
            "ci_high": (exponent_dims, high, {"long_name": "upper end of the confidence interval"}),
            "largest": (("unit", "seed", "stage"), largest, {"long_name": "largest Lyapunov exponent (mean over ICs)"}),
            "eval_loss": (("unit", "seed", "stage"), loss, {"long_name": "held-out task loss (n_test samples)"}),
            "status": (("unit", "seed"), status.astype(str), {"long_name": "ok or diverged"}),
            "state_dim": ("unit", state_dim, {"long_name": "dimension of the full state map"}),
            "params": ("unit", params, {"long_name": "trainable parameters"}),
            "seconds": (("unit", "seed"), seconds, {"long_name": "wall time (train + both spectra)", "units": "s"}),
        },
        coords={"unit": units, "seed": seeds, "stage": list(STAGES), "exponent": np.arange(1, k + 1)},
    ), analysis="cross-lyapunov", config={
        "scenario": "cross-lyapunov", "task": exp.task.describe(), "width": width, "steps": steps, "lr": lr,
        "protocol": "task inputs", "lyapunov_steps": lyapunov_steps, "burn_in": burn_in, "ics": ics, "n_test": n_test,
        "chance": exp.task.chance})
    store.write_dataset(out / "lyapunov.nc", result)
    store.write_figure(out / "spectra.png", lyapunov_spectra(result))
    store.write_figure(out / "largest.png", lyapunov_largest(result))
    return {"lyapunov": result}
