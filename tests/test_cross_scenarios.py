"""The cross-paper scenarios (issue 9, item 4) at toy size: each writes its datasets and figures,
and its numbers equal the same analysis run directly on the same models (the scenario adds
plumbing, not numerics; the numerical cores are tested in their own modules)."""

from __future__ import annotations

import pytest

from dynlab import experiment
from dynlab.errors import ConfigError, DynlabError
from dynlab.scenarios.every_unit import UNITS, model_section


def test_every_unit_section_is_valid_and_width_sets_the_size():
    for unit in UNITS:
        for width in (8, 32):
            experiment.check({"model": model_section(unit, width), "task": {"name": "adding"}})
    dims = {w: experiment.build({"model": model_section("gru", w)}).model.cells[0].hidden for w in (8, 32)}
    assert dims == {8: 8, 32: 32}
    with pytest.raises(DynlabError, match="unknown unit 'nope'"):
        model_section("nope", 8)


