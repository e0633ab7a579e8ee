r"""Dynamical similarity analysis (Ostrow et al. 2023) on any trajectories: the numerical core.

Two systems are compared through linear operators fitted to their trajectories, up to an
orthogonal change of coordinates:

1. **Delay embedding** ([`delay_embed`][]). Trajectories $x_t \in \mathbb{R}^N$ (several trials
   of one system) become Hankel rows $H_t = (x_{t+(d-1)\tau}, \dots, x_{t+\tau}, x_t) \in
   \mathbb{R}^{Nd}$, most recent first (``n_delays`` $d$, ``interval`` $\tau$), the convention of
   the authors' package ``dsa-metric``.
2. **Reduced-rank DMD, HAVOK-style** ([`havok_dmd`][]). The stacked Hankel rows of all trials
   have the SVD $H = V \Sigma U^\top$; the rows of $V_r$ (the first $r$ columns of $V$, the
   "eigen-time-delay coordinates") are the system's state in $r$ whitened coordinates, and the
   operator is the least-squares (optionally ridge) one-step map within each trial,

   $$ A = \arg\min_A \sum_t \lVert v_{t+1} - A v_t\rVert^2, \qquad A^\top = (X^\top X + \lambda I)^{-1} X^\top Y, $$

   with $X$, $Y$ the rows $v_t$, $v_{t+1}$ of consecutive steps. An orthogonal change of the data's
   coordinates $x \mapsto Qx$ maps $H \mapsto H(I_d \otimes Q^\top)$, which leaves $V$ unchanged up
   to the signs of its columns; the signs are fixed (the largest-magnitude entry of each column
   positive, as ``sklearn``'s ``svd_flip``), so $A$ is the same for both.
3. **Procrustes over vector fields** ([`procrustes_vector_fields`][]). With $\hat A = A/\lVert A\rVert_F$,

   $$ \theta(A, B) = \min_{C \in O(r)} \angle(\hat A, C\hat B C^\top)
        = 2 \arcsin \tfrac12 \min_{C\in O(r)} \lVert \hat A - C \hat B C^\top \rVert_F
        = \arccos \max_{C \in O(r)} \langle \hat A, C \hat B C^\top\rangle_F, $$

   the "angular" DSA distance in radians ($0$ for conjugate operators, at most $\pi$); the
   arcsine form is used because it keeps its precision near 0 where arccos does not.

**The optimiser.** $f(C) = \langle \hat A, C\hat B C^\top\rangle$ is a non-convex quartic on
the orthogonal group. It is maximised by Riemannian gradient ascent on $O(r)$ with the Cayley
retraction (Wen & Yin 2013, "A feasible method for optimization with orthogonality
constraints"): with $F = -f$, its Euclidean gradient $G = -(\hat A C \hat B^\top + \hat A^\top C \hat B)$
and the skew matrix $W = G C^\top - C G^\top$, the curve

$$ C(s) = (I + \tfrac{s}{2} W)^{-1} (I - \tfrac{s}{2} W)\, C $$

stays on $O(r)$ exactly (up to rounding) and $\tfrac{d}{ds} F(C(s))|_{0} = -\tfrac12\lVert W\rVert_F^2$.
Steps $s$ start from alternating Barzilai–Borwein lengths and are halved until the Armijo
condition $F(C(s)) \le F(C) - 10^{-4}\, s\, \tfrac12\lVert W\rVert_F^2$ holds (monotone descent).
A run stops after ``iterations`` steps or when $\lVert W\rVert_F$ falls below ``tol``; the
returned $\lVert W\rVert_F$ is the convergence report (0 at a critical point).

**Starting points.** The first restart starts from the spectral point
([`spectral_start`][]): the exact optimum of the symmetric parts (Hoffman–Wielandt), with signs
chosen for the skew parts; it finds a hidden conjugation $B = Q^\top A Q$ at once. A Cayley curve
never leaves the connected component of its start ($\det C = \pm 1$), so the next restarts are
the identity and a reflection, then Haar-random orthogonal matrices of alternating determinant;
the best restart is kept. The true distance is symmetric, $\theta(A,B) = \theta(B,A)$ (substitute
$C \to C^\top$), so a distance matrix runs both orders, keeps the smaller and reports their
difference as a second check of the optimiser.

**Is the optimum reproducible?** The spread over restarts (largest minus smallest angle) measures
the local optima the other restarts stopped in, not the error of the kept one: on trained flip-flop
networks it is 0.02-0.09 rad, while 16 and 64 restarts find the same best value. What says the kept
optimum is reproducible is how many of the $S$ restarts of the kept order reach it (within
[`REPRODUCED`][] rad; the other order's fixed starts are their transposes, $f_{ji}(C^\top) =
f_{ij}(C)$, and retrace their paths): two or more are different starts that agree; one alone says
that a smaller angle may exist (more ``restarts``). Two that agree are no proof of the global
optimum: on trained flip-flop RNNs 3 of 8 optima of 4 restarts were 0.002-0.006 rad above those of
16 or 64 restarts (which agreed): up to half the standard deviation (0.013 rad) of the distances
from input draw to input draw. Two of 4 restarts agreed on the kept optimum in 41-45% of the
alignments of ``benchmarks/dsa_power.py``. The optimiser's remaining error is inside the null of
[`dynlab.analyses.dsa.null`][]: the between-run distances and the null's distances of a run from
itself are both this optimiser's values.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dynlab.errors import ConfigError, require_positive

__all__ = [
    "DMDFit",
    "DistanceMatrix",
    "ProcrustesResult",
    "REPRODUCED",
    "delay_embed",
    "dsa_distances",
    "havok_dmd",
    "procrustes_vector_fields",
    "spectral_start",
]


def delay_embed(x, n_delays: int, interval: int = 1) -> np.ndarray:
    r"""Hankel rows of trajectories ``x`` ``[T, N]`` or ``[B, T, N]``: ``[..., T - (d-1)τ, N d]``.

    Row $t$ is $(x_{t+(d-1)\tau}, x_{t+(d-2)\tau}, \dots, x_t)$ (most recent first).
    """
    require_positive("n_delays", n_delays)
    require_positive("delay_interval", interval)
    x = np.asarray(x)
    if x.ndim not in (2, 3):
        raise ConfigError(f"trajectories must be [T, N] or [trials, T, N], got shape {x.shape}")
    T = x.shape[-2]
    span = (n_delays - 1) * interval
    if T - span < 2:
        raise ConfigError(f"trajectories of {T} steps are too short for {n_delays} delays {interval} apart "
                          f"(the embedding spans {span + 1} steps and DMD needs two rows); use fewer delays or longer trials")
    blocks = [x[..., span - j * interval: T - j * interval, :] for j in range(n_delays)]
    return np.concatenate(blocks, axis=-1)


class DMDFit(NamedTuple):
    """The HAVOK-DMD operator of one system and how well it fits."""

    operator: np.ndarray
    """$A$ ``[r, r]``: $v_{t+1} \\approx A v_t$ in the eigen-time-delay coordinates."""
    singular_values: np.ndarray
    """All singular values of the stacked Hankel matrix, descending."""
    explained: float
    """$\\sum_{i \\le r} \\sigma_i^2 / \\sum_i \\sigma_i^2$: the Hankel variance the $r$ coordinates keep."""
    fit_error: float
    """$\\lVert Y - X A^\\top\\rVert_F / \\lVert Y\\rVert_F$: the relative one-step prediction error."""


def havok_dmd(x, *, n_delays: int, rank: int, interval: int = 1, ridge: float = 0.0) -> DMDFit:
    r"""Reduced-rank (HAVOK) DMD of trajectories ``x`` ``[T, N]`` or ``[trials, T, N]``, in float64.

    See the module docstring: delay embedding, SVD $H = V\Sigma U^\top$ of the trials' stacked
    Hankel rows, sign-fixed $V_r$, and the (ridge ``ridge`` $\lambda \ge 0$) least-squares
    one-step operator on consecutive rows of each trial. ``rank`` $r$ must not exceed the
    Hankel matrix's numerical rank (a rank-deficient system has nothing to fit beyond it).
    """
    require_positive("rank", rank)
    if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or not np.isfinite(ridge) or ridge < 0:
        raise ConfigError(f"ridge must be a finite number >= 0, got {ridge!r}")
    h = delay_embed(np.asarray(x, np.float64), n_delays, interval)
    if h.ndim == 2:
        h = h[None]
    trials, rows, cols = h.shape
    u, s, _ = np.linalg.svd(h.reshape(trials * rows, cols), full_matrices=False)
    numerical_rank = int(np.sum(s > s[0] * max(trials * rows, cols) * np.finfo(np.float64).eps)) if s[0] > 0 else 0
    if rank > numerical_rank:
        raise ConfigError(f"rank {rank} exceeds the rank {numerical_rank} of the delay-embedded trajectories "
                          f"({trials} trials x {rows} rows x {cols} columns); use rank <= {numerical_rank}")
    v = u[:, :rank]
    signs = np.sign(v[np.argmax(np.abs(v), axis=0), np.arange(rank)])
    v = (v * np.where(signs == 0, 1.0, signs)).reshape(trials, rows, rank)
    X, Y = v[:, :-1].reshape(-1, rank), v[:, 1:].reshape(-1, rank)
    if ridge > 0:
        a_t = np.linalg.solve(X.T @ X + ridge * np.eye(rank), X.T @ Y)
    else:
        a_t = np.linalg.lstsq(X, Y, rcond=None)[0]
    power = s**2
    return DMDFit(a_t.T, s, float(power[:rank].sum() / power.sum()),
                  float(np.linalg.norm(Y - X @ a_t) / np.linalg.norm(Y)))


class ProcrustesResult(NamedTuple):
    r"""The Procrustes alignment over vector fields of one or many pairs (leading axes: pairs)."""

    angle: np.ndarray
    r"""$\theta$ (radians) at the best restart: $2\arcsin(\lVert\hat A - C\hat B C^\top\rVert_F/2)$."""
    rotation: np.ndarray
    """$C$ ``[..., r, r]`` of the best restart."""
    gradient_norm: np.ndarray
    r"""$\lVert W\rVert_F$ at the best restart's last iterate (0 at a critical point)."""
    iterations: np.ndarray
    """Iterations the best restart used."""
    restart_spread: np.ndarray
    """Largest minus smallest angle over the restarts (0 when they all agree)."""
    orthogonality: np.ndarray
    r"""$\lVert C^\top C - I\rVert_F$ of the returned $C$ (rounding only)."""
    restart_angles: np.ndarray
    """The angle each restart reached, ``[..., S]`` (the best is ``angle``)."""


ARMIJO = 1e-4
MAX_BACKTRACK = 30


def _objective(a, b, c):
    """F(C) = -<A, C B C^T> and its Euclidean gradient."""
    cb = c @ b
    value = -jnp.sum(a * (cb @ c.T))
    grad = -(a @ c @ b.T + a.T @ cb)
    return value, grad


def _cayley(c, w, s):
    eye = jnp.eye(c.shape[0], dtype=c.dtype)
    return jnp.linalg.solve(eye + 0.5 * s * w, (eye - 0.5 * s * w) @ c)


def _ascend(a, b, c0, iterations: int, tol: float):
    """One restart of the Cayley–Armijo–BB iteration from ``c0``; returns (C, |W|, iterations)."""
    f0, g0 = _objective(a, b, c0)
    w0 = g0 @ c0.T - c0 @ g0.T

    def cond(state):
        k, _, _, w, *_, stalled = state
        return (k < iterations) & (jnp.linalg.norm(w) > tol) & ~stalled

    def body(state):
        k, c, f, w, s_prev, y_prev, step, _ = state
        wnorm2 = jnp.sum(w * w)
        # under vmap the body also runs for restarts that have stopped: they must not backtrack
        active = cond(state)

        def shrink(inner):
            s, _, _, n = inner
            return s * 0.5, *_trial(s * 0.5), n + 1

        def _trial(s):
            c_new = _cayley(c, w, s)
            return c_new, _objective(a, b, c_new)[0]

        def not_enough(inner):
            s, _, f_new, n = inner
            return active & (f_new > f - ARMIJO * s * 0.5 * wnorm2) & (n < MAX_BACKTRACK)

        s, c_new, f_new, n = jax.lax.while_loop(not_enough, shrink, (step, *_trial(step), 0))
        # no step of 2^-MAX_BACKTRACK times the trial length decreases F: only rounding is left
        stalled = n >= MAX_BACKTRACK
        accepted = (f_new <= f) & ~stalled
        c_new = jnp.where(accepted, c_new, c)
        f_new = jnp.where(accepted, f_new, f)
        g_new = _objective(a, b, c_new)[1]
        w_new = g_new @ c_new.T - c_new @ g_new.T
        # Barzilai-Borwein lengths on the Riemannian gradient W C, alternating BB1 and BB2
        s_k, y_k = c_new - c, w_new @ c_new - w @ c
        sy = jnp.abs(jnp.sum(s_k * y_k))
        bb = jnp.where(k % 2 == 0, jnp.sum(s_k * s_k) / jnp.maximum(sy, 1e-300), sy / jnp.maximum(jnp.sum(y_k * y_k), 1e-300))
        step_next = jnp.clip(jnp.where(sy > 0, bb, step * 2.0), 1e-10, 1e10)
        return k + 1, c_new, f_new, w_new, s_k, y_k, step_next, stalled

    zeros = jnp.zeros_like(c0)
    k, c, _, w, *_ = jax.lax.while_loop(cond, body, (0, c0, f0, w0, zeros, zeros, jnp.asarray(1.0, c0.dtype),
                                                     jnp.asarray(False)))
    return c, jnp.linalg.norm(w), k


@jax.jit
def _align(a, b, starts, iterations, tol):
    """All pairs ``a, b [P, r, r]`` (unit norm) from their ``starts [P, S, r, r]``: C, |W|, k, angle per pair and start."""

    def one(a1, b1, c0):
        c, g, k = _ascend(a1, b1, c0, iterations, tol)
        angle = 2.0 * jnp.arcsin(jnp.minimum(jnp.linalg.norm(a1 - c @ b1 @ c.T) / 2.0, 1.0))
        return c, g, k, angle

    per_start = jax.vmap(one, in_axes=(None, None, 0))
    return jax.vmap(per_start)(a, b, starts)


def spectral_start(a, b) -> np.ndarray:
    r"""The spectral starting point of the alignment of unit-norm ``a``, ``b`` ``[P, r, r]``.

    $f$ splits over the symmetric and skew parts, $f(C) = \langle A_s, C B_s C^\top\rangle +
    \langle A_k, C B_k C^\top\rangle$. The first term's maximum over $O(r)$ is known (Hoffman–Wielandt):
    $C = U_A S U_B^\top$ with $U$ the eigenvectors of $A_s$, $B_s$ by ascending eigenvalue and
    any signs $S = \operatorname{diag}(\pm 1)$. In those bases $f(S) = \sum_{ij} w_{ij} s_i s_j$ with
    $w_{ij} = \tilde a_{ij}\tilde b_{ij}$, $\tilde A = U_A^\top \hat A U_A$, $\tilde B = U_B^\top \hat B U_B$; the
    signs are set along a maximum spanning tree of $|w_{ij} + w_{ji}|$ ($s_j = s_i \operatorname{sign}(w_{ij} + w_{ji})$
    from the root), then refined by greedy single flips (each sweep flips every sign that raises
    $f$, until none does). For $B = Q^\top A Q$ with a simple spectrum of $A_s$ (and generic skew
    part) the tree's signs are exact, so the start is $Q$ itself.
    """
    _, ua = np.linalg.eigh((a + np.swapaxes(a, 1, 2)) / 2)
    _, ub = np.linalg.eigh((b + np.swapaxes(b, 1, 2)) / 2)
    at = np.swapaxes(ua, 1, 2) @ a @ ua  # f(s) = sum_ij at_ij s_i s_j bt_ij
    bt = np.swapaxes(ub, 1, 2) @ b @ ub
    w = at * bt
    w = w + np.swapaxes(w, 1, 2)
    w[:, np.arange(w.shape[1]), np.arange(w.shape[1])] = 0.0
    pairs, r = a.shape[:2]
    rows = np.arange(pairs)
    # Prim's maximum spanning tree on |w|, vectorised over pairs, fixing each new node's sign
    s = np.ones((pairs, r))
    in_tree = np.zeros((pairs, r), bool)
    in_tree[:, 0] = True
    key, parent = np.abs(w[:, 0]), np.zeros((pairs, r), int)
    for _ in range(r - 1):
        v = np.argmax(np.where(in_tree, -np.inf, key), axis=1)
        sign = np.sign(w[rows, parent[rows, v], v])
        s[rows, v] = s[rows, parent[rows, v]] * np.where(sign == 0, 1.0, sign)
        in_tree[rows, v] = True
        better = np.abs(w[rows, v]) > key
        key = np.where(better, np.abs(w[rows, v]), key)
        parent = np.where(better, v[:, None], parent)
    for _ in range(r):
        changed = False
        for k in range(r):
            gain = -2.0 * s[:, k] * np.einsum("pj,pj->p", w[:, k], s)  # f after flipping s_k, minus f
            flip = gain > 1e-15
            s[flip, k] = -s[flip, k]
            changed = changed or bool(flip.any())
        if not changed:
            break
    return ua * s[:, None, :] @ np.swapaxes(ub, 1, 2)


def _starts(a, b, restarts: int, key) -> np.ndarray:
    """Per pair ``[P, S, r, r]``: the spectral start ([`spectral_start`][]), the identity, a
    reflection, then Haar-random orthogonal matrices of alternating determinant."""
    pairs, r = a.shape[0], a.shape[1]
    fixed = [np.eye(r), np.diag([-1.0] + [1.0] * (r - 1))]
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel().tolist())
    while len(fixed) < restarts - 1:
        q, rr = np.linalg.qr(rng.standard_normal((r, r)))
        q = q * np.sign(np.diag(rr))
        want = 1.0 if len(fixed) % 2 == 0 else -1.0
        if np.sign(np.linalg.det(q)) != want:
            q[:, 0] = -q[:, 0]
        fixed.append(q)
    fixed = np.broadcast_to(np.stack(fixed[: restarts - 1]), (pairs, restarts - 1, r, r)) if restarts > 1 else None
    spectral = spectral_start(a, b)[:, None]
    return spectral if fixed is None else np.concatenate([spectral, fixed], axis=1)


def _check_options(iterations, restarts, tol):
    require_positive("iterations", iterations)
    require_positive("restarts", restarts)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not np.isfinite(tol) or tol < 0:
        raise ConfigError(f"tol must be a finite number >= 0, got {tol!r}")


def procrustes_vector_fields(a, b, *, iterations: int = 2000, restarts: int = 4, tol: float = 1e-6,
                             key=None, starts=None) -> ProcrustesResult:
    r"""$\min_{C\in O(r)} \angle(\hat A, C\hat B C^\top)$ for operators ``a``, ``b`` ``[r, r]`` or
    batches ``[P, r, r]`` of pairs, in float64 (see the module docstring for the optimiser).

    Arguments:
        iterations: the most Riemannian steps per restart.
        restarts: starting points (spectral, the identity, a reflection, then Haar-random ones).
        tol: stop a restart once $\lVert W\rVert_F$ (the Riemannian gradient's norm) is below this.
        key: PRNG key of the random starting points (default ``jax.random.key(0)``).
        starts: instead of those, these orthogonal starting points, ``[S, r, r]`` for every pair
            or ``[P, S, r, r]``.
    """
    _check_options(iterations, restarts, tol)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    single = a.ndim == 2
    a, b = (a[None], b[None]) if single else (a, b)
    if a.shape != b.shape or a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ConfigError(f"operators must be square and of one size, got {a.shape[1:]} and {b.shape[1:]}")
    na = np.linalg.norm(a, axis=(1, 2), keepdims=True)
    nb = np.linalg.norm(b, axis=(1, 2), keepdims=True)
    if np.any(na == 0) or np.any(nb == 0):
        raise ConfigError("an operator is zero: its direction, and so the angular distance, is undefined")
    a, b = a / na, b / nb
    pairs = a.shape[0]
    if starts is None:
        starts = _starts(a, b, restarts, jax.random.key(0) if key is None else key)
    else:
        starts = np.asarray(starts, np.float64)
        starts = np.broadcast_to(starts, (pairs, *starts.shape)) if starts.ndim == 3 else starts
        if starts.shape[0] != pairs or starts.shape[2:] != a.shape[1:]:
            raise ConfigError(f"starts must be [S, r, r] or [pairs, S, r, r] with r = {a.shape[1]}, got {starts.shape}")
        eye = np.eye(a.shape[1])
        if np.abs(np.swapaxes(starts, 2, 3) @ starts - eye).max() > 1e-8:
            raise ConfigError("starts must be orthogonal matrices")
    # pad the pairs (repeating the first) to a power of two up to 16, then to a multiple of 16:
    # batches of similar size share one compilation, for at most 16 extra pairs
    pad = ((1 << max(pairs - 1, 0).bit_length()) if pairs <= 16 else -(-pairs // 16) * 16) - pairs
    a_in, b_in, s_in = (np.concatenate([m, np.repeat(m[:1], pad, axis=0)]) for m in (a, b, starts))
    with jax.enable_x64(True):
        c, g, k, angle = (np.asarray(v)[:pairs] for v in _align(jnp.asarray(a_in), jnp.asarray(b_in), jnp.asarray(s_in),
                                                                jnp.asarray(int(iterations)), jnp.asarray(float(tol))))
    best = np.argmin(angle, axis=1)
    pick = lambda v: v[np.arange(v.shape[0]), best]  # noqa: E731
    rot = pick(c)
    eye = np.eye(a.shape[1])
    out = ProcrustesResult(pick(angle), rot, pick(g), pick(k), angle.max(axis=1) - angle.min(axis=1),
                           np.linalg.norm(np.swapaxes(rot, 1, 2) @ rot - eye, axis=(1, 2)), angle)
    return ProcrustesResult(*(v[0] for v in out)) if single else out


class DistanceMatrix(NamedTuple):
    """[`dsa_distances`][] of ``M`` operators: ``[M, M]`` arrays."""

    angle: np.ndarray
    """The DSA distance (radians): symmetric, zero diagonal; the smaller of the two orders."""
    asymmetry: np.ndarray
    """|θ(i, j) − θ(j, i)| of the two optimisations (0 for an exact optimiser)."""
    gradient_norm: np.ndarray
    """$\\lVert W\\rVert_F$ at the kept optimum."""
    iterations: np.ndarray
    restart_spread: np.ndarray
    reproduced: np.ndarray
    """How many of the kept order's restarts reached the kept optimum (within [`REPRODUCED`][] rad):
    at least 2 says two different starts agree on it; 1, that a smaller angle may exist."""


REPRODUCED = 1e-5
"""Two restarts reached one optimum when their angles agree to this many radians (angles at one
critical point agree to rounding, ~1e-12 at the stopping ``tol``; distinct local optima of these
landscapes differ by 1e-3 rad or more)."""


def dsa_distances(operators, *, iterations: int = 2000, restarts: int = 4, tol: float = 1e-6, key=None,
                  pairs=None) -> DistanceMatrix:
    r"""The DSA distance between every pair of ``operators`` ``[M, r, r]`` (or only the ``pairs``
    ``[P, 2]`` of indices given; the other entries are NaN): both orders of every pair $i \ne j$ in
    one batched, compiled run (module docstring); the diagonal is 0 by definition ($C = I$ attains it)."""
    ops = np.asarray(operators, np.float64)
    m = ops.shape[0]
    if m < 2:
        raise ConfigError(f"a distance matrix needs at least 2 systems, got {m}")
    if pairs is None:
        i, j = np.nonzero(~np.eye(m, dtype=bool))
    else:
        pairs = np.asarray(pairs, int).reshape(-1, 2)
        if pairs.size and (pairs.min() < 0 or pairs.max() >= m or np.any(pairs[:, 0] == pairs[:, 1])):
            raise ConfigError(f"pairs must index two different systems of the {m}")
        i, j = np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]])
    off = ~np.eye(m, dtype=bool)
    raw, grad, spread = (np.where(off, np.nan, 0.0) for _ in range(3))
    its = np.zeros((m, m), int)
    every = np.full((m, m, restarts), np.inf)
    if i.size:
        res = procrustes_vector_fields(ops[i], ops[j], iterations=iterations, restarts=restarts, tol=tol, key=key)
        raw[i, j], grad[i, j], its[i, j], spread[i, j] = res.angle, res.gradient_norm, res.iterations, res.restart_spread
        every[i, j] = res.restart_angles
    angle = np.fmin(raw, raw.T)
    first = raw <= raw.T  # which order is kept, for the diagnostics of the kept optimum
    pick = lambda v: np.where(first, v, v.T)  # noqa: E731
    # the kept order's restarts only: the other order's spectral, identity and reflection starts are
    # the transposes of these, which follow the same path (f_ji(C^T) = f_ij(C)), so they are no second opinion
    kept = np.where(first[..., None], every, np.swapaxes(every, 0, 1))
    reproduced = np.sum(kept <= angle[..., None] + REPRODUCED, axis=2)
    reproduced[~off] = restarts  # the diagonal: C = I, exact
    if pairs is not None:
        reproduced[~np.isfinite(angle)] = 0
    return DistanceMatrix(angle, np.abs(raw - raw.T), pick(grad), pick(its), pick(spread), reproduced)
