"""Parameter freezing in the trainer, controller transplant, retraining (n, s) only, isolated neurons."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab import experiment, store, transfer
from dynlab.errors import ConfigError
from dynlab.train import parameter_paths, train
from dynlab.units.aru import gamma

TRAIN = {"steps": 3, "batch_size": 4, "eval_size": 8, "log_every": 3, "eval_every": 3, "checkpoint_every": 3, "lr": 1e-2}


def config(unit, seed=0, **model):
    return {"seed": seed, "model": {"unit": unit, "hidden": 4, **model}, "task": {"name": "adding", "length": 6},
            "train": dict(TRAIN)}


def changed(before, after) -> set[str]:
    a, b = parameter_paths(before), parameter_paths(after)
    assert a.keys() == b.keys()
    return {k for k in a if not np.array_equal(np.asarray(a[k]), np.asarray(b[k]))}


@pytest.fixture(scope="module")
def frozen_run(tmp_path_factory):
    """rnn-gamma trained 6 steps with W_hh frozen; a copy of its run directory taken at step 3."""
    import shutil

    run, copy = tmp_path_factory.mktemp("frozen"), tmp_path_factory.mktemp("interrupted") / "run"
    cfg = config("rnn-gamma")
    cfg["train"].update(freeze=["cells.*.w_hh"], steps=6)
    exp = experiment.build(cfg)

    def snapshot(step, total, metrics):
        if step == 3:
            shutil.copytree(run, copy)

    return run, copy, exp.model, train(exp, run, progress=snapshot)


def test_frozen_leaves_stay_bit_identical_and_resume(frozen_run):
    run, copy, initial, result = frozen_run
    assert changed(initial, result.model) == {"cells.0.w_xh", "cells.0.b_h", "cells.0.n", "cells.0.s",
                                              "readout.weight", "readout.bias"}
    cfg = store.read_config(copy)
    assert cfg["train"]["freeze"] == ["cells.*.w_hh"]  # kept in the run's config, so resuming freezes too
    resumed = train(experiment.build(cfg), copy, resume=True)
    np.testing.assert_array_equal(resumed.metrics.loss.values, result.metrics.loss.values)
    assert not changed(result.model, resumed.model)
    for bad, says in ((["cells.*.nope"], "matches no parameter"), (["*"], "leaves nothing to train")):
        with pytest.raises(ConfigError, match=says):
            train(experiment.build({**cfg, "train": {**TRAIN, "freeze": bad}}))


def test_retrain_only_n_and_s(frozen_run):
    trained = frozen_run[3].model
    exp = transfer.retrain_activation(trained, config("rnn-gamma", seed=1))
    assert exp.config["train"]["trainable"] == ["cells.*.n", "cells.*.s"]
    assert changed(trained, train(exp).model) == {"cells.0.n", "cells.0.s"}
    with pytest.raises(ConfigError, match="per-neuron activation parameters"):
        transfer.retrain_activation(trained, config("gru"))
    with pytest.raises(ConfigError, match="does not match"):
        transfer.retrain_activation(trained, config("rnn-gamma", hidden=5))


def test_controller_transplant_copies_and_freezes_the_donor_controller():
    donor = experiment.build(config("aru", n_g=2)).model  # any ARU's controller will do
    exp = transfer.transplant_controller(donor, config("aru", seed=1, n_g=2))
    controller = {f"cells.0.{n}" for n in transfer.CONTROLLER}
    assert not changed(donor, exp.model) & controller and "cells.0.w_hh" in changed(donor, exp.model)  # new seed
    # training keeps them bit-identical: the freeze patterns are those the trainer test above checks
    assert exp.config["train"]["freeze"] == [f"cells.*.{n}" for n in transfer.CONTROLLER]
    assert exp.train.freeze == tuple(exp.config["train"]["freeze"])
    with pytest.raises(ConfigError, match="does not fit"):
        transfer.transplant_controller(donor, config("aru", n_g=3))
    with pytest.raises(ConfigError, match="needs aru models"):
        transfer.transplant_controller(donor, config("rnn-gamma"))


def test_isolated_neurons_evolve_on_their_own(frozen_run):
    trained = frozen_run[3].model
    exp = transfer.isolate(dataclasses.replace(experiment.build(config("rnn-gamma")), model=trained))
    cell, full = exp.model.cells[0], trained.cells[0]
    np.testing.assert_array_equal(cell.w_hh, jnp.diagonal(full.w_hh))  # the trained diagonal, as a vector
    assert exp.config["model"]["isolated"] is True
    assert experiment.build(exp.config).model.cells[0].w_hh.shape == (4,)  # the config rebuilds its structure
    xs = np.asarray(jax.random.normal(jax.random.key(0), (9, 2)))
    states = np.asarray(exp.model.trajectory(jnp.asarray(xs))[1][0])
    w, U, b, n, s = (np.asarray(a, np.float64) for a in (cell.w_hh, full.w_xh, full.b_h, full.n, full.s))
    for i in range(4):  # each neuron alone: h_t = gamma(w_ii h_{t-1} + (W_xh x_t)_i + b_i; n_i, s_i)
        h = 0.0
        for t in range(9):
            h = float(gamma(w[i] * h + U[i] @ xs[t] + b[i], n[i], s[i]))
            np.testing.assert_allclose(states[t, i], h, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="has no isolated neurons; units that do: aru"):
        transfer.isolate(experiment.build(config("gru")))


def test_transfer_cli_writes_run_directories_of_each_variant(tmp_path, frozen_run):
    """`dynlab transfer controller|activation|isolate` on a tiny psMNIST ARU: what each run froze,
    trained or isolated, read back from the run directories it wrote; refused on the rnn-gamma adding run above.
    The commands are generated from the registered transfers, so without --steps a transfer is written
    untrained, as a scenario's `[transfer]` table with no steps makes it."""
    from cli_runner import invoke
    from test_mnist import write_mnist

    rng = np.random.default_rng(0)
    write_mnist(tmp_path / "data", "t10k", rng.integers(0, 256, (30, 28, 28)), rng.integers(0, 10, 30))
    short = ["--set", "train.batch_size=4", "--set", "train.eval_size=8", "--set", "train.log_every=2",
             "--set", "train.eval_every=2", "--set", "train.checkpoint_every=2", "--steps", "2", "-q"]
    tiny = ["--set", f'task.data_dir="{tmp_path / "data"}"', "--set", "task.downsample=7", "--set", "task.test_size=10",
            *short]
    r = invoke(["train", "--model", "aru", "--task", "psmnist", "--set", "model.hidden=4", "--set", "model.n_g=2",
                "--out", "donor", *tiny], tmp_path)
    assert r.exit_code == 0, r.output
    donor = experiment.load_run(tmp_path / "donor").model
    params = lambda run: parameter_paths(experiment.load_run(tmp_path / run).model)  # noqa: E731

    r = invoke(["transfer", "controller", "--checkpoint", "donor", "--out", "ctl", *short], tmp_path)
    assert r.exit_code == 0, r.output
    ctl, before = params("ctl"), parameter_paths(donor)
    for name in transfer.CONTROLLER:
        np.testing.assert_array_equal(ctl[f"cells.0.{name}"], before[f"cells.0.{name}"])
    assert not np.array_equal(ctl["cells.0.w_hh"], before["cells.0.w_hh"])  # a new main network
    assert store.read_config(tmp_path / "ctl")["seed"] == 1

    r = invoke(["transfer", "activation", "--checkpoint", "donor", "--set", "task.rotate=45", "--out", "act", *short],
               tmp_path)
    assert r.exit_code == 0, r.output
    assert changed(donor, experiment.load_run(tmp_path / "act").model) == {"cells.0.b_n", "cells.0.b_s"}
    assert store.read_config(tmp_path / "act")["task"]["rotate"] == 45

    r = invoke(["transfer", "isolate", "--checkpoint", "donor", "--out", "iso"], tmp_path)
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(params("iso")["cells.0.w_hh"], np.diagonal(before["cells.0.w_hh"]))

    r = invoke(["transfer", "controller", "--checkpoint", "donor", "--out", "ctl0", "-q"], tmp_path)
    assert r.exit_code == 0, r.output  # no options: the model a [transfer] table with only its kind makes
    table = transfer.Transfer.parse({"kind": "controller"}).start(experiment.load_run(tmp_path / "donor"))
    assert changed(table.model, experiment.load_run(tmp_path / "ctl0").model) == set()
    assert store.read_config(tmp_path / "ctl0")["train"]["freeze"] == table.config["train"]["freeze"]

    adding = str(frozen_run[0])  # an rnn-gamma run on the adding task
    for args, says in ((["activation", "--checkpoint", adding, "--set", "task.rotate=45"], "task.rotate"),
                       (["controller", "--checkpoint", adding], "needs aru models, got donor 'rnn-gamma'"),
                       (["controller", "--checkpoint", "donor", "--set", "model.hidden=3"], "task.* and train.* keys"),
                       (["controller", "--checkpoint", "donor", "--seed", "-1"], "--seed must be an integer >= 0")):
        r = invoke(["transfer", *args, "--out", "x"], tmp_path)
        assert r.exit_code == 2 and says in r.output, (args, r.output)
