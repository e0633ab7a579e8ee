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

from typing import NamedTuple

from dynlab.analyses.lyapunov.core import Method, StepFn, _lu_growth_core, _run, _state_dim, lyapunov_core, num_steps
from dynlab.analyses.lyapunov.within_run import block_growth, unit_roundoff, within_run_errors
from dynlab.errors import ConfigError


AUTO_ERROR_FACTOR = 20.0
r"""$C$ in the blocking-error bound of [`blocking_error_bound`][].

Calibrated on full spectra of tanh RNNs ($N = 12$ and $40$; float32 $m = 2..4$, float64
$m = 4..10$): the largest error of any exponent against a QR every step was at most 1.8 times
$\epsilon\,\overline{\kappa}$, the smallest exponent's error at most 0.15 times it. $C = 10$ was
not a bound: over 39 runs of issue 38 one exceeded it (4.33e-6 against 4.06e-6, ratio 1.07);
`benchmarks/reortho_bound.py` (80 driven tanh RNNs, N = 12 full and N = 40 with k = 4, g = 0.9-2,
float32 and float64) found ratios of error to the $C = 10$ bound up to 0.66 (float32, N = 40).
$C = 20$ puts the largest ratio measured at 0.53 of the bound. Its cost, on the default fresh 64-neuron
ARU under the adding task (k = 16, float32, where the floor tolerance $\epsilon^{2/3}$ binds): the
interval chosen over the 500-step burn-in stays 25 steps; over the 2000-step burn-in of the repeated
measurement it falls from 50 to 25 steps.
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
conservative ($C = 20$, at least twice the largest error measured)."""
AUTO_RANGE_FRACTION = 0.25
r"""`"auto"` drops the per-step column renormalisation inside a block when $m \max_{i,t}|\ell_{i,t}|$
(the largest per-step log growth of any exponent in the pilot, times the interval) is at most this
fraction of $|\ln(\text{smallest normal float})|$ (87.3 in float32, 708.4 in float64): a margin of
4x for growths larger than the pilot saw."""


AUTO_LU_ERROR_FACTOR = 100.0
r"""$C_{\rm LU}$, the constant of [`blocking_error_bound`][] for runs with a pivoted LU inside the blocks.

Its condition estimate (the spread of each factor's diagonal) is only a lower bound on the frame's
condition number, $\kappa(L)$ is not in it, and it is looser for large frames. Calibrated on full
spectra of tanh RNNs in float64 ($N = 16..256$, $g = 1.2..3$, $m = 12..24$, $p = 2..6$, 60 runs):
wherever the error against a QR every step exceeded rounding ($10^{-11}$), it was at most $22\,\epsilon
\overline{\kappa}$ (a 256-unit autonomous RNN; at most $0.23\,\epsilon\overline{\kappa}$ for
$N \le 128$); $C_{\rm LU} = 100$ leaves a factor 4.5."""
AUTO_LU_MIN_K = 16
"""`"auto"` considers re-triangularising by a pivoted LU inside blocks (`lu_every`) only in float64 and
for at least this many exponents; below it the factorisation is a small part of a step, and in float32
the LU frame's rounding error is too large (measured: a 256-unit RNN with an LU every step moves the
smallest exponents by 0.17 SE of the run, against 1.5e-10 SE in float64)."""
AUTO_LU_COST = 0.5
r"""The cost of a pivoted LU relative to a Householder QR of the same frame that `"auto"` assumes when it
weighs `lu_every` against plain blocking. Measured on a 2-core CPU (float64, LAPACK `getrf` against
`geqrf` + `orgqr`): 0.25 at $256\times256$, 0.52 at $64\times64$; the larger value is taken."""


def auto_condition_bound(x64: bool) -> float:
    r"""$\kappa_{\max} = \epsilon^{-2/3}$: the largest mean condition number of the frame between QRs
    that `reortho_every="auto"` allows (float32: $2^{16} = 6.6\cdot10^4$, float64: $4.3\cdot10^{10}$).

    Each QR tilts the frame by about $\epsilon\kappa$; the cap keeps that below
    $\epsilon^{1/3}$ ($3.9\cdot10^{-3}$ / $4.8\cdot10^{-6}$), so the frame keeps a third of its
    digits and the first-order bound [`blocking_error_bound`][] stays in the range where it was
    calibrated. In practice the statistical rule ([`AUTO_SE_FRACTION`][]) binds first in float32;
    in float64 the cap binds when the run is long and the spread large."""
    return unit_roundoff(x64) ** (-2.0 / 3.0)


def blocking_error_bound(growth: ArrayLike, reortho_every: int, x64: bool, *, lu_every: int = 0,
                         condition: ArrayLike | None = None) -> float:
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

    **With a pivoted LU inside the blocks** (`lu_every` $= p \ge 1$, `condition` the run's
    [`LyapunovResult`][]`.condition`, `[..., n_qr]`): the frame is re-factorised every $p$ steps, so
    the block growth says nothing about its conditioning; $\overline\kappa$ is then the largest
    (over runs) mean of `condition`, the measured condition estimate at each factorisation, and

    $$B = C_{\rm LU}\,\epsilon\,\Big(\overline{\kappa} + (m - 1 + k)\,\bar a\Big),$$

    $C_{\rm LU}$ = [`AUTO_LU_ERROR_FACTOR`][], the extra $k\bar a$ for rounding that the two runs no
    longer share (Householder every step against LU frames: their own rounding differs by up to
    $1.1\cdot10^{-12} \approx 4k\bar a\,\epsilon$ on a 256-unit RNN at $p = 1$).
    """
    if reortho_every == 1:
        return 0.0
    g = np.asarray(growth, np.float64)
    cond = None if condition is None else np.asarray(condition, np.float64)
    if g.shape[-2] > 1:
        g = g[..., :-1, :]  # the last block may be shorter
        cond = None if cond is None else cond[..., :-1]
    with np.errstate(over="ignore", invalid="ignore"):
        if lu_every:
            if cond is None:
                raise ValueError("blocking_error_bound: lu_every needs the run's condition estimates")
            kappa = cond.mean(axis=-1)
        else:
            kappa = np.exp(np.clip(g[..., :, :1] - g[..., :, -1:], None, 700.0)).mean(axis=(-2, -1))
        a = np.abs(g).mean(axis=-2).max(axis=-1) / reortho_every
    extra = reortho_every - 1 + (g.shape[-1] if lu_every else 0)
    worst = np.nanmax(np.reshape(kappa + extra * a, -1)) if np.size(kappa) else np.nan
    return float((AUTO_LU_ERROR_FACTOR if lu_every else AUTO_ERROR_FACTOR) * unit_roundoff(x64) * worst)


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
    r"""`reortho_every="auto"`: $m$ (and `lu_every`) from a pilot run over the burn-in, and what it was
    chosen against.

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

    **Pivoted LU inside blocks** (float64 and $k \ge$ [`AUTO_LU_MIN_K`][]). There the pilot
    re-triangularises by a row-pivoted LU after every step instead of a QR (`_lu_growth_core`: a
    quarter to a half of the cost), $\ell_{i,t} = \ln|U_{ii}|$ and $d_t = \max_i \ell_{i,t} -
    \min_i \ell_{i,t}$ (which bounds the spread of any window's sum from above, so $S_p$
    over-predicts the frame's condition); sums of the $\ell$ over a window differ from the QR's by a
    bounded boundary term, which the batch means (over windows of many steps) hardly see. Plain
    blocking is chosen as above; if it stops short of $m_{\max}$, the alternative is blocks of
    $m_{\rm LU}$ (the $m_{\max}$ made to divide burn-in and $T'$ as above) with an LU every $p$
    steps inside, $p$ the largest with $E^{\rm LU}_p = C_{\rm LU}\epsilon\,(S_p + (m_{\rm LU} - 1 + k)\,\bar a)
    \le \tau$ and $S_p \le \kappa_{\max}$ (the form of [`blocking_error_bound`][] with `lu_every`;
    a block's last sub-block is shorter where $p$ does not divide $m_{\rm LU}$). It is taken when its
    factorisation cost per step, $\rho\,\lfloor (m_{\rm LU} - 1)/p \rfloor / m_{\rm LU} + 1/m_{\rm LU}$
    QRs with $\rho$ = [`AUTO_LU_COST`][], is below plain blocking's $1/m$.

    The per-step renormalisation inside a block is dropped when the pilot's growths are far
    inside the dtype's range (`_renormalise_needed`; with an LU every $p$ steps, over $p$ steps).

    Returns `(m, info)`, `info` with `predicted` ($E_m$ or $E^{\rm LU}_p$), `tolerance` ($\tau$),
    `se` ($\min_i \mathrm{SE}_i$ or NaN), `renormalise`, `lu_every` ($p$, or 0), `pilot`
    (`"qr"` or `"lu"`) and, after an LU pilot that did not diverge, `end`: its final state and frame
    (the frame is re-orthonormalised where a run goes on from it, an exact change of basis of the
    same flag; [`lyapunov_spectrum`][] does, so that its pilot is its burn-in).
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
    n_exp = k if k is not None else (int(np.shape(q0)[1]) if q0 is not None else _state_dim(h0))
    use_lu = bool(x64) and n_exp >= AUTO_LU_MIN_K
    if use_lu:
        ell_all, diverged, end_state, end_frame = _run(_lu_growth_core, step, h0, pilot_inputs, q0, x64,
                                                       k=k, method=method, key=key)
        diverged = bool(diverged)
    else:
        pilot = _run(lyapunov_core, step, h0, pilot_inputs, q0, x64,
                     k=k, burn_in=0, reortho_every=1, method=method, key=key)  # fmt: skip
        diverged = bool(pilot.diverged)
    if diverged:
        return 1, dict(predicted=0.0, tolerance=floor, se=float("nan"), renormalise=False, lu_every=0,
                       pilot="lu" if use_lu else "qr")
    if use_lu:
        ell = np.asarray(ell_all, np.float64)[burn_in // 2 :]
    else:
        ell = block_growth(pilot.running, np.arange(1, burn_in + 1))[burn_in // 2 :]
    n = ell.shape[0]
    if ell.shape[1] == 1:
        spread = np.zeros(n)
    elif use_lu:
        spread = ell.max(axis=1) - ell.min(axis=1)
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

    def condition(m):
        return float(np.exp(np.clip(cum[m:] - cum[:-m], None, 700.0)).mean())

    def even(m):
        # An interval that divides both the burn-in and the accumulated steps compiles one block (no
        # shorter remainder block, burn-in fused with accumulation): take the largest such interval
        # if it keeps at least half the QR savings.
        best_even = max(j for j in range(1, m + 1) if burn_in % j == 0 and (steps - burn_in) % j == 0)
        return best_even if 2 * best_even >= m else m

    errors = [0.0]
    with np.errstate(over="ignore", invalid="ignore"):
        for m in range(2, m_max + 1):
            s_m = condition(m)
            error = AUTO_ERROR_FACTOR * eps * (s_m + (m - 1) * a)
            if not (error <= tolerance and s_m <= kappa_max):
                break
            errors.append(error)
    best = even(len(errors))
    info = dict(predicted=errors[best - 1], tolerance=float(tolerance), se=se_min,
                renormalise=_renormalise_needed(ell, best, x64), lu_every=0, pilot="lu" if use_lu else "qr")
    if use_lu:  # where the pilot ended: a single run can go on from there instead of repeating the burn-in
        info["end"] = (end_state, end_frame)
    if use_lu and len(errors) < m_max:
        m_lu = even(m_max)
        lu_errors = []
        with np.errstate(over="ignore", invalid="ignore"):
            for p in range(1, m_lu):
                s_p = condition(p)
                error = AUTO_LU_ERROR_FACTOR * eps * (s_p + (m_lu - 1 + n_exp) * a)
                if not (error <= tolerance and s_p <= kappa_max):
                    break
                lu_errors.append(error)
        if lu_errors:
            p = len(lu_errors)  # the last sub-block of a block may be shorter (m_lu - 1) % p + 1 steps
            cost_lu = AUTO_LU_COST * ((m_lu - 1) // p) / m_lu + 1.0 / m_lu
            if cost_lu < 1.0 / best:
                best = m_lu
                info.update(predicted=lu_errors[p - 1], lu_every=p, renormalise=_renormalise_needed(ell, p, x64))
    return best, info


_AUTO_RULE = (
    "largest m with predicted blocking error <= max({f} x min_i SE_i, eps^(2/3)) (SE_i: the pilot's "
    "batch-means standard error over the second half of the burn-in, scaled to the run's length) and "
    "mean frame condition number <= eps^(-2/3); columns renormalised inside a block only when "
    "m max|per-step log growth| > {r} |ln tiny|"
)
_AUTO_RULE_LU = (
    "; float64 with k >= {k}: pilot with a pivoted LU every step, and blocks of m = min(T'/32, pilot steps) with a "
    "pivoted LU every lu_every steps inside when the same tolerance allows it and it needs fewer factorisations "
    "(an LU counted as {c} QR), error constant {e:g}"
)


class Reortho(NamedTuple):
    """What an integer or `"auto"` `reortho_every` resolves to (`_resolve_reortho`)."""

    every: int
    info: dict | None
    renormalise: bool
    lu_every: int


def _reortho_attrs(requested: int | str, used: int, bound: float, info: dict | None, x64: bool,
                   renormalise: bool = True, lu_every: int = 0) -> dict:
    attrs = {
        "reortho_every": int(used),
        "reortho_requested": str(requested),
        "reortho_error_bound": float(bound),
        "reortho_error_bound_note": (
            "bound on |lambda_i(reortho_every) - lambda_i(QR every step)|, same dtype "
            "(dynlab.analyses.lyapunov.blocking_error_bound)"
        ),
        "reortho_renormalise": int(bool(renormalise) and int(used) > 1),
        "reortho_lu_every": int(lu_every),
    }
    if info is not None:
        rule = _AUTO_RULE.format(f=AUTO_SE_FRACTION, r=AUTO_RANGE_FRACTION)
        if info.get("pilot") == "lu":
            rule += _AUTO_RULE_LU.format(k=AUTO_LU_MIN_K, c=AUTO_LU_COST, e=AUTO_LU_ERROR_FACTOR)
        attrs["reortho_rule"] = rule
        attrs["reortho_condition_bound"] = auto_condition_bound(x64)
        attrs["reortho_predicted_error"] = float(info["predicted"])
        attrs["reortho_tolerance"] = float(info["tolerance"])
        attrs["reortho_pilot_se"] = float(info["se"])
    return attrs


def _check_lu_every(lu_every) -> int:
    if isinstance(lu_every, bool) or not isinstance(lu_every, (int, np.integer)) or lu_every < 0:
        raise ConfigError(f"lu_every must be an integer >= 0 (0: no LU inside a block); got {lu_every!r}.")
    return int(lu_every)


def _resolve_reortho(step, h0, inputs, q0, x64, *, reortho_every, k, burn_in, method, key, lu_every=0) -> Reortho:
    """The interval, the auto info (or None), the renormalisation and `lu_every` for an integer or 'auto'
    `reortho_every`.

    An integer interval keeps the per-step renormalisation (nothing is known about the growth) and the
    given `lu_every`; 'auto' decides both from its pilot (and then takes no `lu_every`)."""
    lu_every = _check_lu_every(lu_every)
    if isinstance(reortho_every, str):
        if reortho_every != "auto":
            raise ConfigError(f"reortho_every must be an integer >= 1 or 'auto'; got {reortho_every!r}.")
        if lu_every:
            raise ConfigError("lu_every is chosen by reortho_every='auto'; give it only with an integer reortho_every.")
        m, info = _auto_interval(step, h0, inputs, q0, x64, k=k, burn_in=burn_in, method=method, key=key)
        return Reortho(m, info, info["renormalise"], info["lu_every"])
    return Reortho(reortho_every, None, True, lu_every)
