r"""``lyapunov-grid`` (ARU App. Fig. 6B): $\lambda_1$ of the static $\gamma$ network over the $(n, s)$ grid,
repeated over independent runs, with its figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import jax
import numpy as np
import xarray as xr

from dynlab.analyses.aru.frozen_map import (
    PAPER_N,
    PAPER_S,
    check_confidence,
    check_realisations,
    check_steps,
    lambda1_runs,
    lambda_vars,
    number_grid,
    recurrent_layer,
)
from dynlab.analyses.aru.plotting import grid_image, title
from dynlab.config import Count, Range
from dynlab.errors import require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register


def plot_lyapunov_grid(ds: xr.Dataset):
    """Mean λ1 over (n, s), diverging colours centred on 0, the λ1 = 0 contour (App. Fig. 6B)."""
    from matplotlib.colors import TwoSlopeNorm

    fig, ax = subplots(figsize=(7, 3.6))
    lam = ds.lambda1_mean.values
    lo, hi = float(np.nanmin(lam)), float(np.nanmax(lam))
    mesh = grid_image(ax, ds, lam, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, vmin=min(lo, -1e-3), vmax=max(hi, 1e-3)))
    if lo < 0 < hi:
        ax.contour(np.arange(ds.sizes["n"]), np.arange(ds.sizes["s"]), lam.T, levels=[0], colors="k", linewidths=1)
    fig.colorbar(mesh, ax=ax, label="λ1 (per step)")
    over = ds.attrs.get("ci_population", f"{ds.sizes['ic']} initial conditions")
    ax.set_title(f"largest Lyapunov exponent, mean over {over}", fontsize=9)
    title(fig, ds, "static γ network, zero input")
    return fig


def lyapunov_grid_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze lyapunov-grid`` prints: the range of lambda_1 and where it is closest to 0."""
    lam = ds.lambda1_mean
    near = lam.where(abs(lam) == abs(lam).min(), drop=True)
    return (f"lambda_1: {float(lam.min()):+.4f} – {float(lam.max()):+.4f} per step; positive at "
            f"{int((lam > 0).sum())} of {lam.size} grid points; closest to 0 at n = {float(near.n[0]):g}, "
            f"s = {float(near.s[0]):g} ({float(near.values.ravel()[0]):+.4f}); means over {ds.attrs['ci_population']}")


@register(
    "analysis",
    "lyapunov-grid",
    "ARU App. Fig. 6B: lambda_1 of the static gamma net over (n, s)",
    figure=plot_lyapunov_grid,
    summary=lyapunov_grid_summary,
    outputs=(
        *Output.each("lambda1 lambda1_within_run_se lambda1_escape", "real", ("n", "s", "realisation", "ic")),
        Output("lambda1_diverged", "field", ("n", "s", "realisation", "ic")),
        *Output.each("lambda1_mean lambda1_ci_low lambda1_ci_high lambda1_ic_sd lambda1_escape_mean", "real", ("n", "s")),
        Output("lambda1_bounded", "exact", ("n", "s")),
    ),
)
def lyapunov_grid_analysis(
    model,
    *,
    n_values: Sequence[float] = PAPER_N,
    s_values: Sequence[float] = PAPER_S,
    realisations: Annotated[int, Range(minimum=2)] = 5,
    ics: Count = 2,
    steps: Count = 1000,
    burn_in: int = 200,
    h_range: float = 5.0,
    drive: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    x64: bool = False,
) -> xr.Dataset:
    r"""$\lambda_1$ of $h_{t+1} = \gamma(W_{hh} h_t + b_h + \xi;\, n, s)$ on the grid of homogeneous $(n, s)$.

    Layer 0 of ``model`` with zero input (App. D.4) and constant drive $\xi$ (default 0): an
    autonomous map, so there is no input to vary. The measurement is repeated over
    ``realisations`` independent *runs*: realisation $r$ draws its own ``ics`` initial conditions
    $h_0 \sim U(-h_r, h_r)^N$ (the distribution of the Jacobian-norm analysis) and its own initial
    tangent frame, both from ``fold_in(key(seed), r)``; all grid points share a realisation's draws
    (common random numbers make neighbouring grid points comparable). Each run has ``steps`` steps,
    the first ``burn_in`` not accumulated; everything is one vmapped QR computation
    ([`frozen_lambda1`][]). Where every run falls to one fixed point $h^*$, the exponent is
    $\ln\rho(J(h^*))$ and the runs differ only by the finite-time error of the frame (largest when the
    leading eigenvalues are a complex pair, whose frame never settles); the interval over
    independent frames is what measures that error.

    **Returns:** ``lambda1`` (``n``, ``s``, ``realisation``, ``ic``); ``lambda1_mean`` and its Student-t
    interval ``lambda1_ci_low``, ``lambda1_ci_high`` (``n``, ``s``) over the realisations' means (attrs
    ``ci_population``, ``ci_level``); ``lambda1_ic_sd``, the sd over initial conditions within a
    realisation (multistability: runs from different states that settle differently). Runs whose state
    escapes to infinity (possible for trained weights) are flagged in ``lambda1_diverged``, left out of
    the means, and measured by their [`escape_rate`][] (``lambda1_escape``, ``lambda1_escape_mean``).
    Fewer than 2 realisations is a ConfigError.

    Args:
        n_values: gains n (default: the paper's 1, 1.25, ..., 20).
        s_values: saturations s.
        realisations: independent runs (initial states and frames) the CI is over.
        ics: initial conditions per realisation and grid point (their spread: multistability).
        steps: steps of each QR run.
        burn_in: steps not accumulated.
        h_range: initial states h ~ U(-X, X).
        drive: constant drive xi in the map (App. D.4: 0).
        confidence: level of the Student-t interval.
        seed: seed of the initial states and frames.
        x64: compute in float64.
    """
    check_steps(steps, burn_in)
    require_positive("ics", ics)
    check_realisations(realisations)
    require_positive("h_range", h_range, integer=False)
    check_confidence(confidence)
    n_grid, s_grid = number_grid("n_values", n_values), number_grid("s_values", s_values)
    cell = recurrent_layer(model)
    H, G, R = cell.hidden, n_grid.size * s_grid.size, realisations
    key = jax.random.key(seed)
    h0 = np.stack([np.asarray(jax.random.uniform(jax.random.fold_in(key, r), (ics, H), minval=-h_range,
                                                 maxval=h_range)) for r in range(R)])  # [R, I, H]
    nn, ss = np.meshgrid(n_grid, s_grid, indexing="ij")
    rows = lambda a: np.tile(a.reshape(G, 1), (R, H))  # noqa: E731  [R * G, H], realisation-major
    result = lambda1_runs(
        cell, rows(nn), rows(ss), np.full(R * G, drive), np.repeat(h0, G, axis=0), steps=steps, burn_in=burn_in,
        seed=seed, x64=x64, realisation=np.repeat(np.arange(R), G),
    )
    shaped = result.reshape(R, n_grid.size, s_grid.size, ics).moveaxis(0, 2)
    ds = xr.Dataset(
        lambda_vars("lambda1", shaped, ("n", "s"), confidence, "largest Lyapunov exponent",
                     "independent runs (initial states and frames)"),
        coords={"n": ("n", n_grid, {"long_name": "gain n"}), "s": ("s", s_grid, {"long_name": "saturation s"}),
                "realisation": ("realisation", np.arange(R), {"long_name": "independent run (initial states, frame)"}),
                "ic": ("ic", np.arange(ics), {"long_name": "initial condition within a realisation"})},
    )
    return stamp(ds, analysis="lyapunov-grid", seed=seed, config=dict(realisations=R, ics=ics, steps=steps,
        burn_in=burn_in, h_range=h_range, drive=drive, confidence=confidence, x64=x64, hidden=H,
        ci_population=f"{R} independent runs (initial states and frames)", ci_level=confidence,
        ci_method=ds.lambda1_ci_low.attrs["ci_method"]))
