"""The built-in study ``flipflop-bifurcations`` (issue 49, item 4): the file as shipped.

The file is loaded as shipped and at ``--preset full``: every key, analysis option, stage and
claim is checked before any work (the claims' variables against the analyses' declared outputs).
A run of a tiny form (one 4-unit RNN cell, 4 training steps, continuation and flip-threshold with
short searches) took 67 s of CPU, over the suite's 15 s per test, so it is not here; the study's
numbers (the claim's verdict on the reduced form) are in docs/how-to/continuation.md.
"""

from __future__ import annotations

from dynlab.scenarios import spec


def test_the_file_loads_as_shipped_and_at_its_full_preset():
    for preset in (None, "full"):
        study = spec.load("flipflop-bifurcations", preset=preset)
        assert {c.coords["model.unit"] for c in study.cells} == {"gru", "rnn", "lstm"}
        assert {c.coords["seed"] for c in study.cells} == {0, 1, 2}
        assert [a["name"] for a in study.analyses] == ["continuation", "flip-threshold", "fixed-points"]
        assert {c.id for c in study.claims} == {"fold-predicts-flip", "eight-corners-when-trained"}
