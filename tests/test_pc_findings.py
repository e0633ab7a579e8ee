"""The paper's findings at reduced size (full size: `dynlab run pc-width-depth`, `benchmarks/pc_grid.py`).

Linear residual networks, mean-field, α = 1/2, one fixed MNIST batch (synthetic digits when
DYNLAB_DATA has no MNIST), Adam, closed-form PC energy, float32 — as in the paper's Fig. 1/3 but
with fewer widths, depths, seeds and steps. Plus the SP and no-skip contrasts and the nonlinear
(tanh, numerical inference) claim of Fig. 4 / A.1.
"""

import os
import warnings

import numpy as np
import pytest

import dynlab
from dynlab.analyses.pc_bp import compare_pc_bp


@pytest.fixture(scope="module")
def mnist():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dynlab.build("task", "pc-mnist")


@pytest.fixture(scope="module")
def grid(mnist):
    """Widths 8 and 256 (the wide end was 512: 7.5 s of CPU against 2.5). Measured at 256: mean cosine 0.99999 and
    0.99944 at depths 2 and 8 (0.99999766 and 0.99982 at 512), rescaling slope 1.040 (1.023), s - 1 over L/N
    within a factor 2.76 (2.81), loss over energy 1.0040 at width 256, depth 2 (1.0020); the narrow column is
    unchanged (0.985, 0.854)."""
    return compare_pc_bp(mnist, [8, 256], [2, 8], 1, steps=20, param="mf", alpha=0.5)


def spearman(a, b):
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_cosine_is_high_when_wide_and_falls_with_l_over_n(grid):
    cos = grid.mean_cosine
    assert float(cos.sel(width=256, depth=2)) >= 0.99
    assert float(cos.sel(width=256, depth=8)) >= 0.99
    # falls as L/N grows: along both axes and as a rank correlation over all cells
    assert (np.diff(cos.values, axis=0) > 0).all()  # wider is better at every depth
    assert (np.diff(cos.values, axis=1) < 0).all()  # deeper is worse at every width
    assert spearman(grid.L_over_N.values.ravel(), cos.values.ravel()) <= -0.8
    assert float(cos.sel(width=8, depth=8)) < 0.95


def test_rescaling_follows_l_over_n(grid):
    assert 0.8 <= grid.attrs["rescaling_slope"] <= 1.2
    s1 = grid.s_minus_1.mean(("seed", "step"))
    ratio = (s1 / grid.L_over_N).values
    assert ratio.max() / ratio.min() < 4  # Θ(L/N): a bounded prefactor over a 128x range of L/N
    # energy below the loss by exactly the rescaling for... L/F* >= 1, → 1 at large width
    assert (grid.loss_over_energy.values >= 1 - 1e-5).all()
    assert float(grid.loss_over_energy.sel(width=256, depth=2).mean()) < 1.01


def test_sp_cosine_does_not_approach_one(mnist):
    """SP linear MLP, L = 5 (the setting of Figs. A.19/A.20): s − 1 does not vanish, no alignment with width.
    Widths 8 and 256 (the wide end was 512: 4.7 s of CPU against 1.6); measured cosines 0.723 and 0.404
    (0.375 at 512), s - 1 = 4.09 at 256 (5.0 at 512)."""
    sp = compare_pc_bp(mnist, [8, 256], [5], 1, steps=20, param="sp", residual=False)
    cos_sp = sp.mean_cosine.sel(depth=5).values
    assert cos_sp.max() < 0.9 and cos_sp[1] <= cos_sp[0]
    assert float(sp.s_minus_1.sel(width=256).mean()) > 1.0  # s does not -> 1 with width under SP


@pytest.mark.skipif(not os.environ.get("DYNLAB_DATA"), reason="DYNLAB_DATA is not set: needs the real MNIST batch "
                    "(on the synthetic digits the no-skip/skip gap at N = 64 is only ~0.05)")
def test_no_skips_at_depth_32_align_worse_than_residual_at_small_width(mnist):
    """At L = 32 and N = 64 the MLP (no skips) aligns much worse than the residual network.

    Not the paper's "breaks down at any width" (Fig. A.7): measured over 100 steps the MLP
    recovers with width (0.48, 0.66, 0.93, 0.99 at N = 16, 64, 256, 1024; the same with a fresh
    batch each step). Over 1000 steps at N = 1024 its gradients stay aligned (cosine 0.98–0.997)
    while the loss falls below 1e-6; the mean cosine drops to 0.72 only because from step ~720
    the product of the two gradient norms is below 1e-10 and the public code's convention sets
    the cosine to 0 there (``n_vanishing_gradients``). See the issue report.
    """
    ds = {skips: compare_pc_bp(mnist, [64], [32], 1, steps=20, residual=skips) for skips in (True, False)}
    res, mlp = (float(ds[s].mean_cosine.squeeze()) for s in (True, False))
    assert mlp < 0.8 and mlp < res - 0.1


def test_nonlinear_tanh_residual_aligns_at_width(mnist):
    """Fig. 4 / A.1 claim: with equilibrated activities, tanh residual nets align at N >> L. N = 128, L = 4 (was
    256: 2.9 s of CPU once compiled, against about 1.2): measured cosine 0.9980 at 128 (0.9995 at 256), 0.781 at 8."""
    toy = dynlab.build("task", "pc-toy")
    ds = compare_pc_bp(toy, [8, 128], [4], 1, steps=10, activation="tanh", energy="inference", beta=0.3,
                       inference_steps=1500, rtol=1e-4)
    assert ds.converged.values.all()
    cos = ds.mean_cosine.sel(depth=4).values
    assert cos[1] >= 0.95 and cos[1] > cos[0]


def test_scenario_writes_each_comparison_and_its_verdicts(tmp_path):
    """``dynlab run pc-width-depth`` at toy size: each comparison's dataset is the one compare_pc_bp
    gives directly, and the verdicts are computed from them (slope, widest SP cosine, best deep MLP)."""
    from dynlab.scenarios import spec

    sets = ['params.task="toy"', "params.widths=[4,16]", "params.depths=[2]", "params.sp_widths=[4]",
            "params.sp_depth=2", "params.mlp_widths=[4]", "params.mlp_depths=[3]", "params.seeds=1", "params.steps=2"]
    out = spec.load("pc-width-depth", sets=sets).run(tmp_path)  # the runner judges the program's claims
    toy = dynlab.build("task", "pc-toy")
    direct = compare_pc_bp(toy, [4, 16], [2], 1, steps=2, param="mf", alpha=0.5, residual=True)  # two L/N: a slope
    np.testing.assert_array_equal(out["mf-residual"].cosine.values, direct.cosine.values)
    f = out["findings"]
    assert f.value.values[2] == direct.attrs["rescaling_slope"]
    assert f.value.values[3] == float(out["sp-mlp"].mean_cosine.squeeze())
    assert f.value.values[4] == float(out["mf-mlp"].mean_cosine.squeeze())
    assert np.isnan(f.value.values[0]) and not f.holds.values[0]  # no N >= 512 cells in this grid
    # one seed: no interval; the margin is the value's own distance from the threshold, and the verdict says so
    assert np.isnan(f.ci_low.values).all() and not f.margin_from_interval.values.any()
    assert f.margin.values[3] == pytest.approx(0.9 - f.value.values[3])
    assert "no interval: fewer than 2 seeds" in str(f.verdict.values[3])
    names = {p.name for p in tmp_path.iterdir()}
    assert {"findings.nc", "mf-residual.nc", "sp-mlp.nc", "mf-mlp.nc", "mf-mlp_cosine.png"} <= names


def _comparison(cosine, widths, depths):
    """A compare_pc_bp-like dataset from cosines [width, depth, seed, step] (s - 1 = L/N exactly)."""
    import xarray as xr

    from dynlab.analyses.pc_bp import rescaling_slope

    n_w, n_d, n_seeds, n_steps = cosine.shape
    w, d = np.meshgrid(np.asarray(widths, float), np.asarray(depths, float), indexing="ij")
    dims = ("width", "depth", "seed", "step")
    s1 = np.broadcast_to((d / w)[..., None, None], cosine.shape)
    ds = xr.Dataset({"cosine": (dims, cosine), "s_minus_1": (dims, s1)},
                    coords={"width": np.asarray(widths), "depth": np.asarray(depths), "seed": np.arange(n_seeds),
                            "step": np.arange(n_steps), "L_over_N": (("width", "depth"), d / w)})
    ds["mean_cosine"] = ds.cosine.mean(("seed", "step"), skipna=True)
    ds.attrs["rescaling_slope"] = rescaling_slope(ds)[0]
    return ds


def test_margin_is_the_signed_distance_of_the_interval_from_the_threshold():
    """Each verdict says how far its interval lies from the threshold: moving a bound moves the margin with it,
    and an interval that contains the threshold is reported as straddling it (margin 0)."""
    from dynlab.claims import Estimate, margin, verdict
    from dynlab.analyses.paper_claims.pc_width_depth import claims

    wide, ranks, slope, sp, _ = claims(8)  # >= 0.99; <= -0.8; in [0.8, 1.2]; < 0.9; < 0.9
    assert margin(0.91, 0.95, lower=0.85) == pytest.approx(0.06)
    assert margin(0.88, 0.95, lower=0.85) == pytest.approx(0.03)  # lower bound down 0.03: margin down 0.03
    assert margin(0.80, 0.95, lower=0.85) == 0.0  # straddles
    assert margin(0.70, 0.80, lower=0.85) == pytest.approx(-0.05)  # wholly on the failing side
    assert margin(0.6, 0.7, upper=0.9) == pytest.approx(0.2)
    assert margin(0.6, 0.8, upper=0.9) == pytest.approx(0.1)  # upper bound up 0.1: margin down 0.1
    assert margin(0.95, 1.1, lower=0.8, upper=1.2) == pytest.approx(0.1)  # nearest end of the band
    assert margin(1.25, 1.3, lower=0.8, upper=1.2) == pytest.approx(-0.05)
    assert np.isnan(margin(np.nan, np.nan, lower=0.8))

    outcome, text, m, from_interval = verdict(wide, Estimate(0.995, 0.992, 0.998))
    assert m == pytest.approx(0.002) and from_interval and outcome == "holds"
    assert text == "holds: the 95% CI [0.992, 0.998] lies 0.002 above the threshold 0.99 (0.67 half-widths)"
    outcome, text, m, _ = verdict(wide, Estimate(0.99, 0.985, 0.995))
    assert m == 0 and text.startswith("undecided: the 95% CI [0.985, 0.995] straddles the threshold 0.99")
    outcome, text, m, _ = verdict(ranks, Estimate(-0.7, -0.75, -0.65))
    assert m == pytest.approx(-0.05) and outcome == "does not hold"
    assert text == "does not hold: the 95% CI [-0.75, -0.65] lies 0.05 above the threshold -0.8 (1 half-widths)"
    outcome, text, m, _ = verdict(slope, Estimate(1.0, 0.9, 1.05))
    assert m == pytest.approx(0.1) and "inside the band [0.8, 1.2], 0.1 from its lower end" in text
    outcome, text, m, _ = verdict(slope, Estimate(1.3, 1.25, 1.35))
    assert m == pytest.approx(-0.05) and text.endswith("lies 0.05 above the upper threshold 1.2 (1 half-widths)")
    # one seed: no interval, the margin of the value, and no word
    outcome, text, m, from_interval = verdict(sp, Estimate(0.8, note="fewer than 2 seeds"))
    assert m == pytest.approx(0.1) and not from_interval and "no interval: fewer than 2 seeds" in text
    assert outcome == "undecided"


def test_findings_store_the_seed_interval_and_its_margin(tmp_path):
    """findings.nc: the SP claim's value is a mean over seeds, so its interval is the Student-t interval of the
    per-seed means (the jackknife reduces to it) and its margin is 0.9 minus the upper bound; raising one seed's
    cosine raises the bound and lowers the margin by as much, until the interval straddles 0.9."""
    import xarray as xr

    from dynlab.claims import format_verdicts, margin
    from dynlab.analyses.paper_claims.pc_width_depth import findings
    from dynlab.statistics import t_interval

    rng = np.random.default_rng(0)
    widths, depths = [8, 64, 512], [2, 4, 8]
    w, d = np.meshgrid(widths, depths, indexing="ij")
    res_cos = (1 - 0.02 * d / w)[..., None, None] + 1e-4 * rng.standard_normal((3, 3, 3, 4))
    residual = _comparison(res_cos, widths, depths)
    mlp = _comparison(0.5 + 0.01 * rng.standard_normal((2, 1, 3, 4)), [16, 64], [8])
    ci_high = []
    for top in (0.74, 0.80, 0.95):
        seed_means = np.array([0.70, 0.72, top])
        offset = np.array([-0.1, 0.0])[:, None, None, None]  # the narrower width lower; the widest is the claim's
        sp_cos = np.broadcast_to(seed_means[None, None, :, None], (2, 1, 3, 4)) + offset
        sp = _comparison(np.ascontiguousarray(sp_cos), [8, 512], [5])
        f = findings(residual, sp, mlp)
        row = f.isel(claim=3)
        ci = t_interval(seed_means, population="seeds")
        assert float(row.value) == float(sp.mean_cosine.isel(depth=0)[-1])
        assert bool(row.holds) == (ci.high < 0.9)  # decided by the interval, not by the mean
        np.testing.assert_allclose([float(row.ci_low), float(row.ci_high)], [ci.low, ci.high], rtol=1e-12)
        assert float(row.margin) == pytest.approx(max(0.9 - float(ci.high), 0.0), abs=1e-12)
        ci_high.append(float(ci.high))
        for r in f.claim.values:  # every row: the margin of its own interval and thresholds
            x = f.sel(claim=r)
            assert float(x.margin) == margin(float(x.ci_low), float(x.ci_high), float(x.threshold_low),
                                             float(x.threshold_high))
            assert str(x.verdict.values).startswith(str(x.outcome.values))
            assert bool(x.holds) == (str(x.outcome.values) == "holds")
        assert f.margin_from_interval.values.all() and all("3 seeds" in str(i) for i in f.interval.values)
    assert ci_high[0] < ci_high[1] < 0.9 < ci_high[2]
    assert "straddles the threshold 0.9" in str(f.verdict.values[3]) and float(f.margin.values[3]) == 0
    # claims about the residual grid: wide cells aligned (>= 0.99), a decreasing rank correlation, slope 1
    assert f.holds.values[:3].all() and (f.margin.values[:2] > 0).all()

    f.to_netcdf(tmp_path / "findings.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "findings.nc", engine="h5netcdf") as back:
        np.testing.assert_array_equal(back.margin.values, f.margin.values)
        assert back.margin.attrs["units"] == "units of value" and "straddles" in back.margin.attrs["description"]
        assert "leave-one-seed-out jackknife" in str(back.interval.values[0])
    table = format_verdicts(f, width=160)
    assert all(h in table for h in ("claim", "paper", "dynlab", "verdict"))
    assert "scale" not in table  # no claim here states a scale: the column is left out
    assert "5 claims: 4 holds, 1 undecided" in table and "straddles the threshold 0.9" in table


def test_rank_correlation_interval_covers_the_truth_of_synthetic_grids_and_its_words_are_right():
    """#38 item 6, cut down from benchmarks/coverage_rank.py (1000 grids per case there): synthetic paper-sized
    grids with a known truth, through the claim's statistic and `verdict`. Two cases where the previous
    interval failed: a cosine that is a function of L/N alone (truth exactly -1; the tied L/N made the old
    statistic unable to reach it) and flat noise that biases a rank correlation of noisy means towards 0.
    The new interval covers at >= 0.88 in each (nominal 0.95), words are wrong <= 5%; the old one covered
    below 0.8 in both cases, so the same check fails on it."""
    import pathlib
    import runpy

    bench = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "benchmarks" / "coverage_rank.py"))
    rows = bench["table"](50, seeds=(3,), rng=np.random.default_rng(7),
                          cases=(("hetero", 0.0, 0.05), ("flat", 0.0, 0.3), ("hetero", 0.2, 0.3)))
    for r in rows:
        assert r["coverage"] >= 0.88 and r["wrong"] <= 0.05, r
    assert rows[0]["before"] < 0.8 and rows[1]["before"] < 0.8, rows
    assert rows[0]["undecided"] < 0.2  # and it decides where the grid is clear
