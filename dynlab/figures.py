"""Figures drawn from result datasets (matplotlib, Agg backend: no display needed).

Core holds only what is generic: the training curves, a sweep's summary, [`generic`][] for any
dataset, the panel helpers that figures of many units side by side share, and
[`plot_dataset`][], which finds a dataset's figure through the registry. An analysis's or a
program's own figure lives beside it and is registered with it (``register(..., figure=...)``).
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import xarray as xr  # noqa: E402


def without_paths(text: str) -> str:
    """``text`` for a figure title: every absolute file-system path replaced by its last folder or
    file name (``"split_seed 0, /data/shared/mnist"`` -> ``"split_seed 0, mnist/"``), which still
    says that real files were read, without a machine's directory layout across the figure."""
    import re

    return re.sub(r"(?<![\w.~])/(?:[^\s,;:()'\"/]+/)*([^\s,;:()'\"/]+)/?", r"\1/", text)


def legend_beside(ax, *, below: bool = False, **kw):
    """The legend of ``ax`` outside the axes (to the right, or ``below``), never on the data.
    The figure keeps room for it under ``layout="constrained"`` or ``tight_layout``."""
    if below:
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=kw.pop("ncol", 2), frameon=False, **kw)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kw)


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
    fig.suptitle(without_paths(metrics.attrs.get("task", "")), fontsize=9)
    fig.tight_layout()
    return fig


def generic(ds: xr.Dataset, *, max_panels: int = 6):
    """Each numeric variable in a panel: a line over its one dim, an image over two, else a value."""
    import numpy as np

    names = [v for v in ds.data_vars if ds[v].dtype.kind in "fiu"][:max_panels]
    if not names:
        fig, ax = plt.subplots(figsize=(4, 2))
        ax.text(0.5, 0.5, "no numeric variables", ha="center", va="center")
        ax.axis("off")
        return fig
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        da = ds[name].squeeze(drop=True)
        label = f"{name} ({da.attrs['units']})" if da.attrs.get("units") else name
        if da.ndim == 1:
            da.plot.line(ax=ax, marker="o", ms=3)
            if np.nanmin(da.values) > 0 and np.nanmax(da.values) / max(np.nanmin(da.values), 1e-300) > 100:
                ax.set_yscale("log")
        elif da.ndim == 2:
            da.plot(ax=ax, cbar_kwargs={"label": label})
        elif da.ndim == 0:
            ax.text(0.5, 0.5, f"{float(da):.5g}", ha="center", va="center", fontsize=14)
            ax.axis("off")
        else:
            da.mean([d for d in da.dims[2:]]).plot(ax=ax)
        ax.set_title(label, fontsize=9)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def sweep(ds: xr.Dataset):
    """The headline numbers of each cell against the sweep's first axis (others as lines)."""
    sweep_dims = [d for d in ds["status"].dims]
    wanted = [v for v in ds.data_vars if v.startswith("train_eval_") or v.endswith("_largest_mean") or v == "lyapunov_largest_mean"]
    panels = []
    for v in wanted:
        da = ds[v]
        extra = [d for d in da.dims if d not in sweep_dims]
        if extra:  # a curve: keep its last point (final value)
            da = da.isel({d: -1 for d in extra})
        panels.append((v, da))
    if not panels or not sweep_dims:
        return generic(ds)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False)
    x = sweep_dims[0]
    for ax, (name, da) in zip(axes.ravel(), panels):
        others = [d for d in da.dims if d != x]
        if others:
            stacked = da.stack(line=others)
            for i in range(stacked.sizes["line"]):
                line = stacked.isel(line=i)
                lbl = ", ".join(f"{d}={line[d].item()}" for d in others)
                ax.plot(da[x].values, line.values, "o-", ms=3, label=lbl)
            if stacked.sizes["line"] <= 8:
                ax.legend(fontsize=7)
        else:
            ax.plot(da[x].values, da.values, "o-", ms=3)
        ax.set(xlabel=x, ylabel=name, title=f"final {name}" if name.startswith("train_") else name)
    fig.suptitle(f"sweep {ds.attrs.get('scenario', '')}: {ds.attrs.get('n_ok', '?')}/{ds.attrs.get('n_cells', '?')} cells ok", fontsize=9)
    fig.tight_layout()
    return fig


def panel_grid(n: int, size: tuple[float, float] = (3.0, 2.5)):
    """A figure of ``n`` small panels, at most 4 per row (unused cells hidden): ``(fig, axes)``, axes flat."""
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def label_panel(ax, title: str, xlabel: str, ylabel: str) -> None:
    """Title and axis labels in the small type of a [`panel_grid`][] panel."""
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)


def finish_panels(fig, axes, title: str):
    """The legend on the first panel, the figure's title, a tight layout; returns ``fig``."""
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_dataset(ds: xr.Dataset):
    """The figure that fits a result dataset, by its ``analysis`` attribute.

    Registered analyses and programs bring their own figure (``register(..., figure=...)``,
    [`dynlab.registry.Entry`][]); training curves and sweeps are drawn here; anything else
    gets [`generic`][].
    """
    from dynlab import registry

    kind = ds.attrs.get("analysis")
    for registered in ("analysis", "program"):
        if isinstance(kind, str) and kind in registry.names(registered):
            figure = registry.get(registered, kind).figure
            if figure is not None:
                return figure(ds)
    if kind == "training":
        return learning_curve(ds)
    if kind == "sweep":
        return sweep(ds)
    return generic(ds)
