"""Figure helpers shared by the ARU analyses' figures (matplotlib): the title, a colour
per drive, the (n, s) heatmap, a mean ± CI line."""

from __future__ import annotations

import numpy as np
import xarray as xr


def title(fig, ds: xr.Dataset, text: str) -> None:
    """The figure's title: the model, then ``text``; tight layout."""
    fig.suptitle(f"{ds.attrs.get('model', '')} — {text}", fontsize=9)
    fig.tight_layout()


def drive_colors(drives: np.ndarray):
    """One viridis colour per value of ``drives``, and the mappable for a colour bar."""
    import matplotlib
    from matplotlib.colors import Normalize

    norm = Normalize(vmin=float(drives.min()), vmax=float(max(drives.max(), drives.min() + 1e-9)))
    cmap = matplotlib.colormaps.get_cmap("viridis")
    return [cmap(norm(d)) for d in drives], matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap)


def grid_image(ax, ds: xr.Dataset, values: np.ndarray, **kwargs):
    """An (n, s) heatmap with one cell per grid point, n on the x axis."""
    mesh = ax.pcolormesh(np.arange(ds.sizes["n"] + 1) - 0.5, np.arange(ds.sizes["s"] + 1) - 0.5, values.T,
                         shading="flat", **kwargs)
    ax.set_xticks(np.arange(ds.sizes["n"])[::2], [f"{v:g}" for v in ds.n.values[::2]], fontsize=7)
    ax.set_yticks(np.arange(ds.sizes["s"]), [f"{v:g}" for v in ds.s.values], fontsize=7)
    ax.set(xlabel="gain n", ylabel="saturation s")
    return mesh


def ci_line(ax, x, ds, name, **kwargs):
    """Mean ± CI of the finite runs (line and band); runs that escaped to infinity as × at their growth rate."""
    mean = ds[f"{name}_mean"].values
    line, = ax.plot(x, mean, "o-", ms=3, **kwargs)
    ax.fill_between(x, ds[f"{name}_ci_low"].values, ds[f"{name}_ci_high"].values, color=line.get_color(), alpha=0.2)
    escape = ds[f"{name}_escape_mean"].values
    if np.isfinite(escape).any():
        label = f"{kwargs['label']}: escapes (growth rate)" if "label" in kwargs else None
        ax.plot(x, escape, "x--", ms=6, color=line.get_color(), label=label)
    return line
