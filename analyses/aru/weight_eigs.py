r"""``weight-eigs`` (ARU Fig. 5e): the eigenvalues of every layer's $W_{hh}$ against the unit circle, with
its figure."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from dynlab.analyses.aru.plotting import title
from dynlab.analyses.spectra.eigenvalues import weight_eigenvalues
from dynlab.errors import ConfigError
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register


def plot_weight_eigs(ds: xr.Dataset):
    """Fig. 5e: eigenvalues of each W_hh against the unit circle."""
    fig, ax = subplots(figsize=(5.5, 5))
    theta = np.linspace(0, 2 * np.pi, 300)
    ax.plot(np.cos(theta), np.sin(theta), color="grey", lw=0.8)
    for name in ds.matrix.values:
        sel = ds.sel(matrix=name)
        ax.plot(sel.eig_real, sel.eig_imag, ".", ms=4,
                label=f"{name}: {int(sel.n_outside)} of {int(sel.n_eigenvalues)} outside, ρ = {float(sel.spectral_radius):.3f}")
    ax.set(xlabel="Re μ", ylabel="Im μ", aspect="equal", title="eigenvalues of W_hh")
    ax.legend(fontsize=7)
    title(fig, ds, "recurrent weights vs the unit circle")
    return fig


def weight_eigs_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze weight-eigs`` prints: each recurrent matrix's spectral radius and how
    many eigenvalues lie outside the unit circle."""
    lines = []
    for name in ds.matrix.values:
        sel = ds.sel(matrix=name)
        lines.append(f"{name}: spectral radius {float(sel.spectral_radius):.4f}, {int(sel.n_outside)} of "
                     f"{int(sel.n_eigenvalues)} eigenvalues outside the unit circle")
    return "\n".join(lines)


@register(
    "analysis",
    "weight-eigs",
    "ARU Fig. 5e: eigenvalues of W_hh against the unit circle",
    figure=plot_weight_eigs,
    summary=weight_eigs_summary,
    outputs=(
        *Output.each("eig_real eig_imag eig_modulus", "field", ("matrix", "eigenvalue")),
        *Output.each("n_eigenvalues n_outside", "exact", ("matrix",)), Output("spectral_radius", "real", ("matrix",)),
        Output("fraction_outside", "fraction", ("matrix",)),
    ),
)
def weight_eigs_analysis(
    model, *, others: Mapping[str, object] | None = None, label: str = "model", tol: float = 1e-4
) -> xr.Dataset:
    r"""Eigenvalues $\mu_i$ of every layer's $W_{hh}$ ([`dynlab.analyses.spectra.weight_eigenvalues`][]),
    with ``n_outside`` / ``fraction_outside``: how many lie outside the unit circle, $|\mu_i| > 1 + \text{tol}$
    (the tolerance keeps the float32 rounding of an orthogonal matrix's unit-modulus eigenvalues,
    ~$10^{-6}$, from counting as outside).

    ``others`` maps labels to further models (e.g. a non-adaptive network trained alike, Fig. 5e);
    the ``matrix`` coordinate is ``<label>:layer<i>.w_hh``.

    Args:
        others: further models by label, whose eigenvalues are shown beside the model's.
        label: the model's label in the ``matrix`` coordinate.
        tol: an eigenvalue lies outside the unit circle when its modulus exceeds 1 + tol.
    """
    models = {label: model, **(others or {})}
    matrices = {}
    for name, m in models.items():
        for i, c in enumerate(getattr(m, "cells", ())):
            if "w_hh" in c.recurrent_matrices():
                matrices[f"{name}:layer{i}.w_hh"] = c.recurrent_matrices()["w_hh"]
    if not matrices:
        raise ConfigError("weight-eigs needs models whose units have a recurrent matrix w_hh (rnn, rnn-gamma, aru)")
    ds = weight_eigenvalues(matrices)
    outside = (ds.eig_modulus > 1 + tol).sum("eigenvalue")
    ds["n_outside"] = outside.assign_attrs(long_name="eigenvalues with |mu| > 1")
    ds["fraction_outside"] = (outside / ds.n_eigenvalues).assign_attrs(long_name="fraction with |mu| > 1")
    return stamp(ds, analysis="weight-eigs", config=dict(models=", ".join(models), tol=tol))
