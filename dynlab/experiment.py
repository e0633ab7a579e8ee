"""From a run config (nested TOML dict) to the model, task, rule and trainer settings.

The config is validated as a whole before anything is built, so a bad key anywhere is reported
before work starts, with the list of valid keys of that section.
"""

from __future__ import annotations

import contextvars
import dataclasses
from pathlib import Path
from typing import Any

import equinox as eqx
import jax

from dynlab import budget, registry
from dynlab.config import SECTIONS, SEED_RANGE
from dynlab.errors import ConfigError
from dynlab.train import TrainConfig

DEFAULT_UNIT, DEFAULT_TASK, DEFAULT_RULE = "aru", "adding", "bptt"


def default_config(unit: str = DEFAULT_UNIT, task: str = DEFAULT_TASK, rule: str = DEFAULT_RULE, seed: int = 0) -> dict:
    """The smallest complete run config; every other key takes its documented default."""
    return {"seed": seed, "model": {"unit": unit}, "task": {"name": task}, "rule": {"name": rule}, "train": {}}


@dataclasses.dataclass(frozen=True)
class Experiment:
    """Everything a training run or an analysis needs, built from one config.

    ``rule`` is the rule that trains ([`training_rule`][]; ``None`` when the config names several
    and chooses none, which only an experiment that does not train may do); ``rules`` every rule
    the config names, by name, in its order ([`rule_configs`][]); ``path`` the run directory it was
    loaded from ([`load_run`][]), ``None`` for one built from a config.
    """

    config: dict
    model: Any
    task: Any
    rule: Any
    train: TrainConfig
    rules: dict = dataclasses.field(default_factory=dict)
    path: str | None = None

    @property
    def seed(self) -> int:
        return self.config["seed"]


_VALIDATED: dict[str, dict] = {}
"""Configs already validated in this process, by their JSON text: a cell's config is checked when its
study is parsed and built several times after (to check its memory, at each stage), never re-checked."""


def validate(config: dict) -> dict:
    """Check every section and key; return the config with the section tables present.

    A config is checked once per process: the same config again (its JSON text the same) returns
    the checked result without checking its values again."""
    import json

    try:  # every value, None included, with its type (a bool is not 1): two configs alike only if equal
        text = json.dumps(config, sort_keys=True, default=lambda v: f"{type(v).__name__}:{v!r}")
    except (TypeError, ValueError):
        text = None  # keys that are not strings: checking it says which
    if text is not None and text in _VALIDATED:
        return {k: dict(v) if isinstance(v, dict) else v for k, v in _VALIDATED[text].items()}
    checked = _validate(config)
    if text is not None and len(_VALIDATED) < 4096:
        _VALIDATED[text] = {k: dict(v) if isinstance(v, dict) else v for k, v in checked.items()}
    return checked


def _validate(config: dict) -> dict:
    unknown = set(config) - set(SECTIONS) - {"seed"}
    if unknown:
        raise ConfigError(
            f"unknown config section(s) {', '.join(sorted(unknown))}; valid: seed, {', '.join(SECTIONS)}"
        )
    config = {"seed": 0, **{s: {} for s in SECTIONS}, **config}
    seed = config["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise ConfigError(f"seed must be an integer in [0, 2^32 - 1], got {seed!r}")
    for section in SECTIONS:
        if not isinstance(config[section], dict):
            raise ConfigError(f"[{section}] must be a table of keys, got {config[section]!r}")
    model, task, rule = config["model"], config["task"], config["rule"]
    unit = registry.get("unit", model.get("unit", DEFAULT_UNIT)).obj
    from dynlab.models import SequenceModel

    if WIDTH in model:
        config["model"] = model = sized_section(model.get("unit", DEFAULT_UNIT), model)
    model_keys = {k: v for k, v in model.items() if k not in ("unit", WIDTH)}
    depth_factor(model)  # checked here, applied by build
    model_keys = {k: v for k, v in model_keys.items() if k not in DEPTH_FACTOR}
    registry.check_config("model", unit, model_keys, extra=registry.config_keys(SequenceModel))
    for k in ("input_size", "output_size"):
        if k in model:
            raise ConfigError(f"model.{k} is set by the task; remove it from the config")
    task_cls = registry.get("task", task.get("name", DEFAULT_TASK)).obj
    registry.check_config("task", task_cls, {k: v for k, v in task.items() if k != "name"})
    for name, keys in rule_configs(rule).items():
        where = "rule" if len(rule_names(rule)) == 1 else f"rule.{name}"
        registry.check_config(where, registry.get("rule", name).obj, keys)
        if "loss" in keys:
            raise ConfigError(f"{where}.loss is set by the task; remove it from the config")
    training_rule(rule)  # a rule.trains that names none of them
    registry.check_config("train", TrainConfig, config["train"])
    return config


RULE_CHOICE = "trains"
"""``rule.trains``: which of several rules named in ``[rule]`` trains ([`training_rule`][])."""


def rule_names(rule: dict) -> list[str]:
    """The rules a ``[rule]`` section names: one (``name = "bptt"``, the default) or several
    (``name = ["pc-time", "bptt"]``, compared on one model by an analysis that takes the cell's
    rules, e.g. ``grad-compare``).

    **Enforces**: a list names at least two distinct registered rules.
    """
    name = rule.get("name", DEFAULT_RULE)
    if not isinstance(name, list):
        registry.get("rule", name)
        return [name]
    if len(name) < 2 or len(set(map(str, name))) != len(name) or not all(isinstance(n, str) for n in name):
        raise ConfigError(f"rule.name as a list names two or more different rules, e.g. [\"pc-time\", \"bptt\"]; "
                          f"got {name!r}")
    for n in name:
        registry.get("rule", n)
    return name


def rule_configs(rule: dict) -> dict[str, dict]:
    """Each named rule's config keys: with one rule, the section's own keys; with several, each
    rule's table ``[rule.<name>]`` (``[rule.pc-time] inference = "lbfgs"``).

    **Enforces**: with several rules, the section holds only ``name``, ``trains`` and one table per
    named rule, so no key is silently given to the wrong rule.
    """
    names = rule_names(rule)
    if not isinstance(rule.get("name", DEFAULT_RULE), list):
        if RULE_CHOICE in rule:
            raise ConfigError("rule.trains chooses among several rules (rule.name = [..]); this config names one")
        return {names[0]: {k: v for k, v in rule.items() if k != "name"}}
    unknown = sorted(set(rule) - {"name", RULE_CHOICE, *names})
    if unknown:
        raise ConfigError(f"[rule] names several rules ({', '.join(names)}): their keys go in [rule.<name>] "
                          f"tables, and rule.{unknown[0]} is none of {', '.join(['name', RULE_CHOICE, *names])}")
    for n in names:
        if not isinstance(rule.get(n, {}), dict):
            raise ConfigError(f"rule.{n} must be a table of the rule's keys, got {rule[n]!r}")
    return {n: dict(rule.get(n, {})) for n in names}


def training_rule(rule: dict) -> str | None:
    """The name of the rule that trains: the only one named, or ``rule.trains`` among several
    (``None`` when several are named and none is chosen: [`build`][] with ``training`` refuses that)."""
    names = rule_names(rule)
    if len(names) == 1 and not isinstance(rule.get("name"), list):
        return names[0]
    chosen = rule.get(RULE_CHOICE)
    if chosen is not None and chosen not in names:
        raise ConfigError(f"rule.trains must be one of the rules named ({', '.join(names)}), got {chosen!r}")
    return chosen


RECURRENCES = ("plain", "time-residual")
DEPTH_FACTOR = {"recurrence": "plain", "time_alpha": 1.0, "readout_gamma0": 1.0}
r"""``[model]`` keys of the depth factor over time ([`dynlab.time_residual.TimeResidual`][]) with their
defaults: ``recurrence = "time-residual"`` scales every state update by $T^{-\alpha}$ (``time_alpha``;
$T$ the task's ``length``) and the read-out weights by $1/(\gamma_0\sqrt N)$ (``readout_gamma0``).
With ``recurrence = "plain"`` (the default) the model is the unit's own and the two values are not
used, so that a sweep over ``model.recurrence`` compares both forms at one ``time_alpha``."""


def depth_factor(model: dict) -> dict | None:
    """``{"alpha", "gamma0"}`` of the ``[model]`` section's depth factor ([`DEPTH_FACTOR`][]), or
    ``None`` for the plain recurrence."""
    from dynlab.time_residual import check_depth_factor

    keys = {k: model.get(k, v) for k, v in DEPTH_FACTOR.items()}
    if keys["recurrence"] not in RECURRENCES:
        raise ConfigError(f"model.recurrence must be one of {', '.join(RECURRENCES)}, got {keys['recurrence']!r}")
    try:
        check_depth_factor(keys["time_alpha"], keys["readout_gamma0"])
    except ConfigError as e:
        raise ConfigError(f"model.{'time_alpha' if 'alpha' in str(e) else 'readout_gamma0'}: {e}") from None
    if keys["recurrence"] == "plain":
        return None
    return {"alpha": float(keys["time_alpha"]), "gamma0": float(keys["readout_gamma0"])}


WIDTH = "width"
"""``model.width``: one size every unit understands ([`sized_section`][])."""


def sized_section(unit: str, model: dict) -> dict:
    """The ``[model]`` section with ``width`` expanded into the unit's own size keys.

    ``model.width`` is the number of neurons that carry the recurrent computation; each unit maps
    it onto its keys (``unit.sized(width)``, [`dynlab.units.base.Cell.sized`][]: ARU ``hidden``
    and ``n_g``, ELM neuron ``d_m``, block-diagonal ``n_blocks`` x ``block_size``, …), so a sweep
    over ``model.unit`` at one width needs no table per unit. ``width`` stays in the section (the
    stored config says what was asked) beside the keys it set; a key given as well must agree
    with it, else a [`ConfigError`][] names both. A width the unit cannot take, or a unit that
    declares no mapping, is a [`ConfigError`][] too.
    """
    sized = getattr(registry.get("unit", unit).obj, "sized", None)
    if sized is None:
        raise ConfigError(f"unit {unit!r} declares no width (no sized(width)); give its own size keys "
                          "instead of model.width")
    try:
        keys = sized(model[WIDTH])
    except ConfigError as e:
        raise ConfigError(f"unit {unit!r}: {e}") from None
    for k, v in keys.items():
        if k in model and model[k] != v:
            raise ConfigError(f"model.width = {model[WIDTH]} sets model.{k} = {v!r}, but model.{k} = {model[k]!r} "
                              "is given too; give one of them")
    return {**model, **keys}


_CHECKING: contextvars.ContextVar[bool] = contextvars.ContextVar("dynlab_checking", default=False)


def checking() -> bool:
    """Is a config being checked ([`check`][]) rather than built to run? A task whose construction
    makes an artefact (a trained teacher) builds a stand-in of the same shapes instead, so that
    checking a study never trains anything; the artefact is made when a cell first needs it."""
    return _CHECKING.get()


def check(config: dict, *, training: bool = True) -> None:
    """Validate ``config`` completely without computing anything.

    Beyond [`validate`][] (keys and types), this runs every constructor's own checks (sizes,
    ranges) by building the model abstractly with ``equinox.filter_eval_shape``: no arrays are
    allocated, so checking a large sweep before starting it is cheap. ``training``: as for
    [`build`][] (a config that will not be trained may name several rules without choosing one).
    Nothing is trained meanwhile ([`checking`][]).
    """
    abstractly(lambda: build(config, training=training).model)


def abstractly(fn):
    """``fn()`` traced for its shapes only (``equinox.filter_eval_shape``), as a check: no arrays are
    made and nothing is trained ([`checking`][]). Returns the shapes of its result."""
    token = _CHECKING.set(True)
    try:
        return eqx.filter_eval_shape(fn)
    finally:
        _CHECKING.reset(token)


def build(config: dict, *, training: bool = True, weights: bool = True) -> Experiment:
    """Validate ``config`` and build its model (seeded), task and rules: its keys are checked once,
    by [`validate`][], and the constructors trust them ([`dynlab.registry.make`][]).

    ``weights=False`` builds the model's structure only, each array a ``jax.ShapeDtypeStruct``
    (``equinox.filter_eval_shape``): the template that stored arrays are read into
    ([`load_run`][]), without drawing initial weights that would be overwritten at once (drawing them
    compiles one small program per weight shape: 1.3 s of CPU for an ARU, 3.2 s for an ELM network, measured at
    the test suite's -O0). The loaded model is the same to the last bit, and of the same types, for every built-in unit.

    **Enforces** that an experiment that trains (``training``) has one rule to train with: a
    config naming several rules chooses one with ``rule.trains`` ([`training_rule`][]), else a
    [`ConfigError`][] before anything is built. **Enforces** that the model, and with ``training``
    one training step, fit in memory before any array is made ([`dynlab.budget.check_training`][]);
    a model loaded to be analysed (``training=False``) needs only its parameters to fit.
    """
    config = validate(config)
    model_cfg, task_cfg, rule_cfg = dict(config["model"]), dict(config["task"]), dict(config["rule"])
    unit = model_cfg.pop("unit", DEFAULT_UNIT)
    model_cfg.pop(WIDTH, None)  # expanded into the unit's keys by validate
    factor = depth_factor(model_cfg)
    for k in DEPTH_FACTOR:
        model_cfg.pop(k, None)
    trains = training_rule(rule_cfg)
    if training and trains is None:
        names = rule_names(rule_cfg)
        raise ConfigError(f"[rule] names {len(names)} rules ({', '.join(names)}) and training uses one: choose it with "
                          f"rule.trains = \"{names[0]}\" (or analyse without training: train.steps = 0 in a scenario)")
    task_name = task_cfg.pop("name", DEFAULT_TASK)
    task = registry.make("task", task_name, **task_cfg)  # the keys were checked once, by validate
    # Record the task's defaults too, so that a run's config names the exact data it saw
    # (e.g. psmnist's perm_seed and downsample), whatever later versions default to.
    task_defaults = {k: v for k, v in registry.defaults(registry.get("task", task_name).obj).items() if v is not None}
    config["task"] = {"name": task_name, **task_defaults, **config["task"]}
    model_key = jax.random.fold_in(jax.random.key(config["seed"]), 0)

    def make_model():
        model = registry.make("model", "sequence", unit=registry.get("unit", unit).obj, input_size=task.input_size,
                              output_size=task.output_size, key=model_key, **model_cfg)
        if factor is None:
            return model
        from dynlab.time_residual import TimeResidual

        if not isinstance(getattr(task, "length", None), int):
            raise ConfigError(f"model.recurrence = \"time-residual\" scales each step by T^-alpha with T the "
                              f"task's length; task {task_name!r} has no length")
        return TimeResidual(model, task.length, **factor)

    budget.check_training(config, task, make_model, training=training)  # from shapes, before any array
    # Waited for here: XLA allocates the weights asynchronously, and a failed allocation must be raised as
    # an error now, not met later by reading the array's memory (jaxlib aborts the process on a
    # buffer whose allocation failed, the third time in one process: dynlab train with model.hidden=1000000).
    model = make_model() if weights else eqx.filter_eval_shape(make_model)
    if weights and not _CHECKING.get():  # in a check the arrays are tracers: nothing is allocated to wait for (asking
        jax.block_until_ready(model)  # each tracer to block cost ~5 ms per array in JAX's error text, 2 s a study)
    rules = {n: registry.make("rule", n, loss=task.loss, **keys) for n, keys in rule_configs(rule_cfg).items()}
    return Experiment(config, model, task, rules.get(trains), TrainConfig(**config["train"]), rules)


def initial_model(exp: Experiment):
    """The model ``exp``'s run started from: rebuilt from its config, whose seed alone draws the
    initial weights ([`build`][]: ``fold_in(key(seed), 0)``, whatever the task, rule or training), so
    these are the arrays ``dynlab train`` began with, to the bit. They are drawn at the run's own
    precision (float64 only for a run whose arrays are), whatever the caller's ``jax_enable_x64``:
    JAX draws other numbers under x64. For a model built from a config
    (nothing trained) it is that model.

    **Enforces** that the run was trained by dynlab: an imported run (``import.toml``) holds only the
    weights it was trained to elsewhere, so its initial model is unknown; one
    [`ConfigError`][dynlab.errors.ConfigError] line."""
    from dynlab import store

    if exp.path is None:
        return exp.model
    if (Path(exp.path) / store.IMPORTED).is_file():
        raise ConfigError(f"{exp.path} was imported (dynlab import): its initial weights are not known, only its "
                          "trained ones; give the run directory of a model saved at step 0 instead")
    # drawn at the run's own precision (the draws differ under x64), whatever the caller's context: a continuation
    # works in float64
    wide = any(x.dtype == jax.numpy.float64 for x in jax.tree.leaves(eqx.filter(exp.model, eqx.is_inexact_array)))
    with jax.enable_x64(wide):
        return build(store.read_config(exp.path), training=False).model  # the stored config: a --set does not change it


def load_run(run_dir, *, unit: str | None = None) -> Experiment:
    """The experiment of a run directory with its trained model (``model.eqx``) loaded.

    The stored ``config.toml`` rebuilds a model of the same structure, into which the arrays are
    read; ``unit``, when given, must match the stored unit (a checkpoint of another model is an
    error, not a silent substitution). ``model.eqx`` is checksum-verified
    ([`dynlab.store.verify`][]), and temporaries that a killed writer left in the directory are
    removed ([`dynlab.store.remove_stale_temporaries`][]).
    """
    from dynlab import store
    from dynlab.errors import CheckpointError

    config = store.read_config(run_dir)
    store.remove_stale_temporaries(run_dir)
    stored_unit = config.get("model", {}).get("unit", DEFAULT_UNIT)
    if unit is not None and unit != stored_unit:
        raise CheckpointError(f"checkpoint {str(run_dir)!r} holds a {stored_unit!r} model, not {unit!r}")
    try:
        exp = build(config, training=False, weights=False)
    except ConfigError as e:
        raise CheckpointError(f"the config.toml of {str(run_dir)!r} is not valid: {e}") from None
    model = store.load_model_arrays(run_dir, exp.model)
    return dataclasses.replace(exp, model=model, path=str(run_dir))
