r"""Fixed and slow points of a discrete-time map, by minimising its speed (Sussillo & Barak 2013).

For a map $h_{t+1} = F(h_t, x)$ on $\mathbb{R}^N$ at a fixed input $x$, the *speed*

$$q(h) = \tfrac12 \,\lVert F(h, x) - h \rVert^2$$

is zero exactly at the fixed points $h^* = F(h^*, x)$. Minimising $q$ from many initial states
finds them, and also the *slow points*: local minima with small $q > 0$, where the dynamics
nearly stop (ghosts of fixed points that a bifurcation has removed, approximate line
attractors). Sussillo & Barak start from states the network visits, so that the points found
are the ones that organise the dynamics the network actually shows.

Near a point, $F(h^* + \delta, x) - h^* \approx J\delta + (F(h^*, x) - h^*)$ with
$J = \partial F / \partial h\,(h^*, x)$: the eigenvalues $\mu_i$ of $J$ say how perturbations
evolve. For a map, a direction is unstable if $|\mu_i| > 1$, stable if $|\mu_i| < 1$, and
marginal in between, within a tolerance $\tau$ (`marginal_tol`):

- **stable**: every $|\mu_i| < 1 - \tau$;
- **marginal**: no $|\mu_i| > 1 + \tau$, some $|\mu_i|$ within $\tau$ of 1 (a line or ring
  attractor has one $\mu = 1$ along it);
- **saddle**: some $|\mu_i| > 1 + \tau$ and some $|\mu_i| < 1 - \tau$;
- **unstable**: some $|\mu_i| > 1 + \tau$ and none $< 1 - \tau$ (a repeller, possibly with
  marginal directions).

Public pieces:

- [`speed`][]: $q(h)$;
- [`minimise_speed`][]: the numerical core, a batch of `optimistix` minimisations (BFGS, or
  L-BFGS for large $N$), `jax.vmap`-ed over initial states and jit-compiled;
- [`unique_points`][]: deduplication of the minima;
- [`jacobian_eigenvalues`][] and [`stability`][]: the linearisation at each point;
- [`fixed_points`][]: all of it, as a labelled `xr.Dataset` with dims `point` and `eigen`;
- [`fixed_points_from_visited`][]: the whole search from the states a map visits (initial states
  by [`dynlab.analyses.fixed_points.coverage`][], with an estimate of the points missed).

Everything works on any map `step(h, x) -> h_next` on flat vectors (for a PyTree state use
`dynlab.analyses.lyapunov.flatten_step`); `x` may be any PyTree. The arithmetic is done in the
dtype of the initial states: for float64 call inside `with jax.enable_x64(True):` with float64
arrays.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import xarray as xr
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PyTree

from dynlab.analyses.fixed_points.coverage import (PERTURBATION_SCALES, PROBE_STEPS, PROBES, ROUNDS,
                                                   RUNS_PER_POINT, initial_states, unseen_points)
from dynlab.analyses.fixed_points.reading import continuum, fixed_points_reading
from dynlab.analyses.state_map import eigenvalues_of
from dynlab.errors import ConfigError
from dynlab.provenance import stamp

__all__ = [
    "STABILITY_CLASSES",
    "SpeedMinima",
    "discarded_minimum",
    "fixed_points",
    "fixed_points_from_visited",
    "jacobian_eigenvalues",
    "minimise_speed",
    "speed",
    "stability",
    "unique_points",
]

FlatStep = Callable[[Float[Array, " n"], PyTree], Float[Array, " n"]]
Solver = Literal["auto", "bfgs", "lbfgs"]

STABILITY_CLASSES = ("stable", "marginal", "saddle", "unstable")
"""The stability classes of a point, in the order of the integer codes of `stability_code`."""

LBFGS_ABOVE = 1024
"""`solver="auto"` uses dense BFGS up to this state dimension and L-BFGS above it: BFGS keeps an
$N \times N$ inverse-Hessian estimate per initial state ($N^2$ memory and $O(N^2)$ work per
step), L-BFGS a history of 10 pairs of vectors ($O(N)$)."""

BFGS_CHUNK_BYTES = 2**22
r"""`batch_size="auto"` of [`minimise_speed`][] puts this many bytes of BFGS inverse-Hessian
estimates in one chunk: 8 states at $N = 256$ in float64, 32 at $N = 128$, all of a batch of
256 for $N \le 45$. Measured on a 2-core CPU (256-unit tanh RNN, 256 initial states, float64,
one matrix 0.5 MiB; the machine shared, so +-20%): all 256 at once 17-20 s, chunks of 64: 19 s,
16: 8.1-8.3 s, 8: 7.5 s, 4: 9.0 s, 1: 10.7 s."""


def speed(step: FlatStep, h: Float[Array, " n"], x: PyTree) -> Float[Array, ""]:
    r"""$q(h) = \frac12 \lVert F(h, x) - h \rVert^2$, the squared speed of the map at $h$, halved."""
    r = step(h, x) - h
    return 0.5 * jnp.sum(r * r)


class SpeedMinima(NamedTuple):
    r"""What [`minimise_speed`][] returns, one row per initial state (a PyTree of JAX arrays).

    - `points`: `[B, N]`, where each minimisation ended;
    - `q`: `[B]`, the speed $q$ there;
    - `num_steps`: `[B]`, solver steps taken;
    - `terminated`: `[B]`, whether the solver met its tolerances (`False`: it stopped at
      `max_steps` or failed; the point may still have a small $q$, which is what counts).
    """

    points: Float[Array, "b n"]
    q: Float[Array, " b"]
    num_steps: Int[Array, " b"]
    terminated: Bool[Array, " b"]


def _solver(solver: Solver, n: int, rtol: float, atol: float) -> optx.AbstractMinimiser:
    if solver == "auto":
        solver = "bfgs" if n <= LBFGS_ABOVE else "lbfgs"
    if solver == "bfgs":
        return optx.BFGS(rtol=rtol, atol=atol)
    if solver == "lbfgs":
        return optx.LBFGS(rtol=rtol, atol=atol)
    raise ConfigError(f"solver must be 'auto', 'bfgs' or 'lbfgs'; got {solver!r}")


@eqx.filter_jit
def minimise_speed(
    step: FlatStep,
    h0s: Float[ArrayLike, "b n"],
    x: PyTree,
    *,
    rtol: float = 1e-6,
    atol: float = 1e-12,
    max_steps: int = 1000,
    solver: Solver = "auto",
    batch_size: int | Literal["auto"] | None = "auto",
) -> SpeedMinima:
    r"""Minimise $q(h) = \frac12\lVert F(h, x) - h\rVert^2$ from every row of `h0s`, in one batch.

    Each minimisation is `optimistix.minimise` with `optimistix.BFGS` (or `LBFGS`), gradients by
    reverse-mode autodiff of $q$ ($\nabla q = (J - I)^\top (F(h) - h)$, one VJP), the batch
    `jax.vmap`-ed (so the batch runs until its slowest member stops or hits `max_steps`).
    The solver stops when both the step in $h$ and the change of $q$ are small: with the
    max-norm, $\lVert\Delta h\rVert_\infty < \texttt{atol} + \texttt{rtol}\,|h|$ and
    $|\Delta q| < \texttt{atol} + \texttt{rtol}\,q$. Because $q$ is quadratic in the residual,
    a residual $r$ gives $q \sim r^2$: `rtol` near $\sqrt{\epsilon}$ of the dtype and a tiny
    `atol` let the residual reach rounding. A solver that does not meet them stops at
    `max_steps`, which is not an error here: what is reported is $q$ at the end, and the caller
    decides by $q$ what is a fixed or a slow point.

    jit-compiled with `equinox.filter_jit` (the weights inside `step`, e.g. an
    `equinox.Module`'s, are traced: new weights do not recompile).

    **Arguments:**

    - `step`: `step(h, x) -> h_next` on flat vectors, differentiable in `h`.
    - `h0s`: `[B, N]` initial states.
    - `x`: the fixed input (any PyTree), the same for every initial state.
    - `rtol`, `atol`: the solver's tolerances (above).
    - `max_steps`: the most solver steps per initial state.
    - `solver`: `"bfgs"`, `"lbfgs"` or `"auto"` (BFGS up to $N$ = `LBFGS_ABOVE`).
    - `batch_size`: the initial states are minimised in consecutive chunks of this many
      (`jax.lax.map` over `jax.vmap`-ed chunks; `None`: all at once). BFGS holds one
      $N\times N$ matrix per state and its rank-2 updates are memory-bound, so chunks whose
      matrices fit in cache run faster, and each chunk stops with its own slowest member rather
      than the whole batch's. `"auto"`: for BFGS, chunks of
      $\max(1, \lfloor$ `BFGS_CHUNK_BYTES` $/ (N^2 \cdot \text{itemsize}) \rfloor)$ states;
      L-BFGS, all at once.

    **Returns:** a [`SpeedMinima`][].
    """
    h0s = jnp.asarray(h0s)
    if h0s.ndim != 2 or h0s.shape[0] == 0 or h0s.shape[1] == 0:
        raise ConfigError(f"h0s must be a non-empty array of initial states [B, N]; got shape {h0s.shape}")
    minimiser = _solver(solver, h0s.shape[1], rtol, atol)

    def fn(h, args):
        return speed(step, h, args)

    def one(h0):
        sol = optx.minimise(fn, minimiser, h0, args=x, max_steps=max_steps, throw=False)
        h = sol.value
        return h, fn(h, x), sol.stats["num_steps"], sol.result == optx.RESULTS.successful

    if batch_size == "auto":
        dense = isinstance(minimiser, optx.BFGS)
        batch_size = max(1, BFGS_CHUNK_BYTES // (h0s.shape[1] ** 2 * h0s.dtype.itemsize)) if dense else None
    if batch_size is None or batch_size >= h0s.shape[0]:
        return SpeedMinima(*jax.vmap(one)(h0s))
    return SpeedMinima(*jax.lax.map(one, h0s, batch_size=batch_size))


def unique_points(
    points: Float[ArrayLike, "b n"], q: Float[ArrayLike, " b"], radius: float
) -> tuple[np.ndarray, np.ndarray]:
    r"""Deduplicate minima: greedy clustering by increasing $q$ within a Euclidean `radius`.

    The minima are taken in order of increasing $q$ (NaN last, and never kept); each one within
    `radius` of an already kept point joins it, otherwise it is kept as a new point. So every
    kept point is the lowest-$q$ member of its group, and kept points are more than `radius`
    apart. Minimisations from different initial states that end at one fixed point agree to
    the solver's tolerance, far below any sensible radius; a continuum of slow points (a line
    attractor) is kept as points about `radius` apart or more.

    **Returns:** `(kept, assignment)`: the indices of the kept rows, in order of increasing $q$,
    and for every row the position in `kept` of the point it joined (-1 for NaN rows).
    """
    pts = np.asarray(points, np.float64)
    qs = np.asarray(q, np.float64)
    if not np.isfinite(radius) or radius < 0:
        raise ConfigError(f"the deduplication radius must be a finite number >= 0; got {radius!r}")
    assignment = np.full(qs.shape[0], -1, dtype=np.int64)
    kept: list[int] = []
    finite = np.isfinite(qs) & np.all(np.isfinite(pts), axis=1)
    for i in np.argsort(np.where(finite, qs, np.inf), kind="stable"):
        if not finite[i]:
            continue
        if kept:
            d = np.linalg.norm(pts[kept] - pts[i], axis=1)
            j = int(np.argmin(d))
            if d[j] <= radius:
                assignment[i] = j
                continue
        assignment[i] = len(kept)
        kept.append(int(i))
    return np.asarray(kept, dtype=np.int64), assignment


@eqx.filter_jit
def _jacobians(step: FlatStep, points: Float[Array, "p n"], x: PyTree) -> Float[Array, "p n n"]:
    return jax.vmap(lambda h: jax.jacfwd(step)(h, x))(points)


def jacobian_eigenvalues(step: FlatStep, points: Float[ArrayLike, "p n"], x: PyTree) -> np.ndarray:
    r"""Eigenvalues $\mu_i$ of $J = \partial F/\partial h$ at every point, sorted by decreasing $|\mu_i|$.

    Jacobians by `jax.jacfwd` (vmapped over the points, in their dtype), eigenvalues by
    [`eigenvalues_of`][dynlab.analyses.state_map.eigenvalues_of] on the host (LAPACK `geev`, one BLAS thread).
    Complex conjugate pairs are kept together: ties in modulus are ordered by decreasing
    imaginary part. Returns a complex array `[P, N]`.
    """
    points = jnp.asarray(points)
    if points.shape[0] == 0:
        return np.zeros((0, points.shape[1]), np.complex128)
    jac = np.asarray(_jacobians(step, points, x))
    eig = eigenvalues_of(jac)
    order = np.lexsort((-eig.imag, -np.abs(eig)), axis=-1)
    return np.take_along_axis(eig, order, axis=-1)


def stability(eigenvalues: ArrayLike, marginal_tol: float = 1e-3) -> dict[str, np.ndarray]:
    r"""Unstable, marginal and stable directions of map fixed points, and their class.

    With $\tau$ = `marginal_tol`: unstable $|\mu| > 1 + \tau$, stable $|\mu| < 1 - \tau$, marginal
    otherwise; the classes are those of the module docstring.

    **Arguments:** `eigenvalues` `[..., N]` (complex or real), `marginal_tol` $\tau \ge 0$.

    **Returns:** a dict of arrays over the leading axes: `n_unstable`, `n_marginal`, `n_stable`
    (ints), `stability_code` (index into [`STABILITY_CLASSES`][]) and `stability` (the names).
    """
    if not np.isfinite(marginal_tol) or marginal_tol < 0:
        raise ConfigError(f"marginal_tol must be a finite number >= 0; got {marginal_tol!r}")
    mod = np.abs(np.asarray(eigenvalues))
    unstable = np.sum(mod > 1 + marginal_tol, axis=-1)
    stable = np.sum(mod < 1 - marginal_tol, axis=-1)
    marginal = mod.shape[-1] - unstable - stable
    code = np.where(
        unstable == 0,
        np.where(marginal == 0, 0, 1),  # stable / marginal
        np.where(stable > 0, 2, 3),  # saddle / unstable
    )
    names = np.asarray(STABILITY_CLASSES, dtype=object)[code]
    return {"n_unstable": unstable, "n_marginal": marginal, "n_stable": stable,
            "stability_code": code, "stability": names}


def discarded_minimum(
    points: Float[ArrayLike, "b n"], q: Float[ArrayLike, " b"], unique_tol: float
) -> tuple[float, int, float]:
    r"""Where the minimisations came closest to a point, for a result that kept none.

    **Returns:** `(q_min, runs, q_max)`: the smallest finite $q$ reached, how many runs ended
    within `unique_tol` of that run's end point (the lowest-$q$ group of [`unique_points`][]),
    and the smallest power of ten $\ge q_{\min}$, a `q_max` that keeps it. `(nan, 0, nan)` when
    no run ended at a finite $q$.
    """
    q = np.asarray(q, np.float64)
    if not np.any(np.isfinite(q)):
        return float("nan"), 0, float("nan")
    kept, assignment = unique_points(points, q, unique_tol)
    q_min = float(q[kept[0]])
    keeps = 10.0 ** np.ceil(np.log10(q_min)) if q_min > 0 else float(np.finfo(float).tiny)
    return q_min, int(np.sum(assignment == 0)), float(keeps)


def _check_tolerances(q_tol: float, q_max: float, unique_tol: float, marginal_tol: float, max_steps: int) -> None:
    for name, value in (("q_tol", q_tol), ("q_max", q_max), ("unique_tol", unique_tol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
            raise ConfigError(f"{name} must be a positive finite number; got {value!r}")
    if q_max < q_tol:
        raise ConfigError(f"q_max (slow points kept) must be >= q_tol (fixed points); got q_max={q_max!r} < q_tol={q_tol!r}")
    if isinstance(marginal_tol, bool) or not isinstance(marginal_tol, (int, float)) or not 0 <= marginal_tol < 1:
        raise ConfigError(f"marginal_tol must be a number in [0, 1); got {marginal_tol!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ConfigError(f"max_steps must be a positive integer; got {max_steps!r}")


def fixed_points(
    step: FlatStep,
    h0s: Float[ArrayLike, "b n"],
    x: PyTree = None,
    *,
    q_tol: float = 1e-10,
    q_max: float = 1e-4,
    unique_tol: float = 1e-3,
    marginal_tol: float = 1e-3,
    max_steps: int = 1000,
    rtol: float | None = None,
    atol: float = 1e-14,
    solver: Solver = "auto",
) -> xr.Dataset:
    r"""Fixed and slow points of `step` at input `x`, from the initial states `h0s`, as a dataset.

    1. [`minimise_speed`][] from every row of `h0s`;
    2. minima with $q \le$ `q_max` are kept (the others are not near any point where the
       dynamics stop) and deduplicated within `unique_tol` ([`unique_points`][]);
    3. each kept point is a **fixed point** if $q \le$ `q_tol`, else a **slow point**;
    4. the Jacobian's eigenvalues at every point ([`jacobian_eigenvalues`][]), and
       [`stability`][] with `marginal_tol`.

    The default `q_tol` = $10^{-10}$ is a residual $\lVert F(h) - h\rVert \approx 1.4\cdot10^{-5}$,
    above float32 rounding of a state of a few hundred components of order one
    ($\epsilon\sqrt{N} \approx 2\cdot10^{-6}$); in float64 a much smaller one can be asked for.
    `rtol` defaults to $\sqrt{\epsilon}$ of the dtype ($3.5\cdot10^{-4}$ float32,
    $1.5\cdot10^{-8}$ float64) divided by 10.

    **Arguments:** `step`, `h0s`, `x`, `max_steps`, `solver`, `rtol`, `atol` as in
    [`minimise_speed`][]; the tolerances above.

    **Returns:** an `xr.Dataset` with dims `point` (kept points, by increasing $q$), `eigen`
    (eigenvalue index, by decreasing modulus), `state` ($N$), `ic` (initial states):

    - `points` (`point`, `state`); `q` (`point`); `is_fixed` (`point`, $q \le$ `q_tol`);
      `basin_count` (`point`, how many initial states ended there);
    - `eig_real`, `eig_imag`, `eig_abs` (`point`, `eigen`);
    - `n_unstable`, `n_marginal`, `n_stable`, `stability` (names), `stability_code` (`point`);
    - `ic_q`, `ic_point` (index into `point`, -1 if discarded), `ic_num_steps`,
      `ic_terminated` (`ic`): every minimisation;
    - scalars `n_fixed`, `n_slow` and `n_points_<class>` (one per stability class): the counts of
      points (a sweep keeps every scalar per cell, [`dynlab.scenarios.cell.cell_summary`][]);
    - attrs `analysis="fixed-points"`, `q_tol`, `q_max`, `unique_tol`, `marginal_tol`,
      `max_steps`, `solver`, `rtol`, `atol`, `n_ics`, `n_fixed`, `n_slow`, `state_dim`,
      `dtype`, `stability_classes`;
    - completeness ([`unseen_points`][] of the basin counts): attrs `n_found_once`,
      `n_found_twice`, `n_unseen_estimate` (Chao1), with a warning when the estimate is 1 or
      more (points are likely missing) and the points are not a continuum
      ([`continuum`][dynlab.analyses.fixed_points.reading.continuum]: a line attractor, whose
      runs each end at their own point);
    - when every minimum is discarded ([`discarded_minimum`][]): attrs `discarded_min_q` (the
      smallest $q$ reached), `discarded_min_q_runs` (how many runs stopped at that point) and
      `q_max_to_keep` (the `q_max` that keeps it); NaN, 0, NaN otherwise;
    - attr `reading`: the finding in words
      ([`fixed_points_reading`][dynlab.analyses.fixed_points.reading.fixed_points_reading]).
    """
    _check_tolerances(q_tol, q_max, unique_tol, marginal_tol, max_steps)
    h0s = _initial_array(h0s)
    rtol = _rtol(h0s.dtype, rtol)
    result = jax.tree.map(np.asarray, minimise_speed(step, h0s, x, rtol=rtol, atol=float(atol),
                                                     max_steps=int(max_steps), solver=solver))
    return _dataset(step, x, h0s.dtype, result, q_tol=q_tol, q_max=q_max, unique_tol=unique_tol,
                    marginal_tol=marginal_tol, max_steps=max_steps, rtol=rtol, atol=atol, solver=solver)


def _initial_array(h0s) -> Array:
    h0s = jnp.asarray(h0s)
    if not jnp.issubdtype(h0s.dtype, jnp.floating):
        h0s = h0s.astype(float)
    if h0s.ndim != 2 or h0s.shape[0] == 0 or h0s.shape[1] == 0:
        raise ConfigError(f"h0s must be a non-empty array of initial states [B, N]; got shape {h0s.shape}")
    return h0s


def _rtol(dtype, rtol: float | None) -> float:
    return float(np.sqrt(float(jnp.finfo(dtype).eps)) / 10) if rtol is None else float(rtol)


def _dataset(step: FlatStep, x: PyTree, dtype, result: SpeedMinima, *, q_tol: float, q_max: float, unique_tol: float,
             marginal_tol: float, max_steps: int, rtol: float, atol: float, solver: Solver) -> xr.Dataset:
    """The dataset of [`fixed_points`][] from the minimisations `result` (NumPy arrays)."""
    n = int(result.points.shape[1])
    q_all = result.q.astype(np.float64)
    keep_mask = np.isfinite(q_all) & (q_all <= q_max)
    candidates = np.flatnonzero(keep_mask)
    kept_local, assign_local = unique_points(result.points[candidates], q_all[candidates], unique_tol)
    kept = candidates[kept_local]
    ic_point = np.full(q_all.shape[0], -1, np.int64)
    ic_point[candidates] = assign_local
    points = result.points[kept]
    q = q_all[kept]
    eig = jacobian_eigenvalues(step, jnp.asarray(points, dtype), x)
    stab = stability(eig, marginal_tol)
    is_fixed = q <= q_tol
    counts = np.bincount(ic_point[ic_point >= 0], minlength=len(kept)).astype(np.int64)
    solver_name = solver if solver != "auto" else ("bfgs" if n <= LBFGS_ABOVE else "lbfgs")
    f1, f2, unseen = unseen_points(counts)
    nearest_q, nearest_runs, keeps = (np.nan, 0, np.nan) if len(kept) else discarded_minimum(result.points, q_all,
                                                                                            unique_tol)
    one = {"units": "1"}
    data_vars: dict[str, Any] = {
        "points": (("point", "state"), points.astype(np.float64), {"long_name": "fixed or slow point h*"}),
        "q": ("point", q, {**one, "long_name": "speed q = |F(h*) - h*|^2 / 2"}),
        "is_fixed": ("point", is_fixed, {"long_name": f"fixed point (q <= q_tol = {q_tol:g}); else slow point"}),
        "basin_count": ("point", counts, {"long_name": "initial states whose minimisation ended here"}),
        "eig_real": (("point", "eigen"), eig.real, {**one, "long_name": "Re mu (Jacobian eigenvalue)"}),
        "eig_imag": (("point", "eigen"), eig.imag, {**one, "long_name": "Im mu (Jacobian eigenvalue)"}),
        "eig_abs": (("point", "eigen"), np.abs(eig), {**one, "long_name": "|mu| (Jacobian eigenvalue modulus)"}),
        "n_unstable": ("point", stab["n_unstable"], {"long_name": f"directions with |mu| > 1 + {marginal_tol:g}"}),
        "n_marginal": ("point", stab["n_marginal"], {"long_name": f"directions with ||mu| - 1| <= {marginal_tol:g}"}),
        "n_stable": ("point", stab["n_stable"], {"long_name": f"directions with |mu| < 1 - {marginal_tol:g}"}),
        "stability": ("point", stab["stability"].astype(str), {"long_name": "stability class"}),
        "stability_code": ("point", stab["stability_code"], {
            "long_name": "stability class code", "flag_values": np.arange(len(STABILITY_CLASSES)),
            "flag_meanings": " ".join(STABILITY_CLASSES)}),
        "ic_q": ("ic", q_all, {**one, "long_name": "q at the end of the minimisation"}),
        "ic_point": ("ic", ic_point, {"long_name": "point reached (index into point; -1: q > q_max, discarded)"}),
        "ic_num_steps": ("ic", result.num_steps.astype(np.int64), {"long_name": "solver steps"}),
        "ic_terminated": ("ic", result.terminated.astype(bool), {"long_name": "solver met its tolerances"}),
        # the per-run counts as scalars too: a sweep keeps them per cell and its summary shows them
        "n_fixed": ((), np.int64(is_fixed.sum()), {"long_name": f"fixed points (q <= q_tol = {q_tol:g})"}),
        "n_slow": ((), np.int64((~is_fixed).sum()), {"long_name": "slow points (q_tol < q <= q_max)"}),
        **{f"n_points_{name}": ((), np.int64(np.sum(stab["stability_code"] == code)), {"long_name": f"{name} points"})
           for code, name in enumerate(STABILITY_CLASSES)},
    }
    coords = {
        "point": ("point", np.arange(len(kept)), {"long_name": "fixed or slow point (by increasing q)"}),
        "eigen": ("eigen", np.arange(n), {"long_name": "eigenvalue index (by decreasing modulus)"}),
        "state": ("state", np.arange(n), {"long_name": "state component"}),
        "ic": ("ic", np.arange(q_all.shape[0]), {"long_name": "initial state of a minimisation"}),
    }
    config = {
        "q_tol": float(q_tol),
        "q_max": float(q_max),
        "unique_tol": float(unique_tol),
        "marginal_tol": float(marginal_tol),
        "max_steps": int(max_steps),
        "solver": solver_name,
        "rtol": rtol,
        "atol": float(atol),
        "n_ics": int(q_all.shape[0]),
        "n_fixed": int(is_fixed.sum()),
        "n_slow": int((~is_fixed).sum()),
        "state_dim": n,
        "dtype": str(jnp.dtype(dtype)),
        "stability_classes": " ".join(STABILITY_CLASSES),
        "n_found_once": f1,
        "n_found_twice": f2,
        "n_unseen_estimate": float(unseen),
        "discarded_min_q": float(nearest_q),
        "discarded_min_q_runs": int(nearest_runs),
        "q_max_to_keep": float(keeps),
    }
    ds = stamp(xr.Dataset(data_vars, coords=coords), analysis="fixed-points", config=config)
    ds.attrs["reading"] = fixed_points_reading(ds, "q_max")
    if unseen >= 1 and not continuum(ds):
        warnings.warn(f"points are likely missing: {f1} point(s) found by one run and {f2} by two give an estimate "
                      f"of {unseen:.3g} unseen (Chao1); more initial states or wider scales would find them",
                      stacklevel=3)
    return ds


def fixed_points_from_visited(
    step: FlatStep,
    visited: Float[ArrayLike, "t n"],
    x: PyTree = None,
    *,
    ics: int = 64,
    rounds: int = ROUNDS,
    scales: tuple[float, ...] = PERTURBATION_SCALES,
    probes: int = PROBES,
    probe_steps: int = PROBE_STEPS,
    noise: float = 0.0,
    seed: int = 0,
    q_tol: float = 1e-10,
    q_max: float = 1e-4,
    unique_tol: float = 1e-3,
    marginal_tol: float = 1e-3,
    max_steps: int = 1000,
    rtol: float | None = None,
    atol: float = 1e-14,
    solver: Solver = "auto",
) -> xr.Dataset:
    r"""Fixed and slow points of any map from the states it visits: the analysis's whole search.

    In up to `rounds` rounds, `ics` initial states from `visited` `[T, N]`
    ([`initial_states`][dynlab.analyses.fixed_points.coverage.initial_states]: visited states,
    probe trajectories of `step` at `x`, perturbations at `scales` of the states' size, plus
    Gaussian `noise` of that absolute size; round $r$ seeded by `seed` and $r$) are minimised
    ([`minimise_speed`][]). A further round runs while the points kept so far include one found
    by a single run (rare basins: the Good–Turing sign of unseen points) or there are fewer
    than `RUNS_PER_POINT` runs per point kept, unless every kept point was found once (a
    continuum, where more runs only find more of it). Then
    [`fixed_points`][]'s dataset of all runs, with its tolerances, `max_steps`, `solver`,
    `rtol`, `atol`. The same search the ``fixed-points`` analysis runs on a dynlab model, for
    maps that are not one. The arithmetic is in the dtype of `visited`.

    **Returns:** the dataset of [`fixed_points`][], plus `ic_scale` (`ic`: each initial state's
    perturbation scale), `ic_round` (`ic`) and attrs `rounds` (the most), `rounds_run`, `scales`,
    `probes`, `probe_steps`, `noise`, `seed`.
    """
    _check_tolerances(q_tol, q_max, unique_tol, marginal_tol, max_steps)
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ConfigError(f"rounds must be a positive integer; got {rounds!r}")
    visited = _initial_array(visited)
    rtol = _rtol(visited.dtype, rtol)
    parts: list[SpeedMinima] = []
    scale_parts, round_parts = [], []
    for r in range(int(rounds)):
        h0s, scale = initial_states(step, visited, x, ics, jax.random.fold_in(jax.random.key(seed), r), scales=scales,
                                    probes=probes, probe_steps=probe_steps, noise=noise)
        parts.append(jax.tree.map(np.asarray, minimise_speed(step, jnp.asarray(h0s), x, rtol=rtol, atol=float(atol),
                                                             max_steps=int(max_steps), solver=solver)))
        scale_parts.append(scale)
        round_parts.append(np.full(len(scale), r))
        result = SpeedMinima(*(np.concatenate(a) for a in zip(*parts)))
        keep = np.flatnonzero(np.isfinite(result.q) & (result.q <= q_max))
        _, assignment = unique_points(result.points[keep], result.q[keep], unique_tol)
        counts = np.bincount(assignment[assignment >= 0])
        if np.all(counts == 1) or (not np.any(counts == 1) and len(result.q) >= RUNS_PER_POINT * len(counts)):
            break
    ds = _dataset(step, x, visited.dtype, result, q_tol=q_tol, q_max=q_max, unique_tol=unique_tol,
                  marginal_tol=marginal_tol, max_steps=max_steps, rtol=rtol, atol=atol, solver=solver)
    ds["ic_scale"] = ("ic", np.concatenate(scale_parts),
                      {"units": "1", "long_name": "perturbation scale (x the states' root mean square per component)"})
    ds["ic_round"] = ("ic", np.concatenate(round_parts), {"long_name": "round of initial states"})
    return stamp(ds, analysis="fixed-points", seed=seed, config={
        "scales": " ".join(f"{v:g}" for v in np.atleast_1d(scales)), "probes": int(probes),
        "probe_steps": int(probe_steps), "noise": float(noise), "rounds": int(rounds), "rounds_run": len(parts)})
