r"""Lyapunov spectra over many runs, with intervals that say what they are over.

[`lyapunov_ensemble`][]: several initial conditions under one input sequence (their spread
measures multistability); [`lyapunov_replicates`][]: the measurement repeated over independent
realisations (inputs, noise seeds, stretches of an attractor), the mean with a Student-t interval
over them ([`dynlab.statistics.t_interval`][]), each run's batch-means standard error
([`within_run_errors`][]) and the spread over initial conditions under one input.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array, ArrayLike, Float, PyTree

from dynlab.analyses.lyapunov.core import (
    LyapunovResult, Method, StepFn, _qr_times, _run, _state_dim, lyapunov_core, num_steps,
)
from dynlab.analyses.lyapunov.burn_in import mser_cap, transient_blocks, truncate_running
from dynlab.analyses.lyapunov.resolution import RESOLUTION, clusters, widened
from dynlab.analyses.lyapunov.factorisations import Householder, QRMethod
from dynlab.analyses.lyapunov.reortho import _reortho_attrs, _resolve_reortho, blocking_error_bound
from dynlab.analyses.lyapunov.within_run import (
    ROUNDING_FACTOR, block_growth, boundary_error, rounding_se, time_average_se, within_run_errors,
)
from dynlab.analyses.lyapunov.spectrum import _EXPONENT_ATTRS, _RUNNING_ATTRS, _attrs, _exponent_coords, _qr_attrs
from dynlab.analyses.lyapunov.summaries import _derived_quantities, positive_sum_bounds
from dynlab.errors import ConfigError
from dynlab.statistics import t_interval


@eqx.filter_jit
def _ensemble_core(
    step: StepFn, h0s: PyTree, inputs: PyTree, *, q0: Array | None, **options: Any
) -> LyapunovResult:
    return jax.vmap(lambda h0: lyapunov_core(step, h0, inputs, q0=q0, **options))(h0s)


def lyapunov_ensemble(
    step: StepFn,
    h0s: PyTree,
    inputs: PyTree,
    k: int | None = None,
    *,
    tol: float = 1e-3,
    confidence: float = 0.95,
    burn_in: int = 0,
    reortho_every: int | Literal["auto"] = 1,
    method: Method = "auto",
    x64: bool = False,
    q0: Float[ArrayLike, "n k"] | None = None,
    key: Array | None = None,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
) -> xr.Dataset:
    r"""Lyapunov spectra from several initial conditions, with means and confidence intervals.

    `h0s` is a PyTree whose leaves carry a leading axis `ic` of initial conditions; the spectra
    are computed by one `jax.vmap` of [`lyapunov_core`][] over it (same `inputs`, same initial
    frame). The other arguments are as in [`lyapunov_spectrum`][], plus

    - `tol`: exponents with $|\lambda| < \texttt{tol}$ count as zero (see
      [`count_zero_exponents`][]);
    - `confidence`: level of the intervals (default 95%).

    **Returns:**

    An `xr.Dataset` with

    - `exponents` (`ic`, `exponent`), `running` (`ic`, `time`, `exponent`), `diverged` (`ic`);
    - `mean`, `ci_low`, `ci_high` (`exponent`): the mean over initial conditions and its
      Student-t interval $\bar\lambda \pm t_{(1+c)/2,\,n-1}\, s/\sqrt{n}$ ($s$ the sample
      standard deviation, $n$ the number of initial conditions used);
    - per initial condition (`ic`) and as their mean (`<name>_mean`): `largest`
      ([`largest_exponent`][]), `positive_sum` ([`sum_positive_exponents`][]),
      `ky_dimension` ([`kaplan_yorke_dimension`][]), `n_positive`
      ([`count_positive_exponents`][]) and `n_zero` ([`count_zero_exponents`][]);
    - the attrs of [`lyapunov_spectrum`][] plus `n_ic`, `n_diverged`, `tol`, `confidence`.

    Initial conditions whose trajectory diverged get NaN exponents, are left out of every
    mean and interval, and are reported by a `RuntimeWarning`.
    """
    leaves = jax.tree.leaves(h0s)
    if not leaves or any(np.ndim(leaf) == 0 for leaf in leaves):
        raise ConfigError(
            "h0s must be a PyTree of arrays with a leading axis of initial conditions."
        )
    n_ic = int(np.shape(leaves[0])[0])
    if any(int(np.shape(leaf)[0]) != n_ic for leaf in leaves):
        raise ConfigError("All leaves of h0s must share the leading initial-condition axis.")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1); got {confidence!r}.")
    n = _state_dim(h0s) // n_ic
    steps = num_steps(inputs)
    requested = reortho_every
    reortho_every, auto_info, renormalise, lu_every = _resolve_reortho(
        step, jax.tree.map(lambda a: a[0], h0s), inputs, q0, x64,
        reortho_every=reortho_every, k=k, burn_in=burn_in, method=method, key=key, lu_every=lu_every,
    )  # fmt: skip
    result = _run(
        _ensemble_core, step, h0s, inputs, q0, x64,
        k=k, burn_in=burn_in, reortho_every=reortho_every, renormalise=renormalise, method=method, key=key,
        qr=qr, lu_every=lu_every,
    )  # fmt: skip
    k = result.exponents.shape[1]
    diverged = np.asarray(result.diverged, bool)
    exponents = np.where(diverged[:, None], np.nan, result.exponents)
    if diverged.any():
        warnings.warn(
            f"Lyapunov ensemble: {diverged.sum()} of {n_ic} trajectories diverged; their "
            "exponents are NaN and they are left out of the means and intervals.",
            RuntimeWarning,
            stacklevel=2,
        )
    used = exponents[~diverged]
    # fewer than 2 surviving runs give NaN bounds (one run: its spectrum as the mean)
    ci = t_interval(used, population="initial conditions", level=confidence, allow_fewer=True)
    mean, ci_low, ci_high = ci.estimate, ci.low, ci.high

    derived = _derived_quantities(exponents, tol)
    data_vars: dict[str, Any] = {
        "exponents": (("ic", "exponent"), exponents, _EXPONENT_ATTRS),
        "running": (("ic", "time", "exponent"), result.running, _RUNNING_ATTRS),
        "diverged": ("ic", diverged, {"long_name": "trajectory diverged"}),
        "mean": ("exponent", mean, {**_EXPONENT_ATTRS, "long_name": "mean Lyapunov exponent"}),
        "ci_low": ("exponent", ci_low, {**_EXPONENT_ATTRS, "long_name": "CI lower bound"}),
        "ci_high": ("exponent", ci_high, {**_EXPONENT_ATTRS, "long_name": "CI upper bound"}),
    }
    for name, (values, long_name, units) in derived.items():
        attrs = {"long_name": long_name, "units": units}
        data_vars[name] = ("ic", values, attrs)
        valid = values[~diverged]
        mean_value = valid.mean() if valid.size else np.nan
        data_vars[f"{name}_mean"] = ((), mean_value, {**attrs, "long_name": f"mean {long_name}"})

    attrs = _attrs(
        k=k, n=n, steps=steps, burn_in=burn_in, reortho_every=reortho_every,
        method=method, x64=x64,
    )  # fmt: skip
    coords = _exponent_coords(k, _qr_times(steps - burn_in, reortho_every))
    coords["ic"] = ("ic", np.arange(n_ic), {"long_name": "initial condition"})
    return xr.Dataset(
        data_vars,
        coords=coords,
        attrs={
            **attrs,
            "n_ic": n_ic,
            "n_diverged": int(diverged.sum()),
            "tol": tol,
            "confidence": confidence,
            "ci_level": confidence,
            "ci_population": f"{n_ic} initial conditions under one input sequence",
            "ci_method": "Student t, ddof=1",
            "ci_note": "spread over initial conditions under the same inputs measures multistability, "
                       "not the variability of the exponents over input realisations (see lyapunov_replicates)",
            **_reortho_attrs(requested, reortho_every, blocking_error_bound(
                block_growth(result.running, _qr_times(steps - burn_in, reortho_every))[~diverged],
                reortho_every, x64, lu_every=lu_every, condition=np.asarray(result.condition)[~diverged]),
                auto_info, x64, renormalise, lu_every),
            **_qr_attrs(qr),
        },
    )


@eqx.filter_jit
def _replicates_core(
    step: StepFn, h0s: PyTree, inputs: PyTree, *, q0: Array | None, keys: Array, **options: Any
) -> LyapunovResult:
    def one_realisation(h0s_r, inputs_r, key_r, q0_r):
        return jax.vmap(lambda h0: lyapunov_core(step, h0, inputs_r, q0=q0_r, key=key_r, **options))(h0s_r)

    per_realisation = q0 is not None and q0.ndim == 3
    return jax.vmap(one_realisation, in_axes=(0, 0, 0, 0 if per_realisation else None))(h0s, inputs, keys, q0)


FLOAT32_FLOOR = float(np.log(100 * np.finfo(np.float32).eps))
r"""$\ln(100\,\varepsilon_{32}) \approx -11.3$: in float32 an exponent this far below $\lambda_1$ is at the
rounding floor (see `_warn_unresolved`)."""


def _warn_unresolved(exponents: np.ndarray, x64: bool) -> None:
    r"""Warn when float32 cannot resolve the smallest exponents.

    A QR step measures each direction's stretch $|R_{ii}|$ only to about $\varepsilon\,\|J\|$
    (Householder QR is backward stable), so an exponent with $\lambda_i - \lambda_1 <
    \ln(100\,\varepsilon)$ [`FLOAT32_FLOOR`][] is at float32's rounding floor, and saturated units
    make it worse: float32 $\tanh'(x) = 1 - \tanh^2 x$ loses its digits as $|x|$ grows and is exactly
    0 past $|x| \approx 9$ (then the exponent is $-\infty$). Measured on a random tanh network of 50
    units at gain 5: float32 gives $-15.0$ for the smallest exponent where float64 gives $-20.9$; at
    gain 3 and XLA's default optimisation, $-\infty$ against $-11.2$. The warning names the
    exponents and advises float64; float64's floor ($\approx -32$) is not checked."""
    if x64:
        return
    with np.errstate(invalid="ignore"):
        low = (exponents - exponents[..., :1] < FLOAT32_FLOOR) | np.isneginf(exponents)
    low = low.reshape(-1, exponents.shape[-1]).any(axis=0)
    if not low.any():
        return
    which = np.flatnonzero(low) + 1
    names = f"exponent {which[0]}" if which.size == 1 else f"exponents {which[0]}..{which[-1]}" \
        if which.size == which[-1] - which[0] + 1 else f"exponents {', '.join(map(str, which))}"
    infinite = " (some are -inf)" if np.isneginf(exponents).any() else ""
    warnings.warn(f"{names} lie more than {-FLOAT32_FLOOR:.1f} below lambda_1{infinite}, at float32's rounding "
                  "floor (saturated units: float32 tanh' is exactly 0 past |x| ~ 9), so they are not resolved; "
                  "rerun with --x64 (x64=True)", RuntimeWarning, stacklevel=3)


def _float64_runs(step, h0s, inputs, q0, keys, k: int, x64: bool, **options):
    r"""Each group's first run (realisation 0, initial condition 0) again in float64, in one vmapped call.

    Same inputs, start, initial frame (the float32 run's own draw) and QR times: where the
    trajectory contracts ($\lambda_1 < 0$, so that float32 and float64 follow one trajectory up to
    rounding) its difference from the float32 run is that run's rounding error, measured rather
    than guessed; the realisations of a fixed point share it (they sit on one float32 fixed
    point), so their spread does not show it. ``h0s``, ``inputs``, ``keys`` are lists over the
    groups; returns a ``LyapunovResult`` with a leading group axis (and realisation, ic axes of 1).
    """
    first = jax.tree.map(lambda *a: jnp.concatenate([x[:1, :1] for x in a]), *h0s)
    n = _state_dim(jax.tree.map(lambda a: a[0, 0], h0s[0]))
    if q0 is None:  # the float32 run's own frame (drawn as lyapunov_core draws it), not a float64 draw
        draw = lambda key: jax.vmap(lambda j: jax.random.normal(jax.random.fold_in(key, j), (n,), jnp.float32))(  # noqa: E731
            jnp.arange(k)).T
        frames = np.stack([np.asarray(draw(key[0])) for key in keys])
    else:
        frames = np.stack([np.asarray(q0[0] if np.ndim(q0) == 3 else q0)] * len(h0s))
    return _run(_replicates_core, step, first, jax.tree.map(lambda *a: jnp.concatenate([x[:1] for x in a]), *inputs),
                frames, True, keys=jnp.stack([key[0] for key in keys]), k=k, **options)


def lyapunov_replicates(
    step: StepFn,
    h0s: PyTree,
    inputs: PyTree,
    k: int | None = None,
    *,
    population: str = "input realisations",
    tol: float = 1e-3,
    confidence: float = 0.95,
    burn_in: int = 0,
    reortho_every: int | Literal["auto"] = 1,
    method: Method = "auto",
    x64: bool = False,
    q0: Float[ArrayLike, "n k"] | None = None,
    key: Array | None = None,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
    truncate: bool = False,
) -> xr.Dataset:
    r"""Lyapunov spectra repeated over independent realisations, with intervals that say so.

    A Lyapunov exponent measured on one run is a time average; repeating the whole measurement
    on independent realisations (another input sequence drawn from the task, another noise
    seed, another stretch of an autonomous attractor) is what tells how far it is from the
    exponent of the process. Realisation $r = 1..R$ has its own inputs and its own initial
    frame (drawn from `fold_in(key, r)` unless `q0` is given) and $I$ initial conditions:

    - `h0s`: PyTree with leaves `[R, I, ...]`, realisation $r$'s initial conditions;
    - `inputs`: PyTree with leaves `[R, T, ...]`, realisation $r$'s input sequence (repeat one
      sequence for an autonomous map or a constant drive, and make the realisations differ
      through `h0s`, e.g. states far apart along one trajectory);
    - `population`: what the realisations are, in words, for the attrs and labels.

    The other arguments are those of [`lyapunov_spectrum`][], except that `q0` may also be
    `[R, N, k]`, one initial frame per realisation. With $\lambda_{r,j}$ the spectrum of
    realisation $r$ from initial condition $j$ and $\bar\lambda_r$ its mean over the initial
    conditions:

    - `mean`, `ci_low`, `ci_high` (`exponent`): the mean of $\bar\lambda_r$ over realisations and
      its Student-t interval ([`dynlab.statistics.t_interval`][], $n - 1$ degrees of freedom) —
      the uncertainty of the exponent of the process —, its half-width never below
      $t_\nu$ times the larger of `within_run_se_of_mean` (the realisations' spread contains the
      time-averaging error, so a smaller sample spread is chance, frequent with 5 realisations)
      and `rounding_error` (runs that settle on one fixed point agree to the bit), with $\nu$ =
      attr `floor_dof` the batches that error was estimated from (a floor with the realisations'
      own 4 degrees of freedom covered 99.5-100% on chaotic maps); attrs `ci_level`,
      `ci_population`, `ci_method`, `ci_n` say so. Where the frame has not separated neighbours
      (its mean weight on the neighbour over the window at least 5%:
      [`RESOLUTION`][dynlab.analyses.lyapunov.resolution.RESOLUTION]), an exponent's upper bound
      is the highest of those above it in its cluster, and `cluster` (`exponent`) names each
      one's cluster ([`dynlab.analyses.lyapunov.resolution`][]). Fewer than 2 realisations is a
      ConfigError;
    - `rounding_error` (`exponent`): in float32, where every run contracts ($\lambda_1 < 0$),
      $|\lambda^{(32)} - \lambda^{(64)}|$ of the first run repeated in float64 (the error of a fixed
      point's exponents is the rounding of $h^*$ and $J(h^*)$, shared by all realisations: a
      constant $4\epsilon|\lambda|$ left the quick start's intervals covering 0.83), at least
      [`rounding_se`][]; otherwise [`rounding_se`][];
    - ``truncate=True``: the first blocks of the accumulated window are dropped by the MSER rule
      ([`dynlab.analyses.lyapunov.burn_in`][]); attrs `burn_in` (all steps not accumulated),
      `burn_in_fixed`, `burn_in_truncated`. Either way `transient_drift` = 1 says the rule
      truncated at its cap (half the window) for at least half of the exponents: the window
      may still hold a transient;
    - `within_run_se` (`realisation`, `ic`, `exponent`): each run's batch-means standard error
      from its local exponents ([`within_run_errors`][]), and `within_run_se_of_mean`
      (`exponent`): the standard error of the mean from the long-run variance of each
      realisation's local exponents averaged over its initial conditions (so that runs that
      decorrelate count as such), pooled over the realisations
      ([`time_average_se`][dynlab.analyses.lyapunov.within_run.time_average_se]: negative
      autocovariances count, so telescoping local exponents are not over-counted as batch means
      did): what the time averaging alone leaves in `mean`; `se_floor` (`exponent`): the floor the
      interval used, the largest of that, the $O(1/T)$ end term of telescoping local exponents
      ([`boundary_error`][dynlab.analyses.lyapunov.within_run.boundary_error], shared by
      realisations whose frames lock) and `rounding_error`. The across-realisation interval contains this
      error and, for a driven system, the input-to-input variability as well;
    - `ic_sd` (`realisation`, `exponent`) and `ic_sd_mean`: the sample standard deviation over
      initial conditions under one realisation's inputs. It measures *multistability* (runs from
      different states that do not converge to one trajectory), not the error of the exponent:
      a contracting system forgets its initial state, and then it is ~0 however uncertain the
      exponent is;
    - `exponents` (`realisation`, `ic`, `exponent`), `realisation_mean` (`realisation`,
      `exponent`), `running` (`realisation`, `ic`, `time`, `exponent`), `diverged`;
    - the summaries of [`lyapunov_ensemble`][] per run and as `<name>_mean` with `<name>_ci_low`,
      `<name>_ci_high` (same interval over realisations; the largest exponent's with the rounding
      floor, so that a fixed point's $\lambda_1$ does not get an interval of width 0);
    - attrs of [`lyapunov_spectrum`][] plus `n_realisations`, `n_ic`, `n_diverged`, `tol`,
      `confidence`, `within_run_batch` (QR blocks per batch), `population`.

    Diverged runs get NaN, are left out of every mean and interval, and are reported by a
    `RuntimeWarning`.
    """
    return replicate_groups(
        step, [h0s], [inputs], k, keys=[key], population=population, tol=tol, confidence=confidence, burn_in=burn_in,
        reortho_every=reortho_every, method=method, x64=x64, q0=q0, qr=qr, lu_every=lu_every, truncate=truncate,
    )[0]


def _check_group(h0s, inputs, q0, population: str, confidence: float) -> tuple[int, int, int, int]:
    """The shapes of one group's ``h0s`` and ``inputs``, checked: ``(R, I, N, T)``."""
    leaves = jax.tree.leaves(h0s)
    if not leaves or any(np.ndim(leaf) < 2 for leaf in leaves):
        raise ConfigError("h0s must be a PyTree of arrays with leading axes [realisation, initial condition].")
    n_real, n_ic = (int(d) for d in np.shape(leaves[0])[:2])
    if any(tuple(np.shape(leaf)[:2]) != (n_real, n_ic) for leaf in leaves):
        raise ConfigError("All leaves of h0s must share the leading axes [realisation, initial condition].")
    in_leaves = jax.tree.leaves(inputs)
    if not in_leaves or any(np.ndim(leaf) < 2 or np.shape(leaf)[0] != n_real for leaf in in_leaves):
        raise ConfigError(f"inputs must be a PyTree of arrays [realisation = {n_real}, T, ...].")
    if n_real < 2:
        raise ConfigError(f"an interval over {population} needs at least 2 of them; got {n_real}.")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1); got {confidence!r}.")
    n = _state_dim(h0s) // (n_real * n_ic)
    steps = num_steps(jax.tree.map(lambda a: a[0], inputs))
    if q0 is not None and np.ndim(q0) == 3 and np.shape(q0)[0] != n_real:
        raise ConfigError(f"q0 must be [N, k] or [realisation = {n_real}, N, k]; got shape {np.shape(q0)}.")
    return n_real, n_ic, n, steps


def replicate_groups(
    step: StepFn,
    h0s: list[PyTree],
    inputs: list[PyTree],
    k: int | None = None,
    *,
    keys: list[Array | None],
    population: str = "input realisations",
    tol: float = 1e-3,
    confidence: float = 0.95,
    burn_in: int = 0,
    reortho_every: int | Literal["auto"] = 1,
    method: Method = "auto",
    x64: bool = False,
    q0: Float[ArrayLike, "n k"] | None = None,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
    truncate: bool = False,
) -> list[xr.Dataset]:
    r"""Several independent [`lyapunov_replicates`][] measurements at once, one dataset per group.

    Group $g$ has its own ``h0s[g]`` (`[R, I, ...]`), ``inputs[g]`` (`[R, T, ...]`) and ``keys[g]``
    (its realisations' frames from `fold_in(keys[g], r)`); all groups share ``R``, ``I``, ``T``
    and the other arguments. Each group's re-orthonormalisation interval is chosen from its own
    pilot, the groups with one interval run in one vmapped call, and each group's dataset is
    built from its own runs alone: it is what [`lyapunov_replicates`][] returns for that group
    (which calls this with one group). Coverage measurements use it to run many measurements of
    the public path in one compiled call.
    """
    if not (len(h0s) == len(inputs) == len(keys)) or not h0s:
        raise ConfigError("h0s, inputs and keys must be lists of one entry per group (at least one)")
    shapes = [_check_group(h, u, q0, population, confidence) for h, u in zip(h0s, inputs)]
    if len(set(shapes)) > 1:
        raise ConfigError(f"all groups must have the same [realisation, ic, state, T] shapes; got {sorted(set(shapes))}")
    n_real, n_ic, n, steps = shapes[0]
    requested = reortho_every
    resolved = [_resolve_reortho(
        step, jax.tree.map(lambda a: a[0, 0], h), jax.tree.map(lambda a: a[0], u),
        None if q0 is None else (q0[0] if np.ndim(q0) == 3 else q0), x64,
        reortho_every=reortho_every, k=k, burn_in=burn_in, method=method, key=key, lu_every=lu_every,
    ) for h, u, key in zip(h0s, inputs, keys)]  # fmt: skip
    real_keys = [jax.vmap(lambda r, b=(jax.random.key(0) if key is None else key): jax.random.fold_in(b, r))(
        jnp.arange(n_real)) for key in keys]
    q0_all = None if q0 is None or np.ndim(q0) == 2 else np.asarray(q0)
    out: list[xr.Dataset | None] = [None] * len(h0s)
    for setting in dict.fromkeys((r.every, r.renormalise, r.lu_every) for r in resolved):
        members = [g for g, r in enumerate(resolved) if (r.every, r.renormalise, r.lu_every) == setting]
        every, renormalise, lu = setting
        stack = lambda trees: jax.tree.map(lambda *a: jnp.concatenate(a), *trees)  # noqa: E731
        result = _run(
            _replicates_core, step, stack([h0s[g] for g in members]), stack([inputs[g] for g in members]),
            q0 if q0_all is None else np.concatenate([q0_all] * len(members)), x64,
            k=k, burn_in=burn_in, reortho_every=every, renormalise=renormalise, method=method,
            keys=jnp.concatenate([real_keys[g] for g in members]), qr=qr, lu_every=lu,
        )  # fmt: skip
        parts = [jax.tree.map(lambda a: a[j * n_real:(j + 1) * n_real], result) for j in range(len(members))]
        k_run = result.exponents.shape[-1]
        # float32 groups whose runs all contract: their first run again in float64, all in one call
        contracting = [j for j, part in enumerate(parts) if not x64 and np.all(
            np.asarray(part.diverged) | (np.asarray(part.exponents)[..., 0] < 0))]
        reference = {}
        if contracting:
            ref = _float64_runs(step, [h0s[members[j]] for j in contracting], [inputs[members[j]] for j in contracting],
                                q0, [real_keys[members[j]] for j in contracting], k_run, x64,
                                burn_in=burn_in, reortho_every=every, renormalise=renormalise, method=method, qr=qr,
                                lu_every=lu)  # fmt: skip
            reference = {j: jax.tree.map(lambda a, i=i: a[i : i + 1], ref) for i, j in enumerate(contracting)}
        for j, g in enumerate(members):
            out[g] = _replicates_dataset(
                parts[j], reference.get(j), k=k, n=n, n_real=n_real, n_ic=n_ic, steps=steps,
                burn_in=burn_in, reortho_every=every, renormalise=renormalise, lu_every=lu,
                auto_info=resolved[g].info, requested=requested, method=method, x64=x64, qr=qr,
                population=population, tol=tol, confidence=confidence, truncate=truncate,
            )  # fmt: skip
    return out


def _replicates_dataset(result, reference, *, k, n, n_real, n_ic, steps, burn_in, reortho_every,
                        renormalise, lu_every, auto_info, requested, method, x64, qr, population, tol, confidence,
                        truncate) -> xr.Dataset:
    """One group's dataset from its runs ([`replicate_groups`][]) and, where it contracts in float32, its
    first run in float64 (``reference``, `_float64_runs`; else None)."""
    k = result.exponents.shape[-1]
    diverged = np.asarray(result.diverged, bool)
    exponents = np.where(diverged[..., None], np.nan, np.asarray(result.exponents, float))
    if diverged.any():
        warnings.warn(
            f"Lyapunov replicates: {diverged.sum()} of {diverged.size} runs diverged; their exponents "
            "are NaN and they are left out of the means and intervals.",
            RuntimeWarning,
            stacklevel=2,
        )
    _warn_unresolved(exponents, x64)
    times = _qr_times(steps - burn_in, reortho_every)
    drop_each = transient_blocks(result.running, times, ~diverged)
    cap = mser_cap(times)
    drifting = bool(cap > 0 and np.mean(drop_each >= cap) >= 0.5)
    drop = int(drop_each.max()) if truncate else 0
    running, kept_times = truncate_running(result.running, times, drop)
    if drop:
        exponents = np.where(diverged[..., None], np.nan, running[..., -1, :])
    dropped_steps = int(times[drop - 1]) if drop else 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN by design
        per_real = np.nanmean(exponents, axis=1)  # [R, k]
        ic_sd = np.nanstd(exponents, axis=1, ddof=1) if n_ic > 1 else np.full((n_real, k), np.nan)
        se, batch = within_run_errors(running, kept_times, ~diverged)
        # a realisation's value is the mean over its runs: its error from the runs' mean local exponents
        real_running = np.nanmean(np.where(diverged[..., None, None], np.nan, running), axis=1)[:, None]
        real_valid = ~diverged.all(axis=1)
        se_of_mean, window = time_average_se(real_running, kept_times, real_valid[:, None], pool=True)
        se_of_mean = se_of_mean.reshape(-1)
        # the O(1/T) end terms of telescoping local exponents, shared by realisations whose frames lock
        boundary = np.nanmean(boundary_error(real_running, kept_times, real_valid[:, None])[:, 0], axis=0)
        rounding = rounding_se(np.nanmean(per_real, axis=0), x64)
        measured = None
        if reference is not None:
            ref_running, _ = truncate_running(reference.running, times, drop)
            ref = np.where(np.asarray(reference.diverged)[..., None], np.nan, ref_running[..., -1, :])[0, 0]
            measured = np.abs(exponents[0, 0] - ref)
            rounding = np.fmax(rounding, measured)
        floor = np.fmax(np.fmax(se_of_mean, boundary), rounding)
        n_blocks = int(np.sum(np.diff(np.concatenate([[0], kept_times])) == kept_times[0]))
        floor_dof = max(1, int(real_valid.sum()) * max(1, n_blocks // (2 * window + 1) - 1))
        ci = t_interval(per_real, population=population, level=confidence, se_floor=floor, floor_dof=floor_dof)
        groups = clusters(ci.estimate, burn_in + dropped_steps, steps - burn_in - dropped_steps)
        ci = widened(ci, groups)
        ic_sd_mean = np.nanmean(ic_sd, axis=0)
    ci_attrs = ci.attrs()
    interval = f"{ci.label}"
    data_vars: dict[str, Any] = {
        "exponents": (("realisation", "ic", "exponent"), exponents, _EXPONENT_ATTRS),
        "running": (("realisation", "ic", "time", "exponent"), result.running, _RUNNING_ATTRS),
        "diverged": (("realisation", "ic"), diverged, {"long_name": "trajectory diverged"}),
        "realisation_mean": (("realisation", "exponent"), per_real,
                             {**_EXPONENT_ATTRS, "long_name": "mean over initial conditions, per realisation"}),
        "mean": ("exponent", ci.estimate, {**_EXPONENT_ATTRS, "long_name": f"mean Lyapunov exponent over {population}"}),
        "ci_low": ("exponent", ci.low, {**_EXPONENT_ATTRS, "long_name": f"lower bound, {interval}", **ci_attrs}),
        "ci_high": ("exponent", ci.high, {**_EXPONENT_ATTRS, "long_name": f"upper bound, {interval}", **ci_attrs}),
        "within_run_se": (("realisation", "ic", "exponent"), se, {
            **_EXPONENT_ATTRS, "long_name": "standard error of one run's time average (batch means of local exponents)"}),
        "within_run_se_of_mean": ("exponent", se_of_mean, {
            **_EXPONENT_ATTRS, "long_name": "standard error that time averaging alone leaves in the mean "
                                            "(windowed autocovariances of each realisation's mean local exponents, pooled)"}),
        "ic_sd": (("realisation", "exponent"), ic_sd, {
            **_EXPONENT_ATTRS, "long_name": "sd over initial conditions under one input realisation "
                                            "(multistability; not an error bar)"}),
        "ic_sd_mean": ("exponent", ic_sd_mean, {
            **_EXPONENT_ATTRS, "long_name": "mean over realisations of the sd over initial conditions (multistability)"}),
        "se_floor": ("exponent", floor, {
            **_EXPONENT_ATTRS, "long_name": "the interval's SE floor: the largest of within_run_se_of_mean, the end "
                                            "term of telescoping local exponents and rounding_error"}),
        "cluster": ("exponent", groups, {
            "long_name": "first exponent of the run of neighbours the frame has not separated (mean weight on the "
                         f"neighbour over the window >= {100 * np.exp(-RESOLUTION):.0f}%); a member's upper bound "
                         "is the highest of those above it in its cluster"}),
        "rounding_error": ("exponent", rounding, {
            **_EXPONENT_ATTRS, "long_name": "rounding error of the exponents (float32: measured against a float64 "
                                            "run where the trajectory contracts), a floor of the interval's SE"}),
    }
    for name, (values, long_name, units) in _derived_quantities(exponents, tol).items():
        attrs = {"long_name": long_name, "units": units}
        values = np.where(diverged, np.nan, values.astype(float))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            per_run = np.nanmean(values, axis=1)
            summary = t_interval(per_run, population=population, level=confidence)
        estimate, low, high, label = summary.estimate, summary.low, summary.high, summary.label
        if name == "largest":  # lambda_1 itself: exponent 1's mean and interval (one quantity, one interval)
            estimate, low, high, label = ci.estimate[0], ci.low[0], ci.high[0], f"exponent 1's {ci.label}"
        elif name == "positive_sum":
            estimate, low, high, label = positive_sum_bounds(ci)
        data_vars[name] = (("realisation", "ic"), values, attrs)
        data_vars[f"{name}_mean"] = ((), estimate, {**attrs, "long_name": f"mean {long_name} over {population}"})
        data_vars[f"{name}_ci_low"] = ((), low, {**attrs, "long_name": f"{long_name}: lower bound, {label}"})
        data_vars[f"{name}_ci_high"] = ((), high, {**attrs, "long_name": f"{long_name}: upper bound, {label}"})

    attrs = _attrs(
        k=k, n=n, steps=steps, burn_in=burn_in, reortho_every=reortho_every,
        method=method, x64=x64,
    )  # fmt: skip
    coords = _exponent_coords(k, times)
    coords["ic"] = ("ic", np.arange(n_ic), {"long_name": "initial condition (under one input realisation)"})
    coords["realisation"] = ("realisation", np.arange(n_real), {"long_name": f"independent realisation ({population})"})
    bound = blocking_error_bound(block_growth(result.running, times)[~diverged], reortho_every, x64,
                                 lu_every=lu_every, condition=np.asarray(result.condition)[~diverged])
    return xr.Dataset(
        data_vars,
        coords=coords,
        attrs={
            **attrs,
            "n_realisations": n_real,
            "n_ic": n_ic,
            "n_diverged": int(diverged.sum()),
            "tol": tol,
            "confidence": confidence,
            "population": population,
            **ci_attrs,
            "ci_label": interval,
            "within_run_method": "batch means of per-QR-block local exponents, Student t",
            "within_run_batch": int(batch),
            "steps": int(steps - burn_in - dropped_steps),
            "steps_total": int(steps),
            "burn_in": int(burn_in + dropped_steps),
            "burn_in_fixed": int(burn_in),
            "burn_in_truncated": int(dropped_steps),
            "burn_in_rule": ("fixed burn-in, then MSER-5 truncation of the window (White 1997) by "
                             f"{dropped_steps} steps" if truncate else "fixed burn-in (MSER-5 checks it: transient_drift)"),
            "transient_drift": int(drifting),
            "transient_drift_exponents": int(np.sum(drop_each >= cap)) if cap else 0,
            "floor_dof": int(floor_dof),
            "rounding_floor": ("measured: |float32 - float64| of the first run, at least "
                               f"{ROUNDING_FACTOR:g} eps max(1, |lambda|)" if measured is not None
                               else f"{ROUNDING_FACTOR:g} eps max(1, |lambda|)"),
            "ic_spread": "ic_sd: sd over initial conditions under one input realisation (multistability)",
            **_reortho_attrs(requested, reortho_every, bound, auto_info, x64, renormalise, lu_every),
            **_qr_attrs(qr),
        },
    )

