r"""The registered ``spectra`` analysis: weight, Jacobian and activity-covariance spectra of a dynlab model.

The model's state map ([`dynlab.analyses.state_map`][]) runs under an input protocol
([`dynlab.analyses.protocol`][]); the cores of [`dynlab.analyses.spectra`][] do the rest, and their
datasets are merged into one with variables prefixed by what they describe.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np

import jax
import xarray as xr

from dynlab.analyses.spectra.covariance import covariance_spectrum
from dynlab.analyses.spectra.eigenvalues import jacobian_spectra, weight_eigenvalues
from dynlab.analyses.spectra.figure import plot_spectra, spectra_summary
from dynlab.analyses.protocol import Autonomous, Protocol
from dynlab.analyses.state_map import run_in, state_map
from dynlab.config import Count, NonNegative
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register


def _prefixed(ds: xr.Dataset, prefix: str, dims: dict[str, str]) -> xr.Dataset:
    ds = ds.rename({**dims, **{v: f"{prefix}_{v}" for v in ds.data_vars}})
    for name in ds.data_vars:
        ds[name].attrs.setdefault("source", prefix)
    return ds


def _eigenvalues_without_fit(activity: np.ndarray, error: Exception) -> tuple[np.ndarray, str]:
    """The covariance eigenvalues (descending, float64) of activity whose power-law fit failed,
    and one line saying why there is no fit."""
    x = activity.astype(np.float64)
    x = x - x.mean(axis=0)
    ev = np.clip(np.linalg.eigvalsh(x.T @ x / max(1, x.shape[0] - 1))[::-1], 0.0, None)
    above = int(np.sum(ev > 1e-10 * ev[0]))
    norms = np.linalg.norm(activity.astype(np.float64), axis=1)
    tenth = max(1, norms.size // 10)
    start, end = float(norms[:tenth].mean()), float(norms[-tenth:].mean())
    if above < 3 and end > 1e3 * max(start, 1e-300):
        why = (f"the activity grows without bound (|h| from {start:.1e} to {end:.1e} over the window), "
               "so one direction dominates the covariance")
    elif above < 3:
        why = (f"the activity spans {above} dimension{'s' if above != 1 else ''} (eigenvalues above 1e-10 λ_1), "
               "a power law needs at least 3")
    else:
        why = str(error).split(";")[0].split(". ")[0].rstrip(".")
    return ev, f"no power-law fit to the activity covariance spectrum: {why}"


@register(
    "analysis",
    "spectra",
    "eigenvalues of recurrent weights and state Jacobians; activity covariance spectrum",
    figure=plot_spectra,
    summary=spectra_summary,
    outputs=(
        *Output.each("weight_eig_real weight_eig_imag weight_eig_modulus", "field", ("matrix", "weight_eigenvalue"),
                     optional=True),
        Output("weight_n_eigenvalues", "exact", ("matrix",), optional=True),
        Output("weight_spectral_radius", "real", ("matrix",), optional=True),
        *Output.each("jacobian_eig_real jacobian_eig_imag jacobian_eig_modulus", "field", ("time", "jacobian_eigenvalue")),
        Output("jacobian_singular_values", "field", ("time", "jacobian_singular_value")),
        Output("jacobian_spectral_radius", "real", ("time",)),
        Output("covariance_eigenvalue", "field", ("rank",), optional=True),
        *Output.each("covariance_explained_variance_ratio covariance_in_fit_range", "field", ("rank",), optional=True),
        Output("covariance_alpha_bootstrap", "field", ("bootstrap",), optional=True),
        *Output.each("covariance_alpha covariance_alpha_ci_centre covariance_power_law_amplitude covariance_power_law_r2 "
                     "covariance_alpha_ci_low covariance_alpha_ci_high covariance_truncated_alpha covariance_truncated_n_c "
                     "covariance_truncated_amplitude covariance_truncated_r2 covariance_participation_ratio",
                     optional=True),
    ),
)
def spectra_analysis(
    model,
    *,
    steps: Count = 2000,
    burn_in: NonNegative = 200,
    every: Count | None = None,
    input: Protocol = Autonomous(),
    n_boot: NonNegative = 200,
    block_size: Count | Literal["auto"] = "auto",
    seed: int = 0,
    x64: bool = False,
) -> xr.Dataset:
    r"""Three spectra of a model, in one dataset (variables prefixed by what they describe).

    * ``weight_*``: eigenvalues of every layer's recurrent matrices (``cell.recurrent_matrices()``,
      e.g. ``layer0.w_hh`` and, for ARUs, the controller's ``layer0.w_gg``), dims
      (``matrix``, ``weight_eigenvalue``), and each matrix's spectral radius;
    * ``jacobian_*``: eigenvalues and singular values of the full state Jacobian
      $J_t = \partial h_{t+1}/\partial h_t$ every ``every`` steps along the trajectory after
      ``burn_in`` steps (default: 20 samples), dims (``time``, ``jacobian_eigenvalue``) and
      (``time``, ``jacobian_singular_value``);
    * ``covariance_*``: the eigenspectrum of the covariance of the layers' activities $h_t$
      (controller states excluded) over the ``steps`` steps after burn-in, dim ``rank``, with a
      power-law fit $\lambda_n \propto n^{-\alpha}$ (bootstrap CI over time points) and a
      truncated power law $n^{-\alpha} e^{-n/n_c}$ ([`dynlab.analyses.spectra.covariance_spectrum`][]).
      Activity along a trajectory is autocorrelated, so the bootstrap resamples blocks of
      consecutive steps, not single steps, which would give too narrow an interval:
      ``block_size="auto"`` (default) takes $\lceil 10\hat\tau\rceil$ steps from the
      autocorrelation of the leading principal components; the interval is the basic
      (bias-correcting) bootstrap interval over this one recording, and the fit range is capped
      where eigenvalue bias would dominate (see ``covariance_spectrum``).

    The trajectory runs under the ``input`` protocol ([`dynlab.analyses.protocol`][]; autonomous
    by default). Under autonomous dynamics most units settle to a fixed point, whose activity
    covariance is zero: use a task, a drive or noise for a meaningful covariance spectrum (a
    warning says so).

    Args:
        steps: steps of the analysed window.
        burn_in: steps before the analysed window.
        every: Jacobian sampled every this many steps (default: 20 samples).
        input: input protocol: autonomous (default), drive=XI, task=NAME[,drive=XI] or
            noise=STD[,seed=S]. --drive XI and --task NAME set it too.
        n_boot: bootstrap resamples for the CI of alpha.
        block_size: steps per bootstrap block ("auto": ten autocorrelation times).
        seed: seed of the task's inputs and the bootstrap.
        x64: compute in float64.
    """
    require_positive("steps", steps)
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
        raise ConfigError(f"burn_in must be a non-negative integer, got {burn_in!r}")
    every = max(1, steps // 20) if every is None else every
    require_positive("every", every)
    smap = state_map(model)
    k_in, _ = jax.random.split(jax.random.key(seed))
    xs, xi = input.inputs(model, burn_in + steps, k_in)
    states = run_in(smap, (xs, xi))
    h_start = smap.h0 if burn_in == 0 else states[burn_in - 1]
    inputs = (xs[burn_in:], xi[burn_in:])

    matrices = {f"layer{i}.{name}": w for i, c in enumerate(model.cells) for name, w in c.recurrent_matrices().items()}
    parts = []
    if matrices:
        parts.append(_prefixed(weight_eigenvalues(matrices), "weight", {"eigenvalue": "weight_eigenvalue"}))
    jac = jacobian_spectra(smap.step, h_start, inputs, every=every, x64=x64)
    parts.append(_prefixed(jac, "jacobian", {"eigenvalue": "jacobian_eigenvalue", "singular_value": "jacobian_singular_value"}))
    activity_idx = [i for i, label in enumerate(smap.labels) if label.endswith(".h")]
    activity = np.asarray(states[burn_in:][:, activity_idx])
    protocol = input.name
    note = ""
    if activity.std(axis=0).max() <= 1e-6 * max(1.0, np.abs(activity).max()):
        note = f"no activity covariance spectrum: the activity is constant (a fixed point) under {protocol}"
        if not input.driven:
            note += "; drive the model with a task or a drive"
    else:
        try:
            cov = covariance_spectrum(
                activity, n_boot=n_boot, seed=seed,
                block_size=block_size if block_size == "auto" else min(block_size, activity.shape[0] // 2)
            )
            parts.append(_prefixed(cov, "covariance", {}))
        except ValueError as e:  # a spectrum, but too few nonzero eigenvalues (or samples) to fit a power law
            ev, note = _eigenvalues_without_fit(activity, e)
            parts.append(xr.Dataset(
                {"covariance_eigenvalue": ("rank", ev, {"long_name": "covariance eigenvalue", "units": "activity^2"}),
                 "covariance_participation_ratio": ((), ev.sum() ** 2 / np.sum(ev**2), {
                     "units": "1", "long_name": "participation ratio (sum lambda)^2 / sum lambda^2"})},
                coords={"rank": ("rank", np.arange(1, ev.size + 1), {"long_name": "eigenvalue rank (descending)"})}))
    if note:
        warnings.warn(note, RuntimeWarning, stacklevel=2)
    ds = xr.merge(parts, combine_attrs="drop")
    return stamp(ds, analysis="spectra", seed=seed, config={
        "protocol": protocol,
        **({"covariance_note": note} if note else {}),
        "drive": input.drive_attr,
        "steps": steps,
        "burn_in": burn_in,
        "every": every,
        "state_dim": smap.dim,
        **{f"covariance_{k}": v for k, v in (parts[-1].attrs.items() if "covariance_alpha" in parts[-1] else [])
           if isinstance(v, (int, float, str))},
    })
