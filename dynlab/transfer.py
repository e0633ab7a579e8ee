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
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax

from dynlab import experiment
from dynlab.config import apply_values
from dynlab.errors import ConfigError
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
    exp = experiment.build(apply_values(config, {"train.trainable": [f"cells.*.{n}" for n in ACTIVATION[unit]]}))
    if not _same_structure(exp.model, trained):
        raise ConfigError("the trained model does not match the model the config builds (unit, sizes, task shapes)")
    return dataclasses.replace(exp, model=trained)


def isolate(exp: experiment.Experiment) -> experiment.Experiment:
    r"""``exp`` with every layer isolated: $W_{hh} \to \operatorname{diag}(W_{hh})$, all else unchanged.

    The config gets ``model.isolated = true`` so the result saves and reloads (the recurrence is
    then stored as a vector); units without isolated neurons (GRU, LSTM, …) are a ConfigError."""
    cells = exp.model.cells
    if not all(hasattr(c, "isolate") for c in cells):
        raise ConfigError(f"unit {_unit(exp.config)!r} has no isolated-neuron variant (rnn, rnn-gamma and aru do)")
    model = eqx.tree_at(lambda m: m.cells, exp.model, tuple(c.isolate() for c in cells))
    return dataclasses.replace(exp, config=apply_values(exp.config, {"model.isolated": True}), model=model)

