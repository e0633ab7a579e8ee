"""Scenario ``pc-time-law`` checked by properties, not by pinned numbers: the scenario's dataset is
the comparison run directly ([`dynlab.analyses.pc_bp.compare_pc_bptt`][], the same result two ways),
its slope is the log-log fit of that comparison, and its theory column is the closed form
$(T - 1)/N$ (times $\\kappa$ for $\\alpha = 1$, none for other $\\alpha$).

Replaces the toy run's snapshot (``tests/reference/scenarios.json``), which pinned its numbers.
"""

from __future__ import annotations

import numpy as np

from dynlab.analyses.pc_bp import compare_pc_bptt, rescaling_slope
from dynlab.rnn_residual import KAPPA
from dynlab.scenarios import spec

WIDTHS, LENGTHS = [8], [2, 4]


def test_the_law_is_the_comparison_run_directly_with_its_slope_and_closed_form(tmp_path):
    sets = ["params.widths=[8]", "params.lengths=[2,4]", "params.seeds=[0]", "params.steps=2",
            "params.time_alphas=[1.0,0.5]", "params.batch_size=8"]
    law = spec.load("pc-time-law", sets=sets).run(tmp_path)["law"]
    assert list(law.recurrence.values)[0] == "plain" and law.sizes["recurrence"] == 3
    direct = compare_pc_bptt("adding", WIDTHS, LENGTHS, [0], steps=2, param="mf", gamma0=1.0, activation="linear",
                             energy="closed-form", batch_size=8, time_alpha=1.0)
    alpha1 = law.isel(recurrence=1)
    np.testing.assert_array_equal(alpha1.mean_cosine, direct.mean_cosine)
    np.testing.assert_array_equal(alpha1.s_minus_1, direct.s_minus_1.mean(("seed", "step")))
    np.testing.assert_array_equal(alpha1.loss_pc, direct.loss_pc.isel(step=-1).mean("seed"))
    np.testing.assert_array_equal(alpha1.loss_bp, direct.loss_bp.isel(step=-1).mean("seed"))
    assert float(alpha1.slope) == rescaling_slope(direct)[0]
    # the slope is the least-squares line of log(s - 1) on log(T/N), for every recurrence
    t_over_n = (np.asarray(LENGTHS) - 1.0) / WIDTHS[0]
    for r in range(3):
        s1 = law.s_minus_1.isel(recurrence=r).values.ravel()
        x = np.log(np.asarray(LENGTHS, float) / WIDTHS[0])
        np.testing.assert_allclose(float(law.slope[r]), np.polyfit(x, np.log(s1), 1)[0], rtol=1e-6)
    np.testing.assert_allclose(law.s_minus_1_theory.isel(recurrence=0).values.ravel(), t_over_n, rtol=1e-12)
    np.testing.assert_allclose(law.s_minus_1_theory.isel(recurrence=1).values.ravel(), KAPPA * t_over_n, rtol=1e-12)
    assert np.isnan(law.s_minus_1_theory.isel(recurrence=2)).all()
    assert ((law.mean_cosine > -1) & (law.mean_cosine <= 1)).all() and (law.s_minus_1 > 0).all()
    assert (tmp_path / "pc_time_law.nc").is_file() and (tmp_path / "pc_time_law.png").is_file()
