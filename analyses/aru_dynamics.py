r"""Dynamics of networks of Adaptive Recurrent Units (Geadah et al. §2.4, §5.4, App. A, C.5, D).

The paper's stability analyses all look at the *static* $\gamma$ network of a layer,

$$ F_{n,s}(h;\, \xi) = \gamma(W_{hh} h + b_h + \xi;\; n, s), \qquad
   D_h F = \operatorname{diag}\!\big(\gamma'(W_{hh} h + b_h + \xi;\, n, s)\big)\, W_{hh}, $$

with zero input ($x_t = 0$, App. D.4) and the activation parameters $(n, s)$ held constant —
either a homogeneous pair from a grid, or the per-neuron values an ARU's controllers set. The
weights $W_{hh}, b_h$ come from layer 0 of any model of the ARU family (``rnn``, ``rnn-gamma``,
``aru``; the isolated, diagonal variant included); $\xi$ is the constant drive.

Registered analyses (``dynlab analyze NAME``):

* ``jacobian-grid`` — mean Jacobian norm over the $(n, s)$ grid, $h \sim U(-5, 5)^N$ (App. Fig. 6A);
* ``lyapunov-grid`` — $\lambda_1$ over the $(n, s)$ grid, one vmapped QR run (App. Fig. 6B);
* ``adaptation`` — the Fig. 5c/d protocol: $\lambda_1$ with $(n, s)$ frozen at the values the ARU
  sets $\hat t$ steps after the onset of a drive $\xi$, at steady state ("adapted") or without
  drive ("fixed"), from initial conditions on the driven stationary distribution;
* ``controller`` — controller states under constant drives in their first principal components
  with their limit points, and the $(n_t, s_t)$ paths over the $\gamma' = 1 - \epsilon$ level
  curves (Fig. 5a/b);
* ``gradient-by-position`` — gradient norms by input position (App. C.5, Fig. 18);
* ``weight-eigs`` — eigenvalues of $W_{hh}$ against the unit circle (Fig. 5e).

Confidence intervals are Student-t intervals of the mean over initial conditions,
$\bar\lambda \pm t_{(1+c)/2,\,m-1}\, s/\sqrt{m}$, with diverged runs left out.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array

import dynlab
from dynlab.analyses.lyapunov import lyapunov_core
from dynlab.analyses.spectra import weight_eigenvalues
from dynlab.analyses.state_map import protocol_inputs
from dynlab.errors import ConfigError, require_positive
from dynlab.losses import get_loss
from dynlab.statistics import t_interval
from dynlab import figures_aru
from dynlab.registry import register
from dynlab.units.aru import ARUCell, RNNCell, RNNGammaCell, gamma

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
def _numerics(x64: bool):
    """float64 enabled if asked, full-precision matmuls; yields the working dtype."""
    with jax.enable_x64(True) if x64 else contextlib.nullcontext(), jax.default_matmul_precision("highest"):
        yield jnp.float64 if x64 else jnp.float32


def _cast(tree, dtype):
    return jax.tree.map(lambda a: jnp.asarray(a, dtype) if eqx.is_inexact_array(a) else a, tree)


def number_grid(name: str, values: Sequence[float]) -> np.ndarray:
    """``values`` as a 1-D float array; anything else (empty, nested, non-numeric, non-finite) is a ConfigError."""
    try:
        arr = np.asarray(values, float)
    except (TypeError, ValueError):
        arr = np.empty(0)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ConfigError(f"{name} must be a non-empty list of finite numbers, got {values!r}")
    return arr


def _check_realisations(realisations: int) -> None:
    require_positive("realisations", realisations)
    if realisations < 2:
        raise ConfigError(f"realisations must be at least 2 for an interval over independent realisations, got {realisations}")


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence!r}")


def analysis_attrs(name: str, **options) -> dict:
    """A dataset's attrs: ``analysis``, ``dynlab_version`` and the options (booleans as 0/1 for netCDF)."""
    return {"analysis": name, "dynlab_version": dynlab.__version__,
            **{k: (int(v) if isinstance(v, bool) else v) for k, v in options.items()}}


# ---------------------------------------------------------------------------------------------
# Jacobian norm


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


@register(
    "analysis",
    "jacobian-grid",
    "ARU App. Fig. 6A: mean Jacobian norm of the static gamma net over (n, s)",
    figure=figures_aru.jacobian_grid,
)
def jacobian_grid_analysis(
    model,
    *,
    n_values: Sequence[float] = PAPER_N,
    s_values: Sequence[float] = PAPER_S,
    samples: int = 100,
    h_range: float = 5.0,
    norm: str = "spectral",
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
    """
    require_positive("samples", samples)
    require_positive("h_range", h_range, integer=False)
    if norm not in ("spectral", "rms"):
        raise ConfigError(f"norm must be 'spectral' or 'rms', got {norm!r}")
    n_grid, s_grid = number_grid("n_values", n_values), number_grid("s_values", s_values)
    cell = recurrent_layer(model)
    hs = jax.random.uniform(jax.random.key(seed), (samples, cell.hidden), minval=-h_range, maxval=h_range)
    nn, ss = np.meshgrid(n_grid, s_grid, indexing="ij")
    with _numerics(False) as dtype:
        fmap = _cast(GammaMap(frozen_gamma_cell(cell)), dtype)
        norms = np.asarray(_jacobian_norms(fmap, jnp.asarray(nn.ravel(), dtype), jnp.asarray(ss.ravel(), dtype),
                                           hs.astype(dtype), jnp.asarray(drive, dtype), norm))
    norms = norms.reshape(n_grid.size, s_grid.size, samples)
    long = f"{norm} norm of the state Jacobian"
    return xr.Dataset(
        {
            "jacobian_norm": (("n", "s"), norms.mean(-1), {"long_name": f"mean {long}"}),
            "jacobian_norm_std": (("n", "s"), norms.std(-1), {"long_name": f"std of the {long} over states"}),
            "jacobian_norm_samples": (("n", "s", "sample"), norms, {"long_name": long}),
        },
        coords={"n": ("n", n_grid, {"long_name": "gain n"}), "s": ("s", s_grid, {"long_name": "saturation s"})},
        attrs=analysis_attrs("jacobian-grid", samples=samples, h_range=h_range, norm=norm, drive=drive, seed=seed,
                     hidden=cell.hidden),
    )


# ---------------------------------------------------------------------------------------------
# Largest Lyapunov exponent of frozen-parameter networks


@eqx.filter_jit
def frozen_lambda1(
    fmap: GammaMap, n: Array, s: Array, xi: Array, h0s: Array, *, steps: int, burn_in: int, key: Array
) -> tuple[Array, Array]:
    r"""$\lambda_1$ of $F_{n_p, s_p}(\cdot;\, \xi_p)$ from every initial condition, for many parameter sets at once.

    ``n, s`` are ``[P, N]`` (one frozen parameter set per row), ``xi`` is ``[P]`` (each map's constant
    drive) and ``h0s`` ``[P, I, N]``. One vmap of :func:`dynlab.analyses.lyapunov.lyapunov_core`
    ($k = 1$, ``steps`` steps of which ``burn_in`` are not accumulated, the initial frame drawn from
    ``key``: one key for all rows, or ``[P]`` keys, one per row) over $P \times I$ runs. Returns
    ``(lambda1 [P, I], diverged [P, I])``.
    """

    def one(n_p, s_p, xi_p, h0s_p, key_p):
        step = fmap.with_params(n_p, s_p)
        inputs = jnp.full((steps,), xi_p)
        result = jax.vmap(lambda h0: lyapunov_core(step, h0, inputs, 1, burn_in=burn_in, key=key_p))(h0s_p)
        return result.exponents[:, 0], result.diverged

    return jax.vmap(one, in_axes=(0, 0, 0, 0, 0 if key.ndim else None))(n, s, xi, h0s, key)


@eqx.filter_jit
def _log_norms(fmap: GammaMap, n: Array, s: Array, xi: Array, h0s: Array, *, steps: int) -> Array:
    r"""$\ln\lVert h_t\rVert$, ``[P, I, steps]``, along the runs of :func:`frozen_lambda1` (no tangents)."""

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


def _lambda1(cell, n, s, xi, h0s, *, steps, burn_in, seed, x64, realisation=None):
    """:func:`frozen_lambda1` in the chosen precision, numpy out: ``(lambda1, diverged, escape)`` with
    lambda1 NaN for diverged runs and, for those only, their :func:`escape_rate` (float64).

    ``realisation`` (``[P]`` ints): row ``p``'s initial frame is drawn from
    ``fold_in(fold_in(key(seed), 1), realisation[p])``, so independent realisations have independent
    frames; without it every row shares ``fold_in(key(seed), 1)``."""
    frame_key = jax.random.fold_in(jax.random.key(seed), 1)
    if realisation is not None:
        frame_key = jax.vmap(lambda r: jax.random.fold_in(frame_key, r))(jnp.asarray(realisation))
    with _numerics(x64) as dtype:
        fmap = _cast(GammaMap(frozen_gamma_cell(cell)), dtype)
        lam, diverged = frozen_lambda1(
            fmap, *(jnp.asarray(a, dtype) for a in (n, s, xi, h0s)), steps=steps, burn_in=burn_in, key=frame_key,
        )
        lam, diverged = np.asarray(lam, float), np.asarray(diverged, bool)
    escape = np.full(lam.shape, np.nan)
    rows = np.flatnonzero(diverged.any(-1))
    if rows.size:
        warnings.warn(f"{int(diverged.sum())} of {diverged.size} Lyapunov runs diverged (the state escaped to "
                      "infinity); their lambda_1 is NaN, left out of the means, and their escape rate is reported",
                      RuntimeWarning, stacklevel=3)
        with _numerics(True) as dtype:
            fmap = _cast(GammaMap(frozen_gamma_cell(cell)), dtype)
            logs = _log_norms(fmap, *(jnp.asarray(np.asarray(a)[rows], dtype) for a in (n, s, xi, h0s)), steps=steps)
        escape[rows] = np.where(diverged[rows], escape_rate(np.asarray(logs)), np.nan)
    return np.where(diverged, np.nan, lam), diverged, escape


def _check_steps(steps: int, burn_in: int) -> None:
    require_positive("steps", steps)
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")


def _lambda_vars(name: str, result: tuple, dims: tuple[str, ...], confidence: float, long_name: str,
                 population: str) -> dict:
    """From ``(lambda1, diverged, escape)`` over ``dims + ("realisation", "ic")``: ``name``, ``<name>_diverged``,
    ``<name>_escape``; over ``dims`` the ``_mean`` and its Student-t interval ``_ci_low``, ``_ci_high``
    over the realisations (each realisation's mean over its finite runs; attrs name the population and
    level), ``<name>_ic_sd`` (the sd over initial conditions within a realisation, averaged over
    realisations: multistability, not an error bar) and ``<name>_escape_mean``."""
    lam, diverged, escape = result
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices (every run escaped) give NaN
        per_realisation = np.nanmean(lam, axis=-1)
        ic_sd = np.nanmean(np.nanstd(lam, axis=-1, ddof=1), axis=-1) if lam.shape[-1] > 1 else \
            np.full(lam.shape[:-2], np.nan)
        escape_mean = np.nanmean(escape, axis=(-2, -1))
    ci = t_interval(per_realisation, population=population, level=confidence, axis=-1)
    attrs = {"units": "per step", "long_name": long_name}
    ci_attrs = {**attrs, **ci.attrs()}
    run_dims = (*dims, "realisation", "ic")
    return {
        name: (run_dims, lam, attrs),
        f"{name}_mean": (dims, ci.estimate, {**attrs, "long_name": f"mean {long_name} over {ci.population}"}),
        f"{name}_ci_low": (dims, ci.low, {**ci_attrs, "long_name": f"{long_name}: lower bound, {ci.label}"}),
        f"{name}_ci_high": (dims, ci.high, {**ci_attrs, "long_name": f"{long_name}: upper bound, {ci.label}"}),
        f"{name}_ic_sd": (dims, ic_sd, {**attrs, "long_name": f"{long_name}: sd over initial conditions within a "
                                                              "realisation (multistability, not an error bar)"}),
        f"{name}_diverged": (run_dims, diverged, {"long_name": f"{long_name}: state escaped to infinity"}),
        f"{name}_escape": (run_dims, escape, {**attrs, "long_name": f"{long_name}: escape rate of diverged runs"}),
        f"{name}_escape_mean": (dims, escape_mean, {**attrs, "long_name": f"{long_name}: mean escape rate"}),
    }


@register(
    "analysis",
    "lyapunov-grid",
    "ARU App. Fig. 6B: lambda_1 of the static gamma net over (n, s)",
    figure=figures_aru.lyapunov_grid,
)
def lyapunov_grid_analysis(
    model,
    *,
    n_values: Sequence[float] = PAPER_N,
    s_values: Sequence[float] = PAPER_S,
    realisations: int = 5,
    ics: int = 2,
    steps: int = 1000,
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
    (:func:`frozen_lambda1`). Where every run falls to one fixed point $h^*$, the exponent is
    $\ln\rho(J(h^*))$ and the runs differ only by the finite-time error of the frame (largest when the
    leading eigenvalues are a complex pair, whose frame never settles); the interval over
    independent frames is what measures that error.

    **Returns:** ``lambda1`` (``n``, ``s``, ``realisation``, ``ic``); ``lambda1_mean`` and its Student-t
    interval ``lambda1_ci_low``, ``lambda1_ci_high`` (``n``, ``s``) over the realisations' means (attrs
    ``ci_population``, ``ci_level``); ``lambda1_ic_sd``, the sd over initial conditions within a
    realisation (multistability: runs from different states that settle differently). Runs whose state
    escapes to infinity (possible for trained weights) are flagged in ``lambda1_diverged``, left out of
    the means, and measured by their :func:`escape_rate` (``lambda1_escape``, ``lambda1_escape_mean``).
    Fewer than 2 realisations is a ConfigError.
    """
    _check_steps(steps, burn_in)
    require_positive("ics", ics)
    _check_realisations(realisations)
    require_positive("h_range", h_range, integer=False)
    _check_confidence(confidence)
    n_grid, s_grid = number_grid("n_values", n_values), number_grid("s_values", s_values)
    cell = recurrent_layer(model)
    H, G, R = cell.hidden, n_grid.size * s_grid.size, realisations
    key = jax.random.key(seed)
    h0 = np.stack([np.asarray(jax.random.uniform(jax.random.fold_in(key, r), (ics, H), minval=-h_range,
                                                 maxval=h_range)) for r in range(R)])  # [R, I, H]
    nn, ss = np.meshgrid(n_grid, s_grid, indexing="ij")
    rows = lambda a: np.tile(a.reshape(G, 1), (R, H))  # noqa: E731  [R * G, H], realisation-major
    result = _lambda1(
        cell, rows(nn), rows(ss), np.full(R * G, drive), np.repeat(h0, G, axis=0), steps=steps, burn_in=burn_in,
        seed=seed, x64=x64, realisation=np.repeat(np.arange(R), G),
    )
    shaped = tuple(np.moveaxis(a.reshape(R, n_grid.size, s_grid.size, ics), 0, 2) for a in result)
    return xr.Dataset(
        _lambda_vars("lambda1", shaped, ("n", "s"), confidence, "largest Lyapunov exponent",
                     "independent runs (initial states and frames)"),
        coords={"n": ("n", n_grid, {"long_name": "gain n"}), "s": ("s", s_grid, {"long_name": "saturation s"}),
                "realisation": ("realisation", np.arange(R), {"long_name": "independent run (initial states, frame)"}),
                "ic": ("ic", np.arange(ics), {"long_name": "initial condition within a realisation"})},
        attrs=analysis_attrs("lyapunov-grid", realisations=R, ics=ics, steps=steps, burn_in=burn_in, h_range=h_range,
                             drive=drive, confidence=confidence, seed=seed, x64=x64, hidden=H,
                             ci_population=f"{R} independent runs (initial states and frames)",
                             ci_level=confidence, ci_method="Student t, ddof=1"),
    )


# ---------------------------------------------------------------------------------------------
# ARU traces under a drive


@eqx.filter_jit
def aru_traces(model, xs: Array, drives: Array) -> dict[str, Array]:
    r"""Run a one-layer ARU model on each input ``xs [B, T, D]`` under its drive ``drives [B, T]`` or ``[B, T, H]``.

    Returns the states after every step: ``h [B, T, H]`` (activities), ``g [B, T, H, n_g]``
    (controller states) and the activation parameters ``n, s [B, T, H]`` they set (Eq. 5).
    """
    cell = model.cells[0]

    def run(x, drive):
        _, (state,) = model.trajectory(x, drive)
        n, s = cell.activation_params(state.g)
        return {"h": state.h, "g": state.g, "n": n, "s": s}

    return jax.vmap(run)(xs, drives)


def _with_zero(drives: Sequence[float]) -> np.ndarray:
    drives = number_grid("drives", drives)
    return np.unique(np.append(drives, 0.0))


def _step_drive_traces(model, drives: np.ndarray, onset: int, duration: int, task, seed: int,
                       key: Array | None = None) -> dict[str, np.ndarray]:
    """:func:`aru_traces` under step drives switched on at ``onset`` for ``duration`` steps, on the
    protocol's inputs (zero, or ``task``'s stream drawn from ``key``, default ``key(seed)``, the same
    for every drive)."""
    require_positive("duration", duration)
    if isinstance(onset, bool) or not isinstance(onset, int) or onset < 0:
        raise ConfigError(f"onset must be a non-negative integer, got {onset!r}")
    T = onset + duration
    xs = protocol_inputs(model, T, task=task, key=jax.random.key(seed) if key is None else key)[0]
    on = (np.arange(T) >= onset).astype(float)
    traces = aru_traces(model, jnp.broadcast_to(xs, (drives.size, *xs.shape)), jnp.asarray(drives[:, None] * on))
    return {k: np.asarray(v, float) for k, v in traces.items()}


@register(
    "analysis",
    "adaptation",
    "ARU Fig. 5c/d: lambda_1 with (n, s) frozen where the ARU sets them under a drive",
    figure=figures_aru.adaptation,
)
def adaptation_analysis(
    model,
    *,
    drives: Sequence[float] = (1.0, 2.0, 5.0, 10.0, 20.0),
    t_hats: Sequence[int] = (0, 1, 2, 5, 10, 20, 50, 100),
    onset: int = 100,
    duration: int = 400,
    window: int = 50,
    realisations: int = 5,
    ics: int = 4,
    steps: int = 1000,
    burn_in: int = 200,
    task=None,
    drive_in_map: bool = True,
    confidence: float = 0.95,
    seed: int = 0,
    x64: bool = False,
) -> xr.Dataset:
    r"""The Fig. 5c/d protocol (paper §5.4): how the ARU's choice of $(n, s)$ under a drive changes $\lambda_1$.

    1. The ARU model runs ``onset`` steps without drive, then ``duration`` steps under the step
       drive $\xi$ (every neuron, controller included), on zero input or, with ``task``, on the
       task's input stream. $\xi = 0$ is always included.
    2. Its activation parameters are read at $\hat t$ steps after onset,
       $(n_{\hat t}(\xi), s_{\hat t}(\xi))$ ($\hat t = 0$: the first driven step, the onset value),
       and at steady state, $(n_\infty(\xi), s_\infty(\xi))$ = the mean over the last ``window``
       driven steps.
    3. Each set is frozen into the static network $F_{n,s}$ (equivalent to RNN+$\gamma$ static)
       whose $\lambda_1$ is computed under the drive $\xi$ (``drive_in_map=True``, default; the paper
       leaves this open; ``False`` drops $\xi$ from the map) at zero input (App. D.4):
       *adapted* = $(n_\infty(\xi), s_\infty(\xi))$, *fixed* = $(n_\infty(0), s_\infty(0))$, the
       parameters the network holds without drive, and one value per $\hat t$ (Fig. 5c).
    4. Initial conditions are ``ics`` activity vectors $h$ drawn (without replacement) from the
       driven run's second half, i.e. from its stationary distribution $\pi(\xi)$.

    **Replication.** Steps 1–4 are repeated for ``realisations`` independent input streams (the
    task's stream drawn from ``fold_in(key(seed), r)``), so that $(n_\infty, s_\infty)$, the frozen
    maps, the initial conditions and the tangent frames are all re-drawn: ``_mean`` is the mean over
    realisations of each realisation's mean over its initial conditions, and ``_ci_low``,
    ``_ci_high`` its Student-t ``confidence`` interval over the realisations (attrs name the
    population). That interval includes the error of $(n_\infty, s_\infty)$ from one
    ``window``-step average. ``_ic_sd`` is the spread over initial conditions within one
    realisation, which measures multistability, not the error. On zero input every realisation
    sees the same (zero) input and differs only in its initial conditions and frame; a run that
    settles to a fixed point then gives an interval about as wide as the rounding.

    **Returns** (dims ``drive``, ``t_hat``, ``realisation``, ``ic``, ``time`` = steps since onset,
    ``neuron``): ``n_t``, ``s_t`` (the traces of realisation 0), ``n_hat``, ``s_hat``, ``n_inf``,
    ``s_inf`` (per realisation); ``lambda1_adapted``, ``lambda1_fixed`` (``drive``, ``realisation``,
    ``ic``) and ``lambda1_t_hat`` (``drive``, ``t_hat``, ``realisation``, ``ic``), each with ``_mean``,
    ``_ci_low``, ``_ci_high``, ``_ic_sd``, and ``_diverged``, ``_escape``, ``_escape_mean`` for runs
    whose state escaped to infinity (their :func:`escape_rate`, a positive $\lambda_1$); ``n_drift``
    (``realisation``, ``drive``): the largest change of $n$ over the last ``window`` steps, a check
    that the steady state was reached. Fewer than 2 realisations is a ConfigError.
    """
    _check_steps(steps, burn_in)
    require_positive("ics", ics)
    require_positive("window", window)
    _check_realisations(realisations)
    _check_confidence(confidence)
    drives = _with_zero(drives)
    t_hats = np.asarray(t_hats)
    if t_hats.ndim != 1 or t_hats.size == 0 or t_hats.dtype.kind not in "iu" or t_hats.min() < 0 \
            or t_hats.max() >= duration:
        raise ConfigError(f"t_hats must be a list of integers in [0, duration = {duration}), got {list(t_hats)!r}")
    cell = aru_layer(model)
    if window > duration // 2:
        raise ConfigError(f"window must be at most duration / 2 = {duration // 2}, got {window}")
    if 2 * ics > duration:
        raise ConfigError(f"ics = {ics} initial conditions need duration >= {2 * ics} driven steps")
    T, H, D, R = onset + duration, cell.hidden, drives.size, realisations
    zero = int(np.flatnonzero(drives == 0)[0])
    second_half = np.arange(onset + duration - duration // 2, T)
    per = {k: [] for k in ("n_hat", "s_hat", "n_inf", "s_inf", "n_drift", "sets_n", "sets_s", "h0s")}
    for r in range(R):
        key_r = jax.random.fold_in(jax.random.key(seed), r)
        tr = _step_drive_traces(model, drives, onset, duration, task, seed, key=key_r)
        if r == 0:
            traces = {"n": tr["n"], "s": tr["s"]}
        n_hat, s_hat = tr["n"][:, onset + t_hats], tr["s"][:, onset + t_hats]  # [D, K, H]
        n_inf, s_inf = tr["n"][:, -window:].mean(1), tr["s"][:, -window:].mean(1)  # [D, H]
        keys = jax.random.split(jax.random.fold_in(key_r, 2), D)
        picks = np.stack([np.asarray(jax.random.choice(k, second_half, (ics,), replace=False)) for k in keys])
        per["h0s"].append(np.take_along_axis(tr["h"], picks[:, :, None], axis=1))  # [D, I, H]
        per["sets_n"].append(np.concatenate([n_inf[:, None], np.broadcast_to(n_inf[zero], (D, 1, H)), n_hat], axis=1))
        per["sets_s"].append(np.concatenate([s_inf[:, None], np.broadcast_to(s_inf[zero], (D, 1, H)), s_hat], axis=1))
        per["n_drift"].append(np.abs(tr["n"][:, -1] - tr["n"][:, -window]).max(-1))
        for name, value in (("n_hat", n_hat), ("s_hat", s_hat), ("n_inf", n_inf), ("s_inf", s_inf)):
            per[name].append(value)
        del tr
    stacked = {k: np.stack(v) for k, v in per.items()}  # leading realisation axis
    K = stacked["sets_n"].shape[2]
    xi_map = np.tile(np.repeat(drives if drive_in_map else np.zeros(D), K), R)
    result = _lambda1(cell, stacked["sets_n"].reshape(R * D * K, H), stacked["sets_s"].reshape(R * D * K, H), xi_map,
                      np.repeat(stacked["h0s"].reshape(R * D, ics, H), K, axis=0), steps=steps, burn_in=burn_in,
                      seed=seed, x64=x64, realisation=np.repeat(np.arange(R), D * K))
    lam, diverged, escape = (np.moveaxis(a.reshape(R, D, K, ics), 0, 2) for a in result)  # [D, K, R, I]
    population = "independent input streams" if task is not None else "realisations (zero input: initial states, frames)"

    def vars_(name, sel, dims, long_name):
        return _lambda_vars(name, (lam[sel], diverged[sel], escape[sel]), dims, confidence, long_name, population)

    time = np.arange(T) - onset
    trace = {"units": "1"}
    data = {
        "n_t": (("drive", "time", "neuron"), traces["n"], {**trace, "long_name": "gain n_t (realisation 0)"}),
        "s_t": (("drive", "time", "neuron"), traces["s"], {**trace, "long_name": "saturation s_t (realisation 0)"}),
        "n_hat": (("realisation", "drive", "t_hat", "neuron"), stacked["n_hat"], {"long_name": "gain at t_hat after onset"}),
        "s_hat": (("realisation", "drive", "t_hat", "neuron"), stacked["s_hat"],
                  {"long_name": "saturation at t_hat after onset"}),
        "n_inf": (("realisation", "drive", "neuron"), stacked["n_inf"], {"long_name": "steady-state gain n_inf"}),
        "s_inf": (("realisation", "drive", "neuron"), stacked["s_inf"], {"long_name": "steady-state saturation s_inf"}),
        "n_drift": (("realisation", "drive"), stacked["n_drift"], {"long_name": "max |n_T - n_(T-window)| over neurons"}),
        **vars_("lambda1_adapted", np.s_[:, 0], ("drive",), "lambda_1 with steady-state (n, s) under the drive (adapted)"),
        **vars_("lambda1_fixed", np.s_[:, 1], ("drive",), "lambda_1 with the undriven steady-state (n, s) (fixed)"),
        **vars_("lambda1_t_hat", np.s_[:, 2:], ("drive", "t_hat"), "lambda_1 with (n, s) frozen at t_hat after onset"),
    }
    return xr.Dataset(
        data,
        coords={
            "drive": ("drive", drives, {"long_name": "step drive xi"}),
            "t_hat": ("t_hat", t_hats, {"long_name": "steps after onset", "units": "steps"}),
            "time": ("time", time, {"long_name": "steps since onset", "units": "steps"}),
            "neuron": ("neuron", np.arange(H)),
            "realisation": ("realisation", np.arange(R), {"long_name": f"independent realisation ({population})"}),
            "ic": ("ic", np.arange(ics), {"long_name": "initial condition within a realisation"}),
        },
        attrs=analysis_attrs("adaptation", onset=onset, duration=duration, window=window, realisations=R, ics=ics,
                             steps=steps, burn_in=burn_in, drive_in_map=drive_in_map, confidence=confidence, seed=seed,
                             x64=x64, inputs="zero input" if task is None else f"task {type(task).__name__}", hidden=H,
                             ci_population=f"{R} {population}", ci_level=confidence, ci_method="Student t, ddof=1"),
    )


# ---------------------------------------------------------------------------------------------
# Controller states: principal components, limit points, (n, s) paths


@register(
    "analysis",
    "controller",
    "ARU Fig. 5a/b: controller-state PCA with limit points; (n, s) paths",
    figure=figures_aru.controller,
)
def controller_analysis(
    model,
    *,
    drives: Sequence[float] = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0),
    onset: int = 50,
    duration: int = 300,
    n_pc: int = 2,
    eps: float = 0.01,
    mesh: int = 61,
    task=None,
    seed: int = 0,
) -> xr.Dataset:
    r"""The controllers of an ARU layer under constant drives (Fig. 5a/b).

    The model runs ``onset`` steps without drive, then ``duration`` steps under each constant drive
    $\xi$ ($\xi = 0$ included), on zero input (or ``task``'s inputs). Every neuron's controller
    state $g^i_t \in \mathbb{R}^{n_g}$, over all neurons, steps and drives, enters one PCA (centred,
    eigenvectors of the $n_g \times n_g$ covariance); ``pc`` holds the trajectories in the first
    ``n_pc`` components and ``limit_pc`` the states after the last step, the limit points of
    Fig. 5a (``limit_residual`` = $\max_i \lVert g^i_T - g^i_{T-1}\rVert$ says whether they are
    reached). ``n_onset``/``s_onset`` (the first driven step) and ``n_inf``/``s_inf`` (the last step)
    are Fig. 5b's triangles and squares; ``gamma_prime`` (``drive``, ``n_mesh``, ``s_mesh``) is
    $\gamma'(\xi; n, s)$ on a mesh spanning the paths, whose level set $1 - \epsilon$ (``eps``) the
    paper overlays.
    """
    require_positive("n_pc", n_pc)
    require_positive("mesh", mesh)
    require_positive("eps", eps, integer=False)
    drives = _with_zero(drives)
    cell = aru_layer(model)
    if n_pc > cell.n_g:
        raise ConfigError(f"n_pc must be at most n_g = {cell.n_g}, got {n_pc}")
    T, H = onset + duration, cell.hidden
    tr = _step_drive_traces(model, drives, onset, duration, task, seed)
    g = tr["g"].reshape(-1, cell.n_g)
    centre = g.mean(0)
    evals, evecs = np.linalg.eigh(np.cov(g, rowvar=False))
    order = np.argsort(evals)[::-1]
    evals, evecs = np.clip(evals[order], 0, None), evecs[:, order[:n_pc]]
    pc = (tr["g"] - centre) @ evecs  # [D, T, H, n_pc]

    n_all, s_all = tr["n"], tr["s"]
    n_mesh = np.linspace(min(n_all.min(), 0.5), max(n_all.max(), 1.0), mesh)
    s_mesh = np.linspace(min(s_all.min(), 0.0), max(s_all.max(), 1.0), mesh)
    d_gamma = jax.vmap(jax.vmap(jax.vmap(jax.grad(gamma), (None, None, 0)), (None, 0, None)), (0, None, None))
    gp = np.asarray(d_gamma(jnp.asarray(drives, jnp.float32), jnp.asarray(n_mesh, jnp.float32),
                            jnp.asarray(s_mesh, jnp.float32)))
    time = np.arange(T) - onset
    return xr.Dataset(
        {
            "pc": (("drive", "time", "neuron", "component"), pc, {"long_name": "controller state in PC space"}),
            "limit_pc": (("drive", "neuron", "component"), pc[:, -1], {"long_name": "limit point in PC space"}),
            "limit_residual": ("drive", np.linalg.norm(tr["g"][:, -1] - tr["g"][:, -2], axis=-1).max(-1),
                               {"long_name": "max_i |g_T - g_(T-1)|"}),
            "explained_variance_ratio": ("component", evals[:n_pc] / evals.sum()),
            "n_t": (("drive", "time", "neuron"), n_all, {"long_name": "gain n_t"}),
            "s_t": (("drive", "time", "neuron"), s_all, {"long_name": "saturation s_t"}),
            "n_onset": (("drive", "neuron"), n_all[:, onset], {"long_name": "gain at onset"}),
            "s_onset": (("drive", "neuron"), s_all[:, onset], {"long_name": "saturation at onset"}),
            "n_inf": (("drive", "neuron"), n_all[:, -1], {"long_name": "gain at the last step"}),
            "s_inf": (("drive", "neuron"), s_all[:, -1], {"long_name": "saturation at the last step"}),
            "gamma_prime": (("drive", "n_mesh", "s_mesh"), gp, {"long_name": "gamma'(xi; n, s)"}),
        },
        coords={
            "drive": ("drive", drives, {"long_name": "constant drive xi"}),
            "time": ("time", time, {"long_name": "steps since onset", "units": "steps"}),
            "neuron": ("neuron", np.arange(H)),
            "component": ("component", np.arange(1, n_pc + 1)),
            "n_mesh": ("n_mesh", n_mesh, {"long_name": "gain n"}),
            "s_mesh": ("s_mesh", s_mesh, {"long_name": "saturation s"}),
        },
        attrs=analysis_attrs("controller", onset=onset, duration=duration, eps=eps, seed=seed, hidden=H, n_g=cell.n_g,
                     inputs="zero input" if task is None else f"task {type(task).__name__}"),
    )


# ---------------------------------------------------------------------------------------------
# Gradient norms by input position


def _activity(state):
    return state.h if hasattr(state, "h") else state


@eqx.filter_jit
def _position_grads(model, xs: Array, ys: Array, masks: Array, loss_name: str):
    r"""Per sample: $\partial L/\partial x_t$ ``[B, T, D]``, $\delta_t = \partial L/\partial a_t$ ``[B, T, H]``
    (through a zero per-neuron drive, which enters $a_t$ exactly where $W_{hh} h_{t-1}$ does) and
    the activities $h_t$ ``[B, T, H]``."""
    loss = get_loss(loss_name).loss
    H = model.cells[0].hidden

    def sample_loss(x, delta, y, mask):
        return loss(model(x, delta)[None], y[None], mask[None])

    def one(x, y, mask):
        gx, gd = jax.grad(sample_loss, argnums=(0, 1))(x, jnp.zeros((x.shape[0], H), x.dtype), y, mask)
        _, (state,) = model.trajectory(x)
        return gx, gd, _activity(state)

    return jax.vmap(one)(xs, ys, masks)


@register(
    "analysis",
    "gradient-by-position",
    "ARU Fig. 18: gradient norms by input position",
    figure=figures_aru.gradient_by_position,
)
def gradient_by_position_analysis(model, *, task=None, batch: int = 16, seed: int = 0) -> xr.Dataset:
    r"""How much each input position contributes to the gradient of the task loss (App. C.5, Fig. 18).

    For a one-layer model of the ARU family, ``batch`` held-out samples of ``task`` (required) and
    each sample's loss $L$:

    * ``input_grad`` (``sample``, ``time``): $\lVert \partial L/\partial x_t\rVert$;
    * ``preact_grad``: $\lVert\delta_t\rVert$, $\delta_t = \partial L/\partial a_t$ the gradient at the
      pre-activation of step $t$ — the signal backpropagated through time;
    * ``w_hh_grad``: the Frobenius norm of step $t$'s contribution to $\partial L/\partial W_{hh}$,
      $\lVert \delta_t h_{t-1}^\top\rVert_F = \lVert\delta_t\rVert\,\lVert h_{t-1}\rVert$
      ($\lVert\delta_t \odot h_{t-1}\rVert$ for an isolated, diagonal $W_{hh}$); $W_{hh}$ enters the
      step only through $a_t$, so $\partial L/\partial W_{hh} = \sum_t \delta_t h_{t-1}^\top$;
    * for the batch-mean loss (what a training step sees): ``w_hh_grad_batch`` (``time``), the norm
      of $C_t = \frac1B\sum_b \delta^b_t h^{b\top}_{t-1}$, and ``w_hh_grad_from`` (``time``), the norm
      of $\sum_{t' \ge t} C_{t'}$ — the gradient accumulated from position $t$ to the end, the
      paper's other reading ("starting the gradient accumulation at different points").

    Each per-sample variable also comes as ``<name>_mean`` and ``<name>_std`` over samples.
    """
    if task is None:
        raise ConfigError("gradient-by-position needs a task (its inputs and loss), e.g. --task adding")
    require_positive("batch", batch)
    cell = recurrent_layer(model)
    if task.input_size != model.input_size:
        raise ConfigError(f"task inputs have {task.input_size} features but the model expects {model.input_size}")
    x, y, mask = task.batch(jax.random.key(seed), batch, split="test")
    gx, gd, h = _position_grads(model, x, y, mask, task.loss)
    h_prev = jnp.concatenate([jnp.broadcast_to(_activity(cell.init_state()), (batch, 1, cell.hidden)), h[:, :-1]], 1)
    if cell.isolated:
        per_sample = jnp.linalg.norm(gd * h_prev, axis=-1)
        contributions = jnp.mean(gd * h_prev, axis=0)  # [T, H]
    else:
        per_sample = jnp.linalg.norm(gd, axis=-1) * jnp.linalg.norm(h_prev, axis=-1)
        contributions = jnp.einsum("bti,btj->tij", gd, h_prev) / batch  # [T, H, H]
    cumulative = jnp.cumsum(contributions[::-1], axis=0)[::-1]
    frob = lambda c: np.asarray(jnp.sqrt(jnp.sum(c**2, axis=tuple(range(1, c.ndim)))))  # noqa: E731

    data = {}
    for name, values, long in (
        ("input_grad", jnp.linalg.norm(gx, axis=-1), "|dL/dx_t|"),
        ("preact_grad", jnp.linalg.norm(gd, axis=-1), "|dL/da_t|"),
        ("w_hh_grad", per_sample, "|contribution of step t to dL/dW_hh|_F"),
    ):
        values = np.asarray(values)
        data[name] = (("sample", "time"), values, {"long_name": long})
        data[f"{name}_mean"] = ("time", values.mean(0), {"long_name": f"mean {long} over samples"})
        data[f"{name}_std"] = ("time", values.std(0), {"long_name": f"std of {long} over samples"})
    data["w_hh_grad_batch"] = ("time", frob(contributions), {"long_name": "|C_t|_F, batch-mean loss"})
    data["w_hh_grad_from"] = ("time", frob(cumulative), {"long_name": "|sum_{t'>=t} C_t'|_F, batch-mean loss"})
    return xr.Dataset(
        data,
        coords={"time": ("time", np.arange(x.shape[1]), {"long_name": "input position", "units": "steps"}),
                "sample": ("sample", np.arange(batch))},
        attrs=analysis_attrs("gradient-by-position", task=task.describe(), loss=task.loss, batch=batch, seed=seed,
                     isolated=cell.isolated),
    )


# ---------------------------------------------------------------------------------------------
# Recurrent weight eigenvalues


@register(
    "analysis",
    "weight-eigs",
    "ARU Fig. 5e: eigenvalues of W_hh against the unit circle",
    figure=figures_aru.weight_eigs,
)
def weight_eigs_analysis(
    model, *, others: Mapping[str, object] | None = None, label: str = "model", tol: float = 1e-4
) -> xr.Dataset:
    r"""Eigenvalues $\mu_i$ of every layer's $W_{hh}$ (:func:`dynlab.analyses.spectra.weight_eigenvalues`),
    with ``n_outside`` / ``fraction_outside``: how many lie outside the unit circle, $|\mu_i| > 1 + \text{tol}$
    (the tolerance keeps the float32 rounding of an orthogonal matrix's unit-modulus eigenvalues,
    ~$10^{-6}$, from counting as outside).

    ``others`` maps labels to further models (e.g. a non-adaptive network trained alike, Fig. 5e);
    the ``matrix`` coordinate is ``<label>:layer<i>.w_hh``.
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
    ds.attrs.update(analysis_attrs("weight-eigs", models=", ".join(models), tol=tol))
    return ds
