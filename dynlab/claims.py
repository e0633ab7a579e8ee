r"""A paper's claims, judged on the datasets a scenario writes: one verdict per claim.

A paper scenario declares its claims with its program (`@register("program", NAME, claims=fn)`,
`fn(params) -> list[Claim]`, called with the run's resolved parameters). After the program has
run, [`judge`][] computes each claim's statistic from the datasets it returned, compares it with
the claim's threshold and writes one row per claim:

- **holds** — the claim's interval lies wholly where the claim holds;
- **does not hold** — the interval lies wholly on the other side (reported, never tuned away);
- **undecided** — the interval straddles a threshold, or the statistic is a point estimate of a
  random quantity (one seed, a fit without an interval): the run cannot tell;
- **not testable here** — the run cannot measure it (e.g. a network left out of the run, a grid
  without the cells the claim is about), with the reason.

The verdict is decided by the interval, never by the point value alone: a word is printed only
when the interval clears the threshold, so with a nominal 95% interval a wrong word comes at most
about one time in twenty (`tests/test_claims.py` measures it on synthetic data with a known truth),
and otherwise the verdict is *undecided*. The only point values that decide are **exact** ones
([`Estimate.exactly`][]): quantities with no sampling error, such as a parameter count.

Each row also carries the paper's number (with its figure or table), how dynlab measures the claim,
why the threshold is where it is, the scale of the run against the paper's (every substitution:
data set, sizes, steps), the interval and its **margin**: the signed distance of the interval from
the threshold ([`margin`][]: > 0 wholly on the side where the claim holds, < 0 wholly on the other,
0 straddling), also in units of the interval's half-width.

[`format_verdicts`][] prints the table claim | paper | dynlab | scale | verdict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["Claim", "Estimate", "NotTestable", "OUTCOMES", "format_verdicts", "judge", "margin", "scale_text", "verdict",
           "weakest"]

HOLDS, FAILS, UNDECIDED, UNTESTABLE = "holds", "does not hold", "undecided", "not testable here"
"""The four verdict classes (``findings.nc`` variable ``outcome``)."""
OUTCOMES = (HOLDS, FAILS, UNDECIDED, UNTESTABLE)


class NotTestable(Exception):
    """Raised by a claim's statistic when the run cannot measure it; the message says why."""


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A claim's measured value, with an interval where the statistic has one.

    ``low``/``high`` NaN: a point estimate; ``note`` says why there is no interval (e.g. "fewer than 2
    seeds"). ``level``, ``population`` and ``method`` name the interval. A point estimate decides
    no verdict unless it is ``exact`` (no sampling error: [`exactly`][]).

    ``bounds``: the values the quantity can take (an accuracy $[0, 1]$, a difference of two
    $[-1, 1]$, a count $[0, \\infty)$; unbounded by default); every interval lies inside it.
    ``agreeing``: the number of replicates when they all took the same value (the interval is then
    [`dynlab.statistics.agreement_interval`][]'s, and an undecided verdict says how many would
    decide), else 0. ``judged_on``: which replicates were judged, when some were left out (the
    cells that did not meet their task's learning criterion), in words.
    """

    value: float
    low: float = math.nan
    high: float = math.nan
    note: str = ""
    level: float = 0.95
    population: str = ""
    method: str = ""
    exact: bool = False
    bounds: tuple[float, float] = (-math.inf, math.inf)
    agreeing: int = 0
    judged_on: str = ""

    @classmethod
    def exactly(cls, value: float, note: str = "") -> Estimate:
        """A value without sampling error (a parameter count, a property of the configuration):
        its verdict is decided by the value itself. ``note`` says why it is exact."""
        return cls(float(value), note=note, exact=True)

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high) or self.agreeing > 0 and not (
            math.isnan(self.low) or math.isnan(self.high))

    @classmethod
    def mean_of(cls, values, what: str = "", population: str = "seeds", level: float = 0.95,
                bounds: tuple[float, float] = (-math.inf, math.inf)) -> Estimate:
        """The mean of independent per-replicate values (e.g. one per seed; NaN left out) with its
        interval at ``level`` inside ``bounds`` ([`dynlab.statistics.bounded_interval`][]: Student t
        where the quantity is unbounded, kept inside its range otherwise, and never of zero width
        for a random quantity whose replicates all agree); ``what`` says what each value is. One
        finite value gives a point estimate; none raises [`NotTestable`][]."""
        from dynlab.statistics import bounded_interval

        values = np.asarray(values, float)
        n = int(np.isfinite(values).sum())
        if n == 0:
            raise NotTestable(f"no finite value over the {population}")
        if n < 2:
            note = "; ".join(filter(None, [f"only one value over {population}", what]))
            return cls(float(np.nanmean(values)), note=note, bounds=tuple(bounds))
        ci = bounded_interval(values, bounds=bounds, population=population, level=level)
        agreeing = n if np.ptp(values[np.isfinite(values)]) == 0 else 0
        return cls(float(ci.estimate), float(ci.low), float(ci.high), level=ci.level, population=ci.population,
                   method="; ".join(filter(None, [ci.method, what])), bounds=tuple(float(b) for b in bounds),
                   agreeing=agreeing)


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim of a paper and how dynlab judges it.

    - ``id``: a short slug (the ``claim`` coordinate of ``findings.nc``);
    - ``statement``: the claim in words, with its threshold;
    - ``paper``: the paper's number, with its figure or table;
    - ``measure``: how dynlab measures it;
    - ``statistic``: ``datasets -> Estimate | float`` (the program's returned datasets); it raises
      [`NotTestable`][] when the run cannot measure the claim. ``None``: never testable by this
      scenario, ``untestable`` says why;
    - ``lower``, ``upper``, ``strict``: the claim holds for values in ``[lower, upper]`` (open at
      ``upper`` with ``strict``); one-sided claims leave the other end infinite;
    - ``why``: why the threshold is where it is;
    - ``scale``: this run's scale against the paper's (substitutions of data, sizes, steps).
    """

    id: str
    statement: str
    paper: str
    measure: str
    statistic: Callable[[Mapping[str, Any]], Estimate | float] | None
    lower: float = -math.inf
    upper: float = math.inf
    strict: bool = False
    why: str = ""
    scale: str = ""
    untestable: str = ""

    def holds(self, value: float) -> bool:
        if self.strict:
            return bool(self.lower < value < self.upper)
        return bool(self.lower <= value <= self.upper)

    def excludes(self, low: float, high: float) -> bool:
        """Whether no value in ``[low, high]`` makes the claim hold."""
        if self.strict:
            return bool(high <= self.lower or low >= self.upper)
        return bool(high < self.lower or low > self.upper)

    def threshold(self, side: str) -> str:
        """The threshold on ``side`` (``"lower"``, ``"upper"``) or ``"band"``, in words."""
        two_sided = math.isfinite(self.lower) and math.isfinite(self.upper)
        if side == "band":
            return f"the band [{_exact(self.lower)}, {_exact(self.upper)}]"
        bound = self.lower if side == "lower" else self.upper
        return f"the {side} threshold {_exact(bound)}" if two_sided else f"the threshold {_exact(bound)}"

    def measure_on(self, datasets: Mapping[str, Any]) -> Estimate | str:
        """The claim's [`Estimate`][] on ``datasets``, or the reason it cannot be measured."""
        if self.statistic is None:
            return self.untestable or "this scenario does not measure it"
        try:
            got = self.statistic(datasets)
        except NotTestable as e:
            return str(e)
        estimate = got if isinstance(got, Estimate) else Estimate(float(got))
        if not math.isfinite(estimate.value):
            return "the statistic is undefined on this run" + (f" ({estimate.note})" if estimate.note else "")
        return estimate


def _exact(threshold: float) -> str:
    """A threshold in enough digits to be the number the verdict used (-1.335165, not -1.335)."""
    return f"{threshold:.12g}"


def _bound(v: float) -> str:
    return ("∞" if v > 0 else "-∞") if math.isinf(v) else f"{v:.4g}"


def _plural(population: str) -> str:
    """``"2 seed"`` -> ``"seeds"``: the replicates' word, for "N seeds that all agree"."""
    word = population.split(" ", 1)[-1] if population[:1].isdigit() else population
    word = word or "replicates"
    return word if word.endswith("s") or " " in word else word + "s"


def _seeds_needed(claim: Claim, estimate: Estimate, lo: float, hi: float) -> str:
    """Why replicates that all agree leave a claim undecided, and how many would decide it
    ([`dynlab.statistics.seeds_to_decide`][])."""
    from dynlab.statistics import seeds_to_decide

    word = _plural(estimate.population)
    straddled = [t for t in (claim.lower, claim.upper) if math.isfinite(t) and lo <= t <= hi]
    needs = [seeds_to_decide(estimate.value, t, bounds=estimate.bounds, level=estimate.level) for t in straddled]
    low, high = estimate.bounds
    if estimate.value in straddled:
        return f"no number of {word} decides it: they agree on the threshold itself"
    if needs and None not in needs:
        return (f"a decision needs {max(needs)} {word} that all agree (or {word} that differ, whose spread gives a "
                "Student-t interval)")
    side = "above" if any(t > estimate.value for t in straddled) else "below"
    return (f"no number of {word} that all agree decides it, as the quantity is unbounded {side} (its range "
            f"[{_bound(low)}, {_bound(high)}]); {word} that differ would (a Student-t interval from their spread)")


def scale_text(items: Mapping[str, tuple[Any, Any]]) -> str:
    """A run's scale against the paper's, as the substitutions only: ``{what: (ours, paper's)}`` ->
    ``"N <= 16 (paper 2048); 2 seeds (paper 3)"``; ``"the paper's scale"`` when nothing differs."""
    diffs = [f"{what} {ours} (paper {theirs})" for what, (ours, theirs) in items.items() if ours != theirs]
    return "; ".join(diffs) if diffs else "the paper's scale"


def margin(low: float, high: float, lower: float = -math.inf, upper: float = math.inf) -> float:
    """Signed distance of the interval ``[low, high]`` from the thresholds of a claim that holds on ``[lower, upper]``.

    - ``> 0``: the whole interval lies where the claim holds, this far from the nearest threshold;
    - ``< 0``: the whole interval lies where it does not hold, this far from the nearest threshold;
    - ``0``: the interval straddles (or touches) a threshold;
    - NaN: no interval (NaN bounds).

    An interval may be infinite on one side (replicates of a count that all agree:
    [`dynlab.statistics.agreement_interval`][]); the margin is then its finite end's.
    """
    if math.isnan(low) or math.isnan(high):
        return math.nan
    if lower <= low and high <= upper:  # an infinite end of the interval is as far from no threshold
        gaps = [g for g in (low - lower, upper - high) if not math.isnan(g)]
        return min(gaps) if gaps else math.inf
    if high < lower:
        return high - lower
    if low > upper:
        return upper - low
    return 0.0


def verdict(claim: Claim, estimate: Estimate) -> tuple[str, str, float, bool]:
    """``(outcome, text, margin, from_interval)``: the verdict on ``claim`` and how far its interval lies from the threshold.

    The outcome is decided by the interval ([`margin`][]): **holds** when it lies wholly where the
    claim holds, **does not hold** when it lies wholly on the other side, **undecided** when it
    straddles a threshold. A point estimate without an interval is **undecided** (the text says why
    there is no interval, from ``estimate.note``, and where the value lies), unless it is exact
    ([`Estimate.exactly`][]): then the value decides. The text gives the margin also in units of the
    interval's half-width.

    Replicates of a random quantity that all agree have no spread, and a zero-width interval would
    decide any threshold it does not touch: their interval is the distribution-free
    [`dynlab.statistics.agreement_interval`][] ([`Estimate.mean_of`][]), which decides only with
    enough replicates on a bounded range; when it does not, the text names how many replicates that
    all agree would decide ([`dynlab.statistics.seeds_to_decide`][]), or says that none would (an
    unbounded side: a count from above). ``estimate.judged_on`` (the cells a learning gate left
    out) ends the text.
    """
    value, low, high = estimate.value, estimate.low, estimate.high
    from_interval = estimate.has_interval
    lo, hi = (low, high) if from_interval else (value, value)
    m = margin(lo, hi, claim.lower, claim.upper)
    if from_interval and estimate.agreeing:
        word = _plural(estimate.population)
        what = (f"{100 * estimate.level:.4g}% interval [{_bound(low)}, {_bound(high)}] from {estimate.agreeing} {word} "
                f"that all agree at {value:.4g} (zero spread)")
    elif from_interval:
        what = f"{100 * estimate.level:.4g}% CI [{low:.4g}, {high:.4g}]" + (" (zero width)" if high == low else "")
    elif estimate.exact:
        what = f"exact value {value:.4g}" + (f" ({estimate.note})" if estimate.note else "")
    else:
        what = f"point estimate {value:.4g} (no interval{': ' + estimate.note if estimate.note else ''})"
    if not (from_interval or estimate.exact):
        outcome = UNDECIDED
    elif claim.holds(lo) and claim.holds(hi):  # the claim holds on an interval: its ends decide
        outcome = HOLDS
    elif claim.excludes(lo, hi):
        outcome = FAILS
    else:
        outcome = UNDECIDED
    if m == 0:
        edge = "lower" if math.isfinite(claim.lower) and lo <= claim.lower <= hi else "upper"
        if lo <= claim.lower and claim.upper <= hi and math.isfinite(claim.lower) and math.isfinite(claim.upper):
            where = f"covers {claim.threshold('band')}"
        else:
            where = f"{'straddles' if lo < hi else 'lies on'} {claim.threshold(edge)}"
    elif m > 0:
        if math.isfinite(claim.lower) and math.isfinite(claim.upper):
            edge = "lower" if lo - claim.lower <= claim.upper - hi else "upper"
            where = f"lies inside {claim.threshold('band')}, {m:.4g} from its {edge} end"
        elif math.isfinite(claim.lower):
            where = f"lies {m:.4g} above {claim.threshold('lower')}"
        else:
            where = f"lies {m:.4g} below {claim.threshold('upper')}"
    else:
        below = hi < claim.lower
        where = f"lies {-m:.4g} {'below' if below else 'above'} {claim.threshold('lower' if below else 'upper')}"
    if from_interval and hi > lo and math.isfinite(hi - lo) and m != 0:
        where += f" ({abs(m) / ((hi - lo) / 2):.2g} half-widths)"
    judged = f"; {estimate.judged_on}" if estimate.judged_on else ""
    if outcome == UNDECIDED and not from_interval:
        side = "holds" if claim.holds(value) else "does not hold"
        return outcome, (f"{outcome}: the {what} {where}, where the claim {side}; a point estimate "
                         f"cannot decide it{judged}"), m, False
    if outcome == UNDECIDED and estimate.agreeing:
        where += f"; {_seeds_needed(claim, estimate, lo, hi)}"
    return outcome, f"{outcome}: the {what} {where}{judged}", m, from_interval


def weakest(claim: Claim, estimates: Mapping[str, Estimate]) -> Estimate:
    """The estimate that decides a claim about every group at once: ``estimates`` (``{group label:
    Estimate}``, each interval at the adjusted level the caller chose, e.g. Bonferroni's
    $1 - (1 - c)/G$ for $G$ groups) -> the first group whose interval lies where the claim does not
    hold, else one that straddles, else the one with the smallest margin ([`margin`][]). The claim
    then holds only when every group's interval clears the threshold. Its note and method name the
    group and how many there were."""
    rank = {FAILS: 0, UNDECIDED: 1, HOLDS: 2}
    judged = []
    for label, e in estimates.items():
        outcome, _, m, _ = verdict(claim, e)
        judged.append((rank[outcome], 0.0 if math.isnan(m) else m, label, e))
    _, _, label, chosen = min(judged, key=lambda j: (j[0], j[1]))
    note = f"weakest of {len(judged)} groups: {label}"
    return dataclasses.replace(chosen, note="; ".join(filter(None, [chosen.note, note])),
                               method="; ".join(filter(None, [chosen.method, note])))


def judge(claims: list[Claim], datasets: Mapping[str, Any], *, paper: str = "", scenario: str = "",
          preset: str = "", attrs: Mapping[str, Any] | None = None) -> xr.Dataset:
    """One row per claim (dim ``claim``, the claims' ids), computed from ``datasets``:

    - ``outcome``: "holds", "does not hold", "undecided" or "not testable here" ([`verdict`][]);
      ``holds`` (bool, false unless it holds);
    - ``value`` (NaN where not testable), ``ci_low``, ``ci_high`` (NaN for point estimates; the
      interval's level, population and method in ``interval``; an infinite bound where replicates
      that all agree leave a side of an unbounded quantity open);
    - ``range_low``, ``range_high``: the values the quantity can take ([`Estimate`][]'s ``bounds``);
    - ``threshold_low``, ``threshold_high``: where the claim holds (infinite for one-sided claims);
    - ``margin``: [`margin`][] of the interval from the threshold, of the value where there is no interval
      (``margin_from_interval`` false); ``margin_halfwidths``: the margin in units of the interval's
      half-width (NaN without an interval);
    - ``verdict``: the outcome in words with the interval and margin, or why it is not testable;
    - ``statement``, ``paper``, ``measure``, ``why``, ``scale``: the claim's texts.

    ``attrs``: the run's substitutions etc., stored with ``paper``, ``scenario`` and ``preset``.
    """
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids must be unique, got {ids}")
    rows = []
    for claim in claims:
        got = claim.measure_on(datasets)
        if isinstance(got, str):
            rows.append((UNTESTABLE, math.nan, math.nan, math.nan, math.nan, False, f"{UNTESTABLE}: {got}", "",
                         (-math.inf, math.inf)))
            continue
        outcome, text, m, from_interval = verdict(claim, got)
        interval = f"{100 * got.level:.4g}% CI over {got.population} ({got.method})" if got.has_interval else ""
        rows.append((outcome, got.value, got.low, got.high, m, from_interval, text, interval, got.bounds))
    outcome, value, low, high, margins, from_interval, texts, intervals, ranges = (list(col) for col in zip(*rows))
    with np.errstate(divide="ignore", invalid="ignore"):
        half = (np.asarray(high, float) - np.asarray(low, float)) / 2
        in_halfwidths = np.where((half > 0) & np.isfinite(half), np.asarray(margins, float) / half, np.nan)
    text_vars = {name: ("claim", np.asarray([getattr(c, name) for c in claims], dtype=object))
                 for name in ("statement", "paper", "measure", "why", "scale")}
    return xr.Dataset(
        {
            "outcome": ("claim", np.asarray(outcome, dtype=object),
                        {"long_name": "holds / does not hold / undecided / not testable here"}),
            "holds": ("claim", np.asarray([o == HOLDS for o in outcome]), {"long_name": "the claim holds"}),
            "value": ("claim", np.asarray(value, float), {"long_name": "measured value (NaN: not testable)"}),
            "ci_low": ("claim", np.asarray(low, float), {"long_name": "lower bound of the value's interval"}),
            "ci_high": ("claim", np.asarray(high, float), {"long_name": "upper bound of the value's interval"}),
            "interval": ("claim", np.asarray(intervals, dtype=object), {"long_name": "the interval's level, population and method"}),
            "range_low": ("claim", np.asarray([r[0] for r in ranges], float),
                          {"long_name": "the least value the quantity can take (-inf: unbounded)"}),
            "range_high": ("claim", np.asarray([r[1] for r in ranges], float),
                           {"long_name": "the greatest value the quantity can take (inf: unbounded)"}),
            "threshold_low": ("claim", np.asarray([c.lower for c in claims], float),
                              {"long_name": "the claim holds for values >= this (-inf: no lower threshold)"}),
            "threshold_high": ("claim", np.asarray([c.upper for c in claims], float),
                               {"long_name": "the claim holds for values <= this (< for strict claims; inf: none)"}),
            "margin": ("claim", np.asarray(margins, float), {
                "units": "units of value",
                "long_name": "signed distance of the confidence interval from the nearest threshold",
                "description": "> 0: the whole interval lies where the claim holds, this far from the threshold; "
                               "< 0: the whole interval lies where it does not hold; 0: the interval straddles the "
                               "threshold; from the value itself where margin_from_interval is false"}),
            "margin_halfwidths": ("claim", in_halfwidths, {
                "long_name": "margin in units of the interval's half-width (NaN: no interval)"}),
            "margin_from_interval": ("claim", np.asarray(from_interval, bool),
                                     {"long_name": "margin measured from the interval (false: from the point value)"}),
            "verdict": ("claim", np.asarray(texts, dtype=object)),
            **text_vars,
        },
        coords={"claim": ids},
        attrs={"analysis": "findings", "paper": paper, "scenario": scenario, "preset": preset, **(attrs or {})},
    )


def combine_findings(findings: Mapping[str, xr.Dataset], **attrs: str) -> xr.Dataset:
    """The verdicts of a paper's scenarios in one table (``dynlab reproduce``'s ``findings.nc``):
    each scenario's findings along ``claim`` in the order given, with a ``scenario`` coordinate
    naming where each claim was judged; ``attrs`` (``paper``, ``preset``, ``scenarios``) describe it."""
    tables = [ds.assign(scenario=("claim", [name] * ds.sizes["claim"])) for name, ds in findings.items()]
    combined = xr.concat(tables, dim="claim", combine_attrs="drop")
    combined.attrs = {"analysis": "findings", **attrs}
    return combined


def format_verdicts(ds: xr.Dataset, width: int | None = None) -> str:
    """The findings as a table claim | paper | dynlab | scale | verdict, wrapped to ``width`` columns
    (default: the terminal's, at least 80), with a count of each outcome. A scale shared by several
    claims is written once, under the table ("as below" in their rows)."""
    from rich.console import Console
    from rich.table import Table

    from dynlab.statistics import interval_text

    import collections

    title = ", ".join(f"{k} {ds.attrs[k]}" for k in ("paper", "scenario", "preset") if ds.attrs.get(k))
    scales = [str(x) for x in ds.scale.values]
    papers = [str(x) for x in ds.paper.values]
    common, n_common = collections.Counter(scales).most_common(1)[0] if scales else ("", 0)
    shared = n_common > 1 and common != ""  # a scale most claims share is printed once, under the table
    # columns that say nothing for any claim (a scenario's own claims have no paper, no scale) are left out
    columns = [("claim", 3), ("paper", 2), ("dynlab", 2), ("scale", 2), ("verdict", 3)]
    columns = [(c, r) for c, r in columns if not (c == "paper" and not any(papers)) and not (c == "scale" and not any(scales))]
    table = Table(title=f"claims ({title})" if title else "claims", show_lines=True, expand=True,
                  caption=f"scale: {common}" if shared else None, caption_justify="left")
    for name, ratio in columns:
        table.add_column(name, ratio=ratio, overflow="fold")
    for i in range(ds.sizes["claim"]):
        row = ds.isel(claim=i)
        value = float(row.value)
        if not math.isfinite(value):
            measured = "-"
        elif row.margin_from_interval:
            low, high = float(row.ci_low), float(row.ci_high)
            measured = interval_text(value, low, high) if low < high and math.isfinite(high - low) else \
                f"{value:.4g} [{_bound(low)}, {_bound(high)}]"
        else:
            measured = f"{value:.4g}"
        cells = {"claim": str(row.statement.values), "paper": papers[i], "dynlab": measured,
                 "scale": "as below" if shared and scales[i] == common else scales[i], "verdict": str(row.verdict.values)}
        table.add_row(*(cells[c] for c, _ in columns))
    console = Console(width=max(80, width or Console().width), record=True, force_terminal=False,
                      color_system=None)
    with console.capture() as capture:
        console.print(table)
    counts = {o: int((ds.outcome == o).sum()) for o in OUTCOMES}
    summary = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
    n = ds.sizes["claim"]
    return capture.get().rstrip() + f"\n{n} claim{'s' * (n != 1)}: {summary}"
