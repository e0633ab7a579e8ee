"""Figures drawn from result datasets (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import xarray as xr  # noqa: E402


def learning_curve(metrics: xr.Dataset):
    """Training loss per step and held-out metric per evaluation, with the chance level."""
    metric = metrics.attrs.get("metric", "loss")
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax_loss.plot(metrics.step, metrics.loss, lw=0.8, label="train (batch)")
    ax_loss.plot(metrics.eval_step, metrics.eval_loss, "o-", ms=3, label="held-out")
    ax_loss.set(xlabel="optimiser step", ylabel="loss", yscale="log", title="loss")
    ax_loss.legend()
    ax_metric.plot(metrics.eval_step, metrics[f"eval_{metric}"], "o-", ms=3, label="held-out")
    if "chance" in metrics.attrs:
        ax_metric.axhline(metrics.attrs["chance"], color="grey", ls="--", label="chance")
    ax_metric.set(xlabel="optimiser step", ylabel=metric, title=metric)
    if metric == "mse":
        ax_metric.set_yscale("log")
    ax_metric.legend()
    fig.suptitle(metrics.attrs.get("task", ""), fontsize=9)
    fig.tight_layout()
    return fig
