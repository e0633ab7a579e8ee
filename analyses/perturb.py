"""The ``perturb`` analysis: a model's held-out metric under a perturbation of increasing strength.

The perturbations themselves (step drive, noisy drive, contrast, [`compose`][dynlab.perturbations.compose])
are core transforms in [`dynlab.perturbations`][]; this module measures a model under them and
draws the result ([`perturbation_curve`][]).
"""

from __future__ import annotations

from typing import Annotated, Literal

import jax
import numpy as np
import xarray as xr

from dynlab.config import Count, Flag
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.losses import get_loss
from dynlab.outputs import Output, metric_outputs
from dynlab.perturbations import default_window, evaluate_under, perturbation
from dynlab.provenance import stamp
from dynlab.registry import register


def perturbation_curve(ds: xr.Dataset):
    """Metric against perturbation strength (``perturb`` analysis): one line per ``network`` if
    that dim exists, mean ± std over ``seed`` if that one does; chance as a dashed line."""
    metric = ds.attrs.get("metric", "accuracy")
    from dynlab.figures import legend_beside, without_paths

    fig, ax = subplots(figsize=(7.2, 3.8))
    networks = ds["network"].values if "network" in ds.dims else [None]
    strengths = ds.strength.values.astype(float)
    span = np.ptp(strengths) if strengths.size > 1 else 1.0
    for k, net in enumerate(networks):
        da = ds[metric] if net is None else ds[metric].sel(network=net)
        label = None if net is None else str(ds["label"].sel(network=net).values if "label" in ds.coords else net)
        if "seed" in da.dims:
            mean, std = da.mean("seed").values, da.std("seed", ddof=1).values
            shift = 0.012 * span * (k - (len(networks) - 1) / 2)  # error bars of different networks side by side
            ax.errorbar(strengths + shift, mean, yerr=std, fmt="o-", ms=3, capsize=2, label=label)
        else:
            ax.plot(ds.strength.values, np.asarray(da.values), "o-", ms=3, label=label)
    if "chance" in ds.attrs:
        ax.axhline(ds.attrs["chance"], color="grey", ls="--", lw=0.8, label="chance")
    xlabel = ds.strength.attrs.get("long_name", "strength")
    spread = (f" (mean ± sd over {ds.sizes['seed']} seeds)" if "seed" in ds[metric].dims and ds.sizes["seed"] > 1
              else "")
    ax.set(xlabel=xlabel, ylabel=f"held-out {metric}", title=f"{ds.attrs.get('kind', '')} perturbation{spread}")
    legend_beside(ax, fontsize=7)
    fig.suptitle(without_paths(ds.attrs.get("task", "")), fontsize=7)
    fig.tight_layout()
    return fig


def perturb_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze perturb`` prints: the metric at every strength."""
    metric = ds.attrs["metric"]
    return "\n".join(f"strength {s:8.3g}   {metric} {v:.4f}" for s, v in zip(ds.strength.values, ds[metric].values))


@register(
    "analysis",
    "perturb",
    "task metric of a model under a perturbation (step/noisy drive, contrast) vs strength",
    figure=perturbation_curve,
    summary=perturb_summary,
    outputs=(Output("loss", "real", ("strength",)), *metric_outputs(("strength",))),
    coordinates={"strength": "strengths"},
)
def perturb_analysis(
    model,
    *,
    task="train",
    kind: Literal["step", "noisy", "contrast"] = "noisy",
    strengths: Annotated[tuple[float, ...] | list[float], Flag("--strength")] = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0),
    n: Count = 1000,
    seed: int = 0,
    onset: int | None = None,
    duration: int | None = None,
    std_ratio: float = 0.4,
    freq: float = 1.0,
    phase: float = 0.0,
    chunk: int = 250,
) -> xr.Dataset:
    """Held-out loss and metric of ``model`` on ``task`` under [`perturbation`][] ``(kind, s)``
    for each strength ``s``; every strength sees the same ``n`` samples and noise draws (``seed``).

    Returns a dataset over ``strength`` with the metric (e.g. ``accuracy``) and ``loss``; attrs
    give the protocol (kind, window, ``std_ratio`` / ``freq`` / ``phase``), the task and chance.

    Args:
        task: the task evaluated ("train": the model's own task).
        kind: step: drive xi on every neuron in a window; noisy: N(mu, (std_ratio*mu)^2) i.i.d. per neuron
            and step in the window; contrast: x_t (1 + alpha sin(2 pi f t/T + phase)).
        strengths: xi (step), mu (noisy) or alpha (contrast); 0 is the clean model.
        n: held-out samples per strength.
        seed: seed of the samples and noise draws.
        onset: first drive step (default: 200/784 of the sequence).
        duration: drive steps (default: 200/784 of the sequence).
        std_ratio: noisy drive: std = std_ratio * mu.
        freq: contrast: cycles per sequence.
        phase: contrast: phase (radians).
        chunk: samples evaluated at once.
    """
    if task is None or isinstance(task, str):
        raise ConfigError("the perturb analysis needs a task (in a scenario: task = \"train\")")
    require_positive("n", n)
    require_positive("chunk", chunk)
    strengths = [float(s) for s in strengths]
    if not strengths:
        raise ConfigError("strengths must list at least one value")
    spec = get_loss(task.loss)
    key = jax.random.key(seed)
    options = dict(length=task.length, onset=onset, duration=duration, std_ratio=std_ratio, freq=freq, phase=phase)
    rows = [jax.device_get(evaluate_under(model, task, perturbation(kind, s, **options), key, n, chunk=chunk))
            for s in strengths]
    m = spec.metric_name
    attrs = {"kind": kind, "n": n, "task": task.describe(), "chance": task.chance,
             "metric": m, "higher_is_better": int(spec.higher_is_better)}
    if kind == "contrast":
        attrs.update(freq=freq, phase=phase)
    else:
        attrs.update(zip(("onset", "duration"), default_window(task.length, onset, duration)))
        if kind == "noisy":
            attrs["std_ratio"] = std_ratio
    strength_name = {"step": "step drive xi", "noisy": "noisy drive mean mu (std = std_ratio * mu)",
                     "contrast": "contrast amplitude alpha"}[kind]
    ds = xr.Dataset(
        {m: ("strength", np.array([float(r[m]) for r in rows]), {"long_name": f"held-out {m} under the perturbation"}),
         "loss": ("strength", np.array([float(r["loss"]) for r in rows]), {"long_name": "held-out loss"})},
        coords={"strength": ("strength", np.array(strengths), {"long_name": strength_name})},
    )
    return stamp(ds, analysis="perturb", config=attrs, seed=seed)
