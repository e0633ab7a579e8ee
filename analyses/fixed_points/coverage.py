r"""Where the minimisations start, and how many points they likely missed.

Speed minimisation finds only the points whose basins (of the minimiser, not of the dynamics)
hold an initial state. Sussillo & Barak start from visited states, which finds the points the
dynamics use, but a trajectory that rests at one point (an unstable origin that a network
starts at, a stable point it has settled to) offers one state only, and every minimisation
returns to it. Measured: a 2-unit tanh network $h \mapsto \tanh(1.5\,h)$ with 9 fixed points,
started at its unstable origin, gave 1 point from 64 visited states.

**Coverage** ([`initial_states`][]): the visited states, plus

1. *probe trajectories* of the map at the fixed input, started from visited states nudged by a
   small fraction (`PROBE_NUDGE`) of the state scale: away from an unstable point they follow
   its unstable manifold to where the dynamics go, and their states join the pool;
2. *perturbations* of pool states at several `scales`, in units of the per-component root mean
   square $\sigma_d$ of the pool's states ([`state_scale`][]: the trajectories' spread and
   distance from the origin; 1 when every state is 0).

**Completeness** ([`unseen_points`][]): each run that ends at a point is one discovery of it, so
the basin counts are a sample of the points' discovery frequencies. With $f_1$ points found by
exactly one run and $f_2$ by exactly two, Chao's (1984) lower-bound estimate of the number of
points no run found is $\hat f_0 = f_1^2 / (2 f_2)$, or $f_1 (f_1 - 1) / 2$ when $f_2 = 0$ (the
Good–Turing reading: many points seen once means many not seen at all). It says nothing of
points whose basins no initial state can reach, and a continuum of points (a line attractor:
every run ends at its own point) makes it large without any discrete point being missed.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray, PyTree

from dynlab.errors import ConfigError

__all__ = ["BEYOND_VISITED", "PERTURBATION_SCALES", "PROBES", "PROBE_BOUND", "PROBE_NUDGE", "PROBE_RECORDS",
           "PROBE_STEPS", "ROUNDS", "RUNS_PER_POINT", "beyond_visited", "initial_states", "state_scale", "unseen_points"]

PERTURBATION_SCALES = (0.0, 1.0, 2.0, 3.0)
r"""Default perturbation scales, in units of the pool's per-component scale ([`state_scale`][]): the
initial states are shared out over them in turn (scale 0: visited states as they are). On the
9-point network above, scales up to 2 reach every basin (the saddles' lie beyond the inflexion
of $\tanh(1.5 h) - h$ at $|h| \approx 0.44$, while the pool reaches $\pm 0.86$)."""

ROUNDS = 3
"""The most rounds of initial states
([`fixed_points_from_visited`][dynlab.analyses.fixed_points.core.fixed_points_from_visited]):
another round runs while some point was found by one run only, or while there are fewer than
`RUNS_PER_POINT` runs per point found."""

RUNS_PER_POINT = 10
r"""Runs per point found below which another round runs: a point whose basin holds a fraction
$p$ of the initial states is missed by $R$ runs with probability $(1 - p)^R$, so with $K$ points
of comparable basins ($p \approx 1/K$) and $R = 10 K$ runs, each is missed with probability
$e^{-10} \approx 5\cdot10^{-5}$, and one 3 times rarer with $e^{-10/3} \approx 0.04$."""

PROBES = 16
"""Probe trajectories (at most one per initial state)."""

PROBE_STEPS = 200
r"""Steps of each probe trajectory: an unstable direction with $|\mu| = 1.05$ grows a nudge of
$10^{-2}$ to order one in about 100 steps."""

PROBE_RECORDS = 20
"""States kept per probe trajectory, evenly spaced (memory: probes x 20 states, not x steps)."""

PROBE_NUDGE = 1e-2
"""The nudge that starts a probe, as a fraction of the state scale."""

PROBE_BOUND = 100.0
"""A probe trajectory with a component beyond this many times the largest visited one (or 1)
is dropped as diverging."""


def state_scale(pool: Float[ArrayLike, "t n"]) -> np.ndarray:
    r"""Per-component scale $\sigma_d$ of the states `pool` `[T, N]` (float64 `[N]`).

    The root mean square of component $d$ over the states, $\sqrt{\operatorname{sd}_d^2 +
    \operatorname{mean}_d^2}$: the spread of a moving trajectory, and the distance from the origin
    of one that rests at a point (so that perturbations reach the points between it and its
    mirror image, which odd maps such as $\tanh$ networks have); 1 for every component when all
    states are 0 (a network resting at its origin).
    """
    pool = np.asarray(pool, np.float64)
    sigma = np.sqrt(np.mean(pool**2, axis=0))
    return sigma if sigma.size and sigma.max() > 0 else np.ones(pool.shape[1])


BEYOND_VISITED = 10.0
r"""A point is *beyond the visited states* when one of its components lies farther outside the
visited states' range than this many times that component's scale $\sigma_d$
([`state_scale`][], 1 when the trajectory rests at the origin); the initial states reach at most
3 $\sigma_d$ beyond it ([`PERTURBATION_SCALES`][]). Minimisations started near the trajectory can
run far away, where gates saturate and the map is nearly the identity: a 64-unit GRU trained on
the 3-bit flip-flop gives 117 such "points" at components up to $\approx 50$ (its states stay in
$[-1, 1]^N$), next to its 8 attractors and saddles."""


def beyond_visited(points: Float[ArrayLike, "p n"], visited: Float[ArrayLike, "t n"],
                   factor: float = BEYOND_VISITED) -> np.ndarray:
    """`[P]` bool: which points lie beyond the visited states ([`BEYOND_VISITED`][])."""
    visited = np.asarray(visited, np.float64)
    sigma = state_scale(visited)
    low, high = visited.min(axis=0) - factor * sigma, visited.max(axis=0) + factor * sigma
    points = np.asarray(points, dtype=float).reshape(-1, visited.shape[1])
    return np.any((points < low) | (points > high), axis=1)


@eqx.filter_jit
def _probe(step, starts: Array, x: PyTree, steps: int) -> Array:
    """`[S, R, N]`: the states of each probe after every `ceil(steps / PROBE_RECORDS)` steps."""
    every = -(-steps // PROBE_RECORDS)

    def body(h, _):
        h = jax.lax.fori_loop(0, every, lambda _, h: step(h, x).astype(h.dtype), h)
        return h, h

    return jax.vmap(lambda h0: jax.lax.scan(body, h0, None, length=-(-steps // every))[1])(starts)


def initial_states(
    step: Callable,
    visited: Float[ArrayLike, "t n"],
    x: PyTree,
    n: int,
    key: PRNGKeyArray,
    *,
    scales: tuple[float, ...] = PERTURBATION_SCALES,
    probes: int = PROBES,
    probe_steps: int = PROBE_STEPS,
    noise: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""`n` initial states for the minimisation: visited states, probe trajectories, perturbations.

    1. `probes` states drawn from `visited` are nudged by `PROBE_NUDGE` $\sigma_d$ (of
       `visited`, [`state_scale`][]) and iterated `probe_steps` times under `step(h, x)`;
       `PROBE_RECORDS` evenly spaced states of each probe that stays within `PROBE_BOUND` times
       the largest visited component (or 1) join `visited` in the pool (a diverging probe would
       set absurd scales);
    2. $\sigma_d$ of the pool; initial state $i$ is a pool state (drawn without repeats while
       the pool lasts, visited and probe states with equal shares) plus $N(0, (s_i \sigma_d)^2)$
       noise, with $s_i$ = `scales[i % len(scales)]`, plus $N(0, \texttt{noise}^2)$ on every
       component (an absolute scale, 0 by default).

    The arithmetic is in the dtype of `visited`. **Enforces** `n >= 1`, a non-empty finite
    `visited` `[T, N]`, finite `scales` >= 0, `noise` >= 0, `probes` and `probe_steps` >= 0.

    **Returns:** `(h0s [n, N], scale [n])` as NumPy arrays: the states and each one's $s_i$.
    """
    visited = jnp.asarray(visited)
    if visited.ndim != 2 or visited.shape[0] == 0 or visited.shape[1] == 0:
        raise ConfigError(f"visited must be a non-empty array of states [T, N]; got shape {visited.shape}")
    if not bool(jnp.all(jnp.isfinite(visited))):
        raise ConfigError("visited states must be finite")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"the number of initial states must be a positive integer; got {n!r}")
    scales = tuple(float(s) for s in np.atleast_1d(np.asarray(scales, np.float64)))
    if not scales or not all(np.isfinite(s) and s >= 0 for s in scales):
        raise ConfigError(f"scales must be one or more finite numbers >= 0; got {scales!r}")
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not np.isfinite(noise) or noise < 0:
        raise ConfigError(f"noise must be a finite number >= 0, got {noise!r}")
    for name, value in (("probes", probes), ("probe_steps", probe_steps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ConfigError(f"{name} must be an integer >= 0; got {value!r}")
    k_probe, k_nudge, k_pick, k_noise = jax.random.split(key, 4)
    dtype = visited.dtype
    pool = np.asarray(visited)
    if probes and probe_steps:
        m = min(int(probes), int(n))
        starts = visited[jax.random.choice(k_probe, visited.shape[0], (m,), replace=visited.shape[0] < m)]
        nudge = PROBE_NUDGE * jnp.asarray(state_scale(pool), dtype)
        starts = starts + nudge * jax.random.normal(k_nudge, starts.shape, dtype)
        traj = np.asarray(_probe(step, starts, x, int(probe_steps)))
        bound = PROBE_BOUND * max(1.0, float(np.abs(pool).max()))
        size = np.nan_to_num(np.abs(traj), nan=np.inf).max(axis=(1, 2))
        stayed = np.all(np.isfinite(traj), axis=(1, 2)) & (size <= bound)
        pool = np.concatenate([pool, traj[stayed].reshape(-1, visited.shape[1])])
    sigma = state_scale(pool)
    weight = np.ones(pool.shape[0])
    if pool.shape[0] > visited.shape[0]:  # visited and probe states: half of the initial states each
        weight[: visited.shape[0]] = 1.0 / visited.shape[0]
        weight[visited.shape[0]:] = 1.0 / (pool.shape[0] - visited.shape[0])
    pick = np.asarray(jax.random.choice(k_pick, pool.shape[0], (n,), replace=pool.shape[0] < n,
                                        p=jnp.asarray(weight / weight.sum())))
    scale = np.asarray(scales)[np.arange(n) % len(scales)]
    gauss = np.asarray(jax.random.normal(k_noise, (n, pool.shape[1]), dtype), np.float64)
    spread = np.sqrt((scale[:, None] * sigma[None, :]) ** 2 + float(noise) ** 2)  # the two noises' sum
    h0s = pool[pick] + spread * gauss
    return h0s.astype(dtype), scale


def unseen_points(counts: ArrayLike) -> tuple[int, int, float]:
    r"""Chao's estimate of the number of points that no run found, from the discovery counts.

    `counts`: how many runs ended at each distinct point (the `basin_count` of a fixed-points
    dataset). Returns $(f_1, f_2, \hat f_0)$: the points found exactly once and exactly twice,
    and $\hat f_0 = f_1^2/(2 f_2)$, or $f_1(f_1 - 1)/2$ when $f_2 = 0$.
    """
    counts = np.asarray(counts)
    f1, f2 = int(np.sum(counts == 1)), int(np.sum(counts == 2))
    return f1, f2, (f1 * f1 / (2 * f2) if f2 else f1 * (f1 - 1) / 2)
