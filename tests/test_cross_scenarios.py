"""The cross-paper scenarios (issue 9, item 4) at toy size: each writes its datasets and figures,
and its numbers equal the same analysis run directly on the same models (the scenario adds
plumbing, not numerics; the numerical cores are tested in their own modules)."""

from __future__ import annotations

import equinox as eqx
import jax
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


def test_cross_pc_alignment_cosine_is_that_of_the_two_gradients(tmp_path):
    from dynlab.analyses.pc_bp import cosine
    from dynlab.rules import pc, pc_time
    from dynlab.scenarios.cross_pc import run_cross_pc

    out = run_cross_pc(tmp_path, units=["rnn", "gru"], widths=[16], lengths=[3], seeds=[0], steps=1, batch_size=4,
                       inference_steps=1000, reference_widths=[64], reference_lengths=[2], reference_steps=2)
    ds = out["pc_alignment"]
    assert (tmp_path / "pc_alignment.png").is_file() and bool(ds.converged.all())
    # the reference: the linear mean-field RNN aligns at N >> T (the theory's case, tests/test_pc_time.py)
    assert float(out["linear_rnn"].mean_cosine.squeeze()) >= 0.99 and (tmp_path / "linear_rnn_cosine.png").is_file()
    for unit in ("rnn", "gru"):
        exp = experiment.build({"seed": 0, "model": model_section(unit, 16), "task": {"name": "adding", "length": 3}})
        x, y, mask = exp.task.batch(jax.random.key(0), 4, "train")
        inf = pc_time.infer(exp.model, x, y, mask, optimizer=pc.activity_optimizer("momentum", 0.1), max_steps=1000,
                            rtol=1e-4)
        _, g_pc = pc_time.weight_grads(exp.model, inf.z, x, y, mask)
        g_bp = eqx.filter_grad(pc_time.loss)(exp.model, x, y, mask)
        expected = float(cosine(eqx.filter(g_pc, eqx.is_inexact_array), eqx.filter(g_bp, eqx.is_inexact_array)))
        got = float(ds.cosine.sel(unit=unit, width=16, length=3, seed=0, step=0))
        assert got == pytest.approx(expected, abs=1e-4)
        assert got > 0.9  # T = 3: the equilibrium errors are small, PC is close to BPTT


def test_cross_pc_law_measures_its_cells_and_the_depth_factor_gives_the_law(tmp_path):
    """cross-pc-law's numbers are the rescaling and the gradient cosine computed directly on the same
    (wrapped) model, and with the depth factor s - 1 grows as T/N (the derived slope 1; finite widths
    8 and 32 and two lengths, so within 0.3 of it)."""
    from dynlab.analyses.pc_bp import cosine
    from dynlab.rules import pc, pc_time
    from dynlab.scenarios.cross_pc_law import run_cross_pc_law
    from dynlab.time_residual import TimeResidual

    ds = run_cross_pc_law(tmp_path, units=["rnn"], widths=[8, 32], lengths=[4, 8], seeds=[0], batch_size=4)["law"]
    assert (tmp_path / "pc_law.png").is_file() and bool(ds.converged.all())
    exp = experiment.build({"seed": 0, "model": model_section("rnn", 32), "task": {"name": "adding", "length": 8}})
    model = TimeResidual(exp.model, 8)
    x, y, mask = exp.task.batch(jax.random.key(0), 4, "train")
    cell = dict(unit="rnn", form="T^-alpha", width=32, length=8, seed=0)
    assert float(ds.s_minus_1.sel(**cell)) == pytest.approx(float(pc_time.rescaling(model, x, mask)), rel=1e-5)
    inf = pc_time.infer(model, x, y, mask, optimizer=pc.activity_optimizer("momentum", 0.1), max_steps=2000, rtol=1e-5)
    _, g_pc = pc_time.weight_grads(model, inf.z, x, y, mask)
    g_bp = eqx.filter_grad(pc_time.loss)(model, x, y, mask)
    expected = float(cosine(eqx.filter(g_pc, eqx.is_inexact_array), eqx.filter(g_bp, eqx.is_inexact_array)))
    assert float(ds.cosine.sel(**cell)) == pytest.approx(expected, abs=1e-4)
    slope = float(ds.slope.sel(unit="rnn", form="T^-alpha"))
    print(f"slope of s - 1 against T/N: {slope:.3f} with the depth factor, "
          f"{float(ds.slope.sel(unit='rnn', form='standard')):.3f} without")
    assert abs(slope - 1) < 0.3


def test_cross_pc_law_rejects_a_bad_depth_factor_before_any_work(tmp_path):
    from dynlab.scenarios.cross_pc_law import run_cross_pc_law

    for bad in (dict(alpha=-0.5), dict(alpha=float("inf")), dict(gamma0=0.0)):
        with pytest.raises(ConfigError):
            run_cross_pc_law(tmp_path / "o", units=["rnn"], widths=[8], lengths=[4], seeds=[0], **bad)
    assert not (tmp_path / "o").exists()
