"""#34: a scenario's stage after a transfer (``transferred``), declared by a ``[transfer]`` table.

One ARU cell is trained once per transfer of a variant axis (isolated neurons; a transplanted
controller, retrained), and each ``transferred`` result is checked against the same transfer
made directly with [`dynlab.transfer`][] and [`dynlab.train.train`][] on the cell's trained
model: the same result two ways. What a transfer may change is checked on the models themselves
(a frozen controller is bit-identical to the donor's). The third transfer, activation-only
retraining, is checked where its table becomes an experiment (its training is the same code
path as the controller's, and [`dynlab.transfer.retrain_activation`][] is tested in
``test_transfer.py``). Every bad ``[transfer]`` is one line, exit 2, before any work."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import numpy as np
import pytest

from cli_runner import TINY_CELL, invoke, one_line_error
from dynlab import experiment, registry
from dynlab.config import apply_values
from dynlab.scenarios import spec
from dynlab.scenarios.cell import TRANSFERRED, cell_summary, read_marker, run_cell
from dynlab.train import train
from dynlab.transfer import Transfer, continued, transplant_controller
from dynlab.variants import ACTIVATION, CONTROLLER

ARU = TINY_CELL.replace('unit = "rnn"', 'unit = "aru"\nn_g = 2')
RETRAIN = 3
STAGES = '["transferred", "isolated", "init", "trained"]'  # any order: the dataset has them in a cell's life's
VARIANTS = f"""[sweep.variants.transfer.isolate]
transfer = {{kind = "isolate"}}
[sweep.variants.transfer.controller]
transfer = {{kind = "controller", steps = {RETRAIN}}}
"""


def text(transfer: str = "", stages: str = STAGES, cell: str = ARU, sweep: str = "seed = [0]\n") -> str:
    return (f'name = "transfer"\n{cell}{transfer}[[analyses]]\nname = "weight-eigs"\nstages = {stages}\n'
            f"[sweep]\n{sweep}")


def eigs(ds, stage: str) -> np.ndarray:
    sel = ds.sel(stage=stage).squeeze()
    return np.sort_complex((sel["weight-eigs_eig_real"] + 1j * sel["weight-eigs_eig_imag"]).values.ravel())


def eigs_of(model) -> np.ndarray:
    ds = registry.get("analysis", "weight-eigs").obj(model)
    return np.sort_complex((ds["eig_real"] + 1j * ds["eig_imag"]).values.ravel())


def arrays(model) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_flatten_with_path(eqx.filter(model, eqx.is_array))[0]
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves}


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    """Each transfer's cell, computed as a sweep computes it: ``{kind: (dataset, cell directory)}``."""
    root = tmp_path_factory.mktemp("transfer")
    (root / "s.toml").write_text(text(sweep=VARIANTS))
    out = {}
    for cell in spec.load(str(root / "s.toml")).cells:
        kind = cell.config["transfer"]["kind"]
        assert run_cell(root / kind, cell.config, cell.analyses)["status"] == "ok"
        out[kind] = (cell_summary(root / kind, cell.analyses), root / kind)
    return out


def test_the_stage_coordinate_is_in_the_order_of_a_cells_life(cells):
    assert set(cells) == {"isolate", "controller"}
    for ds, _ in cells.values():
        assert list(ds.stage.values) == ["init", "trained", "isolated", "transferred"]


def test_a_transfer_leaves_the_training_before_it_unchanged(cells):
    (first, _), *others = cells.values()  # one config but the transfer: one trained model
    for ds, _ in others:
        np.testing.assert_array_equal(eigs(ds, "trained"), eigs(first, "trained"))


def test_transferred_is_the_transplanted_controller_retrained(cells):
    ds, cell_dir = cells["controller"]
    trained = experiment.load_run(cell_dir)
    config = apply_values(trained.config, {"seed": trained.seed + 1, "train.steps": RETRAIN})
    direct = train(transplant_controller(trained.model, config)).model
    np.testing.assert_allclose(eigs(ds, "transferred"), eigs_of(direct), rtol=1e-5, atol=1e-6)
    assert not np.allclose(eigs(ds, "transferred"), eigs(ds, "trained"))  # a new main network
    moved, kept = arrays(experiment.load_run(cell_dir / TRANSFERRED).model), arrays(trained.model)
    controller = [k for k in kept if k.rsplit(".", 1)[-1] in CONTROLLER]
    assert controller and all(np.array_equal(moved[k], kept[k]) for k in controller)  # frozen: the donor's, bit for bit
    assert not np.array_equal(moved[".cells[0].w_hh"], kept[".cells[0].w_hh"])


def test_a_declared_transfer_continues_on_its_own_task_and_training_keys(cells):
    trained = experiment.load_run(cells["controller"][1])
    table = {"kind": "activation", "steps": 2, "task": {"length": 9}, "train": {"lr": 1e-3}}
    exp = Transfer.parse(table).start(trained)
    assert exp.model is trained.model  # the trained model itself, to be retrained
    assert sorted(exp.train.trainable) == sorted(f"cells.*.{n}" for n in ACTIVATION["aru"])
    assert (exp.task.length, exp.train.steps, exp.train.lr) == (9, 2, 1e-3)
    assert trained.task.length == 6 and exp.config["task"]["length"] == 9


def test_transferred_by_isolate_is_the_isolated_stage_and_the_diagonal(cells):
    ds, cell_dir = cells["isolate"]
    np.testing.assert_array_equal(eigs(ds, "transferred"), eigs(ds, "isolated"))
    w = np.asarray(experiment.load_run(cell_dir).model.cells[0].w_hh, np.float64)
    np.testing.assert_allclose(eigs(ds, "transferred"), np.sort_complex(np.diag(w) + 0j), rtol=1e-6, atol=1e-7)
    saved = experiment.load_run(cell_dir / TRANSFERRED).model  # written as a run directory of isolated neurons
    np.testing.assert_array_equal(np.asarray(saved.cells[0].w_hh), np.diag(w).astype(np.float32))


def test_the_transferred_run_is_part_of_the_cells_marker(cells):
    _, cell_dir = cells["controller"]
    assert f"{TRANSFERRED}/model.eqx" in read_marker(cell_dir)["files"]
    model = cell_dir / TRANSFERRED / "model.eqx"
    model.write_bytes(model.read_bytes() + b"\0")  # altered: the cell is no longer complete
    assert read_marker(cell_dir) is None


def scale_recurrence(trained, config: dict, *, factor: float = 0.5):
    """A plug-in's transfer: every layer's W_hh times ``factor``."""
    exp = continued(trained.model, config)
    scaled = [factor * c.w_hh for c in exp.model.cells]
    return dataclasses.replace(exp, model=eqx.tree_at(lambda m: [c.w_hh for c in m.cells], exp.model, scaled))


def test_a_plugin_transfer_is_one_registered_function(tmp_path, monkeypatch):
    entry = registry.Entry("transfer", "scale", scale_recurrence, "W_hh scaled (a test plug-in)")
    monkeypatch.setitem(registry._REGISTRY["transfer"], "scale", entry)
    (tmp_path / "s.toml").write_text(text('[transfer]\nkind = "scale"\nfactor = -0.25\n', '["trained", "transferred"]'))
    (cell,) = spec.load(str(tmp_path / "s.toml")).cells
    assert run_cell(tmp_path / "cell", cell.config, cell.analyses)["status"] == "ok"
    ds = cell_summary(tmp_path / "cell", cell.analyses)
    scaled = np.sort_complex(-0.25 * eigs(ds, "trained"))  # eig(cW) = c eig(W)
    np.testing.assert_allclose(eigs(ds, "transferred"), scaled, rtol=1e-5, atol=1e-7)
    (tmp_path / "s.toml").write_text(text('[transfer]\nkind = "scale"\nfactor = "half"\n', '["transferred"]'))
    one_line_error(invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path), "transfer.factor must be float")


CONTROLLER_ON = '[transfer]\nkind = "controller"\nsteps = 2\n'
NETWORKS = ('[sweep.variants.network.aru]\nmodel = {unit = "aru", n_g = 2}\n'
            '[sweep.variants.network.gru]\nmodel = {unit = "gru"}\n')


@pytest.mark.parametrize("scenario, fragments", [
    (text(), ["stage 'transferred'", "declares no transfer", "activation, controller, isolate"]),
    (text('[transfer]\nkind = "rotate"\n'), ["transfer.kind", "unknown transfer 'rotate'",
                                             "activation, controller, isolate"]),
    (text('[transfer]\nsteps = 2\n'), ["[transfer] needs kind"]),
    (text('[transfer]\nkind = "activation"\nsteps = -1\n'), ["transfer.steps", ">= 0"]),
    (text('[transfer]\nkind = "controller"\nseed = 1.5\n'), ["transfer.seed must be"]),
    (text('[transfer]\nkind = "isolate"\nrate = 2\n'), ["unknown config key transfer.rate", "steps, task, train"]),
    (text('[transfer]\nkind = "activation"\ntrain = {steps = 5}\n'), ["transfer.train.steps", "transfer.steps"]),
    (text('[transfer]\nkind = "activation"\ntask = 45\n'), ["transfer.task must be a table", "rotate = 45"]),
    (text('[transfer]\nkind = "activation"\ntask = {rotate = 45}\n'), ["'transferred'", "cannot apply", "rotate"]),
    (text(CONTROLLER_ON, cell=TINY_CELL), ["'transferred'", "(controller) cannot apply", "needs aru"]),
    (text('[transfer]\nkind = "activation"\n', cell=TINY_CELL), ["(activation) cannot apply", "rnn-gamma"]),
    (text(CONTROLLER_ON, stages='["trained"]'), ["[transfer] (controller)", "never analysed"]),
    (text(CONTROLLER_ON, cell=ARU.replace("steps = 10", "steps = 0"), stages='["init", "transferred"]'),
     ["stage 'transferred'", "train.steps = 0"]),
    (text(CONTROLLER_ON, '["transferred"]', TINY_CELL, NETWORKS), ["in cell network=gru", "needs aru"]),
    (text(CONTROLLER_ON, sweep='"transfer.steps" = [1, -2]\n'), ["transfer.steps", "in cell transfer.steps=-2"]),
])
def test_a_bad_transfer_is_one_line_before_any_work(tmp_path, scenario, fragments):
    (tmp_path / "s.toml").write_text(scenario)
    one_line_error(invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path), *fragments)
    assert not (tmp_path / "out").exists()
