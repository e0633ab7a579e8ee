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

import equinox as eqx
import jax
import numpy as np
import pytest
import xarray as xr

from dynlab.analyses import trw
from dynlab.analyses.trw import accuracy_vs_dilation
from dynlab.scenarios import sith_trw

pytestmark = pytest.mark.optimised  # its fixture runs programs long: cheaper at -O2 (tests/conftest.py)

# n_shuffle = 1: one permutation per scale. The TRW analysis is most of this module's cost: at the
# suite's -O0 one SITHCon TRW took 16.8 / 10.2 / 6.1 s of CPU at n_shuffle = 4 / 2 / 1, and the run
# makes two (trained and control). The control test compares the correlations themselves, of which
# every other TRW variable is a function; with one shuffle the sd over shuffles is NaN in both
# (assert_array_equal counts NaN as equal), so it loses no comparison the correlations make.
RUN = dict(networks=["sithcon"], seeds=[1], steps=3, quick=True, n_shuffle=1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sith-trw")
    given, evaluated = [], []

    def untrained(exp):  # training as the identity; records what the program asked for
        given.append(exp.config)
        return SimpleNamespace(model=exp.model)

    def dilation_accuracy(model, **options):  # the program's own evaluation, recorded, not replaced
        result = accuracy_vs_dilation(model, **options)
        evaluated.append((model, options, result))
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("dynlab.train.train", untrained)
        mp.setattr(trw, "accuracy_vs_dilation", dilation_accuracy)
        result = sith_trw.run_sith_trw(out, **RUN)
    return out, result, given, evaluated


def _model(net, seed):
    return sith_trw.build(net, seed, RUN["steps"]).model


def test_tau_extensible_networks_see_a_dilated_sequence_as_the_original(run):
    _, res, *_ = run
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
    """The table's row is the zero-shot accuracy of SITHCon at seed 1, two ways: computed here on a
    freshly built SITHCon at the dilations 3^0 and 3^1; and at every dilation, the evaluation the
    program made (recorded by the fixture) was of a network identical to that fresh one, leaf for
    leaf, with the table's dilations and the default shift, and the table holds what it returned.
    The evaluation is deterministic, so the two together are the direct computation at every
    dilation, which here cost 14 s of CPU at the suite's -O0 (the 3^2 and 3^3 sequences, 9 and 27
    times as long, were 13 of those 14 s); 3^0 and 3^1 cost 2 s."""
    _, res, _, evaluated = run
    acc = res["accuracy"].accuracy
    nines = acc.values * 9
    np.testing.assert_allclose(nines, np.round(nines), atol=1e-9)
    row = acc.sel(network="sithcon", seed=1).values
    fresh = _model("sithcon", 1)
    direct = accuracy_vs_dilation(fresh, dilations=acc.dilation.values[:2], how="shift").accuracy.values
    np.testing.assert_array_equal(row[:2], direct)
    (model, options, result), = evaluated  # one network, one seed: one evaluation
    assert options == {"dilations": list(acc.dilation.values), "how": "shift"}
    made, built = (jax.tree_util.tree_flatten(eqx.filter(m, eqx.is_array)) for m in (model, fresh))
    assert made[1] == built[1] and eqx.tree_equal(eqx.filter(model, eqx.is_array, inverse=True),
                                                  eqx.filter(fresh, eqx.is_array, inverse=True))
    for a, b in zip(made[0], built[0]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(row, result.accuracy.values)


def test_the_untrained_control_is_the_same_network(run):
    out, res, *_ = run
    trained, control = res["trw"]["sithcon"], res["trw"]["sithcon-untrained"]
    for var in trained.data_vars:
        np.testing.assert_array_equal(trained[var].values, control[var].values, err_msg=var)
    assert set(res["trw"]) == {"sithcon", "sithcon-untrained"}
    for name, ds in res["trw"].items():
        with xr.open_dataset(out / f"trw-{name}.nc") as disk:
            np.testing.assert_array_equal(disk.s50.values, ds.s50.values)


def test_each_network_trains_with_its_own_budget_and_rate(run):
    _, _, given, _ = run
    (c,) = given
    t = c["train"]
    assert (c["model"]["unit"], c["seed"], c["model"]["readout_bias"]) == ("sithcon", 1, False)
    assert (t["steps"], t["lr"], t["optimizer"], t["batch_size"]) == (3, sith_trw.LR["sithcon"], "adamw", 9)
    budgets = {net: sith_trw.training_steps(net, steps=3, generic_steps=5, sith_rnn_steps=7) for net in sith_trw.NETWORKS}
    assert budgets == {**dict.fromkeys(sith_trw.NETWORKS, 3), "rnn-generic": 5, "sith-rnn": 7}


def test_the_read_out_is_the_only_parameters_beyond_the_units(run):
    out, res, *_ = run
    p = res["accuracy"]
    np.testing.assert_array_equal(p.total_params - p.unit_params, 9 * 9)
    with xr.open_dataset(out / "accuracy.nc") as disk:
        np.testing.assert_array_equal(disk.accuracy.values, p.accuracy.values)
        np.testing.assert_array_equal(disk.unit_params.values, p.unit_params.values)
