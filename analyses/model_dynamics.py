r"""Dynamical analyses of dynlab models: Lyapunov spectra under the three input protocols.

These glue a model's state map (:mod:`dynlab.analyses.state_map`) to the numerical cores
(:mod:`dynlab.analyses.lyapunov`), choose initial conditions, and label the result with what
was analysed (model config, protocol, checkpoint, seed).
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np

import jax
import jax.numpy as jnp
import xarray as xr

from dynlab.analyses import lyapunov as lyap
from dynlab.analyses.state_map import initial_conditions, protocol_inputs, run_in, state_map
from dynlab.errors import ConfigError, require_positive
from dynlab import figures
from dynlab.registry import register


def protocol_name(drive: float | None, task) -> str:
    if task is not None:
        return f"task {type(task).__name__}" + ("" if drive is None else f" + drive {drive:g}")
    return "autonomous (zero input)" if drive is None else f"constant drive xi={drive:g}"


@register(
    "analysis",
    "lyapunov",
    "Lyapunov spectrum (QR method), CIs over independent input realisations",
    figure=figures.lyapunov_spectrum,
)
def lyapunov_analysis(
    model,
    *,
    k: int = 16,
    steps: int = 2000,
    burn_in: int = 500,
    drive: float | None = None,
    task=None,
    realisations: int = 5,
    ics: int = 2,
    ic_kind: str = "visited",
    ic_scale: float = 1.0,
    reortho_every: int | Literal["auto"] = "auto",
    seed: int = 0,
    x64: bool = False,
    tol: float = 1e-3,
    confidence: float = 0.95,
) -> xr.Dataset:
    r"""The $k$ largest Lyapunov exponents of a model's full state map, repeated over independent realisations.

    The map is $h_{t+1} = F(h_t, x_t, \xi_t)$ on every layer's whole state (for ARUs: the
    activities and the controllers), driven by the protocol's inputs: autonomous (default, the
    ARU paper's App. D.4 setting), a constant ``drive`` $\xi$ on every neuron, or ``task``
    inputs.

    **What is replicated.** The whole measurement is repeated ``realisations`` times
    (:func:`dynlab.analyses.lyapunov.lyapunov_replicates`), each with its own initial frame:

    * under a ``task``, realisation $r$ runs on its own input sequence, consecutive test
      samples of the task drawn from ``fold_in(key, r)`` — *input realisations*;
    * autonomous or under a constant drive the input is the same for all, so realisation $r$
      starts where one trajectory from the model's initial state is after $r \cdot$ ``steps``
      steps: the realisations measure disjoint stretches of one trajectory, ``steps`` apart,
      i.e. points on the attractor it settles to (for a chaotic attractor, stretches many
      correlation times apart are nearly independent). A trajectory that has settled to a fixed
      point gives realisations that agree to rounding, and the interval is then honestly about
      as wide as the rounding: the exponents of a fixed point are known that well.

    Within realisation $r$, ``ics`` initial conditions are states visited in the second half of
    a run-in of ``steps`` steps from the realisation's start under its inputs
    (``ic_kind="visited"``), or Gaussian perturbations of the start (``"random"``, std
    ``ic_scale``). Each is followed for ``steps`` steps, the first ``burn_in`` not accumulated.

    **What is reported** (see ``lyapunov_replicates``): ``mean``, ``ci_low``, ``ci_high`` —
    the mean over realisations and its Student-t ``confidence`` interval (attrs ``ci_level``,
    ``ci_population``, ``ci_method``); ``within_run_se`` / ``within_run_se_of_mean`` — the
    batch-means standard error of the time averages; ``ic_sd`` / ``ic_sd_mean`` — the spread
    over initial conditions under one input, which measures multistability, not the error;
    summaries (largest exponent, sum of positive exponents, Kaplan–Yorke dimension, counts)
    with their own intervals. ``reortho_every="auto"`` (default) re-orthonormalises as rarely as
    the spread $\lambda_1 - \lambda_k$ measured over the burn-in allows, and records the bound on
    the error that adds in ``reortho_error_bound``. Attrs also hold ``protocol``, ``drive``,
    ``ic_kind``, ``seed``, ``realisation_kind``.
    """
    check_lyapunov(model, k=k, steps=steps, burn_in=burn_in, ics=ics, realisations=realisations,
                   reortho_every=reortho_every, confidence=confidence)
    smap = state_map(model)
    key = jax.random.key(seed)
    k_in, k_ic, k_frame = jax.random.split(key, 3)
    if task is not None:
        inputs = [protocol_inputs(model, steps, drive=drive, task=task, key=jax.random.fold_in(k_in, r))
                  for r in range(realisations)]
        stacked = jax.tree.map(lambda *a: jnp.stack(a), *inputs)
        starts = jnp.broadcast_to(smap.h0, (realisations, smap.dim))
        visited = jax.vmap(lambda u: run_in(smap, u))(stacked) if ic_kind == "visited" else None  # [R, T, N]
        population, kind = "input realisations", "independent task input sequences, one per realisation"
    else:
        one = protocol_inputs(model, steps, drive=drive)
        stacked = jax.tree.map(lambda a: jnp.broadcast_to(a, (realisations, *a.shape)), one)
        # one trajectory, cut into consecutive stretches of `steps` steps: stretch r starts where r-1 ends
        trajectory = run_in(smap, protocol_inputs(model, realisations * steps, drive=drive))
        starts = jnp.concatenate([smap.h0[None], trajectory[steps - 1 : -1 : steps]])
        visited = trajectory.reshape(realisations, steps, smap.dim)
        population = "trajectory stretches"
        kind = f"stretches of one trajectory from the model's initial state, {steps} steps apart (points on the attractor)"
    h0s = jnp.stack([
        initial_conditions(smap, ics, jax.random.fold_in(k_ic, r), kind=ic_kind, scale=ic_scale, h0=starts[r],
                           visited=None if visited is None else visited[r])
        for r in range(realisations)
    ])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = lyap.lyapunov_replicates(
            smap.step, h0s, stacked, k, population=population, burn_in=burn_in, reortho_every=reortho_every,
            x64=x64, key=k_frame, tol=tol, confidence=confidence,
        )
    for w in caught:  # re-issue from here so the user sees where it came from
        warnings.warn(str(w.message), w.category, stacklevel=2)
    ds.attrs.update(
        protocol=protocol_name(drive, task),
        drive=float("nan") if drive is None else float(drive),
        ic_kind=ic_kind,
        seed=seed,
        state_dim=smap.dim,
        realisation_kind=kind,
    )
    return ds


def check_lyapunov(model, *, k: int, steps: int, burn_in: int, ics: int, realisations: int = 5,
                   reortho_every: int | str = "auto", confidence: float = 0.95, **_) -> None:
    """The options of :func:`lyapunov_analysis` that ``model`` can take (``k`` <= its state dimension).

    Enforces, in one place: lyapunov's options are valid for the model. Called by the analysis
    itself and, as ``lyapunov_analysis.check``, by scenario validation for every cell's model
    before any cell runs (:func:`dynlab.scenarios.spec.check_cells`; the model may be abstract).
    """
    require_positive("steps", steps)
    require_positive("ics", ics)
    require_positive("k", k)
    require_positive("realisations", realisations)
    if realisations < 2:
        raise ConfigError(f"realisations must be at least 2 for an interval over independent realisations, got {realisations}")
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")
    if reortho_every == "auto":
        if burn_in < lyap.AUTO_MIN_BURN_IN:
            raise ConfigError(f"reortho_every='auto' measures the spread of the exponents over the burn-in, which "
                              f"needs burn_in >= {lyap.AUTO_MIN_BURN_IN}; got {burn_in} (or give an integer reortho_every)")
    elif isinstance(reortho_every, bool) or not isinstance(reortho_every, int) or reortho_every < 1:
        raise ConfigError(f"reortho_every must be an integer >= 1 or 'auto', got {reortho_every!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence!r}")
    dim = state_map(model).dim
    if k > dim:
        raise ConfigError(f"k = {k} exceeds the state dimension N = {dim} of this model; use 1 <= k <= {dim}")


lyapunov_analysis.check = check_lyapunov


def _prefixed(ds: xr.Dataset, prefix: str, dims: dict[str, str]) -> xr.Dataset:
    ds = ds.rename({**dims, **{v: f"{prefix}_{v}" for v in ds.data_vars}})
    for name in ds.data_vars:
        ds[name].attrs.setdefault("source", prefix)
    return ds


@register(
    "analysis",
    "spectra",
    "eigenvalues of recurrent weights and state Jacobians; activity covariance spectrum",
    figure=figures.spectra,
)
def spectra_analysis(
    model,
    *,
    steps: int = 2000,
    burn_in: int = 200,
    every: int | None = None,
    drive: float | None = None,
    task=None,
    n_boot: int = 200,
    block_size: int | Literal["auto"] = "auto",
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
      consecutive steps, not single steps, which would give too narrow an interval:
      ``block_size="auto"`` (default) takes $\lceil 10\hat\tau\rceil$ steps from the
      autocorrelation of the leading principal components; the interval is the basic
      (bias-correcting) bootstrap interval over this one recording, and the fit range is capped
      where eigenvalue bias would dominate (see ``covariance_spectrum``).

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
            activity, n_boot=n_boot, seed=seed,
            block_size=block_size if block_size == "auto" else min(block_size, activity.shape[0] // 2)
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
