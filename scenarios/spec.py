r"""Scenario files: a declarative experiment, validated as a whole before any work starts.

A scenario is a TOML file with the sections of a run config plus analyses and an optional sweep::

    name = "aru-lyapunov-seeds"
    description = "one line for `dynlab list scenarios`"
    seed = 0
    [model]  unit = "aru", hidden = 32
    [task]   name = "adding"
    [rule]   name = "bptt"
    [train]  steps = 300                 # steps = 0: analyse the freshly initialised model

    [[analyses]]                          # any registered analysis, with its options
    name = "lyapunov"
    k = 8
    task = "train"                        # "train": drive it with the cell's own task

    [sweep]                               # Cartesian axes: every combination
    "model.hidden" = [16, 32]
    seed = [0, 1, 2]
    [sweep.zip.size]                      # a zipped axis "size": these keys vary together
    "model.n_g" = [4, 8]
    "train.lr" = [3e-3, 1e-3]

``vmap_seeds = true`` in ``[sweep]`` trains the cells that differ only in ``seed`` as one
``jax.vmap``-ed computation (faster; equal to separate runs up to float32 rounding only).

Every combination of the sweep axes is a *cell*: one run config, one training run, its analyses.

**Programmed scenarios.** Experiments whose steps are not "train, then analyse" (train several
networks, transplant a controller, fit a model across budgets, …) are a Python function named by
the file, with its keyword arguments in ``[params]``::

    name = "sith-trw"
    description = "…"
    entry = "dynlab.scenarios.sith_trw:run_sith_trw"   # module:function
    [params]
    seeds = [0, 1, 2]
    steps = 200

The function is called as ``fn(out_dir, progress=callback, **params)``; it writes its datasets
and figures under ``out_dir`` and returns a dict of the datasets. ``params`` are checked against
its signature (names and types) before anything runs, and ``--set params.steps=50`` overrides
them. ``progress(done, total, info)`` takes a dict of short fields to show.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
from pathlib import Path
from typing import Any

from dynlab import config as cfgmod
from dynlab import experiment, registry
from dynlab.errors import ConfigError

TOP_KEYS = {"name", "description", "seed", "model", "task", "rule", "train", "analyses", "sweep"}
PROGRAM_KEYS = {"name", "description", "entry", "params"}


@dataclasses.dataclass(frozen=True)
class Axis:
    """One sweep dimension: ``name`` and, for each config key it sets, that key's values."""

    name: str
    values: dict[str, list]

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))


@dataclasses.dataclass(frozen=True)
class Cell:
    """One point of the sweep: its coordinates on every axis and its full config."""

    index: tuple[int, ...]
    coords: dict[str, Any]
    config: dict
    analyses: tuple[dict, ...]

    @property
    def key(self) -> str:
        """A stable name for the cell's directory: a hash of everything that determines its numbers."""
        text = cfgmod.dumps({**self.config, "analyses": {str(i): a for i, a in enumerate(self.analyses)}})
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    base: dict
    analyses: tuple[dict, ...]
    axes: tuple[Axis, ...]
    source: str
    vmap_seeds: bool = False

    @property
    def cells(self) -> list[Cell]:
        out = []
        for index in itertools.product(*(range(a.size) for a in self.axes)):
            config = copy.deepcopy(self.base)
            coords = {}
            for axis, i in zip(self.axes, index):
                coords[axis.name] = i if len(axis.values) > 1 else next(iter(axis.values.values()))[i]
                config = cfgmod.apply_values(config, {k: v[i] for k, v in axis.values.items()})
            out.append(Cell(index, coords, config, self.analyses))
        return out


@dataclasses.dataclass(frozen=True)
class Program:
    """A programmed scenario: ``entry`` (``module:function``) called with ``params``."""

    name: str
    description: str
    entry: str
    params: dict
    source: str

    @property
    def function(self):
        return _entry_function(self.entry, self.source)

    def run(self, out_dir: Path, progress=None) -> dict:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        return self.function(out_dir, progress=progress, **self.params)


def _entry_function(entry: str, source: str):
    import importlib

    module, _, name = entry.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"{source}: entry {entry!r} is not an importable module:function") from None
    if not callable(fn):
        raise ConfigError(f"{source}: entry {entry!r} is not callable")
    return fn


def _parse_program(doc: dict, source: str) -> Program:
    unknown = set(doc) - PROGRAM_KEYS
    if unknown:
        raise ConfigError(
            f"{source}: a programmed scenario (one with entry) takes only {', '.join(sorted(PROGRAM_KEYS))}; "
            f"unknown: {', '.join(sorted(unknown))}"
        )
    entry, params = doc["entry"], doc.get("params", {})
    if not isinstance(entry, str) or not isinstance(params, dict):
        raise ConfigError(f"{source}: entry must be a string module:function and [params] a table")
    fn = _entry_function(entry, source)
    reserved = ("out_dir", "progress")  # the runner passes them
    registry.check_config(f"{source}: params", fn, params, exclude=reserved)
    missing = [n for n, p in registry.config_keys(fn, exclude=reserved).items()
               if p.default is p.empty and n not in params]
    if missing:
        raise ConfigError(f"{source}: [params] lacks required key(s) {', '.join(missing)}")
    return Program(doc.get("name", Path(source).stem), doc.get("description", ""), entry, dict(params), source)


def _axis_values(where: str, key: str, values) -> list:
    if not isinstance(values, list):
        raise ConfigError(f"{where}: {key!r} must be a list of values, got {values!r}")
    if not values:
        raise ConfigError(f"{where}: axis {key!r} is empty; give at least one value")
    return values


def _parse_sweep(sweep: dict) -> tuple[tuple[Axis, ...], bool]:
    if not isinstance(sweep, dict):
        raise ConfigError("[sweep] must be a table of axes")
    sweep = dict(sweep)
    vmap_seeds = sweep.pop("vmap_seeds", False)
    if not isinstance(vmap_seeds, bool):
        raise ConfigError(f"sweep.vmap_seeds must be true or false, got {vmap_seeds!r}")
    axes = []
    for key, values in sweep.items():
        if key == "zip":
            if not isinstance(values, dict):
                raise ConfigError("[sweep.zip] must hold tables, e.g. [sweep.zip.size]")
            for name, group in values.items():
                if not isinstance(group, dict) or not group:
                    raise ConfigError(f"[sweep.zip.{name}] must be a non-empty table of key = [values]")
                lists = {k: _axis_values(f"[sweep.zip.{name}]", k, v) for k, v in group.items()}
                if len({len(v) for v in lists.values()}) != 1:
                    sizes = ", ".join(f"{k}: {len(v)}" for k, v in lists.items())
                    raise ConfigError(f"[sweep.zip.{name}]: zipped axes need equal lengths, got {sizes}")
                axes.append(Axis(name, lists))
        else:
            axes.append(Axis(key, {key: _axis_values("[sweep]", key, values)}))
    return tuple(axes), vmap_seeds


def _check_analysis(entry: dict) -> dict:
    if not isinstance(entry, dict) or "name" not in entry:
        raise ConfigError("each [[analyses]] entry needs a name, e.g. name = \"lyapunov\"")
    fn = registry.get("analysis", entry["name"]).obj
    options = {k: v for k, v in entry.items() if k != "name"}
    if isinstance(options.get("task"), str):
        if options["task"] != "train":
            registry.get("task", options["task"])
        options = {k: v for k, v in options.items() if k != "task"}
    registry.check_config(f"analyses.{entry['name']}", fn, options)
    return dict(entry)


def parse(doc: dict, source: str = "<dict>") -> Scenario | Program:
    """Validate a scenario document and every cell config it implies (or a programmed scenario)."""
    if "entry" in doc:
        return _parse_program(doc, source)
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise ConfigError(
            f"{source}: unknown scenario key(s) {', '.join(sorted(unknown))}; valid: {', '.join(sorted(TOP_KEYS))}"
        )
    base = {k: doc[k] for k in ("seed", "model", "task", "rule", "train") if k in doc}
    analyses = doc.get("analyses", [])
    if not isinstance(analyses, list):
        raise ConfigError(f"{source}: analyses must be an array of tables ([[analyses]])")
    try:
        analyses = tuple(_check_analysis(a) for a in analyses)
        axes, vmap_seeds = _parse_sweep(doc.get("sweep", {}))
        names = [a.name for a in axes]
        if len(set(names)) != len(names):
            raise ConfigError(f"sweep axes must have distinct names, got {names}")
        scenario = Scenario(
            doc.get("name", Path(source).stem), doc.get("description", ""), base, analyses, axes, source, vmap_seeds
        )
        from dynlab.scenarios.cell import without_training

        for cell in scenario.cells:  # every combination must be a valid config
            experiment.check(without_training(cell.config)[0])
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return scenario


def builtin_dir() -> Path:
    return Path(__file__).parent


def builtin_names() -> dict[str, Path]:
    return {p.stem: p for p in sorted(builtin_dir().glob("*.toml"))}


def load(name_or_file: str) -> Scenario | Program:
    """A built-in scenario by name, or a scenario file by path."""
    path = Path(name_or_file)
    builtin = builtin_names()
    if not path.is_file():
        if name_or_file in builtin:
            path = builtin[name_or_file]
        else:
            raise ConfigError(
                f"no scenario file {name_or_file!r} and no built-in scenario of that name; "
                f"built-in: {', '.join(builtin) or '(none)'}"
            )
    return parse(cfgmod.load_toml(path), str(path))
