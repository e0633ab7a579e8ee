"""DSA's yardstick (issue 38, item 4): a model's distance from itself under other input draws is
the null, and pairs inside it are reported as not distinguishable. Truths that do not come from
the code: the exact rejection rate of a rank test over exchangeable values (floor(alpha (n+1)) /
(n+1)), the number of relabellings of two groups (a binomial coefficient), and models that are
the same by construction (one model under independent draws) or clearly not (the same network
with its recurrent weights scaled down)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
import xarray as xr

import dynlab
from cli_runner import invoke
from dynlab import experiment, store
from dynlab.analyses.dsa import dsa_models, dsa_summary
from dynlab.analyses.dsa.null import group_permutation, null_level, null_p_value


@pytest.mark.parametrize("n", [10, 19, 20, 40])
def test_rank_test_rejects_exchangeable_values_at_its_exact_rate(n):
    """A distance exchangeable with its n null values is called beyond the null with probability
    floor(0.05 (n + 1)) / (n + 1) exactly (0 below 19 values); and ``d > level`` is ``p <= 0.05``."""
    rng = np.random.default_rng(n)
    reps = 4000
    values = rng.gamma(2.0, 0.1, (reps, n + 1))
    p = np.array([null_p_value(v[0], v[1:]) for v in values])
    beyond = np.array([v[0] > null_level(v[1:]) for v in values])
    np.testing.assert_array_equal(beyond, p <= 0.05)
    exact = np.floor(0.05 * (n + 1)) / (n + 1)
    assert abs(beyond.mean() - exact) <= 4 * np.sqrt(max(exact * (1 - exact), 1e-12) / reps), (beyond.mean(), exact)
    if n < 19:
        assert not beyond.any() and null_level(values[0, 1:]) == np.inf


def test_group_permutation_counts_relabellings_and_two_seeds_never_decide():
    """Two groups far apart: with 2 runs each there are C(4, 2) = 6 relabellings and the observed
    one and its mirror are the most extreme, so p = 2/6, the floor (never <= 0.05); with 4 runs
    each p = 2/C(8, 4) = 1/35; with 2 and 3 runs (no mirror) 1/C(5, 2). Groups whose runs are all
    alike give p = 1."""
    def distances(groups, far):
        x = np.array([far * (g == groups[0]) for g in groups], float)  # two clusters on a line, plus jitter
        x += 0.01 * np.arange(len(groups))
        return np.abs(x[:, None] - x[None, :])

    for size, expected in [(2, 2 / 6), (4, 2 / math.comb(8, 4))]:
        groups = ["aru"] * size + ["gru"] * size
        names, p, floor = group_permutation(distances(groups, 1.0), groups)
        assert names == ["aru", "gru"] and floor[0, 1] == floor[1, 0] == pytest.approx(expected)
        assert p[0, 1] == pytest.approx(expected) and np.isnan(p[0, 0])
    groups = ["aru"] * 2 + ["gru"] * 3  # unequal sizes: no mirror image, 1 / C(5, 2)
    assert group_permutation(distances(groups, 1.0), groups)[1][0, 1] == pytest.approx(1 / 10)
    groups = ["aru"] * 3 + ["gru"] * 3
    _, p, _ = group_permutation(np.ones((6, 6)) - np.eye(6), groups)
    assert p[0, 1] == 1.0


def _rnn(gain: float):
    """A 4-unit tanh RNN with its recurrent weights scaled by ``gain``."""
    m = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(0), hidden=4)
    return eqx.tree_at(lambda m: m.cells[0].w_hh, m, m.cells[0].w_hh * gain)


def test_same_model_under_two_draws_is_inside_the_null_and_a_different_model_is_not():
    """The acceptance, through ``dsa_models`` (every pair and every null in one batched run): 8
    copies of one model and 4 of a model with slower-decaying recurrence (gain 1 against 0.3),
    each under its own independent input draw and with its own 20 null draws. Pairs of one
    model are distances of a model from itself under two draws, exchangeable with its null: at most
    a few of the 34 may be called distinguishable (an exact rank test rejects 1/21 of them); all
    32 pairs of the two models lie beyond the null. The same-model distances are not about 0 (so
    "inside the null" is a finding, not a tautology)."""
    copies, others = 8, 4
    models = [_rnn(1.0)] * copies + [_rnn(0.3)] * others
    m = len(models)
    xs = jax.random.normal(jax.random.key(1), (m, 4, 20, 2))  # the shapes of the CLI test below: one compilation
    null = jax.random.normal(jax.random.key(2), (m, 20, 4, 20, 2))
    ds = dsa_models(models, xs, null_inputs=null, n_delays=2, rank=4, pcs=4, iterations=300, restarts=2)
    kind = np.array([0] * copies + [1] * others)
    same = np.triu(kind[:, None] == kind[None, :], 1)
    yes, d = ds["distinguishable"].values, ds["distance"].values
    assert ds["self_distance"].shape == (m, 10) and bool(ds["self_converged"].all()) and bool(ds["converged"].all())
    assert np.median(d[same]) > 0.03  # a model is not at 0 from itself under another draw
    assert yes[same].sum() <= 3, (yes[same].sum(), ds["p_value"].values[same])
    assert yes[kind[:, None] != kind[None, :]].all()
    assert 0.3 < ds["p_value"].values[same].mean() < 0.7  # p is about uniform on equal models
    assert ds["distance"].attrs["units"] == "rad" and ds["null_level"].attrs["units"] == "rad"
    summary = dsa_summary(ds)
    assert "not distinguishable (inside the null)" in summary and "distinguishable: " in summary


def _run_dir(path: Path, unit: str) -> Path:
    cfg = experiment.default_config(unit, "adding", seed=0)
    cfg["task"]["length"] = 20
    cfg["model"]["hidden"] = 4
    exp = experiment.build(cfg)
    store.claim_run_dir(path)
    store.write_config(path, exp.config)
    store.save_model(path, exp.model)
    return path


def test_cli_a_model_and_its_copy_are_compared_like_the_null_and_the_result_states_its_power(tmp_path):
    """``dynlab analyze dsa`` on a run and a copy of it (issue 48, item 5): each is driven by its own
    input draws, as the null is, so the pair is not at exactly 0 nor at p = 1; the pair's verdict
    and the smallest distance it would call distinguishable at 80% power are printed in words, with
    the settings that would lower it; the dataset holds the labelled null and the per-draw
    distances; a summary of too few null draws says that no pair can be distinguishable; an odd
    count is one error line (exit 2)."""
    a = _run_dir(tmp_path / "a", "rnn")
    shutil.copytree(a, tmp_path / "copy")
    small = ["--trials", "4", "--delays", "2", "--rank", "4", "--pcs", "4", "--iterations", "200", "--restarts", "2", "-q"]
    ran = invoke(["analyze", "dsa", str(a), str(tmp_path / "copy"), "--out", "d.nc", *small], tmp_path)
    assert ran.exit_code == 0, ran.output
    ds = xr.load_dataset(tmp_path / "d.nc")
    first, second = (str(v) for v in ds["run"].values)
    d, p = float(ds["distance"][0, 1]), float(ds["p_value"][0, 1])
    assert d > 0.01 and p < 1, (d, p)
    assert f"{first} vs {second}: {d:.4f} rad, " in ran.output and "at 80% power" in ran.output
    assert "to see smaller ones: --draws 8: " in ran.output and "--trials 8: about" in ran.output
    assert ds["distance_by_draw"].dims == ("run", "run_b", "draw") and ds.sizes["draw"] == 4
    assert (ds["distance_by_draw"].values[0, 1] > 0).all()
    assert ds["self_distance"].dims == ("run", "draw_pair") and ds.sizes["draw_pair"] == 10
    assert ds.attrs["null_draws"] == 20 and ds.attrs["draws"] == 4
    assert (ds["self_distance"].values > 0).all() and np.isfinite(ds["null_level"].values[0, 1])
    assert float(ds["null_mean"][0, 1]) < float(ds["detectable"][0, 1])
    few = dsa_summary(ds.isel(draw_pair=[0], draw=[0]))  # as 1 draw and 2 null draws would give
    assert "2 distances from themselves per pair and 1 draws cannot give p <= 0.05" in few and "raise null_draws to 20" in few
    odd = invoke(["analyze", "dsa", str(a), str(tmp_path / "copy"), "--null-draws", "3", *small], tmp_path)
    assert odd.exit_code == 2 and "null_draws must be an even integer" in odd.output
    assert len(odd.output.strip().splitlines()) == 1 and "Traceback" not in odd.output
