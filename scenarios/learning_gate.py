r"""The learning gate: a claim about trained networks judges only the cells that learned their task.

Each task may declare what a network that learned it reaches ([`dynlab.tasks.base.Criterion`][]:
the flip-flop's sign accuracy >= 0.95, the adding problem's MSE <= 0.01, context integration's
accuracy >= 0.8). A claim on a sweep's per-cell results (a ``[[claims]]`` table on the dataset
``sweep``) is about trained networks, so it judges only the cells whose last held-out evaluation
(the last finite value of ``train_eval_<metric>``) met their task's criterion. The verdict names
the cells that did not, with their values; where fewer than 2 replicates are left to judge, the
claim is not testable and says so ("not testable: 2 of 4 cells did not learn, sign_accuracy 0.78
and 0.82 < 0.95"). A cell whose run diverged has no final metric and did not learn.

Not gated by default: a claim on a training curve itself (a ``train_*`` variable: it is about
learning, and judging only the cells that learned would judge only the winners), a claim whose
``where`` selects the ``init`` stage only, a claim on an analysis across cells, and cells whose
task declares no criterion, or that were never evaluated (``train.steps = 0``).

The claim's ``gate`` key changes the gate:

```toml
gate = false                                                # judge every cell
gate = { at_least = 0.9 }                                   # the task's metric, another threshold
gate = { at_most = 0.05 }                                   # ... where lower is better (an MSE)
gate = { variable = "train_eval_accuracy", at_least = 0.9 } # any per-cell variable, its last value
```

A gate table applies to any claim on the sweep, training curves included.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import xarray as xr

from dynlab.errors import ConfigError

__all__ = ["Gate", "Learned", "learned", "parse_gate", "task_criteria"]

EVAL_PREFIX, EVAL_DIM = "train_eval_", "train_eval_step"
"""A sweep's held-out training metrics: ``train_eval_<metric>`` over ``train_eval_step``."""


@dataclasses.dataclass(frozen=True)
class Gate:
    """A claim's learning gate, as its ``gate`` key declares it (module docstring).

    ``on``: false for ``gate = false``. ``variable``, ``threshold``, ``higher_is_better``: what a
    gate table sets (``None``: the task's criterion's). ``declared``: the claim has a gate table,
    which applies even where the default gate does not (a claim on a training curve).
    """

    on: bool = True
    variable: str | None = None
    threshold: float | None = None
    higher_is_better: bool | None = None
    declared: bool = False


def parse_gate(where: str, value) -> Gate:
    """The ``gate`` key of a claim (absent: ``None``) as a [`Gate`][], or a one-line [`ConfigError`][]."""
    if value is None or value is True:
        return Gate()
    if value is False:
        return Gate(on=False)
    if not isinstance(value, dict) or set(value) - {"variable", "at_least", "at_most"}:
        raise ConfigError(f"{where} must be false or a table of at_least or at_most and an optional variable, "
                          f"e.g. {{ at_least = 0.9 }}; got {value!r}")
    sides = [k for k in ("at_least", "at_most") if k in value]
    if len(sides) > 1:
        raise ConfigError(f"{where} takes one of at_least, at_most; got both")
    variable = value.get("variable")
    if variable is not None and not (isinstance(variable, str) and variable.strip()):
        raise ConfigError(f"{where}.variable must be the name of a per-cell variable of the sweep, got {variable!r}")
    if variable is not None and not sides:
        raise ConfigError(f"{where} names a variable; it needs at_least or at_most too")
    threshold = None
    if sides:
        threshold = value[sides[0]]
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise ConfigError(f"{where}.{sides[0]} must be a finite number, got {threshold!r}")
    return Gate(True, variable, None if threshold is None else float(threshold),
                None if not sides else sides[0] == "at_least", declared=True)


def task_criteria(scenario) -> xr.Dataset:
    """Each cell's task criterion over the sweep axes: ``metric`` (``""``: none declared),
    ``threshold`` (NaN: none) and ``higher_is_better``."""
    from dynlab import registry

    axes = scenario.axes
    shape = tuple(a.size for a in axes)
    metric = np.full(shape, "", dtype=object)
    threshold = np.full(shape, np.nan)
    higher = np.ones(shape, bool)
    coords = [[None] * a.size for a in axes]
    for cell in scenario.cells:
        for i, axis in enumerate(axes):
            coords[i][cell.index[i]] = cell.coords[axis.name]
        name = (cell.config.get("task") or {}).get("name")
        try:
            criterion = getattr(registry.get("task", name).obj, "criterion", None) if name else None
        except Exception:  # an unknown task was refused when the scenario was checked; no gate here
            criterion = None
        if criterion is not None:
            metric[cell.index], threshold[cell.index], higher[cell.index] = (
                criterion.metric, criterion.threshold, criterion.higher_is_better)
    dims = [a.name for a in axes]
    return xr.Dataset({"metric": (dims, metric), "threshold": (dims, threshold), "higher_is_better": (dims, higher)},
                      coords={a.name: values for a, values in zip(axes, coords)})


@dataclasses.dataclass(frozen=True)
class Learned:
    """Which cells of a sweep a gate lets through: ``met`` (bool over the cell dims), with each
    cell's ``final`` value of its gate variable and its ``criterion`` in words as coordinates, so
    that a selection of ``met`` carries them along."""

    met: xr.DataArray

    @staticmethod
    def excluded(kept: xr.DataArray) -> list[str]:
        """The cells of ``kept`` (a selection of ``met``) that did not learn, as ``"seed=1 (0.78)"``."""
        out = []
        cells = kept["final"].dims  # an analysis's own dims (a matrix, a stage) do not make more cells
        kept = kept.all([d for d in kept.dims if d not in cells]).transpose(*[d for d in kept.dims if d in cells])
        final = np.asarray(kept["final"].transpose(*kept.dims).values, float)
        for idx in zip(*np.nonzero(~np.asarray(kept.values, bool))):
            at = ", ".join(f"{d}={kept[d].values[i]}" for d, i in zip(kept.dims, idx) if d in kept.coords) or "the cell"
            value = float(final[idx])
            out.append(f"{at} ({value:.4g})" if math.isfinite(value) else f"{at} (no value)")
        return out


def learned(gate: Gate, sweep: xr.Dataset, criteria: xr.Dataset | None) -> Learned | None:
    """The cells of ``sweep`` that pass ``gate`` with the tasks' ``criteria`` ([`task_criteria`][]);
    ``None`` when nothing is gated (the gate is off, or no cell's task declares a criterion and the
    claim sets no threshold of its own)."""
    from dynlab.claims import NotTestable
    from dynlab.figures import last_finite

    if not gate.on:
        return None
    cell_dims = tuple(sweep["status"].dims)
    if criteria is None:
        criteria = xr.Dataset({"metric": ((), ""), "threshold": ((), np.nan), "higher_is_better": ((), True)})
    criteria = criteria.broadcast_like(sweep["status"])

    def final_of(name: str) -> xr.DataArray:
        if name not in sweep:
            raise NotTestable(f"the learning gate's variable {name!r} is not in the sweep")
        var = sweep[name]
        extra = [d for d in var.dims if d not in cell_dims]
        if len(extra) > 1:
            raise NotTestable(f"the learning gate's variable {name!r} has more than one dim besides the cells': "
                              f"{', '.join(map(str, extra))}")
        return (last_finite(var, extra[0]) if extra else var).broadcast_like(sweep["status"])

    threshold = criteria.threshold if gate.threshold is None else xr.full_like(criteria.threshold, gate.threshold)
    higher = criteria.higher_is_better if gate.higher_is_better is None else \
        xr.full_like(criteria.higher_is_better, gate.higher_is_better)
    if gate.variable is not None:
        final, name = final_of(gate.variable), xr.full_like(criteria.metric, gate.variable)
    else:
        name = criteria.metric
        final = xr.full_like(criteria.threshold, np.nan)
        metrics = {str(m) for m in np.ravel(criteria.metric.values) if m}
        if not all(f"{EVAL_PREFIX}{m}" in sweep for m in metrics):
            return None  # cells that were never trained and evaluated (train.steps = 0): nothing to gate on
        for metric in metrics:
            final = xr.where(criteria.metric == metric, final_of(f"{EVAL_PREFIX}{metric}"), final)
    gated = np.isfinite(threshold) & (name != "")
    if not bool(gated.any()):
        return None
    with np.errstate(invalid="ignore"):
        meets = xr.where(higher, final >= threshold, final <= threshold) & np.isfinite(final)
    met = xr.where(gated, meets, True).astype(bool)
    text = np.vectorize(lambda n, h, t: f"{n} {'>=' if h else '<='} {t:.12g}" if n and np.isfinite(t) else "",
                        otypes=[object])(name.values, higher.values, threshold.values)
    met = met.transpose(*cell_dims)
    return Learned(met.assign_coords(final=(cell_dims, final.transpose(*cell_dims).values),
                                     criterion=(cell_dims, np.broadcast_to(text, met.shape).copy())))
