"""Figures of the temporal-receptive-window analyses of [`dynlab.analyses.trw`][] (matplotlib).

[`trw_curves`][] is the registered figure of the ``trw`` analysis (``dynlab plot``); the others
draw the datasets of [`accuracy_vs_dilation`][dynlab.analyses.trw.accuracy_vs_dilation],
[`parameter_counts`][dynlab.analyses.trw.parameter_counts], [`impulse_responses`][dynlab.analyses.trw.impulse_responses] and
[`recurrence_plots`][dynlab.analyses.trw.recurrence_plots], as the ``sith-trw`` scenario uses them.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots


def trw_curves(ds: xr.Dataset):
    """Correlation vs scrambling scale per layer (mean ± std over shuffles), s50 marked; s50 vs layer.

    A left-censored $s_{50}$ (``s50_censored``: the correlation is below half its maximum already at
    the smallest scale, so $s_{50}$ is only known to be at or below it) is drawn as a bound, never
    as a measurement: a hollow downward triangle at the smallest scale, "s50 ≤ 3^0" in the legend.
    Legends sit below the panels, off the data."""
    fig, (ax, ax_s) = subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    scales = ds.scale.values
    censored = ds.s50_censored.values.astype(bool) if "s50_censored" in ds else np.zeros(ds.sizes["layer"], bool)
    smallest = f"3^{int(round(np.log(scales.min()) / np.log(3)))}"
    for i, layer in enumerate(ds.layer.values):
        m, sd = ds.correlation_mean.values[i], ds.correlation_std.values[i]
        s50 = f"s50 ≤ {smallest}, censored" if censored[i] else f"s50 = 3^{float(ds.log3_s50[i]):.2f}"
        line, = ax.plot(scales, m, "o-", ms=3, label=f"{ds.layer_name.values[i]} ({s50})")
        ax.fill_between(scales, m - sd, m + sd, color=line.get_color(), alpha=0.15)
        if not censored[i]:
            ax.axvline(float(ds.s50[i]), color=line.get_color(), ls=":", lw=1)
    ax.axhline(ds.attrs.get("frac", 0.5) * float(ds.correlation_mean.max()), color="grey", ls="--", lw=0.8,
               label="half maximum")
    ax.set(xscale="log", xlabel="scrambling scale s (steps)", ylabel="C(ρ, ρ_shuff(s))", title="TRW scrambling")
    ax.set_xticks(scales, [f"3^{int(round(np.log(s) / np.log(3)))}" for s in scales])
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    log3 = lambda v: np.log(np.asarray(v, np.float64)) / np.log(3)  # noqa: E731
    layers, values = ds.layer.values, ds.log3_s50.values
    line, = ax_s.plot(layers, np.where(censored, np.nan, values), "o-", label="s50 (scrambling)")
    if censored.any():
        ax_s.plot(layers[censored], values[censored], "v", ms=9, mfc="none", color=line.get_color(),
                  label=f"s50 ≤ {smallest}: censored at the smallest scale (a bound)")
    if "tau_selected_quantile" in ds:  # What x When units: the time cells their max over tau picks
        q = log3(ds.tau_selected_quantile.values)
        ax_s.plot(layers, q[:, 1], "s--", label="τ at the max over τ: median, 10–90%")
        ax_s.fill_between(layers, q[:, 0], q[:, -1], alpha=0.15, color=ax_s.lines[-1].get_color())
    ax_s.set(xlabel="layer", ylabel="log3 steps", title="temporal receptive window per layer",
             ylim=(-0.4, log3(scales.max()) + 0.2), xticks=layers)
    ax_s.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    parts = [ds.attrs.get("model", ""), f"{ds.attrs['n_shuffle']} shuffles per scale" if "n_shuffle" in ds.attrs else ""]
    fig.suptitle(" — ".join(p for p in parts if p), fontsize=9)
    return fig


def accuracy_vs_dilation(ds: xr.Dataset):
    """Accuracy vs dilation exponent, one line per network (``ds.accuracy[network, dilation]``,
    optional ``seed``; one line without ``network``: the ``dilation`` analysis of one model). Seeds are replicates, never an axis: the line is their mean, the dots each
    seed; networks are nudged apart along x so that equal accuracies (e.g. several at 1.00) stay visible."""
    from dynlab.figures import legend_beside

    fig, ax = subplots(figsize=(8, 4))
    acc = ds.accuracy
    nets = list(acc.network.values) if "network" in acc.dims else [None]
    markers = "osD^vP*Xh<>"
    width = 0.3  # total spread of the networks around each dilation
    for k, net in enumerate(nets):
        a = acc if net is None else acc.sel(network=net)
        label = "model" if net is None else str(net)
        shift = (k - (len(nets) - 1) / 2) * width / max(1, len(nets) - 1)
        x = a.dilation.values + shift
        colour, marker = f"C{k % 10}", markers[k % len(markers)]
        if "seed" in a.dims:
            ax.plot(x, a.mean("seed"), marker=marker, ls="-", ms=5, color=colour, label=label)
            per_seed = a.transpose("dilation", "seed").values
            ax.plot(np.repeat(x, per_seed.shape[1]), per_seed.ravel(), ".", ms=4, alpha=0.4, color=colour)
        else:
            ax.plot(x, a, marker=marker, ls="-", ms=5, color=colour, label=label)
    ax.axhline(1 / 9, color="grey", ls="--", lw=0.8, label="chance (1/9)")
    dil = acc.dilation.values
    ax.set_xticks(dil, [f"3^{int(m)}" for m in dil])
    n_seeds = acc.sizes.get("seed", 1)
    seeds = f"lines: mean over {n_seeds} seeds, dots: each seed" if n_seeds > 1 else "one seed"
    ax.set(xlabel="time dilation (factor 3^m)", ylabel="accuracy", ylim=(-0.02, 1.05),
           title=f"zero-shot accuracy vs time dilation (trained at 3^0)\n{seeds}")
    ax.title.set_fontsize(10)
    legend_beside(ax, fontsize=7)
    fig.tight_layout()
    return fig


def params_vs_accuracy(ds: xr.Dataset):
    """Trainable parameters (log) vs accuracy averaged over dilations, per network."""
    from dynlab.figures import legend_beside

    fig, ax = subplots(figsize=(7.5, 4))
    acc = ds.accuracy.mean("dilation")
    if "seed" in acc.dims:
        acc = acc.mean("seed")
    markers = "osD^vP*Xh<>"  # distinct markers: networks of equal size and accuracy stay visible
    for k, net in enumerate(ds.network.values):
        ax.scatter(float(ds.unit_params.sel(network=net)), float(acc.sel(network=net)), label=str(net),
                   marker=markers[k % len(markers)], s=60 - 4 * k, alpha=0.85)
    dil = ds.dilation.values
    ax.set(xscale="log", xlabel="trainable parameters of the unit",
           ylabel=f"mean accuracy over dilations 3^{int(dil.min())}..3^{int(dil.max())}")
    legend_beside(ax, fontsize=7)
    fig.tight_layout()
    return fig


def impulse_responses(ds: xr.Dataset, max_lines: int = 12):
    """h and Lh after a pulse vs t and vs t/τ_i (the collapse), with the collapse scores."""
    fig, axes = subplots(2, 2, figsize=(10, 6))
    for row, (name, tau) in enumerate((("h", "tau_h"), ("Lh", "tau_Lh"))):
        r = ds[name].values
        taus = ds[tau].values
        idx = np.linspace(0, r.shape[1] - 1, min(max_lines, r.shape[1])).astype(int)
        t = ds.time.values
        for i in idx:
            peak = max(np.abs(r[:, i]).max(), 1e-30)
            axes[row, 0].plot(t, r[:, i] / peak, lw=0.8)
            axes[row, 1].plot(t / taus[i], r[:, i] / peak, lw=0.8)
        axes[row, 0].set(xscale="symlog", xlabel="t (steps)", ylabel=f"{name} / peak", title=name)
        axes[row, 1].set(xscale="log", xlim=(0.05, 20), xlabel="t / τ_i",
                         title=f"{name} vs t/τ_i: collapse {float(ds[f'collapse_{name}']):.3f}")
    fig.tight_layout()
    return fig


def recurrence_plots(ds: xr.Dataset):
    """Recurrence matrices (Eq. 10) of the input and every layer."""
    n = ds.sizes["layer"]
    fig, axes = subplots(1, n, figsize=(2.6 * n, 2.8))
    for i, ax in enumerate(np.atleast_1d(axes)):
        ax.imshow(ds.rho.values[i], vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set(title=str(ds.layer_name.values[i]), xticks=[], yticks=[])
    fig.tight_layout()
    return fig
