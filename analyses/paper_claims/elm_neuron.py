"""The ELM neuron paper's claims (Spieler et al., Figs. 3e, 4 and 5), judged on the ``accuracy``
dataset of the ``elm-vs-lstm`` program ([`dynlab.scenarios.elm_shd`][])."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.claims import Claim, Estimate, NotTestable, scale_text


PAPER_COUNTS = {"Branch-ELM (NeuronIO, 45 x 100 synapses, d_m = 20)": (8_104, dict(input_size=1278, d_m=20, d_tree=45,
                                                                                     d_branch=100, routing="neuronio")),
                "ELM (NeuronIO, d_m = 20, d_mlp = 40)": (53_000, dict(input_size=1278, d_m=20, d_mlp=40))}
"""The paper's parameter counts (text and Fig. 4: 8,104; "53K") and the configurations that give them."""


def _count_gap(_datasets) -> Estimate:
    """Statistic: the largest relative difference between dynlab's count and the paper's, over PAPER_COUNTS
    (counted from the model's arrays, shapes only: ``equinox.filter_eval_shape``)."""
    import equinox as eqx
    import jax

    from dynlab import registry

    gaps, parts = [], []
    for name, (paper, config) in PAPER_COUNTS.items():
        model = eqx.filter_eval_shape(lambda c=config: registry.build("model", unit="elm", output_size=2,
                                                                      key=jax.random.key(0), **c))
        ours = model.param_count()["total"]
        gaps.append(abs(ours - paper) / paper)
        parts.append(f"{name}: {ours:,} vs {paper:,}")
    return Estimate.exactly(max(gaps), "exact counts; " + "; ".join(parts))


def _elm_ahead(datasets) -> Estimate:
    """Statistic: the smallest over bin sizes of the final held-out accuracy gap ELM network - LSTM (% points,
    mean over seeds), with the t interval over seeds of that bin's gap."""
    ds = datasets["accuracy"]
    if ds.sizes["bin_ms"] < 2:
        raise NotTestable(f"one bin size ({float(ds.bin_ms[0]):g} ms); the claim is about several: give params.bins_ms")
    return _smallest_gap(ds, "elm-net", "lstm")


def _tau_text(params: dict) -> str:
    c = params.get("constant_tau_ms")
    return "not run" if c is None else f"{float(c):g} ms"


def _smallest_gap(ds: xr.Dataset, a: str, b: str) -> Estimate:
    """The smallest over bin sizes of the mean over seeds of final held-out accuracy ``a - b`` (% points),
    with the Student-t interval over seeds of that bin's gap."""
    final = 100 * ds[ds.attrs["metric"]].isel(eval_step=-1)
    gaps = (final.sel(network=a) - final.sel(network=b)).transpose("bin_ms", "seed").values
    means = np.nanmean(gaps, axis=1)
    if not np.isfinite(means).all():
        raise NotTestable("a bin size where no seed finished both networks")
    worst = int(np.argmin(means))
    where = f"smallest gap at {float(ds.bin_ms[worst]):g} ms, of {', '.join(f'{b:g}' for b in ds.bin_ms.values)} ms"
    return Estimate.mean_of(gaps[worst], where, population="seeds (one of each network)")


def _constant_tau_gap(datasets) -> Estimate:
    """Statistic: the constant-tau ELM network's accuracy minus the default's, at the bin size where it is smallest."""
    ds = datasets["accuracy"]
    if "elm-constant-tau" not in ds.network.values:
        raise NotTestable("not run: set params.constant_tau_ms (the paper's ~25 ms)")
    ran = np.isfinite(ds[ds.attrs["metric"]].sel(network="elm-constant-tau").isel(eval_step=-1)).any("seed")
    if not bool(ran.any()):
        raise NotTestable("no seed of the constant-tau network finished")
    return _smallest_gap(ds.isel(bin_ms=ran.values), "elm-constant-tau", "elm-net")


def claims(params: dict) -> list[Claim]:
    """The ELM neuron paper's claims at these parameters."""
    task = {"channel_pool": 5, **(params["task_options"] or {})}
    bins = ", ".join(f"{float(b):g}" for b in params["bins_ms"])
    scale = scale_text({
        "bins": (f"{bins} ms", "1-100 ms"), "channels": (700 // task["channel_pool"], 700),
        "networks": ("the scaling paper's ELM network (elm-net) and an LSTM of its parameter count",
                     "one ELM neuron with d_m = 100 (186K) and an LSTM of 956K (hidden 250)"),
        "training": (f"{params['steps']} steps of {params['batch_size']}, Adam {params['lr']:g}",
                     "70 epochs of 2000 batches of 8, Adamax 5e-3, dropout 0.5"),
        "seeds": (len(params["seeds"]), 5),
        **({"constant-tau task": ("SHD-Adding", "NeuronIO")} if params.get("constant_tau_ms") is not None else {}),
    }) + "; data: the SHD files if present, else a synthetic SHD-like set (the dataset's attrs 'data' says which)"
    return [
        Claim("elm-beats-lstm", f"ELM network ahead of a parameter-matched LSTM on SHD-Adding at every bin size ({bins} ms)",
              "Fig. 5: ELM (186K) beats LSTM (956K) at every bin size, most clearly below 50 ms",
              "final held-out accuracy, ELM - LSTM, % points, at the bin size where it is smallest", _elm_ahead,
              lower=0.0, strict=True,
              why="ahead: a positive gap", scale=scale),
        Claim("parameter-counts", "dynlab's ELM and Branch-ELM have the paper's parameter counts (within 2%)",
              "Branch-ELM 8,104 (Fig. 4b); ELM ~53K (Fig. 4)", "largest |dynlab - paper| / paper",
              _count_gap, upper=0.02,
              why="the paper's counts run ~4 d_m + 2 above the formula and the authors' repository (notes)",
              scale="the paper's configurations"),
        Claim("constant-tau", f"A constant tau_m ({_tau_text(params)}) is sufficient: within 5 points of the "
              "default timescales' accuracy (Fig. 3e ablation, here on SHD-Adding)",
              "Fig. 3e: a constant tau_m of ~25 ms performs sufficiently well (on NeuronIO, not in the data directory)",
              "final held-out accuracy, constant tau_m - default, % points, at the bin size where it is smallest",
              _constant_tau_gap, lower=-5.0,
              why="'sufficiently well': the paper's constant-tau neuron stays above its 0.991 AUC bar, a little "
                  "below the default; 5 points of accuracy is dynlab's reading of 'close'",
              scale=scale),
    ]
