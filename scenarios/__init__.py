"""Scenarios (installed as ``dynlab.scenarios``): declarative experiments and sweeps.

[`spec`][dynlab.scenarios.spec] parses and validates scenario TOML files (the built-in ones live
beside this file); [`cell`][dynlab.scenarios.cell] runs one cell; [`sweep`][dynlab.scenarios.sweep]
runs all cells on Dask, resumably, and merges them into one dataset; [`across`][dynlab.scenarios.across]
runs the analyses of several runs (``dsa``) once across the cells.

The program modules are imported here so that their ``@register("program", …)`` runs: a
programmed scenario file chooses one of these by name (it never names a module itself).
"""

from dynlab.registry import register
from dynlab.scenarios.spec import builtin_names, load, parse

# Registers the built-in programs (light modules: their heavy imports are inside the functions).
from dynlab.scenarios import (  # noqa: E402,F401
    aru_table1,
    elm_budget,
    elm_shd,
    pc_time_law,
    pc_width_depth,
    sith_trw,
)


def _register_builtin() -> None:
    import tomllib

    for name, path in builtin_names().items():
        with open(path, "rb") as f:
            description = tomllib.load(f).get("description", "")
        register("scenario", name, description or "(no description)")(path)


_register_builtin()

__all__ = ["load", "parse", "builtin_names"]
