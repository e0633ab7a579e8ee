r"""A second, independent sampling that confirms a fixed-point count, or says it was not confirmed.

Chao1 ([`unseen_points`][dynlab.analyses.fixed_points.coverage.unseen_points]) reads the
discovery counts of the points the initial states reached; it cannot see a basin that no initial
state lies in. A trajectory that stays in one basin (the autonomous run of a trained flip-flop
network: "1 stable point, about 0 unseen") therefore reports itself complete. So the count is
checked by a second sampling whose starts do not come from the trajectory:

**Perturbations along the slowest directions** ([`slow_directions`][]). At every stable point and
saddle found near the visited states, the eigenvectors of the Jacobian $J = \partial F/\partial h$
of largest $|\mu|$ (the slowest decaying ones at a stable point, the unstable ones at a saddle)
point to where the dynamics leave the point: across a saddle into the neighbouring basin. The
starts ([`confirming_starts`][]) are where the map carries

$$h^* \pm a\,\lVert\sigma\rVert\, v_i, \qquad a \in \texttt{AMPLITUDES},\ i = 1..\texttt{SLOW\_DIRECTIONS},$$

in `FLOW_STEPS` steps ($\lVert\sigma\rVert$: the root-mean-square size of the visited states,
[`state_scale`][dynlab.analyses.fixed_points.coverage.state_scale]): a state perturbed off a saddle
along its unstable direction flows to one of the two attractors the saddle separates, a small
perturbation of an attractor back to it. The minimisations from these starts are the first
search's ([`fixed_points`][dynlab.analyses.fixed_points.core.fixed_points], its tolerances), at
most `MAX_STARTS` of them.

**The verdict** ([`confirmation`][]): the count of stable points near the visited states is
*confirmed* when the second sampling finds the same stable points (each within `unique_tol` of one
of the first's) and no other; else the output says it was not confirmed, with what the second
sampling found that the first did not.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import ArrayLike, Float, PyTree

from dynlab.analyses.fixed_points.coverage import beyond_visited, state_scale

__all__ = ["AMPLITUDES", "FLOW_STEPS", "MAX_STARTS", "SLOW_DIRECTIONS", "confirmation", "confirming_starts",
           "slow_directions"]

SLOW_DIRECTIONS = 3
"""Directions per point: the eigenvectors of the largest $|\\mu|$ (a 3-bit flip-flop's saddles
each have one unstable direction, its attractors' slowest modes point to their neighbours)."""

AMPLITUDES = (0.1, 0.5, 1.0)
r"""Perturbation sizes along each direction, in units of $\lVert\sigma\rVert$, the root-mean-square
size of the visited states: from the near neighbourhood (which flows back to an attractor, and off
a saddle to its two neighbours) to the distance between two corners of the visited region."""

FLOW_STEPS = 200
r"""Steps of the map from each perturbed state to the start of its minimisation: a direction with
$|\mu| = 1.05$ grows a perturbation of $10^{-2}$ to order one in about 100 steps."""

MAX_STARTS = 512
"""The most starts of the second sampling (a random subset beyond it): 14 points near a 3-bit
flip-flop network's states give 14 x 3 x 2 x 3 = 252."""


def slow_directions(step, points: Float[ArrayLike, "p n"], x: PyTree, k: int = SLOW_DIRECTIONS) -> np.ndarray:
    r"""`[P, k', N]` unit vectors: at every point, the real parts of the Jacobian's eigenvectors of
    the `k` largest $|\mu|$ (the imaginary part for the second of a complex pair), $k' = \min(k, N)$.
    Jacobians by `jax.jacfwd` in the points' dtype, eigenvectors by `numpy.linalg.eig`."""
    points = jnp.asarray(points)
    k = min(int(k), points.shape[1])
    if points.shape[0] == 0:
        return np.zeros((0, k, points.shape[1]))
    jac = np.asarray(jax.vmap(lambda h: jax.jacfwd(step)(h, x))(points), np.float64)
    mu, vectors = np.linalg.eig(jac)
    out = np.zeros((points.shape[0], k, points.shape[1]))
    for p in range(points.shape[0]):
        order = np.lexsort((-mu[p].imag, -np.abs(mu[p])))[:k]
        for j, i in enumerate(order):
            v = vectors[p][:, i].imag if mu[p][i].imag < 0 else vectors[p][:, i].real
            norm = np.linalg.norm(v)
            out[p, j] = v / norm if norm > 0 else v
    return out


@eqx.filter_jit
def _flow(step, starts, x, steps: int):
    return jax.vmap(lambda h: jax.lax.fori_loop(0, steps, lambda _, h: step(h, x).astype(h.dtype), h))(starts)


def confirming_starts(step, points: Float[ArrayLike, "p n"], x: PyTree, visited: Float[ArrayLike, "t n"], key, *,
                      k: int = SLOW_DIRECTIONS, amplitudes: tuple[float, ...] = AMPLITUDES,
                      flow_steps: int = FLOW_STEPS, max_starts: int = MAX_STARTS) -> np.ndarray:
    r"""`[S, N]` starts of the second sampling, in the points' dtype: where `flow_steps` steps of
    `step(h, x)` carry $h^* \pm a\lVert\sigma\rVert v_i$, for every point $h^*$, each of its
    [`slow_directions`][] $v_i$ and each amplitude $a$ (module docstring); the finite ones, at most
    `max_starts` (a random subset drawn with `key` beyond it)."""
    points = jnp.asarray(points)
    size = float(np.linalg.norm(state_scale(visited)))
    dirs = slow_directions(step, points, x, k)
    steps = np.concatenate([np.asarray(amplitudes, np.float64), -np.asarray(amplitudes, np.float64)]) * size
    starts = np.asarray(points)[:, None, None, :] + steps[None, None, :, None] * dirs[:, :, None, :]
    starts = starts.reshape(-1, points.shape[1])
    if len(starts) > max_starts:
        starts = starts[np.asarray(jax.random.choice(key, len(starts), (max_starts,), replace=False))]
    flowed = np.asarray(_flow(step, jnp.asarray(starts, points.dtype), x, int(flow_steps)))
    return flowed[np.all(np.isfinite(flowed), axis=1)]


def confirmation(first: xr.Dataset, second: xr.Dataset, visited: Float[ArrayLike, "t n"], unique_tol: float) -> dict:
    r"""Does `second` (the search from [`confirming_starts`][]) find the stable points near the
    visited states that `first` found, and no other? Both are datasets of
    [`fixed_points`][dynlab.analyses.fixed_points.core.fixed_points]; "near" is
    [`beyond_visited`][dynlab.analyses.fixed_points.coverage.beyond_visited]'s, "the same point"
    within `unique_tol`.

    **Returns:** attrs for the first's dataset: `confirm_n_ics` (the second sampling's starts),
    `confirm_n_stable` (stable points near the visited states it found), `confirm_n_new_stable`
    (those not among the first's), `confirm_n_missed_stable` (the first's that it did not find)
    and `confirmed` (1 when both are 0, else 0).
    """
    visited = np.asarray(visited, np.float64)

    def stable_near(ds):
        if ds.sizes.get("point", 0) == 0:
            return np.zeros((0, visited.shape[1]))
        pts = np.asarray(ds.points.values, np.float64)
        keep = (np.asarray(ds.stability.values, dtype=str) == "stable") & ~beyond_visited(pts, visited)
        return pts[keep]

    a, b = stable_near(first), stable_near(second)

    def unmatched(these, those):
        if not len(those):
            return len(these)
        return int(sum(np.linalg.norm(those - p, axis=1).min() > unique_tol for p in these))

    new, missed = unmatched(b, a), unmatched(a, b)
    return {"confirm_n_ics": int(second.sizes.get("ic", 0)), "confirm_n_stable": len(b),
            "confirm_n_new_stable": new, "confirm_n_missed_stable": missed, "confirmed": int(new == 0 and missed == 0)}
