"""The one stamp every result dataset carries: what made it.

Datasets written by dynlab say which analysis (or training run, sweep, program) produced them,
with which version of dynlab, options and seed. [`stamp`][] writes those attrs, the same way
for every producer, so that a dataset on disk explains itself and ``dynlab plot`` can find its
figure through the ``analysis`` attribute:

    ds = stamp(ds, analysis="jacobian-grid", config={"samples": 100, "norm": "spectral"}, seed=0)

Only xarray and numpy are imported: this is a core module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from numbers import Number
from typing import Any

import numpy as np
import xarray as xr

import dynlab

__all__ = ["attr_value", "stamp", "stamp_attrs"]


def attr_value(value: Any) -> Any:
    """``value`` as a netCDF-safe attribute value.

    Booleans (Python or NumPy) become 0/1; strings and numbers stay as they are; a list or tuple
    keeps its type with each element converted (a ``None`` element becomes ``"none"``); a NumPy
    array stays an array (booleans as integers); a mapping becomes its JSON text; anything else
    its ``str``. ``None`` itself has no attribute value: [`stamp_attrs`][] leaves such keys out.
    """
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, Number, np.number)):
        return value
    if isinstance(value, np.ndarray):
        return value.astype(int) if value.dtype == bool else value
    if isinstance(value, (list, tuple)):
        return type(value)("none" if v is None else attr_value(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps({str(k): v for k, v in value.items()}, default=str)
    return str(value)


def stamp_attrs(*, analysis: str, config: Mapping[str, Any] | None = None, seed: int | None = None) -> dict[str, Any]:
    """The attrs [`stamp`][] writes, as a dict (for producers that hand one attrs dict to
    several datasets, e.g. the training curves written at every checkpoint)."""
    if not isinstance(analysis, str) or not analysis:
        raise ValueError(f"a dataset's analysis must be a non-empty string, got {analysis!r}")
    attrs: dict[str, Any] = {"analysis": analysis, "dynlab_version": dynlab.__version__}
    for key, value in (config or {}).items():
        if value is not None:
            attrs[str(key)] = attr_value(value)
    if seed is not None:
        attrs["seed"] = attr_value(seed)
    return attrs


def stamp(ds: xr.Dataset, *, analysis: str, config: Mapping[str, Any] | None = None,
          seed: int | None = None) -> xr.Dataset:
    """``ds`` with its provenance attrs set: a shallow copy (the data are shared, not copied).

    Arguments:
        ds: the result.
        analysis: the name of what produced it: a registered analysis or program (``"lyapunov"``,
            ``"sith-trw"``), or ``"training"``, ``"sweep"``, or the name of a numerical core's
            result (``"covariance_spectrum"``). ``dynlab plot`` dispatches on it.
        config: the options that produced it, one attribute per key, values made netCDF-safe by
            [`attr_value`][] (booleans as 0/1); keys whose value is ``None`` are left out. A
            full configuration goes in as TOML text under one key (``{"config": dumps(cfg)}``).
        seed: the seed, written as ``seed`` when given (it wins over a ``seed`` in ``config``).

    Returns:
        A dataset whose attrs are ``analysis``, ``dynlab_version`` ([`dynlab.__version__`][]),
        the options and ``seed``, followed by the attrs ``ds`` already had that these do not
        replace.
    """
    attrs = stamp_attrs(analysis=analysis, config=config, seed=seed)
    out = ds.copy(deep=False)
    out.attrs = {**attrs, **{k: v for k, v in ds.attrs.items() if k not in attrs}}
    return out
