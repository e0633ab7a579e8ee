r"""Scenario ``elm-shd-adding``: an ELM network against an LSTM of matched parameter count on
SHD-Adding (scaling paper §3: the ELM network outperforms the LSTM there).

The LSTM width is chosen with [`dynlab.sizing.hidden_for_budget`][] so that its whole model
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
from dynlab.analyses.paper_claims.elm_neuron import claims
from dynlab.config import number_list
from dynlab.registry import register


def run_configs(
    *,
    elm: dict | None = None,
    seeds: list[int] = (0, 1, 2),
    bins_ms: list[float] = (20.0, 50.0),
    task_options: dict | None = None,
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 5e-3,
    eval_every: int = 250,
    eval_size: int = 512,
    match_tol: float = 0.05,
    constant_tau_ms: float | None = None,
) -> dict[tuple[float, str], list[dict]]:
    r"""The runs [`run_elm_vs_lstm`][] trains: ``(bin_ms, network)`` -> one run config per seed (what
    [`dynlab.experiment.build`][] takes), in training order, networks ``elm-net``, ``lstm`` and, with
    ``constant_tau_ms``, ``elm-constant-tau``: the ELM network with every memory timescale
    $\tau_m$ = ``constant_tau_ms`` (``tau_min = tau_max`` = ``constant_tau_ms / bin_ms`` steps), at the
    smallest bin size only: there the timescale spans the most steps (25 ms is 1.25 steps at 20 ms
    bins, half a step at 50 ms, where a "timescale" hardly means one), and it halves the ablation's cost.

    Every combination is checked first; the LSTM's width is matched to the ELM network's parameter
    count (built once, seed 0, at the first bin size: the count does not depend on the bin size)."""
    from dynlab import experiment
    from dynlab.errors import ConfigError
    from dynlab.sizing import hidden_for_budget

    seeds = [int(s) for s in seeds]
    bins = [float(b) for b in number_list("bins_ms", bins_ms)]
    if "bin_ms" in (task_options or {}):
        raise ConfigError("give the bin sizes as params.bins_ms, not params.task_options.bin_ms")
    tasks = {b: {"name": "shd-adding", "channel_pool": 5, **(task_options or {}), "bin_ms": b} for b in bins}
    train_cfg = {"steps": steps, "batch_size": batch_size, "lr": lr, "clip": 1.0, "eval_every": eval_every,
                 "eval_size": eval_size, "log_every": min(50, steps), "checkpoint_every": steps}
    elm_section = {"unit": "elm-net", **(elm or {})}
    if constant_tau_ms is not None:
        (constant_tau_ms,) = number_list("constant_tau_ms", [constant_tau_ms])
        if constant_tau_ms <= 0:
            raise ConfigError(f"constant_tau_ms must be positive, got {constant_tau_ms:g}")
    sections = {b: {"elm-net": elm_section} for b in bins}
    if constant_tau_ms is not None:
        tau = constant_tau_ms / min(bins)
        sections[min(bins)]["elm-constant-tau"] = {**elm_section, "tau_min": tau, "tau_max": tau}
    for b in bins:
        for section in sections[b].values():  # every combination is checked before any training
            experiment.check({"seed": 0, "model": section, "task": tasks[b], "train": train_cfg})
    probe = experiment.build({"seed": 0, "model": elm_section, "task": tasks[bins[0]], "train": train_cfg})
    budget = probe.model.param_count()["total"]
    lstm_hidden = hidden_for_budget("lstm", budget, probe.task.input_size, probe.task.output_size, tol=match_tol)
    for b in bins:
        sections[b]["lstm"] = {"unit": "lstm", "hidden": lstm_hidden}
    return {(b, net): [{"seed": s, "model": section, "task": tasks[b], "rule": {"name": "bptt"}, "train": train_cfg}
                       for s in seeds] for b in bins for net, section in sections[b].items()}


def run_elm_vs_lstm(
    out_dir,
    *,
    progress=None,
    elm: dict | None = None,
    seeds: list[int] = (0, 1, 2),
    bins_ms: list[float] = (20.0, 50.0),
    task_options: dict | None = None,
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 5e-3,
    eval_every: int = 250,
    eval_size: int = 512,
    match_tol: float = 0.05,
    constant_tau_ms: float | None = None,
) -> dict:
    """Train both networks for every bin size and seed; returns ``{"accuracy": dataset}`` (also written).

    ``bins_ms``: the SHD-Adding bin sizes (the ELM paper compares 1-100 ms); each is a task of its own
    length $T$ = 2000 ms / bin. ``task_options`` are the other ``shd-adding`` options (``bin_ms`` among
    them is an error: give ``bins_ms``). The LSTM is matched to the ELM network's parameter count once
    (the count does not depend on the bin size). ``constant_tau_ms``: also train the ELM network with
    one constant memory timescale in ms (the ELM paper's Fig. 3e ablation, ~25 ms; see [`run_configs`][])."""
    from dynlab import experiment, store
    from dynlab.analyses.elm_scaling_figures import accuracy_by_bin
    from dynlab.errors import DivergenceError
    from dynlab.train import train_seeds

    out = Path(out_dir)
    seeds = [int(s) for s in seeds]
    configs = run_configs(elm=elm, seeds=seeds, bins_ms=bins_ms, task_options=task_options, steps=steps,
                          batch_size=batch_size, lr=lr, eval_every=eval_every, eval_size=eval_size, match_tol=match_tol,
                          constant_tau_ms=constant_tau_ms)
    bins = list(dict.fromkeys(b for b, _ in configs))
    networks = ["elm-net", *(["elm-constant-tau"] if constant_tau_ms is not None else []), "lstm"]
    curves, params, neurons, source = {}, {}, {}, None
    for done, (b, net) in enumerate(configs, start=1):
        exps = [experiment.build(c) for c in configs[b, net]]
        params[net] = exps[0].model.param_count()["total"]
        neurons[net] = exps[0].model.cells[0].hidden
        source = source or exps[0].task.source
        dirs = [out / "runs" / f"{net}-bin{b:g}ms-seed{s}" for s in seeds]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        curves[b, net] = [None if isinstance(r, DivergenceError) else r.metrics for r in train_seeds(exps, dirs)]
        if progress is not None:
            finals = [c[f"eval_{c.attrs['metric']}"].values[-1] for c in curves[b, net] if c is not None]
            progress(done, len(configs), {"bin_ms": b, "network": net, "params": params[net],
                                          "accuracy": float(np.mean(finals)) if finals else float("nan")})
    reference = next(c for cs in curves.values() for c in cs if c is not None)
    metric, steps_axis = reference.attrs["metric"], reference.eval_step.values
    acc = np.full((len(bins), len(networks), len(seeds), len(steps_axis)), np.nan)  # NaN: not trained at that bin
    for k, b in enumerate(bins):
        for i, net in enumerate(networks):
            for j, c in enumerate(curves.get((b, net), [])):
                if c is not None:
                    acc[k, i, j, : c.sizes["eval_step"]] = c[f"eval_{metric}"].values
    ds = xr.Dataset(
        {metric: (("bin_ms", "network", "seed", "eval_step"), acc, {"long_name": f"held-out {metric}"}),
         "params": ("network", [params[n] for n in networks], {"long_name": "trainable parameters"}),
         "hidden": ("network", [neurons[n] for n in networks], {"long_name": "neurons"})},
        coords={"bin_ms": ("bin_ms", bins, {"long_name": "bin size", "units": "ms"}), "network": networks,
                "seed": seeds, "eval_step": steps_axis},
    )
    ds = stamp(ds, analysis="elm-shd-adding", config={"metric": metric, "chance": reference.attrs["chance"],
                                                        "data": source})
    store.write_dataset(out / "accuracy.nc", ds)
    store.write_figure(out / "accuracy.png", accuracy_by_bin(ds))
    return {"accuracy": ds}


register("program", "elm-vs-lstm", "ELM network vs a parameter-matched LSTM on SHD-Adding", claims=claims)(run_elm_vs_lstm)
