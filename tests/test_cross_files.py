"""The cross-unit studies as scenario files (issue 34, item 2): each file reproduces, at the same
seeds, the numbers its old program wrote (``tests/reference/scenarios.json``, recorded with the
programs at toy size by ``tests/scenario_snapshots.py``)."""

from __future__ import annotations

import json

import numpy as np

from dynlab import config as cfgmod
from dynlab.scenarios import spec
from dynlab.scenarios.sweep import run_sweep
from scenario_snapshots import REFERENCE

OLD = json.loads(REFERENCE.read_text())


def reduced(name: str, sets: list[str], sweep: dict, analyses: list[dict]):
    """The built-in scenario ``name`` with ``--set``-style ``sets``, ``sweep`` axes replaced and each
    ``[[analyses]]`` entry updated by the matching dict of ``analyses``."""
    doc = cfgmod.apply_sets(cfgmod.load_toml(spec.builtin_names()[name]), sets)
    doc["sweep"].update(sweep)
    for entry, update in zip(doc["analyses"], analyses):
        entry.update(update)
    return spec.parse(doc, name)


def same(got, old: dict, where: str):
    """``got`` (flattened in the old dataset's order) equals the old program's recorded sample."""
    flat = np.asarray(got, dtype=float).ravel()
    assert list(np.shape(got)) == old["shape"], where
    idx = np.unique(np.linspace(0, flat.size - 1, min(48, flat.size)).round().astype(int))
    np.testing.assert_allclose(flat[idx], np.array(old["values"], dtype=float), rtol=1e-4, atol=1e-6, err_msg=where)


def test_cross_lyapunov_file_reproduces_the_program(tmp_path):
    """The old program's toy run (aru and sith-rnn at width 8, 3 steps, seed 0; k = 3 over 60 steps)."""
    scenario = reduced("cross-lyapunov", ["model.width=8", "train.steps=3", "train.eval_every=1", "train.log_every=3",
                                          "train.checkpoint_every=3"],
                       {"model.unit": ["aru", "sith-rnn"], "seed": [0]},
                       [dict(k=3, steps=60, burn_in=10, ics=2), {}])
    ds = run_sweep(scenario, tmp_path / "sweep").transpose("model.unit", "seed", "stage", ...)
    old = OLD["cross-lyapunov"]["lyapunov.nc"]
    for new, name in (("lyapunov_mean", "mean"), ("lyapunov_ci_low", "ci_low"), ("lyapunov_ci_high", "ci_high"),
                      ("lyapunov_largest_mean", "largest")):
        same(ds[new], old[name], name)
    same(ds.perturb_loss.squeeze("perturb_strength"), old["eval_loss"], "eval_loss")
