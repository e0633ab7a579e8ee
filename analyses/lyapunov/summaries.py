r"""Summaries of a Lyapunov spectrum (NumPy, vectorised over leading axes; exponents on the last axis):
the largest exponent, the sum of the positive ones (an entropy-rate bound), the Kaplan–Yorke
dimension, and how many are positive or zero."""

from __future__ import annotations

import numpy as np
from jaxtyping import ArrayLike

from dynlab.errors import ConfigError


def _descending(exponents: ArrayLike) -> np.ndarray:
    lam = np.asarray(exponents, dtype=float)
    if lam.ndim == 0 or lam.shape[-1] == 0:
        raise ConfigError("Expected a non-empty array of exponents on the last axis.")
    return -np.sort(-lam, axis=-1)


def largest_exponent(exponents: ArrayLike) -> np.ndarray:
    r"""The largest exponent $\lambda_1 = \max_i \lambda_i$ (NaN if any exponent is NaN)."""
    return np.max(np.asarray(exponents, dtype=float), axis=-1)


def sum_positive_exponents(exponents: ArrayLike) -> np.ndarray:
    r"""Sum of the positive exponents, $\sum_i \max(\lambda_i, 0)$.

    By Ruelle's inequality this bounds the Kolmogorov–Sinai entropy rate from above,
    $h_{\mathrm{KS}} \le \sum_{\lambda_i > 0} \lambda_i$ (nats per step), with equality (Pesin's
    identity) for SRB measures. From $k < N$ exponents it is exact as long as
    $\lambda_k \le 0$, and a lower bound on the full sum otherwise.
    """
    lam = np.asarray(exponents, dtype=float)
    total = np.where(lam > 0, lam, 0.0).sum(axis=-1)
    return np.where(np.isnan(lam).any(axis=-1), np.nan, total)


def count_positive_exponents(exponents: ArrayLike, tol: float = 1e-3) -> np.ndarray:
    r"""Number of exponents with $\lambda_i \ge \texttt{tol}$.

    Exponents within the zero band $|\lambda_i| < \texttt{tol}$ (see [`count_zero_exponents`][])
    are not counted as positive, so positive, zero and negative counts add up to $k$.
    NaNs count as neither.
    """
    return np.sum(np.asarray(exponents, dtype=float) >= tol, axis=-1)


def count_zero_exponents(exponents: ArrayLike, tol: float = 1e-3) -> np.ndarray:
    r"""Number of near-zero exponents, $|\lambda_i| < \texttt{tol}$.

    A flow sampled at discrete times has one exact zero exponent per continuous symmetry (time
    translation); numerically it is zero only to $O(1/T)$, hence the tolerance, in the same
    units (per step) as the exponents.
    """
    return np.sum(np.abs(np.asarray(exponents, dtype=float)) < tol, axis=-1)


def kaplan_yorke_dimension(exponents: ArrayLike) -> np.ndarray:
    r"""Kaplan–Yorke (Lyapunov) dimension of a spectrum.

    With the exponents in descending order and partial sums $S_j = \sum_{i \le j} \lambda_i$,
    let $j$ be the largest index with $S_j \ge 0$. Then

    $$D_{\mathrm{KY}} = j + \frac{S_j}{|\lambda_{j+1}|}.$$

    Since $S_0 = 0$ and the increments $\lambda_i$ decrease, $S$ is concave, so $\{j : S_j \ge 0\}$
    is an initial run $1, \dots, j$. Edge cases:

    - $\lambda_1 < 0$ (no non-negative partial sum): $D_{\mathrm{KY}} = 0$ (a stable fixed point);
    - $S_k \ge 0$ (no partial sum of the $k$ given exponents is negative):
      $D_{\mathrm{KY}} = k$. If $k$ is the full
      state dimension this is exact (no contraction of $k$-volumes); if $k < N$ it is only a
      lower bound, since the missing exponents would be needed to find $j$;
    - $\lambda_{j+1} = -\infty$: $D_{\mathrm{KY}} = j$.

    NaN if any exponent is NaN. Example: the Lorenz spectrum $(0.9056, 0, -14.5723)$ gives
    $2 + 0.9056/14.5723 \approx 2.0621$.
    """
    lam = _descending(exponents)
    k = lam.shape[-1]
    partial = np.cumsum(lam, axis=-1)
    j = np.sum(partial >= 0, axis=-1)  # the concave run S_1..S_j >= 0
    idx = np.clip(j, 1, k)[..., None]
    s_j = np.take_along_axis(partial, idx - 1, axis=-1)[..., 0]
    lam_next = np.take_along_axis(lam, np.minimum(idx, k - 1), axis=-1)[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        interior = j + s_j / np.abs(lam_next)
    dim = np.where(j == 0, 0.0, np.where(j == k, float(k), interior))
    return np.where(np.isnan(lam).any(axis=-1), np.nan, dim)


def positive_sum_bounds(ci) -> tuple[float, float, float, str]:
    r"""The sum of positive exponents from the exponents' intervals: ``(estimate, low, high, label)``.

    The plug-in $\sum_i \max(\hat\lambda_i, 0)$ is biased upward wherever a true exponent is 0
    or near it (the positive part of a noisy zero has a positive mean), so its t interval misses
    0: measured 0.33-0.385 coverage where the exponents are 0. Instead, with each exponent's
    interval $[l_i, u_i]$ (``ci``, an [`dynlab.statistics.Interval`][] over the exponents),

    $$\Big[\sum_i \max(l_i, 0),\ \sum_i \max(u_i, 0)\Big]$$

    holds the sum whenever every exponent's interval holds its exponent (the sum is increasing in
    each): its level is at least that of the joint intervals. The estimate is the sum of the
    exponents resolved as positive ($l_i > 0$), which lies between the bounds and is 0 when
    none is.
    """
    low, high, mean = (np.asarray(v, float) for v in (ci.low, ci.high, ci.estimate))
    estimate = float(np.sum(np.where(low > 0, mean, 0.0)))
    label = (f"from the exponents' {ci.label}: sum of max(bound, 0) "
             "(holds the sum wherever every exponent's interval holds; the plug-in sum is biased upward)")
    return estimate, float(np.sum(np.maximum(low, 0.0))), float(np.sum(np.maximum(high, 0.0))), label


def _derived_quantities(exponents: np.ndarray, tol: float) -> dict[str, tuple[np.ndarray, str, str]]:
    """name -> (values over the leading axes, long_name, units) of the spectrum summaries."""
    return {
        "largest": (largest_exponent(exponents), "largest Lyapunov exponent", "per step"),
        "positive_sum": (
            sum_positive_exponents(exponents),
            "sum of positive exponents (entropy-rate bound)",
            "nats per step",
        ),
        "ky_dimension": (kaplan_yorke_dimension(exponents), "Kaplan-Yorke dimension", "1"),
        "n_positive": (count_positive_exponents(exponents, tol), "number of exponents >= tol", "1"),
        "n_zero": (count_zero_exponents(exponents, tol), "number of exponents with |l| < tol", "1"),
    }



def interpret_spectrum(ds) -> str:
    r"""One line saying what a Lyapunov dataset's numbers mean, computed from them.

    ``ds`` is a dataset of [`lyapunov_replicates`][dynlab.analyses.lyapunov.lyapunov_replicates]
    (or of the ``lyapunov`` analysis): the reading rests on the leading exponent $\lambda_1$ and
    its interval (``mean``, ``ci_low``, ``ci_high`` of exponent 1, level ``ci_level``: the first
    row of the printed table, whose standard error is at least the within-run and the rounding
    error) and on the other exponents' intervals:

    - interval entirely below 0: *stable, not chaotic* — every small perturbation shrinks, the
      slowest by the factor $e^{\lambda_1} < 1$ per step, to $1/e$ of its size in
      $1/|\lambda_1|$ steps;
    - entirely above 0: *chaotic* — nearby trajectories separate by $e^{\lambda_1} > 1$ per step;
      the line adds how many exponents have an interval above 0 and the Kaplan–Yorke dimension
      (a lower bound when not all of the state's exponents were computed, see
      [`kaplan_yorke_dimension`][]);
    - containing 0: *marginal* — neither growth nor decay of the leading perturbation is
      resolved at this precision (a neutral direction, or the "edge of chaos"); chaos is neither
      shown nor excluded.

    A non-finite $\lambda_1$ (a diverged trajectory) gets a line that says so.
    """
    import numpy as np

    lam, low, high = (float(ds[v][0]) for v in ("mean", "ci_low", "ci_high"))
    if not np.isfinite([lam, low, high]).all():
        return "λ1 or its interval is not finite (a run diverged): no reading of stability or chaos"
    level = f"{100 * float(ds.attrs.get('ci_level', ds.attrs.get('confidence', 0.95))):g}%"
    k = int(ds.sizes["exponent"])
    value = f"{lam:+.5f}" if abs(lam) >= 1e-3 else f"{lam:+.2e}"
    head = f"λ1 = {value} ± {(high - low) / 2:.1e} ({level} CI)"
    growth = float(np.exp(lam))
    if high < 0:
        return (f"{head} < 0: stable, not chaotic; every small perturbation shrinks, by e^λ1 = {growth:.3f} per step "
                f"or faster (1/e in {1 / abs(lam):.3g} steps)")
    if low > 0:
        n_up = int((np.asarray(ds["ci_low"]) > 0).sum())
        ky = float(ds["ky_dimension_mean"])
        bound = ky >= k and k < int(ds.attrs.get("state_dim", k))  # no negative partial sum among the k computed
        return (f"{head} > 0: chaotic; nearby trajectories separate by e^λ1 = {growth:.3f} per step (e-fold in "
                f"{1 / lam:.3g} steps), {n_up} of {k} exponents > 0, Kaplan–Yorke dim {'>= ' if bound else ''}{ky:.2f}")
    return (f"{head} contains 0: marginal, the leading perturbation neither grows nor shrinks measurably "
            f"(e^λ1 = {growth:.4f} per step; a neutral direction or the edge of chaos); chaos neither shown nor excluded")


def _interval_counts(ds) -> str:
    """How many exponents' intervals lie above 0, contain 0, lie below 0: "a / b / c"."""
    low, high = np.asarray(ds.ci_low), np.asarray(ds.ci_high)
    return f"{int((low > 0).sum())} / {int(((low <= 0) & (high >= 0)).sum())} / {int((high < 0).sum())}"


def lyapunov_summary(ds, quiet: bool = False, show: int = 12) -> str:
    """What ``dynlab analyze lyapunov`` prints: the table of exponents, the summary line and the
    reading line ([`interpret_spectrum`][]); unless ``quiet``, the line saying what the columns
    mean, how the QR steps and the burn-in were chosen."""
    from rich.table import Table

    from dynlab.analyses.tables import render

    level = f"{100 * ds.attrs['ci_level']:g}%"
    table = Table(title=f"Lyapunov exponents per step — {ds.attrs['protocol']}, state dim {ds.attrs['state_dim']}\n"
                        f"mean and {level} CI over {ds.attrs['ci_population']} (Student t); "
                        f"{ds.attrs['n_ic']} initial conditions each")
    table.add_column("i", justify="right")
    table.add_column("mean λ_i", justify="right")
    table.add_column(f"± {level} CI ({ds.attrs['n_realisations']} realisations)", justify="right")
    table.add_column("within-run SE", justify="right")
    table.add_column("IC sd (multistab.)", justify="right")
    k = ds.sizes["exponent"]

    def number(x, fmt="+.5f"):
        return "—" if not np.isfinite(x) else format(x, fmt)

    groups = ds["cluster"].values if "cluster" in ds else np.arange(1, k + 1)
    last = {g: int(np.flatnonzero(groups == g)[-1]) + 1 for g in np.unique(groups)}

    def shared(i):  # "[6-9]": the cluster of exponents the frame has not separated that i belongs to
        g = int(groups[i])
        return f" [{g}-{last[g]}]" if last[g] > g else ""

    def bounds(i):  # "± h", or "+u -d" where the upper bound reaches those above the exponent
        up, down = float(ds.ci_high[i]) - float(ds["mean"][i]), float(ds["mean"][i]) - float(ds.ci_low[i])
        if not np.isfinite(up + down) or np.isclose(up, down, rtol=1e-6, atol=0):
            return number((up + down) / 2, ".1e")
        return f"+{number(up, '.1e')} -{number(down, '.1e')}"

    for i in range(min(k, show)):
        table.add_row(str(i + 1), number(float(ds["mean"][i])), bounds(i) + shared(i),
                      number(float(ds.within_run_se_of_mean[i]), ".2g"), number(float(ds.ic_sd_mean[i]), ".1e"))
    if k > show:
        table.add_row("…", f"({k - show} more in the dataset)", "", "", "")
    counts = _interval_counts(ds)
    lines = [table, (
        f"largest = λ1, row 1 above   sum of positive exponents {float(ds.positive_sum_mean):.5f} "
        f"in [{float(ds.positive_sum_ci_low):.5f}, {float(ds.positive_sum_ci_high):.5f}] (from the rows' intervals; "
        f"the sum of the exponents resolved > 0)   Kaplan–Yorke dim {float(ds.ky_dimension_mean):.3f}   "
        f"intervals above / containing / below 0: {counts}   (sum over the k={k} computed: {float(ds['mean'].sum()):+.5f})"
        + ("   [lower bounds: not all exponents computed]" if k < ds.attrs["state_dim"] else ""))]
    burn = (f"burn-in {ds.attrs['burn_in']} of {ds.attrs['steps_total']} steps ({ds.attrs['burn_in_fixed']} fixed"
            + (f" + {ds.attrs['burn_in_truncated']} dropped by the MSER rule" if ds.attrs.get("burn_in_requested") == "auto"
               else "") + (", repeated over twice the steps: the transient outlasted the first window"
                           if ds.attrs.get("burn_in_extended") else "") + ")") if "burn_in_fixed" in ds.attrs else ""
    if not quiet:
        lines.append(
            ("\\[i-j]: exponents the QR frame has not separated at this run length; an estimate among them "
               "can sit below its truth by up to the distance to those above it, so its upper bound (+) reaches "
               "theirs; " if any(last[g] > g for g in last) else "") +
            f"within-run SE: standard error that time averaging alone leaves in the mean over the realisations "
            f"(pooled autocovariances of their local exponents: 0 where these telescope, as in a rotating frame; "
            f"each run's batch-means SE is within_run_se in the dataset); "
            f"IC sd: spread over initial conditions under one input (multistability, not an error bar); "
            f"QR every {ds.attrs['reortho_every']} steps ({ds.attrs['reortho_requested']}), "
            f"blocking error <= {ds.attrs['reortho_error_bound']:.1e}; {burn}"
        )
    return render(*lines) + "\n" + interpret_spectrum(ds)
