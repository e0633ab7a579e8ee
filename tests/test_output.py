"""What the terminal and the figures show a reader (issue 23, item 5): progress bars that fit 80
columns with a moving ETA, one-line warnings, result summaries, figures without hidden offset
labels and with censored values drawn as bounds."""

import io
import warnings

import click
import matplotlib
import numpy as np
import pytest
import xarray as xr

from cli_runner import invoke
from dynlab.cli import main
from dynlab.cli.options import eta_seconds, progress_bar


def test_eta_counts_down_between_updates_and_leaves_out_the_start():
    # first update at t = 10 s with 0 done (after compiling), the last at t = 20 s with 10 of 30 done: 1 s per unit
    assert eta_seconds(10, 30, at=20.0, first=(0, 10.0), now=20.0) == pytest.approx(20.0)
    assert eta_seconds(10, 30, at=20.0, first=(0, 10.0), now=25.0) == pytest.approx(15.0)  # moving, no new update
    assert eta_seconds(10, 30, at=20.0, first=(0, 10.0), now=60.0) == 0.0  # a late update: 0, not negative
    assert eta_seconds(10, None, at=20.0, first=(0, 10.0), now=20.0) is None  # no total yet
    assert eta_seconds(0, 30, at=10.0, first=(0, 10.0), now=12.0) is None  # nothing done since the first update


def test_progress_bar_fits_80_columns_with_totals_and_whole_times(monkeypatch):
    from rich.console import Console

    out = io.StringIO()
    monkeypatch.setattr("rich.console.Console", lambda **kw: Console(file=out, width=80, force_terminal=False))
    with progress_bar(False, "cross-pc-alignment") as update:
        update(0, 3001, {})
        update(1500, 3001, {"network": "rnn-gamma", "loss": 0.123456, "accuracy": 0.9876, "eval_loss": 1.2345,
                            "eval_accuracy": 0.5, "grad_norm": 12.5})
    lines = out.getvalue().rstrip("\n").splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    bar = lines[0]
    assert "1,500/3,001" in bar and "eta " in bar and "…" not in bar  # the total, and times never cut
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
