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


def lyapunov_spectrum(ds: xr.Dataset, *, max_running: int = 8):
    """Spectrum (mean and CI, over the population the dataset names) and convergence of the running estimates."""
    fig, (ax_s, ax_r) = plt.subplots(1, 2, figsize=(10, 3.8))
    idx = ds.exponent.values
    mean = ds["mean"].values
    err = [mean - ds.ci_low.values, ds.ci_high.values - mean]
    level = int(round(100 * ds.attrs.get("ci_level", ds.attrs.get("confidence", 0.95))))
    population = ds.attrs.get("ci_population", "initial conditions")
    ax_s.errorbar(idx, mean, yerr=err, fmt="o", ms=3, capsize=2, label=f"mean ± {level}% CI over {population}")
    ax_s.axhline(0, color="grey", lw=0.8)
    ax_s.set(xlabel="exponent index i", ylabel="λ_i (per step)", title="Lyapunov spectrum")
    ax_s.legend(fontsize=8)
    over = [d for d in ("realisation", "ic") if d in ds.running.dims]
    running = ds.running.mean(over) if over else ds.running
    for i in idx[:max_running]:
        ax_r.plot(running.time, running.sel(exponent=i), lw=1, label=f"λ{i}")
    ax_r.axhline(0, color="grey", lw=0.8)
    ax_r.set(xlabel="steps accumulated (after burn-in)", ylabel="running estimate (per step)", xscale="log",
             title="convergence (mean over runs)")
    ax_r.legend(fontsize=7, ncol=2)
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
    fig.tight_layout()
    return fig


def spectra(ds: xr.Dataset):
    """Weight eigenvalues vs the unit circle, Jacobian spectra over time, covariance spectrum."""
    import numpy as np

    fig, (ax_w, ax_j, ax_c) = plt.subplots(1, 3, figsize=(14, 4))
    theta = np.linspace(0, 2 * np.pi, 200)
    ax_w.plot(np.cos(theta), np.sin(theta), color="grey", lw=0.8, label="unit circle")
    if "weight_eig_real" in ds:
        for name in ds.matrix.values:
            sel = ds.sel(matrix=name)
            ax_w.plot(sel.weight_eig_real, sel.weight_eig_imag, ".", ms=4, label=str(name))
    ax_w.set(xlabel="Re λ", ylabel="Im λ", title="recurrent weight eigenvalues", aspect="equal")
    ax_w.legend(fontsize=7)
    t = ds.time.values
    sv = ds.jacobian_singular_values
    ax_j.plot(t, ds.jacobian_spectral_radius, "o-", ms=3, label="spectral radius ρ(J_t)")
    ax_j.plot(t, sv.isel(jacobian_singular_value=0), "s-", ms=3, label="largest singular value")
    ax_j.axhline(1, color="grey", ls="--", lw=0.8)
    ax_j.set(xlabel="step", ylabel="magnitude", title="state Jacobian along the trajectory", yscale="log")
    ax_j.legend(fontsize=7)
    if "covariance_eigenvalue" in ds:
        rank, ev = ds["rank"].values, ds.covariance_eigenvalue.values
        ax_c.loglog(rank, ev, ".", label="eigenvalues")
        fit = ds.covariance_in_fit_range.values.astype(bool)
        amp, alpha = float(ds.covariance_power_law_amplitude), float(ds.covariance_alpha)
        ax_c.loglog(rank[fit], amp * rank[fit] ** -alpha, "-",
                    label=f"α = {alpha:.2f} [{float(ds.covariance_alpha_ci_low):.2f}, {float(ds.covariance_alpha_ci_high):.2f}]")
        ax_c.legend(fontsize=7)
    else:
        ax_c.text(0.5, 0.5, "activity constant\n(no covariance spectrum)", ha="center", va="center",
                  transform=ax_c.transAxes)
    ax_c.set(xlabel="rank n", ylabel="variance λ_n", title="activity covariance spectrum")
    fig.suptitle(f"{ds.attrs.get('model', '')} — {ds.attrs.get('protocol', '')}", fontsize=9)
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


def perturbation_curve(ds: xr.Dataset):
    """Metric against perturbation strength (``perturb`` analysis): one line per ``network`` if
    that dim exists, mean ± std over ``seed`` if that one does; chance as a dashed line."""
    import numpy as np

    metric = ds.attrs.get("metric", "accuracy")
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    networks = ds["network"].values if "network" in ds.dims else [None]
    for net in networks:
        da = ds[metric] if net is None else ds[metric].sel(network=net)
        label = None if net is None else str(ds["label"].sel(network=net).values if "label" in ds.coords else net)
        if "seed" in da.dims:
            mean, std = da.mean("seed").values, da.std("seed", ddof=1).values
            ax.errorbar(ds.strength.values, mean, yerr=std, fmt="o-", ms=3, capsize=2, label=label)
        else:
            ax.plot(ds.strength.values, np.asarray(da.values), "o-", ms=3, label=label)
    if "chance" in ds.attrs:
        ax.axhline(ds.attrs["chance"], color="grey", ls="--", lw=0.8, label="chance")
    xlabel = ds.strength.attrs.get("long_name", "strength")
    ax.set(xlabel=xlabel, ylabel=f"held-out {metric}", title=f"{ds.attrs.get('kind', '')} perturbation")
    ax.legend(fontsize=7)
    fig.suptitle(ds.attrs.get("task", ""), fontsize=7)
    fig.tight_layout()
    return fig


def plot_dataset(ds: xr.Dataset):
    """The figure that fits a result dataset, by its ``analysis`` attribute.

    Registered analyses and programs bring their own figure (``register(..., figure=...)``,
    :class:`dynlab.registry.Entry`); training curves and sweeps are drawn here; anything else
    gets :func:`generic`.
    """
    from dynlab import registry
    from dynlab.figures_cross import FIGURES as CROSS_FIGURES

    kind = ds.attrs.get("analysis")
    for registered in ("analysis", "program"):
        if isinstance(kind, str) and kind in registry.names(registered):
            figure = registry.get(registered, kind).figure
            if figure is not None:
                return figure(ds)
    if kind in CROSS_FIGURES:
        return CROSS_FIGURES[kind](ds)
    if kind == "training":
        return learning_curve(ds)
    if kind == "sweep":
        return sweep(ds)
    return generic(ds)
