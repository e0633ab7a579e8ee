"""#34: one width every unit understands. ``model.width`` in a config or a scenario is expanded into
each unit's own size keys (``unit.sized(width)``), so a sweep over units at one width needs no
table; a width a unit cannot take, or a width and a size key that disagree, is one line."""

from __future__ import annotations

import equinox as eqx
import jax
import pytest

from dynlab import experiment, registry
from dynlab.errors import ConfigError
from dynlab.scenarios import spec

from cli_runner import invoke


class _Built:
    def __init__(self, config):
        self.config = experiment.validate(config)
        self.model = eqx.filter_eval_shape(lambda: experiment.build(config).model)


def _abstract_model(unit: str, **model) -> _Built:
    """The validated config and the abstract model (no arrays allocated) of ``unit`` with ``model`` keys."""
    return _Built({"model": {"unit": unit, **model}, "task": {"name": "adding", "length": 6}})


@pytest.mark.parametrize("unit", sorted(registry.names("unit")))
def test_every_unit_takes_a_width_and_builds_what_its_keys_build(unit):
    """``model.width`` builds the same model as the unit's own keys at that width (same arrays, same
    shapes), and a width twice as large gives a model with more parameters: the width reaches the
    model, it is not dropped."""
    cls = registry.get("unit", unit).obj
    if getattr(cls, "sized", None) is None:
        pytest.skip(f"{unit} declares no width")
    via_width = _abstract_model(unit, width=32)
    via_keys = _abstract_model(unit, **cls.sized(32))
    shapes = lambda m: [x.shape for x in jax.tree.leaves(eqx.filter(m, eqx.is_array))]  # noqa: E731
    assert shapes(via_width.model) == shapes(via_keys.model)
    assert via_width.config["model"]["width"] == 32 and set(cls.sized(32)) <= set(via_width.config["model"])
    assert _abstract_model(unit, width=64).model.param_count()["total"] > via_width.model.param_count()["total"]


def test_a_width_a_unit_cannot_take_and_a_disagreeing_key_are_refused():
    with pytest.raises(ConfigError, match=r"unit 'blockdiag': model.width must be a positive multiple of 4, "
                                          r"got 30 \(nearest: 28, 32\)"):
        _abstract_model("blockdiag", width=30)
    with pytest.raises(ConfigError, match="model.width must be a positive integer, got 0"):
        _abstract_model("gru", width=0)
    with pytest.raises(ConfigError, match="model.width = 32 sets model.hidden = 32, but model.hidden = 16"):
        _abstract_model("aru", width=32, hidden=16)
    # a key that agrees with the width is accepted (a stored config holds both)
    assert _abstract_model("aru", width=32, hidden=32, n_g=4).config["model"]["n_g"] == 4


def test_a_sweep_over_units_at_one_width_needs_no_table(tmp_path):
    doc = {"name": "units-at-32", "model": {"width": 32}, "task": {"name": "adding", "length": 6},
           "train": {"steps": 2}, "sweep": {"model.unit": ["aru", "gru", "elm", "blockdiag", "sith-rnn"]}}
    scenario = spec.parse(doc)
    spec.check_cells(scenario)  # every cell's config is valid before any work
    built = {c.config["model"]["unit"]: experiment.validate(c.config)["model"] for c in scenario.cells}
    assert built["aru"]["hidden"] == built["gru"]["hidden"] == built["elm"]["d_m"] == 32
    assert built["blockdiag"]["n_blocks"] * built["blockdiag"]["block_size"] == 32
    # one unit that cannot take the width fails the whole sweep up front, naming it
    doc["model"]["width"] = 30
    with pytest.raises(ConfigError, match="unit 'blockdiag'"):
        spec.check_cells(spec.parse(doc))


def test_a_run_trained_at_a_width_is_analysed_and_resumed_from_its_stored_config(tmp_path):
    r = invoke(["train", "--model", "gru", "--set", "model.width=8", "--steps", "2", "--out", "run", "-q"], tmp_path)
    assert r.exit_code == 0, r.output
    exp = experiment.load_run(tmp_path / "run")
    assert exp.model.param_count()["total"] == _abstract_model("gru", hidden=8).model.param_count()["total"]
    r = invoke(["train", "--resume", "run", "--steps", "4", "-q"], tmp_path)
    assert r.exit_code == 0, r.output
