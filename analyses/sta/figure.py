"""The figure and the printed summary of an ``sta`` dataset."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots

__all__ = ["representative_neurons", "sta_figure", "sta_summary"]

MAX_LAYERS = 8
"""Columns of the figure: at most this many layers (the first ones) are drawn."""
MAX_SYMBOL_TICKS = 12


def representative_neurons(ds: xr.Dataset) -> list[int]:
    """Per layer, the neuron (index along `neuron`) whose receptive fields are largest: the
    highest selectivity summed over levels."""
    layers = ds["layer"].values
    total = np.nansum(ds["selectivity"].values, axis=0)
    return [int(np.flatnonzero(layers == layer)[np.argmax(total[layers == layer])]) for layer in np.unique(layers)]


def sta_figure(ds: xr.Dataset):
    """A grid as the SITH paper's Fig. 4d: levels in rows, layers in columns; each panel the
    receptive field (STA minus baseline; symbols × lags) of the layer's representative neuron
    ([`representative_neurons`][]), on a colour scale symmetric about 0."""
    picks = representative_neurons(ds)[:MAX_LAYERS]
    n_levels = ds.sizes["level"]
    fig, axes = subplots(n_levels, len(picks), figsize=(2.6 * len(picks) + 1.0, 2.2 * n_levels + 1.0),
                             squeeze=False)
    for col, neuron in enumerate(picks):
        for row in range(n_levels):
            ax = axes[row, col]
            rf = ds["receptive_field"].values[row, neuron]  # [lag, symbol]
            labels = ds["symbol_label"].values[row]
            keep = np.array([bool(str(s)) for s in labels])
            rf = rf[:, keep]
            top = float(np.nanmax(np.abs(rf))) if np.isfinite(rf).any() else 1.0
            im = ax.imshow(rf.T, aspect="auto", origin="lower", cmap="RdBu_r", vmin=-top or -1, vmax=top or 1,
                           interpolation="nearest")
            if row == 0:
                ax.set_title(f"{ds['layer_name'].values[neuron]}\nneuron {int(ds['index_in_layer'].values[neuron])}",
                             fontsize=8)
            if col == 0:
                ax.set_ylabel(f"{ds['level_name'].values[row]}\n(item)", fontsize=8)
            n_sym = int(keep.sum())
            if n_sym <= MAX_SYMBOL_TICKS and col == 0:
                # words are readable as letters; longer items by their number (lexicographic order)
                short = [s if len(s) <= 3 else f"#{i}" for i, s in enumerate(np.asarray(labels)[keep])]
                ax.set_yticks(range(n_sym), short, fontsize=6)
            else:
                ax.set_yticks([])
            if row == n_levels - 1:
                ax.set_xlabel("lag (items back)", fontsize=8)
            ax.tick_params(labelsize=6)
            fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02).ax.tick_params(labelsize=5)
    q = ds.attrs.get("quantile", "?")
    fig.suptitle(f"receptive fields by spike-triggered averaging (high = above the {q} quantile; STA − baseline)\n"
                 f"representative neuron per layer: the largest receptive fields", fontsize=9)
    fig.tight_layout()
    return fig


def _null_lines(ds, level_names, names, layers, width) -> list[str]:
    """Per layer and level the fraction of neurons beating the time-shifted null, then per level
    the layer trend with its interval, in words ([`dynlab.analyses.sta.null.trend_sentence`][])."""
    from dynlab.analyses.sta.null import Trend, trend_sentence

    level = ds.attrs.get("null_level", 0.05)
    lines = [f"fraction of neurons beating a time-shifted null (p <= {level:g}, {ds.attrs.get('null_shifts', '?')} "
             f"circular shifts of the response):",
             f"{'layer':<{width}} " + " ".join(f"{n:>10}" for n in level_names)]
    beats = ds["fraction_beating_null"].values
    for j, layer in enumerate(ds["layer_number"].values):
        lines.append(f"{str(names[layers == layer][0]):<{width}} " + " ".join(f"{b:>10.2f}" for b in beats[:, j]))
    clears = ds["null_clears_window"].values
    if not clears.all():
        lines.append("no shift clears the STA window at level(s) " + ", ".join(np.asarray(level_names)[~clears])
                     + " (at most 2 x lags items): their selectivity cannot be told from the null")
    if not np.isfinite(ds["layer_trend"].values).any():
        return lines + ["layer trend: none (fewer than two layers with two neurons each)"]
    for i, name in enumerate(level_names):
        raw = Trend(*(float(ds[f"layer_trend{k}"].values[i]) for k in ("", "_ci_low", "_ci_high")), np.nan, np.nan)
        excess = Trend(*(float(ds[f"excess_layer_trend{k}"].values[i]) for k in ("", "_ci_low", "_ci_high")),
                       np.nan, np.nan)
        lines.append(f"layer trend, {name}: {trend_sentence(raw, excess)}")
    return lines


def sta_summary(ds: xr.Dataset) -> str:
    """Per layer, the median selectivity of its neurons at every level; then the fraction beating
    the time-shifted null and each level's layer trend with its 95% interval."""
    level_names = [str(v) for v in ds["level_name"].values]
    names = ds["layer_name"].values
    layers = ds["layer"].values
    width = max(10, max(len(str(n)) for n in names))
    lines = [f"sta: {ds.sizes['neuron']} neurons in {len(np.unique(layers))} layers, {ds.sizes['lag']} lags, high = above "
             f"the {ds.attrs.get('quantile', '?')} quantile; median selectivity (rms of the receptive field) per level:",
             f"{'layer':<{width}} " + " ".join(f"{n:>10}" for n in level_names) + f" {'triggers':>9}"]
    sel = ds["selectivity"].values
    for layer in np.unique(layers):
        idx = layers == layer
        with np.errstate(invalid="ignore"):
            med = np.nanmedian(sel[:, idx], axis=1) if np.isfinite(sel[:, idx]).any() else np.full(len(level_names), np.nan)
        lines.append(f"{str(names[idx][0]):<{width}} " + " ".join(f"{m:>10.4f}" for m in med)
                     + f" {int(np.median(ds['triggers'].values[idx])):>9}")
    if "selectivity_p" in ds:
        lines += _null_lines(ds, level_names, names, layers, width)
    silent = int((ds["triggers"].values == 0).sum())
    if silent:
        lines.append(f"{silent} neurons never exceed their quantile (constant output): their averages are NaN")
    return "\n".join(lines)
