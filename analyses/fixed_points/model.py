r"""Fixed and slow points of a dynlab model's full state map, registered as the analysis ``fixed-points``.

The map is the one every dynamical analysis sees ([`dynlab.analyses.state_map`][]): all of
every layer's state as one vector $h$, $h_{t+1} = F(h_t, x_t, \xi_t)$. Initial states for the
minimisation are states the model visits under the chosen input protocol
([`dynlab.analyses.protocol`][]): by default the model's own task's inputs
([`OwnTask`][dynlab.analyses.protocol.OwnTask]; autonomous for a model without a task), as
Sussillo & Barak (2013) prescribe, or zero input, a constant drive $\xi$, a constant input, a
named task's inputs, input noise. The points are those of $F$ at one fixed input: the protocol's
(zero for the default, the constant drive or input, a named task's mean input $\bar x$ with its
drive, the noise's mean, zero) or, with ``at="zero"``, zero input and zero drive. A second,
independent sampling ([`dynlab.analyses.fixed_points.confirmation`][]) confirms the count of
stable points, or the output says it was not confirmed.
"""

from __future__ import annotations

import warnings
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.fixed_points.confirmation import confirmation, confirming_starts
from dynlab.analyses.fixed_points.core import fixed_points, fixed_points_from_visited
from dynlab.analyses.fixed_points.coverage import BEYOND_VISITED, PERTURBATION_SCALES, beyond_visited
from dynlab.analyses.fixed_points.figure import fixed_points_figure, fixed_points_summary
from dynlab.analyses.fixed_points.reading import fixed_points_reading
from dynlab.analyses.protocol import OwnTask, Protocol
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


def mark_beyond_visited(ds: xr.Dataset, visited: np.ndarray, factor: float = BEYOND_VISITED) -> xr.Dataset:
    """``ds`` with ``beyond_visited`` (``point``) and the attr-like scalar ``n_points_beyond_visited``,
    and its reading redone ([`BEYOND_VISITED`][dynlab.analyses.fixed_points.coverage.BEYOND_VISITED])."""
    beyond = beyond_visited(ds.points.values, visited, factor)
    ds["beyond_visited"] = ("point", beyond, {"long_name": f"a component more than {factor:g} state scales "
                                                           "outside the visited states' range"})
    ds["n_points_beyond_visited"] = ((), int(beyond.sum()), {"units": "1"})
    ds.attrs["reading"] = fixed_points_reading(ds, "q_max")
    return ds


def check_fixed_points(model, *, steps: int, burn_in: int, ics: int, at: str = "protocol",
                       noise: float = 0.0, scales=PERTURBATION_SCALES, input: Protocol | None = None, **_) -> None:
    """The options of [`fixed_points_analysis`][] that ``model`` can take (the input protocol's
    width among them); one ConfigError line otherwise."""
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
    if isinstance(input, Protocol):
        input.check(model)



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
    input: Protocol = OwnTask(),
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
    confirm: bool = True,
    seed: int = 0,
) -> xr.Dataset:
    r"""Fixed and slow points of a model's full state map (Sussillo & Barak 2013), with their stability.

    1. **Trajectory.** The state map runs `steps` steps from the model's initial state under the
       `input` protocol ([`dynlab.analyses.protocol`][]): by default the model's own task's inputs
       ([`OwnTask`][dynlab.analyses.protocol.OwnTask]: a trained run's, an imported run's with
       `--task`; autonomous for a model without a task), or zero input, a constant drive $\xi$ on
       every neuron, a constant input, a named task's inputs, input noise (streams seeded by `seed`).
    2. **Initial states** (`dynlab.analyses.fixed_points.coverage`). The states visited after
       `burn_in`, joined by short probe trajectories of the map at the input of step 3 started
       from nudged visited states (they leave an unstable point the trajectory rests at);
       `ics` of these, shared out in turn over the perturbation `scales` (Gaussian noise of
       that many times the root mean square of the states, per component; 0: as visited), plus
       Gaussian noise of absolute standard deviation `noise` (on the initial states, not the input).
    3. **Input.** The points are those of $h \mapsto F(h, \bar x, \bar\xi)$: with
       `at="protocol"`, the protocol's input: zero for the default (the task's inputs only carry
       the states where the network computes), the constant drive or input, a named task's
       mean input over the run after burn-in, the noise's mean (0); with `at="zero"`, zero input
       and zero drive.
    4. **Minimisation** of $q(h) = \frac12\lVert F(h) - h\rVert^2$ from every initial state,
       batched (`dynlab.analyses.fixed_points.fixed_points`): minima with $q \le$ `q_max` are
       kept and deduplicated within the Euclidean distance `unique_tol`; a point is *fixed* if
       $q \le$ `q_tol`, else *slow*; eigenvalues of the Jacobian there, unstable directions
       ($|\mu| > 1 +$ `marginal_tol`) and the class (stable / marginal / saddle / unstable).
    5. **What it can see.** How many points were likely missed (Chao1 from the points found by
       one run and by two, with a warning when it is 1 or more); whether every start came from
       one input condition (a protocol that is not a stream) and whether the starts taken as
       visited all ended at one point (one basin): Chao1 cannot see the basins no start reached,
       and the summary says how to sample more; and, when every minimum was discarded, the
       smallest $q$ reached, how many runs stopped there and the `q_max` that keeps it.
    6. **Confirmation** (`confirm`, [`dynlab.analyses.fixed_points.confirmation`][]). A second
       search, from perturbations along the slowest directions of the points found near the
       visited states, confirms the count of stable points there, or the output says it was not
       confirmed and what the second search found that the first did not.

    **Precision.** `dtype="float64"` (default) minimises in float64, whatever `--x64` says (this
    analysis does not read it). Measured on a chaotic 256-unit tanh RNN ($g = 1.5$), BFGS from
    the same 256 visited states stalls at a median $q \approx 10^{-6}$ in float32 although $q$
    at the float64 solution evaluates to $2\cdot10^{-12}$ in float32: the float32 inverse-Hessian
    estimate loses accuracy over hundreds of rank-2 updates, and the fixed points would be
    reported as slow points. float32 halves the memory and time.

    Args:
        ics: initial states of the minimisation per round (up to 3 rounds while points found
            by one run remain), drawn from the visited states and probe trajectories.
        steps: steps of the trajectory whose visited states start the minimisations.
        burn_in: first steps of the trajectory left out of the visited states.
        input: the input protocol that drives the trajectory, e.g. task=NAME, noise=0.1, drive=0.5,
            constant=[1,0,0] or autonomous.
        at: the input the points are those of: 'protocol' (zero for the default, the drive or
            constant, a named task's mean input, the noise's mean) or 'zero' (zero input and drive).
        noise: standard deviation of Gaussian noise added to every initial state (absolute).
        scales: perturbations of the initial states, in state scales (root mean square per
            component), shared out in turn; 0 keeps a visited state as it is. Wider scales reach farther basins.
        q_tol: a minimum with speed q = |F(h) - h|^2 / 2 at most this is a fixed point, above it a slow point.
        q_max: minima with a larger q are discarded; raise it to keep slower points (ghosts, slow manifolds).
        unique_tol: minima closer than this (Euclidean) are one point.
        marginal_tol: the band |mu| = 1 +- this of marginal Jacobian eigenvalues (unstable above, stable below).
        max_steps: the most solver steps per minimisation.
        solver: 'bfgs', 'lbfgs' or 'auto' (BFGS up to 1024 state components, L-BFGS above).
        dtype: the precision of the minimisation ('float64' reaches rounding where float32 stalls).
        confirm: run a second, independent sampling (perturbations along the slowest directions
            of the points found) that confirms the count of stable points, or says it was not confirmed.
        seed: seed of the task's or noise's input stream and of the initial states.

    **Returns:** the dataset of `dynlab.analyses.fixed_points.fixed_points` (dims `point`,
    `eigen`, `state`, `ic`) plus `state_label` (`state`); `beyond_visited` (`point`) and
    `n_points_beyond_visited` ([`mark_beyond_visited`][]); the top principal components of the
    visited states after burn-in (`pc` dim): `pc_components` (`pc`, `state`),
    `pc_variance_ratio` (`pc`), `point_pcs` (`point`, `pc`), and the trajectory in them,
    `trajectory_pcs` (`sample`, `pc`, at most 2000 evenly spaced states). The components are
    those of the whole run from the model's initial state, burn-in included, so that a
    trajectory that settles to a point shows its approach; attrs `protocol`,
    `input`, `drive`, `at`, `steps`, `burn_in`, `ics`, `noise`, `seed`, `state_dim`; what the
    sampling can see: `one_input_condition` (1: the protocol is not a stream), `start_points`
    (the distinct points the unperturbed starts ended at) and `start_stable_points` (the stable
    ones among them); the confirmation's attrs
    ([`confirmation`][dynlab.analyses.fixed_points.confirmation.confirmation]: `confirmed` 1 or 0,
    `confirm_n_stable`, `confirm_n_new_stable`, `confirm_n_missed_stable`, `confirm_n_ics`; with
    `confirm=False`, `confirmed` is -1: not run).
    """
    from dynlab.analyses.state_map import run_in, state_map

    if isinstance(input, OwnTask) and isinstance(input.task, str):  # no task was named for the model: autonomous
        input = input.resolved(None)
    check_fixed_points(model, steps=steps, burn_in=burn_in, ics=ics, at=at, noise=noise, scales=scales, input=input)
    if dtype not in ("float64", "float32"):
        raise ConfigError(f"dtype must be 'float64' or 'float32'; got {dtype!r}")
    smap = state_map(model)
    k_in, _, k_confirm = jax.random.split(jax.random.key(seed), 3)
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

    x64 = dtype == "float64" or jax.config.jax_enable_x64  # a model loaded under x64: work in float64
    with jax.enable_x64(x64):
        dt = jnp.float64 if x64 else jnp.float32
        step = jax.tree.map(lambda a: a.astype(dt) if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating) else a,
                            smap.step)
        u = (jnp.asarray(x_bar, dt), jnp.asarray(xi_bar, dt))
        search = dict(q_tol=q_tol, q_max=q_max, unique_tol=unique_tol, marginal_tol=marginal_tol,
                      max_steps=max_steps, solver=solver)
        ds = fixed_points_from_visited(step, jnp.asarray(visited, dt), u, ics=ics, scales=scales, noise=noise,
                                       seed=seed, **search)
        ds = mark_beyond_visited(ds, visited)
        ds.attrs.update(sampling(ds, input))
        near = ~ds.beyond_visited.values
        edges = near & np.isin(ds.stability.values.astype(str), ("stable", "saddle"))  # where basins meet
        around = ds.points.values[edges if edges.any() else near]
        starts = confirming_starts(step, jnp.asarray(around, dt), u, visited, k_confirm) \
            if confirm and len(around) else np.zeros((0, smap.dim))
        if not confirm:
            ds.attrs.update(confirmed=-1)
        elif len(starts):  # the second sampling: its own starts, the same search
            with warnings.catch_warnings():  # its Chao1 is not the result's
                warnings.simplefilter("ignore")
                second = fixed_points(step, jnp.asarray(starts, dt), u, **search)
            ds.attrs.update(confirmation(ds, second, visited, unique_tol))
        else:
            ds.attrs.update(confirmed=0, confirm_n_ics=0, confirm_n_stable=0, confirm_n_new_stable=0,
                            confirm_n_missed_stable=0)
        ds.attrs["reading"] = fixed_points_reading(ds, "q_max")
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


def sampling(ds: xr.Dataset, input: Protocol) -> dict:
    """What the starts of a search could see: ``one_input_condition`` (1 when ``input`` is not a
    stream: one trajectory under one input), ``start_points`` and ``start_stable_points`` (the
    distinct points, and stable points, that the unperturbed starts, scale 0, ended at)."""
    scale = np.asarray(ds["ic_scale"].values)
    reached = np.unique(ds["ic_point"].values[(scale == 0) & (ds["ic_point"].values >= 0)])
    stable = np.asarray(ds["stability"].values, dtype=str)[reached] == "stable" if len(reached) else np.zeros(0, bool)
    return {"one_input_condition": int(not input.stream), "start_points": len(reached),
            "start_stable_points": int(stable.sum())}
