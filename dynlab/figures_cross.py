"""Figures of the cross-paper scenarios (every unit side by side): ``cross-lyapunov``,
``cross-pc-alignment`` and ``cross-trw``. Each takes the scenario's dataset."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import xarray as xr


def _grid(n: int, size=(3.0, 2.5)):
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _small(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)


def _finish(fig, axes, title: str):
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def lyapunov_spectra(ds: xr.Dataset):
    """One panel per unit: the spectrum at initialisation (dashed) and after training (solid),
    one line per seed, with the confidence band over initial conditions."""
    fig, axes = _grid(ds.sizes["unit"])
    styles = {"init": dict(ls="--", color="tab:grey"), "trained": dict(ls="-", color="tab:blue")}
    for ax, unit in zip(axes, ds.unit.values):
        for stage in ds.stage.values:
            for seed in ds.seed.values:
                sel = dict(unit=unit, stage=stage, seed=seed)
                m = ds["mean"].sel(sel)
                if np.all(np.isnan(m)):
                    continue
                label = stage if seed == ds.seed.values[0] else None
                ax.plot(ds.exponent, m, marker="o", ms=2.5, lw=1, label=label, **styles.get(str(stage), {}))
                ax.fill_between(ds.exponent, ds.ci_low.sel(sel), ds.ci_high.sel(sel), alpha=0.15,
                                color=styles.get(str(stage), {}).get("color"))
        ax.axhline(0, color="k", lw=0.5)
        loss = ds.eval_loss.sel(unit=unit, stage="trained").mean("seed")
        _small(ax, f"{unit} (dim {int(ds.state_dim.sel(unit=unit))}), loss {float(loss):.3g}", "exponent i",
               "λ_i per step")
    return _finish(fig, axes, f"Lyapunov spectra at initialisation and after training — {ds.attrs.get('task', '')}, "
                              f"width {ds.attrs.get('width', '?')}")


def lyapunov_largest(ds: xr.Dataset):
    """The largest exponent of every unit before vs after training (mean ± std over seeds), and
    the held-out loss each reached."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.arange(ds.sizes["unit"])
    for offset, stage, color in ((-0.18, "init", "tab:grey"), (0.18, "trained", "tab:blue")):
        da = ds.largest.sel(stage=stage)
        ax.bar(x + offset, da.mean("seed"), 0.36, yerr=da.std("seed", ddof=1), color=color, label=stage, capsize=2)
        loss = ds.eval_loss.sel(stage=stage)
        ax2.bar(x + offset, loss.mean("seed"), 0.36, yerr=loss.std("seed", ddof=1), color=color, label=stage, capsize=2)
    ax.axhline(0, color="k", lw=0.5)
    ax.set(ylabel="λ_1 per step", title="largest Lyapunov exponent")
    if "chance" in ds.attrs:
        ax2.axhline(ds.attrs["chance"], color="tab:red", ls="--", lw=0.8, label="chance")
    ax2.set(ylabel="held-out loss", title="task loss", yscale="log")
    for a in (ax, ax2):
        a.set_xticks(x, ds.unit.values, rotation=30, fontsize=8)
        a.legend(fontsize=7)
    fig.tight_layout()
    return fig


def pc_alignment(ds: xr.Dataset):
    """One panel per unit: the PC–BPTT gradient cosine against sequence length, one line per width
    (mean over seeds and training steps). Filled markers: inference converged at every step;
    hollow: it did not always (the cosine is then that of the unconverged activities)."""
    fig, axes = _grid(ds.sizes["unit"])
    cos = ds.cosine_unconverged.mean(("seed", "step"))
    for ax, unit in zip(axes, ds.unit.values):
        for width in ds.width.values:
            c, conv = cos.sel(unit=unit, width=width).values, ds.fraction_converged.sel(unit=unit, width=width).values
            line, = ax.plot(ds.length, c, "-", label=f"N={int(width)}")
            ax.plot(ds.length.values[conv == 1], c[conv == 1], "o", ms=4, color=line.get_color())
            ax.plot(ds.length.values[conv < 1], c[conv < 1], "o", ms=5, mfc="none", color=line.get_color())
        ax.set_xscale("log")
        ax.set_xticks(ds.length.values, [str(int(t)) for t in ds.length.values])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_ylim(min(0.0, float(np.nanmin(cos.values))), 1.02)
        ax.axhline(1, color="k", lw=0.5)
        _small(ax, f"{unit}: converged {100 * float(ds.fraction_converged.sel(unit=unit).mean()):.0f}%",
               "sequence length T", "cos(PC, BPTT)")
    return _finish(fig, axes, f"PC through time vs BPTT gradient alignment — {ds.attrs.get('task', '')}; "
                              "hollow: inference not converged")


def trw_by_layer(ds: xr.Dataset):
    r"""$\log_3 s_{50}$ of the temporal receptive window against layer, one line per network
    (mean ± sd over seeds; hollow markers: s50 left-censored, at or below the smallest scale tested)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for net in ds.network.values:
        sel = ds.sel(network=net)
        mean, std = sel.log3_s50.mean("seed"), sel.log3_s50.std("seed", ddof=1)
        line = ax.errorbar(ds.layer, mean, yerr=std, fmt="o-", ms=4, capsize=2, label=str(net))
        censored = sel.s50_censored.any("seed").values
        ax.plot(ds.layer.values[censored], mean.values[censored], "o", ms=9, mfc="none", color=line[0].get_color())
    ax.set(xlabel="layer", ylabel="log3 s50 (steps)", title="temporal receptive window by layer (hierarchical language)")
    ax.set_xticks(ds.layer.values)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


FIGURES = {"cross-lyapunov": lyapunov_spectra, "cross-pc-alignment": pc_alignment, "cross-trw": trw_by_layer}
