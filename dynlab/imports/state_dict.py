"""Taking the arrays of one network out of a flat state dict, with one-line errors.

**Enforces** one-line [`DataError`][dynlab.errors.DataError]s naming the key and what was
expected: a missing key, a wrong shape, a non-floating or non-finite array, keys left over.
Arrays keep their dtype (a float64 file stays float64, so an import can be checked in float64),
and integer arrays (the ELM's synapse routing) can be taken: the two differences from
[`Keys`][dynlab.imports.weights.Keys], which casts every array to float32.
"""

from __future__ import annotations

import numpy as np

from dynlab.errors import DataError


class StateDict:
    """The keys under ``prefix`` of ``weights``, taken one by one (``what`` names the network in errors)."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, *, what: str):
        self.weights, self.prefix, self.what = weights, prefix, what
        self.taken: set[str] = set()

    def has(self, name: str) -> bool:
        return self.prefix + name in self.weights

    def shape(self, name: str) -> tuple[int, ...] | None:
        a = self.weights.get(self.prefix + name)
        return None if a is None else tuple(np.shape(a))

    def take(self, name: str, shape: tuple[int, ...], why: str = "", *, integer: bool = False) -> np.ndarray:
        """The array ``prefix + name`` of ``shape``; floating and finite (or integer, ``integer=True``)."""
        key = self.prefix + name
        if key not in self.weights:
            raise DataError(f"{self.what}: missing key {key!r} (expected shape {list(shape)}{why})")
        array = np.asarray(self.weights[key])
        if tuple(array.shape) != tuple(shape):
            raise DataError(f"{self.what}: {key!r} has shape {list(array.shape)}, expected {list(shape)}{why}")
        kind = "iu" if integer else "f"
        if array.dtype.kind not in kind:
            raise DataError(f"{self.what}: {key!r} holds {array.dtype} values; "
                            f"{'integer indices' if integer else 'floating-point weights'} were expected")
        if not integer and not np.isfinite(array).all():
            raise DataError(f"{self.what}: {key!r} holds NaN or infinite values")
        self.taken.add(key)
        return array

    def finish(self) -> None:
        """Refuse keys under the prefix that were not taken (a part the format does not build)."""
        extra = [k for k in self.weights if k.startswith(self.prefix) and k not in self.taken]
        if extra:
            shown = ", ".join(f"{k} {list(np.shape(self.weights[k]))}" for k in extra[:4]) + (", …" if len(extra) > 4 else "")
            raise DataError(f"{self.what}: {len(extra)} key{'s' if len(extra) > 1 else ''} that dynlab cannot "
                            f"build: {shown}")



def imported(model: dict, input_size: int, output_size: int, arrays: dict[str, np.ndarray]) -> tuple[dict, object]:
    """The ``(config, model)`` a format returns: the run config of the ``[model]`` table ``model``
    on the widths-only task ``external``, and the model it builds with ``arrays`` (attribute paths,
    [`set_arrays`][dynlab.imports.run.set_arrays]) put in."""
    from dynlab.imports.run import set_arrays, skeleton

    config = {"seed": 0, "model": model,
              "task": {"name": "external", "input_size": int(input_size), "output_size": int(output_size)},
              "rule": {"name": "bptt"}, "train": {}}
    return config, set_arrays(skeleton(config), arrays)
