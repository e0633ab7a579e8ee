r"""The QR (Benettin) engine: the $k$ largest Lyapunov exponents of any map, as JAX arrays.

[`flatten_step`][] views a step map on a PyTree state as a map on a flat vector;
[`lyapunov_core`][] is the jit-compiled numerical core (the method is in the docstring of
[`dynlab.analyses.lyapunov`][] and of the function). The labelled results
([`lyapunov_spectrum`][], [`lyapunov_ensemble`][], [`lyapunov_replicates`][]) run a core through
``_run``: cast to the working dtype, float64 enabled if asked, full-precision matmuls, NumPy out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, ArrayLike, Bool, Float, PyTree

from dynlab.analyses.lyapunov.factorisations import CholeskyQR, Householder, PivotedLU, QRMethod
from dynlab.errors import ConfigError

Method = Literal["auto", "jvp", "dense"]
StepFn = Callable[[PyTree, PyTree], PyTree]
FlatStep = Callable[[Float[Array, " n"], PyTree], Float[Array, " n"]]
# (state, input, frame) -> (next state, pushed-forward frame)
TangentStep = Callable[
    [Float[Array, " n"], PyTree, Float[Array, "n k"]],
    tuple[Float[Array, " n"], Float[Array, "n k"]],
]

_HIGHEST = jax.lax.Precision.HIGHEST


# ---------------------------------------------------------------------------------------------
# Flattening a step map
# ---------------------------------------------------------------------------------------------


def flatten_step(
    step: StepFn, h0: PyTree, dtype: Any = None
) -> tuple[FlatStep, Float[Array, " n"], Callable[[Float[Array, " n"]], PyTree]]:
    r"""View a step map on a PyTree state as a map on a flat vector.

    With $v = \operatorname{ravel}(h)$ (all leaves flattened and concatenated, as
    `jax.flatten_util.ravel_pytree` does), the flat map is

    $$f(v, x) = \operatorname{ravel}\big(\texttt{step}(\operatorname{unravel}(v), x)\big),$$

    so that $\partial f / \partial v$ is the $N\times N$ Jacobian of the whole state.

    **Arguments:**

    - `step`: `step(h, x) -> h_next`, a pure, jit-able map; `h_next` must have the structure and
      shapes of `h`.
    - `h0`: an example state (a PyTree of real floating arrays).
    - `dtype`: the dtype of the flat vector; by default the promoted dtype of the leaves of `h0`.
      The output of `step` is cast to it.

    **Returns:**

    `(flat_step, v0, unravel)`: the flat map `flat_step(v, x) -> v_next`, the flattened
    `h0` (a 1-D array of length $N$) and the inverse `unravel(v) -> h`.
    """
    leaves, treedef = jax.tree.flatten(h0)
    if not leaves:
        raise ConfigError("The state h0 has no array leaves; it must be a PyTree of arrays.")
    for leaf in leaves:
        if not jnp.issubdtype(jnp.result_type(leaf), jnp.floating):
            raise ConfigError(
                "Every leaf of the state h0 must be a real floating-point array "
                f"(got dtype {jnp.result_type(leaf)})."
            )
    dtype = jnp.result_type(*leaves) if dtype is None else jnp.dtype(dtype)
    # One dtype for all leaves gives ravel_pytree a dtype-polymorphic `unravel`.
    v0, unravel = ravel_pytree(jax.tree.map(lambda a: jnp.asarray(a, dtype), h0))

    def flat_step(v: Float[Array, " n"], x: PyTree) -> Float[Array, " n"]:
        h_next = step(unravel(v), x)
        if jax.tree.structure(h_next) != treedef:
            raise ConfigError(
                "step(h, x) must return a state with the same PyTree structure as h; "
                f"got {jax.tree.structure(h_next)}, expected {treedef}."
            )
        v_next, _ = ravel_pytree(h_next)
        if v_next.shape != v.shape:
            raise ConfigError(
                f"step(h, x) returned a state of size {v_next.shape[0]}, expected {v.shape[0]}."
            )
        return v_next.astype(v.dtype)

    return flat_step, v0, unravel


# ---------------------------------------------------------------------------------------------
# Numerical core
# ---------------------------------------------------------------------------------------------


class LyapunovResult(NamedTuple):
    r"""What [`lyapunov_core`][] returns (a PyTree of JAX arrays, so it vmaps).

    - `exponents`: the $k$ exponents, sorted in descending order, per step.
    - `running`: `[n_qr, k]`, the running estimate after each accumulated QR, columns in the
      same order as `exponents`; `running[-1] == exponents`.
    - `state`: the final state, with the structure of `h0`.
    - `diverged`: `True` if the state or the tangent growth became non-finite (NaN or $+\infty$)
      at any step, burn-in included. A growth of $-\infty$ (a direction mapped exactly to zero,
      e.g. by dead ReLU units) is a legitimate exponent of $-\infty$, not a divergence.
    - `condition`: `[n_qr]`, per block, the mean over its factorisations (the pivoted LUs of
      `lu_every` and the final QR) of $e^{\max_i g_i - \min_i g_i}$, $g$ the log growths since the
      previous factorisation: a lower bound on the condition number of the frame each was applied to,
      from which [`blocking_error_bound`][] bounds the error of runs with `lu_every`.
    """

    exponents: Float[Array, " k"]
    running: Float[Array, "n_qr k"]
    state: PyTree
    diverged: Bool[Array, ""]
    condition: Float[Array, " n_qr"] | None = None


def _resolve_method(method: str) -> Literal["jvp", "dense"]:
    if method not in ("auto", "jvp", "dense"):
        raise ConfigError(f"method must be 'auto', 'jvp' or 'dense'; got {method!r}.")
    if method == "auto":
        # k JVPs cost k linearised evaluations of the map. A dense Jacobian costs N of them
        # (jacfwd is a vmapped JVP over the identity) plus an N x N x k product, so it is never
        # less work: measured on tanh RNNs it is ~1.5x slower for k = 16 < N = 256..1024 and
        # level with JVPs for k = N (N = 2..256). "dense" stays available as a cross-check.
        return "jvp"
    return method  # type: ignore[return-value]


def _check_k(k: int | None, n: int, q0: ArrayLike | None) -> int:
    if k is None:
        k = n if q0 is None else int(np.shape(q0)[1])
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ConfigError(
            f"k must be an integer with 1 <= k <= N = {n} (the state dimension); got {k!r}."
        )
    return int(k)


def num_steps(inputs: PyTree) -> int:
    """The length T of the leading time axis shared by every leaf of ``inputs`` (T >= 1)."""
    leaves = jax.tree.leaves(inputs)
    if not leaves or any(np.ndim(leaf) == 0 for leaf in leaves):
        raise ConfigError(
            "inputs must be an array (or a PyTree of arrays) with a leading time axis [T, ...]; "
            "for an autonomous map pass zeros, e.g. jnp.zeros((T, 1))."
        )
    lengths = {int(np.shape(leaf)[0]) for leaf in leaves}
    if len(lengths) != 1 or 0 in lengths:
        raise ConfigError(f"All leaves of inputs must share one leading time axis T >= 1; got {lengths}.")
    return lengths.pop()


def _qr_times(steps: int, reortho_every: int) -> np.ndarray:
    """Steps accumulated after burn-in at each QR: m, 2m, ..., and `steps` for a remainder."""
    times = np.arange(reortho_every, steps + 1, reortho_every)
    if steps % reortho_every:
        times = np.append(times, steps)
    return times


def _initial_frame(
    n: int, k: int, dtype: Any, q0: ArrayLike | None, key: Array | None
) -> Float[Array, "n k"]:
    if q0 is None:
        key = jax.random.key(0) if key is None else key
        # Column j is drawn from fold_in(key, j), so the first k columns do not depend on k:
        # a k-exponent run then follows exactly the leading columns of the k = N run.
        columns = jax.vmap(lambda j: jax.random.normal(jax.random.fold_in(key, j), (n,), dtype))
        q0 = columns(jnp.arange(k)).T
    elif np.shape(q0) != (n, k):
        raise ConfigError(f"q0 must have shape (N, k) = ({n}, {k}); got {np.shape(q0)}.")
    frame, _ = _qr_positive(jnp.asarray(q0, dtype))
    return frame


def _qr_positive(z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, " k"]]:
    r"""Reduced QR $Z = QR$ with $R_{ii} \ge 0$; returns $Q$ and $\ln R_{ii}$.

    Flipping the sign of column $i$ of $Q$ and of row $i$ of $R$ leaves $QR$ unchanged, so the
    positive-diagonal factorisation is unique when $Z$ has full column rank.
    """
    q, r = jnp.linalg.qr(z)
    diag = jnp.diagonal(r)
    return q * jnp.where(diag < 0, -1, 1).astype(q.dtype), jnp.log(jnp.abs(diag))


def _qr_log_diag(z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, " k"]]:
    r"""Reduced QR $Z = QR$; returns $Q$ and $\ln |R_{ii}|$, with whatever signs LAPACK gives.

    The exponents need only $|R_{ii}|$, so no sign is flipped (measured at up to 0.019 ms per
    step, 3%, on a 256-unit RNN at $m = 4$). Without the flip the numbers are the same to the
    bit: negating column $j$ of $Z$ leaves Householder's reflectors unchanged (their sign
    follows the column's) and negates column $j$ of $Q$ and row $j$ of $R$, and the next push
    is linear in the frame, $J(-q) = -(Jq)$ exactly (rounding to nearest is symmetric), so the
    frames of the two variants differ only by column signs and the $|R_{ii}|$ are identical
    (checked in tests/test_lyapunov_core.py).
    """
    q, r = jnp.linalg.qr(z)
    return q, jnp.log(jnp.abs(jnp.diagonal(r)))


def _tangent_step(flat_step: FlatStep, method: Literal["jvp", "dense"]) -> TangentStep:
    r"""One step of the state and of the frame: $(v, x, Q) \mapsto (f(v, x), J Q)$."""
    if method == "jvp":

        def advance(v, x, frame):
            v_next, jvp = jax.linearize(lambda u: flat_step(u, x), v)
            return v_next, jax.vmap(jvp, in_axes=1, out_axes=1)(frame)

    else:

        def advance(v, x, frame):
            def value_and_aux(u):
                v_next = flat_step(u, x)
                return v_next, v_next

            jac, v_next = jax.jacfwd(value_and_aux, has_aux=True)(v)
            return v_next, jnp.matmul(jac, frame, precision=_HIGHEST)

    return advance


def _factorise(qr: QRMethod, z: Float[Array, "n k"]) -> tuple[Float[Array, "n k"], Float[Array, " k"]]:
    """The block-end orthonormalisation: `_qr_log_diag` for Householder (the same code as before the
    factorisation became a choice), otherwise the method's own."""
    return _qr_log_diag(z) if isinstance(qr, Householder) else qr(z)


def _qr_block(
    tangent_step: TangentStep,
    carry: tuple[Float[Array, " n"], Float[Array, "n k"], Bool[Array, ""]],
    xs: PyTree,
    renormalise: bool = True,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
) -> tuple[tuple[Float[Array, " n"], Float[Array, "n k"], Bool[Array, ""]], tuple[Float[Array, " k"], Float[Array, ""]]]:
    r"""Push the frame through the $m$ steps of `xs`, then re-orthonormalise once.

    With $Z = J_{m-1} \cdots J_0 Q$, the QR of the product equals the product of the per-step
    QRs, $Z = Q' R_{m-1} \cdots R_0$, and a product of upper-triangular matrices has the
    product of their diagonals, so $\ln |R'_{ii}| = \sum_s \ln |(R_s)_{ii}|$: blocking changes
    only rounding, not the estimate. With `renormalise`, each column is rescaled to unit norm
    after every step inside the block, which multiplies $R'$ on the right by a positive
    diagonal; the logs of those norms are added back, so this too is exact. It only guards
    against overflow and underflow: the columns grow like $e^{g_1}$ and $|R'_{kk}| = e^{g_k}$
    over a block, so it is needed only when $m \max_i |\lambda_i|$ nears the exponent range of
    the dtype ($\ln$ of the largest float: 88.7 in float32, 709.8 in float64). It costs an
    $N\times k$ norm and division per step (0.044 ms of 0.71 on a 256-unit RNN at $m = 4$, all of
    the gap to lyapax on Lorenz-63 at $m = 10$), so `reortho_every="auto"` turns it off when its
    pilot shows the block growths far inside that range.

    With `lu_every` $= p \ge 1$ the block is cut into sub-blocks of $p$ steps, and after each but
    the last the frame is replaced by its row-pivoted LU factor $P^\top L$ ([`PivotedLU`][]), the
    $\ln|U_{ii}|$ added to the block's growth: another upper-triangular right factor, so again
    exact, and it also bounds the frame's condition number between factorisations by
    $\kappa(L)\,e^{p(\lambda_1-\lambda_k)}$ instead of $e^{m(\lambda_1-\lambda_k)}$. The block still
    ends with the orthonormalising `qr` (a last sub-block of $1..p$ steps), so the block growth is
    the QR method's. The column renormalisation, if asked, applies to the steps that are not
    followed by a factorisation.
    """
    v, frame, ok = carry
    length = jax.tree.leaves(xs)[0].shape[0]
    renormalise = renormalise and length > 1

    def one_step(inner, x):
        v, z, log_norm, ok = inner
        v, z = tangent_step(v, x, z)
        if renormalise:
            norms = jnp.linalg.norm(z, axis=0)
            z = z / jnp.where(norms > 0, norms, 1)
            log_norm = log_norm + jnp.log(norms)
        return (v, z, log_norm, ok & jnp.all(jnp.isfinite(v))), None

    zeros = jnp.zeros(frame.shape[1], frame.dtype)
    n_sub = (length - 1) // lu_every if lu_every else 0  # sub-blocks followed by an LU
    total, conditions = zeros, jnp.zeros((), frame.dtype)
    if n_sub:
        lu = PivotedLU()
        head = jax.tree.map(lambda a: a[: n_sub * lu_every].reshape(n_sub, lu_every, *a.shape[1:]), xs)

        def sub_block(outer, xs_sub):
            v, z, total, conditions, ok = outer
            (v, z, log_norm, ok), _ = jax.lax.scan(one_step, (v, z, zeros, ok), xs_sub)
            z, log_u = lu(z)
            g = log_norm + log_u
            return (v, z, total + g, conditions + _spread_condition(g), ok), None

        (v, frame, total, conditions, ok), _ = jax.lax.scan(sub_block, (v, frame, total, conditions, ok), head)
        xs = jax.tree.map(lambda a: a[n_sub * lu_every :], xs)
    (v, z, log_norm, ok), _ = jax.lax.scan(one_step, (v, frame, zeros, ok), xs)
    frame, log_r = _factorise(qr, z)
    last = log_r + log_norm if renormalise else log_r
    growth = total + last if n_sub else last
    ok = ok & ~jnp.any(jnp.isnan(growth) | (growth == jnp.inf))
    condition = (conditions + _spread_condition(last)) / (n_sub + 1)
    return (v, frame, ok), (growth, condition)


def _spread_condition(g: Float[Array, " k"]) -> Float[Array, ""]:
    r"""$e^{\max_i g_i - \min_i g_i}$: a lower bound on the condition number of the frame that one
    factorisation with log growths $g$ was applied to (the spread of a triangular factor's diagonal)."""
    return jnp.exp(jnp.max(g) - jnp.min(g))


def _qr_iterate(
    tangent_step: TangentStep,
    carry: tuple[Float[Array, " n"], Float[Array, "n k"], Bool[Array, ""]],
    xs: PyTree,
    reortho_every: int,
    renormalise: bool = True,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
) -> tuple[
    tuple[Float[Array, " n"], Float[Array, "n k"], Bool[Array, ""]], tuple[Float[Array, "n_qr k"], Float[Array, " n_qr"]]
]:
    """Run all steps of `xs` in blocks of `reortho_every` (plus a shorter last block); returns the final
    carry and, per block, the growths and the mean condition estimate of its factorisations."""
    steps = num_steps(xs)
    n_blocks, rest = divmod(steps, reortho_every)
    block = lambda c, x: _qr_block(tangent_step, c, x, renormalise, qr, lu_every)  # noqa: E731
    dtype = carry[1].dtype
    growths, conditions = [jnp.zeros((0, carry[1].shape[1]), dtype)], [jnp.zeros((0,), dtype)]
    if n_blocks:
        blocked = jax.tree.map(
            lambda a: a[: n_blocks * reortho_every].reshape(n_blocks, reortho_every, *a.shape[1:]),
            xs,
        )
        carry, (growth, condition) = jax.lax.scan(block, carry, blocked)
        growths.append(growth)
        conditions.append(condition)
    if rest:
        carry, (growth, condition) = block(carry, jax.tree.map(lambda a: a[n_blocks * reortho_every :], xs))
        growths.append(growth[None])
        conditions.append(condition[None])
    return carry, (jnp.concatenate(growths), jnp.concatenate(conditions))


def _compensated_cumsum(x: Float[Array, "t k"]) -> Float[Array, "t k"]:
    r"""Cumulative sum along axis 0 with Kahan compensation.

    A plain float32 running sum of $2 \cdot 10^5$ terms is off by ~$10^{-5}$ (relative); the
    compensated sum stays within a few ulps (~$10^{-8}$) whatever the length.
    """

    def add(carry, xi):
        total, comp = carry
        y = xi - comp
        new = total + y
        # An infinite total (a -inf exponent) has no rounding error to carry.
        comp = jnp.where(jnp.isfinite(new), (new - total) - y, 0)
        return (new, comp), new

    zeros = jnp.zeros(x.shape[1:], x.dtype)
    _, sums = jax.lax.scan(add, (zeros, zeros), x)
    return sums


@eqx.filter_jit
def lyapunov_core(
    step: StepFn,
    h0: PyTree,
    inputs: PyTree,
    k: int | None = None,
    *,
    burn_in: int = 0,
    reortho_every: int = 1,
    renormalise: bool = True,
    method: Method = "auto",
    q0: Float[ArrayLike, "n k"] | None = None,
    key: Array | None = None,
    qr: QRMethod = Householder(),
    lu_every: int = 0,
) -> LyapunovResult:
    r"""The $k$ largest Lyapunov exponents of $h_{t+1} = \texttt{step}(h_t, x_t)$, as JAX arrays.

    QR (Benettin) method. With $J_t = \partial_h \texttt{step}(h_t, x_t)$ and an orthonormal
    frame $Q \in \mathbb{R}^{N\times k}$:

    1. **burn-in**: the first `burn_in` inputs advance the state and the frame (re-orthonormalised
       as below) without accumulating anything, so that the state reaches its attractor and the
       frame aligns with the most expanding directions;
    2. **accumulation**: the remaining $T' = T - \texttt{burn\_in}$ steps are taken in blocks of
       $m$ = `reortho_every` (the last block holds the $T' \bmod m$ leftover steps, if any). For a
       block of $m_b$ steps starting at $s$,

       $$J_{s+m_b-1} \cdots J_{s} Q = Q' R',$$

       and the exponents are

       $$\lambda_i = \frac{1}{T'} \sum_{\text{blocks}} \ln |R'_{ii}|$$

       (no sign is fixed: only $|R'_{ii}|$ enters, and the result is the same to the bit as with
       a positive diagonal, see `_qr_log_diag`).

       `running[b]` is the same sum over the first $b+1$ blocks divided by the number of
       steps they hold. $m > 1$ saves QRs and gives the same estimate in exact arithmetic,
       but between QRs the columns drift towards the leading direction: after a block with log
       growths $g_{1}, \dots, g_{k}$ the frame has condition number
       $\kappa \approx e^{g_1 - g_k}$ (about $e^{m(\lambda_1 - \lambda_k)}$), and rounding
       ($\epsilon$ the unit roundoff, $2^{-24}$ in float32, $2^{-53}$ in float64) tilts the
       re-orthonormalised frame by about $\epsilon\kappa$. The tilt is made at every QR and
       biases every later step, so the exponents move by about $\epsilon\,\overline{\kappa}$
       ($\overline{\kappa}$ the mean over blocks), not by $\epsilon\kappa / m$; and since the
       realised spread $g_1 - g_k$ fluctuates, $\overline{\kappa}$ exceeds
       $e^{m(\lambda_1 - \lambda_k)}$, so the error scale
       $\epsilon\, e^{m(\lambda_1 - \lambda_k)}$ this docstring used to quote understates it.
       Measured (full spectrum of 12-unit tanh RNNs $\tanh(Wh + Ux + b)$, $W \sim N(0, g^2/N)$,
       1800 steps, against a QR every step): float64, $g = 0.9$ ($\lambda_1 - \lambda_{12} = 3.62$),
       $m = 6, 8, 10$ move the sum of the exponents by $9\cdot10^{-7}$, $8.5\cdot10^{-4}$,
       $9.5\cdot10^{-2}$ ($\epsilon e^{m(\lambda_1-\lambda_k)}$: $3\cdot10^{-7}$,
       $4.3\cdot10^{-4}$, $0.6$); $g = 1.2$ (spread 3.90): $2.5\cdot10^{-5}$, $1.6\cdot10^{-2}$,
       $0.24$ against $1.6\cdot10^{-6}$, $4.0\cdot10^{-3}$, $9.9$ (up to 15x more); float32,
       $g = 1.2$: $m = 2, 4$ move it by $2\cdot10^{-4}$ and $9\cdot10^{-2}$. Largest exponents
       move least; nearly equal exponents trade errors with each other.
       `reortho_every="auto"` ([`lyapunov_spectrum`][], [`lyapunov_ensemble`][],
       [`lyapunov_replicates`][]) chooses $m$ from the spread and the statistical error measured
       by a pilot over the burn-in (the predicted blocking error at most 1% of the run's standard
       error, the frame's mean condition number at most $\epsilon^{-2/3}$; see
       `dynlab.analyses.lyapunov.reortho._auto_interval`) and reports a bound
       ([`blocking_error_bound`][]).

    **Cost.** Per step, pushing the frame forward costs $k$ JVPs (for an RNN, one $N\times N$
    by $N\times k$ matmul), and each QR $4Nk^2 - \tfrac43 k^3$ flops at LAPACK's rate
    (single-threaded on CPU, far below a matmul's). For the full spectrum ($k = N$) the QR
    dominates: on a 2-core CPU, $N = 256$ in float32 takes ~1.5 ms for the QR against ~0.3 ms
    for the push (float64: 2.0-2.2 ms against 0.33 ms), which is what $m > 1$ saves.

    **Cheaper factorisations** (`dynlab.analyses.lyapunov.factorisations`; the exponents depend
    only on the flag of the frame and the diagonal of the triangular factors, so any flag-preserving
    triangular factorisation gives the same sums, see that module). `lu_every` $= p$ re-triangularises
    the frame inside each block by a row-pivoted LU (LAPACK `getrf`, a quarter of Householder's
    time at $256\times256$ in float64: 0.51 ms) every $p$ steps, which keeps its condition number at
    $\kappa(L)\,e^{p(\lambda_1-\lambda_k)}$ instead of $e^{m(\lambda_1-\lambda_k)}$: the blocking
    error of $m$ becomes about that of $p$ (measured on full spectra of tanh RNNs in float64, within
    a factor 1-20 of plain blocks of $p$), while QRs are needed only every $m$ steps. On the
    256-unit RNN of `benchmarks/lyapunov.py` ($\lambda_1 - \lambda_{256} = 4.6$), $m = 15$,
    $p = 3$ moves the exponents by $10^{-8}$ of their statistical error, where plain blocks of
    $m = 6$ move them by $10^{-3}$. `qr=CholeskyQR(...)` replaces Householder at the block ends
    (measured faster only with one pass: 1.4x at $256\times256$, 2x at $64\times64$).

    The frame is pushed forward by Jacobian-vector products (`jax.linearize` + `jax.vmap` over
    the $k$ columns, cost $\approx k$ evaluations of the map) or by a dense Jacobian
    (`jax.jacfwd`, then $J Q$). The arithmetic is done in the dtype of the flattened `h0`;
    to compute in float64, call inside `with jax.enable_x64(True):` with a float64 `h0`
    ([`lyapunov_spectrum`][] does this for `x64=True`).

    This function is jit-compiled (`equinox.filter_jit`: arrays inside `step`, e.g. an
    `equinox.Module`'s weights, are traced, so new weights do not recompile) and can be
    vmapped over initial conditions:
    `jax.vmap(lambda h: lyapunov_core(step, h, inputs, k))(h0s)`.

    **Arguments:**

    - `step`: `step(h, x) -> h_next`, pure and differentiable in `h`; `h` may be any PyTree of
      floating arrays (see [`flatten_step`][]), $N$ is its total size.
    - `h0`: the initial state.
    - `inputs`: `x_t` for every step: an array or PyTree of arrays with leading time axis
      `[T, ...]`. For an autonomous map pass zeros of any shape, e.g. `jnp.zeros((T, 1))`.
    - `k`: how many exponents, $1 \le k \le N$ (default: $N$, or the columns of `q0`).
    - `burn_in`: how many of the $T$ steps are burn-in, $0 \le \texttt{burn\_in} < T$.
    - `reortho_every`: $m \ge 1$, steps between QRs.
    - `renormalise`: rescale the frame's columns to unit norm after every step inside a block
      (their log norms are added back: exact). Only a guard against overflow and underflow, needed
      when $m \max_i |\lambda_i|$ nears the dtype's exponent range (88.7 in float32, 709.8 in
      float64); `False` saves its cost (6-10% of the time per step on a 256-unit RNN at $m = 4$) where that cannot
      happen. Without it a column that overflows makes the run `diverged`, one that underflows
      gives $-\infty$. `reortho_every="auto"` in the labelled functions chooses it from its pilot.
    - `method`: `"jvp"`, `"dense"` or `"auto"`. Pushing $k$ columns forward costs $k$
      JVPs, whereas `jax.jacfwd` costs $N$ JVPs (a vmapped JVP over the identity) plus the
      $N \times N \times k$ product $JQ$, so `"auto"` chooses `"jvp"`; `"dense"` is a
      cross-check (the two agree to rounding).
    - `q0`: the initial frame `[N, k]` (orthonormalised here). By default a Gaussian frame drawn
      from `key` (default `jax.random.key(0)`), column $j$ from `fold_in(key, j)`.
    - `key`: PRNG key for the default frame.
    - `qr`: how each block's frame is orthonormalised: `Householder()` (default; LAPACK) or
      `CholeskyQR(passes=1 | 2)`, which falls back to Householder where its Cholesky factor shows
      the frame too ill-conditioned for it (see [`CholeskyQR`][]). A value, compiled once per value.
    - `lu_every`: $p \ge 1$: inside each block of `reortho_every` steps, replace the frame by its
      row-pivoted LU factor every $p$ steps ([`PivotedLU`][]; `_qr_block`); 0 (default): no LU.
      Exact in exact arithmetic; `running` is still recorded only at the (orthonormal) block ends.

    **Returns:**

    A [`LyapunovResult`][] `(exponents, running, state, diverged)`.

    **Raises:**

    `ValueError` for a `k`, `burn_in`, `reortho_every`, `method`, `q0`, `qr`, `lu_every` or
    `inputs` that is not valid (the message says what is).
    """
    flat_step, v0, unravel = flatten_step(step, h0)
    n = v0.shape[0]
    k = _check_k(k, n, q0)
    steps = num_steps(inputs)
    if not isinstance(burn_in, (int, np.integer)) or not 0 <= burn_in < steps:
        raise ConfigError(
            f"burn_in must be an integer with 0 <= burn_in < T = {steps} (the number of inputs), "
            f"so that at least one step is accumulated; got {burn_in!r}."
        )
    if isinstance(reortho_every, str) and reortho_every == "auto":
        raise ConfigError(
            "reortho_every='auto' does not apply to lyapunov_core (jit-compiled for one interval); "
            "use lyapunov_spectrum, lyapunov_ensemble or lyapunov_replicates, which choose it from a pilot run."
        )
    if isinstance(reortho_every, bool) or not isinstance(reortho_every, (int, np.integer)) or reortho_every < 1:
        raise ConfigError(f"reortho_every must be an integer >= 1 or 'auto'; got {reortho_every!r}.")
    if not isinstance(renormalise, (bool, np.bool_)):
        raise ConfigError(f"renormalise must be True or False; got {renormalise!r}.")
    renormalise = bool(renormalise)
    if not isinstance(qr, (Householder, CholeskyQR)):
        raise ConfigError(
            f"qr must be Householder() or CholeskyQR(...) (dynlab.analyses.lyapunov.factorisations); got {qr!r}. "
            "The pivoted LU is not orthonormal: it is used inside blocks, through lu_every."
        )
    if isinstance(lu_every, bool) or not isinstance(lu_every, (int, np.integer)) or lu_every < 0:
        raise ConfigError(f"lu_every must be an integer >= 0 (0: no LU inside a block); got {lu_every!r}.")
    lu_every = int(lu_every)
    tangent_step = _tangent_step(flat_step, _resolve_method(method))
    frame = _initial_frame(n, k, v0.dtype, q0, key)

    carry = (v0, frame, jnp.array(True))
    if burn_in % reortho_every == 0:
        # Burn-in and accumulation as one scan over the same blocks (the same operations in the same
        # order, so the same numbers), with the burn-in's growths dropped: one compiled copy of the
        # block instead of two.
        (v, _, ok), (growth, condition) = _qr_iterate(
            tangent_step, carry, inputs, reortho_every, renormalise, qr, lu_every
        )
        growth, condition = growth[burn_in // reortho_every :], condition[burn_in // reortho_every :]
    else:
        burn_xs = jax.tree.map(lambda a: a[:burn_in], inputs)
        xs = jax.tree.map(lambda a: a[burn_in:], inputs)
        carry, _ = _qr_iterate(tangent_step, carry, burn_xs, reortho_every, renormalise, qr, lu_every)
        (v, _, ok), (growth, condition) = _qr_iterate(
            tangent_step, carry, xs, reortho_every, renormalise, qr, lu_every
        )

    times = jnp.asarray(_qr_times(steps - burn_in, reortho_every), v.dtype)
    running = _compensated_cumsum(growth) / times[:, None]
    order = jnp.argsort(-running[-1])  # descending; NaNs last
    running = running[:, order]
    return LyapunovResult(running[-1], running, unravel(v), ~ok, condition)


@eqx.filter_jit
def _lu_growth_core(
    step: StepFn,
    h0: PyTree,
    inputs: PyTree,
    k: int | None = None,
    *,
    method: Method = "auto",
    q0: Float[ArrayLike, "n k"] | None = None,
    key: Array | None = None,
) -> tuple[Float[Array, "t k"], Bool[Array, ""], PyTree, Float[Array, "n k"]]:
    r"""The per-step log growths $\ln|U_{ii}|$ of a frame re-triangularised by a row-pivoted LU after
    every step ([`PivotedLU`][]), whether the run diverged, and the final state and frame: the cheap
    pilot of `reortho_every="auto"` for runs with `lu_every` (`dynlab.analyses.lyapunov.reortho`),
    which [`lyapunov_spectrum`][] also uses as the burn-in.

    Sums of consecutive rows differ from the QR method's local exponents only by a boundary term
    $\ln\operatorname{vol}$ of the LU frame at the two ends, $|\cdot| \le \tfrac{j}{2}\ln N$ for
    the first $j$ (see `dynlab.analyses.lyapunov.factorisations`)."""
    flat_step, v0, unravel = flatten_step(step, h0)
    n = v0.shape[0]
    k = _check_k(k, n, q0)
    tangent_step = _tangent_step(flat_step, _resolve_method(method))
    frame = _initial_frame(n, k, v0.dtype, q0, key)
    lu = PivotedLU()

    def one_step(carry, x):
        v, z, ok = carry
        v, z = tangent_step(v, x, z)
        z, log_u = lu(z)
        ok = ok & jnp.all(jnp.isfinite(v)) & ~jnp.any(jnp.isnan(log_u) | (log_u == jnp.inf))
        return (v, z, ok), log_u

    (v, frame, ok), growth = jax.lax.scan(one_step, (v0, frame, jnp.array(True)), inputs)
    return growth, ~ok, unravel(v), frame


# ---------------------------------------------------------------------------------------------
# Running a core in the working precision, on the host
# ---------------------------------------------------------------------------------------------


def _cast_floating(tree: PyTree, dtype: Any, *, numpy_only: bool = False) -> PyTree:
    """Cast the floating leaves of `tree` to `dtype` (with `numpy_only`, only NumPy leaves).

    NumPy leaves are converted by NumPy: `jnp.asarray` of a NumPy array that was once captured
    by a jit under float64 can hand back a cached float64 buffer after float64 is switched off
    again (jax 0.10), which a float32 executable then rejects.
    """

    def cast(a):
        if isinstance(a, (np.ndarray, np.generic)) or (isinstance(a, float) and not numpy_only):
            a = np.asarray(a)
            return a.astype(dtype) if np.issubdtype(a.dtype, np.floating) else a
        if numpy_only or not isinstance(a, jax.Array):
            return a
        return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a

    return jax.tree.map(cast, tree)


def _state_dim(h0: PyTree) -> int:
    return int(sum(np.size(leaf) for leaf in jax.tree.leaves(h0)))


def _run(
    core: Callable[..., LyapunovResult],
    step: StepFn,
    h0: PyTree,
    inputs: PyTree,
    q0: ArrayLike | None,
    x64: bool,
    **options: Any,
) -> LyapunovResult:
    """Cast to the working dtype and run `core` with float64 enabled if asked (or enabled already:
    a model loaded under x64 holds float64 arrays), on the host."""
    x64 = x64 or jax.config.jax_enable_x64
    dtype = jnp.float64 if x64 else jnp.float32
    x64_mode = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    # Accelerators may otherwise run float32 matmuls inside `step` at reduced (TF32) precision.
    with x64_mode, jax.default_matmul_precision("highest"):
        h0, inputs, q0 = _cast_floating((h0, inputs, q0), dtype)
        if not x64:  # float64 NumPy parameters would be truncated by jit anyway
            step = _cast_floating(step, dtype, numpy_only=True)
        result = core(step, h0, inputs, q0=q0, **options)
        return jax.tree.map(np.asarray, result)

