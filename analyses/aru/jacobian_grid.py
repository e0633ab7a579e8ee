r"""``jacobian-grid`` (ARU App. Fig. 6A): the mean Jacobian norm of the static $\gamma$ network over the
$(n, s)$ grid, with its figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array

from dynlab.analyses.aru.frozen_map import (
    PAPER_N,
    PAPER_S,
    GammaMap,
    cast_floats,
    frozen_gamma_cell,
    number_grid,
    numerics,
    recurrent_layer,
)
from dynlab.analyses.aru.plotting import grid_image, title
from dynlab.config import Count
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register


def plot_jacobian_grid(ds: xr.Dataset):
    """Mean Jacobian norm over (n, s), log colour scale centred on 1, the JN = 1 contour (App. Fig. 6A)."""
    from matplotlib.colors import LogNorm

    fig, ax = subplots(figsize=(7, 3.6))
    jn = ds.jacobian_norm.values
    lo, hi = max(float(np.nanmin(jn)), 1e-3), float(np.nanmax(jn))
    mesh = grid_image(ax, ds, jn, cmap="RdBu_r", norm=LogNorm(vmin=min(lo, 0.99), vmax=max(hi, 1.01)))
    if np.nanmin(jn) < 1 < np.nanmax(jn):
        ax.contour(np.arange(ds.sizes["n"]), np.arange(ds.sizes["s"]), jn.T, levels=[1], colors="k", linewidths=1)
    fig.colorbar(mesh, ax=ax, label=f"mean {ds.attrs.get('norm', '')} norm of D_h F")
    ax.set_title(f"Jacobian norm, h ~ U(-{ds.attrs.get('h_range', 5):g}, {ds.attrs.get('h_range', 5):g}), "
                 f"{ds.attrs.get('samples', '')} states", fontsize=9)
    title(fig, ds, "static γ network (black: JN = 1)")
    return fig


def jacobian_norm(jac: Array, norm: str = "spectral") -> Array:
    r"""``"spectral"``: the operator 2-norm $\sigma_{\max}(J)$; ``"rms"``: $\lVert J\rVert_F / \sqrt{N}$,
    the root-mean-square singular value. Leading axes are batch axes."""
    if norm == "spectral":
        return jnp.linalg.norm(jac, ord=2, axis=(-2, -1))
    if norm == "rms":
        return jnp.sqrt(jnp.mean(jnp.sum(jac**2, axis=-1), axis=-1))
    raise ConfigError(f"norm must be 'spectral' or 'rms', got {norm!r}")


@eqx.filter_jit
def _jacobian_norms(fmap: GammaMap, n: Array, s: Array, hs: Array, xi: Array, norm: str) -> Array:
    """``[G]`` grid points x ``[M, N]`` states -> norms ``[G, M]`` (grid points in batches, bounded memory)."""
    H = fmap.cell.hidden

    def at(ns):
        m = fmap.with_params(jnp.full(H, ns[0]), jnp.full(H, ns[1]))
        return jacobian_norm(jax.vmap(jax.jacfwd(m), in_axes=(0, None))(hs, xi), norm)

    return jax.lax.map(at, (n, s), batch_size=8)


def jacobian_grid_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze jacobian-grid`` prints: the range of the mean Jacobian norm and where it is largest."""
    jn = ds.jacobian_norm
    where = jn.where(jn == jn.max(), drop=True)
    return (f"mean Jacobian norm: {float(jn.min()):.4f} – {float(jn.max()):.4f}; above 1 at "
            f"{int((jn > 1).sum())} of {jn.size} grid points; largest at n = {float(where.n[0]):g}, "
            f"s = {float(where.s[0]):g}")


@register(
    "analysis",
    "jacobian-grid",
    "ARU App. Fig. 6A: mean Jacobian norm of the static gamma net over (n, s)",
    figure=plot_jacobian_grid,
    summary=jacobian_grid_summary,
    outputs=(
        *Output.each("jacobian_norm jacobian_norm_std", "real", ("n", "s")),
        Output("jacobian_norm_samples", "field", ("n", "s", "sample")),
    ),
)
def jacobian_grid_analysis(
    model,
    *,
    n_values: Sequence[float] = PAPER_N,
    s_values: Sequence[float] = PAPER_S,
    samples: Count = 100,
    h_range: float = 5.0,
    norm: Literal["spectral", "rms"] = "spectral",
    drive: float = 0.0,
    seed: int = 0,
) -> xr.Dataset:
    r"""Mean norm of $D_h F_{n,s}(h) = \operatorname{diag}(\gamma'(W_{hh} h + b_h + \xi; n, s))\, W_{hh}$
    over $h \sim U(-h_r, h_r)^N$ (paper §5.4: $h_r = 5$), on the grid of homogeneous $(n, s)$.

    The network is layer 0 of ``model`` with its $(n, s)$ replaced by each grid pair (shared by all
    neurons, App. A), zero input, constant drive $\xi$ (default 0). The paper's "$L^2$-norm" is read as
    the operator norm (``norm="spectral"``, the largest singular value: the factor by which one
    step can stretch a gradient; JN > 1 explodes, < 1 vanishes); ``"rms"`` gives
    $\lVert J\rVert_F/\sqrt{N}$. For an orthogonal $W_{hh}$ (a fresh model) the spectral norm is
    $\max_i |\gamma'_i|$ and the rms norm $(\frac1N\sum_i \gamma_i'^2)^{1/2}$, since orthogonal
    factors do not change singular values. The same ``samples`` states are used at every grid point.

    **Returns:** ``jacobian_norm`` (mean), ``jacobian_norm_std`` over (``n``, ``s``), and the
    samples ``jacobian_norm_samples`` (``n``, ``s``, ``sample``).

    Args:
        n_values: gains n (default: the paper's 1, 1.25, ..., 20).
        s_values: saturations s.
        h_range: states h ~ U(-X, X) (5: the paper's).
        drive: constant drive xi in the map.
        samples: states h per grid point.
        norm: operator 2-norm (spectral), or |J|_F / sqrt(N) (rms).
        seed: seed of the sampled states.
    """
    require_positive("samples", samples)
    require_positive("h_range", h_range, integer=False)
    if norm not in ("spectral", "rms"):
        raise ConfigError(f"norm must be 'spectral' or 'rms', got {norm!r}")
    n_grid, s_grid = number_grid("n_values", n_values), number_grid("s_values", s_values)
    cell = recurrent_layer(model)
    hs = jax.random.uniform(jax.random.key(seed), (samples, cell.hidden), minval=-h_range, maxval=h_range)
    nn, ss = np.meshgrid(n_grid, s_grid, indexing="ij")
    with numerics(False) as dtype:
        fmap = cast_floats(GammaMap(frozen_gamma_cell(cell)), dtype)
        norms = np.asarray(_jacobian_norms(fmap, jnp.asarray(nn.ravel(), dtype), jnp.asarray(ss.ravel(), dtype),
                                           hs.astype(dtype), jnp.asarray(drive, dtype), norm))
    norms = norms.reshape(n_grid.size, s_grid.size, samples)
    long = f"{norm} norm of the state Jacobian"
    ds = xr.Dataset(
        {
            "jacobian_norm": (("n", "s"), norms.mean(-1), {"long_name": f"mean {long}"}),
            "jacobian_norm_std": (("n", "s"), norms.std(-1), {"long_name": f"std of the {long} over states"}),
            "jacobian_norm_samples": (("n", "s", "sample"), norms, {"long_name": long}),
        },
        coords={"n": ("n", n_grid, {"long_name": "gain n"}), "s": ("s", s_grid, {"long_name": "saturation s"})},
    )
    return stamp(ds, analysis="jacobian-grid", seed=seed, config=dict(samples=samples, h_range=h_range, norm=norm,
        drive=drive, hidden=cell.hidden))
