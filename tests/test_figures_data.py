"""Figures show what the text says (issue 48, item 6), tested on the figures' data, not pixels:
the artists' coordinates, labels, line styles and markers.

- A sweep's counts of fixed points are of the points near the visited states; the points beyond
  them (a GRU's ~120 saturated points against an LSTM's ~26) have a panel of their own, so the
  near counts keep their scale. The split is counted again from the per-point variables and must
  add up to the count the analysis wrote.
- The values results are read against are drawn where they exist: the chance level on a held-out
  metric, the value a task's theory expects (the flip-flop's 2^bits stable points) on trained
  networks only, never at init.
- No legend entry or title promises what is not drawn: means are "markers" unless a line is drawn.
- Sparse curves (a learning curve of two evaluations) are markers without a line.
"""

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from dynlab import figures

UNITS, SEEDS = ["gru", "lstm"], [0, 1]
NEAR_STABLE, NEAR_SADDLE, BEYOND = {"gru": 8, "lstm": 8}, {"gru": 7, "lstm": 4}, {"gru": 120, "lstm": 26}


def fixed_point_sweep(*, stages: bool = False, references: bool = True) -> xr.Dataset:
    """A merged sweep as ``dynlab run`` writes it for fixed-points on flip-flop GRUs and LSTMs:
    per-point ``beyond_visited``, ``is_fixed``, ``stability`` padded with NaN to the longest cell,
    the counts the analysis wrote, and the reference variables ([`dynlab.scenarios.references`][]).
    ``stages``: the analysis at init too, where each network has 1 stable point and nothing beyond."""
    ds = xr.Dataset({**_fixed_points(NEAR_STABLE, NEAR_SADDLE, BEYOND),
                     "train_eval_sign_accuracy": (CELLS + ("train_eval_step",),
                                                  np.array([[[0.5, 0.99], [0.5, 0.98]], [[0.5, 0.97], [0.5, 0.96]]])),
                     "status": (CELLS, np.full((2, 2), "ok"))},
                    coords={"model.unit": UNITS, "seed": SEEDS, "train_eval_step": [0, 100]},
                    attrs={"analysis": "sweep", "scenario": "ff", "n_ok": 4, "n_cells": 4})
    if references:
        ds["train_eval_sign_accuracy_chance"] = (CELLS, np.full((2, 2), 0.5))
        ds["fixed-points_n_points_stable_expected"] = (CELLS, np.full((2, 2), 8.0), {"source": "2^3, Sussillo & Barak 2013"})
    if stages:
        init = xr.Dataset(_fixed_points({"gru": 1, "lstm": 1}, {"gru": 0, "lstm": 0}, {"gru": 0, "lstm": 0}))
        init = init.assign_coords({"fixed-points_point": [0]})
        trained = ds[list(init.data_vars)].assign_coords({"fixed-points_point": np.arange(ds.sizes["fixed-points_point"])})
        ds = ds.assign(xr.concat([init, trained], dim=xr.DataArray(["init", "trained"], dims="stage"), join="outer"))
    return ds


CELLS = ("model.unit", "seed")


def _fixed_points(near_stable: dict, near_saddle: dict, beyond_visited: dict) -> dict:
    """Per-point and per-cell variables of fixed-points over the cells, every point fixed; the
    points beyond the visited states all "stable" (a GRU's saturated gates)."""
    n_points = max(near_stable[u] + near_saddle[u] + beyond_visited[u] for u in UNITS)
    shape = (len(UNITS), len(SEEDS), n_points)
    beyond, is_fixed, stability = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan, dtype=object)
    for i, unit in enumerate(UNITS):
        near = near_stable[unit] + near_saddle[unit]
        n = near + beyond_visited[unit]
        beyond[i, :, :n] = np.r_[np.zeros(near), np.ones(beyond_visited[unit])]
        is_fixed[i, :, :n] = 1.0
        stability[i, :, :n] = ["stable"] * near_stable[unit] + ["saddle"] * near_saddle[unit] + ["stable"] * beyond_visited[unit]
    points = CELLS + ("fixed-points_point",)
    return {"fixed-points_beyond_visited": (points, beyond), "fixed-points_is_fixed": (points, is_fixed),
            "fixed-points_stability": (points, stability),
            "fixed-points_n_fixed": (CELLS, np.nansum(is_fixed, -1)),
            "fixed-points_n_points_stable": (CELLS, (stability == "stable").sum(-1).astype(float)),
            "fixed-points_n_points_saddle": (CELLS, (stability == "saddle").sum(-1).astype(float)),
            "fixed-points_n_points_beyond_visited": (CELLS, np.nansum(beyond, -1))}


def drawn(fig):
    fig.canvas.draw()
    return fig


def panel(fig, title: str):
    (ax,) = [ax for ax in fig.axes if ax.get_visible() and ax.get_title().replace("\n", " ").startswith(title)]
    return ax


def data_series(ax) -> list:
    """The lines of ``ax`` that draw the cells' means (labelled by series, or the one unlabelled
    series of a sweep without other axes), not the seed dots or the reference lines."""
    return [line for line in ax.lines if line.get_marker() not in (".", "_", "None", "")
            and not line.get_label().startswith(("chance", "expected"))]


def legend_entries_are_drawn(ax) -> None:
    """Every legend entry on ``ax`` names an artist drawn on ``ax`` with data."""
    drawn_labels = {line.get_label() for line in ax.lines if len(line.get_xdata()) and line.get_visible()}
    for legend in [*ax.artists, ax.get_legend()]:
        if isinstance(legend, matplotlib.legend.Legend):
            for text in legend.get_texts():
                assert text.get_text() in drawn_labels, (text.get_text(), drawn_labels)


def test_fixed_point_panels_separate_points_near_the_visited_states_from_those_beyond():
    ds = fixed_point_sweep()
    fig = drawn(figures.plot_dataset(ds))
    titles = [ax.get_title().replace("\n", " ") for ax in fig.axes if ax.get_visible()]
    assert "stable fixed points near the visited states" in titles
    near = panel(fig, "fixed points near the visited states (fixed-points)")
    far = panel(fig, "points beyond the visited states (fixed-points)")
    assert not any(t.startswith("fixed points found") for t in titles)  # the mixed count is not drawn
    # the near counts: 8 stable + 7 saddles (GRU), 8 + 4 (LSTM), on a scale they set, not the 120 beyond
    (series,) = data_series(near)
    np.testing.assert_array_equal(series.get_ydata(), [15, 12])
    assert near.get_ylim()[1] < 20
    (series,) = data_series(far)
    np.testing.assert_array_equal(series.get_ydata(), [120, 26])
    stable = panel(fig, "stable fixed points near the visited states")
    np.testing.assert_array_equal(data_series(stable)[0].get_ydata(), [8, 8])  # the 120 far "stable" points left out
    for ax in fig.axes:
        legend_entries_are_drawn(ax)
    plt.close(fig)


def test_the_split_must_add_up_to_the_count_the_analysis_wrote():
    ds = fixed_point_sweep()
    near, beyond = figures.near_and_beyond(ds, "fixed-points_n_points_stable")
    xr.testing.assert_equal(near + beyond, ds["fixed-points_n_points_stable"])
    assert figures.near_and_beyond(ds, "fixed-points_n_points_beyond_visited") is None
    # a count that the per-point variables do not reproduce is drawn whole, under its own label
    ds["fixed-points_n_fixed"] = ds["fixed-points_n_fixed"] + 1
    assert figures.near_and_beyond(ds, "fixed-points_n_fixed") is None
    labels = [p.label for p in figures._sweep_panels(ds, ["model.unit", "seed"])]
    assert "fixed points found (fixed-points)" in labels and "points beyond the visited states (fixed-points)" not in labels
    # a sweep without per-point variables (written before they were kept) too
    old = ds.drop_vars(["fixed-points_beyond_visited"])
    labels = [p.label for p in figures._sweep_panels(old, ["model.unit", "seed"])]
    assert "stable fixed points" in labels and "fixed points found (fixed-points)" in labels


def test_chance_and_expected_values_are_drawn_on_trained_networks_only():
    ds = fixed_point_sweep(stages=True)
    fig = drawn(figures.plot_dataset(ds))
    accuracy = panel(fig, "held-out sign accuracy after training")
    (chance,) = [line for line in accuracy.lines if line.get_label().startswith("chance")]
    assert chance.get_label() == "chance 0.5" and chance.get_linestyle() == "--"
    assert set(chance.get_ydata()) == {0.5}
    trained = panel(fig, "stable fixed points near the visited states, after training")
    (expected,) = [line for line in trained.lines if line.get_label().startswith("expected")]
    assert set(expected.get_ydata()) == {8} and expected.get_linestyle() == ":"
    assert expected.get_label() == "expected if learned: 8 (2^3, Sussillo & Barak 2013)"
    assert trained.get_ylim()[1] > 8  # the expected value in view
    at_init = panel(fig, "fixed points near the visited states (fixed-points), at init")
    assert "(= stable fixed points near the visited states, at init)" in at_init.get_title().replace("\n", " ")
    assert not [line for line in at_init.lines if line.get_label().startswith(("expected", "chance"))]
    for ax in fig.axes:
        legend_entries_are_drawn(ax)
    plt.close(fig)
    # no references in the dataset: no reference lines, no legend entry for them
    fig = drawn(figures.plot_dataset(fixed_point_sweep(references=False)))
    assert not [line for ax in fig.axes for line in ax.lines if line.get_label().startswith(("expected", "chance"))]
    plt.close(fig)


def test_expected_values_that_differ_across_cells_are_drawn_at_each_cell():
    ds = fixed_point_sweep()
    ds["fixed-points_n_points_stable_expected"] = ds["fixed-points_n_points_stable_expected"].copy(
        data=[[4.0, 4.0], [8.0, 8.0]])
    fig = drawn(figures.plot_dataset(ds))
    stable = panel(fig, "stable fixed points near the visited states")
    (bars,) = [line for line in stable.lines if line.get_label().startswith("expected")]
    assert bars.get_marker() == "_" and bars.get_linestyle() == "None"
    np.testing.assert_array_equal(bars.get_ydata(), [4, 8])  # each unit's own value at its position
    plt.close(fig)


@pytest.mark.parametrize("values, joined", [([8, 16, 32], False), (list(range(2, 24, 2)), True)])
def test_the_title_names_lines_only_where_lines_are_drawn(values, joined):
    """The subtitle said "lines: mean over 2 seeds" over categories, where no line is drawn; a few
    values of a numeric axis are markers too."""
    n = len(values)
    ds = xr.Dataset({"lyapunov_largest_mean": (("model.hidden", "seed"), np.linspace(-1, 0, 2 * n).reshape(n, 2)),
                     "status": (("model.hidden", "seed"), np.full((n, 2), "ok"))},
                    coords={"model.hidden": values, "seed": [0, 1]}, attrs={"analysis": "sweep", "n_ok": 2 * n,
                                                                          "n_cells": 2 * n})
    fig = drawn(figures.plot_dataset(ds))
    (mean,) = data_series(fig.axes[0])
    title = fig._suptitle.get_text()
    if joined:
        assert mean.get_linestyle() == "-" and "lines: mean over 2 seeds" in title
    else:
        assert mean.get_linestyle() == "None" and mean.get_marker() == "o" and "markers: mean over 2 seeds" in title
    plt.close(fig)
    categorical = fixed_point_sweep()
    fig = drawn(figures.plot_dataset(categorical))
    assert "markers: mean over 2 seeds" in fig._suptitle.get_text()
    assert all(line.get_linestyle() == "None" for ax in fig.axes for line in data_series(ax))
    plt.close(fig)


def learning_metrics(evaluations: int, steps: int, chance=0.5) -> xr.Dataset:
    return xr.Dataset({"loss": ("step", np.geomspace(1, 1e-3, steps)),
                       "eval_loss": ("eval_step", np.geomspace(1, 1e-3, evaluations)),
                       "eval_sign_accuracy": ("eval_step", np.linspace(0.5, 1, evaluations))},
                      coords={"step": np.arange(steps), "eval_step": np.linspace(0, steps - 1, evaluations).astype(int)},
                      attrs={"metric": "sign_accuracy", "chance": chance, "task": "FlipFlopTask"})


def test_a_learning_curve_of_two_evaluations_is_markers_not_a_line():
    fig = drawn(figures.learning_curve(learning_metrics(2, 500)))
    ax_loss, ax_metric = fig.axes
    train, held_out = ax_loss.lines
    assert train.get_linestyle() == "-" and len(train.get_xdata()) == 500  # 500 steps: a line
    assert held_out.get_linestyle() == "None" and held_out.get_marker() == "o" and len(held_out.get_xdata()) == 2
    assert ax_loss.get_yscale() == "log"  # where a straight segment read as a smooth decay
    assert ax_metric.lines[0].get_linestyle() == "None"
    assert [line.get_label() for line in ax_metric.lines] == ["held-out", "chance"]
    plt.close(fig)
    fig = drawn(figures.learning_curve(learning_metrics(50, 500)))
    assert fig.axes[0].lines[1].get_linestyle() == "-"  # 50 evaluations: a curve
    plt.close(fig)
    fig = drawn(figures.learning_curve(learning_metrics(2, 3, chance=float("nan"))))  # a chance not known
    assert fig.axes[0].lines[0].get_linestyle() == "None"  # 3 logged steps: markers too
    assert [t.get_text() for t in fig.axes[1].get_legend().get_texts()] == ["held-out"]  # no "chance" not drawn
    plt.close(fig)


def test_the_printed_summary_leaves_the_references_out():
    from dynlab.scenarios.summary import sweep_summary

    text = sweep_summary(fixed_point_sweep())
    assert "expected" not in text and "chance" not in text and "n_points_stable" in text


def test_a_sweep_records_each_cells_chance_and_what_its_task_expects(tmp_path):
    """[`dynlab.scenarios.references`][] over a flip-flop sweep of bits x input: the chance level
    its training recorded, and 2^bits stable points only where the points were taken at zero input
    (held at a constant input, a flip-flop network has fewer; nothing is expected of it)."""
    import tomllib

    from dynlab.scenarios.references import references
    from dynlab.scenarios.spec import parse
    from dynlab.scenarios.sweep import cell_dir

    scenario = parse(tomllib.loads("""
name = "ff-references"
[model]
unit = "gru"
hidden = 4
[task]
name = "flipflop"
[train]
steps = 1
[[analyses]]
name = "fixed-points"
[sweep]
"task.bits" = [2, 3]
seed = [0, 1]
"""))
    inputs = {0: "zero input", 1: "constant input [1, 0, 0] on the input channels"}  # by seed
    for cell in scenario.cells:
        directory = cell_dir(tmp_path, cell)
        directory.mkdir(parents=True)
        xr.Dataset(attrs={"chance": 0.5, "metric": "sign_accuracy"}).to_netcdf(directory / "metrics.nc", engine="h5netcdf")
        xr.Dataset(attrs={"input": inputs[cell.coords["seed"]]}).to_netcdf(directory / "fixed-points.nc",
                                                                           engine="h5netcdf")
    refs = references(scenario, [cell_dir(tmp_path, cell) for cell in scenario.cells])
    assert set(refs) == {"train_eval_sign_accuracy_chance", "fixed-points_n_points_stable_expected"}
    assert (refs["train_eval_sign_accuracy_chance"] == 0.5).all()
    expected = refs["fixed-points_n_points_stable_expected"]
    assert expected.dims == ("task.bits", "seed")
    np.testing.assert_array_equal(expected.values, [[4, np.nan], [8, np.nan]])  # 2^bits at zero input only
    assert "Sussillo & Barak" in expected.attrs["source"]
