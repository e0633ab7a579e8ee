r"""Covariant Lyapunov vectors of any map by Ginelli's method, in bounded memory.

For $h_{t+1} = F(h_t, x_t)$ with Jacobians $J_t = \partial F/\partial h\,(h_t, x_t)$, the
covariant Lyapunov vectors (CLVs) $v_i(t)$ are the directions carried into each other by the
tangent dynamics, $J_t v_i(t) \parallel v_i(t+1)$, whose growth rates average to the Lyapunov
exponents: with the local growth rate $\gamma_i(t) = \ln \lVert J_t v_i(t)\rVert$ of the unit
vector $v_i(t)$,

$$\lambda_i = \lim_{T\to\infty} \frac1T \sum_{t<T} \gamma_i(t).$$

Unlike the Gram–Schmidt vectors of the QR method (the columns of $Q_t$, orthonormal by
construction), CLVs are not orthogonal: they are intrinsic to the dynamics (independent of the
norm, covariant with it), and the angles between them measure hyperbolicity — tangencies
between the unstable and stable directions show up as angles near zero.

**Ginelli et al. (2007)** (Phys. Rev. Lett. 99, 130601):

1. *forward*: push an orthonormal frame with the QR method,
   $J_t Q_t = Q_{t+1} R_{t+1}$ with $R_{t+1}$ upper triangular, positive diagonal; after a
   transient, $Q_t$ holds the Gram–Schmidt (backward Lyapunov) vectors;
2. *backward*: the CLVs are $V_t = Q_t C_t$ with $C_t$ upper triangular, columns of unit norm.
   Since $J_t V_t = Q_{t+1} R_{t+1} C_t$ must be $V_{t+1} = Q_{t+1} C_{t+1}$ up to the column
   scales, $C_t$ follows from $C_{t+1}$ backward in time,

   $$B_t = R_{t+1}^{-1} C_{t+1}, \qquad n_i = \lVert B_t e_i \rVert, \qquad
     C_t = B_t \operatorname{diag}(n)^{-1}, \qquad \gamma_i(t) = -\ln n_i,$$

   a triangular solve per step. From any upper-triangular start (here the identity) $C_t$
   converges to the CLVs' coefficients backward in time, at the rate of the gaps between
   exponents, so the iteration starts `transient_backward` steps after the stretch of interest.

**Memory.** $Q_t$ for every step would take $T N k$ numbers. Here the forward pass keeps only
checkpoints $(h, Q)$ at the start of every window of `window` steps; the backward pass then
visits the windows from last to first, recomputes each one's $R_{t+1}$ from its checkpoint (the
forward pass twice, the second time in windows; once for the last window, so a single window
spanning the stretch and the backward transient costs one pass) and iterates $C$ backward through
it. A window stores only the $R_{t+1}$ ($k^2$ numbers per step), $U^\top Q_t$ with a read-out
($mk$) and $Q_t$ at the snapshots: $O(\texttt{window}\cdot (k^2 + mk))$ at a time, plus $O(T k)$
for the per-step results. The forward factorisation is a value (`qr`): by default one-pass
CholeskyQR in float64 and Householder in float32 (see [`clv_core`][]).

**Angles** (all from $C_t$, since $V_t^\top V_t = C_t^\top C_t$ with $Q_t$ orthonormal):

- between $v_1$ and $v_j$: $\cos\theta_{1j} = |v_1 \cdot v_j| = |(C_t)_{1j}|$ ($v_1 = q_1$);
- between $v_1$ and the span of $v_2, \dots, v_k$ (the hyperbolicity angle): with $P$ the
  orthogonal projector onto that span, $\sin\theta = \lVert (I - P) v_1 \rVert
  = 1/\lVert C_t^{-\top} e_1\rVert$;
- between $v_i$ and a read-out subspace with orthonormal basis $U$ ($N\times m$):
  $\cos\phi_i = \lVert U^\top v_i \rVert = \lVert (U^\top Q_t) C_t e_i \rVert$.

Angles are acute, in $[0, \pi/2]$ radians. The read-out angle from its cosine is accurate to
about $\sqrt{\epsilon}$ ($3\cdot10^{-4}$ rad in float32) for CLVs nearly inside the subspace;
the other angles are accurate where they are small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PyTree

from dynlab.analyses.lyapunov import flatten_step
from dynlab.analyses.lyapunov.factorisations import CholeskyQR, Householder, QRMethod
from dynlab.errors import ConfigError

__all__ = ["CLVResult", "clv_core", "ginelli_backward_step", "qr_step", "readout_basis"]

FlatStep = Callable[[Float[Array, " n"], PyTree], Float[Array, " n"]]
_HIGHEST = jax.lax.Precision.HIGHEST


class CLVResult(NamedTuple):
    r"""What [`clv_core`][] returns (NumPy arrays), for the `steps` steps of the stretch.

    - `growth`: `[T, k]`, $\gamma_i(t) = \ln\lVert J_t v_i(t)\rVert$, the CLVs' local growth rates;
    - `qr_growth`: `[T, k]`, $\ln (R_{t+1})_{ii}$, the local growth rates of the QR method (their
      time averages are the exponents of the QR method over the same stretch);
    - `angle_rest`: `[T]`, the angle between $v_1$ and the span of $v_2..v_k$ (NaN for $k=1$);
    - `angle_pairs`: `[T, k-1]`, the angle between $v_1$ and $v_j$, $j = 2..k$;
    - `readout_angle`: `[T, k]`, the angle between $v_i$ and the read-out subspace (None without one);
    - `snapshot_times`: `[S]`, the steps (from the start of the stretch) of the snapshots;
    - `clv`, `gram_schmidt`: `[S, N, k]`, $V_t$ and $Q_t$ at those steps;
    - `state`: the flat state after the whole run; `diverged`: a non-finite state or growth.
    """

    growth: np.ndarray
    qr_growth: np.ndarray
    angle_rest: np.ndarray
    angle_pairs: np.ndarray
    readout_angle: np.ndarray | None
    snapshot_times: np.ndarray
    clv: np.ndarray
    gram_schmidt: np.ndarray
    state: np.ndarray
    diverged: bool


def qr_step(
    flat_step: FlatStep, h: Float[Array, " n"], x: PyTree, q: Float[Array, "n k"], qr: QRMethod = Householder()
) -> tuple[Float[Array, " n"], Float[Array, "n k"], Float[Array, "k k"]]:
    r"""One forward step: $h' = F(h, x)$ and $J Q = Q' R$ with $R_{ii} > 0$.

    The frame is pushed by $k$ Jacobian-vector products (`jax.linearize` + `jax.vmap`) and
    factorised by `qr` ([`Householder`][dynlab.analyses.lyapunov.factorisations.Householder], the
    default, or [`CholeskyQR`][dynlab.analyses.lyapunov.factorisations.CholeskyQR]), with signs such
    that $R$ has a positive diagonal (unique for full rank). Returns `(h', Q', R)`.
    """
    h_next, jvp = jax.linearize(lambda u: flat_step(u, x), h)
    z = jax.vmap(jvp, in_axes=1, out_axes=1)(q)
    q_next, r = qr.qr(z)
    return h_next, q_next, r


def ginelli_backward_step(
    r_next: Float[Array, "k k"], c_next: Float[Array, "k k"]
) -> tuple[Float[Array, "k k"], Float[Array, " k"]]:
    r"""$C_t$ from $C_{t+1}$: $B = R_{t+1}^{-1} C_{t+1}$, columns normalised; returns $(C_t, \gamma(t))$.

    $\gamma_i(t) = -\ln\lVert B e_i\rVert$ is the local growth rate of CLV $i$ from $t$ to $t+1$.
    """
    b = jax.scipy.linalg.solve_triangular(r_next, c_next, lower=False)
    norms = jnp.linalg.norm(b, axis=0)
    return b / norms, -jnp.log(norms)


def _angles(c: Float[Array, "k k"]) -> tuple[Float[Array, ""], Float[Array, " k-1"]]:
    r"""(angle between $v_1$ and span($v_2..v_k$), angles between $v_1$ and each $v_j$), from $C$.

    With unit columns, $\cos\theta_{1j} = |c_1 \cdot c_j| = |C_{1j}|$ ($c_1 = e_1$). For the span:
    the squared distance of $c_1$ from the span of the other columns is $1 / (G^{-1})_{11}$ with
    the Gram matrix $G = C^\top C$, and $(G^{-1})_{11} = \lVert C^{-\top} e_1\rVert^2$, so
    $\sin\theta = 1/\lVert y\rVert$ with $C^\top y = e_1$: one triangular solve, $O(k^2)$.
    """
    k = c.shape[0]
    # tan(theta_1j) = |C[1:, j]| / |C_1j| (unit columns): accurate at small angles, where arccos is not
    pairs = jnp.arctan2(jnp.linalg.norm(c[1:, 1:], axis=0), jnp.abs(c[0, 1:]))
    if k == 1:
        return jnp.array(jnp.nan, c.dtype), pairs
    e1 = jnp.zeros(k, c.dtype).at[0].set(1.0)
    y = jax.scipy.linalg.solve_triangular(c, e1, trans="T", lower=False)
    return jnp.arcsin(jnp.clip(1.0 / jnp.linalg.norm(y), 0.0, 1.0)), pairs


@eqx.filter_jit
def _advance(step, h_like, h, q, xs, ok, qr=Householder()):
    """The forward pass over `xs` without storing anything: returns the final (h, Q, ok).

    `step` and the example state `h_like` (not a flattened closure, which would be a new object,
    hence a new compilation, on every call) are flattened inside the trace."""
    flat_step = flatten_step(step, h_like)[0]

    def body(carry, x):
        h, q, ok = carry
        h, q, r = qr_step(flat_step, h, x, q, qr)
        ok = ok & jnp.all(jnp.isfinite(h)) & jnp.all(jnp.isfinite(jnp.diagonal(r)))
        return (h, q, ok), None

    return jax.lax.scan(body, (h, q, ok), xs)[0]


def _snapshot_slot(t, first, every: int, n_snap: int):
    """(whether local step `t` is a snapshot, its slot): snapshots at first + j * every, j < n_snap."""
    j = (t - first) // every
    return (t >= first) & ((t - first) % every == 0) & (j < n_snap), jnp.clip(j, 0, max(n_snap - 1, 0))


def _keep_snapshot(buffer, value, t, first, every: int, n_snap: int):
    """Write `value` into slot j of `buffer` if local step `t` is snapshot j (a conditional, so that
    the other steps write nothing)."""
    if n_snap == 0:
        return buffer
    take, slot = _snapshot_slot(t, first, every, n_snap)
    return jax.lax.cond(take, lambda b: b.at[slot].set(value), lambda b: b, buffer)


@eqx.filter_jit
def _window(step, h_like, h, q, xs, c_end, readout, snap_first, n_snap: int, every: int, qr=Householder()):
    """Recompute one window's R's from its checkpoint, then iterate C backward through it.

    Returns C at the window's start and, per step of the window: growth, QR growth, angles,
    read-out cosines; and the snapshots V_t, Q_t at local steps snap_first + j * every (slots past the
    window's end are left at zero). Only the R's are stored for every step (and U^T Q_t with a
    read-out): the frames Q_t themselves only at the snapshots, so that a window of frames costs
    k^2 (+ m k) numbers per step instead of 2 N k.
    """
    flat_step = flatten_step(step, h_like)[0]
    n, k = q.shape
    zeros_q = jnp.zeros((n_snap, n, k), q.dtype)

    def forward(carry, x):
        h, q, t, snaps = carry
        snaps = _keep_snapshot(snaps, q, t, snap_first, every, n_snap)
        h_next, q_next, r = qr_step(flat_step, h, x, q, qr)
        proj = None if readout is None else jnp.matmul(readout.T, q, precision=_HIGHEST)  # U^T Q_t
        return (h_next, q_next, t + 1, snaps), (r, proj)

    (h_end, _, _, snap_q), (rs, projs) = jax.lax.scan(forward, (h, q, jnp.asarray(0), zeros_q), xs)
    length = rs.shape[0]

    def backward(carry, inputs):
        c_next, snaps = carry
        r_next, proj, t = inputs
        c, growth = ginelli_backward_step(r_next, c_next)
        rest, pairs = _angles(c)
        cosines = None if proj is None else jnp.linalg.norm(jnp.matmul(proj, c, precision=_HIGHEST), axis=0)
        snaps = _keep_snapshot(snaps, c, t, snap_first, every, n_snap)
        return (c, snaps), (growth, rest, pairs, cosines)

    zeros_c = jnp.zeros((n_snap, k, k), q.dtype)
    (c0, snap_c), (growth, rest, pairs, cosines) = jax.lax.scan(
        backward, (c_end, zeros_c), (rs, projs, jnp.arange(length)), reverse=True)
    qr_growth = jnp.log(jnp.diagonal(rs, axis1=1, axis2=2))
    snap_v = jnp.einsum("snk,skj->snj", snap_q, snap_c, precision=_HIGHEST)
    return c0, h_end, growth, qr_growth, rest, pairs, cosines, snap_v, snap_q


def readout_basis(readout: ArrayLike, n: int, dtype: Any = None) -> np.ndarray:
    r"""An orthonormal basis $U$ (`[N, m]`) of the row space of a read-out matrix `[outputs, N]`.

    From the SVD $W = A S B^\top$: the columns of $B$ with $s_i > \max(\text{shape})\,\epsilon\, s_1$.
    """
    w = np.asarray(readout, np.float64)
    if w.ndim != 2 or w.shape[1] != n:
        raise ConfigError(f"the read-out must be a matrix [outputs, N = {n}]; got shape {w.shape}")
    _, s, vt = np.linalg.svd(w, full_matrices=False)
    rank = int(np.sum(s > max(w.shape) * np.finfo(float).eps * (s[0] if s.size else 0.0)))
    if rank == 0:
        raise ConfigError("the read-out matrix is zero: it spans no subspace")
    basis = vt[:rank].T
    return basis if dtype is None else basis.astype(dtype)


def _check(k, n, steps, window, transient_forward, transient_backward, snapshots) -> None:
    def integer(name, value, minimum):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ConfigError(f"{name} must be an integer >= {minimum}; got {value!r}")

    integer("k", k, 1)
    if k > n:
        raise ConfigError(f"k = {k} CLVs exceed the state dimension N = {n}; use 1 <= k <= {n}")
    integer("steps", steps, 1)
    integer("window", window, 1)
    integer("transient_forward", transient_forward, 0)
    integer("transient_backward", transient_backward, 0)
    if window > steps + transient_backward:
        raise ConfigError(f"window = {window} is longer than the run it covers, steps + transient_backward = "
                          f"{steps + transient_backward}; use 1 <= window <= {steps + transient_backward}")
    integer("snapshots", snapshots, 0)


def clv_core(
    step: Callable[[PyTree, PyTree], PyTree],
    h0: PyTree,
    inputs: PyTree,
    k: int | None = None,
    *,
    steps: int | None = None,
    window: int = 1000,
    transient_forward: int = 1000,
    transient_backward: int = 1000,
    readout: ArrayLike | None = None,
    snapshots: int = 20,
    q0: ArrayLike | None = None,
    key: Array | None = None,
    qr: QRMethod | None = None,
) -> CLVResult:
    r"""The $k$ leading covariant Lyapunov vectors of $h_{t+1} = \texttt{step}(h_t, x_t)$ along a stretch.

    The run takes `transient_forward` + `steps` + `transient_backward` inputs: the frame
    converges to the Gram–Schmidt vectors over the first part, the CLVs are reported over
    the `steps` in the middle, and the backward iteration starts from $C = I$ at the end of the
    last part (see the module docstring for the method and the memory bound of `window`).
    The arithmetic is done in the dtype of the flattened `h0` (float64: call inside
    `with jax.enable_x64(True):` with a float64 `h0`).

    **Arguments:**

    - `step`: `step(h, x) -> h_next`, pure and differentiable in `h` (any PyTree of floats).
    - `h0`: the initial state.
    - `inputs`: $x_t$ for every step, leading time axis (`transient_forward + steps +
      transient_backward` long; for an autonomous map pass zeros, e.g. `jnp.zeros((T, 1))`).
    - `k`: how many CLVs, $1 \le k \le N$ (default $N$).
    - `steps`: the length of the stretch (default: what the inputs leave after the transients).
    - `window`: steps per window, $1 \le$ `window` $\le$ `steps + transient_backward` (a window
      of that length holds every frame and runs the forward pass once).
    - `transient_forward`, `transient_backward`: $\ge 0$.
    - `readout`: optional matrix `[outputs, N]` whose row space is the read-out subspace.
    - `snapshots`: how many $V_t$ and $Q_t$ to keep, evenly spaced over the stretch.
    - `q0`: the initial frame `[N, k]` (orthonormalised here); default Gaussian from `key`.
    - `qr`: the factorisation of the forward pass, a value from
      `dynlab.analyses.lyapunov.factorisations`: `Householder()` (LAPACK) or `CholeskyQR(passes=...)`
      (Gram matrix, Cholesky and a triangular solve, with a run-time fallback to Householder wherever
      the frame is too ill-conditioned for it). Default: `CholeskyQR(passes=1)` in float64 (its $Q$ is
      orthonormal to about $\kappa^2 u$, kept near $\sqrt u = 1.5\cdot10^{-8}$ by its default limit;
      that enters the per-step norms and angles at that level and cancels in time averages, the
      non-orthogonality being a boundary term. Measured: on the benchmark's 64-unit RNN the same
      exponents as Householder to $3\cdot10^{-14}$ and the same CLVs to $|\cos| = 1 - 10^{-9}$, 1.4-1.9x
      faster; on a chaotic 10-unit RNN per-step growth rates within $4\cdot10^{-8}$ at steps that
      contract by $e^{-7}$, their means within $10^{-11}$), `Householder()` in float32 (whose one-pass
      limit, $u^{-1/4} = 64$, would send most frames to the fallback).

    **Returns:** a [`CLVResult`][].
    """
    _, v0, _ = flatten_step(step, h0)
    n = int(v0.shape[0])
    k = n if k is None else k
    leaves = jax.tree.leaves(inputs)
    if not leaves or any(np.ndim(a) == 0 for a in leaves):
        raise ConfigError("inputs must be an array (or PyTree of arrays) with a leading time axis [T, ...]")
    total = int(np.shape(leaves[0])[0])
    if steps is None:
        steps = total - transient_forward - transient_backward
    _check(k, n, steps, window, transient_forward, transient_backward, snapshots)
    if qr is None:
        qr = CholeskyQR(passes=1) if v0.dtype == jnp.float64 else Householder()
    if not isinstance(qr, (Householder, CholeskyQR)):
        raise ConfigError(f"qr must be Householder() or CholeskyQR(...) (dynlab.analyses.lyapunov.factorisations); "
                          f"got {qr!r}")
    if total != transient_forward + steps + transient_backward:
        raise ConfigError(f"inputs have {total} steps; transient_forward + steps + transient_backward = "
                          f"{transient_forward + steps + transient_backward} are needed")
    dtype = v0.dtype
    if q0 is None:
        q0 = jax.random.normal(jax.random.key(0) if key is None else key, (n, k), dtype)
    elif np.shape(q0) != (n, k):
        raise ConfigError(f"q0 must have shape (N, k) = ({n}, {k}); got {np.shape(q0)}")
    q = jnp.linalg.qr(jnp.asarray(q0, dtype))[0]
    basis = None if readout is None else jnp.asarray(readout_basis(readout, n), dtype)
    cut = lambda a, b: jax.tree.map(lambda x: x[a:b], inputs)  # noqa: E731

    h, ok = v0, jnp.array(True)
    if transient_forward:
        h, q, ok = _advance(step, h0, h, q, cut(0, transient_forward), ok, qr)
    # forward pass: checkpoints at the start of every window of the stretch and of the backward transient
    span = steps + transient_backward
    starts = list(range(0, span, window))
    checkpoints = []
    for s in starts:
        checkpoints.append((h, q))
        e = min(s + window, span)
        if e < span:  # the last window is run once, by the backward pass
            h, q, ok = _advance(step, h0, h, q, cut(transient_forward + s, transient_forward + e), ok, qr)

    every = max(1, steps // snapshots) if snapshots else steps + 1
    snap_times = np.arange(0, steps, every)[:snapshots] if snapshots else np.zeros(0, int)
    per_window = -(-window // every)
    c = jnp.eye(k, dtype=dtype)
    outputs: dict[int, tuple] = {}
    for s, (hc, qc) in reversed(list(zip(starts, checkpoints))):
        e = min(s + window, span)
        first = (-s) % every
        c, h_end, *rest = _window(step, h0, hc, qc, cut(transient_forward + s, transient_forward + e), c, basis,
                                  jnp.asarray(first), per_window, every, qr)
        if e == span:
            final_state = h_end
            ok = ok & jnp.all(jnp.isfinite(h_end))
        if s < steps:  # windows wholly inside the backward transient only carry C
            outputs[s] = (e, first, jax.tree.map(np.asarray, rest))

    parts = [outputs[s] for s in sorted(outputs)]
    keep = [min(e, steps) - s for s, (e, _, _) in sorted(outputs.items())]

    def gather(i):
        return np.concatenate([p[2][i][:m] for p, m in zip(parts, keep)])

    growth, qr_growth, rest_angle, pairs = (gather(i) for i in range(4))
    readout_angle = None
    if basis is not None:
        readout_angle = np.arccos(np.clip(gather(4), 0.0, 1.0))
    snap_v, snap_q = [], []
    for s, (e, first, arrays) in sorted(outputs.items()):
        local = first + every * np.arange(per_window)
        take = (local < min(e, steps) - s) & np.isin(s + local, snap_times)
        snap_v.append(arrays[5][take])
        snap_q.append(arrays[6][take])
    clv = np.concatenate(snap_v) if snap_v else np.zeros((0, n, k))
    gs = np.concatenate(snap_q) if snap_q else np.zeros((0, n, k))
    diverged = not bool(ok) or not np.all(np.isfinite(growth))
    return CLVResult(growth, qr_growth, rest_angle, pairs, readout_angle, snap_times, clv, gs,
                     np.asarray(final_state), diverged)
