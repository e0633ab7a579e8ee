"""Scenario ``pc-width-depth``: Innocenti et al.'s width/depth findings at full size, one verdict per claim.

Three PC-vs-BP comparisons (:func:`dynlab.analyses.pc_bp.compare_pc_bp`: separate PC and BP runs
from identical weights, closed-form equilibrated energy, Adam, one fixed MNIST batch of 64):

* ``mf-residual`` — the paper's Fig. 1/3 grid: linear residual networks, mean-field, α = 1/2,
  N ∈ {2, 8, 32, 128, 512, 2048} × L ∈ {2, 4, 8, 16, 32} × 3 seeds × 100 steps (most of the run's
  35 min on 2 CPU cores, measured);
* ``sp-mlp`` — the standard parameterisation, linear MLP, L = 5 (Figs. A.19/A.20);
* ``mf-mlp`` — mean-field MLPs without skips at L = 8 and 32 (Fig. A.7).

Each writes ``<name>.nc`` and its three figures (cosine heat map, s − 1 against L/N, loss curves);
``findings.nc`` holds one row per claim of the issue with the measured value, whether it holds, its
95% interval over seeds (leave-one-seed-out jackknife, Student t; none with one seed) and the
``margin``: how far that interval lies from the claim's threshold (> 0 wholly on the side where the
claim holds, < 0 wholly on the other, 0 straddling), and the same table is printed. A claim that
does not hold is reported, not tuned away.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.registry import register

COMPARISONS = {
    "mf-residual": dict(param="mf", alpha=0.5, residual=True),
    "sp-mlp": dict(param="sp", residual=False),
    "mf-mlp": dict(param="mf", residual=False),
}


@register("program", "pc-width-depth", "PC vs BP width/depth findings (Innocenti et al.), one verdict per claim")
def run_pc_width_depth(
    out_dir,
    *,
    progress=None,
    task: str = "mnist",
    widths: list[int] = (2, 8, 32, 128, 512, 2048),
    depths: list[int] = (2, 4, 8, 16, 32),
    sp_widths: list[int] = (8, 32, 128, 512),
    sp_depth: int = 5,
    mlp_widths: list[int] = (16, 64, 256, 1024),
    mlp_depths: list[int] = (8, 32),
    seeds: int = 3,
    steps: int = 100,
) -> dict:
    """Run the three comparisons; returns ``{name: dataset, "findings": dataset}`` (all also written)."""
    import click

    from dynlab import registry, store
    from dynlab.analyses import pc_bp_figures as figures_pc
    from dynlab.analyses.pc_bp import compare_pc_bp
    from dynlab.analyses.pc_bp import FEEDFORWARD_TASKS as TASKS
    from dynlab.errors import ConfigError

    if task not in TASKS:
        raise ConfigError(f"params.task must be one of {', '.join(sorted(TASKS))}, got {task!r}")
    data = registry.build("task", TASKS[task])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    grids = {"mf-residual": (widths, depths), "sp-mlp": (sp_widths, [sp_depth]), "mf-mlp": (mlp_widths, mlp_depths)}
    total = sum(len(w) * len(d) for w, d in grids.values())
    done, results = 0, {}
    for name, options in COMPARISONS.items():
        w, d = grids[name]

        def cell_done(_, __, info, name=name):
            nonlocal done
            done += 1
            if progress is not None:
                progress(done, total, {"comparison": name, **info})

        ds = compare_pc_bp(data, list(w), list(d), seeds, progress=cell_done, steps=steps, **options)
        store.write_dataset(out / f"{name}.nc", ds)
        for figure, fn in (("cosine", figures_pc.cosine_heatmap), ("rescaling", figures_pc.rescaling_vs_l_over_n),
                           ("loss", figures_pc.loss_curves)):
            store.write_figure(out / f"{name}_{figure}.png", fn(ds))
        results[name] = ds
    results["findings"] = findings(results["mf-residual"], results["sp-mlp"], results["mf-mlp"])
    store.write_dataset(out / "findings.nc", results["findings"])
    click.echo(format_findings(results["findings"]))
    return results


LEVEL = 0.95
"""Confidence level of the interval of every claim's value."""
POPULATION = "seeds (weight initialisations)"
METHOD = "leave-one-seed-out jackknife, Student t (n - 1 df)"


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim of the issue: its wording, the comparison it is measured on, its statistic and where it holds.

    The claim holds where the value lies in ``[lower, upper]`` (``< upper`` with ``strict``); a one-sided
    claim has the other end infinite.
    """

    text: str
    source: str  # "mf-residual", "sp-mlp" or "mf-mlp"
    statistic: Callable[[xr.Dataset], float]
    lower: float = -math.inf
    upper: float = math.inf
    strict: bool = False

    def holds(self, value: float) -> bool:
        if self.strict:
            return bool(self.lower < value < self.upper)
        return bool(self.lower <= value <= self.upper)

    def threshold(self, side: str) -> str:
        """The threshold on ``side`` (``"lower"``, ``"upper"``) or ``"band"``, in words."""
        two_sided = math.isfinite(self.lower) and math.isfinite(self.upper)
        if side == "band":
            return f"the band [{self.lower:g}, {self.upper:g}]"
        bound = self.lower if side == "lower" else self.upper
        return f"the {side} threshold {bound:g}" if two_sided else f"the threshold {bound:g}"


def _wide_min(ds: xr.Dataset) -> float:
    cos = ds.mean_cosine
    return float(cos.where((cos.width >= 512) & (cos.depth <= 8)).min())


def _rank_correlation(ds: xr.Dataset) -> float:
    from dynlab.statistics import spearman

    return spearman(ds.L_over_N.values.ravel(), ds.mean_cosine.values.ravel())[0]  # average ranks, NaN cells out


def claims(mlp_depth: int) -> list[Claim]:
    """The issue's claims, in the order of ``findings.nc`` (``mlp_depth``: the deepest no-skip MLP)."""
    return [
        Claim("mf residual: min mean cosine over N >= 512, L <= 8 (>= 0.99)", "mf-residual", _wide_min, lower=0.99),
        Claim("mf residual: rank correlation of mean cosine with L/N (decreasing: <= -0.8)", "mf-residual",
              _rank_correlation, upper=-0.8),
        Claim("mf residual: log-log slope of s - 1 against L/N (in [0.8, 1.2])", "mf-residual",
              lambda ds: float(ds.attrs["rescaling_slope"]), lower=0.8, upper=1.2),
        Claim("sp MLP: mean cosine at the widest N (does not approach 1: < 0.9)", "sp-mlp",
              lambda ds: float(ds.mean_cosine.isel(depth=0)[-1]), upper=0.9, strict=True),
        Claim(f"mf MLP without skips, L = {mlp_depth}: best mean cosine over N (breaks down at any width: < 0.9)",
              "mf-mlp", lambda ds: float(ds.mean_cosine.sel(depth=mlp_depth).max()), upper=0.9, strict=True),
    ]


def without_seed(ds: xr.Dataset, i: int) -> xr.Dataset:
    """``ds`` without its ``i``-th seed, with ``mean_cosine`` and ``rescaling_slope`` recomputed as
    :func:`dynlab.analyses.pc_bp.compare_pc_bp` computes them (mean over the remaining seeds and steps)."""
    from dynlab.analyses.pc_bp import rescaling_slope

    sub = ds.isel(seed=[j for j in range(ds.sizes["seed"]) if j != i])
    sub["mean_cosine"] = sub["cosine"].mean(("seed", "step"), skipna=True)
    sub.attrs = {**sub.attrs, "rescaling_slope": rescaling_slope(sub)[0]}
    return sub


def jackknife_interval(value: float, leave_one_out, level: float = LEVEL) -> tuple[float, float]:
    r"""Interval of ``value`` from its leave-one-seed-out values $\theta_{(i)}$, $i = 1..n$:

    $$\hat\theta \pm t_{(1+c)/2,\,n-1}\,\mathrm{SE}, \qquad
      \mathrm{SE}^2 = \frac{n-1}{n}\sum_i \big(\theta_{(i)} - \bar\theta_{(\cdot)}\big)^2,$$

    centred on the reported value. For a mean over seeds this is exactly the Student-t interval of the
    mean ($\mathrm{SE} = s/\sqrt n$); for the other statistics (a minimum or maximum of seed means, a
    rank correlation, a fitted slope) it is the delta-method interval over seeds. NaN bounds with fewer
    than 2 seeds or where a leave-one-out value is not finite.
    """
    import scipy.stats

    theta = np.asarray(leave_one_out, float)
    n = theta.size
    if n < 2 or not math.isfinite(value) or not np.isfinite(theta).all():
        return math.nan, math.nan
    se = math.sqrt((n - 1) / n * float(np.sum((theta - theta.mean()) ** 2)))
    half = float(scipy.stats.t.ppf((1 + level) / 2, n - 1)) * se
    return value - half, value + half


def margin(low: float, high: float, lower: float = -math.inf, upper: float = math.inf) -> float:
    """Signed distance of the interval ``[low, high]`` from the thresholds of a claim that holds on ``[lower, upper]``.

    - ``> 0``: the whole interval lies where the claim holds, this far from the nearest threshold;
    - ``< 0``: the whole interval lies where it does not hold, this far from the nearest threshold;
    - ``0``: the interval straddles (or touches) a threshold;
    - NaN: no interval (NaN bounds).
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return math.nan
    if lower <= low and high <= upper:
        return min(low - lower, upper - high)
    if high < lower:
        return high - lower
    if low > upper:
        return upper - low
    return 0.0


def verdict(claim: Claim, value: float, low: float, high: float, n_seeds: int,
            level: float = LEVEL) -> tuple[str, float, bool]:
    """``(text, margin, from_interval)``: the verdict on ``claim`` and how far its interval lies from the threshold.

    Whether the claim holds is decided by ``value`` (as before intervals were added); the margin is
    :func:`margin` of the interval ``[low, high]``, or of the value itself where there is no interval
    (fewer than 2 seeds), which the text then says.
    """
    if not math.isfinite(value):
        return "n/a (no such cells)", math.nan, False
    holds = claim.holds(value)
    word = "holds" if holds else "does not hold"
    from_interval = math.isfinite(low) and math.isfinite(high)
    lo, hi = (low, high) if from_interval else (value, value)
    m = margin(lo, hi, claim.lower, claim.upper)
    why = "fewer than 2 seeds" if n_seeds < 2 else "a leave-one-seed-out value is undefined"
    what = f"{100 * level:g}% CI [{low:.4g}, {high:.4g}]" if from_interval else \
        f"point estimate {value:.4g} (no interval: {why})"
    if from_interval and high == low:
        what += " (zero width: leaving out any one seed does not change the value)"
    if m == 0:
        edge = "lower" if lo <= claim.lower <= hi else "upper"
        if not from_interval:
            return f"{word}: {what} lies on {claim.threshold(edge)}", m, from_interval
        if lo <= claim.lower and claim.upper <= hi:
            return f"{word}, but the {what} covers {claim.threshold('band')}: not resolved by {n_seeds} seeds", m, True
        return f"{word}, but the {what} straddles {claim.threshold(edge)}: not resolved by {n_seeds} seeds", m, True
    if m > 0:
        if math.isfinite(claim.lower) and math.isfinite(claim.upper):
            edge = "lower" if lo - claim.lower <= claim.upper - hi else "upper"
            where = f"inside {claim.threshold('band')}, {m:.4g} from its {edge} end"
        elif math.isfinite(claim.lower):
            where = f"{m:.4g} above {claim.threshold('lower')}"
        else:
            where = f"{m:.4g} below {claim.threshold('upper')}"
    else:
        below = hi < claim.lower
        where = f"{-m:.4g} {'below' if below else 'above'} {claim.threshold('lower' if below else 'upper')}"
    return f"{word}: {what} lies {where}", m, from_interval


def findings(residual: xr.Dataset, sp: xr.Dataset, mlp: xr.Dataset, level: float = LEVEL) -> xr.Dataset:
    """The issue's claims from the three comparisons' mean cosines and slopes, one row each:

    - ``value``: the measured value (NaN where the grid has no cells the claim is about), ``holds``
      whether it lies where the claim holds (false for NaN);
    - ``ci_low``, ``ci_high``: its interval over seeds (:func:`jackknife_interval`; NaN with one seed),
      attrs ``ci_level``, ``ci_population``, ``ci_method``, ``ci_n``;
    - ``threshold_low``, ``threshold_high``: where the claim holds (infinite for one-sided claims);
    - ``margin``: how far the interval lies from the threshold (:func:`margin`: > 0 on the side where the
      claim holds, < 0 on the other, 0 straddling), from the value where there is no interval
      (``margin_from_interval`` false);
    - ``verdict``: the same in words, e.g. "holds: 95% CI [0.9912, 0.995] lies 0.0012 above the
      threshold 0.99".
    """
    from dynlab.statistics import Interval

    data = {"mf-residual": residual, "sp-mlp": sp, "mf-mlp": mlp}
    rows = []
    for claim in claims(int(mlp.depth.max())):
        ds = data[claim.source]
        value = float(claim.statistic(ds))
        n = ds.sizes["seed"]
        leave_one_out = [claim.statistic(without_seed(ds, i)) for i in range(n)] if n > 1 else []
        low, high = jackknife_interval(value, leave_one_out, level)
        text, m, from_interval = verdict(claim, value, low, high, n, level)
        rows.append((claim, value, claim.holds(value), low, high, m, from_interval, text))
    claim_list, values, holds, lows, highs, margins, from_interval, texts = zip(*rows)
    n_seeds = min(ds.sizes["seed"] for ds in data.values())
    ci = Interval(np.asarray(values), np.asarray(lows), np.asarray(highs), level, f"{n_seeds} {POPULATION}", METHOD,
                  n_seeds)
    ci_attrs = ci.attrs()
    return xr.Dataset(
        {
            "value": ("claim", np.asarray(values)),
            "holds": ("claim", np.asarray(holds, bool)),
            "ci_low": ("claim", np.asarray(lows), {**ci_attrs, "long_name": f"lower bound, {ci.label}"}),
            "ci_high": ("claim", np.asarray(highs), {**ci_attrs, "long_name": f"upper bound, {ci.label}"}),
            "threshold_low": ("claim", np.asarray([c.lower for c in claim_list]),
                              {"long_name": "the claim holds for values >= this (-inf: no lower threshold)"}),
            "threshold_high": ("claim", np.asarray([c.upper for c in claim_list]),
                               {"long_name": "the claim holds for values <= this (< for the strict claims; "
                                             "inf: no upper threshold)"}),
            "margin": ("claim", np.asarray(margins), {
                "units": "units of value",
                "long_name": "signed distance of the confidence interval from the nearest threshold",
                "description": "> 0: the whole interval lies where the claim holds, this far from the threshold; "
                               "< 0: the whole interval lies where it does not hold; 0: the interval straddles the "
                               "threshold; from the value itself where margin_from_interval is false (one seed)"}),
            "margin_from_interval": ("claim", np.asarray(from_interval, bool),
                                     {"long_name": "margin measured from the interval (false: from the point value)"}),
            "verdict": ("claim", np.asarray(texts, dtype=object)),
        },
        coords={"claim": [c.text for c in claim_list]},
        attrs={"analysis": "pc-width-depth findings", **ci.attrs(), "ci_label": ci.label},
    )


def format_findings(ds: xr.Dataset) -> str:
    """The findings as a table: claim, measured value, interval, margin from the threshold, verdict."""
    label = ds.attrs.get("ci_label", f"{100 * LEVEL:g}% CI")
    lines = [f"interval: {label}; margin: signed distance of the interval from the threshold "
             "(> 0 on the side where the claim holds, < 0 on the other, 0 straddling)",
             "claim | measured | interval | margin | verdict"]
    for c, v, lo, hi, m, text in zip(ds.claim.values, ds.value.values, ds.ci_low.values, ds.ci_high.values,
                                     ds.margin.values, ds.verdict.values):
        if not np.isfinite(v):
            lines.append(f"{c} | n/a (no such cells) | - | - | -")
            continue
        interval = f"[{lo:.4f}, {hi:.4f}]" if np.isfinite(lo) and np.isfinite(hi) else "none (1 seed)"
        lines.append(f"{c} | {v:.4f} | {interval} | {'0 (straddles)' if m == 0 else f'{m:+.4f}'} | {text}")
    return "\n".join(lines)
