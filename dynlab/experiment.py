"""From a run config (nested TOML dict) to the model, task, rule and trainer settings.

The config is validated as a whole before anything is built, so a bad key anywhere is reported
before work starts, with the list of valid keys of that section.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
    """Everything a training run or an analysis needs, built from one config."""

    config: dict
    model: Any
    task: Any
    rule: Any
    train: TrainConfig

    @property
    def seed(self) -> int:
        return self.config["seed"]


def validate(config: dict) -> dict:
    """Check every section and key; return the config with the section tables present."""
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
    registry.check_config("model", unit, model_keys, extra=registry.config_keys(SequenceModel))
    for k in ("input_size", "output_size"):
        if k in model:
            raise ConfigError(f"model.{k} is set by the task; remove it from the config")
    task_cls = registry.get("task", task.get("name", DEFAULT_TASK)).obj
    registry.check_config("task", task_cls, {k: v for k, v in task.items() if k != "name"})
    rule_cls = registry.get("rule", rule.get("name", DEFAULT_RULE)).obj
    registry.check_config("rule", rule_cls, {k: v for k, v in rule.items() if k != "name"})
    if "loss" in rule:
        raise ConfigError("rule.loss is set by the task; remove it from the config")
    registry.check_config("train", TrainConfig, config["train"])
    return config


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


def check(config: dict) -> None:
    """Validate ``config`` completely without computing anything.

    Beyond [`validate`][] (keys and types), this runs every constructor's own checks (sizes,
    ranges) by building the model abstractly with ``equinox.filter_eval_shape``: no arrays are
    allocated, so checking a large sweep before starting it is cheap.
    """
    import equinox as eqx

    eqx.filter_eval_shape(lambda: build(config).model)


def build(config: dict, *, training: bool = True) -> Experiment:
    """Validate ``config`` and build its model (seeded), task and rule.

    **Enforces** that the model, and with ``training`` one training step, fit in memory before
    any array is made ([`dynlab.budget.check_training`][]); a model loaded to be analysed
    (``training=False``) needs only its parameters to fit.
    """
    config = validate(config)
    model_cfg, task_cfg, rule_cfg = dict(config["model"]), dict(config["task"]), dict(config["rule"])
    unit = model_cfg.pop("unit", DEFAULT_UNIT)
    model_cfg.pop(WIDTH, None)  # expanded into the unit's keys by validate
    task_name = task_cfg.pop("name", DEFAULT_TASK)
    task = registry.build("task", task_name, **task_cfg)
    # Record the task's defaults too, so that a run's config names the exact data it saw
    # (e.g. psmnist's perm_seed and downsample), whatever later versions default to.
    task_defaults = {k: v for k, v in registry.defaults(registry.get("task", task_name).obj).items() if v is not None}
    config["task"] = {"name": task_name, **task_defaults, **config["task"]}
    model_key = jax.random.fold_in(jax.random.key(config["seed"]), 0)
    make_model = lambda: registry.build(  # noqa: E731
        "model", unit=unit, input_size=task.input_size, output_size=task.output_size, key=model_key, **model_cfg
    )
    budget.check_training(config, task, make_model, training=training)  # from shapes, before any array
    model = make_model()
    rule = registry.build("rule", rule_cfg.pop("name", DEFAULT_RULE), loss=task.loss, **rule_cfg)
    return Experiment(config, model, task, rule, TrainConfig(**config["train"]))


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
        exp = build(config, training=False)
    except ConfigError as e:
        raise CheckpointError(f"the config.toml of {str(run_dir)!r} is not valid: {e}") from None
    model = store.load_model_arrays(run_dir, exp.model)
    return dataclasses.replace(exp, model=model)
