"""Scenario ``sith-trw`` checked by properties, not by pinned numbers.

One run of [`dynlab.scenarios.sith_trw.run_sith_trw`][] on SITHCon at seed 1, with training replaced
by the identity (the network keeps its initial weights, and the call records the experiment it was
given), so that no training step compiles and every value has a truth outside the program:

- **scale invariance**: a τ-extensible network (SITH-RNN, SITHCon) met with ``tau_rescale="shift"``
  sees a dilated sequence exactly as the original, whatever its weights, so its predictions and its
  accuracy are the same at every dilation; a network without τ has no such symmetry;
- **the control is the same network**: with training the identity, the TRW of the "trained" SITHCon
  and of the untrained control (same architecture, same seed) are equal element for element;
- **the table is the model's zero-shot accuracy** at its own seed, in steps of 1/9;
- **each network trains as the program says**: its step budget ([`training_steps`][dynlab.scenarios.sith_trw.training_steps]),
  its learning rate, AdamW on the full batch of 9;
- **parameter counts**: the total minus the units' is the bias-free 9 x 9 read-out.

Replaces the toy run's snapshot (``tests/reference/scenarios.json``), which pinned the numbers of
SITH-RNN and SITHCon trained 3 steps and was re-recorded whenever rounding moved: 60 s of CPU
against 40 s here (measured on 2 loaded cores, ``/usr/bin/time`` around pytest, children included).
Training itself is tested in ``tests/test_train.py``; the claims on these datasets in ``tests/test_claims.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from dynlab.analyses import trw
from dynlab.scenarios import sith_trw

RUN = dict(networks=["sithcon"], seeds=[1], steps=3, quick=True, n_shuffle=4)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sith-trw")
    given = []

    def untrained(exp):  # training as the identity; records what the program asked for
        given.append(exp.config)
        return SimpleNamespace(model=exp.model)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dynlab.train.train", untrained)
        result = sith_trw.run_sith_trw(out, **RUN)
    return out, result, given


def _model(net, seed):
    return sith_trw.build(net, seed, RUN["steps"]).model


def test_tau_extensible_networks_see_a_dilated_sequence_as_the_original(run):
    _, res, _ = run
    acc = res["accuracy"].accuracy.sel(network="sithcon").values
    assert (acc == acc[:, :1]).all()
    # SITH-RNN's predictions at initialisation differ between sequences, so their equality is not chance
    dilations = [0, 1, 2]
    pred = trw.accuracy_vs_dilation(_model("sith-rnn", 0), dilations=dilations, how="shift").prediction.values
    assert len(set(pred[0])) > 1 and (pred == pred[0]).all()
    # the symmetry is the units', not the evaluation's: a network without tau predicts differently once dilated
    plain = trw.accuracy_vs_dilation(_model("rnn-diag-uniform", 1), dilations=dilations, how="shift").prediction.values
    assert (plain != plain[0]).any()


def test_the_table_is_the_models_zero_shot_accuracy_in_ninths(run):
    _, res, _ = run
    acc = res["accuracy"].accuracy
    nines = acc.values * 9
    np.testing.assert_allclose(nines, np.round(nines), atol=1e-9)
    direct = trw.accuracy_vs_dilation(_model("sithcon", 1), dilations=acc.dilation.values, how="shift").accuracy.values
    np.testing.assert_array_equal(acc.sel(network="sithcon", seed=1).values, direct)


def test_the_untrained_control_is_the_same_network(run):
    out, res, _ = run
    trained, control = res["trw"]["sithcon"], res["trw"]["sithcon-untrained"]
    for var in trained.data_vars:
        np.testing.assert_array_equal(trained[var].values, control[var].values, err_msg=var)
    assert set(res["trw"]) == {"sithcon", "sithcon-untrained"}
    for name, ds in res["trw"].items():
        with xr.open_dataset(out / f"trw-{name}.nc") as disk:
            np.testing.assert_array_equal(disk.s50.values, ds.s50.values)


def test_each_network_trains_with_its_own_budget_and_rate(run):
    _, _, given = run
    (c,) = given
    t = c["train"]
    assert (c["model"]["unit"], c["seed"], c["model"]["readout_bias"]) == ("sithcon", 1, False)
    assert (t["steps"], t["lr"], t["optimizer"], t["batch_size"]) == (3, sith_trw.LR["sithcon"], "adamw", 9)
    budgets = {net: sith_trw.training_steps(net, steps=3, generic_steps=5, sith_rnn_steps=7) for net in sith_trw.NETWORKS}
    assert budgets == {**dict.fromkeys(sith_trw.NETWORKS, 3), "rnn-generic": 5, "sith-rnn": 7}


def test_the_read_out_is_the_only_parameters_beyond_the_units(run):
    out, res, _ = run
    p = res["accuracy"]
    np.testing.assert_array_equal(p.total_params - p.unit_params, 9 * 9)
    with xr.open_dataset(out / "accuracy.nc") as disk:
        np.testing.assert_array_equal(disk.accuracy.values, p.accuracy.values)
        np.testing.assert_array_equal(disk.unit_params.values, p.unit_params.values)
