r"""The static $\gamma$ network of an ARU-family layer, with its activation parameters frozen, and the
largest Lyapunov exponent of such maps; shared by the ARU analyses of this package.

$$ F_{n,s}(h;\, \xi) = \gamma(W_{hh} h + b_h + \xi;\; n, s), \qquad
   D_h F = \operatorname{diag}\!\big(\gamma'(W_{hh} h + b_h + \xi;\, n, s)\big)\, W_{hh}. $$

[`recurrent_layer`][] / [`aru_layer`][] take layer 0 of a model of the ARU family,
[`frozen_gamma_cell`][] and [`GammaMap`][] freeze its $(n, s)$, [`frozen_lambda1`][] computes
$\lambda_1$ of many frozen maps in one vmapped QR run ([`dynlab.analyses.lyapunov.lyapunov_core`][])
and [`escape_rate`][] measures the runs that escape to infinity. [`number_grid`][] checks the
lists of numbers these analyses take.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from dynlab.analyses.lyapunov.core import lyapunov_core
from dynlab.analyses.lyapunov.within_run import rounding_se, se_of_realisation_mean, within_run_errors
from dynlab.config import number_list
from dynlab.errors import ConfigError, require_positive
from dynlab.statistics import t_interval
from dynlab.units.aru import ARUCell, RNNCell, RNNGammaCell

ARU_FAMILY = (RNNCell, RNNGammaCell, ARUCell)

PAPER_N = (1.0, *(1.25 * k for k in range(1, 17)))
"""The paper's gain grid (§5.3): $\\{1\\} \\cup \\{1.25k : 1 \\le k \\le 16\\}$."""
PAPER_S = (0.0, 0.25, 0.5, 0.75, 1.0)
"""The paper's saturation grid (§5.3)."""


# ---------------------------------------------------------------------------------------------
# The static gamma network of a layer


def recurrent_layer(model) -> RNNCell | RNNGammaCell | ARUCell:
    """Layer 0 of a one-layer model of the ARU family (the cells with ``w_hh``, ``w_xh``, ``b_h``)."""
    cells = getattr(model, "cells", None)
    if cells is None or len(cells) != 1:
        raise ConfigError("this analysis takes a one-layer sequence model (model.layers = 1)")
    cell = cells[0]
    if not isinstance(cell, ARU_FAMILY):
        raise ConfigError(
            f"this analysis needs a unit of the ARU family (rnn, rnn-gamma, aru), got {type(cell).__name__}"
        )
    return cell


def aru_layer(model) -> ARUCell:
    """Layer 0 of a one-layer ARU model (the controller analyses need the controller)."""
    cell = recurrent_layer(model)
    if not isinstance(cell, ARUCell):
        raise ConfigError(f"this analysis needs an ARU model (--model aru), got {type(cell).__name__}")
    return cell


def frozen_gamma_cell(
    cell: RNNCell | RNNGammaCell | ARUCell, n: Array | float = 5.0, s: Array | float = 0.0
) -> RNNGammaCell:
    r"""An RNN+$\gamma$ (static, heterogeneous) cell with ``cell``'s $W_{hh}, W_{xh}, b_h$ and the given
    $(n, s)$ (numbers, broadcast to every neuron, or per-neuron vectors)."""
    template = RNNGammaCell(cell.input_size, hidden=cell.hidden, isolated=cell.isolated, key=jax.random.key(0))
    n = jnp.broadcast_to(jnp.asarray(n, cell.w_hh.dtype), (cell.hidden,))
    s = jnp.broadcast_to(jnp.asarray(s, cell.w_hh.dtype), (cell.hidden,))
    return eqx.tree_at(lambda c: (c.w_hh, c.w_xh, c.b_h, c.n, c.s), template, (cell.w_hh, cell.w_xh, cell.b_h, n, s))


class GammaMap(eqx.Module):
    r"""$h \mapsto \gamma(W_{hh} h + b_h + \xi;\, n, s)$: the cell at zero input, the drive $\xi$ as the map's input."""

    cell: RNNGammaCell

    def __call__(self, h: Array, xi: Array) -> Array:
        return self.cell(h, jnp.zeros(self.cell.input_size, h.dtype), drive=xi)[0]

    def with_params(self, n: Array, s: Array) -> GammaMap:
        return eqx.tree_at(lambda m: (m.cell.n, m.cell.s), self, (n, s))


@contextlib.contextmanager
def numerics(x64: bool):
    """float64 enabled if asked (or enabled already, as for a model loaded under x64), full-precision
    matmuls; yields the working dtype."""
    x64 = x64 or jax.config.jax_enable_x64
    with jax.enable_x64(True) if x64 else contextlib.nullcontext(), jax.default_matmul_precision("highest"):
        yield jnp.float64 if x64 else jnp.float32


def cast_floats(tree, dtype):
    """The inexact arrays of ``tree`` (e.g. a [`GammaMap`][]'s weights) cast to ``dtype``."""
    return jax.tree.map(lambda a: jnp.asarray(a, dtype) if eqx.is_inexact_array(a) else a, tree)


def number_grid(name: str, values: Sequence[float]) -> np.ndarray:
    """``values`` as a 1-D float array ([`dynlab.config.number_list`][]: non-empty, finite numbers)."""
    return np.asarray(number_list(name, values), float)


def check_realisations(realisations: int) -> None:
    require_positive("realisations", realisations)
    if realisations < 2:
        raise ConfigError(f"realisations must be at least 2 for an interval over independent realisations, got {realisations}")


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence!r}")


def check_steps(steps: int, burn_in: int) -> None:
    require_positive("steps", steps)
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")


# ---------------------------------------------------------------------------------------------
# Largest Lyapunov exponent of frozen-parameter networks


@eqx.filter_jit
def frozen_lambda1(
    fmap: GammaMap, n: Array, s: Array, xi: Array, h0s: Array, *, steps: int, burn_in: int, key: Array
) -> tuple[Array, Array]:
    r"""$\lambda_1$ of $F_{n_p, s_p}(\cdot;\, \xi_p)$ from every initial condition, for many parameter sets at once.

    ``n, s`` are ``[P, N]`` (one frozen parameter set per row), ``xi`` is ``[P]`` (each map's constant
    drive) and ``h0s`` ``[P, I, N]``. One vmap of [`dynlab.analyses.lyapunov.lyapunov_core`][]
    ($k = 1$, ``steps`` steps of which ``burn_in`` are not accumulated, the initial frame drawn from
    ``key``: one key for all rows, or ``[P]`` keys, one per row) over $P \times I$ runs. Returns
    ``(lambda1 [P, I], running [P, I, steps - burn_in], diverged [P, I])``, ``running`` the running
    estimate after each accumulated step (for [`within_run_errors`][dynlab.analyses.lyapunov.within_run_errors]).
    """

    def one(n_p, s_p, xi_p, h0s_p, key_p):
        step = fmap.with_params(n_p, s_p)
        inputs = jnp.full((steps,), xi_p)
        result = jax.vmap(lambda h0: lyapunov_core(step, h0, inputs, 1, burn_in=burn_in, key=key_p))(h0s_p)
        return result.exponents[:, 0], result.running[..., 0], result.diverged

    return jax.vmap(one, in_axes=(0, 0, 0, 0, 0 if key.ndim else None))(n, s, xi, h0s, key)


@eqx.filter_jit
def _log_norms(fmap: GammaMap, n: Array, s: Array, xi: Array, h0s: Array, *, steps: int) -> Array:
    r"""$\ln\lVert h_t\rVert$, ``[P, I, steps]``, along the runs of [`frozen_lambda1`][] (no tangents)."""

    def one(n_p, s_p, xi_p, h0s_p):
        step = fmap.with_params(n_p, s_p)

        def run(h0):
            def body(h, _):
                h = step(h, xi_p)
                return h, jnp.log(jnp.linalg.norm(h))

            return jax.lax.scan(body, h0, None, length=steps)[1]

        return jax.vmap(run)(h0s_p)

    return jax.vmap(one)(n, s, xi, h0s)


def escape_rate(log_norms: np.ndarray) -> np.ndarray:
    r"""Growth rate per step of $\ln\lVert h_t\rVert$ over the second half of the finite part of each run.

    A run that overflows escapes to infinity. $\gamma$ is asymptotically linear for large
    arguments ($\gamma(a) \to (1 - s)\,a + s$ as $na \to +\infty$, $\to 0$ as $na \to -\infty$), so far
    out the map is positively homogeneous, $F(h) \approx D_hF(h)\, h$: the state is itself a tangent
    vector and its growth rate is the trajectory's $\lambda_1 > 0$, which the QR run could not report
    before the overflow. NaN where fewer than 4 steps are finite.
    """
    finite = np.isfinite(log_norms)
    last = finite.shape[-1] - 1 - np.argmax(finite[..., ::-1], axis=-1)  # last finite step
    last = np.where(finite.any(-1), last, 0)
    mid = last // 2
    take = lambda i: np.take_along_axis(log_norms, i[..., None], -1)[..., 0]  # noqa: E731
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(last >= 3, (take(last) - take(mid)) / (last - mid), np.nan)


class Lambda1Runs(NamedTuple):
    """What [`lambda1_runs`][] returns, every field ``[..., I]`` (rows, initial conditions)."""

    lambda1: np.ndarray
    """lambda_1 of each run, NaN where it diverged."""
    diverged: np.ndarray
    escape: np.ndarray
    """[`escape_rate`][] of diverged runs, NaN elsewhere."""
    se: np.ndarray
    """each run's batch-means standard error ([`within_run_errors`][dynlab.analyses.lyapunov.within_run_errors])."""
    x64: bool

    def take(self, index) -> Lambda1Runs:
        """The runs at ``index`` of every field."""
        return Lambda1Runs(*(a[index] for a in self[:4]), self.x64)

    def reshape(self, *shape) -> Lambda1Runs:
        return Lambda1Runs(*(a.reshape(*shape) for a in self[:4]), self.x64)

    def moveaxis(self, source, destination) -> Lambda1Runs:
        return Lambda1Runs(*(np.moveaxis(a, source, destination) for a in self[:4]), self.x64)


def lambda1_runs(cell, n, s, xi, h0s, *, steps, burn_in, seed, x64, realisation=None) -> Lambda1Runs:
    """[`frozen_lambda1`][] in the chosen precision, numpy out (a [`Lambda1Runs`][]): lambda1 NaN
    for diverged runs and, for those only, their [`escape_rate`][] (float64); each run's
    within-run standard error from its local exponents.

    ``realisation`` (``[P]`` ints): row ``p``'s initial frame is drawn from
    ``fold_in(fold_in(key(seed), 1), realisation[p])``, so independent realisations have independent
    frames; without it every row shares ``fold_in(key(seed), 1)``."""
    frame_key = jax.random.fold_in(jax.random.key(seed), 1)
    if realisation is not None:
        frame_key = jax.vmap(lambda r: jax.random.fold_in(frame_key, r))(jnp.asarray(realisation))
    with numerics(x64) as dtype:
        fmap = cast_floats(GammaMap(frozen_gamma_cell(cell)), dtype)
        lam, running, diverged = frozen_lambda1(
            fmap, *(jnp.asarray(a, dtype) for a in (n, s, xi, h0s)), steps=steps, burn_in=burn_in, key=frame_key,
        )
        lam, diverged = np.asarray(lam, float), np.asarray(diverged, bool)
        se, _ = within_run_errors(np.asarray(running)[..., None], np.arange(1, steps - burn_in + 1), ~diverged)
    escape = np.full(lam.shape, np.nan)
    rows = np.flatnonzero(diverged.any(-1))
    if rows.size:
        warnings.warn(f"{int(diverged.sum())} of {diverged.size} Lyapunov runs diverged (the state escaped to "
                      "infinity); their lambda_1 is NaN, left out of the means, and their escape rate is reported",
                      RuntimeWarning, stacklevel=3)
        with numerics(True) as dtype:
            fmap = cast_floats(GammaMap(frozen_gamma_cell(cell)), dtype)
            logs = _log_norms(fmap, *(jnp.asarray(np.asarray(a)[rows], dtype) for a in (n, s, xi, h0s)), steps=steps)
        escape[rows] = np.where(diverged[rows], escape_rate(np.asarray(logs)), np.nan)
    return Lambda1Runs(np.where(diverged, np.nan, lam), diverged, escape, se[..., 0], x64)


def lambda_vars(name: str, result: Lambda1Runs, dims: tuple[str, ...], confidence: float, long_name: str,
                 population: str) -> dict:
    """From the runs over ``dims + ("realisation", "ic")``: ``name``, ``<name>_diverged``,
    ``<name>_escape``, ``<name>_within_run_se``; over ``dims`` the ``_mean`` and its Student-t interval
    ``_ci_low``, ``_ci_high`` over the realisations (each realisation's mean over its finite runs; attrs
    name the population and level; the standard error never below the time-averaging error of the mean,
    [`se_of_realisation_mean`][dynlab.analyses.lyapunov.se_of_realisation_mean], nor the rounding floor
    [`rounding_se`][dynlab.analyses.lyapunov.rounding_se], as in
    [`lyapunov_replicates`][dynlab.analyses.lyapunov.lyapunov_replicates]), ``<name>_ic_sd`` (the sd over initial
    conditions within a realisation, averaged over realisations: multistability, not an error bar)
    and ``<name>_escape_mean``. The mean and its interval are **conditional on not escaping**: they
    are over the finite runs only, whose number is ``<name>_bounded`` (over ``dims``), so they
    describe the runs that stayed bounded, not all runs; report the count beside them."""
    lam, diverged, escape = result.lambda1, result.diverged, result.escape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices (every run escaped) give NaN
        per_realisation = np.nanmean(lam, axis=-1)
        ic_sd = np.nanmean(np.nanstd(lam, axis=-1, ddof=1), axis=-1) if lam.shape[-1] > 1 else \
            np.full(lam.shape[:-2], np.nan)
        escape_mean = np.nanmean(escape, axis=(-2, -1))
        se = np.moveaxis(result.se, (-2, -1), (0, 1))  # [R, I, *dims]
        se_of_mean = se_of_realisation_mean(se.reshape(*se.shape[:2], -1)).reshape(lam.shape[:-2])
        floor = np.fmax(se_of_mean, rounding_se(np.nanmean(per_realisation, axis=-1), result.x64))
    ci = t_interval(per_realisation, population=population, level=confidence, axis=-1, se_floor=floor)
    attrs = {"units": "per step", "long_name": long_name}
    ci_attrs = {**attrs, **ci.attrs()}
    run_dims = (*dims, "realisation", "ic")
    return {
        name: (run_dims, lam, attrs),
        f"{name}_mean": (dims, ci.estimate, {**attrs, "long_name": f"mean {long_name} over {ci.population}, "
                                                                  "conditional on not escaping (finite runs only; "
                                                                  f"{name}_bounded counts them)"}),
        f"{name}_bounded": (dims, np.sum(~np.asarray(diverged, bool), axis=(-2, -1)),
                            {"long_name": f"{long_name}: runs that did not escape (the mean is over these)"}),
        f"{name}_ci_low": (dims, ci.low, {**ci_attrs, "long_name": f"{long_name}: lower bound, {ci.label}"}),
        f"{name}_ci_high": (dims, ci.high, {**ci_attrs, "long_name": f"{long_name}: upper bound, {ci.label}"}),
        f"{name}_ic_sd": (dims, ic_sd, {**attrs, "long_name": f"{long_name}: sd over initial conditions within a "
                                                              "realisation (multistability, not an error bar)"}),
        f"{name}_within_run_se": (run_dims, result.se, {**attrs, "long_name": f"{long_name}: batch-means standard "
                                                                           "error of each run"}),
        f"{name}_diverged": (run_dims, diverged, {"long_name": f"{long_name}: state escaped to infinity"}),
        f"{name}_escape": (run_dims, escape, {**attrs, "long_name": f"{long_name}: escape rate of diverged runs"}),
        f"{name}_escape_mean": (dims, escape_mean, {**attrs, "long_name": f"{long_name}: mean escape rate"}),
    }
