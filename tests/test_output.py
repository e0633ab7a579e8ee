"""What the terminal and the figures show a reader (issue 23, item 5): progress bars that fit 80
columns with the time remaining, one-line warnings, result summaries, figures without hidden offset
labels and with censored values drawn as bounds."""

import io
import warnings

import click
import matplotlib
import numpy as np
import pytest
import xarray as xr
from rich.console import Console  # the class itself, before a test replaces it

from cli_runner import invoke
from dynlab.cli import main
from dynlab.cli.options import progress_bar


def _bar_output(monkeypatch, updates) -> list[str]:
    """The lines the progress bar draws (80 columns, not a terminal: drawn once, at the end) after
    ``updates``: ``(time, done, total, info)``, the clock standing at ``time`` for each."""
    out, now = io.StringIO(), [0.0]
    monkeypatch.setattr("rich.console.Console",
                        lambda **kw: Console(file=out, width=80, force_terminal=False, get_time=lambda: now[0]))
    with progress_bar(False, "cross-pc-alignment") as update:
        for now[0], done, total, info in updates:
            update(done, total, info)
    return out.getvalue().rstrip("\n").splitlines()


def test_time_remaining_leaves_out_the_start(monkeypatch):
    # compiled by t = 10 s (0 done), then 10 units done at t = 20 s and 20 at t = 30 s: the rate is
    # measured between the updates that advanced, 1 unit per s, so 10 s are left of 30 (not 15, from
    # the 30 s since the start; and unknown until two updates have advanced)
    (bar,) = _bar_output(monkeypatch, [(10.0, 0, 30, {}), (20.0, 10, 30, {}), (30.0, 20, 30, {})])
    assert bar.split()[-1] == "0:00:10" and "20/30" in bar, bar
    (bar,) = _bar_output(monkeypatch, [(10.0, 0, 30, {}), (20.0, 10, 30, {})])
    assert bar.split()[-1] == "-:--:--", bar
    (bar,) = _bar_output(monkeypatch, [(10.0, 0, None, {}), (20.0, 10, None, {}), (30.0, 20, None, {})])
    assert bar.split()[-2:] == ["20/?", "0:00:30"], bar  # no total yet: the elapsed time, no time remaining


def test_progress_bar_fits_80_columns_with_totals_and_whole_times(monkeypatch):
    lines = _bar_output(monkeypatch, [(0.0, 0, 3001, {}), (1.0, 1000, 3001, {}), (2.0, 1500, 3001, {
        "network": "rnn-gamma", "loss": 0.123456, "accuracy": 0.9876, "eval_loss": 1.2345, "eval_accuracy": 0.5,
        "grad_norm": 12.5})])
    assert lines and all(len(line) <= 80 for line in lines), lines
    bar = lines[0]
    assert "1500/3001" in bar and bar.split()[-1] == "0:00:04" and "…" not in bar  # the total, and times never cut
    assert any(line.strip().startswith("network rnn-gamma  loss 0.1235") for line in lines[1:])  # info on its own line


def test_warnings_reach_the_terminal_as_one_line(tmp_path):
    @click.command("warn-once")
    def warn_once():
        warnings.warn("first part\n  of a message on two lines", RuntimeWarning)

    main.add_command(warn_once)
    try:
        res = invoke(["warn-once"], tmp_path)
    finally:
        main.commands.pop("warn-once")
    assert res.exit_code == 0 and res.stderr == "warning: first part of a message on two lines\n", res.stderr


def test_shd_fallback_warning_is_short(tmp_path):
    from dynlab.tasks.shd import _load

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _load("auto", 0, 8, str(tmp_path))
    (message,) = [str(w.message) for w in caught]
    assert message.startswith("SHD files not found, using the synthetic") and str(tmp_path) in message
    assert "\n" not in message and len(message.replace(str(tmp_path), "")) < 160  # the directory twice, little else


def test_sweep_summary_over_seeds():
    from dynlab.scenarios.summary import over_seeds, sweep_summary

    assert over_seeds([1.0, 3.0]) == "2 ± 13"  # t(0.975, 1) * 1 = 12.7
    assert over_seeds([0.5]) == "0.5" and over_seeds([np.nan, np.nan]) == "—"
    assert over_seeds([1.0, 2.0], ".2f", censored=[True, False]).startswith("≤1.50")
    hidden, seeds = [16, 32], [0, 1, 2]
    loss = np.array([[[0.9, 0.5, np.nan], [0.8, 0.4, 0.3], [0.7, 0.6, 0.2]],
                     [[0.9, 0.1, 0.1], [0.9, 0.2, 0.2], [0.9, 0.3, np.nan]]])  # last eval step missing in some cells
    merged = xr.Dataset({"train_eval_loss": (("model.hidden", "seed", "train_eval_step"), loss),
                         "lyapunov_largest_mean": (("model.hidden", "seed"), [[-0.4, -0.5, -0.6], [0.1, 0.2, 9.0]]),
                         "status": (("model.hidden", "seed"), [["ok"] * 3, ["ok", "ok", "diverged"]])},
                        coords={"model.hidden": hidden, "seed": seeds, "train_eval_step": [0, 1, 2]})
    text = sweep_summary(merged)
    assert "mean ± 95% CI over 3 seeds" in text and "model.hidden=16" in text and "model.hidden=32" in text
    rows = {line.split("  ")[0]: line for line in text.splitlines()}
    assert over_seeds([0.5, 0.3, 0.2]) in rows["final eval loss"]  # the last finite evaluation of each cell
    assert over_seeds([0.1, 0.2]) in rows["final eval loss"]  # the diverged cell left out
    assert over_seeds([-0.4, -0.5, -0.6]) in rows["lyapunov largest"] and "9" not in rows["lyapunov largest"]


def _drawn(fig):
    fig.canvas.draw()
    return fig


def test_lyapunov_figure_has_no_offset_label():
    """rnn.png of issue 23: exponents ~1e-8 around 0 read as a spectrum from -2 to -6 beside an offset label."""
    from dynlab.analyses.lyapunov import plot_lyapunov

    k = 4
    mean = -1e-8 * np.arange(2, 2 + k)
    running = np.broadcast_to(mean, (2, 1, 5, k)).copy()
    ds = xr.Dataset({"mean": ("exponent", mean), "ci_low": ("exponent", mean - 5e-9), "ci_high": ("exponent", mean + 5e-9),
                     "running": (("realisation", "ic", "time", "exponent"), running)},
                    coords={"exponent": np.arange(1, k + 1), "time": [10, 20, 40, 80, 160]},
                    attrs={"ci_level": 0.95, "ci_population": "5 trajectory stretches", "protocol": "autonomous"})
    fig = _drawn(plot_lyapunov(ds))
    for ax in fig.axes:
        assert ax.yaxis.get_offset_text().get_text() == ""
        low, high = ax.get_ylim()
        assert low < 0 < high and high - low >= 0.0199  # a readable axis around 0, not stretched to the last digit
    matplotlib.pyplot.close(fig)


def test_trw_figure_draws_a_censored_s50_as_a_bound():
    from dynlab.analyses.trw_figures import trw_curves

    scales = 3.0 ** np.arange(4)
    corr = np.array([[0.75, 0.9, 0.97, 1.0], [0.1, 0.3, 0.8, 1.0]])
    ds = xr.Dataset({"correlation_mean": (("layer", "scale"), corr), "correlation_std": (("layer", "scale"), 0 * corr),
                     "s50": ("layer", [1.0, 4.0]), "log3_s50": ("layer", [0.0, np.log(4) / np.log(3)]),
                     "s50_censored": ("layer", [True, False]), "layer_name": ("layer", ["cell0", "cell1"])},
                    coords={"layer": [1, 2], "scale": scales})
    fig = _drawn(trw_curves(ds))
    left, right = fig.axes
    labels = [t.get_text() for t in left.get_legend().get_texts()]
    assert "cell0 (s50 ≤ 3^0, censored)" in labels and any(t.startswith("cell1 (s50 = 3^1.26") for t in labels)
    measured = right.lines[0].get_ydata()
    assert np.isnan(measured[0]) and measured[1] == pytest.approx(np.log(4) / np.log(3))  # not plotted as measured
    bound = right.lines[1]
    assert bound.get_marker() == "v" and list(bound.get_ydata()) == [0.0]
    for ax in (left, right):  # legends below the axes, off the data
        assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0
    matplotlib.pyplot.close(fig)


def _below(ax, legend) -> bool:
    return legend.get_window_extent().y1 <= ax.get_window_extent().y0


def _outside(ax, legend) -> bool:
    box, frame = legend.get_window_extent(), ax.get_window_extent()
    return box.x0 >= frame.x1 or box.y1 <= frame.y0 or box.y0 >= frame.y1 or box.x1 <= frame.x0


def _spectra_dataset(**covariance):
    n, t = 4, [0, 10]
    return xr.Dataset({"weight_eig_real": (("matrix", "weight_eigenvalue"), [[0.5, -0.5, 0.1, 0.0]]),
                       "weight_eig_imag": (("matrix", "weight_eigenvalue"), [[0.0, 0.0, 0.3, -0.3]]),
                       "jacobian_spectral_radius": ("time", [0.9, 0.95]),
                       "jacobian_singular_values": (("time", "jacobian_singular_value"), np.ones((2, n))),
                       **covariance},
                      coords={"matrix": ["layer0.w_hh"], "time": t, "rank": np.arange(1, n + 1)},
                      attrs={"model": "rnn-gamma", "protocol": "task AddingTask"})


def test_spectra_without_a_power_law_fit_draws_the_eigenvalues_and_says_why():
    """g128 of issue 23: an empty covariance panel under a driven protocol, and a warning glued from two messages."""
    from dynlab.analyses.spectra import plot_spectra
    from dynlab.analyses.spectra.model import _eigenvalues_without_fit

    rng = np.random.default_rng(0)
    growing = np.exp(0.05 * np.arange(400))[:, None] * rng.normal(size=8) + 1e-3 * rng.normal(size=(400, 8))
    ev, note = _eigenvalues_without_fit(growing, ValueError("fit_range must be …; got (1, 1) (the default: …)."))
    assert ev.shape == (8,) and ev[0] > 0 and np.all(np.diff(ev) <= 0)
    assert "\n" not in note and "grows without bound" in note and "fixed point" not in note and "fit_range" not in note

    ds = _spectra_dataset(covariance_eigenvalue=("rank", [1e3, 1e-9, 1e-12, 0.0]))
    ds.attrs["covariance_note"] = note
    fig = _drawn(plot_spectra(ds))
    ax_c = fig.axes[2]
    (line,) = ax_c.lines
    assert len(line.get_xdata()) == 3  # the nonzero eigenvalues, drawn
    legend = ax_c.get_legend()
    assert legend.get_title().get_text().replace("\n", " ").startswith("no power-law fit: the activity grows")
    assert all(_below(ax, ax.get_legend()) for ax in fig.axes)  # every legend off the data
    matplotlib.pyplot.close(fig)

    constant = _spectra_dataset()
    constant.attrs["covariance_note"] = "no activity covariance spectrum: the activity is constant (a fixed point) under x"
    fig = _drawn(plot_spectra(constant))
    (text,) = fig.axes[2].texts
    assert text.get_text().startswith("no covariance spectrum:") and "constant" in text.get_text()
    matplotlib.pyplot.close(fig)


def _sweep_dataset():
    hidden, seeds, opt, steps = [8, 16], [0, 1], [0, 1], [0, 20]
    loss = np.arange(16, dtype=float).reshape(2, 2, 2, 2) / 10
    lam = -np.arange(8, dtype=float).reshape(2, 2, 2) / 10
    cells = ("model.hidden", "seed", "opt")
    return xr.Dataset({"train_eval_loss": (cells + ("train_eval_step",), loss),
                       "train_eval_mse": (cells + ("train_eval_step",), loss.copy()),
                       "lyapunov_largest_mean": (cells, lam),
                       "status": (cells, np.full((2, 2, 2), "ok"))},
                      coords={"model.hidden": hidden, "seed": seeds, "opt": opt, "train.lr": ("opt", [3e-3, 1e-3]),
                              "train.warmup": ("opt", [0, 5]), "train_eval_step": steps},
                      attrs={"analysis": "sweep", "scenario": "s1", "n_ok": 8, "n_cells": 8})


def test_sweep_figure_is_labelled_for_a_reader():
    from dynlab import figures
    from dynlab.scenarios.summary import sweep_summary

    ds = _sweep_dataset()
    fig = _drawn(figures.plot_dataset(ds))
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["held-out loss after training (= mse)", "largest Lyapunov exponent λ₁"]
    for ax in axes:
        assert ax.get_xlabel() == "hidden units"  # not "model.hidden", never "seed"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16"]
        assert "_" not in ax.get_ylabel()
    legend = axes[-1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["lr=3e-3, warmup=0", "lr=1e-3, warmup=5"]
    assert _outside(axes[-1], legend)
    mean_line = axes[1].lines[0]  # the mean over seeds, through the seed dots
    np.testing.assert_allclose(mean_line.get_ydata(), lam_mean := (-np.arange(8).reshape(2, 2, 2) / 10).mean(1)[:, 0])
    assert lam_mean.shape == (2,) and "mean over 2 seeds" in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)
    assert "train.lr = 0.003, 0.001 along opt" in sweep_summary(ds)


def test_findings_figure_has_one_row_per_claim():
    from dynlab import figures
    from dynlab.claims import Claim, Estimate, NotTestable, judge

    def untestable(_):
        raise NotTestable("the run lacks it")

    claims = [Claim("a", "A long claim statement that wraps onto more than one line of the figure", "p", "m",
                    lambda d: Estimate(0.7, 0.6, 0.8), lower=0.5),
              Claim("b", "Another claim", "p", "m", lambda d: Estimate(3.0, 2.5, 3.5), upper=2.0),
              Claim("c", "A third claim", "p", "m", untestable)]
    ds = judge(claims, {}, paper="x", scenario="y")
    fig = _drawn(figures.plot_dataset(ds))
    axes = fig.axes
    assert len(axes) == 3
    labels = [ax.yaxis.label for ax in axes]
    assert [lb.get_text().replace("\n", " ") for lb in labels] == [c.statement for c in claims]
    boxes = [lb.get_window_extent() for lb in labels]
    assert all(a.y0 >= b.y1 or b.y0 >= a.y1 for a, b in zip(boxes, boxes[1:]))  # claim names do not overlap
    for ax in axes:  # no line joins one claim's value to another's
        assert all(len(line.get_xdata()) <= 2 for line in ax.lines)
    holds, fails = (ax.texts[-1] for ax in axes[:2])
    assert (holds.get_text(), fails.get_text()) == ("holds", "does not hold")
    assert matplotlib.colors.to_hex(holds.get_color()) != matplotlib.colors.to_hex(fails.get_color())
    assert "not testable here: the run lacks it" in axes[2].texts[0].get_text()
    assert "1 holds, 1 does not hold, 1 not testable here" in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)


def test_seeds_are_replicates_never_an_axis():
    """trw accuracy.nc of issue 23: seed drawn as a continuous axis."""
    import dynlab.scenarios  # noqa: F401  (registers the sith-trw figure)
    from dynlab import figures

    acc = np.linspace(0.1, 1.0, 2 * 3 * 4).reshape(2, 3, 4)
    ds = xr.Dataset({"accuracy": (("network", "seed", "dilation"), acc),
                     "unit_params": ("network", [100, 2000])},
                    coords={"network": ["sithcon", "rnn-generic"], "seed": [0, 1, 2], "dilation": [0, 1, 2, 3]},
                    attrs={"analysis": "sith-trw"})
    fig = _drawn(figures.plot_dataset(ds))
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["3^0", "3^1", "3^2", "3^3"] and "seed" not in ax.get_xlabel()
    assert "mean over 3 seeds" in ax.get_title() and _outside(ax, ax.get_legend())
    matplotlib.pyplot.close(fig)

    ds.attrs["analysis"] = "something-unregistered"
    fig = _drawn(figures.plot_dataset(ds))
    assert all(ax.get_xlabel() != "seed" and ax.get_ylabel() != "seed" for ax in fig.axes)
    assert "mean over 3 seeds" in fig.axes[0].get_title()
    matplotlib.pyplot.close(fig)


def test_pc_bp_title_names_every_length():
    from dynlab.analyses.pc_bp_figures import _title

    ds = xr.Dataset(coords={"width": [8, 16], "length": [2, 8, 32]},
                    attrs={"param": "mf", "task": "AddingTask (T=2, loss mse, chance 0.1667)"})
    assert "AddingTask (T=2, 8, 32, loss mse" in _title(ds)


def test_transfer_runs_say_what_was_frozen_or_isolated(tmp_path):
    from dynlab import figures
    from dynlab.config import dumps
    from dynlab.variants import describe, describe_run

    assert describe({"model": {"unit": "aru"}}) == ""
    iso = {"model": {"unit": "aru", "isolated": True}}
    assert describe_run(iso, str(tmp_path)) == "isolated neurons (W_hh reduced to its diagonal), not retrained"
    (tmp_path / "metrics.nc").write_bytes(b"")
    assert describe_run(iso, str(tmp_path)) == "isolated neurons (W_hh reduced to its diagonal)"
    act = {"model": {"unit": "rnn-gamma"}, "task": {"rotate": 45.0}, "train": {"trainable": ["cells.*.n", "cells.*.s"]}}
    assert describe(act) == "only (n, s) retrained on 45° rotated digits, all else as trained"
    ctl = {"model": {"unit": "aru"}, "train": {"freeze": [f"cells.*.{n}" for n in
                                                          ("w_ag", "w_gg", "b_g", "w_gn", "b_n", "w_gs", "b_s")]}}
    assert describe(ctl).startswith("controller transplanted from a trained ARU and frozen")

    metrics = xr.Dataset({"loss": ("step", [2.3, 2.2]), "eval_loss": ("eval_step", [2.3, 2.2]),
                          "eval_accuracy": ("eval_step", [0.1, 0.2])}, coords={"step": [0, 1], "eval_step": [0, 1]},
                         attrs={"metric": "accuracy", "chance": 0.1, "config": dumps(act),
                                "task": "PermutedSequentialMNIST (split_seed 0, /data/shared/mnist)"})
    fig = figures.learning_curve(metrics)
    title = fig._suptitle.get_text()
    assert title.endswith("\nonly (n, s) retrained on 45° rotated digits, all else as trained") and "/data" not in title
    matplotlib.pyplot.close(fig)

    # perturb of an isolated network: the figure title says it (the dataset attr "variant" comes from run_analysis)
    from dynlab.analyses.perturb import perturbation_curve
    from dynlab.cli.analysis import draw_figure

    ds = xr.Dataset({"accuracy": ("strength", [0.1, 0.1])}, coords={"strength": [0.0, 1.0]},
                    attrs={"kind": "noisy", "metric": "accuracy", "chance": 0.1, "task": "x",
                           "variant": describe_run(iso, str(tmp_path / "none"))})
    seen = {}
    draw_figure(tmp_path / "p.png", lambda d: seen.setdefault("fig", perturbation_curve(d)), ds)
    assert seen["fig"]._suptitle.get_text() == "x\nisolated neurons (W_hh reduced to its diagonal), not retrained"


def test_figures_written_never_keep_an_absolute_path_in_a_title(tmp_path):
    from dynlab import store

    fig, ax = matplotlib.pyplot.subplots()
    ax.set_title("data from /work/shared/data/mnist, 3/9 correct")
    fig.suptitle("AddingTask (T=2)")
    store.write_figure(tmp_path / "f.png", fig)
    assert ax.get_title() == "data from mnist/, 3/9 correct"


def test_elm_budget_checks_the_fit_before_any_training(tmp_path):
    from dynlab.errors import ConfigError
    from dynlab.scenarios.elm_budget import run_elm_budget

    with pytest.raises(ConfigError, match=r"needs at least 4 trained networks .* 1 x 3 x 1 = 3"):
        run_elm_budget(tmp_path, budgets=[8000], d_ms=[2, 5, 10], seeds=[0])
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written
    res = invoke(["run", "elm-budget", "--set", "params.budgets=[8000]", "--set", "params.d_ms=[2,5,10]",
                  "--set", "params.seeds=[0]", "--out", "eb"], tmp_path)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and "at least 4 trained networks" in res.stderr
