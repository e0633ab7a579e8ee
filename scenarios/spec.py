r"""Scenario files: a declarative experiment, validated as a whole before any work starts.

A scenario is a TOML file with the sections of a run config plus analyses and an optional sweep:

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
    [sweep.variants.network.aru]          # a variant axis "network": named sets of config values
    model = {unit = "aru", hidden = 32, n_g = 4}
    [sweep.variants.network.gru-slow]     # ... each sets its own keys (the cell's other keys stay)
    model = {unit = "gru", hidden = 32}
    "train.lr" = 1e-3

A *variant axis* (``[sweep.variants.NAME.LABEL]``) is for what one list per key cannot say:
networks whose config keys differ (a SITH-RNN has no ``hidden``, a layer stack has ``layers``),
each with its own learning rate. Its coordinate is the variant's label.

``vmap_seeds = true`` in ``[sweep]`` trains the cells that differ only in ``seed`` as one
``jax.vmap``-ed computation (faster; equal to separate runs up to float32 rounding only).

Every combination of the sweep axes is a *cell*: one run config, one training run, its analyses.

**Stages.** An ``[[analyses]]`` entry's ``stages`` names the points of its cell's life it runs
at: ``init``, ``step-N`` (after N training steps), ``trained`` (the default), ``isolated`` (the
trained weights with isolated neurons), ``transferred`` (after the cell's transfer)
([`STAGES`][], [`STEP_STAGE`][]); the dataset gains a ``stage`` dim in that order
([`stage_order`][]). A stage a cell cannot reach is a ``ConfigError`` before any work
([`check_cells`][]).

**Where.** An entry's ``where`` restricts it to the cells at some coordinates of the sweep axes
(an axis = a value or a list of values, as a claim's ``where`` selects): a study of several tasks
measures each with what fits it, ``where = {"task.name" = ["teacher-lorenz"]}``. A cell an entry
does not select has no result of it (NaN in the merged dataset, result status ``n/a``); an
analysis across cells compares only the cells it selects. An unknown axis or a value not on the
axis is a ``ConfigError`` before any work ([`entry_selects`][]).

**Transfers.** A ``[transfer]`` table declares what happens to the cell's trained model before
its ``transferred`` stage: a registered transfer (``dynlab list transfers``,
[`dynlab.transfer`][]) with its parameters, the task and training keys it changes, and the
steps it is retrained ([`dynlab.transfer.Transfer`][]):

    [transfer]                            # the ARU paper's App. B.3
    kind = "activation"                   # isolate | activation | controller (a plug-in may add more)
    steps = 200                           # retrain (n, s) only, 200 steps; 0: not retrained
    task = {rotate = 45}                  # ... on the 45°-rotated digits
    [[analyses]]
    name = "perturb"
    stages = ["trained", "transferred"]

It is part of the cell's config, so a sweep varies it like any key (``"transfer.steps" = [50,
100]``, or a variant axis ``[sweep.variants.transfer.NAME]`` with ``transfer = {kind = ...}``).
The transfer is applied once per cell, and the transferred model is written as a run directory
``transferred/`` inside the cell. A ``transferred`` stage in a cell without a transfer, a
transfer no analysis runs at, an unknown kind, parameters its function does not take, and a
transfer that cannot apply to the cell's model are each a ``ConfigError`` before any work.

**Runs taken as cells.** A ``[[runs]]`` table names a run directory (``dynlab import`` output,
or any trained run) and its label: the run becomes one more value of a sweep axis of names, a
cell the study analyses as it is and never trains ([`dynlab.scenarios.external_runs`][]; the
axis keeps how many of its values are trained, ``Axis.trained``, and the run's cell its ``run``).

**Overrides.** ``--set`` assignments apply to the document before it is validated; a key inside
``[sweep]`` names one axis by its dotted config key ([`sweep_path`][]): ``--set sweep.seed=[0]``
changes that axis and keeps the others.

**Programmed scenarios.** Experiments whose steps are not "train, transfer, analyse and compare"
(fit a model across budgets, a paper's table, …) are registered **programs**
(``@register("program", NAME)`` on a Python function, see ``dynlab list program``) that the file
chooses by name, with the program's keyword arguments in ``[params]``:

    name = "sith-trw"
    description = "…"
    program = "sith-trw"                 # a registered program, never a module
    [params]
    seeds = [0, 1, 2]
    steps = 200

A scenario file never names Python code: nothing it says is imported. The older spelling
``entry = "module:function"`` is accepted only when the string is exactly the ``module:function``
of an already registered program (a lookup among registered programs, not an import); anything
else is a [`ConfigError`][dynlab.errors.ConfigError] listing the registered programs.

The function is called as ``fn(out_dir, progress=callback, **params)``; it writes its datasets
and figures under ``out_dir`` and returns a dict of the datasets. ``params`` are checked against
its signature (names and types) before anything runs, and ``--set params.steps=50`` overrides
them. ``progress(done, total, info)`` takes a dict of short fields to show. A program may register
a ``check``, ``check(**params)`` (defaults filled in; [`dynlab.registry.Entry`][]), called then too: it raises
``ConfigError`` for combinations the signature cannot express (e.g. too few points for a fit).

**Names.** A scenario's ``name`` becomes part of directory names (``runs/run-<name>-<time>``), so
it must be a slug: letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit, no
``..`` ([`scenario_name`][]).

**Analyses that depend on the model.** Every cell's config is checked before any work, and so
are the analyses' options against every cell's model: an analysis may register a ``check``,
``check(model, **options)`` ([`dynlab.registry.Entry`][]), which [`check_cells`][] calls with the analysis's
options (defaults filled in, ``task`` left out) on each distinct cell model, built abstractly
(``equinox.filter_eval_shape``: shapes, no values); it raises ``ConfigError`` for options the
model cannot take (e.g. a Lyapunov ``k`` above the model's state dimension).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import itertools
import math
import re
from pathlib import Path
from typing import Any

from dynlab import config as cfgmod
from dynlab import experiment, registry
from dynlab.errors import ConfigError
from dynlab.option_groups import fold_legacy, group_parameters, parse_groups
from dynlab.outputs import Output, training_outputs
from dynlab.scenarios.declared_claims import check_claims, parse_claims
from dynlab.scenarios.external_runs import ExternalRun, parse_runs
from dynlab.transfer import Transfer

TOP_KEYS = {"name", "description", "seed", "model", "task", "rule", "train", "transfer", "analyses", "sweep",
            "claims", "presets", "runs"}
PROGRAM_KEYS = {"name", "description", "program", "entry", "params", "paper", "presets"}
DEFAULT_PRESET = "laptop"
"""The preset a scenario runs at when none is named: the file as written."""
PRESET_KEYS = {"description", "cost"}
"""Keys of a ``[presets.NAME]`` table that describe the preset rather than override the file."""
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclasses.dataclass(frozen=True)
class Axis:
    """One sweep dimension: ``name`` and, for each config key it sets, that key's values."""

    name: str
    values: dict[str, list]
    variants: tuple[dict, ...] = ()
    """A variant axis: ``values`` is ``{name: labels}`` and ``variants[i]`` the config values
    (dotted key -> value) that label ``i`` sets."""
    trained: int | None = None
    """How many of its values the study trains (``None``: all); the values after them are the
    labels of the run directories the study takes as cells ([`dynlab.scenarios.external_runs`][])."""

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))

    @property
    def trained_size(self) -> int:
        """The number of its values the study trains cells at."""
        return self.size if self.trained is None else self.trained

    def config_values(self, i: int) -> dict[str, Any]:
        """The config values (dotted key -> value) that point ``i`` of the axis sets."""
        return dict(self.variants[i]) if self.variants else {k: v[i] for k, v in self.values.items()}


@dataclasses.dataclass(frozen=True)
class Cell:
    """One point of the sweep: its coordinates on every axis and its full config."""

    index: tuple[int, ...]
    coords: dict[str, Any]
    config: dict
    analyses: tuple[dict, ...]
    axes: tuple[Axis, ...] = ()
    run: ExternalRun | None = None
    """The run directory this cell takes as it is (``[[runs]]``), or ``None`` for a cell the study trains."""

    @property
    def key(self) -> str:
        """A stable name for the cell's directory: a hash of everything that determines its numbers
        (for a run taken as a cell: its path, label and the digest of its config and weights)."""
        own = self.config if self.run is None else {"run": {"path": self.run.path, "label": self.run.label,
                                                             "digest": self.run.digest}}
        text = cfgmod.dumps({**own, "analyses": {str(i): a for i, a in enumerate(self.analyses)}})
        return hashlib.sha256(text.encode()).hexdigest()[:16]


TRANSFER = "transfer"
"""The key of a cell's config that declares its transfer (a scenario's ``[transfer]`` table)."""


def cell_transfer(config: dict) -> tuple[dict, Transfer | None]:
    """A cell's run config without its ``[transfer]`` table, and the transfer that table declares
    ([`dynlab.transfer.Transfer.parse`][]; ``None`` without one)."""
    if TRANSFER not in config:
        return config, None
    return {k: v for k, v in config.items() if k != TRANSFER}, Transfer.parse(config[TRANSFER])


def without_training(config: dict) -> tuple[dict, bool]:
    """``train.steps = 0`` in a scenario means "analyse the freshly initialised model"."""
    if config.get("train", {}).get("steps") == 0:
        train = {k: v for k, v in config["train"].items() if k != "steps"}
        return {**config, "train": train}, False
    return config, True


def takes_runs(entry: dict) -> bool:
    """Does this ``[[analyses]]`` entry name an analysis of several runs (``takes="runs"``, e.g.
    ``dsa``), which a scenario runs once across its cells rather than in each cell?"""
    return registry.get("analysis", entry["name"]).takes == "runs"


def takes_rules(entry: dict) -> bool:
    """Does this ``[[analyses]]`` entry name an analysis of the cell's rules (``takes="rules"``, e.g.
    ``grad-compare``), called with the model and the rules its ``[rule]`` names?"""
    return registry.get("analysis", entry["name"]).takes == "rules"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A validated sweep scenario. ``analyses`` are all its ``[[analyses]]`` entries: those of one
    model run in every cell (``cell_analyses``); those of several runs (``dsa``) run once across
    the cells after the sweep (``across``, [`dynlab.scenarios.across`][])."""

    name: str
    description: str
    base: dict
    analyses: tuple[dict, ...]
    axes: tuple[Axis, ...]
    source: str
    vmap_seeds: bool = False
    claims: tuple = ()
    """The ``[[claims]]`` of the file ([`dynlab.scenarios.declared_claims`][]), judged after the sweep."""
    runs: tuple[ExternalRun, ...] = ()
    """The run directories it takes as cells (``[[runs]]``, [`dynlab.scenarios.external_runs`][])."""

    @property
    def cell_analyses(self) -> tuple[dict, ...]:
        return tuple(a for a in self.analyses if not takes_runs(a))

    @property
    def across(self) -> tuple[dict, ...]:
        return tuple(a for a in self.analyses if takes_runs(a))

    @property
    def digest(self) -> str:
        """SHA-256 of everything that determines the sweep's cells and how they are computed.

        The validated scenario (base config, analyses, axes, ``vmap_seeds``), not the file's text:
        comments, layout, the order of keys in a table, ``name`` and ``description`` do not change
        it, a ``--set`` override does. [`dynlab.scenarios.sweep.prepare`][] stores it with a
        sweep and compares it on resume.
        """

        def canonical(value):
            return {k: canonical(value[k]) for k in sorted(value)} if isinstance(value, dict) else value

        doc = {
            "base": self.base,
            "analyses": {str(i): a for i, a in enumerate(self.analyses)},
            "axes": {str(i): {"name": a.name, "values": a.values,
                              **({"variants": {str(j): v for j, v in enumerate(a.variants)}} if a.variants else {})}
                     for i, a in enumerate(self.axes)},
            "vmap_seeds": self.vmap_seeds,
        }
        if self.runs:  # only then: the digests of sweeps without runs stay what they were (their resume)
            doc["runs"] = {r.label: {"path": r.path, "axis": r.axis, "digest": r.digest} for r in self.runs}
        return hashlib.sha256(cfgmod.dumps(canonical(doc)).encode()).hexdigest()

    @functools.cached_property
    def cells(self) -> list[Cell]:
        """Its cells, one per combination of the axes' values, made once (the sweep, its merge, the
        analyses across cells and the summary all read them; each read deep-copied every cell)."""
        out = []
        for index in itertools.product(*(range(a.trained_size) for a in self.axes)):
            config = copy.deepcopy(self.base)
            coords = {}
            for axis, i in zip(self.axes, index):
                coords[axis.name] = coordinate_of(axis, i)
                config = cfgmod.apply_values(config, axis.config_values(i))
            analyses = tuple(a for a in self.cell_analyses if entry_selects(a, coords))
            out.append(Cell(index, coords, config, analyses, self.axes))
        for run in self.runs:  # at its label on its axis, at the first value of every other axis
            index = tuple(axis.values[axis.name].index(run.label) if axis.name == run.axis else 0 for axis in self.axes)
            coords = {axis.name: coordinate_of(axis, i) for axis, i in zip(self.axes, index)}
            analyses = tuple(a for a in self.cell_analyses if entry_selects(a, coords))
            out.append(Cell(index, coords, run.config, analyses, self.axes, run))
        return out


def coordinate_of(axis: Axis, i: int):
    """The coordinate of value ``i`` of ``axis`` in the merged dataset (a zipped axis: ``i``)."""
    return i if len(axis.values) > 1 else next(iter(axis.values.values()))[i]


@dataclasses.dataclass(frozen=True)
class Program:
    """A programmed scenario: the registered ``program`` called with ``params``.

    ``paper``: the id of the paper it reproduces ([`dynlab.scenarios.papers.PAPERS`][]) or "";
    ``presets``: name -> ``{"description", "cost"}`` of every preset the file offers (``laptop``, the
    ``[params]`` as written, always); ``preset``: the one these ``params`` are at.
    """

    name: str
    description: str
    program: str
    params: dict
    source: str
    paper: str = ""
    presets: dict = dataclasses.field(default_factory=dict)
    preset: str = DEFAULT_PRESET

    @property
    def function(self):
        return registry.get("program", self.program).obj

    def resolved_params(self) -> dict:
        """``params`` with the program's defaults filled in (what the claims are built from)."""
        keys = registry.config_keys(self.function, exclude=("out_dir", "progress"))
        return {**{n: p.default for n, p in keys.items() if p.default is not p.empty}, **self.params}

    def claims(self) -> list:
        """The program's claims at these parameters ([`dynlab.claims.Claim`][]) when the scenario names
        the paper they belong to; none otherwise (a scenario reusing a paper's program is not judged
        against that paper)."""
        make = registry.get("program", self.program).claims
        return [] if make is None or not self.paper else list(make(self.resolved_params()))

    def run(self, out_dir: Path, progress=None) -> dict:
        """Run the program into ``out_dir``; for a paper scenario, also judge its claims on the datasets
        ([`dynlab.claims.judge`][]), write ``findings.nc`` and return it as ``"findings"``.

        ``out_dir`` must be new, empty, or hold only this process's claim
        ([`dynlab.store.check_output_dir`][]): a second run into one directory is a one-line
        ``ConfigError`` before any work, the first run's files untouched (a program does not resume).
        """
        from dynlab import store
        from dynlab.claims import judge

        out_dir = Path(out_dir)
        store.check_output_dir(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        datasets = self.function(out_dir, progress=progress, **self.params)
        claims = self.claims()
        if claims:
            preset = self.presets.get(self.preset, {})
            findings = judge(claims, datasets, paper=self.paper, scenario=self.name, preset=self.preset,
                             attrs={"preset_description": preset.get("description", ""),
                                    "params": repr(self.resolved_params())})
            store.write_dataset(out_dir / "findings.nc", findings)
            datasets = {**datasets, "findings": findings}
        return datasets


def _registered_programs() -> str:
    return ", ".join(registry.names("program")) or "(none registered)"


def program_name(doc: dict, source: str) -> str:
    """The registered program a scenario document chooses.

    Enforces: nothing a scenario file names is imported. ``program = "NAME"`` is looked up in the
    registry; the old ``entry = "module:function"`` is compared, as a string, with the
    ``module:function`` of every registered program. Neither ever calls ``importlib``.
    """
    if "program" in doc and "entry" in doc:
        raise ConfigError(f"{source}: give program = \"NAME\" only, not also entry")
    if "program" in doc:
        name = doc["program"]
        if not isinstance(name, str) or name not in registry.names("program"):
            raise ConfigError(f"{source}: unknown program {name!r}; registered programs: {_registered_programs()}")
        return name
    entry = doc["entry"]
    by_entry = {f"{e.obj.__module__}:{e.obj.__name__}": e.name for e in registry.entries("program")}
    if not isinstance(entry, str) or entry not in by_entry:
        raise ConfigError(
            f"{source}: entry {entry!r} is not a registered program (a scenario file never names a module; "
            f"choose one with program = \"NAME\"); registered programs: {_registered_programs()}"
        )
    return by_entry[entry]


def scenario_name(doc: dict, source: str) -> str:
    """The scenario's name: its ``name`` key, else the file's stem made into a slug.

    Enforces: a name taken from a scenario file is a safe slug (``SAFE_NAME``, no ``..``), so that
    the run directory named after it stays inside ``runs/``.
    """
    if "name" not in doc:
        stem = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source).stem)).lstrip("._-")
        return stem[:100] or "scenario"
    name = doc["name"]
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or ".." in name:
        raise ConfigError(
            f"{source}: name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit "
            f"and without '..', got {name!r}"
        )
    return name


def _description(doc: dict, source: str) -> str:
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ConfigError(f"{source}: description must be a string, got {description!r}")
    return description


def _parse_program(doc: dict, source: str, preset: str = DEFAULT_PRESET) -> Program:
    unknown = set(doc) - PROGRAM_KEYS
    if unknown:
        raise ConfigError(
            f"{source}: a programmed scenario (one with program) takes only {', '.join(sorted(PROGRAM_KEYS))}; "
            f"unknown: {', '.join(sorted(unknown))}"
        )
    name = scenario_name(doc, source)
    program = program_name(doc, source)
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise ConfigError(f"{source}: [params] must be a table of the program's arguments")
    paper = doc.get("paper", "")
    if paper:
        from dynlab.scenarios.papers import PAPERS

        if paper not in PAPERS:
            raise ConfigError(f"{source}: unknown paper {paper!r}; papers: {', '.join(PAPERS)}")
    presets = _presets(doc, source)
    fn = registry.get("program", program).obj
    reserved = ("out_dir", "progress")  # the runner passes them
    registry.check_config(f"{source}: params", fn, params, exclude=reserved)
    missing = [n for n, p in registry.config_keys(fn, exclude=reserved).items()
               if p.default is p.empty and n not in params]
    if missing:
        raise ConfigError(f"{source}: [params] lacks required key(s) {', '.join(missing)}")
    hook = registry.get("program", program).check  # checks across params (e.g. enough points for a fit), before any work
    if hook is not None:
        hook(**{**registry.defaults(fn, exclude=reserved), **params})
    return Program(name, _description(doc, source), program, dict(params), source, paper,
                   {k: {d: v.get(d, "") for d in PRESET_KEYS} for k, v in presets.items()},
                   preset)


def _presets(doc: dict, source: str) -> dict[str, dict]:
    """The file's ``[presets.NAME]`` tables, ``laptop`` always among them (the file as written)."""
    presets = doc.get("presets", {})
    if not isinstance(presets, dict) or not all(isinstance(v, dict) for v in presets.values()):
        raise ConfigError(f"{source}: [presets] must hold tables [presets.NAME] of overrides")
    for name in presets:
        if not SAFE_NAME.fullmatch(name):
            raise ConfigError(f"{source}: preset name {name!r} must be letters, digits, '.', '_' or '-'")
    return {DEFAULT_PRESET: {}, **presets}


def apply_preset(doc: dict, preset: str | None, source: str) -> dict:
    """``doc`` at ``[presets.<preset>]`` (a copy; ``None``: the default, the file as written).

    A programmed scenario's preset is merged over its ``[params]``. A sweep's preset holds keys
    of the file as ``--set`` names them, written as TOML dotted keys, each set as that ``--set``
    would set it ([`sweep_path`][]): ``train.steps = 1500`` or ``sweep.seed = [0, 1, 2]`` (one
    axis replaced, the others kept). A preset the scenario lacks is a ConfigError naming the ones
    it has."""
    name = DEFAULT_PRESET if preset is None else preset
    presets = _presets(doc, source)
    if name not in presets:
        raise ConfigError(f"{source}: no preset {name!r}; presets: {', '.join(presets)}")
    overrides = {k: v for k, v in presets[name].items() if k not in PRESET_KEYS}
    out = copy.deepcopy(doc)
    if "program" in doc or "entry" in doc:
        out["params"] = {**out.get("params", {}), **overrides}
        return out
    return cfgmod.apply_paths(out, _leaves(overrides), regroup=sweep_path)


def _leaves(table: dict, path: tuple = ()) -> list[tuple[list[str], Any]]:
    """A nested table's values with their key paths (a list or any other value is a leaf)."""
    out = []
    for key, value in table.items():
        out += _leaves(value, path + (key,)) if isinstance(value, dict) else [([*path, key], value)]
    return out


def sweep_path(keys: list[str]) -> list[str]:
    """The path a ``--set`` key sets in a scenario document: a key inside ``[sweep]`` is one axis,
    named by a dotted config key, so ``sweep.model.unit`` sets the axis ``"model.unit"`` (as
    ``sweep."model.unit"`` does) and ``sweep.zip.size.train.lr`` the key ``"train.lr"`` of the
    zipped axis ``size``; variant tables and every key outside ``[sweep]`` are paths as written.

    **Enforces** "one axis of a sweep is changed by one ``--set``, the others kept":
    ``--set sweep.seed=[0]`` and ``--set sweep.model.width=[8]`` replace those axes' values."""
    if keys[0] != "sweep" or len(keys) < 2 or keys[1] in ("variants", "vmap_seeds"):
        return keys
    if keys[1] == "zip":
        return keys[:3] + [".".join(keys[3:])] if len(keys) > 3 else keys
    return ["sweep", ".".join(keys[1:])]


def _axis_values(where: str, key: str, values) -> list:
    if not isinstance(values, list):
        raise ConfigError(f"{where}: {key!r} must be a list of values, got {values!r}")
    if not values:
        raise ConfigError(f"{where}: axis {key!r} is empty; give at least one value")
    return values


def _flat(table: dict, prefix: str = "") -> dict[str, Any]:
    """A variant's table as dotted keys: ``model = {unit = "gru"}`` -> ``{"model.unit": "gru"}``."""
    out = {}
    for k, v in table.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _variant_axes(tables) -> list[Axis]:
    """**Enforces** "a variant axis names its variants by slugs, and each sets at least one config
    value": ``[sweep.variants.NAME.LABEL]`` tables, each a non-empty table of config keys (dotted,
    or a section's table); what they set is checked as every cell's config is."""
    if not isinstance(tables, dict) or not tables:
        raise ConfigError("[sweep.variants] must hold variant axes, e.g. [sweep.variants.network.aru]")
    axes = []
    for name, variants in tables.items():
        if not isinstance(variants, dict) or not variants:
            raise ConfigError(f"[sweep.variants.{name}] must hold one table per variant, e.g. "
                              f"[sweep.variants.{name}.aru] with model = {{unit = \"aru\"}}")
        for label, table in variants.items():
            if not SAFE_NAME.fullmatch(label):
                raise ConfigError(f"[sweep.variants.{name}]: variant name {label!r} must be letters, digits, '.', "
                                  "'_' or '-'")
            if not isinstance(table, dict) or not table:
                raise ConfigError(f"[sweep.variants.{name}.{label}] must be a non-empty table of config values, "
                                  "e.g. model = {unit = \"gru\"}")
        axes.append(Axis(name, {name: list(variants)}, tuple(_flat(t) for t in variants.values())))
    return axes


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
                lists = {k: _axis_values(f"[sweep.zip.{name}]", k, v) for k, v in _flat(group).items()}
                if len({len(v) for v in lists.values()}) != 1:
                    sizes = ", ".join(f"{k}: {len(v)}" for k, v in lists.items())
                    raise ConfigError(f"[sweep.zip.{name}]: zipped axes need equal lengths, got {sizes}")
                axes.append(Axis(name, lists))
        elif key == "variants":
            axes.extend(_variant_axes(values))
        elif isinstance(values, dict):  # TOML's unquoted model.unit = [..]: the axis "model.unit"
            axes.extend(Axis(k, {k: _axis_values("[sweep]", k, v)}) for k, v in _flat(values, f"{key}.").items())
        else:
            axes.append(Axis(key, {key: _axis_values("[sweep]", key, values)}))
    return tuple(axes), vmap_seeds


STAGES = ("init", "trained", "isolated", "transferred")
"""The named points of a cell's life an analysis can run at: ``init`` (the freshly built model,
before training), ``trained`` (after training; the default), ``isolated`` (the trained weights
perturbed into isolated neurons, each feeding back onto itself only: the registered transfer
``isolate``, [`dynlab.transfer.isolate`][], the ARU paper's Fig. 4c; units rnn, rnn-gamma and
aru; not retrained, and needing no ``[transfer]``) and ``transferred`` (the trained model after
the cell's ``[transfer]`` and its retraining). Besides these, ``step-N`` ([`STEP_STAGE`][])."""
ISOLATED = Transfer("isolate")
"""The transfer of the ``isolated`` stage."""
STEP_STAGE = re.compile(r"step-([1-9][0-9]{0,8})")
"""``step-N``: the model after N of the cell's training steps (1 <= N <= ``train.steps``)."""
STAGE_FORMS = "init, step-N (after N training steps), trained, isolated, transferred"


def stage_step(stage: str) -> int | None:
    """N of a ``step-N`` stage, else ``None``."""
    m = STEP_STAGE.fullmatch(stage)
    return int(m.group(1)) if m else None


def stage_order(stage: str) -> tuple[int, int]:
    """Where a stage lies in a cell's life, for ordering the ``stage`` coordinate: ``init``, the
    ``step-N`` in order of N, ``trained``, ``isolated``, ``transferred``."""
    step = stage_step(stage)
    return (1, step) if step is not None else ({"init": 0, "trained": 2, "isolated": 3, "transferred": 4}[stage], 0)


ENTRY_KEYS = ("name", "stages", "where")
"""Keys of an ``[[analyses]]`` entry that are not options of the analysis."""
CELL_SEED = "cell"
"""``seed = "cell"`` in an ``[[analyses]]`` entry: the analysis draws its randomness (inputs,
initial conditions, noise) from the cell's own ``seed``, so that replicate cells are independent
in their analyses too, not only in their weights."""


def _cell_seed(options: dict) -> dict:
    """``options`` without a ``seed = "cell"`` (which the cell fills in) for checks against the
    analysis's signature."""
    return {k: v for k, v in options.items() if not (k == "seed" and v == CELL_SEED)}


def entry_stages(entry: dict) -> tuple[str, ...]:
    """The stages an ``[[analyses]]`` entry runs at (``stages``, default ``["trained"]``)."""
    return tuple(entry.get("stages", ("trained",)))


def entry_selects(entry: dict, coords: dict) -> bool:
    """Whether an ``[[analyses]]`` entry runs in the cell at ``coords`` (axis -> the cell's
    coordinate): every axis its ``where`` names holds the cell's coordinate (one value, or one of
    a list); an entry without ``where`` runs in every cell."""
    return all(coords[axis] in (wanted if isinstance(wanted, list) else [wanted])
               for axis, wanted in entry.get("where", {}).items())


def _check_where(entry: dict, coordinates: dict[str, list]) -> None:
    """**Enforces** "an analysis restricted to some cells names them by the sweep's coordinates",
    before any work: ``where`` is a non-empty table whose keys are axes (``coordinates``: axis ->
    its values, [`axis_coordinates`][]) and whose values lie on them. Axes vary independently, so
    such a selection always holds at least one cell."""
    if "where" not in entry:
        return
    where, name = entry["where"], entry["name"]
    if not isinstance(where, dict) or not where:
        raise ConfigError(f"analyses.{name}.where must be a table of sweep axis = value or [values], "
                          f"e.g. where = {{\"task.name\" = \"flipflop\"}}, got {where!r}")
    for axis, wanted in where.items():
        if axis not in coordinates:
            valid = ", ".join(coordinates) or "none: the scenario has no [sweep]"
            raise ConfigError(f"analyses.{name}.where: {axis!r} is not a sweep axis; axes: {valid}")
        values = wanted if isinstance(wanted, list) else [wanted]
        off = [v for v in values if v not in coordinates[axis]]
        if not values or off:
            raise ConfigError(f"analyses.{name}.where: {axis} = {off[0] if off else wanted!r} is not on the axis; "
                              f"its values: {', '.join(map(str, coordinates[axis]))}")


def axis_coordinates(axes) -> dict[str, list]:
    """Each sweep axis's coordinates in the merged dataset: its values, a zipped axis's positions,
    a variant axis's labels."""
    return {a.name: (list(next(iter(a.values.values()))) if len(a.values) == 1 else list(range(a.size)))
            for a in axes}


def results_of(entry: dict) -> list[tuple[str, str]]:
    """``(result name, stage)`` of each stage an entry runs at, in the order of a cell's life
    ([`stage_order`][]): the result (and its file ``<result>.nc`` in the cell) is named by the
    analysis at ``trained`` and ``<name>-<stage>`` at another stage."""
    return [(entry["name"] if stage == "trained" else f"{entry['name']}-{stage}", stage)
            for stage in sorted(entry_stages(entry), key=stage_order)]


def _check_input(entry: dict) -> None:
    """**Enforces** "a scenario names only analyses its cells can give their input to", before any
    work: a function of a model (or, across cells, of runs), not one that builds its own models
    from a task and a grid (``pc-bp``, ``pc-bptt``: commands of their own)
    ([`dynlab.registry.of_what_it_takes`][])."""
    name = entry["name"]
    analysis = registry.get("analysis", name)
    if registry.of_what_it_takes(analysis.obj, analysis.takes):
        return
    valid = [e.name for e in registry.entries("analysis") if registry.of_what_it_takes(e.obj, e.takes)]
    raise ConfigError(f"analyses.{name} builds its own models from a task and a grid, so a cell cannot run it: "
                      f"run it with `dynlab analyze {name}`; analyses a scenario can run: {', '.join(valid)}")


def _check_stages(entry: dict) -> None:
    if "stages" not in entry:
        return
    stages, name = entry["stages"], entry["name"]
    if not isinstance(stages, list) or not stages or not all(isinstance(x, str) for x in stages):
        raise ConfigError(f"analyses.{name}.stages must be a non-empty list of stages ({STAGE_FORMS}), "
                          f"got {stages!r}")
    unknown = [x for x in stages if x not in STAGES and stage_step(x) is None]
    if unknown:
        raise ConfigError(f"analyses.{name}.stages: unknown stage {unknown[0]!r}; stages: {STAGE_FORMS}")
    if len(set(stages)) != len(stages):
        raise ConfigError(f"analyses.{name}.stages names a stage twice: {stages!r}")
    if takes_runs(entry) and stages != ["trained"]:
        raise ConfigError(f"analyses.{name} compares the cells' trained runs: it runs at stage 'trained' only, "
                          f"not {', '.join(repr(x) for x in stages if x != 'trained')}")


def _check_cell_stages(config: dict, trains: bool, transfer: Transfer | None, cell: "Cell") -> None:
    """**Enforces** "an analysis at a stage its cell cannot reach fails before any work": every
    stage but ``init`` needs training (``train.steps`` > 0), ``step-N`` needs N <= ``train.steps``,
    ``transferred`` a ``[transfer]``; and a ``[transfer]`` needs an analysis at ``transferred``
    (else it would be declared and never run). Whether the transfer (``isolate`` for ``isolated``)
    applies to the cell's model is checked once per configuration apart from the seed
    (``_check_transfers``)."""
    where = f"cell {cell_name(cell) or '(the only one)'}"
    steps = config.get("train", {}).get("steps", registry.defaults(experiment.TrainConfig)["steps"])
    for entry in cell.analyses:
        name = entry["name"]
        for stage in entry.get("stages", ()):  # without stages: trained, or the fresh model when nothing trains
            if stage == "init":
                continue
            if not trains:
                raise ConfigError(f"analyses.{name} runs at stage {stage!r}, but {where} has train.steps = 0 "
                                  "(it analyses the freshly built model): use stages = [\"init\"]")
            if (stage_step(stage) or 0) > steps:
                raise ConfigError(f"analyses.{name} runs at stage {stage!r}, but {where} trains {steps} steps: "
                                  "N of step-N must be at most train.steps")
            if stage == "transferred" and transfer is None:
                raise ConfigError(f"analyses.{name} runs at stage 'transferred', but {where} declares no transfer: "
                                  f"add a [transfer] table with kind = one of {', '.join(registry.names('transfer'))}")
    if transfer is not None and not any("transferred" in entry_stages(e) for e in cell.analyses):
        raise ConfigError(f"[transfer] ({transfer.kind}) of {where} is never analysed: add \"transferred\" to the "
                          "stages of an analysis, or remove [transfer]")


def _check_transfers(config: dict, transfer: Transfer | None, cell: "Cell") -> None:
    """**Enforces** "a stage after a transfer the cell's model cannot take fails before any work":
    the ``isolate`` transfer for ``isolated`` (a unit with isolated neurons) and the cell's
    ``[transfer]`` for ``transferred`` are applied to the cell's model built abstractly
    ([`dynlab.transfer.Transfer.check`][])."""
    stages = {s for e in cell.analyses for s in e.get("stages", ())}
    for stage, declared in (("isolated", ISOLATED), ("transferred", transfer)):
        if stage in stages and declared is not None:
            try:
                declared.check(config)
            except ConfigError as e:
                what = "" if stage == "isolated" else f" its [transfer] ({declared.kind}) cannot apply:"
                where = f" in cell {cell_name(cell)}" if cell.coords else ""
                raise ConfigError(f"stage {stage!r}{where}:{what} {e}") from None


RUNS_ARGUMENT = ("runs", "key", "self")
"""Parameters of an analysis of several runs that the sweep passes, never options of a scenario."""


MAX_CELLS = 10_000
"""The most cells one sweep may have (the product of its axes' lengths, seeds included): each is
validated before work starts and written as its own directory."""


def _check_cell_count(axes: tuple[Axis, ...]) -> None:
    """**Enforces** "the number of cells of a sweep is checked before any is built": the product
    of the axis lengths, against [`MAX_CELLS`][]."""
    n = math.prod(a.size for a in axes)
    if n > MAX_CELLS:
        shape = " x ".join(f"{a.size:,} {a.name}" for a in axes)
        raise ConfigError(f"the sweep has {n:,} cells ({shape}); a sweep may have at most {MAX_CELLS:,}: "
                          "shorten its axes or split it into several scenarios")


def _check_distinct_results(analyses: tuple[dict, ...]) -> None:
    """**Enforces** "two ``[[analyses]]`` never write one result", at parse: a result (and its
    file in a cell) is named by its analysis and stage ([`results_of`][]), so two entries of one
    analysis must run at different stages (two of ``lyapunov`` with different options: run one,
    or the other in a second scenario)."""
    seen: set[str] = set()
    for entry in analyses:
        for result, stage in results_of(entry):
            if result in seen:
                raise ConfigError(f"two [[analyses]] named {entry['name']!r} run at stage {stage!r}: their results "
                                  f"would have one name ({result}); give them different stages, or keep one")
            seen.add(result)


def _check_analysis(entry: dict) -> dict:
    if not isinstance(entry, dict) or "name" not in entry:
        raise ConfigError("each [[analyses]] entry needs a name, e.g. name = \"lyapunov\"")
    fn = registry.get("analysis", entry["name"]).obj
    _check_input(entry)
    _check_stages(entry)
    options = fold_legacy(fn, {k: v for k, v in entry.items() if k not in ENTRY_KEYS}, f"analyses.{entry['name']}")
    if isinstance(options.get("task"), str):
        if options["task"] != "train":
            registry.get("task", options["task"])
        options = {k: v for k, v in options.items() if k != "task"}
    exclude = RUNS_ARGUMENT if takes_runs(entry) else ("key", "self") + (("rules",) if takes_rules(entry) else ())
    if options.get("seed") == CELL_SEED and (takes_runs(entry) or "seed" not in registry.config_keys(fn, exclude=exclude)):
        raise ConfigError(f"analyses.{entry['name']}.seed = \"cell\": this analysis takes no seed of one cell")
    registry.check_config(f"analyses.{entry['name']}", fn, _cell_seed(options), exclude=exclude)
    return {**{k: entry[k] for k in ENTRY_KEYS if k in entry}, **options}


_PARSED: dict[str, dict] = {}
"""The options of the ``[[analyses]]`` entries parsed in this process, by the entry's JSON text: a
study's entry is parsed into its values once, not again at each cell and stage that runs it."""


def _parsed_options(entry: dict, fn) -> dict:
    """``entry``'s options as values (option groups parsed, older flat keys folded in), once per
    process per entry ([`_PARSED`][]); a fresh dict of the same immutable values each call."""
    import json

    try:  # TOML's values only (a bool is not 1, 1.0 is not 1); a Python caller's objects are parsed each time
        text = json.dumps(entry, sort_keys=True)
    except (TypeError, ValueError):
        text = None
    if text is None or text not in _PARSED:
        where = f"analyses.{entry['name']}"
        parsed = parse_groups(fn, fold_legacy(fn, {k: v for k, v in entry.items() if k not in ENTRY_KEYS}, where), where)
        if text is None or len(_PARSED) >= 4096:
            return parsed
        _PARSED[text] = parsed
    return dict(_PARSED[text])


def analysis_options(entry: dict, own_task=None, own_seed: int | None = None, own_initial=None) -> dict:
    """An ``[[analyses]]`` entry's options as the analysis takes them: ``task = "train"`` becomes
    ``own_task`` (a cell's own task; ``None`` for an analysis of several runs: the runs' common
    task), another task name that task, built; ``seed = "cell"`` ([`CELL_SEED`][]) becomes ``own_seed``;
    a continuation's ``path = {homotopy = "init"}`` gets ``own_initial``, a function returning the
    analysed run's initial model ([`HomotopyPath.with_initial`][dynlab.analyses.continuation.paths.HomotopyPath.with_initial]).
    Without ``task`` in the entry, the analysis's own default (its signature's) is resolved the same way.
    Option groups become their values ([`dynlab.option_groups`][]; older flat keys folded in), and
    an input protocol's task stream gets its task the same way
    ([`dynlab.analyses.protocol.TaskStream.resolved`][]).

    **Enforces** "an analysis with no options runs the same configuration from the command line
    and from a scenario": ``dynlab analyze NAME`` passes its options through this function too
    ([`dynlab.cli.analyze`][]).
    """
    from dynlab.analyses.continuation.paths import HomotopyPath
    from dynlab.analyses.protocol import TaskStream

    fn = registry.get("analysis", entry["name"]).obj
    options = _parsed_options(entry, fn)
    for key, (_, default) in group_parameters(fn).items():
        value = options.get(key, default)
        if isinstance(value, TaskStream) and isinstance(value.task, str):
            options[key] = value.resolved(own_task)
        elif isinstance(value, HomotopyPath):
            options[key] = value.with_initial(own_initial)
    if options.get("seed") == CELL_SEED:
        options["seed"] = own_seed
    default = registry.defaults(fn).get("task")
    if "task" not in options and isinstance(default, str):
        options["task"] = default
    task = options.get("task")
    if task == "train":
        options["task"] = own_task
    elif isinstance(task, str):
        options["task"] = registry.build("task", task)
    return options


def parse(doc: dict, source: str = "<dict>", preset: str = DEFAULT_PRESET) -> Scenario | Program:
    """Validate a scenario document and every cell config it implies (or a programmed scenario);
    ``preset`` names the preset already applied to ``doc`` ([`apply_preset`][])."""
    if "program" in doc or "entry" in doc:
        return _parse_program(doc, source, preset)
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise ConfigError(
            f"{source}: unknown scenario key(s) {', '.join(sorted(unknown))}; valid: {', '.join(sorted(TOP_KEYS))}"
        )
    name, description = scenario_name(doc, source), _description(doc, source)
    base = {k: doc[k] for k in ("seed", "model", "task", "rule", "train", TRANSFER) if k in doc}
    analyses = doc.get("analyses", [])
    if not isinstance(analyses, list):
        raise ConfigError(f"{source}: analyses must be an array of tables ([[analyses]])")
    try:
        analyses = tuple(_check_analysis(a) for a in analyses)
        _check_distinct_results(analyses)
        axes, vmap_seeds = _parse_sweep(doc.get("sweep", {}))
        _check_cell_count(axes)
        names = [a.name for a in axes]
        if len(set(names)) != len(names):
            raise ConfigError(f"sweep axes must have distinct names, got {names}")
        runs = parse_runs(doc.get("runs"), axes, source)
        axes = with_runs(axes, runs)
        for entry in analyses:
            _check_where(entry, axis_coordinates(axes))
        claims = parse_claims(doc.get("claims"))
        scenario = Scenario(name, description, base, analyses, axes, source, vmap_seeds, claims, runs)
        check_cells(scenario)
        check_claims(claims, claim_coordinates(scenario), *claim_outputs(scenario))
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return scenario


def with_runs(axes: tuple[Axis, ...], runs: tuple[ExternalRun, ...]) -> tuple[Axis, ...]:
    """``axes`` with the labels of ``runs`` after the trained values of the axis each run sits on
    (its ``trained`` count keeping where the study's own values end)."""
    out = []
    for axis in axes:
        labels = [r.label for r in runs if r.axis == axis.name]
        if labels:
            axis = dataclasses.replace(axis, values={axis.name: [*axis.values[axis.name], *labels]},
                                       trained=axis.trained_size)
        out.append(axis)
    return tuple(out)


def claim_coordinates(scenario: Scenario) -> dict[str, dict[str, list | None]]:
    """What the scenario's claims can select from: the sweep's dataset (its axes with their values,
    and ``stage`` when an analysis names stages; an analysis's own dim whose values an option gives,
    ``<analysis>_<dim>``, as its entry gives them: [`dynlab.registry.Entry`][] ``coordinates``) and
    each analysis across cells (``run``, ``run_b``, ``group`` and each swept key along ``run``)."""
    sweep = axis_coordinates(scenario.axes)
    stages = sorted({s for e in scenario.cell_analyses if "stages" in e for s in entry_stages(e)}, key=stage_order)
    if stages:
        sweep["stage"] = stages
    for entry in scenario.cell_analyses:
        analysis = registry.get("analysis", entry["name"])
        for dim, option in analysis.coordinates:
            values = entry.get(option, registry.defaults(analysis.obj).get(option))
            if isinstance(values, (list, tuple)):
                sweep[f"{entry['name']}_{dim}"] = list(values)
    keys = {k: v for a in scenario.axes for k, v in a.values.items()}
    across = {e["name"]: {"run": None, "run_b": None, "group": None, "run_group": None, "run_group_b": None, **keys}
              for e in scenario.across}
    return {"sweep": sweep, **across}

def loss_metrics() -> list[str]:
    """The metric names of the registered losses (a plug-in's included): what a cell's training
    curves can hold ([`dynlab.outputs.training_outputs`][])."""
    return sorted({entry.obj.metric_name for entry in registry.entries("loss")})


def claim_outputs(scenario: Scenario) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, Output]]]:
    """What the scenario's claims can name, per dataset ([`dynlab.scenarios.declared_claims.check_claims`][]):
    ``(prefixes, outputs)``. ``outputs``: each dataset's declared variables ([`dynlab.outputs`][]) as
    that dataset names them, with all their dims: in the sweep's, the training curves ``train_*``
    ([`dynlab.outputs.training_outputs`][]) and each analysis's ``<analysis>_<name>`` over the sweep
    axes, ``stage`` when its entry names stages, and its own dims ``<analysis>_<dim>``; in an
    analysis across cells, its outputs and their means by group
    ([`dynlab.outputs.group_outputs`][]). ``prefixes``: the sweep's variable prefixes of
    analyses that declare no outputs (a plug-in's), checked by their prefix only."""
    from dynlab.outputs import group_outputs

    axes = tuple(axis_coordinates(scenario.axes))

    def renamed(output: Output, prefix: str, outer: tuple[str, ...]) -> Output:
        return dataclasses.replace(output, name=f"{prefix}_{output.name}",
                                   dims=(*outer, *(f"{prefix}_{d}" for d in output.dims)))

    sweep = {o.name: o for o in (renamed(t, "train", axes) for t in training_outputs(loss_metrics()))}
    undeclared = []
    for entry in scenario.cell_analyses:
        analysis = registry.get("analysis", entry["name"])
        if not analysis.outputs:
            undeclared.append(f"{entry['name']}_")
        outer = ("stage", *axes) if "stages" in entry else axes
        sweep.update((o.name, o) for o in (renamed(d, entry["name"], outer) for d in analysis.outputs))
    outputs = {"sweep": sweep}
    for entry in scenario.across:
        declared = registry.get("analysis", entry["name"]).outputs
        if declared:
            outputs[entry["name"]] = {o.name: o for o in (*declared, *group_outputs(declared))}
    return {"sweep": tuple(undeclared)}, outputs


def _cell_label(cell: Cell) -> str:
    coords = ", ".join(f"{k}={v}" for k, v in cell.coords.items())
    return f" in cell {coords}" if coords else ""


def check_cells(scenario: Scenario) -> None:
    """Validate every cell before any work: its config, and every analysis's options against its model.

    Enforces: a sweep whose cells cannot all run their analyses fails before the first cell
    starts. Each cell's config goes through [`dynlab.experiment.check`][]; then, for the
    analyses registered with a ``check``, each distinct cell model (distinct
    ``[model]`` and ``[task]``) is built abstractly and ``check(model, **options)`` is called with
    the analysis's options, defaults filled in and ``task`` left out.
    """
    hooks = []
    for entry in scenario.cell_analyses:
        analysis = registry.get("analysis", entry["name"])
        fn, hook = analysis.obj, analysis.check
        if hook is not None:
            where = f"analyses.{entry['name']}"
            options = {**registry.defaults(fn, exclude=("model", "rules", "key", "self")),
                       **parse_groups(fn, _cell_seed({k: v for k, v in entry.items() if k not in ENTRY_KEYS}), where)}
            options.pop("task", None)
            hooks.append((entry, hook, options))
    checked, built = set(), set()
    for cell in scenario.cells:  # every combination must be a valid config
        try:
            config, transfer = cell_transfer(cell.config)
        except ConfigError as e:
            raise ConfigError(f"{e}{_cell_label(cell)}") from None
        config, trains = without_training(config)
        analyses = {str(i): a for i, a in enumerate(cell.analyses)}  # a where may select by any axis
        unseeded = cfgmod.dumps({**{k: v for k, v in cell.config.items() if k != "seed"}, "trains": trains,
                                 "analyses": analyses})
        if cell.run is not None:  # its config was checked when its [[runs]] table was read; it is not trained here
            _check_run_cell(cell)
        elif unseeded in built:  # the seed changes values, not shapes: its range is all there is to check
            _check_cell_stages(config, trains, transfer, cell)
            experiment.validate(config)
        else:
            _check_cell_stages(config, trains, transfer, cell)
            built.add(unseeded)
            experiment.check(config, training=trains)
            _check_transfers(config, transfer, cell)
        _check_rules(config, cell)
        own = [(entry["name"], hook, options) for entry, hook, options in hooks if entry in cell.analyses]
        structure = cfgmod.dumps({"model": config.get("model", {}), "task": config.get("task", {}),
                                  "hooks": [name for name, _, _ in own]})
        if not own or structure in checked:
            continue
        checked.add(structure)

        def run_hooks(config=config, cell=cell, own=own):
            model = experiment.build(config, training=cell.run is None).model
            for name, hook, options in own:
                try:
                    hook(model, **options)
                except ConfigError as e:
                    raise ConfigError(f"analyses.{name}{_cell_label(cell)}: {e}") from None

        experiment.abstractly(run_hooks)
    _check_across(scenario)


def _check_run_cell(cell: Cell) -> None:
    """**Enforces** "a run taken as a cell is analysed as it is", before any work: every analysis
    that selects it runs at the stage ``trained`` only (it has no ``init``, ``step-N`` or
    ``transferred`` of the study's; a ``where`` on its axis leaves it out of another)."""
    for entry in cell.analyses:
        other = [s for s in entry_stages(entry) if s != "trained"]
        if other:
            raise ConfigError(f"analyses.{entry['name']} runs at stage {other[0]!r}, but the run {cell.run.label!r} "
                              f"({cell.run.path}) is taken as it is, not trained by the study: it has the stage "
                              f"'trained' only; leave it out with where = {{{cell.run.axis!r} = [...]}} naming the "
                              "trained values")


def _check_rules(config: dict, cell: Cell) -> None:
    """**Enforces** "an analysis of the cell's rules (``grad-compare``) has two or more to compare"
    before any work: the cell's ``[rule]`` names several ([`dynlab.experiment.rule_names`][])."""
    for entry in cell.analyses:
        names = experiment.rule_names(config.get("rule", {}))
        if takes_rules(entry) and len(names) < 2:
            raise ConfigError(f"analyses.{entry['name']} compares the cell's rules, but [rule]{_cell_label(cell)} "
                              f"names one ({names[0]}); name two or more, e.g. name = [\"pc-time\", \"bptt\"]")


def _check_across(scenario: Scenario) -> None:
    """Every analysis of several runs (``dsa``) against the cells it will compare, before any work.

    Enforces: such an analysis runs across the trained models of the cells it selects
    ([`entry_selects`][]), so every one of them trains
    (``train.steps`` > 0) and its ``check(configs, names, **options)`` hook (defaults filled in,
    ``task = "train"`` meaning the cells' common task) accepts the cells' configs: at least two
    cells, one task to drive them, options that task allows.
    """
    if not scenario.across:
        return
    every = scenario.cells
    for entry in scenario.across:
        name = entry["name"]
        cells = [c for c in every if entry_selects(entry, c.coords)]
        configs = [experiment.validate(without_training(cell_transfer(c.config)[0])[0]) for c in cells]
        names = [cell_name(c) or "(the only cell)" for c in cells]
        untrained = [n for c, n in zip(cells, names) if c.run is None and not without_training(c.config)[1]]
        if untrained:
            raise ConfigError(f"analyses.{name} compares the cells' trained models, but cell {untrained[0]} has "
                              "train.steps = 0; give every cell training steps or remove the analysis")
        fn, hook = registry.get("analysis", name).obj, registry.get("analysis", name).check
        if hook is None:
            continue
        options = {**registry.defaults(fn, exclude=RUNS_ARGUMENT), **analysis_options(entry)}
        try:
            hook(configs, names, **options)
        except ConfigError as e:
            raise ConfigError(f"analyses.{name} (across the {len(cells)} cell{'s' * (len(cells) != 1)}): {e}") from None


def cell_name(cell: Cell) -> str:
    """A cell by its sweep values, as a reader says it: ``"unit=aru, seed=0"`` (a zipped axis by
    the values of its keys); ``""`` for a scenario without a sweep; a run taken as a cell by its
    label ([`dynlab.scenarios.external_runs`][])."""
    from dynlab.figures import format_value, key_label

    if cell.run is not None:  # the user's label, never words that could name a trained cell
        return cell.run.label
    return ", ".join(f"{key_label(k)}={format_value(v)}" for k, v in cell_values(cell).items())


def cell_values(cell: Cell) -> dict[str, Any]:
    """The values a cell's sweep axes set, key by key (a zipped axis: each of its keys; a variant
    axis: the variant's name under the axis's name)."""
    out = {}
    for axis, i in zip(cell.axes, cell.index):
        out.update({axis.name: axis.values[axis.name][i]} if axis.variants else axis.config_values(i))
    return out


def builtin_dir() -> Path:
    return Path(__file__).parent


def builtin_names() -> dict[str, Path]:
    return {p.stem: p for p in sorted(builtin_dir().glob("*.toml"))}


def load(name_or_file: str, *, preset: str | None = None, sets=()) -> Scenario | Program:
    """A built-in scenario by name, or a scenario file by path; at ``preset`` ([`apply_preset`][]),
    then the ``--set`` overrides ``sets``."""
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
    from dynlab.data import confine_file_data_dirs

    doc = apply_preset(confine_file_data_dirs(cfgmod.load_toml(path), str(path)), preset, str(path))
    if sets:
        doc = cfgmod.apply_sets(doc, sets, regroup=sweep_path)
    return parse(doc, str(path), DEFAULT_PRESET if preset is None else preset)


def paper_scenarios(paper: str | None = None, *, preset: str | None = None, sets=()) -> dict:
    """The built-in programmed scenarios that name a paper, ``{paper: [Program, ...]}`` (or those of
    ``paper`` only), loaded at ``preset`` with the overrides ``sets``: every one validated before
    anything runs. An unknown paper is a ConfigError listing the papers.

    Only the files that name one of these papers are parsed: a file's ``paper`` key is read from
    its TOML first (only a programmed scenario has one), so the other built-in scenarios' cells are
    not built and checked (``dynlab reproduce --list`` took 12 s on 2 cores doing that)."""
    from dynlab.scenarios.papers import PAPERS

    if paper is not None and paper not in PAPERS:
        raise ConfigError(f"unknown paper {paper!r}; papers: {', '.join(PAPERS)} (see 'dynlab reproduce --list')")
    found: dict[str, list] = {p: [] for p in PAPERS if paper in (None, p)}
    for name, path in builtin_names().items():
        if cfgmod.load_toml(path).get("paper") not in found:
            continue
        scenario = load(name)
        if isinstance(scenario, Program) and scenario.paper in found:
            if preset is not None and preset not in scenario.presets:
                raise ConfigError(f"scenario {name} (paper {scenario.paper}) has no preset {preset!r}; "
                                  f"presets: {', '.join(scenario.presets)}")
            found[scenario.paper].append(load(name, preset=preset, sets=sets) if (preset or sets) else scenario)
    return found
