"""The cross-unit files reproduce, at the same seeds, the numbers their old programs wrote
(``tests/reference/scenarios.json``, recorded with the programs at toy size)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from dynlab import config as cfgmod
from dynlab.scenarios import spec
from dynlab.scenarios.sweep import run_sweep
from scenario_snapshots import REFERENCE

OLD = json.loads(REFERENCE.read_text())


def reduced(name: str, sets: list[str], sweep: dict, analyses: list[dict]):
    doc = cfgmod.apply_sets(cfgmod.load_toml(spec.builtin_names()[name]), sets)
    doc["sweep"].update(sweep)
    doc.pop("claims", None)  # numbers only: a toy sweep may lack the cells a claim names
    for entry, update in zip(doc["analyses"], analyses):
        entry.update(update)
    return spec.parse(doc, name)


def same(got, old: dict, where: str):
    flat = np.asarray(got, dtype=float).ravel()
    assert list(np.shape(got)) == old["shape"], where
    idx = np.unique(np.linspace(0, flat.size - 1, min(48, flat.size)).round().astype(int))
    np.testing.assert_allclose(flat[idx], np.array(old["values"], dtype=float), rtol=1e-4, atol=1e-6, err_msg=where)


def test_cross_trw_file_reproduces_the_program(tmp_path):
    scenario = reduced("cross-trw", ["train.steps=3", "train.eval_every=3", "train.log_every=3", "train.checkpoint_every=3"],
                       {"seed": [0], "variants": {"network": {
                           "aru": {"model": {"unit": "aru", "hidden": 8, "n_g": 2, "layers": 2}, "train": {"lr": 3e-3}},
                           "sith-rnn": {"model": {"unit": "sith-rnn"}, "train": {"lr": 1e-2}}}}},
                       [dict(n_shuffle=4), {}])
    ds = run_sweep(scenario, tmp_path / "sweep").transpose("network", "seed", ...)
    old = OLD["cross-trw"]
    for name in ("log3_s50", "s50"):
        same(ds[f"trw_{name}"], old["trw.nc"][name], name)
    # the layers a 2-layer stack lacks: NaN in the sweep, padded with False by the program
    same(ds.trw_s50_censored.fillna(0), old["trw.nc"]["s50_censored"], "s50_censored")
    same(ds.dilation_accuracy, old["accuracy.nc"]["accuracy"], "accuracy")


def test_cross_adaptation_file_reproduces_the_program(tmp_path):
    """The old program's toy run (RNN+ReLU and ARUN at hidden 16, the ELM with the ARU's gain control;
    3 steps, seed 0, clean and mu = 5 on 64 digits); real MNIST, as the record."""
    if not os.environ.get("DYNLAB_DATA"):
        pytest.skip("DYNLAB_DATA is not set: recorded on the real MNIST files")
    networks = spec.load("cross-adaptation").axes[0]
    variants = dict(zip(networks.values["network"], networks.variants))
    toy = {"rnn-relu": {**variants["rnn-relu"], "model.hidden": 16}, "aru": {**variants["aru"], "model.hidden": 16},
           "elm-aru": variants["elm-aru"]}
    scenario = reduced("cross-adaptation", ["train.steps=3", "train.eval_every=1", "train.eval_size=32",
                                            "train.log_every=3", "train.checkpoint_every=3"],
                       {"seed": [0], "variants": {"network": toy}}, [dict(n=64, strengths=[0.0, 5.0])])
    ds = run_sweep(scenario, tmp_path / "sweep").transpose("network", "seed", ...)
    old = OLD["cross-adaptation"]["table1.nc"]
    for name in ("accuracy", "loss"):
        same(ds[f"perturb_{name}"], old[name], name)
