r"""How often to re-orthonormalise: the interval `reortho_every="auto"` chooses from the spread of
the exponents over the burn-in, and the bound on the error that blocking adds.

Between QRs the frame drifts towards the leading direction; [`blocking_error_bound`][] bounds
what that costs against a QR every step (see [`lyapunov_core`][] for the measurements), and
[`_auto_interval`][] picks the longest interval whose predicted error stays below
$\epsilon^{2/3}$.
"""

from __future__ import annotations

import jax
import numpy as np
from jaxtyping import Array, ArrayLike, PyTree

from dynlab.analyses.lyapunov.core import Method, StepFn, _run, lyapunov_core, num_steps
from dynlab.errors import ConfigError


AUTO_ERROR_FACTOR = 10.0
r"""$C$ in the blocking-error bound of [`blocking_error_bound`][].

Calibrated on full spectra of tanh RNNs ($N = 12$ and $40$; float32 $m = 2..4$, float64
$m = 4..10$): the largest error of any exponent against a QR every step was at most 1.8 times
$\epsilon\,\overline{\kappa}$, the smallest exponent's error at most 0.15 times it; $C = 10$
leaves a margin for larger $N$ (Householder QR's backward error grows with the size).
"""
AUTO_MIN_BURN_IN = 2
"""`reortho_every="auto"` measures the spread over the burn-in, which must be at least this long; the
interval it chooses is at most half the burn-in (the pilot's windows), so a short burn-in gives a
short interval, and no burn-in no pilot (a ConfigError)."""
AUTO_MIN_BLOCKS = 32
"""`"auto"` keeps at least this many QR blocks after burn-in (local exponents for error bars)."""


def unit_roundoff(x64: bool) -> float:
    r"""$\epsilon$: $2^{-53}$ in float64, $2^{-24}$ in float32."""
    return 2.0**-53 if x64 else 2.0**-24


def auto_condition_bound(x64: bool) -> float:
    r"""$\kappa_{\max} = \epsilon^{-1/3} / C$: the mean condition number of the frame between QRs that
    `reortho_every="auto"` allows (float32: 25.6, float64: $2.1\cdot10^4$), so that the blocking
    error $C\epsilon\overline\kappa$ stays below $\epsilon^{2/3}$ ($1.5\cdot10^{-5}$ in float32,
    $2.3\cdot10^{-11}$ in float64), far below the statistical error of any finite run."""
    return unit_roundoff(x64) ** (-1.0 / 3.0) / AUTO_ERROR_FACTOR


def block_growth(running: ArrayLike, times: ArrayLike) -> np.ndarray:
    r"""The log growth of every QR block, $g_{i,b} = \ln R'_{ii}$ of block $b$, from `running`.

    `running[..., b, i]` is $\frac{1}{t_b}\sum_{b' \le b} g_{i,b'}$ with $t_b$ = `times[b]` steps, so
    $g_{i,b} = t_b\, r_{b,i} - t_{b-1}\, r_{b-1,i}$ (float64; float32 `running` leaves a rounding
    of about $\epsilon\, |\lambda| t_b$ in each). Divided by the block length this is the *local*
    exponent of the block, whose time average is the exponent. Returns `[..., n_qr, k]`.
    """
    r = np.asarray(running, np.float64)
    t = np.asarray(times, np.float64)
    total = r * t[:, None]
    with np.errstate(invalid="ignore"):  # inf - inf in a diverged run is NaN, as it should be
        return np.diff(total, axis=-2, prepend=np.zeros_like(total[..., :1, :]))


def blocking_error_bound(growth: ArrayLike, reortho_every: int, x64: bool) -> float:
    r"""Bound on what re-orthonormalising every $m$ steps adds to the error of a QR every step.

    From the block growths $g_{i,b}$ (`[..., n_qr, k]`, all runs; the last, shorter block left
    out) of a run with interval $m$:

    $$B = C\,\epsilon\,\Big(\overline{\kappa} + (m - 1)\,\bar a\Big), \qquad
      \overline{\kappa} = \max_{\text{runs}} \frac{1}{n_b}\sum_b e^{g_{1,b} - g_{k,b}}, \qquad
      \bar a = \max_i \frac{1}{n_b m}\sum_b |g_{i,b}|,$$

    the first term for the drift of the frame between QRs (see [`lyapunov_core`][]), the second
    for the plain sum of $m$ per-step log norms inside a block; $C$ = [`AUTO_ERROR_FACTOR`][].
    Every exponent is within $B$ of the same run with a QR every step (same dtype; rounding that
    both share, e.g. of nearly equal exponents in float32, is not included). $B = 0$ for $m = 1$.
    """
    if reortho_every == 1:
        return 0.0
    g = np.asarray(growth, np.float64)
    if g.shape[-2] > 1:
        g = g[..., :-1, :]  # the last block may be shorter
    with np.errstate(over="ignore", invalid="ignore"):
        kappa = np.exp(np.clip(g[..., :, :1] - g[..., :, -1:], None, 700.0)).mean(axis=(-2, -1))
        a = np.abs(g).mean(axis=-2).max(axis=-1) / reortho_every
    worst = np.nanmax(np.reshape(kappa + (reortho_every - 1) * a, -1)) if np.size(kappa) else np.nan
    return float(AUTO_ERROR_FACTOR * unit_roundoff(x64) * worst)


def _auto_interval(
    step: StepFn, h0: PyTree, inputs: PyTree, q0: ArrayLike | None, x64: bool, *,
    k: int | None, burn_in: int, method: Method, key: Array | None,
) -> tuple[int, float]:
    r"""`reortho_every="auto"`: $m$ from a pilot run over the burn-in, and its predicted error.

    The pilot pushes a frame through the `burn_in` steps with a QR every step. Over the second
    half (the first aligns the frame) it has per-step log growths $\ell_{i,t}$ and spreads
    $d_t = \ell_{1,t} - \ell_{k,t}$. A block of $m$ steps starting at $t$ would have condition
    number $e^{d_t + \dots + d_{t+m-1}}$, so the predicted mean condition number is
    $S_m = \operatorname{mean}_t \exp\big(\sum_{j<m} d_{t+j}\big)$ and the predicted error
    $C\epsilon\,(S_m + (m-1)\,\bar a)$ with $\bar a = \max_i \operatorname{mean}_t |\ell_{i,t}|$.
    The choice is the largest $m \le m_{\max}$ whose predicted error is at most $\epsilon^{2/3}$
    (so that $S_m \lesssim$ [`auto_condition_bound`][]), where
    $m_{\max} = \max(1, \min(T'/32, \text{half the burn-in}))$ keeps at least
    [`AUTO_MIN_BLOCKS`][] blocks and windows inside the pilot; then the largest $m' \le m$ that
    divides both the burn-in and $T'$, if $m' \ge m/2$ (one compiled block, no remainder: XLA
    compilation dominates short runs of large models). A diverging pilot gives $m = 1$.
    """
    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < AUTO_MIN_BURN_IN:
        raise ConfigError(
            f"reortho_every='auto' measures the spread of the exponents over the burn-in, which needs "
            f"burn_in >= {AUTO_MIN_BURN_IN} steps; got burn_in={burn_in!r} (or give an integer interval)."
        )
    steps = num_steps(inputs)
    if burn_in >= steps:
        raise ConfigError(f"burn_in must be < T = {steps}; got {burn_in}.")
    pilot_inputs = jax.tree.map(lambda a: a[:burn_in], inputs)
    pilot = _run(lyapunov_core, step, h0, pilot_inputs, q0, x64,
                 k=k, burn_in=0, reortho_every=1, method=method, key=key)  # fmt: skip
    if bool(pilot.diverged):
        return 1, 0.0
    ell = block_growth(pilot.running, np.arange(1, burn_in + 1))[burn_in // 2 :]
    if ell.shape[1] == 1:
        spread = np.zeros(ell.shape[0])
    else:
        spread = ell[:, 0] - ell[:, -1]
    eps = unit_roundoff(x64)
    a = float(np.abs(ell).mean(axis=0).max())
    cum = np.concatenate([[0.0], np.cumsum(spread)])
    m_max = max(1, min((steps - burn_in) // AUTO_MIN_BLOCKS, spread.size))
    errors = [0.0]
    with np.errstate(over="ignore"):
        for m in range(2, m_max + 1):
            s_m = float(np.exp(np.clip(cum[m:] - cum[:-m], None, 700.0)).mean())
            error = AUTO_ERROR_FACTOR * eps * (s_m + (m - 1) * a)
            if not error <= eps ** (2.0 / 3.0):
                break
            errors.append(error)
    best = len(errors)
    # An interval that divides both the burn-in and the accumulated steps compiles one block (no
    # shorter remainder block, burn-in fused with accumulation): take the largest such interval
    # if it keeps at least half the QR savings.
    even = max(m for m in range(1, best + 1) if burn_in % m == 0 and (steps - burn_in) % m == 0)
    if 2 * even >= best:
        best = even
    return best, errors[best - 1]


def _reortho_attrs(requested: int | str, used: int, bound: float, predicted: float | None, x64: bool) -> dict:
    attrs = {
        "reortho_every": int(used),
        "reortho_requested": str(requested),
        "reortho_error_bound": float(bound),
        "reortho_error_bound_note": (
            "bound on |lambda_i(reortho_every) - lambda_i(QR every step)|, same dtype "
            "(dynlab.analyses.lyapunov.blocking_error_bound)"
        ),
    }
    if predicted is not None:
        attrs["reortho_condition_bound"] = auto_condition_bound(x64)
        attrs["reortho_predicted_error"] = float(predicted)
    return attrs


def _resolve_reortho(step, h0, inputs, q0, x64, *, reortho_every, k, burn_in, method, key):
    """(interval, predicted error or None) for an integer or 'auto' `reortho_every`."""
    if isinstance(reortho_every, str):
        if reortho_every != "auto":
            raise ConfigError(f"reortho_every must be an integer >= 1 or 'auto'; got {reortho_every!r}.")
        return _auto_interval(step, h0, inputs, q0, x64, k=k, burn_in=burn_in, method=method, key=key)
    return reortho_every, None

