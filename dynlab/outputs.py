r"""What an analysis writes, declared with it: each output variable's name, dims and kind.

A registered analysis declares its outputs (`register("analysis", NAME, outputs=(Output(...), ...))`),
so that everything that names a result — a claim's ``variable``, an analysis entry's ``where``, a
sweep's headline scores, an across-cell comparison — is checked against them before any work, and
so that a claim's interval is computed by a method made for the quantity:

- ``"real"``: a real number measured with sampling error (a mean exponent, a distance); its
  interval is Student-t (or Welch) and may take any real value within ``bounds``.
- ``"fraction"``: a proportion or accuracy in $[0, 1]$; its interval stays in $[0, 1]$ and the
  difference of two fractions in $[-1, 1]$.
- ``"count"``: a non-negative integer measured with sampling error (stable points found); its
  interval stays $\ge 0$, and seeds that all agree do not make a zero-width interval that decides.
- ``"exact"``: a number with no sampling error (a parameter count); a point value decides.
- ``"field"``: an array over its own dims (a spectrum, a trajectory); claimable only after a
  reduction over those dims.

``dims`` are the output's own dims, besides the ones a sweep adds (its axes, ``stage``). In a
sweep's merged dataset the variable is named ``<analysis>_<name>`` and its dims
``<analysis>_<dim>`` ([`dynlab.scenarios.cell.cell_summary`][]); a cell's training curves are
``train_<name>`` over ``train_step`` and ``train_eval_step`` ([`training_outputs`][]).

**Reductions.** A claim judges one number per replicate, so every own dim of the variable it names
must be reduced: selected by ``where``, taken as the replicates (``over``) or as the groups
(``for_each``), or, for a dim along which the quantity evolves ([`STEP_DIMS`][]: training steps,
evaluations, time), by ``reduce = "final"``: its last value ([`REDUCTIONS`][]).

**The declaration is kept.** [`mismatch`][] compares a dataset with its declaration; a registered
analysis's function is checked by it on every call ([`dynlab.registry.register`][]), so a
declaration cannot drift from the code without an [`OutputsWarning`][] naming the difference.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import warnings
from collections.abc import Iterable

__all__ = ["KINDS", "Kind", "Output", "OutputsWarning", "REDUCTIONS", "STEP_DIMS", "bounds_of", "check_dataset", "final", "group_outputs", "metric_outputs",
           "mismatch", "training_outputs"]

Kind = Literal["real", "fraction", "count", "exact", "field"]
KINDS: tuple[str, ...] = ("real", "fraction", "count", "exact", "field")

_DEFAULT_BOUNDS = {"real": (-math.inf, math.inf), "fraction": (0.0, 1.0), "count": (0.0, math.inf),
                   "exact": (-math.inf, math.inf), "field": (-math.inf, math.inf)}


@dataclasses.dataclass(frozen=True)
class Output:
    r"""One declared output variable of an analysis.

    Args:
        name: the variable's name in the analysis's dataset.
        kind: what sort of quantity it is (module docstring); chooses its interval method.
        dims: its own dims, in order (``()`` for a scalar per cell).
        bounds: the values it can take, ``(low, high)``; ``None`` takes the kind's
            (``fraction``: $[0, 1]$, ``count``: $[0, \infty)$, otherwise unbounded).
        description: what it is, in a few words (shown when a claim names a variable that does not exist).
        optional: written only under some options or inputs (a task's metric, a null that was asked
            for); [`mismatch`][] does not require it.
        dissimilarity: a distance between runs (dims ``run``, ``run_b``): an analysis across cells
            adds its means by group ([`group_outputs`][]).
        leading: dims that some calls put before ``dims`` (``grad-compare``'s ``pair`` when it
            compares three or more rules; with two it has one pair and drops the dim).
    """

    name: str
    kind: Kind = "real"
    dims: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None
    description: str = ""
    optional: bool = False
    dissimilarity: bool = False
    leading: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"output {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.bounds is not None and not self.bounds[0] < self.bounds[1]:
            raise ValueError(f"output {self.name!r}: bounds must be (low, high) with low < high, got {self.bounds}")

    @property
    def range(self) -> tuple[float, float]:
        """The values it can take: its ``bounds``, or its kind's."""
        return self.bounds if self.bounds is not None else _DEFAULT_BOUNDS[self.kind]

    @classmethod
    def each(cls, names: str, kind: Kind = "real", dims: tuple[str, ...] = (), **fields) -> tuple[Output, ...]:
        """One output per name of the space-separated ``names``, all of one kind and dims (the
        variables of one quantity: its value, interval bounds, spread)."""
        return tuple(cls(name, kind, dims, **fields) for name in names.split())


def bounds_of(kind: str) -> tuple[float, float]:
    """The default range of a kind of output."""
    return _DEFAULT_BOUNDS[kind]


class OutputsWarning(UserWarning):
    """A registered analysis returned a dataset that differs from its declared outputs: a defect of
    the analysis or of its declaration, never of the user's input (the result is kept)."""


def mismatch(declared: Iterable[Output], ds) -> list[str]:
    """How the data variables of ``ds`` differ from ``declared``, one phrase each (``[]``: they
    agree): a variable not declared, a declared one missing (unless ``optional``), dims other than
    the declared ones (in order)."""
    declared = {o.name: o for o in declared}
    problems = [f"{name!r} is not declared" for name in ds.data_vars if name not in declared]
    for name, output in declared.items():
        if name not in ds.data_vars:
            if not output.optional:
                problems.append(f"{name!r} is declared but not written")
        elif tuple(ds[name].dims) not in (output.dims, output.leading + output.dims):
            problems.append(f"{name!r} has dims {tuple(map(str, ds[name].dims))}, declared {output.dims}")
    return problems


def check_dataset(name: str, declared: tuple[Output, ...], ds) -> None:
    """Warn ([`OutputsWarning`][]) when ``ds``, the dataset of the analysis ``name``, differs from
    its declared outputs ([`mismatch`][])."""
    problems = mismatch(declared, ds)
    if problems:
        warnings.warn(f"analysis {name!r}: its dataset differs from its declared outputs: {'; '.join(problems)}",
                      OutputsWarning, stacklevel=3)


STEP_DIMS = ("step", "eval_step", "time")
"""Own dims along which a quantity evolves, in order: ``reduce = "final"`` takes its last value."""

REDUCTIONS = ("final",)
"""What a claim's ``reduce`` may name: ``final``, the last value along the variable's step dims
([`STEP_DIMS`][]), e.g. a training metric at the last evaluation."""


def final(values, axis: int):
    """The last finite value along ``axis`` of a NumPy array (NaN where there is none): a sweep
    pads a cell's shorter curve with NaN at its end, and its final value is its own last one."""
    import numpy as np

    values = np.moveaxis(np.asarray(values, float), axis, -1)
    finite = np.isfinite(values)
    last = values.shape[-1] - 1 - np.argmax(finite[..., ::-1], axis=-1)
    picked = np.take_along_axis(values, last[..., None], axis=-1)[..., 0]
    return np.where(finite.any(axis=-1), picked, np.nan)


METRIC_KINDS: dict[str, tuple[Kind, tuple[float, float] | None]] = {
    "accuracy": ("fraction", None), "sign_accuracy": ("fraction", None),
    "mse": ("real", (0.0, math.inf)), "bpc": ("real", (0.0, math.inf))}
"""The kind of each built-in loss's metric ([`dynlab.losses`][]); a plug-in's metric is ``real``."""


def metric_outputs(dims: tuple[str, ...], prefix: str = "", metrics: Iterable[str] | None = None) -> tuple[Output, ...]:
    """The outputs of a task's metric, one per metric name (``metrics``, default the built-in
    ones), each optional: a dataset holds the metric of its own task only."""
    out = []
    for m in METRIC_KINDS if metrics is None else metrics:
        kind, bounds = METRIC_KINDS.get(m, ("real", None))
        out.append(Output(f"{prefix}{m}", kind, dims, bounds, f"task metric {m}", optional=True))
    return tuple(out)


def training_outputs(metrics: Iterable[str] | None = None) -> tuple[Output, ...]:
    """The training curves a run writes ([`dynlab.train`][]'s ``metrics.nc``), as a cell's outputs
    under the ``train_`` prefix: per optimiser step (``step``) the batch ``loss``, the task's metric,
    ``grad_norm`` and ``lr``; per evaluation (``eval_step``) ``eval_loss`` and ``eval_<metric>``.
    ``metrics``: the metric names that can occur (default: the built-in ones; a study passes its
    registered losses' metrics)."""
    return (Output("loss", "real", ("step",), description="training loss of the batch, before the update"),
            *metric_outputs(("step",), metrics=metrics),
            Output("grad_norm", "real", ("step",), (0.0, math.inf), "gradient norm"),
            Output("lr", "real", ("step",), (0.0, math.inf), "learning rate"),
            Output("eval_loss", "real", ("eval_step",), description="held-out loss"),
            *metric_outputs(("eval_step",), "eval_", metrics))


def group_outputs(outputs) -> tuple[Output, ...]:
    """The variables [`dynlab.scenarios.across.by_group`][] adds for each dissimilarity among ``outputs`` (declared with
    ``dissimilarity = True``, [`dynlab.outputs.Output`][]); present only when some group has several runs."""
    out = []
    for o in (o for o in outputs if o.dissimilarity):
        out += [Output(f"{o.name}_by_group", o.kind, ("run_group", "run_group_b"), o.bounds, optional=True,
                       description=f"mean {o.name} between the runs of two groups"),
                Output(f"{o.name}_within_minus_between", "real", ("run_group",), optional=True,
                       description=f"mean {o.name} within a group minus its mean towards the other groups"),
                Output(f"{o.name}_group_p_value", "fraction", ("run_group", "run_group_b"), optional=True),
                Output(f"{o.name}_group_p_floor", "fraction", ("run_group", "run_group_b"), optional=True)]
    return tuple(out)
