r"""Fixed and slow points of a dynlab model's full state map, registered as the analysis ``fixed-points``.

The map is the one every dynamical analysis sees ([`dynlab.analyses.state_map`][]): all of
every layer's state as one vector $h$, $h_{t+1} = F(h_t, x_t, \xi_t)$. Initial states for the
minimisation are states the model visits under the chosen input protocol
([`dynlab.analyses.protocol`][]: autonomous, a constant drive $\xi$, a task's inputs, or input
noise), as Sussillo & Barak (2013) prescribe; the points are those of $F$ at one fixed input:
the protocol's mean input (zero input, the constant drive, the task's mean input $\bar x$ with
the drive, or the noise's mean, zero) or, with ``at="zero"``, zero input and zero drive.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.fixed_points.core import fixed_points_from_visited
from dynlab.analyses.fixed_points.coverage import PERTURBATION_SCALES, state_scale
from dynlab.analyses.fixed_points.figure import fixed_points_figure, fixed_points_summary
from dynlab.analyses.protocol import Autonomous, Protocol
from dynlab.config import Count
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register

__all__ = ["check_fixed_points", "fixed_points_analysis", "principal_components"]

PCA_ROWS = 2000
"""At most this many visited states (evenly spaced) enter the principal components and the figure."""


def principal_components(states: np.ndarray, n: int = 3, rows: int = PCA_ROWS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The top `n` principal components of `states` `[T, N]` (rows evenly subsampled to `rows`).

    With the centred data $X - \bar x = U S V^\top$, the components are the first rows of
    $V^\top$ (sign fixed so that the largest-magnitude entry of each is positive) and the
    explained-variance ratios $s_i^2 / \sum_j s_j^2$.

    **Returns:** `(mean [N], components [n, N], variance_ratio [n])`, float64.
    """
    x = np.asarray(states, np.float64)
    if x.shape[0] > rows:
        x = x[np.linspace(0, x.shape[0] - 1, rows).round().astype(int)]
    mean = x.mean(axis=0)
    _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
    n = min(n, vt.shape[0])
    comps = vt[:n]
    signs = np.sign(comps[np.arange(n), np.argmax(np.abs(comps), axis=1)])
    comps = comps * np.where(signs == 0, 1.0, signs)[:, None]
    total = float(np.sum(s**2))
    ratio = s[:n] ** 2 / total if total > 0 else np.zeros(n)
    return mean, comps, ratio


BEYOND_VISITED = 10.0
r"""A point is *beyond the visited states* when one of its components lies farther outside the
visited states' range than this many times that component's scale $\sigma_d$
([`state_scale`][dynlab.analyses.fixed_points.coverage.state_scale], 1 when the trajectory rests
at the origin); the initial states reach at most 3 $\sigma_d$ beyond it
([`PERTURBATION_SCALES`][dynlab.analyses.fixed_points.coverage.PERTURBATION_SCALES]).
Minimisations started near the trajectory can run far away, where gates saturate and the map is
nearly the identity: a 64-unit GRU trained on the 3-bit flip-flop gives 117 such "points" at
components up to $\approx 50$ (its states stay in $[-1, 1]^N$), next to its 8 attractors and
saddles."""


def mark_beyond_visited(ds: xr.Dataset, visited: np.ndarray, factor: float = BEYOND_VISITED) -> xr.Dataset:
    """``ds`` with ``beyond_visited`` (``point``) and the attr-like scalar ``n_points_beyond_visited``,
    and its reading redone ([`BEYOND_VISITED`][])."""
    from dynlab.analyses.fixed_points.reading import fixed_points_reading

    sigma = state_scale(visited)
    low, high = visited.min(axis=0) - factor * sigma, visited.max(axis=0) + factor * sigma
    points = np.asarray(ds.points.values, dtype=float).reshape(-1, visited.shape[1])
    beyond = np.any((points < low) | (points > high), axis=1)
    ds["beyond_visited"] = ("point", beyond, {"long_name": f"a component more than {factor:g} state scales "
                                                           "outside the visited states' range"})
    ds["n_points_beyond_visited"] = ((), int(beyond.sum()), {"units": "1"})
    ds.attrs["reading"] = fixed_points_reading(ds, "q_max")
    return ds


def check_fixed_points(model, *, steps: int, burn_in: int, ics: int, at: str = "protocol",
                       noise: float = 0.0, scales=PERTURBATION_SCALES, **_) -> None:
    """The options of [`fixed_points_analysis`][] that ``model`` can take; one ConfigError line otherwise."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"steps = {steps!r} leaves no trajectory to draw initial states from; "
                          "steps must be a positive integer")
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")
    require_positive("ics", ics)
    if ics > steps - burn_in:
        raise ConfigError(f"ics = {ics} initial states cannot be drawn without repeats from the "
                          f"{steps - burn_in} visited states after burn-in; use ics <= {steps - burn_in} or more steps")
    if at not in ("protocol", "zero"):
        raise ConfigError(f"at must be 'protocol' (the protocol's mean input) or 'zero'; got {at!r}")
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not np.isfinite(noise) or noise < 0:
        raise ConfigError(f"noise must be a finite number >= 0, got {noise!r}")
    values = np.atleast_1d(np.asarray(scales, dtype=object))
    if not values.size or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0
                                  for v in values):
        raise ConfigError(f"scales must be one or more finite numbers >= 0, got {scales!r}")



@register(
    "analysis",
    "fixed-points",
    "fixed and slow points of the state map (speed minimisation from visited states), Jacobian spectra, stability",
    figure=fixed_points_figure,
    summary=fixed_points_summary,
    headline=(("n_points_stable", "stable fixed points"),),
    outputs=(
        Output("points", "field", ("point", "state")), Output("q", "real", ("point",)),
        *Output.each("is_fixed stability stability_code beyond_visited", "field", ("point",)),
        *Output.each("basin_count n_unstable n_marginal n_stable", "count", ("point",)),
        *Output.each("eig_real eig_imag eig_abs", "field", ("point", "eigen")),
        *Output.each("ic_q ic_scale", "real", ("ic",)),
        *Output.each("ic_point ic_num_steps ic_terminated ic_round", "field", ("ic",)),
        *Output.each("n_fixed n_slow n_points_stable n_points_marginal n_points_saddle n_points_unstable "
                     "n_points_beyond_visited", "count"),
        Output("pc_components", "field", ("pc", "state")), Output("pc_variance_ratio", "fraction", ("pc",)),
        Output("point_pcs", "field", ("point", "pc")), Output("trajectory_pcs", "field", ("sample", "pc")),
    ),
    check=check_fixed_points,
)
def fixed_points_analysis(
    model,
    *,
    ics: Count = 64,
    steps: Count = 2000,
    burn_in: int = 200,
    input: Protocol = Autonomous(),
    at: Literal["protocol", "zero"] = "protocol",
    noise: float = 0.0,
    scales: tuple[float, ...] = PERTURBATION_SCALES,
    q_tol: float = 1e-10,
    q_max: float = 1e-4,
    unique_tol: float = 1e-3,
    marginal_tol: float = 1e-3,
    max_steps: int = 1000,
    solver: Literal["auto", "bfgs", "lbfgs"] = "auto",
    dtype: Literal["float64", "float32"] = "float64",
    seed: int = 0,
) -> xr.Dataset:
    r"""Fixed and slow points of a model's full state map (Sussillo & Barak 2013), with their stability.

    1. **Trajectory.** The state map runs `steps` steps from the model's initial state under the
       `input` protocol ([`dynlab.analyses.protocol`][]): autonomous (default), a constant drive
       $\xi$ on every neuron, a task's inputs or input noise (streams seeded by `seed`).
    2. **Initial states** (`dynlab.analyses.fixed_points.coverage`). The states visited after
       `burn_in`, joined by short probe trajectories of the map at the input of step 3 started
       from nudged visited states (they leave an unstable point the trajectory rests at);
       `ics` of these, shared out in turn over the perturbation `scales` (Gaussian noise of
       that many times the root mean square of the states, per component; 0: as visited), plus
       Gaussian noise of absolute standard deviation `noise` (on the initial states, not the input).
    3. **Input.** The points are those of $h \mapsto F(h, \bar x, \bar\xi)$: with
       `at="protocol"`, $\bar x = 0$ (a task's mean input over the run after burn-in; the noise's
       mean, 0) and $\bar\xi$ the drive (0 if none); with `at="zero"`, zero input and zero drive.
    4. **Minimisation** of $q(h) = \frac12\lVert F(h) - h\rVert^2$ from every initial state,
       batched (`dynlab.analyses.fixed_points.fixed_points`): minima with $q \le$ `q_max` are
       kept and deduplicated within the Euclidean distance `unique_tol`; a point is *fixed* if
       $q \le$ `q_tol`, else *slow*; eigenvalues of the Jacobian there, unstable directions
       ($|\mu| > 1 +$ `marginal_tol`) and the class (stable / marginal / saddle / unstable).
    5. **What happened.** How many points were likely missed (Chao1 from the points found by one
       run and by two, with a warning when it is 1 or more), and, when every minimum was
       discarded, the smallest $q$ reached, how many runs stopped there and the `q_max` that
       keeps it.

    **Precision.** `dtype="float64"` (default) minimises in float64, whatever `--x64` says (this
    analysis does not read it). Measured on a chaotic 256-unit tanh RNN ($g = 1.5$), BFGS from
    the same 256 visited states stalls at a median $q \approx 10^{-6}$ in float32 although $q$
    at the float64 solution evaluates to $2\cdot10^{-12}$ in float32: the float32 inverse-Hessian
    estimate loses accuracy over hundreds of rank-2 updates, and the fixed points would be
    reported as slow points. float32 halves the memory and time.

    **Arguments** (besides the trajectory's `steps`, `burn_in`, `input`, `seed`): `ics`,
    `scales`, `noise`, `at`, the tolerances `q_tol`, `q_max`, `unique_tol`, `marginal_tol`, the solver's
    `max_steps` and `solver` (`"auto"`: BFGS up to 1024 state components, L-BFGS above).

    **Returns:** the dataset of `dynlab.analyses.fixed_points.fixed_points` (dims `point`,
    `eigen`, `state`, `ic`) plus `state_label` (`state`); `beyond_visited` (`point`) and
    `n_points_beyond_visited` ([`mark_beyond_visited`][]); the top principal components of the
    visited states after burn-in (`pc` dim): `pc_components` (`pc`, `state`),
    `pc_variance_ratio` (`pc`), `point_pcs` (`point`, `pc`), and the trajectory in them,
    `trajectory_pcs` (`sample`, `pc`, at most 2000 evenly spaced states). The components are
    those of the whole run from the model's initial state, burn-in included, so that a
    trajectory that settles to a point shows its approach; attrs `protocol`,
    `input`, `drive`, `at`, `steps`, `burn_in`, `ics`, `noise`, `seed`, `state_dim`.
    """
    from dynlab.analyses.state_map import run_in, state_map

    check_fixed_points(model, steps=steps, burn_in=burn_in, ics=ics, at=at, noise=noise, scales=scales)
    if dtype not in ("float64", "float32"):
        raise ConfigError(f"dtype must be 'float64' or 'float32'; got {dtype!r}")
    smap = state_map(model)
    k_in = jax.random.split(jax.random.key(seed), 3)[0]
    xs, xi = input.inputs(model, steps, k_in)
    run = np.asarray(run_in(smap, (xs, xi)))
    visited = run[burn_in:]
    if not np.all(np.isfinite(run)):
        raise ConfigError("the trajectory diverged (non-finite states) under this protocol; "
                          "no visited states to start from (try a smaller drive)")
    if at == "zero":
        x_bar, xi_bar, where = np.zeros(model.input_size), 0.0, "zero input, zero drive"
    else:
        x_bar, xi_bar, where = input.mean_input(model, xs[burn_in:])

    x64 = dtype == "float64"
    with jax.enable_x64(x64):
        dt = jnp.float64 if x64 else jnp.float32
        step = jax.tree.map(lambda a: a.astype(dt) if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating) else a,
                            smap.step)
        u = (jnp.asarray(x_bar, dt), jnp.asarray(xi_bar, dt))
        ds = fixed_points_from_visited(step, jnp.asarray(visited, dt), u, ics=ics, scales=scales, noise=noise,
                                       seed=seed, q_tol=q_tol, q_max=q_max, unique_tol=unique_tol,
                                       marginal_tol=marginal_tol, max_steps=max_steps, solver=solver)

    ds = mark_beyond_visited(ds, visited)
    # the whole run, burn-in included: a trajectory that settles shows its approach to the point
    mean, comps, ratio = principal_components(run)
    samples = run[np.linspace(0, run.shape[0] - 1, min(PCA_ROWS, run.shape[0])).round().astype(int)]
    n_pc = comps.shape[0]
    ds = ds.assign_coords(
        state_label=("state", np.asarray(smap.labels, dtype=str), {"long_name": "state component (layer.name)"}),
        pc=("pc", np.arange(1, n_pc + 1), {"long_name": "principal component of the visited states"}),
    )
    ds["pc_components"] = (("pc", "state"), comps, {"long_name": "principal axes (unit vectors)"})
    ds["pc_variance_ratio"] = ("pc", ratio, {"units": "1", "long_name": "fraction of the trajectory's variance"})
    ds["point_pcs"] = (("point", "pc"), (ds.points.values - mean) @ comps.T, {"long_name": "point, projected"})
    ds["trajectory_pcs"] = (("sample", "pc"), (samples - mean) @ comps.T,
                            {"long_name": f"visited states from the model's initial state (≤ {PCA_ROWS}, evenly spaced), projected"})
    return stamp(ds, analysis="fixed-points", seed=seed, config={
        "protocol": input.name,
        "input": where,
        "drive": input.drive_attr,
        "at": at,
        "steps": int(steps),
        "burn_in": int(burn_in),
        "ics": int(ics),
        "noise": float(noise),
        "state_dim": smap.dim,
    })
