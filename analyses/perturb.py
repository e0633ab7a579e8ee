"""The ``perturb`` analysis: a model's held-out metric under a perturbation of increasing strength.

The perturbations themselves (step drive, noisy drive, contrast, :func:`~dynlab.perturbations.compose`)
are core transforms in :mod:`dynlab.perturbations`; this module measures a model under them.
"""

from __future__ import annotations

from typing import Literal

import jax
import numpy as np
import xarray as xr

from dynlab.errors import ConfigError, require_positive
from dynlab.losses import get_loss
from dynlab.perturbations import default_window, evaluate_under, perturbation
from dynlab import figures
from dynlab.registry import register


@register(
    "analysis",
    "perturb",
    "task metric of a model under a perturbation (step/noisy drive, contrast) vs strength",
    figure=figures.perturbation_curve,
)
def perturb_analysis(
    model,
    *,
    task,
    kind: Literal["step", "noisy", "contrast"] = "noisy",
    strengths: tuple[float, ...] | list[float] = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0),
    n: int = 1000,
    seed: int = 0,
    onset: int | None = None,
    duration: int | None = None,
    std_ratio: float = 0.4,
    freq: float = 1.0,
    phase: float = 0.0,
    chunk: int = 250,
) -> xr.Dataset:
    """Held-out loss and metric of ``model`` on ``task`` under :func:`perturbation` ``(kind, s)``
    for each strength ``s``; every strength sees the same ``n`` samples and noise draws (``seed``).

    Returns a dataset over ``strength`` with the metric (e.g. ``accuracy``) and ``loss``; attrs
    give the protocol (kind, window, ``std_ratio`` / ``freq`` / ``phase``), the task and chance.
    """
    if task is None:
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
    attrs = {"analysis": "perturb", "kind": kind, "n": n, "seed": seed, "task": task.describe(), "chance": task.chance,
             "metric": m, "higher_is_better": int(spec.higher_is_better)}
    if kind == "contrast":
        attrs.update(freq=freq, phase=phase)
    else:
        attrs.update(zip(("onset", "duration"), default_window(task.length, onset, duration)))
        if kind == "noisy":
            attrs["std_ratio"] = std_ratio
    strength_name = {"step": "step drive xi", "noisy": "noisy drive mean mu (std = std_ratio * mu)",
                     "contrast": "contrast amplitude alpha"}[kind]
    return xr.Dataset(
        {m: ("strength", np.array([float(r[m]) for r in rows]), {"long_name": f"held-out {m} under the perturbation"}),
         "loss": ("strength", np.array([float(r["loss"]) for r in rows]), {"long_name": "held-out loss"})},
        coords={"strength": ("strength", np.array(strengths), {"long_name": strength_name})},
        attrs=attrs,
    )
