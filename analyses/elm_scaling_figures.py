"""Figures of the ELM scaling-law analyses of [`dynlab.analyses.elm_scaling`][] (matplotlib):
the joint $I_{\rm rep}$ fit (``elm-budget`` scenario), the $I_{\rm rep}$ curves, and the ELM network
against an LSTM over bin sizes (``elm-shd-adding``)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from dynlab.figures import subplots


def i_rep_fit(fit: xr.Dataset):
    """Loss vs k_e per group (mean ± sd over repeated points) with the fitted I_rep curves and theory optima
    (stars); measured vs fitted loss. ``fit`` is [`dynlab.analyses.elm_scaling.fit_i_rep`][]'s dataset."""
    fig, (ax, ax_r) = subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    for g, name in enumerate(fit.group.values):
        points = fit.where(fit.point_group == name, drop=True)
        k_values = np.unique(points.k_e.values)
        mean = [float(points.loss.where(points.k_e == k).mean()) for k in k_values]
        sd = [float(points.loss.where(points.k_e == k).std(ddof=1)) for k in k_values]
        bars = ax.errorbar(k_values, mean, yerr=sd, fmt="o", ms=4, capsize=2, label=f"{name}")
        color = bars[0].get_color()
        ax.plot(fit.k_e_grid, fit.curve_loss.isel(group=g), color=color, lw=1.2)
        if bool(fit.opt_interior.isel(group=g)):
            ax.plot(float(fit.k_e_opt.isel(group=g)), float(fit.loss_opt.isel(group=g)), "*", ms=13,
                    color="gold", mec=color, zorder=5)
    interior = fit.opt_interior.values.astype(bool)
    if interior.any():
        ax.plot([], [], "*", ms=11, color="gold", mec="k", label="theory optimum")
    if not interior.all():  # the fitted curve's optimum is an end of the k_e range: no star to draw
        ax.plot([], [], " ", label="no interior optimum: " + ", ".join(map(str, fit.group.values[~interior])))
    ax.set(xscale="log", xlabel="per-neuron effective parameters k_e", ylabel="loss",
           title="loss vs neuron complexity; lines: c0 - c1 I_rep")
    ax.legend(fontsize=7)
    lo, hi = float(min(fit.loss.min(), fit.fitted_loss.min())), float(max(fit.loss.max(), fit.fitted_loss.max()))
    ax_r.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    ax_r.scatter(fit.fitted_loss, fit.loss, s=10)
    ax_r.set(xlabel="fitted loss", ylabel="measured loss", title=f"Pearson r = {float(fit.pearson_r):.3f}")
    shared = ", ".join(f"{p}={fit.attrs[p + '_ref']:.3g}" for p in ("alpha", "beta", "gamma", "q_inf"))
    fig.suptitle(f"joint I_rep fit ({fit.sizes['point']} points), reference {shared}", fontsize=9)
    fig.tight_layout()
    return fig


def i_rep_curves(ds: xr.Dataset):
    """-I_rep vs k_e for each budget, optima starred, floor crossover and alpha-crossing marked
    ([`dynlab.analyses.elm_scaling.i_rep_curves`][])."""
    fig, ax = subplots(figsize=(6.5, 4.2))
    for b, budget in enumerate(ds.budget.values):
        line, = ax.plot(ds.k_e, -ds.i_rep.isel(budget=b), lw=1.2, label=f"P = {budget:.3g}")
        ax.plot(float(ds.k_e_opt[b]), -float(ds.i_rep_opt[b]), "*", ms=12, color="gold", mec=line.get_color())
    for k, text in ((ds.attrs["k_floor"], "floor k_e*"), (ds.attrs["k_cross"], "s = 1 (k_x)")):
        if np.isfinite(k) and float(ds.k_e.min()) <= k <= float(ds.k_e.max()):
            ax.axvline(k, color="grey", ls=":", lw=0.9)
            ax.annotate(text, (k, 0.02), xycoords=("data", "axes fraction"), fontsize=7, rotation=90)
    ax.set(xscale="log", xlabel="per-neuron effective parameters k_e", ylabel="-I_rep (bits)",
           title=", ".join(f"{p}={ds.attrs[p]:.3g}" for p in ("alpha", "beta", "gamma", "q_inf")) + f", k_c={ds.attrs['k_c']:.3g}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def single_axes(axes: xr.Dataset, rho: xr.Dataset | None = None):
    """The scaling paper's Fig. 3a/b at this scale: held-out loss against the number of neurons N at a fixed
    neuron, and against the neuron's size (k_e, labelled with d_m) at a fixed N; each seed's point and the
    mean over seeds. With ``rho`` (the elm-budget's feed-forward ablation), a third panel: the default and
    the rho_rec = 0 network's loss per seed at the grid's best cell."""
    panels = [v for v in ("loss_vs_n", "loss_vs_d_m") if v in axes] + (["rho"] if rho is not None else [])
    fig, axs = subplots(1, len(panels), figsize=(4.0 * len(panels), 3.6), squeeze=False)
    for ax, panel in zip(axs[0], panels):
        if panel == "rho":
            for k, net in enumerate(rho.network.values):
                loss = rho.loss.sel(network=net).values
                ax.plot(np.full(loss.shape, k), loss, "o", color="C0", alpha=0.5, ms=4)
                ax.plot([k - 0.2, k + 0.2], [np.nanmean(loss)] * 2, color="k", lw=1.5)
            ax.set_xticks(range(rho.sizes["network"]),
                          [f"{n}\nrho_rec = {float(r):g}" for n, r in zip(rho.network.values, rho.rho_rec.values)])
            ax.set(xlim=(-0.6, rho.sizes["network"] - 0.4), ylabel="held-out loss",
                   title=f"P = {rho.attrs['budget']:,}, d_m = {rho.attrs['d_m']}, N = {rho.attrs['N']}")
            continue
        da = axes[panel]
        dim = da.dims[0]
        x = axes.k_e.values if dim == "d_m" else axes[dim].values
        for s in axes.seed.values:
            ax.plot(x, da.sel(seed=s), "o", color="C0", alpha=0.4, ms=4)
        ax.plot(x, da.mean("seed"), "-", color="k", lw=1.5, label=f"mean over {axes.sizes['seed']} seed(s)")
        ax.set(xscale="log", ylabel="held-out loss", title=da.attrs.get("long_name", ""))
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.margins(x=0.1, y=0.15)
        if dim == "d_m":
            ax.set_xlabel("per-neuron effective parameters k_e (d_m)")
            for xi, d, y in zip(x, axes.d_m.values, da.mean("seed").values):
                ax.annotate(f"d_m={int(d)}", (xi, y), textcoords="offset points", xytext=(0, 6), fontsize=7,
                            ha="center")
        else:
            ax.set_xlabel("neurons N")
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle("ELM network, one axis at a time (paper Fig. 3a/b)" + (" and rho_rec = 0 (Fig. 12)" if rho is not None
                                                                        else ""), fontsize=9)
    fig.tight_layout()
    return fig


def accuracy_by_bin(ds: xr.Dataset):
    """The ``elm-shd-adding`` scenario's figure ([`dynlab.scenarios.elm_shd`][]): held-out accuracy
    against training step, one panel per bin size, one colour per network (mean ± sd over seeds)."""
    from dynlab.figures import without_paths

    bins, metric = [float(b) for b in ds.bin_ms.values], ds.attrs["metric"]
    fig, axes = subplots(1, len(bins), figsize=(4.2 * len(bins) + 1.0, 3.6), squeeze=False, sharey=True)
    for ax, b in zip(axes[0], bins):
        for k, net in enumerate(ds.network.values):  # one colour per network in every panel
            da = ds[metric].sel(network=net, bin_ms=b)
            if not bool(np.isfinite(da).any()):
                continue  # not trained at this bin size (the constant-tau ablation runs at the smallest)
            ax.errorbar(ds.eval_step.values, da.mean("seed"), yerr=da.std("seed", ddof=1) if da.sizes["seed"] > 1 else None,
                        fmt="o-", ms=3, capsize=2, color=f"C{k}", label=f"{net} ({int(ds.params.sel(network=net))} params)")
        ax.axhline(ds.attrs["chance"], color="grey", ls="--", lw=0.8, label="chance")
        ax.set(xlabel="training step", title=f"{b:g} ms bins (T = {int(round(2000 / b))})")
    axes[0, 0].set_ylabel(f"held-out {metric} (mean ± sd over seeds)")
    entries = {}  # every network of every panel (the constant-tau ablation is in the first panel only)
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    axes[0, -1].legend(entries.values(), entries.keys(), fontsize=7, loc="best")
    fig.suptitle(f"SHD-Adding: ELM network vs a parameter-matched LSTM ({without_paths(ds.attrs['data'])})", fontsize=9)
    fig.tight_layout()
    return fig
