r"""Dynamical analyses of dynlab models: Lyapunov spectra under the three input protocols.

These glue a model's state map (:mod:`dynlab.analyses.state_map`) to the numerical cores
(:mod:`dynlab.analyses.lyapunov`), choose initial conditions, and label the result with what
was analysed (model config, protocol, checkpoint, seed).
"""

from __future__ import annotations

import warnings

import numpy as np

import jax
import xarray as xr

from dynlab.analyses import lyapunov as lyap
from dynlab.analyses.state_map import initial_conditions, protocol_inputs, run_in, state_map
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register


def protocol_name(drive: float | None, task) -> str:
    if task is not None:
        return f"task {type(task).__name__}" + ("" if drive is None else f" + drive {drive:g}")
    return "autonomous (zero input)" if drive is None else f"constant drive xi={drive:g}"


@register("analysis", "lyapunov", "Lyapunov spectrum (QR method) with CIs over initial conditions")
def lyapunov_analysis(
    model,
    *,
    k: int = 16,
    steps: int = 2000,
    burn_in: int = 500,
    drive: float | None = None,
    task=None,
    ics: int = 5,
    ic_kind: str = "visited",
    ic_scale: float = 1.0,
    reortho_every: int = 1,
    seed: int = 0,
    x64: bool = False,
    tol: float = 1e-3,
) -> xr.Dataset:
    r"""The $k$ largest Lyapunov exponents of a model's full state map, over ``ics`` initial conditions.

    The map is $h_{t+1} = F(h_t, x_t, \xi_t)$ on every layer's whole state (for ARUs: the
    activities and the controllers), driven by the protocol's inputs: autonomous (default, the
    ARU paper's App. D.4 setting), a constant ``drive`` $\xi$ on every neuron, or ``task``
    inputs. Initial conditions are states visited after a run-in of ``steps`` steps under the
    same inputs (``ic_kind="visited"``), or Gaussian perturbations of the initial state
    (``"random"``, std ``ic_scale``). Each initial condition is then followed for ``steps``
    steps, the first ``burn_in`` of which are not accumulated.

    Returns the dataset of :func:`dynlab.analyses.lyapunov.lyapunov_ensemble` (``exponents``
    over ``ic``, ``exponent``; ``mean``, ``ci_low``, ``ci_high``; largest exponent, sum of
    positive exponents, Kaplan–Yorke dimension, counts) with attrs ``protocol``, ``drive``,
    ``ic_kind``, ``seed``.
    """
    check_lyapunov(model, k=k, steps=steps, burn_in=burn_in, ics=ics)
    smap = state_map(model)
    key = jax.random.key(seed)
    k_in, k_ic, k_frame = jax.random.split(key, 3)
    inputs = protocol_inputs(model, steps, drive=drive, task=task, key=k_in)
    h0s = initial_conditions(smap, ics, k_ic, kind=ic_kind, inputs=inputs, scale=ic_scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = lyap.lyapunov_ensemble(
            smap.step, h0s, inputs, k, burn_in=burn_in, reortho_every=reortho_every, x64=x64, key=k_frame, tol=tol
        )
    for w in caught:  # re-issue from here so the user sees where it came from
        warnings.warn(str(w.message), w.category, stacklevel=2)
    ds.attrs.update(
        protocol=protocol_name(drive, task),
        drive=float("nan") if drive is None else float(drive),
        ic_kind=ic_kind,
        seed=seed,
        state_dim=smap.dim,
    )
    return ds


def check_lyapunov(model, *, k: int, steps: int, burn_in: int, ics: int, **_) -> None:
    """The options of :func:`lyapunov_analysis` that ``model`` can take (``k`` <= its state dimension).

    Enforces, in one place: lyapunov's options are valid for the model. Called by the analysis
    itself and, as ``lyapunov_analysis.check``, by scenario validation for every cell's model
    before any cell runs (:func:`dynlab.scenarios.spec.check_cells`; the model may be abstract).
    """
    require_positive("steps", steps)
    require_positive("ics", ics)
    require_positive("k", k)
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")
    dim = state_map(model).dim
    if k > dim:
        raise ConfigError(f"k = {k} exceeds the state dimension N = {dim} of this model; use 1 <= k <= {dim}")


lyapunov_analysis.check = check_lyapunov


def _prefixed(ds: xr.Dataset, prefix: str, dims: dict[str, str]) -> xr.Dataset:
    ds = ds.rename({**dims, **{v: f"{prefix}_{v}" for v in ds.data_vars}})
    for name in ds.data_vars:
        ds[name].attrs.setdefault("source", prefix)
    return ds


@register("analysis", "spectra", "eigenvalues of recurrent weights and state Jacobians; activity covariance spectrum")
def spectra_analysis(
    model,
    *,
    steps: int = 2000,
    burn_in: int = 200,
    every: int | None = None,
    drive: float | None = None,
    task=None,
    n_boot: int = 200,
    block_size: int = 50,
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
      truncated power law $n^{-\alpha} e^{-n/n_c}$ (:func:`dynlab.analyses.spectra.covariance_spectrum`).
      Activity along a trajectory is autocorrelated, so the bootstrap resamples blocks of
      ``block_size`` consecutive steps (default 50), not single steps, which would give too
      narrow an interval.

    The trajectory runs under the same protocols as :func:`lyapunov_analysis`. Under autonomous
    dynamics most units settle to a fixed point, whose activity covariance is zero: use a task or
    a drive for a meaningful covariance spectrum (a warning says so).
    """
    from dynlab.analyses import spectra

    require_positive("steps", steps)
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
        raise ConfigError(f"burn_in must be a non-negative integer, got {burn_in!r}")
    every = max(1, steps // 20) if every is None else every
    require_positive("every", every)
    smap = state_map(model)
    k_in, _ = jax.random.split(jax.random.key(seed))
    xs, xi = protocol_inputs(model, burn_in + steps, drive=drive, task=task, key=k_in)
    states = run_in(smap, (xs, xi))
    h_start = smap.h0 if burn_in == 0 else states[burn_in - 1]
    inputs = (xs[burn_in:], xi[burn_in:])

    matrices = {f"layer{i}.{name}": w for i, c in enumerate(model.cells) for name, w in c.recurrent_matrices().items()}
    parts = []
    if matrices:
        parts.append(_prefixed(spectra.weight_eigenvalues(matrices), "weight", {"eigenvalue": "weight_eigenvalue"}))
    jac = spectra.jacobian_spectra(smap.step, h_start, inputs, every=every, x64=x64)
    parts.append(_prefixed(jac, "jacobian", {"eigenvalue": "jacobian_eigenvalue", "singular_value": "jacobian_singular_value"}))
    activity_idx = [i for i, label in enumerate(smap.labels) if label.endswith(".h")]
    activity = np.asarray(states[burn_in:][:, activity_idx])
    try:
        if activity.std(axis=0).max() <= 1e-6 * max(1.0, np.abs(activity).max()):
            raise ValueError("the activity is constant")
        cov = spectra.covariance_spectrum(
            activity, n_boot=n_boot, seed=seed, block_size=min(block_size, activity.shape[0] // 2)
        )
        parts.append(_prefixed(cov, "covariance", {}))
    except ValueError as e:
        warnings.warn(
            f"no activity covariance spectrum: {e} under this protocol (e.g. a fixed point); "
            "drive the model with a task or a drive",
            RuntimeWarning,
            stacklevel=2,
        )
    ds = xr.merge(parts, combine_attrs="drop")
    ds.attrs.update(
        analysis="spectra",
        protocol=protocol_name(drive, task),
        drive=float("nan") if drive is None else float(drive),
        steps=steps,
        burn_in=burn_in,
        every=every,
        seed=seed,
        state_dim=smap.dim,
        **{f"covariance_{k}": v for k, v in (parts[-1].attrs.items() if "covariance_alpha" in parts[-1] else [])
           if isinstance(v, (int, float, str))},
    )
    return ds
