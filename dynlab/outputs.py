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
``<analysis>_<dim>`` ([`dynlab.scenarios.cell.cell_summary`][]).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

__all__ = ["KINDS", "Kind", "Output", "bounds_of"]

Kind = Literal["real", "fraction", "count", "exact", "field"]
KINDS: tuple[str, ...] = ("real", "fraction", "count", "exact", "field")

_DEFAULT_BOUNDS = {"real": (-math.inf, math.inf), "fraction": (0.0, 1.0), "count": (0.0, math.inf),
                   "exact": (-math.inf, math.inf), "field": (-math.inf, math.inf)}


@dataclasses.dataclass(frozen=True)
class Output:
    """One declared output variable of an analysis.

    Args:
        name: the variable's name in the analysis's dataset.
        kind: what sort of quantity it is (module docstring); chooses its interval method.
        dims: its own dims, in order (``()`` for a scalar per cell).
        bounds: the values it can take, ``(low, high)``; ``None`` takes the kind's
            (``fraction``: $[0, 1]$, ``count``: $[0, \infty)$, otherwise unbounded).
        description: what it is, in a few words (shown when a claim names a variable that does not exist).
    """

    name: str
    kind: Kind = "real"
    dims: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None
    description: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"output {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.bounds is not None and not self.bounds[0] < self.bounds[1]:
            raise ValueError(f"output {self.name!r}: bounds must be (low, high) with low < high, got {self.bounds}")

    @property
    def range(self) -> tuple[float, float]:
        """The values it can take: its ``bounds``, or its kind's."""
        return self.bounds if self.bounds is not None else _DEFAULT_BOUNDS[self.kind]


def bounds_of(kind: str) -> tuple[float, float]:
    """The default range of a kind of output."""
    return _DEFAULT_BOUNDS[kind]
