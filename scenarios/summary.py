"""Short result summaries that ``dynlab run`` prints when a scenario has finished.

Every long command ends with its results in the terminal, not only with the names of the files
that hold them: a sweep gets [`sweep_summary`][] (its headline numbers per cell, over seeds as
mean and 95% interval), a programmed scenario the ``summary`` registered with its program
(``@register("program", NAME, summary=fn)``, ``fn(datasets) -> str`` on the datasets the
program returns), built from [`over_seeds`][] and [`text_table`][]. Intervals come from
[`dynlab.statistics.bounded_interval`][] (Student t, ddof = 1, kept inside the quantity's
declared range) and are printed in the digits their width supports; one seed gives the value
alone, seeds that all agree the value and their number.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from dynlab.figures import REFERENCE_SUFFIXES, last_finite, result_ok

MAX_ROWS = 12
"""Rows of a summary table beyond which the table says how many more the dataset holds."""


def over_seeds(values, fmt: str | None = None, censored=None, bounds=(-math.inf, math.inf)) -> str:
    """The mean over the last axis (seeds) and its 95% interval, in digits the interval's width
    supports ([`dynlab.statistics.interval_text`][]: ``"0.99948 ± 0.00052"``, not ``"1 ± 0.00052"``).

    ``bounds``: the values the quantity can take (an accuracy ``(0, 1)``, a count ``(0, inf)``);
    the interval stays inside them ([`dynlab.statistics.bounded_interval`][]), so a count prints
    ``"7 [0, 20]"``, not ``"7 ± 13"``. Seeds that all agree print the value and how many agree
    (``"8 (all 3 seeds)"``): a spread of 0 is not an interval. One finite seed gives the value
    alone, none ``"—"``. ``fmt``: a format for the mean instead (``"m ± h"``, the half-width to 2
    digits). ``censored`` (booleans like ``values``): values that are bounds, not measurements; if
    any is, the text starts with ``≤``."""
    from dynlab.statistics import bounded_interval, interval_text

    x = np.asarray(values, float).ravel()
    mark = "≤" if censored is not None and np.asarray(censored, bool).any() else ""
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return "—"
    if finite.size == 1:
        return f"{mark}{finite[0]:{fmt or '.4g'}}"
    if np.ptp(finite) == 0:
        return f"{mark}{finite[0]:{fmt or '.4g'}} (all {finite.size} seeds)"
    ci = bounded_interval(finite, bounds=bounds, population="seeds")
    if fmt is not None:
        return f"{mark}{float(ci.estimate):{fmt}} ± {(float(ci.high) - float(ci.low)) / 2:.2g}"
    return mark + interval_text(float(ci.estimate), float(ci.low), float(ci.high))


def text_table(header: list[str], rows: list[list[str]], max_rows: int | None = MAX_ROWS) -> str:
    """A plain fixed-width table (first column left-aligned, the others right-aligned), at most
    ``max_rows`` rows (``None``: all)."""
    max_rows = len(rows) if max_rows is None else max_rows
    shown = rows[:max_rows]
    widths = [max(len(str(r[c])) for r in [header, *shown]) for c in range(len(header))]

    def line(cells):
        return "  ".join(str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in enumerate(zip(cells, widths)))

    out = [line(header), *(line(r) for r in shown)]
    if len(rows) > max_rows:
        out.append(f"… {len(rows) - max_rows} more rows in the dataset")
    return "\n".join(out)


INTERVAL_SUFFIXES = ("_ci_low", "_ci_high")
"""Scalars that bound another scalar's interval (``largest_ci_low``): shown through their estimate."""


def _headline_variables(merged: xr.Dataset, cell_dims: tuple[str, ...]) -> dict[str, tuple[str, xr.DataArray]]:
    """label -> (variable name, DataArray over the cell dims): each training curve's last value (``train_eval_*``)
    and every analysis's per-cell scalar (``<analysis>_<name>``: a count such as fixed-points'
    ``n_fixed``, an estimate such as lyapunov's ``largest_mean``, shown as "lyapunov largest"),
    leaving out the bounds of intervals (``*_ci_low``, ``*_ci_high``) and the values results are read
    against (``*_chance``, ``*_expected``: [`dynlab.scenarios.references`][])."""
    out = {}
    for name, var in merged.data_vars.items():
        name = str(name)
        if var.dtype.kind not in "fiub" or name.endswith(REFERENCE_SUFFIXES):  # a chance level is no result
            continue
        extra = [d for d in var.dims if d not in cell_dims]
        if name.startswith("train_"):
            if name.startswith("train_eval_") and len(extra) == 1:
                out[f"final {name[len('train_'):].replace('_', ' ')}"] = (name, last_finite(var, extra[0]))
        elif not name.endswith(INTERVAL_SUFFIXES) and extra in ([], ["stage"]):
            label = (name[: -len("_mean")] if name.endswith("_mean") else name).replace("_", " ", 1)
            if extra:  # an analysis at several stages: a row per stage
                for stage in var["stage"].values:
                    out[f"{label} ({stage})"] = (name, var.sel(stage=stage))
            else:
                out[label] = (name, var)
    return out


def declared_ranges(scenario) -> dict[str, tuple[float, float]]:
    """The range of each per-cell variable of a sweep (its name in ``sweep.nc`` -> ``(low, high)``),
    from the outputs its analyses and training curves declare
    ([`dynlab.scenarios.spec.claim_outputs`][]: ``train_eval_accuracy`` in ``[0, 1]``, a count
    ``>= 0``); a variable not declared is left out (unbounded)."""
    from dynlab.scenarios.spec import claim_outputs

    return {name: output.range for name, output in claim_outputs(scenario)[1].get("sweep", {}).items()}


def sweep_summary(merged: xr.Dataset, ranges: dict[str, tuple[float, float]] | None = None) -> str:
    """The headline numbers of a merged sweep: one row per headline variable (each training
    curve's last held-out value, every analysis's per-cell means), one column per combination of
    the sweep axes other than ``seed``; over ``seed``, when it is an axis, the mean and its 95%
    interval ([`over_seeds`][]), inside each variable's range (``ranges``: name -> ``(low, high)``,
    [`declared_ranges`][]; a count's interval stops at 0, an accuracy's at 1). A number is left out
    of the cells where its result is not ``ok`` ([`dynlab.figures.result_ok`][]): a failed analysis
    hides only its own numbers."""
    ranges = ranges or {}
    cell_dims = tuple(d for d in merged["status"].dims)
    def ok(name, da):
        mask = result_ok(merged, name)
        return mask.sel(stage=da["stage"]) if "stage" in getattr(mask, "dims", ()) and "stage" in da.coords else mask

    headline = _headline_variables(merged, cell_dims)
    variables = {label: da.where(ok(name, da)) for label, (name, da) in headline.items()}
    bounds = {label: ranges.get(name, (-math.inf, math.inf)) for label, (name, _) in headline.items()}
    if not variables:
        return ""
    group_dims = [d for d in cell_dims if d != "seed"]
    combos = [{}]
    for d in group_dims:
        combos = [{**c, d: v} for c in combos for v in merged[d].values]
    shown = combos[:4]
    header = ["", *(", ".join(f"{d}={v}" for d, v in c.items()) or "all cells" for c in shown)]
    keys = []  # what each position of a zipped axis ([sweep.zip.NAME]) stands for
    for d in group_dims:
        for c in (str(c) for c in merged.coords if c != d and merged[c].dims == (d,)):
            keys.append(f"{c} = " + ", ".join(f"{v:g}" if isinstance(v, (int, float)) else str(v)
                                               for v in merged[c].values.tolist()) + f" along {d}")
    rows = [[label, *(over_seeds(da.sel(c).values, bounds=bounds[label]) for c in shown)]
            for label, da in variables.items()]
    rows = [r for r in rows if any(v != "—" for v in r[1:])]  # a result none of these cells has (a where)
    n_seeds = merged.sizes.get("seed", 1) if "seed" in cell_dims else 1
    title = (f"results ({'mean ± 95% CI over ' + str(n_seeds) + ' seeds' if n_seeds > 1 else 'one seed per cell'}; "
             f"results not ok left out):")
    more = f"\n… {len(combos) - len(shown)} more combinations in sweep.nc" if len(combos) > len(shown) else ""
    zipped = "".join(f"\n{k}" for k in keys)
    table = f"{title}\n{text_table(header, rows, max_rows=None)}{more}{zipped}"
    return table if len(combos) <= len(shown) else f"{table}\n{headline_lines(merged, combos, ok, ranges)}"


MAX_HEADLINE_LINES = 60
"""Combinations whose headline scores [`headline_lines`][] prints one by one."""


def headline_lines(merged: xr.Dataset, combos: list[dict], ok, ranges: dict | None = None) -> str:
    """Every combination of the sweep axes but the seed on one line each, with the scores its
    analyses registered as ``headline`` ([`dynlab.registry.Entry`][]) that it has (mean ± 95%
    interval over the seeds): what a study of many cells compares, when its table shows the first
    few combinations only."""
    from dynlab import registry
    from dynlab.figures import format_value

    headline = [(f"{e.name}_{v}", label) for e in registry.entries("analysis") for v, label in e.headline
                if f"{e.name}_{v}" in merged and set(merged[f"{e.name}_{v}"].dims) <= set(merged["status"].dims)]
    if not headline:
        return ""
    lines = ["headline scores by cell (mean ± 95% CI over the seeds):"]
    for c in combos[:MAX_HEADLINE_LINES]:
        scores = [(label, over_seeds(merged[name].where(ok(name, merged[name])).sel(c).values,
                                     bounds=(ranges or {}).get(name, (-math.inf, math.inf))))
                  for name, label in headline]
        scores = [f"{label} {text}" for label, text in scores if text != "—"]
        if scores:
            lines.append(", ".join(f"{d}={format_value(v)}" for d, v in c.items()) + ": " + "; ".join(scores))
    if len(combos) > MAX_HEADLINE_LINES:
        lines.append(f"… {len(combos) - MAX_HEADLINE_LINES} more combinations in sweep.nc")
    return "\n".join(lines)


MAX_FAILURE_LINES = 20
"""Cells not ok whose message ``dynlab run`` prints one by one; the others are counted."""


def failure_lines(merged: xr.Dataset) -> list[str]:
    """One line per cell that is not ok: where it is on the sweep axes, its status and its message
    (each failed analysis by name); at most [`MAX_FAILURE_LINES`][], then how many more."""
    status = merged["status"]
    bad = [idx for idx in np.ndindex(status.shape)  # n/a: no cell there (a run's label at another seed)
           if str(status.values[idx]) not in ("ok", "n/a")]
    lines = []
    for idx in bad[:MAX_FAILURE_LINES]:
        where = ", ".join(f"{d}={merged[d].values[i]}" for d, i in zip(status.dims, idx)) or "the cell"
        message = str(merged["message"].values[idx]) or "(no message)"
        lines.append(f"cell {where}: {status.values[idx]}: {message}")
    if len(bad) > MAX_FAILURE_LINES:
        lines.append(f"… {len(bad) - MAX_FAILURE_LINES} more cells not ok (status and message in sweep.nc)")
    return lines


def sweep_report(scenario, out_dir, merged: xr.Dataset) -> tuple[list[str], str]:
    """What ``dynlab run`` prints when a sweep has finished, ``(lines, incomplete)``: the lines are
    its results ([`sweep_summary`][], the analyses across cells, the verdicts of its claims, the
    counts of cells by status, its files, then each cell not ok and each analysis across cells that
    failed: [`failure_lines`][]); ``incomplete`` is the one line saying that the sweep did not finish
    ok and where to look (``""`` when every cell and analysis is ok), printed on stderr.
    The sweep's figure ``sweep.png`` is the caller's to write."""
    from pathlib import Path

    from dynlab.scenarios.across import across_summary, read_records
    from dynlab.scenarios.sweep import FINDINGS, RESULT

    out_dir, n = Path(out_dir), len(scenario.cells)
    statuses = merged["status"].values.ravel().tolist()
    counts = {k: statuses.count(k) for k in ("ok", "diverged", "failed", "missing") if statuses.count(k)}
    lines = [text for text in (sweep_summary(merged, declared_ranges(scenario)), across_summary(scenario, out_dir))
             if text]
    if scenario.claims and (out_dir / FINDINGS).is_file():
        from dynlab.claims import format_verdicts

        lines.append(format_verdicts(xr.load_dataset(out_dir / FINDINGS, engine="h5netcdf")))
    lines.append(f"done: {', '.join(f'{v} {k}' for k, v in counts.items())}; merged dataset: {out_dir / RESULT}")
    lines.append(f"figure: {out_dir / 'sweep.png'}" + "".join(
        f", {out_dir / (a['name'] + '.png')}" for a in scenario.across if (out_dir / (a["name"] + ".png")).is_file()))
    records = read_records(out_dir)
    across_failed = {a["name"]: records.get(a["name"], {}).get("message", "not run") for a in scenario.across
                     if records.get(a["name"], {}).get("status") != "ok"}
    lines += failure_lines(merged) + [f"{name} across cells failed: {message}" for name, message in across_failed.items()]
    bad = {k: v for k, v in counts.items() if k != "ok"}
    if not (bad or across_failed):
        return lines, ""
    what = ([f"{', '.join(f'{v} {k}' for k, v in bad.items())} of {n} cell{'s' * (n != 1)}"] if bad else []) + [
        f"{name} across cells failed" for name in across_failed]
    return lines, (f"incomplete: {'; '.join(what)} (status and message in {out_dir / RESULT}; --resume recomputes "
                   "missing cells, --resume --retry-failed also failed ones)")
