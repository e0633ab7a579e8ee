"""What a transfer variant ([`dynlab.transfer`][]) changed, read from a run's config alone.

The variants are ordinary runs whose config says what was frozen, made trainable, rotated or
isolated; figures and the command line name that in one line ([`describe`][]; of a run directory,
[`describe_run`][], which also reads whether it was retrained). This module
imports nothing of dynlab, so the figures of the core can use it ([`dynlab.transfer`][] builds
the variants and needs the experiment layer).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CONTROLLER = ("w_ag", "w_gg", "b_g", "w_gn", "b_n", "w_gs", "b_s")
"""The ARU controller's parameters (frozen in a transplanted controller)."""

ACTIVATION = {"rnn-gamma": ("n", "s"), "aru": ("b_n", "b_s")}
"""Per unit, its per-neuron activation parameters (the only ones a retrained activation trains)."""


def describe(config: Mapping, *, retrained: bool = True) -> str:
    """What a variant of [`transplant_controller`][dynlab.transfer.transplant_controller], [`retrain_activation`][dynlab.transfer.retrain_activation] or [`isolate`][dynlab.transfer.isolate]
    froze, retrained, rotated or isolated, in one line for figure titles and the terminal
    (``""`` for an ordinary run), read from its config alone:
    ``"isolated neurons (W_hh reduced to its diagonal), not retrained"``,
    ``"only (n, s) retrained on 45° rotated digits, all else as trained"``.

    ``retrained``: whether the run directory was trained after the variant was made (an
    ``isolate``d network is not: it has no ``metrics.nc``)."""
    model, train, task = (dict(config.get(k, {}) or {}) for k in ("model", "train", "task"))
    unit = model.get("unit")
    rotate = float(task.get("rotate", 0) or 0)
    on = f" on {rotate:g}° rotated digits" if rotate else ""
    parts = []
    if model.get("isolated"):
        parts.append("isolated neurons (W_hh reduced to its diagonal)" + ("" if retrained else ", not retrained"))
    trainable = [str(t) for t in train.get("trainable", []) or []]
    if trainable:
        names = [t.rsplit(".", 1)[-1] for t in trainable]
        if sorted(names) == sorted(ACTIVATION.get(unit, ())):
            parts.append(f"only ({', '.join(names)}) retrained{on}, all else as trained")
        else:
            parts.append(f"only {', '.join(trainable)} trained{on}")
    freeze = [str(f) for f in train.get("freeze", []) or []]
    if freeze:
        if set(CONTROLLER) <= {f.rsplit(".", 1)[-1] for f in freeze}:
            parts.append("controller transplanted from a trained ARU and frozen, main network trained anew")
        else:
            parts.append(f"frozen: {', '.join(freeze)}")
    return "; ".join(parts)


def describe_run(config: Mapping, run_dir) -> str:
    """[`describe`][] of the run directory ``run_dir`` with config ``config``: what it froze,
    retrained or isolated. A directory without ``metrics.nc`` was not trained after the variant
    was made (``dynlab transfer isolate``)."""
    return describe(config, retrained=(Path(run_dir) / "metrics.nc").is_file())
