"""Scenarios (installed as ``dynlab.scenarios``): declarative experiments and sweeps.

:mod:`~dynlab.scenarios.spec` parses and validates scenario TOML files (the built-in ones live
beside this file); :mod:`~dynlab.scenarios.cell` runs one cell; :mod:`~dynlab.scenarios.sweep`
runs all cells on Dask, resumably, and merges them into one dataset.
"""

from dynlab.registry import register
from dynlab.scenarios.spec import builtin_names, load, parse


def _register_builtin() -> None:
    import tomllib

    for name, path in builtin_names().items():
        with open(path, "rb") as f:
            description = tomllib.load(f).get("description", "")
        register("scenario", name, description or "(no description)")(path)


_register_builtin()

__all__ = ["load", "parse", "builtin_names"]
