r"""Claims declared in a scenario file, judged on the datasets the scenario writes.

A study states what it expects in its TOML, next to what it runs; nothing in it is imported or
evaluated. Each ``[[claims]]`` table is a selection, a reduction and a comparison:

```toml
[[claims]]
id = "stable-when-trained"
statement = "The trained lambda_1 of every unit is below 0"
variable = "lyapunov_largest_mean"   # a variable of the dataset (default: the sweep's, sweep.nc)
where = { stage = "trained" }        # coordinates to select (a value, or a list of values)
over = "seed"                        # the replicates: mean over them with its Student-t interval
for_each = "model.unit"              # the claim is about every value of these axes
below = 0.0                          # or above, at_most, at_least, between = [a, b]

[[claims]]
id = "learns-the-task"
statement = "Every unit ends training above 90% held-out accuracy"
variable = "train_eval_accuracy"     # a training metric, over its evaluations (train_eval_step)
reduce = "final"                     # its last evaluation (the last finite value of each cell)
for_each = "model.unit"
above = 0.9

[[claims]]
id = "seeds-closer-than-units"
statement = "Two seeds of one unit are closer than two units"
dataset = "dsa"                      # an analysis across cells
variable = "within_distance"
minus = { variable = "between_distance" }   # compare with another selection: A - B
below = 0.0
```

Every dim of the variable must be reduced: selected by one value in ``where``, taken as the
replicates (``over``) or the groups (``for_each``), or, for a dim along which it evolves (training
steps, evaluations, time: [`dynlab.outputs.STEP_DIMS`][]), by ``reduce = "final"``, its last value
([`dynlab.outputs.REDUCTIONS`][]).

The statistic is the mean over ``over`` (default ``seed`` when the dataset has it) of the
selection, or of its difference from the ``minus`` selection (paired over ``over`` when both have
it, else Welch's interval of the difference of the two means), with its interval. With
``for_each``, each group is judged and the claim takes the verdict of its weakest group (the
smallest margin, [`dynlab.claims.margin`][]): it holds when every group's interval clears the
threshold, does not hold when one group's interval lies wholly on the other side, and is
undecided otherwise. The groups' intervals are Bonferroni-adjusted ($1 - 0.05/G$ each for $G$
groups), so the verdict on all of them together is wrong at most one time in twenty. The verdict rule is [`dynlab.claims.verdict`][]'s: a word only when the
interval decides it.

**Ranges.** Where the claim's variable declares its kind ([`dynlab.outputs.Output`][], passed to
[`to_claims`][]), the interval stays in the quantity's range: a fraction (an accuracy) in
$[0, 1]$, a difference of two in $[-1, 1]$, a count $\ge 0$
([`dynlab.statistics.bounded_interval`][]); an ``exact`` output (a parameter count) decides by its
value. Replicates of a random quantity that all agree decide only as far as their agreement
bounds the mean ([`dynlab.statistics.agreement_interval`][]); otherwise the verdict is undecided
and names how many replicates would decide. A variable of unknown kind is ``real``.

**The learning gate.** A claim on the sweep's per-cell results judges only the cells that met
their task's learning criterion, names those that did not, and is not testable when fewer than 2
replicates are left; ``gate = false`` turns it off, ``gate = { at_least = 0.9 }`` (or ``at_most``,
with an optional ``variable``) changes it ([`dynlab.scenarios.learning_gate`][]).

[`parse_claims`][] checks each table where the TOML text becomes a value; [`check_claims`][]
checks the names it uses against the scenario (its axes, its analyses and their declared outputs,
[`dynlab.outputs`][]) before any work, so a claim naming an unknown variable, coordinate, value or
dataset, or leaving a dim unreduced, is one line and exit 2; [`to_claims`][] makes the
[`dynlab.claims.Claim`][] values that [`dynlab.claims.judge`][] judges into ``findings.nc``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from typing import Any

import numpy as np
import xarray as xr

from dynlab.claims import Claim, Estimate, NotTestable, weakest
from dynlab.errors import ConfigError
from dynlab.outputs import REDUCTIONS, STEP_DIMS, Output, final
from dynlab.scenarios.learning_gate import Gate, Learned, learned, parse_gate

LEVEL = 0.95
"""The confidence of a claim's verdict: with ``for_each``, of all its groups' intervals together."""

SWEEP = "sweep"
"""The default dataset: the merged sweep (``sweep.nc``)."""

THRESHOLDS = {"below": ("upper", True), "above": ("lower", True), "at_most": ("upper", False),
              "at_least": ("lower", False)}
"""Threshold keys: which side they bound and whether the bound is strict."""

KEYS = {"id", "statement", "variable", "dataset", "where", "over", "for_each", "minus", "between", "paper", "why",
        "reduce", "gate", *THRESHOLDS}
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclasses.dataclass(frozen=True)
class Selection:
    """A variable of a dataset at some coordinates."""

    variable: str
    where: dict[str, Any]

    def of(self, ds: xr.Dataset) -> xr.DataArray:
        if self.variable not in ds.data_vars:
            numeric = sorted(str(v) for v, x in ds.data_vars.items() if x.dtype.kind in "fiub")
            raise NotTestable(f"the dataset has no variable {self.variable!r}; numeric variables: "
                              f"{', '.join(numeric[:12])}{', …' if len(numeric) > 12 else ''}")
        da = ds[self.variable]
        for dim, value in self.where.items():
            if dim not in da.coords:
                raise NotTestable(f"{self.variable} has no coordinate {dim!r} (its dims: {', '.join(map(str, da.dims))})")
            along = da[dim].dims[0] if da[dim].dims else None
            if along is None:  # a scalar coordinate: it matches or not
                if da[dim].item() not in (value if isinstance(value, list) else [value]):
                    raise NotTestable(f"no {dim} = {value!r} in this run")
                continue
            keep = np.flatnonzero(np.isin(da[dim].values, value if isinstance(value, list) else [value]))
            if keep.size == 0:
                raise NotTestable(f"no {dim} = {value!r} in this run")
            da = da.isel({along: keep})
            if not isinstance(value, list) and along == dim:
                da = da.squeeze(dim, drop=True)
        return da


@dataclasses.dataclass(frozen=True)
class DeclaredClaim:
    """One ``[[claims]]`` table of a scenario, checked."""

    id: str
    statement: str
    dataset: str
    selection: Selection
    over: str | None
    for_each: tuple[str, ...]
    minus: Selection | None
    lower: float = -math.inf
    upper: float = math.inf
    strict: bool = False
    paper: str = ""
    why: str = ""
    reduce: str | None = None
    """``"final"``: each selection's step dims reduced to their last value ([`dynlab.outputs.REDUCTIONS`][])."""
    gate: Gate = Gate()
    """Which cells it judges ([`dynlab.scenarios.learning_gate`][])."""

    @property
    def names(self) -> set[str]:
        """Every coordinate name the claim uses."""
        used = set(self.selection.where) | set(self.for_each) | ({self.over} if self.over else set())
        return used | (set(self.minus.where) if self.minus else set())


def _text(where: str, value, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise ConfigError(f"{where} must be a one-line string, got {value!r}")
    return value


def _number(where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _where(where: str, table) -> dict[str, Any]:
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table of coordinate = value, got {table!r}")
    for k, v in table.items():
        values = v if isinstance(v, list) else [v]
        if not values or not all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in values):
            raise ConfigError(f"{where}.{k} must be a value or a non-empty list of values, got {v!r}")
    return dict(table)


def parse_claim(entry: dict, index: int) -> DeclaredClaim:
    """One ``[[claims]]`` table as a [`DeclaredClaim`][], or a one-line [`ConfigError`][] naming
    the key that is wrong and what is valid."""
    where = f"claims[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a table, got {entry!r}")
    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise ConfigError(f"unknown key {where}.{unknown[0]}; valid keys: {', '.join(sorted(KEYS))}")
    for key in ("id", "statement", "variable"):
        if key not in entry:
            raise ConfigError(f"{where} needs {key!r}")
    claim_id = entry["id"]
    if not isinstance(claim_id, str) or not _ID.match(claim_id):
        raise ConfigError(f"{where}.id must be a short name of letters, digits, '-', '_' or '.', got {claim_id!r}")
    where = f"claims.{claim_id}"
    sides = [k for k in (*THRESHOLDS, "between") if k in entry]
    if len(sides) != 1:
        raise ConfigError(f"{where} needs exactly one threshold of below, above, at_most, at_least, between; "
                          f"got {', '.join(sides) or 'none'}")
    lower, upper, strict = -math.inf, math.inf, False
    if sides[0] == "between":
        band = entry["between"]
        if not isinstance(band, list) or len(band) != 2:
            raise ConfigError(f"{where}.between must be [low, high], got {band!r}")
        lower, upper = (_number(f"{where}.between", b) for b in band)
        if not lower < upper:
            raise ConfigError(f"{where}.between must have low < high, got {band!r}")
    else:
        side, strict = THRESHOLDS[sides[0]]
        value = _number(f"{where}.{sides[0]}", entry[sides[0]])
        lower, upper = (value, math.inf) if side == "lower" else (-math.inf, value)
    for_each = entry.get("for_each", [])
    for_each = [for_each] if isinstance(for_each, str) else for_each
    if not isinstance(for_each, list) or not all(isinstance(f, str) and f for f in for_each):
        raise ConfigError(f"{where}.for_each must be a coordinate name or a list of them, got {entry['for_each']!r}")
    minus = entry.get("minus")
    if minus is not None:
        if not isinstance(minus, dict) or set(minus) - {"variable", "where"}:
            raise ConfigError(f"{where}.minus must be a table of variable and/or where, got {minus!r}")
        minus = Selection(_text(f"{where}.minus.variable", minus.get("variable", entry["variable"])),
                          _where(f"{where}.minus.where", minus.get("where")))
    over = entry.get("over", "seed")
    if over is not None and not (isinstance(over, str) and over):
        raise ConfigError(f"{where}.over must be a coordinate name, got {over!r}")
    reduce = entry.get("reduce")
    if reduce is not None and reduce not in REDUCTIONS:
        raise ConfigError(f"{where}.reduce must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduce!r}")
    return DeclaredClaim(
        id=claim_id, statement=_text(f"{where}.statement", entry["statement"]),
        dataset=_text(f"{where}.dataset", entry.get("dataset", SWEEP)),
        selection=Selection(_text(f"{where}.variable", entry["variable"]), _where(f"{where}.where", entry.get("where"))),
        over=over, for_each=tuple(for_each), minus=minus, lower=lower, upper=upper, strict=strict,
        paper=_text(f"{where}.paper", entry.get("paper"), required=False),
        why=_text(f"{where}.why", entry.get("why"), required=False), reduce=reduce,
        gate=parse_gate(f"{where}.gate", entry.get("gate")))


def parse_claims(entries) -> tuple[DeclaredClaim, ...]:
    """The ``[[claims]]`` array of a scenario, every table checked ([`parse_claim`][]); ids unique."""
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise ConfigError(f"claims must be an array of tables ([[claims]]), got {entries!r}")
    claims = tuple(parse_claim(e, i) for i, e in enumerate(entries))
    ids = [c.id for c in claims]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"claim id {repeated[0]!r} is given twice; ids must be unique")
    return claims


def check_claims(claims, coordinates: dict[str, dict[str, list]],
                 prefixes: dict[str, tuple[str, ...]] | None = None,
                 outputs: dict[str, dict[str, Output]] | None = None) -> None:
    """Check the names the claims use before any work: each claim's dataset is one the scenario
    writes; each variable is a declared output of it, whose every dim the claim reduces
    ([`unreduced`][]); each coordinate it names (``where``, ``over``, ``for_each``) is one of that
    dataset's, with ``where`` values among the coordinate's values.

    ``coordinates``: dataset name -> {coordinate name -> its values, or ``None`` when the values
    are known only after the run}. ``outputs``: dataset name -> {variable -> its declared
    [`Output`][dynlab.outputs.Output], named and with the dims it has in that dataset}.
    ``prefixes``: dataset name -> the prefixes of the variables of analyses that declare no
    outputs (a plug-in's): such a variable is checked by its prefix only, and a name with that
    prefix (``plugin_strength``) may be one of its own dims, its values known only after the run.
    A mistake is a one-line [`ConfigError`][] naming what is valid.
    """
    for claim in claims:
        if claim.dataset not in coordinates:
            raise ConfigError(f"claims.{claim.id}.dataset {claim.dataset!r} is not written by this scenario; "
                              f"datasets: {', '.join(sorted(coordinates))}")
        open_prefixes = (prefixes or {}).get(claim.dataset, ())
        declared = (outputs or {}).get(claim.dataset)
        for selection in (claim.selection, claim.minus):
            if selection is None or declared is None or selection.variable in declared \
                    or (open_prefixes and selection.variable.startswith(open_prefixes)):
                continue
            raise ConfigError(f"claims.{claim.id}: variable {selection.variable!r} is not written to {claim.dataset}"
                              f"{_suggestion(selection.variable, declared)}; its variables: "
                              f"{', '.join(_valid_variables(selection.variable, declared))}")
        own = {n: None for n in claim.names if open_prefixes and n.startswith(open_prefixes)}  # a plug-in's own dims
        dims = {d: None for o in (declared or {}).values() for d in o.dims}  # the declared outputs' own dims
        known = {**dims, **own, **coordinates[claim.dataset]}
        over_default = claim.over == "seed" and "seed" not in known  # the default: no seeds, no reduction over them
        for name in sorted(claim.names - ({"seed"} if over_default else set())):
            if name not in known:
                raise ConfigError(f"claims.{claim.id} names the coordinate {name!r}, which {claim.dataset} does not "
                                  f"have; coordinates: {', '.join(sorted(coordinates[claim.dataset])) or '(none)'}")
        for selection in (claim.selection, claim.minus):
            for dim, value in (selection.where if selection else {}).items():
                valid = known[dim]
                if valid is None:
                    continue
                for v in value if isinstance(value, list) else [value]:
                    if v not in valid:
                        raise ConfigError(f"claims.{claim.id}: {dim} = {v!r} is not in this scenario; "
                                          f"values: {', '.join(map(repr, valid))}")
            output = (declared or {}).get(selection.variable) if selection else None
            left = unreduced(claim, selection, output) if output is not None else []
            if left:
                steps = [d for d in left if is_step_dim(d)]
                ways = [f"where = {{{left[0]} = VALUE}}", f"over = \"{left[0]}\"", f"for_each = \"{left[0]}\""]
                ways += ['reduce = "final" (its last value)'] if steps else []
                raise ConfigError(f"claims.{claim.id}: {selection.variable} has the dim{'s' * (len(left) > 1)} "
                                  f"{', '.join(left)}, which the claim leaves unreduced; reduce "
                                  f"{'each' if len(left) > 1 else 'it'} with {', '.join(ways[:-1])} or {ways[-1]}")


def is_step_dim(dim: str) -> bool:
    """Is ``dim`` (as named in a dataset: ``train_eval_step``, ``lyapunov_time``) one along which a
    quantity evolves ([`dynlab.outputs.STEP_DIMS`][]), the dims ``reduce = "final"`` reduces?"""
    return any(dim == s or dim.endswith(f"_{s}") for s in STEP_DIMS)


def unreduced(claim: DeclaredClaim, selection: Selection, output: Output) -> list[str]:
    """The dims of ``output`` (a selection's variable, dims as in its dataset) that ``claim``
    leaves unreduced: not selected by one value in ``where``, not ``over``, not in ``for_each``
    and, with ``reduce = "final"``, not a step dim ([`is_step_dim`][])."""
    one_value = {d for d, v in selection.where.items() if not isinstance(v, list)}
    reduced = one_value | set(claim.for_each) | ({claim.over} if claim.over else set())
    return [d for d in output.dims if d not in reduced and not (claim.reduce == "final" and is_step_dim(d))]


def _suggestion(name: str, declared: dict) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(declared), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _valid_variables(name: str, declared: dict) -> list[str]:
    """The variables to list for a misspelled ``name``: those of the analysis its prefix names
    (``lyapunov_``), else all."""
    prefix = name.split("_", 1)[0] + "_"
    same = sorted(v for v in declared if v.startswith(prefix))
    return same or sorted(declared)


def _replicates(da: xr.DataArray, over: str | None, where: str) -> np.ndarray:
    """The values of ``da`` along ``over`` (its only dim left), or its single value."""
    rest = [d for d in da.dims if d != over]
    if rest:
        raise NotTestable(f"{where} leaves {', '.join(map(str, rest))} unreduced; name them in where, over or "
                          "for_each")
    return np.atleast_1d(np.asarray(da.values, float))


NO_CELL = "n/a"
"""The sweep's ``status`` where no cell is ([`dynlab.scenarios.sweep`][]'s ``NOT_SELECTED``)."""


class _FewLearned(NotTestable):
    """Fewer than 2 replicates are left once the cells that did not learn are left out."""


def _estimate(a: xr.DataArray, b: xr.DataArray | None, over: str | None, what: str, level: float,
              bounds: tuple = ((-math.inf, math.inf), (-math.inf, math.inf)), keep=(None, None),
              exact: bool = False, present=(None, None)) -> Estimate:
    """The mean over the replicates with its interval, inside the range of the quantity
    (``bounds``: each selection's, ``(low, high)``; a difference's is ``[a_low - b_high, a_high -
    b_low]``). ``keep``: for each selection, which of its replicates the learning gate lets
    through (``None``: all); fewer than 2 left raises ``_FewLearned``. ``present``: for each
    selection, where a cell is (``None``: everywhere): a run taken as a cell has no other seeds,
    which are no replicates of it, not missing ones. ``exact``: an exact
    output whose replicates agree decides by its value. A replicate without a value (NaN: a run
    that diverged or failed) is not dropped: the sample would then be the runs that behaved, so
    the estimate keeps no interval and the claim is undecided, saying how many are missing."""
    from dynlab.statistics import agreement_interval, welch_interval

    over_a = over if over in a.dims else None
    over_b = None if b is None else (over if over in b.dims else None)
    x = _replicates(a, over_a, what)
    y = None if b is None else _replicates(b, over_b, what)
    kx = None if keep[0] is None else _replicates(keep[0], over_a, what).astype(bool)
    ky = None if keep[1] is None or b is None else _replicates(keep[1], over_b, what).astype(bool)
    paired = bool(over_a and over_b and a[over].size == b[over].size and (a[over].values == b[over].values).all())
    px = None if present[0] is None else _replicates(present[0], over_a, what).astype(bool)
    py = None if present[1] is None or b is None else _replicates(present[1], over_b, what).astype(bool)
    if paired and (px is not None or py is not None):  # a pair is a pair only where both cells are
        px = py = (np.ones(x.size, bool) if px is None else px) & (np.ones(y.size, bool) if py is None else py)
    if px is not None:
        x, kx = x[px], None if kx is None else kx[px]
    if py is not None:
        y, ky = y[py], None if ky is None else ky[py]
    if x.size == 0 or (y is not None and y.size == 0):
        raise NotTestable(f"{what} selects no cell (a run taken as a cell is at the first value of the other axes only)")
    if paired and (kx is not None or ky is not None):  # a pair is judged only when both its cells learned
        both = (np.ones(x.size, bool) if kx is None else kx) & (np.ones(y.size, bool) if ky is None else ky)
        kx = ky = both
    x = x if kx is None else x[kx]
    y = y if ky is None or y is None else y[ky]
    if (kx is not None and x.size < min(2, kx.size)) or (ky is not None and y.size < min(2, ky.size)) or \
            (kx is not None and x.size == 0):
        raise _FewLearned("too few cells learned")
    missing = sum(int(np.isnan(v).sum()) for v in (x, y) if v is not None)
    if missing and np.isfinite(x).any():
        size = x.size + (0 if y is None else y.size)
        value = float(np.nanmean(x) - (0.0 if y is None else np.nanmean(y)))
        return Estimate(value, note=f"{missing} of {size} {over or 'replicate'} values are missing (a run that "
                                    "diverged or failed): the rest are not a sample of the population")
    (a_low, a_high), (b_low, b_high) = bounds
    if b is None:
        if exact and x.size and np.ptp(x) == 0:
            return Estimate.exactly(float(x[0]), "an exact output: every replicate has this value")
        return Estimate.mean_of(x, population=over or "replicates", level=level, bounds=(a_low, a_high))
    difference = (a_low - b_high, a_high - b_low)
    if paired:
        return Estimate.mean_of(x - y, f"paired over {over}", population=over, level=level, bounds=difference)
    if x.size >= 2 and y.size >= 2 and np.ptp(x) == 0 and np.ptp(y) == 0:  # both sides agree: no spread to use
        side = 1 - (1 - level) / 2  # each side's interval at this level: both cover together at ``level``
        word = over or "replicates"
        ia = agreement_interval(float(x[0]), x.size, bounds=(a_low, a_high), level=side, population=word)
        ib = agreement_interval(float(y[0]), y.size, bounds=(b_low, b_high), level=side, population=word)
        return Estimate(float(x[0] - y[0]), ia.low - ib.high, ia.high - ib.low, level=level,
                        population=f"{x.size} and {y.size} {over or 'replicates'}",
                        method="each side's agreement interval (Bonferroni)", bounds=difference,
                        agreeing=min(x.size, y.size))
    ci = welch_interval(x, y, level=level)
    if ci is None:
        return Estimate(float(np.nanmean(x) - np.nanmean(y)), note="fewer than 2 values on a side", bounds=difference)
    low, high = max(float(ci.low), difference[0]), min(float(ci.high), difference[1])
    cut = " (cut to the range of the difference)" if (low, high) != (float(ci.low), float(ci.high)) else ""
    return Estimate(float(ci.estimate), low, high, level=ci.level, population=ci.population,
                    method=ci.method + cut, bounds=difference)


def _kept(learned_cells: Learned | None, selection: Selection | None, da: xr.DataArray | None) -> xr.DataArray | None:
    """Which replicates of ``da`` (``selection`` of the sweep) the learning gate lets through, aligned with it."""
    if learned_cells is None or selection is None or da is None:
        return None
    met = learned_cells.met
    where = {k: v for k, v in selection.where.items() if k in met.coords}
    kept = Selection("learned", where).of(xr.Dataset({"learned": met}))
    return kept.broadcast_like(da).transpose(*da.dims)


def _present(ds: xr.Dataset, selection: Selection | None, da: xr.DataArray | None) -> xr.DataArray | None:
    """Where ``da`` (``selection`` of the sweep ``ds``) has a cell, aligned with it; ``None`` when
    every position has one. A sweep with runs taken as cells ([`dynlab.scenarios.external_runs`][])
    has none at a run's label on the other values of the other axes (status ``n/a``)."""
    if selection is None or da is None or "status" not in ds or not bool((ds["status"] == NO_CELL).any()):
        return None
    here = ds["status"] != NO_CELL
    where = {k: v for k, v in selection.where.items() if k in here.coords}
    return Selection("present", where).of(xr.Dataset({"present": here})).broadcast_like(da).transpose(*da.dims)


def _gated(claim: DeclaredClaim) -> bool:
    """Whether the learning gate applies to ``claim`` by default (module docstring of
    [`dynlab.scenarios.learning_gate`][]), or by its own gate table."""
    if not claim.gate.on or claim.dataset != SWEEP:
        return False
    if claim.gate.declared:
        return True
    selections = [s for s in (claim.selection, claim.minus) if s is not None]
    if any(s.variable.startswith("train_") for s in selections):
        return False
    stages = [s.where.get("stage") for s in selections]
    return not all(st is not None and set(st if isinstance(st, list) else [st]) == {"init"} for st in stages)


def _reduced(claim: DeclaredClaim, da: xr.DataArray) -> xr.DataArray:
    """``da`` with ``reduce = "final"`` applied: each step dim ([`is_step_dim`][]) reduced to its
    last finite value, cell by cell ([`dynlab.outputs.final`][])."""
    if claim.reduce != "final":
        return da
    for dim in [d for d in da.dims if is_step_dim(str(d))]:
        da = xr.apply_ufunc(final, da, input_core_dims=[[dim]], kwargs={"axis": -1})
    return da


def _statistic(claim: DeclaredClaim, outputs: dict | None = None, criteria: xr.Dataset | None = None):
    declared = (outputs or {}).get(claim.dataset) or {}

    def range_of(selection: Selection | None) -> tuple[float, float]:
        output = declared.get(selection.variable) if selection else None
        return output.range if output is not None else (-math.inf, math.inf)

    bounds = (range_of(claim.selection), range_of(claim.minus))
    exact = claim.minus is None and getattr(declared.get(claim.selection.variable), "kind", "real") == "exact"

    def measure(datasets) -> Estimate:
        ds = datasets.get(claim.dataset)
        if ds is None:
            raise NotTestable(f"{claim.dataset} was not written (see the run's messages)")
        a = _reduced(claim, claim.selection.of(ds))
        b = _reduced(claim, claim.minus.of(ds)) if claim.minus else None
        cells = learned(claim.gate, ds, criteria) if _gated(claim) and "status" in ds else None
        keep = (_kept(cells, claim.selection, a), _kept(cells, claim.minus, b))
        named = keep if claim.minus is None or claim.minus.where != claim.selection.where else keep[:1]
        present = (_present(ds, claim.selection, a), _present(ds, claim.minus, b))
        try:
            estimate = _grouped(a, b, keep, bounds, exact, present)
        except _FewLearned:
            raise NotTestable(_gate_text(cells, named, "not judged")) from None
        if cells is not None and any(k is not None and not bool(k.all()) for k in keep):
            estimate = dataclasses.replace(estimate, judged_on=_gate_text(cells, named, "judged"))
        return estimate

    def _grouped(a, b, keep, bounds, exact, present) -> Estimate:
        if not claim.for_each:
            return _estimate(a, b, claim.over, claim.id, LEVEL, bounds, keep, exact, present)
        for dim in claim.for_each:
            if dim not in a.dims:
                raise NotTestable(f"{claim.selection.variable} has no dim {dim!r} to take each value of")
        groups = list(itertools.product(*(a[d].values.tolist() for d in claim.for_each)))
        level = 1 - (1 - LEVEL) / len(groups)  # Bonferroni: every group's interval at once covers at LEVEL
        probe = Claim(claim.id, claim.statement, "", "", None, lower=claim.lower, upper=claim.upper, strict=claim.strict)
        estimates = {}

        def at_group(da, at):
            return None if da is None else (da.sel(at) if all(d in da.dims for d in at) else da)

        for values in groups:
            at = dict(zip(claim.for_each, values))
            estimates[", ".join(f"{k}={v}" for k, v in at.items())] = _estimate(
                a.sel(at), at_group(b, at), claim.over, f"{claim.id} at {at}", level, bounds,
                (at_group(keep[0], at), at_group(keep[1], at)), exact,
                (at_group(present[0], at), at_group(present[1], at)))
        chosen = weakest(probe, estimates)
        adjusted = f"each interval at {100 * level:.3g}% (Bonferroni)"
        return dataclasses.replace(chosen, note=f"{chosen.note}; {adjusted}", method=f"{chosen.method}; {adjusted}")

    return measure


def _gate_text(cells: Learned, keep, outcome: str) -> str:
    """The cells the learning gate left out of the selections' masks ``keep`` (each cell once: a
    ``minus`` on the same cells is not counted twice), in words: ``"2 of 4 cells did not learn
    (sign_accuracy >= 0.95): seed=0 (0.78), seed=1 (0.82)"``, and what that means for the claim
    (``outcome``)."""
    out, total, criteria = [], 0, set()
    for k in keep:
        if k is None:
            continue
        # a position where no cell is (a run's label at another seed) has neither a value nor a criterion
        total += int((np.isfinite(np.asarray(k["final"].values, float)) | (k["criterion"] != "").values).sum())
        out += [c for c in cells.excluded(k) if c not in out]
        criteria |= {str(c) for c in np.ravel(k["criterion"].values) if c}
    rule = "; ".join(sorted(criteria))
    text = f"{len(out)} of {total} cells did not learn ({rule}): {', '.join(out)}"
    if outcome == "judged":
        return f"judged on the cells that learned; {text}"
    return f"{text}; fewer than 2 replicates are left to judge (gate = false judges every cell)"


def to_claims(declared, scale: str = "", *, outputs: dict[str, dict[str, Output]] | None = None,
              criteria: xr.Dataset | None = None) -> list[Claim]:
    """The [`dynlab.claims.Claim`][] of each declared claim, for [`dynlab.claims.judge`][].

    ``outputs``: dataset name -> {variable -> its declared [`Output`][dynlab.outputs.Output]}: the
    kind and range of each claimed quantity (a variable not there is ``real``). ``criteria``: each
    cell's task criterion over the sweep axes ([`dynlab.scenarios.learning_gate.task_criteria`][]),
    for the learning gate (``None``: only the claims' own gate tables gate)."""
    out = []
    for c in declared:
        what = f"mean over {c.over}" if c.over else "the value"
        measure = f"{c.selection.variable}{_where_text(c.selection.where)}"
        if c.minus:
            measure += f" minus {c.minus.variable}{_where_text(c.minus.where)}"
        measure += ", final value" if c.reduce == "final" else ""
        measure += f", {what}" + (f", for each {', '.join(c.for_each)} (the weakest decides)" if c.for_each else "")
        out.append(Claim(c.id, c.statement, c.paper, measure, _statistic(c, outputs, criteria),
                         lower=c.lower, upper=c.upper, strict=c.strict, why=c.why, scale=scale))
    return out


def _where_text(where: dict) -> str:
    return f" at {', '.join(f'{k}={v}' for k, v in where.items())}" if where else ""
