"""#34: rules compared on one model. A cell's ``[rule]`` names several rules and ``grad-compare``
takes each rule's gradients of the same model on the same batch; the scenario files
cross-pc-alignment and cross-pc-law are built on it (they reproduced the numbers of the programs
they replaced at the same seeds before those were removed: the commit before the removal ran
the comparison). What stays are properties: a rule against itself, the limit PC -> BPTT as the
equilibrium errors vanish, and every mistake as one line before any work."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest
import xarray as xr

from dynlab import experiment
from dynlab.analyses.grad_compare import grad_compare
from dynlab.time_residual import TimeResidual

from cli_runner import TINY_CELL, invoke


def _cell(width: int, recurrence: str = "plain", length: int = 4) -> dict:
    return {"seed": 0, "model": {"unit": "rnn", "width": width, "recurrence": recurrence},
            "task": {"name": "adding", "length": length},
            "rule": {"name": ["pc-time", "bptt"], "pc-time": {"inference": "lbfgs", "max_steps": 500},
                     "bptt": {"penalties": False}}}


def test_a_rule_compared_with_itself_has_cosine_and_norm_ratio_1():
    from dynlab.rules.bptt import BPTT

    exp = experiment.build(_cell(8), training=False)
    ds = grad_compare(exp.model, {"a": BPTT("mse"), "b": BPTT("mse")}, exp.task, batch_size=4)
    assert float(ds.cosine) == pytest.approx(1.0, abs=1e-6) and float(ds.norm_ratio) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(ds.group_cosine.values, 1.0, atol=1e-5)  # every parameter array too
    np.testing.assert_allclose(ds.group_norm_ratio.values, 1.0, atol=1e-6)
    assert ds.sizes["group"] == len(jax.tree_util.tree_leaves(eqx.filter(exp.model, eqx.is_inexact_array)))


def test_pc_through_time_tends_to_bptt_as_its_equilibrium_errors_vanish():
    r"""The papers' limit: with the depth factor T^-1 and a mean-field read-out the errors scale as
    s - 1 = O(T/N), and as they vanish the PC gradient tends to BPTT's in direction (cos -> 1) and
    in size: on the adding task (one scored output) the energy's output term is half the task's
    mean squared error, so |g_PC| / |g_BPTT| -> 1/2."""
    cells = {n: experiment.build(_cell(n, "time-residual"), training=False) for n in (8, 128)}
    ds = {n: grad_compare(e.model, e.rules, e.task, batch_size=4, s_minus_1=True) for n, e in cells.items()}
    assert all(float(d.inference_converged) == 1 for d in ds.values())
    assert float(ds[128].s_minus_1) < float(ds[8].s_minus_1) / 4  # s - 1 = O(T / N): 16x the width
    assert 1 - float(ds[128].cosine) < (1 - float(ds[8].cosine)) / 4
    assert float(ds[128].cosine) > 0.99
    assert abs(float(ds[128].norm_ratio) - 0.5) < abs(float(ds[8].norm_ratio) - 0.5)
    assert float(ds[128].norm_ratio) == pytest.approx(0.5, abs=0.02)
    # the comparison is of the model the config wraps: the depth factor is that of the task's length
    assert isinstance(cells[8].model, TimeResidual) and cells[8].model.length == 4


def test_an_analysis_of_two_rules_given_one_is_one_line_before_any_work(tmp_path):
    (tmp_path / "s.toml").write_text(f'name = "s"\n{TINY_CELL}[rule]\nname = "bptt"\n'
                                     '[[analyses]]\nname = "grad-compare"\ntask = "train"\n')
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 2 and "analyses.grad-compare compares the cell's rules" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("rule, message", [
    ('name = ["pc-time", "bptt"]', "names 2 rules (pc-time, bptt) and training uses one: choose it with rule.trains"),
    ('name = ["pc-time", "bptt"]\ntrains = "bp"', "rule.trains must be one of the rules named (pc-time, bptt)"),
    ('name = ["pc-time", "bptt"]\ninference = "lbfgs"', "their keys go in [rule.<name>] tables"),
    ('name = ["bptt", "bptt"]', "names two or more different rules"),
    ('name = ["pc-time", "bptt"]\n[rule.bptt]\ninference = "lbfgs"', "rule.bptt"),
    ('name = "bptt"\ntrains = "bptt"', "rule.trains chooses among several rules"),
])
def test_two_rules_where_one_is_asked_is_one_line_and_exit_2(tmp_path, rule, message):
    (tmp_path / "c.toml").write_text(f'{TINY_CELL}[rule]\n{rule}\n')
    r = invoke(["train", "--config", "c.toml", "--out", "run", "-q"], tmp_path)
    assert r.exit_code == 2 and message in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_bad_recurrence_is_one_line(tmp_path):
    for bad, message in (('recurrence = "residual"', "model.recurrence must be one of plain, time-residual"),
                         ('recurrence = "time-residual"\ntime_alpha = -1.0', "model.time_alpha")):
        (tmp_path / "c.toml").write_text(TINY_CELL.replace('hidden = 4\n', f'hidden = 4\n{bad}\n'))
        r = invoke(["train", "--config", "c.toml", "--out", "run", "-q"], tmp_path)
        assert r.exit_code == 2 and message in r.output, r.output


def test_a_cell_with_two_rules_trains_with_the_chosen_one_and_compares_them_at_each_stage(tmp_path):
    """grad-compare at init and trained in a scenario is the analysis of the model built from the
    cell's config and of its trained run directory; the cell trained with ``rule.trains``."""
    from dynlab.scenarios import spec

    rules = ('[rule]\nname = ["pc-time", "bptt"]\ntrains = "bptt"\n[rule.pc-time]\nmax_steps = 20\n'
             '[[analyses]]\nname = "grad-compare"\ntask = "train"\nbatch_size = 4\nstages = ["init", "trained"]\n')
    (tmp_path / "s.toml").write_text(f'name = "s"\n{TINY_CELL}{rules}')
    r = invoke(["run", "s.toml", "--out", "out", "-q"], tmp_path)
    assert r.exit_code == 0, r.output
    cos = xr.load_dataset(tmp_path / "out" / "sweep.nc")["grad-compare_cosine_unconverged"]
    (cell,) = spec.load(str(tmp_path / "s.toml")).cells
    fresh = experiment.build(cell.config, training=False)
    trained = experiment.load_run(tmp_path / "out" / "cells" / cell.key)
    assert trained.config["rule"]["trains"] == "bptt"
    for stage, exp in (("init", fresh), ("trained", trained)):
        direct = grad_compare(exp.model, exp.rules, exp.task, batch_size=4)
        assert float(cos.sel(stage=stage)) == pytest.approx(float(direct.cosine_unconverged), abs=1e-6)
    assert float(cos.sel(stage="init")) != float(cos.sel(stage="trained"))  # training changed the model
