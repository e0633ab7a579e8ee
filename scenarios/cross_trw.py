r"""Scenario ``cross-trw``: temporal receptive windows of the ARU network, the ELM network and a GRU
on the hierarchical language, against SITH-RNN (Sarkar & Howard's TRW scrambling analysis applied
to units from the other papers).

Every network is a stack of 4 layers (SITH-RNN has 4), trained with the ``sith-trw`` protocol
([`dynlab.scenarios.sith_trw.build`][]: AdamW, weight decay 1e-3, full batch of the 9 sequences,
bias-free read-out) at dilation $3^0$. Then, per seed, the TRW analysis
([`dynlab.analyses.trw.trw_analysis`][]: block-scrambling of the $3^6$-step stream, the
correlation of the layer's recurrence matrix with the intact one, $s_{50}$ where it falls to half)
gives $\log_3 s_{50}$ for every layer, and the zero-shot accuracy at dilations $3^0 \dots 3^{m}$
shows which networks carry their solution to slower inputs.

The question (Sarkar & Howard §4): does a trained generic recurrent network build a hierarchy of
temporal receptive windows (TRW growing with depth) as SITH's geometric timescales do by
construction, and do the ARU's adaptation and the ELM neuron's long fixed memory timescales give one?

Writes ``trw.nc`` (dims ``network``, ``seed``, ``layer``: ``log3_s50``, ``s50``, ``s50_censored``),
``accuracy.nc`` (``network``, ``seed``, ``dilation``), ``trw_by_layer.png``, ``accuracy_vs_dilation.png``
and ``trw-<network>.png`` (seed 0's scrambling curves).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.provenance import stamp
from dynlab.registry import register

NETWORKS = {
    "aru": {"unit": "aru", "hidden": 32, "n_g": 4, "layers": 4, "lr": 3e-3},
    "elm-net": {"unit": "elm-net", "hidden": 32, "d_m": 5, "d_tree": 8, "d_branch": 4, "layers": 4, "lr": 3e-3},
    "gru": {"unit": "gru", "hidden": 32, "layers": 4, "lr": 3e-3},
    "sith-rnn": {"unit": "sith-rnn", "lr": 1e-2},
}


def trw_by_layer(ds: xr.Dataset):
    r"""$\log_3 s_{50}$ of the temporal receptive window against layer, one line per network
    (mean ± sd over seeds; hollow downward triangles: s50 left-censored in some seed, at or below the
    smallest scale tested, drawn as the bound it is and not joined to the measured values)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dynlab.figures import legend_beside

    fig, ax = plt.subplots(figsize=(7.5, 4))
    any_censored = False
    for net in ds.network.values:
        sel = ds.sel(network=net)
        mean, std = sel.log3_s50.mean("seed"), sel.log3_s50.std("seed", ddof=1)
        censored = sel.s50_censored.any("seed").values  # a mean over a bound is a bound
        measured = np.where(censored, np.nan, mean.values)
        line = ax.errorbar(ds.layer, measured, yerr=np.where(censored, np.nan, std.values), fmt="o-", ms=4, capsize=2,
                           label=str(net))
        ax.plot(ds.layer.values[censored], mean.values[censored], "v", ms=9, mfc="none", color=line[0].get_color())
        any_censored |= bool(censored.any())
    if any_censored:
        ax.plot([], [], "v", ms=9, mfc="none", color="grey", label="censored: s50 at or below this (a bound)")
    ax.set(xlabel="layer", ylabel="log3 s50 (steps)", title="temporal receptive window by layer (hierarchical language)")
    ax.set_xticks(ds.layer.values)
    legend_beside(ax, fontsize=7)
    fig.tight_layout()
    return fig


def summary(datasets: dict) -> str:
    r"""Per network: the zero-shot accuracy at the training dilation $3^0$ and at the largest, and
    $\log_3 s_{50}$ per layer (mean and 95% interval over seeds; ``≤`` where a seed's $s_{50}$ is
    left-censored, at or below the smallest scale tested, so the value is a bound)."""
    from dynlab.scenarios.summary import over_seeds, text_table

    trw, acc = datasets["trw"], datasets["accuracy"]
    first, last = acc.dilation.values[0], acc.dilation.values[-1]
    rows = [[str(net), over_seeds(acc.accuracy.sel(network=net, dilation=first).values, ".3f"),
             over_seeds(acc.accuracy.sel(network=net, dilation=last).values, ".3f"),
             *(over_seeds(trw.log3_s50.sel(network=net, layer=layer).values, ".2f",
                          censored=trw.s50_censored.sel(network=net, layer=layer).values) for layer in trw.layer.values)]
            for net in trw.network.values]
    n = trw.sizes["seed"]
    header = ["network", f"acc 3^{first:g}", f"acc 3^{last:g}", *(f"log3 s50 L{int(l)}" for l in trw.layer.values)]
    return (f"cross-trw ({'mean ± 95% CI over ' + str(n) + ' seeds' if n > 1 else 'one seed'}; "
            "≤: s50 censored at the smallest scale):\n" + text_table(header, rows))


@register("program", "cross-trw", "temporal receptive windows per layer of 4-layer ARU / ELM / GRU stacks vs SITH-RNN",
          figure=trw_by_layer, summary=summary)
def run_cross_trw(
    out_dir,
    *,
    progress=None,
    networks: dict | None = None,
    seeds: list[int] = (0, 1, 2),
    steps: int = 300,
    n_shuffle: int = 200,
    dilations: list[int] = (0, 1, 2, 3),
) -> dict:
    """Train, scramble, evaluate every network; returns ``{"trw": ds, "accuracy": ds}`` (also written).

    ``networks``: name -> ``[model]`` section plus ``lr`` (default [`NETWORKS`][]).
    """
    from dynlab import experiment, store
    from dynlab.analyses import trw
    from dynlab.errors import ConfigError
    from dynlab.analyses.trw_figures import accuracy_vs_dilation, trw_curves
    from dynlab.scenarios.sith_trw import build
    from dynlab.train import train

    networks = dict(NETWORKS if networks is None else networks)
    sections = {}
    for name, section in networks.items():
        if not isinstance(section, dict) or "unit" not in section or "lr" not in section:
            raise ConfigError(f"networks.{name} must be a [model] section with unit and lr, got {section!r}")
        sections[name] = {k: v for k, v in section.items() if k != "lr"}
        experiment.check({"model": {**sections[name], "readout_bias": False}, "task": {"name": "hierarchical-language"}})
    seeds, dilations = [int(s) for s in seeds], [int(m) for m in dilations]
    out = Path(out_dir)
    names = list(networks)
    results, acc = {}, np.full((len(names), len(seeds), len(dilations)), np.nan)
    done, total = 0, len(names) * len(seeds)
    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first cell
    for i, name in enumerate(names):
        for j, seed in enumerate(seeds):
            t0 = time.perf_counter()
            run_dir = out / "runs" / f"{name}-seed{seed}"
            run_dir.mkdir(parents=True, exist_ok=True)
            res = train(build(sections[name], seed, steps, lr=networks[name]["lr"]), run_dir)
            acc[i, j] = trw.accuracy_vs_dilation(res.model, dilations=dilations).accuracy.values
            ds = trw.trw_analysis(res.model, n_shuffle=n_shuffle, seed=seed)
            store.write_dataset(run_dir / "trw.nc", ds)
            if j == 0:
                store.write_figure(out / f"trw-{name}.png", trw_curves(ds))
            results[name, seed] = ds
            done += 1
            if progress is not None:
                progress(done, total, {"network": name, "seed": seed, "acc@3^0": float(acc[i, j, 0]),
                                       "log3 s50": " ".join(f"{v:.2f}" for v in ds.log3_s50.values),
                                       "s": time.perf_counter() - t0})
    long_names = {"log3_s50": "log3 of the TRW s50 (steps)",
                  "s50": "TRW s50: scale where the correlation halves (steps)",
                  "s50_censored": "s50 at or below the smallest scale tested (left-censored)"}
    depth = max(ds.sizes["layer"] for ds in results.values())  # shorter stacks: NaN in the deeper layers
    arrays = {k: np.full((len(names), len(seeds), depth), False if k == "s50_censored" else np.nan) for k in long_names}
    for (name, seed), ds in results.items():
        for k, a in arrays.items():
            a[names.index(name), seeds.index(seed), : ds.sizes["layer"]] = ds[k].values
    trw_ds = xr.Dataset({k: (("network", "seed", "layer"), v, {"long_name": long_names[k]}) for k, v in arrays.items()},
                        coords={"network": names, "seed": seeds, "layer": np.arange(1, depth + 1)})
    trw_ds = stamp(trw_ds, analysis="cross-trw", config={"scenario": "cross-trw", "steps": steps, "n_shuffle": n_shuffle})
    acc_ds = xr.Dataset({"accuracy": (("network", "seed", "dilation"), acc,
                                      {"long_name": "zero-shot accuracy (trained at 3^0)"})},
                        coords={"network": names, "seed": seeds, "dilation": dilations})
    acc_ds = stamp(acc_ds, analysis="sith-trw", config={"scenario": "cross-trw", "steps": steps})
    store.write_dataset(out / "trw.nc", trw_ds)
    store.write_dataset(out / "accuracy.nc", acc_ds)
    store.write_figure(out / "trw_by_layer.png", trw_by_layer(trw_ds))
    store.write_figure(out / "accuracy_vs_dilation.png", accuracy_vs_dilation(acc_ds))
    return {"trw": trw_ds, "accuracy": acc_ds}
