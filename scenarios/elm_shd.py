r"""Scenario ``elm-shd-adding``: an ELM network against an LSTM of matched parameter count on
SHD-Adding (scaling paper §3: the ELM network outperforms the LSTM there).

The LSTM width is chosen with :func:`dynlab.sizing.hidden_for_budget` so that its whole model
(read-out included) has the ELM network's parameter count within ``match_tol``. Both train with
BPTT and Adam on the same task (synthetic SHD-Adding by default, the real HDF5 files when they are
in the data directory), seeds vmapped per network. Writes ``runs/<network>-seed<k>/``,
``accuracy.nc`` (dims ``network``, ``seed``, ``eval_step``: held-out accuracy curves, with the
parameter counts) and ``accuracy.png``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.provenance import stamp
from dynlab.registry import register


@register("program", "elm-vs-lstm", "ELM network vs a parameter-matched LSTM on SHD-Adding")
def run_elm_vs_lstm(
    out_dir,
    *,
    progress=None,
    elm: dict | None = None,
    seeds: list[int] = (0, 1, 2),
    task_options: dict | None = None,
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 5e-3,
    eval_every: int = 250,
    eval_size: int = 512,
    match_tol: float = 0.05,
) -> dict:
    """Train both networks for every seed; returns ``{"accuracy": dataset}`` (also written)."""
    import matplotlib.pyplot as plt

    from dynlab import experiment, store
    from dynlab.errors import DivergenceError
    from dynlab.sizing import hidden_for_budget
    from dynlab.train import train_seeds

    out = Path(out_dir)
    seeds = [int(s) for s in seeds]
    task = {"name": "shd-adding", "channel_pool": 5, "bin_ms": 20, **(task_options or {})}
    train_cfg = {"steps": steps, "batch_size": batch_size, "lr": lr, "clip": 1.0, "eval_every": eval_every,
                 "eval_size": eval_size, "log_every": min(50, steps), "checkpoint_every": steps}
    elm_section = {"unit": "elm-net", **(elm or {})}
    probe = experiment.build({"seed": 0, "model": elm_section, "task": task, "train": train_cfg})
    budget = probe.model.param_count()["total"]
    lstm_hidden = hidden_for_budget("lstm", budget, probe.task.input_size, probe.task.output_size, tol=match_tol)
    sections = {"elm-net": elm_section, "lstm": {"unit": "lstm", "hidden": lstm_hidden}}
    curves, params = {}, {}
    for i, (net, section) in enumerate(sections.items()):
        exps = [experiment.build({"seed": s, "model": section, "task": task, "rule": {"name": "bptt"},
                                  "train": train_cfg}) for s in seeds]
        params[net] = exps[0].model.param_count()["total"]
        dirs = [out / "runs" / f"{net}-seed{s}" for s in seeds]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        curves[net] = [None if isinstance(r, DivergenceError) else r.metrics for r in train_seeds(exps, dirs)]
        if progress is not None:
            finals = [c[f"eval_{c.attrs['metric']}"].values[-1] for c in curves[net] if c is not None]
            progress(i + 1, len(sections), {"network": net, "params": params[net], "accuracy": float(np.mean(finals))})
    reference = next(c for cs in curves.values() for c in cs if c is not None)
    metric, steps_axis = reference.attrs["metric"], reference.eval_step.values
    acc = np.full((len(sections), len(seeds), len(steps_axis)), np.nan)
    for i, net in enumerate(sections):
        for j, c in enumerate(curves[net]):
            if c is not None:
                acc[i, j, : c.sizes["eval_step"]] = c[f"eval_{metric}"].values
    ds = xr.Dataset(
        {metric: (("network", "seed", "eval_step"), acc, {"long_name": f"held-out {metric}"}),
         "params": ("network", [params[n] for n in sections], {"long_name": "trainable parameters"}),
         "hidden": ("network", [probe.model.cells[0].param_count()["N"], lstm_hidden])},
        coords={"network": list(sections), "seed": seeds, "eval_step": steps_axis},
    )
    ds = stamp(ds, analysis="elm-shd-adding", config={"metric": metric, "chance": reference.attrs["chance"]})
    store.write_dataset(out / "accuracy.nc", ds)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for net in ds.network.values:
        da = ds[metric].sel(network=net)
        ax.errorbar(ds.eval_step.values, da.mean("seed"), yerr=da.std("seed", ddof=1), fmt="o-", ms=3, capsize=2,
                    label=f"{net} ({int(ds.params.sel(network=net))} params)")
    ax.axhline(ds.attrs["chance"], color="grey", ls="--", lw=0.8, label="chance")
    ax.set(xlabel="training step", ylabel=f"held-out {metric}", title="SHD-Adding: ELM network vs LSTM")
    ax.legend(fontsize=7)
    fig.tight_layout()
    store.write_figure(out / "accuracy.png", fig)
    return {"accuracy": ds}
