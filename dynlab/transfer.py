r"""Variants of trained networks and transfer protocols of the ARU paper (Geadah et al.; notes §1–2).

* [`transplant_controller`][] — App. C.4: a trained ARU controller
  $\Theta_A = \{W_{ag}, W_{gg}, b_g, W_{gn}, b_n, W_{gs}, b_s\}$ is frozen and reused with a new
  main network (another seed) that is then trained around it.
* [`retrain_activation`][] — App. B.3: a trained network is retrained on another task (the
  45°-rotated digits, ``task.rotate = 45``) with only its per-neuron activation parameters free:
  $(n_i, s_i)$ of ``rnn-gamma``; for ``aru`` the controller read-out offsets $(b_n^i, b_s^i)$,
  which set each neuron's operating point (our analogue; the paper retrains the static net).
* [`isolate`][] — Fig. 4c: the same trained weights with only the diagonal of $W_{hh}$ kept,
  so every neuron feeds back only onto itself.

Each returns an [`Experiment`][dynlab.experiment.Experiment] whose config says what is trained
(``train.trainable`` / ``train.freeze``, see [`TrainConfig`][dynlab.train.TrainConfig]) or that the units
are isolated (``model.isolated = true``), so its run directory resumes and reloads like any
other; the model it starts from is the step-0 checkpoint the trainer writes.

**Transfers are registered** (kind ``"transfer"``, ``dynlab list transfers``): ``isolate``,
``activation`` and ``controller`` are the three above as functions
``fn(trained, config, **params) -> Experiment`` of a trained experiment and the config to
continue under ([`TRANSFER_ARGUMENTS`][]), so a plug-in adds one with one file. A [`Transfer`][]
is one declared as a value, as a scenario's ``[transfer]`` table declares it: the kind, its
parameters, the task and training keys it changes and the steps it retrains, checked once where
the table becomes the value and applied to a model abstractly before any work
([`Transfer.check`][dynlab.transfer.Transfer.check]).
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Annotated

import equinox as eqx
import jax

from dynlab import experiment, registry, store
from dynlab.config import SEED_RANGE, NonNegative, Range, apply_values
from dynlab.errors import ConfigError, UnknownNameError
from dynlab.registry import register
from dynlab.train import train
from dynlab.variants import ACTIVATION, CONTROLLER


def _unit(config: dict) -> str:
    return config.get("model", {}).get("unit", experiment.DEFAULT_UNIT)


def _same_structure(a, b) -> bool:
    def signature(m):
        leaves, treedef = jax.tree_util.tree_flatten(eqx.filter(m, eqx.is_array))
        return treedef, [(x.shape, x.dtype) for x in leaves]

    return signature(a) == signature(b)


def transplant_controller(donor, config: dict) -> experiment.Experiment:
    """The experiment of ``config`` (an ``aru`` model, typically another seed) with ``donor``'s
    controller copied into every layer and frozen (``train.freeze``); everything else is the new
    seed's initialisation and is trained. ``donor`` is a trained ``aru`` [`SequenceModel`][dynlab.models.SequenceModel]
    with the same number of layers, ``n_g`` and controller prior (and, with the per-neuron prior,
    the same ``hidden``)."""
    if _unit(config) != "aru" or getattr(donor, "unit", None) != "aru":
        raise ConfigError(f"controller transplant needs aru models, got donor {getattr(donor, 'unit', type(donor).__name__)!r} "
                          f"and config unit {_unit(config)!r}")
    if any(getattr(c, "b_g", 0) is None for c in donor.cells) or config.get("model", {}).get("split_biases", False):
        raise ConfigError("controller transplant takes aru models without split_biases (the controller's bias is "
                          "one vector b_g there); an imported ARUN keeps the code's two, b_ag and b_gg")
    freeze = list(config.get("train", {}).get("freeze", [])) + [f"cells.*.{n}" for n in CONTROLLER]
    exp = experiment.build(apply_values(config, {"train.freeze": freeze}))
    get = lambda m: [getattr(c, n) for c in m.cells for n in CONTROLLER]  # noqa: E731
    new, old = get(exp.model), get(donor)
    if len(new) != len(old) or any(a.shape != b.shape for a, b in zip(new, old)):
        raise ConfigError("the donor's controller does not fit the new model: layers, n_g, prior "
                          "(and hidden, for the per-neuron prior) must match")
    return dataclasses.replace(exp, model=eqx.tree_at(get, exp.model, old))


def retrain_activation(trained, config: dict) -> experiment.Experiment:
    """The experiment of ``config`` (e.g. the same task with ``rotate = 45``) starting from
    ``trained``, with only the per-neuron activation parameters ([`ACTIVATION`][dynlab.variants.ACTIVATION]) trainable.

    ``config``'s model section must build a model of ``trained``'s structure (same unit, sizes)."""
    unit = _unit(config)
    if unit not in ACTIVATION:
        raise ConfigError(f"retraining the activation needs a unit with per-neuron activation parameters "
                          f"({', '.join(ACTIVATION)}), got {unit!r}")
    return continued(trained, apply_values(config, {"train.trainable": [f"cells.*.{n}" for n in ACTIVATION[unit]]}))


def continued(trained, config: dict) -> experiment.Experiment:
    """The experiment of ``config`` (another task, other training settings) with ``trained`` as its
    model. **Enforces** that ``config``'s model section builds a model of ``trained``'s structure
    (same unit, sizes and task shapes); a ConfigError otherwise."""
    exp = experiment.build(config)
    if not _same_structure(exp.model, trained):
        raise ConfigError("the trained model does not match the model the config builds (unit, sizes, task shapes)")
    return dataclasses.replace(exp, model=trained)


def isolate(exp: experiment.Experiment) -> experiment.Experiment:
    r"""``exp`` with every layer isolated: $W_{hh} \to \operatorname{diag}(W_{hh})$, all else unchanged.

    The config gets ``model.isolated = true`` so the result saves and reloads (the recurrence is
    then stored as a vector); units without isolated neurons (GRU, LSTM, …) are a ConfigError."""
    cells = exp.model.cells
    if not all(hasattr(c, "isolate") for c in cells):
        isolating = [u for u in registry.names("unit") if hasattr(registry.get("unit", u).obj, "isolate")]
        raise ConfigError(f"unit {_unit(exp.config)!r} has no isolated neurons; units that do: {', '.join(isolating)}")
    model = eqx.tree_at(lambda m: m.cells, exp.model, tuple(c.isolate() for c in cells))
    return dataclasses.replace(exp, config=apply_values(exp.config, {"model.isolated": True}), model=model)


# ---------------------------------------------------------------------------------------------
# Registered transfers, and a transfer declared as a value.

TRANSFER_ARGUMENTS = ("trained", "config")
"""The parameters a registered transfer is given by its caller: the trained
[`Experiment`][dynlab.experiment.Experiment] and the config to continue under (its own with the
transfer's task and training keys, [`Transfer.config`][dynlab.transfer.Transfer.config]); never
keys of a ``[transfer]`` table."""
Seed = Annotated[int, Range(minimum=SEED_RANGE[0], maximum=SEED_RANGE[1])]


@register("transfer", "isolate", "ARU Fig. 4c: the trained weights with isolated neurons (W_hh cut to its diagonal)")
def isolated_neurons(trained: experiment.Experiment, config: dict) -> experiment.Experiment:
    """The trained network with every neuron feeding back only onto itself ([`isolate`][]); units rnn,
    rnn-gamma and aru. At chance, it says the recurrence carried the task."""
    return isolate(continued(trained.model, config))


@register("transfer", "activation", "ARU App. B.3: only the per-neuron activation parameters trainable "
                                    "(rnn-gamma: n, s; aru: b_n, b_s)")
def activation_only(trained: experiment.Experiment, config: dict) -> experiment.Experiment:
    """The trained network with only its per-neuron activation parameters trainable
    ([`retrain_activation`][]), e.g. retrained on digits rotated by 45 degrees (task key
    ``rotate = 45``, App. B.3)."""
    return retrain_activation(trained.model, config)


@register("transfer", "controller", "ARU App. C.4: the trained controller, frozen, in a new main network "
                                    "(another seed)")
def new_main_network(trained: experiment.Experiment, config: dict, *,
                     seed: Seed | None = None) -> experiment.Experiment:
    """The trained ARU's controller, frozen, in a new main network drawn at another seed
    ([`transplant_controller`][]), to be trained around it.

    Args:
        seed: seed of the new main network (default: the trained run's seed + 1).
    """
    seed = trained.seed + 1 if seed is None else seed
    return transplant_controller(trained.model, apply_values(config, {"seed": seed}))


def _key(name: str, annotation, default) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


TABLE_KEYS = {"steps": _key("steps", NonNegative, 0), "task": _key("task", dict, {}),
              "train": _key("train", dict, {})}
"""Keys of every ``[transfer]`` table besides ``kind`` and the transfer's own parameters:
``steps``, the training steps after the transfer (0: analysed as transferred, not retrained);
``task`` and ``train``, tables of task and training keys the transferred model continues under
(``task = {rotate = 45}``, ``train = {lr = 1e-3}``)."""


@dataclasses.dataclass(frozen=True)
class Transfer:
    """A registered transfer declared as a value: its ``kind``, its own ``params``, the ``task`` and
    ``train`` keys it changes, and ``steps`` of retraining after it ([`TABLE_KEYS`][])."""

    kind: str
    params: dict = dataclasses.field(default_factory=dict)
    steps: int = 0
    task: dict = dataclasses.field(default_factory=dict)
    train: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def parse(cls, table, where: str = "transfer") -> "Transfer":
        """The value of a ``[transfer]`` table. **Enforces**, once, where the TOML becomes the
        value: a registered ``kind``; parameters its function takes, of their types and in range
        ([`dynlab.registry.check_config`][]); ``steps`` an integer >= 0 given as ``steps``, not
        as ``train.steps``. Task and training keys are checked with the config they change
        ([`check`][dynlab.transfer.Transfer.check])."""
        kinds = ", ".join(registry.names("transfer"))
        if not isinstance(table, dict) or not isinstance(table.get("kind"), str):
            raise ConfigError(f"[{where}] needs kind = \"NAME\" naming a transfer ({kinds}), got {table!r}")
        try:
            fn = registry.get("transfer", table["kind"]).obj
        except UnknownNameError as e:
            raise ConfigError(f"{where}.kind: {e}") from None
        options = {k: v for k, v in table.items() if k != "kind"}
        for section, example in (("task", "{rotate = 45}"), ("train", "{lr = 1e-3}")):
            if not isinstance(options.get(section, {}), dict):
                raise ConfigError(f"{where}.{section} must be a table of {section} keys, e.g. {section} = {example}, "
                                  f"got {options[section]!r}")
        registry.check_config(where, fn, options, extra=TABLE_KEYS, exclude=TRANSFER_ARGUMENTS)
        if "steps" in options.get("train", {}):
            raise ConfigError(f"{where}.train.steps: the training steps after the transfer are {where}.steps")
        return cls(table["kind"], {k: v for k, v in options.items() if k not in TABLE_KEYS},
                   options.get("steps", 0), dict(options.get("task", {})), dict(options.get("train", {})))

    def config(self, config: dict) -> dict:
        """``config`` with the task and training keys the transfer changes (and ``train.steps``
        = ``steps`` when it retrains)."""
        values = {**{f"task.{k}": v for k, v in self.task.items()}, **{f"train.{k}": v for k, v in self.train.items()}}
        return apply_values(config, {**values, **({"train.steps": self.steps} if self.steps else {})})

    def start(self, trained: experiment.Experiment) -> experiment.Experiment:
        """The registered transfer applied to ``trained``, before any retraining."""
        return registry.get("transfer", self.kind).obj(trained, self.config(trained.config), **self.params)

    def check(self, config: dict) -> None:
        """**Enforces** "a transfer that cannot apply fails before any work": the transfer is applied
        to the model ``config`` trains, built abstractly (``equinox.filter_eval_shape``: shapes, no
        values), so a unit it does not take, a task key that changes the model's shapes, or a
        config it makes invalid (an unknown task or training key) is a ConfigError now."""
        experiment.validate(self.config(config))
        eqx.filter_eval_shape(lambda: (self.start(experiment.build(config)), None)[1])

    def apply(self, trained: experiment.Experiment, run_dir: str | Path | None = None,
              progress=None) -> experiment.Experiment:
        """The transferred experiment: [`start`][dynlab.transfer.Transfer.start], then ``steps`` of training
        ([`dynlab.train.train`][], with ``progress``). With ``run_dir`` it is written as a run
        directory (config, model; when retrained, its curves and checkpoints too)."""
        exp = self.start(trained)
        if run_dir is not None:
            Path(run_dir).mkdir(parents=True, exist_ok=True)
        if self.steps:
            return dataclasses.replace(exp, model=train(exp, run_dir, progress=progress).model)
        if run_dir is not None:
            store.write_config(run_dir, exp.config)
            store.save_model(run_dir, exp.model)
        return exp
