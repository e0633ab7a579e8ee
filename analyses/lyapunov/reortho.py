r"""How often to re-orthonormalise: the interval `reortho_every="auto"` chooses from the spread of
the exponents over the burn-in, and the bound on the error that blocking adds.

Between QRs the frame drifts towards the leading direction; [`blocking_error_bound`][] bounds
what that costs against a QR every step (see [`lyapunov_core`][] for the measurements), and
`_auto_interval` picks the longest interval whose predicted error is at most
[`AUTO_SE_FRACTION`][] of the run's statistical error (estimated from a pilot over the burn-in),
and whose frame stays well-conditioned ([`auto_condition_bound`][]).
"""

from __future__ import annotations

import jax
import numpy as np
from jaxtyping import Array, ArrayLike, PyTree

from dynlab.analyses.lyapunov.core import Method, StepFn, _run, lyapunov_core, num_steps
from dynlab.analyses.lyapunov.within_run import block_growth, unit_roundoff, within_run_errors
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
AUTO_SE_FRACTION = 0.01
r"""`"auto"` keeps the predicted blocking error at most this fraction of the run's statistical error.

A systematic error $B$ added to a statistical error SE gives $\sqrt{\mathrm{SE}^2 + B^2}$: at
$B = 0.01\,\mathrm{SE}$ that is 1.00005 SE, invisible in any interval; and the bound is itself
conservative ($C = 10$ against measured errors of at most $1.8\,\epsilon\overline\kappa$)."""
AUTO_RANGE_FRACTION = 0.25
r"""`"auto"` drops the per-step column renormalisation inside a block when $m \max_{i,t}|\ell_{i,t}|$
(the largest per-step log growth of any exponent in the pilot, times the interval) is at most this
fraction of $|\ln(\text{smallest normal float})|$ (87.3 in float32, 708.4 in float64): a margin of
4x for growths larger than the pilot saw."""


def auto_condition_bound(x64: bool) -> float:
    r"""$\kappa_{\max} = \epsilon^{-2/3}$: the largest mean condition number of the frame between QRs
    that `reortho_every="auto"` allows (float32: $2^{16} = 6.6\cdot10^4$, float64: $4.3\cdot10^{10}$).

    Each QR tilts the frame by about $\epsilon\kappa$; the cap keeps that below
    $\epsilon^{1/3}$ ($3.9\cdot10^{-3}$ / $4.8\cdot10^{-6}$), so the frame keeps a third of its
    digits and the first-order bound [`blocking_error_bound`][] stays in the range where it was
    calibrated. In practice the statistical rule ([`AUTO_SE_FRACTION`][]) binds first in float32;
    in float64 the cap binds when the run is long and the spread large."""
    return unit_roundoff(x64) ** (-2.0 / 3.0)


def blocking_error_bound(growth: ArrayLike, reortho_every: int, x64: bool) -> float:
    r"""Bound on what re-orthonormalising every $m$ steps adds to the error of a QR every step.

    From the block growths $g_{i,b}$ (`[..., n_qr, k]`, all runs; the last, shorter block left
    out) of a run with interval $m$:

    $$B = C\,\epsilon\,\Big(\overline{\kappa} + (m - 1)\,\bar a\Big), \qquad
      \overline{\kappa} = \max_{\text{runs}} \frac{1}{n_b}\sum_b e^{g_{1,b} - g_{k,b}}, \qquad
      \bar a = \max_i \frac{1}{n_b m}\sum_b |g_{i,b}|,$$

    the first term for the drift of the frame between QRs (see [`lyapunov_core`][]), the second
    for the plain sum of $m$ per-step log norms inside a block (with `renormalise=False` there is
    no such sum and the term only loosens the bound); $C$ = [`AUTO_ERROR_FACTOR`][].
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


def _renormalise_needed(ell: np.ndarray, m: int, x64: bool) -> bool:
    r"""Whether blocks of `m` steps need their columns renormalised after every step (see
    `_qr_block`): unless $m \max_{i,t} |\ell_{i,t}|$ (finite) is at most [`AUTO_RANGE_FRACTION`][]
    of the dtype's exponent range. `ell` is the pilot's per-step log growths `[t, k]`."""
    if m == 1:
        return False
    if ell.size == 0 or not np.all(np.isfinite(ell)):
        return True  # a -inf direction or an unseen range: keep the guard
    return bool(m * np.abs(ell).max() > AUTO_RANGE_FRACTION * abs(np.log(np.finfo(np.float64 if x64 else np.float32).tiny)))


def _auto_interval(
    step: StepFn, h0: PyTree, inputs: PyTree, q0: ArrayLike | None, x64: bool, *,
    k: int | None, burn_in: int, method: Method, key: Array | None,
) -> tuple[int, dict]:
    r"""`reortho_every="auto"`: $m$ from a pilot run over the burn-in, and what it was chosen against.

    The pilot pushes a frame through the `burn_in` steps with a QR every step. Over the second
    half (the first aligns the frame; $n$ steps) it has per-step log growths $\ell_{i,t}$ and
    spreads $d_t = \ell_{1,t} - \ell_{k,t}$. A block of $m$ steps starting at $t$ would have
    condition number $e^{d_t + \dots + d_{t+m-1}}$, so the predicted mean condition number is
    $S_m = \operatorname{mean}_t \exp\big(\sum_{j<m} d_{t+j}\big)$ and the predicted error
    $E_m = C\epsilon\,(S_m + (m-1)\,\bar a)$ with $\bar a = \max_i \operatorname{mean}_t
    |\ell_{i,t}|$, the form of [`blocking_error_bound`][].

    **Rule.** The blocking error is systematic, the run's own error statistical; the first is
    worth avoiding only where it is not negligible against the second. The pilot's batch-means
    standard errors ([`within_run_errors`][] of the $\ell_{i,t}$) scaled to the run's length,
    $\mathrm{SE}_i = \mathrm{SE}_i^{\rm pilot}\sqrt{n / T'}$, give the tolerance
    $\tau = \max\big(f \min_i \mathrm{SE}_i,\ \epsilon^{2/3}\big)$, $f$ =
    [`AUTO_SE_FRACTION`][] (the floor $\epsilon^{2/3}$, the tolerance of the previous rule, is
    for exponents with no statistical error, e.g. a constant Jacobian). The choice is the
    largest $m \le m_{\max}$ with $E_m \le \tau$ and $S_m \le$ [`auto_condition_bound`][],
    where $m_{\max} = \max(1, \min(T'/32, n))$ keeps at least [`AUTO_MIN_BLOCKS`][] blocks and
    windows inside the pilot; then the largest $m' \le m$ that divides both the burn-in and
    $T'$, if $m' \ge m/2$ (one compiled block, no remainder: XLA compilation dominates short runs
    of large models). A diverging pilot gives $m = 1$. The SE from $n$ pilot steps is itself
    uncertain (a factor ~1.5 with $n = 100$) and batch means overstate it for anti-correlated
    local exponents (see [`within_run_errors`][]); the reported bound
    [`blocking_error_bound`][], measured on the run itself, is what to check against.

    The per-step renormalisation inside a block is dropped when the pilot's growths are far
    inside the dtype's range (`_renormalise_needed`).

    Returns `(m, info)`, `info` with `predicted` ($E_m$), `tolerance` ($\tau$), `se` ($\min_i
    \mathrm{SE}_i$ or NaN) and `renormalise`.
    """

    if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < AUTO_MIN_BURN_IN:
        raise ConfigError(
            f"reortho_every='auto' measures the spread of the exponents over the burn-in, which needs "
            f"burn_in >= {AUTO_MIN_BURN_IN} steps; got burn_in={burn_in!r} (or give an integer interval)."
        )
    steps = num_steps(inputs)
    if burn_in >= steps:
        raise ConfigError(f"burn_in must be < T = {steps}; got {burn_in}.")
    eps = unit_roundoff(x64)
    floor = eps ** (2.0 / 3.0)
    pilot_inputs = jax.tree.map(lambda a: a[:burn_in], inputs)
    pilot = _run(lyapunov_core, step, h0, pilot_inputs, q0, x64,
                 k=k, burn_in=0, reortho_every=1, method=method, key=key)  # fmt: skip
    if bool(pilot.diverged):
        return 1, dict(predicted=0.0, tolerance=floor, se=float("nan"), renormalise=False)
    ell = block_growth(pilot.running, np.arange(1, burn_in + 1))[burn_in // 2 :]
    n = ell.shape[0]
    if ell.shape[1] == 1:
        spread = np.zeros(n)
    else:
        spread = ell[:, 0] - ell[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        times = np.arange(1, n + 1)
        se, _ = within_run_errors(np.cumsum(ell, axis=0) / times[:, None], times)
        se_run = se * np.sqrt(n / (steps - burn_in))
    usable = se_run[np.isfinite(se_run) & (se_run > 0)]
    se_min = float(usable.min()) if usable.size else float("nan")
    tolerance = max(AUTO_SE_FRACTION * se_min, floor) if usable.size else floor
    kappa_max = auto_condition_bound(x64)
    a = float(np.abs(ell).mean(axis=0).max())
    cum = np.concatenate([[0.0], np.cumsum(spread)])
    m_max = max(1, min((steps - burn_in) // AUTO_MIN_BLOCKS, spread.size))
    errors = [0.0]
    with np.errstate(over="ignore", invalid="ignore"):
        for m in range(2, m_max + 1):
            s_m = float(np.exp(np.clip(cum[m:] - cum[:-m], None, 700.0)).mean())
            error = AUTO_ERROR_FACTOR * eps * (s_m + (m - 1) * a)
            if not (error <= tolerance and s_m <= kappa_max):
                break
            errors.append(error)
    best = len(errors)
    # An interval that divides both the burn-in and the accumulated steps compiles one block (no
    # shorter remainder block, burn-in fused with accumulation): take the largest such interval
    # if it keeps at least half the QR savings.
    even = max(m for m in range(1, best + 1) if burn_in % m == 0 and (steps - burn_in) % m == 0)
    if 2 * even >= best:
        best = even
    return best, dict(predicted=errors[best - 1], tolerance=float(tolerance), se=se_min,
                      renormalise=_renormalise_needed(ell, best, x64))


_AUTO_RULE = (
    "largest m with predicted blocking error <= max({f} x min_i SE_i, eps^(2/3)) (SE_i: the pilot's "
    "batch-means standard error over the second half of the burn-in, scaled to the run's length) and "
    "mean frame condition number <= eps^(-2/3); columns renormalised inside a block only when "
    "m max|per-step log growth| > {r} |ln tiny|"
)


def _reortho_attrs(requested: int | str, used: int, bound: float, info: dict | None, x64: bool,
                   renormalise: bool = True) -> dict:
    attrs = {
        "reortho_every": int(used),
        "reortho_requested": str(requested),
        "reortho_error_bound": float(bound),
        "reortho_error_bound_note": (
            "bound on |lambda_i(reortho_every) - lambda_i(QR every step)|, same dtype "
            "(dynlab.analyses.lyapunov.blocking_error_bound)"
        ),
        "reortho_renormalise": int(bool(renormalise) and int(used) > 1),
    }
    if info is not None:
        attrs["reortho_rule"] = _AUTO_RULE.format(f=AUTO_SE_FRACTION, r=AUTO_RANGE_FRACTION)
        attrs["reortho_condition_bound"] = auto_condition_bound(x64)
        attrs["reortho_predicted_error"] = float(info["predicted"])
        attrs["reortho_tolerance"] = float(info["tolerance"])
        attrs["reortho_pilot_se"] = float(info["se"])
    return attrs


def _resolve_reortho(step, h0, inputs, q0, x64, *, reortho_every, k, burn_in, method, key):
    """(interval, auto info or None, renormalise) for an integer or 'auto' `reortho_every`.

    An integer interval keeps the per-step renormalisation (nothing is known about the growth);
    'auto' decides it from its pilot."""
    if isinstance(reortho_every, str):
        if reortho_every != "auto":
            raise ConfigError(f"reortho_every must be an integer >= 1 or 'auto'; got {reortho_every!r}.")
        m, info = _auto_interval(step, h0, inputs, q0, x64, k=k, burn_in=burn_in, method=method, key=key)
        return m, info, info["renormalise"]
    return reortho_every, None, True
