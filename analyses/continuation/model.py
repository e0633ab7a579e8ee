r"""Continuation of a dynlab model's fixed points along a path, registered as the analysis ``continuation``.

The map is the model's full state map ([`dynlab.analyses.state_map`][]) along one scalar $p$ of a
path ([`dynlab.analyses.continuation.paths`][]: an input, a model parameter, a homotopy between two
models), $h_{t+1} = F(h_t; p)$. Its fixed points at the path's start $p_0$, every one the
``fixed-points`` search finds from the states the model visits (stable and unstable,
[`dynlab.analyses.fixed_points.core.fixed_points_from_visited`][]), seed branches that the core
([`dynlab.analyses.continuation`][]: pseudo-arclength with a Newton corrector) follows through
$[p_{\min}, p_{\max}]$, locating folds, flips, Neimark–Sacker points and branch points, switching
branches at branch points and continuing period-k cycles from flips.

**Precision.** The whole analysis runs in float64 (``jax.enable_x64`` around it, the model's arrays
cast), whatever precision the model was trained in: the corrector's tolerance ($10^{-10}$) and the
location of special points ($|\Delta p| \le 10^{-8}$) are below float32 rounding.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.continuation.figure import continuation_figure, continuation_summary
from dynlab.analyses.continuation.paths import ContinuationPath, InputPath
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.protocol import OwnTask, Protocol
from dynlab.config import Count
from dynlab.errors import ConfigError
from dynlab.option_groups import OptionGroup
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register

__all__ = ["CANDIDATE_Q", "RELAX_STEPS", "SEED_ROUNDS", "SEED_STEPS", "STATES_MAX", "Settings", "check_continuation",
           "continuation_analysis", "diagram_dataset", "relaxed_states", "seed_points"]

STATES_MAX = 64
"""States are stored whole up to this many components; above, only their projections on the
visited states' top principal components (``pcs``): a 128-unit GRU's branches of 2000 points would
otherwise take tens of megabytes."""

N_PCS = 3
"""Principal components of the visited states that every state is projected on."""

SEED_STEPS = 200
r"""BFGS steps per start of the seeds' search ([`seed_points`][]; ``fixed-points``' own default is
1000). The end points with $q \le$ `CANDIDATE_Q` are then corrected by the continuation's Newton
corrector, which converges in a few iterations from where BFGS would need hundreds more; one that
does not converge (a slow point, a ghost) seeds nothing. Measured on a 128-unit GRU trained
on the 3-bit flip-flop (float64, 2 cores, compilation included): at u = 0, 3 rounds of 64 starts
found 13 fixed points near the visited states at 1000 steps (10.0 s) and at 200 (7.6 s); at u = -1,
7 and 6; at u = +1, 4 and 3. More starts find more than more steps: 8 rounds of 200 steps found
18, 7 and 4 (9.2, 4.9 and 4.9 s)."""

CANDIDATE_Q = 1e-4
r"""End points of the seeds' search with a speed $q$ up to this (``fixed-points``' `q_max`) are corrected."""

UNIQUE_TOL = 1e-3
"""Fixed points closer than this (Euclidean) are one seed: ``fixed-points``' default `unique_tol`."""

RELAX_STEPS = 400
r"""Steps of $F(\cdot; p)$ that the visited states are iterated at each end of the span before the seeds'
search there ([`relaxed_states`][]): where the network held at $p$ goes, its attractors at $p$
among them."""

SEED_ROUNDS = 3
"""Rounds of `ics` starts of the seeds' search at the start $p_0$ (one at each end of the span), at
most: a round after the first that finds no new point ends it. Not
``fixed-points``' Good–Turing rule, which reads end points cut short at `SEED_STEPS` as a continuum
of distinct points and stops after one round."""


@dataclasses.dataclass(frozen=True)
class Settings(ContinuationSettings, OptionGroup):
    """The core's [`ContinuationSettings`][dynlab.analyses.continuation.settings.ContinuationSettings]
    as an option group: TOML ``settings = {ds = 0.005, max_points = 500}``, command line
    ``--settings ds=0.005,max_points=500``; keys left out keep the defaults (the core's, defined
    once there). **Enforces** every setting a finite number $> 0$ (an integer for the counts),
    ``ds_min <= ds <= ds_max`` and ``max_period >= 1``."""

    def __post_init__(self):
        for f in dataclasses.fields(ContinuationSettings):
            value = getattr(self, f.name)
            integer = isinstance(f.default, int) and not isinstance(f.default, bool)
            ok = (isinstance(value, int) if integer else isinstance(value, (int, float))) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"settings.{f.name} must be {'an integer' if integer else 'a number'} > 0, got {value!r}")
            if not integer:
                object.__setattr__(self, f.name, float(value))
        if not self.ds_min <= self.ds <= self.ds_max:
            raise ConfigError(f"settings must have ds_min <= ds <= ds_max, got ds_min = {self.ds_min:g}, "
                              f"ds = {self.ds:g}, ds_max = {self.ds_max:g}")

    @classmethod
    def parse(cls, value: Any, *, default: OptionGroup | None = None) -> Settings:
        """Settings from a TOML table (keys left out: ``default``'s, else the core's); a value as itself."""
        if isinstance(value, Settings):
            return value
        if isinstance(value, ContinuationSettings):
            return cls(**dataclasses.asdict(value))
        fields = {f.name for f in dataclasses.fields(ContinuationSettings)}
        if not isinstance(value, dict) or not set(value) <= fields:
            unknown = sorted(set(value) - fields) if isinstance(value, dict) else []
            raise ConfigError(f"the continuation settings must be a table of {', '.join(sorted(fields))} "
                              f"(e.g. {{ds = 0.005, max_points = 500}}), got {value!r}"
                              + (f" ({', '.join(unknown)} is not one)" if unknown else ""))
        return dataclasses.replace(default if isinstance(default, Settings) else cls(), **value)

    def core(self) -> ContinuationSettings:
        """The core's own value of these settings."""
        return ContinuationSettings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(ContinuationSettings)})


def check_continuation(model, *, path: ContinuationPath = InputPath(channel=0), input: Protocol | None = None,
                       steps: int = 2000, burn_in: int = 200, ics: int = 64, **_) -> None:
    """The options of [`continuation_analysis`][] that ``model`` can take (the path's channel,
    direction, parameter or other model; the protocol's input width); one ConfigError line otherwise."""
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or not 0 <= burn_in < steps:
        raise ConfigError(f"burn_in must be an integer with 0 <= burn_in < steps = {steps}, got {burn_in!r}")
    if ics > steps - burn_in:
        raise ConfigError(f"ics = {ics} initial states cannot be drawn without repeats from the "
                          f"{steps - burn_in} visited states after burn-in; use ics <= {steps - burn_in} or more steps")
    if isinstance(path, ContinuationPath):
        path.check(model)
    if isinstance(input, Protocol):
        input.check(model)


def _float64(model):
    """``model`` with every floating-point array in float64 (call under ``jax.enable_x64``)."""
    return jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model)


@register(
    "analysis",
    "continuation",
    "branches of fixed points along an input, a parameter or a homotopy, with folds, flips, Neimark-Sacker and branch points",
    figure=continuation_figure,
    summary=continuation_summary,
    headline=(("n_folds", "folds"), ("n_seeds", "fixed points at the start")),
    outputs=(
        *Output.each("parameter diagram_y", "field", ("branch", "point")),
        *Output.each("n_unstable stable", "field", ("branch", "point")),
        *Output.each("multiplier_real multiplier_imag multiplier_abs", "field", ("branch", "point", "multiplier")),
        Output("states", "field", ("branch", "point", "state"), optional=True),
        Output("pcs", "field", ("branch", "point", "pc")),
        Output("readout", "field", ("branch", "point", "output")),
        *Output.each("period n_points", "field", ("branch",)),
        *Output.each("special_kind special_parameter special_q special_branch special_index special_y "
                     "special_multiplier_real special_multiplier_imag special_unstable_before special_unstable_after",
                     "field", ("special",)),
        Output("special_states", "field", ("special", "state"), optional=True),
        Output("special_pcs", "field", ("special", "pc")),
        Output("seed_states", "field", ("seed", "state"), optional=True),
        Output("pc_components", "field", ("pc", "state")),
        *Output.each("n_seeds n_seeds_beyond_visited n_branches n_folds n_flips n_neimark_sacker n_branch_points", "count"),
    ),
    check=check_continuation,
)
def continuation_analysis(
    model,
    *,
    path: ContinuationPath = InputPath(channel=0),
    input: Protocol = OwnTask(),
    ics: Count = 64,
    rounds: Count = SEED_ROUNDS,
    steps: Count = 2000,
    burn_in: int = 200,
    settings: Settings = Settings(),
    switch: bool = True,
    cycles: bool = True,
    ends: bool = True,
    seed: int = 0,
) -> xr.Dataset:
    r"""Branches of fixed points of a model's state map along a path, and their bifurcations.

    1. **Path.** $F(h; p)$ along `path` ([`dynlab.analyses.continuation.paths`][]): the input
       $x_0 + p\,e_c$ on one channel (default: channel 0, $p \in [-1, 1]$ from 0) or a direction,
       a model parameter set to (or scaling by) $p$, or the homotopy
       $(1 - p)\theta_a + p\,\theta_b$ from another run's model or from this run's initial one.
    2. **Seeds.** The states the model (at $p_0$) visits under the `input` protocol (by default
       its own task's inputs, as ``fixed-points``), `steps` steps after `burn_in`, start `rounds`
       rounds of `ics` short speed minimisations of $F(\cdot; p_0)$ at the path's input
       $x(p_0)$, each end corrected by Newton's method ([`seed_points`][]); every fixed point
       found, stable or not, seeds a branch, but for those beyond the
       visited states (``fixed-points``' `beyond_visited`: a GRU's saturated points, a hundred of
       them, which no trajectory of the task comes near), counted in `n_seeds_beyond_visited`.
       With `ends`, the same search (one round) at both ends of the span seeds branches too (a seed on a
       branch already followed starts nothing): a pair of branches born at a fold inside the span
       never reaches $p_0$, and a search at $p_0$ alone cannot see it. There the search starts from
       the visited states and from where they go when the map is held at the end
       ([`relaxed_states`][]): attractors born inside the span lie far from every state visited at
       $p_0$.
    3. **Branches** ([`dynlab.analyses.continuation.trace`][]): pseudo-arclength continuation of
       $G(h, p) = F(h; p) - h = 0$ both ways from every seed within the span, branches found twice
       merged; at every point the leading multipliers (eigenvalues of $\partial F/\partial h$) and
       the count of unstable ones ($|\mu| > 1$).
    4. **Special points**, located to $|\Delta p| \le$ `settings.locate_tol`: folds (a real
       multiplier through $+1$; two branches of fixed points meet and vanish), flips ($-1$),
       Neimark–Sacker points (a complex pair through $|\mu| = 1$) and branch points; with `switch`,
       the branches through each branch point are followed too, and with `cycles`, period-k
       cycles from every flip ($k \le$ `settings.max_period`).

    Args:
        path: what p moves: {channel = C} or {direction = [...]} (an input), {parameter = "NAME",
            index = [...], span = [LO, HI]} or with scale = true (a model parameter),
            {homotopy = "RUN_DIR"} (from that run's model to this one) or {homotopy = "init"} (from this
            run's initial model); each with optional span, start and base.
        input: the input protocol whose visited states start the search for the seeds, e.g.
            task=NAME, noise=0.1 or autonomous (default: the model's own task).
        ics: initial states of the seeds' fixed-point search per round.
        rounds: rounds of the seeds' search at the start (short BFGS runs, each end corrected by
            Newton's method); one round at each end of the span.
        steps: steps of the trajectory whose visited states start the seeds' search.
        burn_in: first steps of the trajectory left out of the visited states.
        settings: the continuation's settings, e.g. ds=0.005,ds_max=0.05,max_points=500 (steps in
            pseudo-arclength, corrector, location tolerance, multipliers kept, dense_max, max_period).
        switch: follow the other branches through every branch point (both halves of a pitchfork).
        cycles: continue period-k cycles (fixed points of F^k) from every flip point.
        ends: seed branches from the fixed points found at both ends of the span too (branches
            that never reach the start, such as a pair born at a fold inside the span).
        seed: seed of the protocol's input stream and of the search's initial states.

    **Returns:** a dataset with dims `branch`, `point` (padded with NaN past each branch's
    `n_points`), `multiplier`, `pc`, `output`, `special`, `seed` and, for states of at most
    `STATES_MAX` components, `state`: `parameter`, `diagram_y` (what the figure draws: the
    read-out on the path's channel or the only read-out, else the first principal component),
    `n_unstable` (-1 as padding), `stable`, `multiplier_real`/`_imag`/`_abs`, `states` (small N), `pcs`, `readout`
    (`branch`, `point`, ...); `period`, `n_points` (`branch`); the special points' `special_kind`,
    `special_parameter`, `special_q` (NaN but for cusps), `special_branch`, `special_index`,
    `special_y`, `special_multiplier_real`/`_imag`, `special_unstable_before`/`_after` (the
    unstable counts of the branch's points on either side), `special_states`, `special_pcs`;
    `seed_states` (small N); `pc_components`; counts `n_seeds`, `n_seeds_beyond_visited`, `n_branches`, `n_folds`,
    `n_flips`, `n_neimark_sacker`, `n_branch_points`; attrs `path`, `symbol`, `span`, `start`,
    `protocol`, `input`, `state_dim`, `diagram_y`.
    """
    from dynlab.analyses.continuation import trace
    from dynlab.analyses.fixed_points.model import principal_components
    from dynlab.analyses.state_map import run_in, state_map

    if isinstance(input, OwnTask) and isinstance(input.task, str):  # no task was named for the model: autonomous
        input = input.resolved(None)
    check_continuation(model, path=path, input=input, steps=steps, burn_in=burn_in, ics=ics)
    core = settings.core()
    with jax.enable_x64(True):
        family = path.family(_float64(model))
        p0 = family.start
        at_start = family.model_at(p0)
        smap = state_map(at_start)
        k_in = jax.random.split(jax.random.key(seed), 3)[0]
        xs, xi = input.inputs(at_start, steps, k_in)
        run = np.asarray(run_in(smap, (jnp.asarray(xs, jnp.float64), jnp.asarray(xi, jnp.float64))))
        if not np.all(np.isfinite(run)):
            raise ConfigError("the trajectory diverged (non-finite states) under this protocol; "
                              "no visited states to start the seeds' search from")
        visited = run[burn_in:]
        u0 = (family.input_at(p0), jnp.zeros((), jnp.float64))

        seeds, n_far = seed_points(family.F, smap.step, visited, u0, p0, core, ics=ics, rounds=rounds, seed=seed)
        if not len(seeds):
            raise ConfigError(f"no fixed point of the map at p = {p0:g} was found near the visited states "
                              f"({n_far} beyond them); "
                              "nothing to continue: try another start, input protocol or more ics")
        start_seeds, seed_ps = seeds, np.full(len(seeds), float(p0))
        if ends:
            for p_end in sorted({float(p) for p in family.span} - {float(p0)}):
                near = np.concatenate([visited, relaxed_states(family.F, p_end, visited, ics)])
                more = seed_points(family.F, state_map(family.model_at(p_end)).step, near,
                                   (family.input_at(p_end), u0[1]), p_end, core, ics=ics, rounds=1, seed=seed)[0]
                seeds, seed_ps = np.concatenate([seeds, more]), np.concatenate([seed_ps, np.full(len(more), p_end)])
        diagram = trace(family.F, jnp.asarray(seeds), seed_ps, family.span, core, switch=switch, cycles=cycles)
        mean, comps, _ = principal_components(visited, N_PCS)
        ds = diagram_dataset(diagram, start_seeds, family.readout, mean, comps, channel=getattr(path, "channel", None))
    ds["n_seeds_beyond_visited"] = ((), n_far, {"units": "1", "long_name": "fixed points at the "
                                    "start beyond the visited states (saturated), not continued"})
    ds.attrs.update(symbol=family.symbol)
    return stamp(ds, analysis="continuation", seed=seed, config={
        "path": path.name, "symbol": family.symbol, "span": list(family.span), "start": float(p0),
        "protocol": input.name, "input": "x(p0) = [" + ", ".join(f"{v:g}" for v in np.asarray(u0[0])) + "]",
        "state_dim": smap.dim, "steps": int(steps), "burn_in": int(burn_in), "ics": int(ics),
    })


def relaxed_states(F, p: float, visited: np.ndarray, starts: int, steps: int = RELAX_STEPS) -> np.ndarray:
    r"""Where the visited states go under the map held at $p$: `starts` of them, evenly spaced in
    time, iterated `steps` times by $h \mapsto F(h, p)$, every tenth state of each trajectory's
    second half (non-finite ones left out), as rows ``[n, N]``. A stable point of $F(\cdot; p)$ whose
    basin holds a start is among them to within its contraction, which no minimisation started from
    states visited elsewhere need reach."""
    picked = jnp.asarray(visited[np.linspace(0, len(visited) - 1, min(int(starts), len(visited))).round().astype(int)])
    states = np.asarray(_iterate(F, picked, jnp.asarray(p, picked.dtype), int(steps))).reshape(-1, picked.shape[1])
    return states[np.all(np.isfinite(states), axis=1)]


@eqx.filter_jit
def _iterate(F, h, p, steps: int):
    def one(h, _):
        h = jax.vmap(F, in_axes=(0, None))(h, p)
        return h, h

    return jax.lax.scan(one, h, None, length=steps)[1][steps // 2 :: 10]


def seed_points(F, step, visited: np.ndarray, x, p: float, settings: ContinuationSettings, *, ics: int,
                rounds: int = SEED_ROUNDS, seed: int = 0) -> tuple[np.ndarray, int]:
    r"""Fixed points of $F(\cdot, p)$ near the visited states, to seed branches, and how many lie beyond them.

    `rounds` rounds of `ics` starts from the visited states (``fixed-points``' initial states:
    visited and probe states, perturbed; round $r$ seeded by `seed` and $r$) minimise the speed
    $q$ of `step` at input `x` for `SEED_STEPS` BFGS steps (``fixed-points``' tolerances); each end
    point with $q \le$ `CANDIDATE_Q` is corrected by Newton's method at $p$
    ([`correct_at`][dynlab.analyses.continuation.branch.correct_at]). The converged ones,
    deduplicated within `UNIQUE_TOL`, are kept when near the visited states (``beyond_visited``)
    and counted otherwise (a GRU's saturated points). A round after the first that adds no new
    point ends the search.
    """
    from dynlab.analyses.continuation.branch import correct_at
    from dynlab.analyses.fixed_points.core import _rtol, minimise_speed, unique_points
    from dynlab.analyses.fixed_points.coverage import beyond_visited, initial_states

    visited = jnp.asarray(visited)
    fixed = np.zeros((0, visited.shape[1]))
    for r in range(int(rounds)):
        h0s, _ = initial_states(step, visited, x, int(ics), jax.random.fold_in(jax.random.key(seed), r))
        res = minimise_speed(step, jnp.asarray(h0s), x, rtol=_rtol(visited.dtype, None), atol=1e-14, max_steps=SEED_STEPS)
        ends, q = np.asarray(res.points), np.asarray(res.q)
        ends = ends[np.all(np.isfinite(ends), axis=1) & (q <= CANDIDATE_Q)]
        found = correct_at(F, ends[unique_points(ends, np.zeros(len(ends)), UNIQUE_TOL)[0]], p, settings)[:, :-1]
        before = len(fixed)
        fixed = np.concatenate([fixed, found])
        fixed = fixed[np.sort(unique_points(fixed, np.zeros(len(fixed)), UNIQUE_TOL)[0])] if len(fixed) else fixed
        if r > 0 and len(fixed) == before:  # a round that found nothing new: the rest would not either
            break
    far = beyond_visited(fixed, np.asarray(visited))
    return fixed[~far], int(np.sum(far))


def _padded(rows: list[np.ndarray], fill) -> np.ndarray:
    """Rows of different lengths `[n_b, ...]` as one array `[B, max n_b, ...]`, padded with ``fill``."""
    longest = max((len(r) for r in rows), default=0)
    shape = rows[0].shape[1:] if rows else ()
    out = np.full((len(rows), longest, *shape), fill, dtype=np.result_type(rows[0].dtype if rows else float, type(fill)))
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def diagram_dataset(diagram, seeds: np.ndarray, readout, mean: np.ndarray, comps: np.ndarray,
                    channel: int | None = None) -> xr.Dataset:
    """The dataset of a [`Diagram`][dynlab.analyses.continuation.results.Diagram] (see
    [`continuation_analysis`][] for its variables): ``readout(h[N], p) -> y[D]`` reads each
    branch's states out, ``mean``/``comps`` project them on the visited states' principal
    components, and the figure's ``diagram_y`` is the read-out of output ``channel`` when the
    path moves that input channel and the model has that output (of its only output when it has
    one), else the first component."""
    branches, points = diagram.branches, diagram.points
    N = int(seeds.shape[1])
    batched = jax.jit(jax.vmap(readout))
    reads = [np.asarray(batched(jnp.asarray(b.h), jnp.asarray(b.p))) if len(b.p) else np.zeros((0, 0)) for b in branches]
    D = next((r.shape[1] for r in reads if r.ndim == 2 and r.shape[0]), 1)
    by_pc = [(np.asarray(b.h) - mean) @ comps.T for b in branches]
    if channel is None and D == 1:  # one read-out: what the network reports, whatever the path
        channel = 0
    use_readout = channel is not None and channel < D
    y_name = f"read-out y{channel}" if use_readout else "PC1 of the visited states"
    ys = [r[:, channel] if use_readout else pc[:, 0] for r, pc in zip(reads, by_pc)]
    mult = _padded([np.asarray(b.multipliers, complex) for b in branches], complex(np.nan, np.nan))
    n_unstable = _padded([np.asarray(b.n_unstable, int) for b in branches], -1)
    n_pcs = comps.shape[0]
    data = {
        "parameter": (("branch", "point"), _padded([np.asarray(b.p, float) for b in branches], np.nan),
                      {"long_name": "the path's parameter p"}),
        "diagram_y": (("branch", "point"), _padded([np.asarray(y, float) for y in ys], np.nan), {"long_name": y_name}),
        "n_unstable": (("branch", "point"), n_unstable, {"long_name": "multipliers with |mu| > 1 (-1: padding)"}),
        "stable": (("branch", "point"), n_unstable == 0, {"long_name": "no multiplier with |mu| > 1"}),
        "multiplier_real": (("branch", "point", "multiplier"), mult.real, {"long_name": "leading multipliers, real part"}),
        "multiplier_imag": (("branch", "point", "multiplier"), mult.imag, {"long_name": "leading multipliers, imaginary part"}),
        "multiplier_abs": (("branch", "point", "multiplier"), np.abs(mult), {"long_name": "|mu|, descending"}),
        "pcs": (("branch", "point", "pc"), _padded([np.asarray(x, float) for x in by_pc], np.nan),
                {"long_name": "states projected on the visited states' principal components"}),
        "readout": (("branch", "point", "output"), _padded([np.asarray(r, float).reshape(len(b.p), D)
                                                            for r, b in zip(reads, branches)], np.nan),
                    {"long_name": "the model's read-out at the point"}),
        "period": ("branch", np.asarray([int(b.period) for b in branches], int),
                   {"long_name": "k: the branch holds fixed points of F^k"}),
        "n_points": ("branch", np.asarray([len(b.p) for b in branches], int), {"long_name": "points on the branch"}),
        "pc_components": (("pc", "state"), comps, {"long_name": "principal axes of the visited states"}),
    }
    if N <= STATES_MAX:
        data["states"] = (("branch", "point", "state"), _padded([np.asarray(b.h, float) for b in branches], np.nan),
                          {"long_name": "the fixed point (of F^k)"})
        data["seed_states"] = (("seed", "state"), np.asarray(seeds, float), {"long_name": "fixed points at the start"})

    def unstable_at(sp, i):
        b = branches[sp.branch]
        return int(b.n_unstable[i]) if 0 <= i < len(b.n_unstable) else -1

    kinds = np.asarray([sp.kind for sp in points], dtype=str) if points else np.zeros(0, dtype="<U14")
    sp_h = np.asarray([np.asarray(sp.h, float) for sp in points]).reshape(len(points), N)
    sp_pcs = (sp_h - mean) @ comps.T if len(points) else np.zeros((0, n_pcs))
    sp_y = []
    for sp, pc in zip(points, sp_pcs):
        if use_readout:
            sp_y.append(float(np.asarray(readout(jnp.asarray(sp.h), jnp.asarray(sp.p)))[channel]))
        else:
            sp_y.append(float(pc[0]))
    data.update({
        "special_kind": ("special", kinds, {"long_name": "fold, flip, neimark-sacker, branch-point or cusp"}),
        "special_parameter": ("special", np.asarray([sp.p for sp in points], float), {"long_name": "p at the point"}),
        "special_q": ("special", np.asarray([np.nan if sp.q is None else sp.q for sp in points], float),
                      {"long_name": "the second parameter (cusps), NaN otherwise"}),
        "special_branch": ("special", np.asarray([sp.branch for sp in points], int), {"long_name": "its branch"}),
        "special_index": ("special", np.asarray([sp.index for sp in points], int),
                          {"long_name": "it lies between the branch's points index and index + 1"}),
        "special_y": ("special", np.asarray(sp_y, float), {"long_name": y_name}),
        "special_multiplier_real": ("special", np.asarray([complex(sp.multiplier).real for sp in points], float),
                                    {"long_name": "the multiplier that crossed, real part"}),
        "special_multiplier_imag": ("special", np.asarray([complex(sp.multiplier).imag for sp in points], float),
                                    {"long_name": "the multiplier that crossed, imaginary part"}),
        "special_unstable_before": ("special", np.asarray([unstable_at(sp, sp.index) for sp in points], int),
                                    {"long_name": "unstable multipliers at the branch's point index"}),
        "special_unstable_after": ("special", np.asarray([unstable_at(sp, sp.index + 1) for sp in points], int),
                                   {"long_name": "unstable multipliers at the branch's point index + 1"}),
        "special_pcs": (("special", "pc"), sp_pcs, {"long_name": "the point projected on the principal components"}),
    })
    if N <= STATES_MAX:
        data["special_states"] = (("special", "state"), sp_h, {"long_name": "the state at the point"})
    counts = {f"n_{k.replace('-', '_')}s": int(np.sum(kinds == k)) for k in ("fold", "flip", "branch-point")}
    ds = xr.Dataset(data, coords={"branch": np.arange(len(branches)), "pc": np.arange(1, n_pcs + 1)})
    ds["n_seeds"] = ((), int(len(seeds)), {"units": "1"})
    ds["n_branches"] = ((), len(branches), {"units": "1"})
    ds["n_folds"] = ((), counts["n_folds"], {"units": "1"})
    ds["n_flips"] = ((), counts["n_flips"], {"units": "1"})
    ds["n_neimark_sacker"] = ((), int(np.sum(kinds == "neimark-sacker")), {"units": "1"})
    ds["n_branch_points"] = ((), counts["n_branch_points"], {"units": "1"})
    ds.attrs["diagram_y"] = y_name
    return ds
