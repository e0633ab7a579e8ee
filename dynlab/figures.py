"""Figures drawn from result datasets (matplotlib figures that need no display).

Core holds only what is generic: the training curves, a sweep's summary, [`generic`][] for any
dataset, the panel helpers that figures of many units side by side share, and
[`plot_dataset`][], which finds a dataset's figure through the registry. An analysis's or a
program's own figure lives beside it and is registered with it (``register(..., figure=...)``).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import xarray as xr


def subplots(nrows: int = 1, ncols: int = 1, **kw):
    """``matplotlib.pyplot.subplots``'s figure and axes, made without pyplot.

    The figure is a plain ``matplotlib.figure.Figure``: pyplot does not hold it (nothing to close,
    it is freed with its last reference), no backend is chosen or changed (a notebook keeps its
    own, ``savefig`` writes files on any machine, no display needed) and matplotlib is imported on
    the first figure, not when dynlab loads its plug-ins (about 0.3 s of every command's start).
    ``kw`` are ``Figure.subplots``'s keywords (``sharex``, ``squeeze``, ``gridspec_kw``, ...); the
    rest go to ``Figure`` (``figsize``, ``layout``, ...), as with pyplot."""
    import inspect

    from matplotlib.figure import Figure

    axes_keys = inspect.signature(Figure.subplots).parameters
    fig = Figure(**{k: v for k, v in kw.items() if k not in axes_keys})
    return fig, fig.subplots(nrows, ncols, **{k: v for k, v in kw.items() if k in axes_keys})


def without_paths(text: str) -> str:
    """``text`` for a figure title: every absolute file-system path replaced by its last folder or
    file name (``"split_seed 0, /data/shared/mnist"`` -> ``"split_seed 0, mnist/"``), which still
    says that real files were read, without a machine's directory layout across the figure."""
    import re

    return re.sub(r"(?<![\w.~])/(?:[^\s,;:()'\"/]+/)*([^\s,;:()'\"/]+)/?", r"\1/", text)


def legend_beside(ax, *, below: bool = False, **kw):
    """The legend of ``ax`` outside the axes (to the right, or ``below``), never on the data.
    The figure keeps room for it under ``layout="constrained"`` or ``tight_layout``."""
    if below:
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=kw.pop("ncol", 2), frameon=False, **kw)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kw)


def with_note(fig, note: str | None):
    """``fig`` with ``note`` (what was frozen, rotated or isolated: [`dynlab.variants.describe`][])
    as a last line of its title; unchanged for an empty note."""
    if not note:
        return fig
    title = fig._suptitle
    if title is not None and title.get_text():
        title.set_text(f"{title.get_text()}\n{without_paths(note)}")
    else:
        fig.suptitle(without_paths(note), fontsize=8)
    if fig.get_layout_engine() is None:  # laid out once by tight_layout: again, with the longer title
        fig.tight_layout()
    return fig


def run_note(metrics: xr.Dataset) -> str:
    """What a training run's config froze, retrained, rotated or isolated ([`dynlab.variants.describe`][]),
    from the config stored with its metrics; ``""`` for an ordinary run."""
    import tomllib

    from dynlab.variants import describe

    try:
        return describe(tomllib.loads(str(metrics.attrs.get("config", ""))))
    except tomllib.TOMLDecodeError:
        return ""


def _spans_decades(*arrays) -> bool:
    """Are the values positive and spread over more than a factor 10 (a log axis then reads best;
    over a narrow range it shows only ``2.3125 x 10^0``-style tick labels)?"""
    import numpy as np

    x = np.concatenate([np.ravel(np.asarray(a, float)) for a in arrays])
    x = x[np.isfinite(x)]
    return x.size > 0 and x.min() > 0 and x.max() > 10 * x.min()


SPARSE = 10
"""A curve of at most this many points is drawn as markers alone: a line through two evaluations
is a straight segment that reads as a smooth decay between them (on a log axis, too), which was
never measured."""


def curve_style(n: int, ms: float = 3) -> dict:
    """The style of a curve of ``n`` points ([`SPARSE`][]): markers alone when sparse, else a line
    with small markers."""
    return {"marker": "o", "ls": "none", "ms": ms + 1} if n <= SPARSE else {"marker": "o", "ls": "-", "ms": ms}


def learning_curve(metrics: xr.Dataset):
    """Training loss per step and held-out metric per evaluation, with the chance level; the title
    says what the run froze or retrained when it is a transfer variant ([`run_note`][]). A curve of
    few points (two evaluations) is drawn as markers alone ([`curve_style`][])."""
    metric = metrics.attrs.get("metric", "loss")
    fig, (ax_loss, ax_metric) = subplots(1, 2, figsize=(10, 3.6))
    train = {"lw": 0.8} if metrics.sizes.get("step", 0) > SPARSE else curve_style(metrics.sizes.get("step", 0), ms=2)
    ax_loss.plot(metrics.step, metrics.loss, label="train (batch)", **train)
    ax_loss.plot(metrics.eval_step, metrics.eval_loss, label="held-out", **curve_style(metrics.sizes["eval_step"]))
    ax_loss.set(xlabel="optimiser step", ylabel="loss", title="loss")
    if _spans_decades(metrics.loss.values, metrics.eval_loss.values):
        ax_loss.set_yscale("log")
    ax_loss.legend()
    ax_metric.plot(metrics.eval_step, metrics[f"eval_{metric}"], label="held-out",
                   **curve_style(metrics.sizes["eval_step"]))
    if math.isfinite(float(metrics.attrs.get("chance", math.nan))):  # a legend names only what is drawn
        ax_metric.axhline(metrics.attrs["chance"], color="grey", ls="--", label="chance")
    ax_metric.set(xlabel="optimiser step", ylabel=metric, title=metric)
    if metric == "mse" and _spans_decades(metrics[f"eval_{metric}"].values):
        ax_metric.set_yscale("log")
    ax_metric.legend()
    fig.suptitle(without_paths(metrics.attrs.get("task", "")), fontsize=9)
    fig.tight_layout()
    return with_note(fig, run_note(metrics))


def generic(ds: xr.Dataset, *, max_panels: int = 6):
    """Each numeric variable in a panel: a line over its one dim, an image over two, else a value.
    A ``seed`` dim holds replicates, never an axis: a line is the mean over seeds with a dot per
    seed, an image or a value the mean (the title says over how many seeds)."""
    import numpy as np

    names = [v for v in ds.data_vars if ds[v].dtype.kind in "fiu"][:max_panels]
    if not names:
        fig, ax = subplots(figsize=(4, 2))
        ax.text(0.5, 0.5, "no numeric variables", ha="center", va="center")
        ax.axis("off")
        return fig
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        da = ds[name].squeeze(drop=True)
        label = f"{name} ({da.attrs['units']})" if da.attrs.get("units") else name
        seeds = da.sizes.get("seed", 1) if "seed" in da.dims else 0
        replicates = da
        if seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                da = da.mean("seed", keep_attrs=True)
            label += f", mean over {seeds} seed{'s' if seeds != 1 else ''}"
        if da.ndim == 1:
            dim = da.dims[0]
            coord = da[dim].values
            categorical = coord.dtype.kind not in "iuf"
            x = np.arange(coord.size) if categorical else coord
            ax.plot(x, da.values, "o" if categorical else "o-", ms=4 if categorical else 3)  # no line joins categories
            if seeds > 1:
                per_seed = replicates.transpose(dim, "seed").values
                ax.plot(np.repeat(x, seeds), per_seed.ravel(), ".", ms=4, alpha=0.4, color="C0")
            if categorical:
                ax.set_xticks(x, [str(c) for c in coord], rotation=30, ha="right", fontsize=8)
            ax.set(xlabel=dim, ylabel=name)
            if np.nanmin(da.values) > 0 and np.nanmax(da.values) / max(np.nanmin(da.values), 1e-300) > 100:
                ax.set_yscale("log")
        elif da.ndim == 2:  # categories (units, variants, a model's parameter arrays) at integer positions, named below
            categories = {d: da[d].values for d in da.dims if d in da.coords and da[d].dtype.kind not in "iuf"}
            da.assign_coords({d: np.arange(len(v)) for d, v in categories.items()}).plot(ax=ax, cbar_kwargs={"label": name})
            for dim, setter in zip(da.dims, (ax.set_yticks, ax.set_xticks)):
                if dim in categories:  # names (units, variants) at integer positions
                    setter(np.arange(da.sizes[dim]), [str(c) for c in categories[dim]], fontsize=8)
        elif da.ndim == 0:
            ax.text(0.5, 0.5, f"{float(da):.5g}", ha="center", va="center", fontsize=14)
            ax.axis("off")
        else:
            da.mean([d for d in da.dims[2:]]).plot(ax=ax)
        ax.set_title(label, fontsize=9)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


KEY_LABELS = {
    "model.hidden": "hidden units", "model.layers": "layers", "model.depth": "depth", "model.width": "width",
    "train.lr": "lr", "train.warmup": "warmup", "train.steps": "training steps", "train.batch_size": "batch size",
    "task.length": "sequence length T", "seed": "seed", "rule.name": "rule", "model.unit": "unit",
}
"""Readable names of common config keys on a sweep figure's axes and legends; any other key is
shown by its last part (``"model.n_g"`` -> ``"n g"``)."""


def key_label(key: str) -> str:
    """A config key as a reader's label: ``"model.hidden"`` -> ``"hidden units"``."""
    return KEY_LABELS.get(key, key.rsplit(".", 1)[-1].replace("_", " "))


def format_value(value) -> str:
    """A swept value, short: ``8``, ``0.5``, ``3e-3`` (small and large floats in powers of ten)."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, (int, np.integer)) or float(value).is_integer() and abs(value) < 1e5:
        return str(int(value))
    v = float(value)
    if v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e5):
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return f"{v:.4g}"


def axis_label(ds: xr.Dataset, dim: str) -> str:
    """The label of sweep axis ``dim``: ``"hidden units"``; a zipped axis by its keys, ``"lr, warmup"``."""
    zipped = [str(c) for c in ds.coords if c != dim and ds[c].dims == (dim,)]
    return ", ".join(key_label(c) for c in zipped) if zipped else key_label(dim)


def axis_value_label(ds: xr.Dataset, dim: str, index: int, *, name: bool = True) -> str:
    """The label of position ``index`` along the sweep axis ``dim``: ``"hidden units=8"``, or for a
    zipped axis (``[sweep.zip.opt]``, its keys coordinates along it) the values it stands for,
    ``"lr=3e-3, warmup=0"``, never the bare position ``"opt=0"``."""
    zipped = [str(c) for c in ds.coords if c != dim and ds[c].dims == (dim,)]
    if zipped:
        return ", ".join(f"{key_label(c)}={format_value(_element(ds[c], index))}" for c in zipped)
    value = format_value(_element(ds[dim], index))
    return f"{key_label(dim)}={value}" if name else value


def _element(da: xr.DataArray, index: int):
    """Element ``index`` of a 1-d coordinate as a Python value, whatever its dtype (numbers, numpy
    strings, or the plain ``str`` objects of a string axis merged in memory)."""
    value = da.values[index]
    return value.item() if hasattr(value, "item") else value


def last_finite(var: xr.DataArray, dim: str) -> xr.DataArray:
    """The last finite value along ``dim`` (the last evaluation each cell of a sweep reached), NaN
    if none; also the final numbers of `dynlab.scenarios.summary`."""
    import numpy as np

    x = np.moveaxis(np.asarray(var.values, float), var.get_axis_num(dim), -1)
    finite = np.isfinite(x)
    idx = np.where(finite.any(-1), x.shape[-1] - 1 - np.argmax(finite[..., ::-1], axis=-1), 0)
    last = np.where(finite.any(-1), np.take_along_axis(x, idx[..., None], -1)[..., 0], np.nan)
    return xr.DataArray(last, dims=[d for d in var.dims if d != dim], coords={d: var[d] for d in var.dims if d != dim})


def non_finite_variables(ds: xr.Dataset) -> list[str]:
    """Names of the float data variables of ``ds`` that hold NaN or inf (a figure that fails on
    them says so, [`dynlab.errors.NonFiniteResult`][])."""
    import numpy as np

    return [str(k) for k, v in ds.data_vars.items() if v.dtype.kind in "fc" and not np.isfinite(v.values).all()]


def result_ok(ds: xr.Dataset, name: str):
    """Where variable ``name`` of a merged sweep holds a good result: its result's
    ``result_status`` is ``ok`` (``train_*``: the training, ``<analysis>_*``: that analysis), so
    that a failed analysis hides neither the cell's training nor its other analyses; in a sweep
    without per-result status, where the cell's ``status`` is ``ok``."""
    if "result_status" in ds:
        results = [str(r) for r in ds["result"].values]
        stages = [str(x) for x in ds["stage"].values] if "stage" in ds.coords else []
        # the analyses by name: one run only at stages other than trained has no result of its bare name
        analyses = {next((r[: -len(x) - 1] for x in stages if r.endswith(f"-{x}")), r) for r in results}
        owner = next((r for r in sorted(analyses, key=len, reverse=True) if name.startswith(f"{r}_")), None)
        if owner is not None and name in ds and "stage" in ds[name].dims:  # one result per stage
            stages = [str(x) for x in ds["stage"].values]
            per_stage = [owner if x == "trained" else f"{owner}-{x}" for x in stages]
            ok = [ds["result_status"].sel(result=r, drop=True) == "ok" if r in results else
                  xr.zeros_like(ds["status"], dtype=bool) for r in per_stage]
            return xr.concat(ok, dim="stage").assign_coords(stage=ds["stage"].values)
        if owner is not None:
            return ds["result_status"].sel(result=owner, drop=True) == "ok"
    return ds["status"] == "ok" if "status" in ds else True


CHANCE, EXPECTED = "_chance", "_expected"
"""Suffixes of a sweep's reference variables ([`dynlab.scenarios.references`][]): ``V_chance``, the
chance level of the held-out metric ``V``, and ``V_expected``, the value of ``V`` a task's theory
expects of a network that learned it. Drawn as lines on ``V``'s panel, never as panels of their own."""

REFERENCE_SUFFIXES = (CHANCE, EXPECTED)


class Panel(NamedTuple):
    """One panel of a sweep's figure: its ``label``, its ``values`` over the cell dims, the sweep
    variables it shows (``variables``: the ones whose reference lines it draws), whether the
    values are a ``count`` (whole numbers from 0) and the ``stage`` they are of (``None``: the
    analysis ran once, after training)."""

    label: str
    values: xr.DataArray
    variables: tuple[str, ...] = ()
    count: bool = False
    stage: str | None = None


def near_and_beyond(ds: xr.Dataset, name: str) -> tuple[xr.DataArray, xr.DataArray] | None:
    """A count of points of a merged sweep (``A_n_fixed``, ``A_n_points_<class>``) split by where
    the points lie: ``(near, beyond)`` the visited states, counted again from the per-point
    variables the cells' results carry (``A_beyond_visited``: fixed-points marks the points far
    outside the visited states' range, a GRU's saturated gates; ``A_is_fixed``, ``A_stability``).
    ``None`` where the sweep lacks them, or where near + beyond is not the count itself."""
    import numpy as np

    if name.endswith("_n_fixed"):
        analysis, selected = name[: -len("_n_fixed")], None
    elif "_n_points_" in name and not name.endswith("_beyond_visited"):
        analysis, selected = name.split("_n_points_", 1)
    else:
        return None
    beyond_name = f"{analysis}_beyond_visited"
    per_point = f"{analysis}_is_fixed" if selected is None else f"{analysis}_stability"
    if beyond_name not in ds or per_point not in ds:
        return None
    count = ds[name]
    point_dims = [d for d in ds[beyond_name].dims if d not in count.dims]
    if len(point_dims) != 1 or set(ds[beyond_name].dims) != set(ds[per_point].dims):
        return None
    beyond = np.asarray(ds[beyond_name].transpose(*count.dims, *point_dims).values, float)  # NaN: padding
    kind = ds[per_point].transpose(*count.dims, *point_dims).values
    chosen = np.asarray(kind, float) == 1 if selected is None else np.asarray(kind, object) == selected
    near = (chosen & (beyond == 0)).sum(-1).astype(float)
    far = (chosen & (beyond == 1)).sum(-1).astype(float)
    total = np.asarray(count.values, float)
    near[~np.isfinite(total)] = far[~np.isfinite(total)] = np.nan
    if not np.allclose(near + far, total, equal_nan=True):
        return None
    return count.copy(data=near), count.copy(data=far)


def _sweep_panels(ds: xr.Dataset, cell_dims: list[str]) -> list[Panel]:
    """The panels of a sweep's figure ([`Panel`][]), one per headline number: every held-out
    training curve's last finite value, every analysis's largest-value mean, the number of fixed
    points, the cosine of a cell's rules' gradients, and the variables each analysis registered as
    its ``headline`` ([`dynlab.registry.Entry`][]). Counts of points are of those near the visited
    states, and the points beyond them get a panel of their own ([`near_and_beyond`][]: a GRU's
    ~100 saturated points beside an LSTM's few would otherwise read as a difference in what they
    compute). A variable equal to one already shown (``eval_loss`` and ``eval_mse`` under an MSE
    loss) is named beside it, not drawn twice."""
    import numpy as np

    from dynlab import registry

    headline = {f"{e.name}_{v}": label for e in registry.entries("analysis") for v, label in e.headline}
    candidates: list[tuple[str, str, xr.DataArray, bool]] = []
    for v in ds.data_vars:
        name, da = str(v), ds[v]
        if name.endswith(REFERENCE_SUFFIXES):
            continue
        extra = [d for d in da.dims if d not in cell_dims]
        split = near_and_beyond(ds, name) if extra in ([], ["stage"]) else None
        count = False
        if name in headline and extra in ([], ["stage"]):
            label, count = headline[name], "_n_" in name
            if split is not None:
                label, da = f"{label} near the visited states", split[0]
        elif name.startswith("train_eval_") and len(extra) == 1:
            label = f"held-out {name[len('train_eval_'):].replace('_', ' ')} after training"
            da = last_finite(da, extra[0])
        elif name.endswith("_largest_mean") and extra in ([], ["stage"]):
            analysis = name[: -len("_largest_mean")]
            label = "largest Lyapunov exponent λ₁" if analysis == "lyapunov" else f"largest {analysis.replace('_', ' ')}"
        elif name.endswith("_n_fixed") and extra in ([], ["stage"]):
            analysis, count = name[: -len("_n_fixed")], True
            label = f"fixed points found ({analysis})"
            if split is not None:
                label, da = f"fixed points near the visited states ({analysis})", split[0]
                beyond = ds.get(f"{analysis}_n_points_beyond_visited")
                if beyond is not None and float(np.nan_to_num(beyond.values).max(initial=0)) > 0:
                    candidates.append((label, name, da, count))
                    name, da, label = beyond.name, beyond, f"points beyond the visited states ({analysis})"
        elif name.endswith("_cosine") and extra in ([], ["stage"]):
            label = f"cosine of the rules' gradients ({name[: -len('_cosine')]})"
        else:
            continue
        candidates.append((label, name, da, count))
    panels: list[Panel] = []
    for label, name, da, count in candidates:
        ok = result_ok(ds, name)
        stages = da["stage"].values if "stage" in da.dims else [None]
        for stage in stages:  # an analysis at several stages: a panel per stage
            values = da if stage is None else da.sel(stage=stage, drop=True)
            values = values.where(ok.sel(stage=stage, drop=True) if "stage" in getattr(ok, "dims", ()) else ok)
            text = label if stage is None else f"{label}, {'after training' if stage == 'trained' else f'at {stage}'}"
            for i, shown in enumerate(panels):
                same = shown.values.shape == values.shape and np.allclose(shown.values.values, values.values,
                                                                           equal_nan=True)
                if same:
                    what = text.split(" ")[1] if text.startswith("held-out") else text
                    other = shown.label
                    panels[i] = shown._replace(label=f"{other} (= {what})" if "(=" not in other
                                               else other[:-1] + f", {what})",
                                               variables=(*shown.variables, name),  # its references drawn too
                                               stage=shown.stage if shown.stage in (None, "trained") else stage)
                    break
            else:
                panels.append(Panel(text, values, (name,), count, None if stage is None else str(stage)))
    return panels


REFERENCE_STYLES = {CHANCE: {"color": "0.45", "ls": "--", "lw": 1.0}, EXPECTED: {"color": "k", "ls": ":", "lw": 1.4}}
"""How a sweep panel draws its variable's chance level and its expected value ([`REFERENCE_SUFFIXES`][])."""


def _reference_label(suffix: str, values, source: str = "") -> str:
    """``"chance 0.5"``, ``"expected if learned: 8 (2^3, Sussillo & Barak 2013)"``; values that
    differ across cells: ``"chance (per cell)"``."""
    what = "chance" if suffix == CHANCE else "expected if learned:"
    text = f"{what} {format_value(values[0])}" if len(values) == 1 else f"{what} (per cell)".replace(": (", " (")
    return f"{text} ({source})" if source and len(values) == 1 else text


def _draw_references(ax, ds: xr.Dataset, panel: Panel, xpos, x: str | None, line_dims, combos) -> list[float]:
    """The reference lines of ``panel``'s variables ([`REFERENCE_SUFFIXES`][]) on ``ax``, of
    trained networks only (a panel at another stage has none): one horizontal line where every
    cell shares the value, else a short bar at each cell's position. Returns the values drawn."""
    import numpy as np

    if panel.stage not in (None, "trained"):
        return []
    drawn: list[float] = []
    for suffix, style in REFERENCE_STYLES.items():
        ref = next((ds[v + suffix] for v in panel.variables if v + suffix in ds), None)
        if ref is None:
            continue
        finite = np.asarray(ref.values, float)
        unique = np.unique(finite[np.isfinite(finite)])
        if unique.size == 0:
            continue
        label = _reference_label(suffix, unique.tolist(), str(ref.attrs.get("source", "")))
        if unique.size == 1:
            ax.axhline(unique[0], label=label, zorder=1, **style)
        else:  # values that differ across cells (a swept task size): a bar at each cell's position
            for k, combo in enumerate(combos):
                sel = ref.isel(dict(zip(line_dims, combo)))
                per_x = np.asarray(sel.transpose(*([x] if x else []), ...).values, float).reshape(xpos.size, -1)
                ax.plot(xpos, np.nanmax(per_x, axis=1), marker="_", ms=18, mew=style["lw"] + 0.6, ls="none",
                        color=style["color"], label=label if k == 0 else None, zorder=1)
        drawn += unique.tolist()
    return drawn


def sweep(ds: xr.Dataset):
    """The headline numbers of a sweep's cells ([`Panel`][]): one panel per number (no duplicates),
    the first numeric sweep axis along x, the other axes as series labelled by what they stand for
    (a zipped axis by its values), seeds as replicates (one dot per seed, a larger marker at their
    mean, joined by a line only along a numeric axis of more than [`SPARSE`][] values). Each panel
    of trained networks draws its variable's chance level and the value its task expects, where the
    sweep has them ([`REFERENCE_SUFFIXES`][]); counts of points are of those near the visited
    states, with the points beyond them in a panel of their own ([`near_and_beyond`][]). The
    legends and the title name only what is drawn."""
    import itertools
    import textwrap

    import numpy as np
    from matplotlib.ticker import MaxNLocator

    cell_dims = [str(d) for d in ds["status"].dims] if "status" in ds else []
    panels = _sweep_panels(ds, cell_dims)
    if not panels or not cell_dims:
        return generic(ds)
    axes_dims = [d for d in cell_dims if d != "seed"]

    def plain_numeric(d):
        return ds[d].dtype.kind in "iuf" and not any(ds[c].dims == (d,) for c in ds.coords if c != d)

    x = next((d for d in axes_dims if plain_numeric(d)), axes_dims[0] if axes_dims else None)
    line_dims = [d for d in axes_dims if d != x]
    combos = list(itertools.product(*(range(ds.sizes[d]) for d in line_dims)))
    n_seeds = ds.sizes["seed"] if "seed" in cell_dims else 1
    if x is None:
        xpos, xticks = np.zeros(1), ["all cells"]
    elif plain_numeric(x):
        xpos, xticks = ds[x].values.astype(float), None
    else:
        xpos = np.arange(ds.sizes[x], dtype=float)
        xticks = [axis_value_label(ds, x, i, name=False) for i in range(ds.sizes[x])]
    joined = xticks is None and xpos.size > SPARSE  # no line joins categories, nor a few values of an axis
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axs = subplots(nrows, ncols, figsize=(4.2 * ncols + 2.2, 3.4 * nrows + 0.2), squeeze=False,
                            layout="constrained")
    for ax in axs.ravel()[len(panels):]:
        ax.set_visible(False)
    for ax, panel in zip(axs.ravel(), panels):
        da = panel.values
        for k, combo in enumerate(combos):
            sel = da.isel(dict(zip(line_dims, combo)))
            values = np.asarray(sel.transpose(*([x] if x else []), *(["seed"] if "seed" in sel.dims else [])).values,
                                float).reshape(xpos.size, -1)
            colour, marker = f"C{k % 10}", "osD^v"[k // 10 % 5]  # more than 10 series: another marker
            name = ", ".join(axis_value_label(ds, d, i) for d, i in zip(line_dims, combo)) or None
            with warnings.catch_warnings():  # a column of cells that are all not ok: NaN, silently
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(values, axis=1)
            ax.plot(xpos, mean, marker=marker, ls="-" if joined else "none", ms=4 if joined else 6, color=colour,
                    label=name, zorder=3)
            if values.shape[1] > 1:
                ax.plot(np.repeat(xpos, values.shape[1]), values.ravel(), ".", ms=5, alpha=0.35, color=colour, zorder=2)
        references = _draw_references(ax, ds, panel, xpos, x, line_dims, combos)
        if xticks is not None:
            ax.set_xticks(xpos, xticks, fontsize=8, rotation=20 if max(len(t) for t in xticks) > 12 else 0)
        else:
            ax.set_xticks(xpos)
        ax.set_xlabel(axis_label(ds, x) if x else "")
        if panel.count:  # a count: whole numbers from 0, its expected value in view
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            top = float(np.nanmax(np.append(np.asarray(da.values, float).ravel(), [0.0, *references])))
            ax.set_ylim(bottom=0, top=max(1.0, top) * 1.15)
        if references:  # the panel's own key: its reference lines
            lines = [h for h in ax.get_lines() if h.get_label().startswith(("chance", "expected"))]
            ax.legend(handles=lines, fontsize=7, loc="best", framealpha=0.8)
        ax.set_ylabel(textwrap.fill(panel.label.split(", ")[0].replace(" after training", "").split(" (")[0], 30,
                                    break_on_hyphens=False),
                      fontsize=9)
        ax.set_title(textwrap.fill(panel.label, 48, break_on_hyphens=False), fontsize=9)
    if line_dims and len(combos) <= 12:
        last = axs.ravel()[len(panels) - 1]
        if last.get_legend() is not None:  # its reference lines' key stays beside the legend of series
            last.add_artist(last.get_legend())
        legend_beside(last, fontsize=7, handles=[h for h in last.get_lines() if h.get_label() in
                                                 {", ".join(axis_value_label(ds, d, i) for d, i in zip(line_dims, c))
                                                  for c in combos}])
    mean = "lines" if joined else "markers"
    seeds = f"{mean}: mean over {n_seeds} seeds, dots: each seed" if n_seeds > 1 else "one seed per cell"
    title = f"sweep {ds.attrs.get('scenario', '')}: {ds.attrs.get('n_ok', '?')}/{ds.attrs.get('n_cells', '?')} cells ok; {seeds}"
    if ds.attrs.get("description"):
        title = "\n".join([*textwrap.wrap(without_paths(str(ds.attrs["description"])), 40 * ncols), title])
    fig.suptitle(title, fontsize=9)
    return fig


VERDICT_COLOURS = {"holds": "tab:green", "does not hold": "tab:red", "undecided": "tab:orange", "not testable here": "0.55"}
"""The colour of each verdict class on a findings figure."""


def findings(ds: xr.Dataset):
    """A paper's claims ([`dynlab.claims.judge`][]), one row per claim: the claim in words on the
    left, dynlab's estimate (dot; bar: its interval) on the claim's own axis, the threshold (dashed)
    and the side where the claim holds (shaded), coloured by verdict; a claim the run cannot test
    says why in its row. Rows do not share an axis: each claim has its own statistic and units;
    each axis stays within the quantity's range (``range_low``, ``range_high``: an accuracy in
    [0, 1], a difference of two in [-1, 1]). An interval open on one side (replicates of a count
    that all agree) is drawn to the axis's end."""
    import math
    import textwrap

    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    n = ds.sizes.get("claim", 0)
    if n == 0:
        return generic(ds)
    several_scenarios = "scenario" in ds and len({str(v) for v in ds.scenario.values}) > 1
    fig, axs = subplots(n, 1, figsize=(10, 0.95 * n + 1.3), squeeze=False, layout="constrained")
    for i, ax in enumerate(axs[:, 0]):
        row = ds.isel(claim=i)
        outcome = str(row.outcome.values)
        colour = VERDICT_COLOURS.get(outcome, "0.3")
        statement = str(row.statement.values) if "statement" in row else str(row.claim.values)
        where = f" [{row.scenario.values}]" if several_scenarios else ""
        ax.set_ylabel(textwrap.fill(statement + where, 46), rotation=0, ha="right", va="center", fontsize=8,
                      labelpad=8)
        ax.set_yticks([])
        ax.set_ylim(-1, 1)
        ax.tick_params(axis="x", labelsize=7)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        value = float(row.value)
        low, high = float(row.ci_low), float(row.ci_high)
        lower, upper = float(row.threshold_low), float(row.threshold_high)
        if not math.isfinite(value):
            reason = str(row.verdict.values).split(": ", 1)[-1]
            ax.text(0.0, 0.5, textwrap.fill(f"{outcome}: {reason}", 95), transform=ax.transAxes, ha="left",
                    va="center", fontsize=7, color=colour)
            ax.set_xticks([])
            ax.spines["bottom"].set_visible(False)
            continue
        points = [v for v in (value, low, high, lower, upper) if math.isfinite(v)]
        lo, hi = min(points), max(points)
        pad = 0.15 * (hi - lo) if hi > lo else 0.5 * max(abs(hi), 1.0)
        x0, x1 = lo - pad, hi + pad
        # the axis stays in the quantity's range (an accuracy difference in [-1, 1]), with 2% of it
        # beyond each end so that a dot on the end shows whole
        start = float(row.range_low) if "range_low" in row else -math.inf
        end = float(row.range_high) if "range_high" in row else math.inf
        edge = 0.02 * ((end - start) if math.isfinite(end - start) else (x1 - start if math.isfinite(start)
                                                                          else end - x0))
        x0 = max(x0, start - edge) if math.isfinite(start) else x0
        x1 = min(x1, end + edge) if math.isfinite(end) else x1
        ax.axvspan(max(lower, x0) if math.isfinite(lower) else x0, min(upper, x1) if math.isfinite(upper) else x1,
                   color="tab:green", alpha=0.08, lw=0)
        for t in (lower, upper):
            if math.isfinite(t):
                ax.axvline(t, color="0.3", ls="--", lw=1)
        if not (math.isnan(low) or math.isnan(high)):
            shown = max(low, x0), min(high, x1)  # an infinite end: to the axis's end
            ax.errorbar([value], [0], xerr=[[value - shown[0]], [shown[1] - value]], fmt="o", color=colour, ms=7,
                        capsize=4, lw=1.6)
        else:
            ax.plot([value], [0], "o", color=colour, ms=7)
        ax.set_xlim(x0, x1)
        ax.text(1.01, 0.0, outcome, transform=ax.get_yaxis_transform(), ha="left", va="center", fontsize=8,
                color=colour, fontweight="bold")
    counts = {o: int((ds.outcome == o).sum()) for o in VERDICT_COLOURS}
    what = ", ".join(f"{ds.attrs[k]}" for k in ("paper", "scenario", "scenarios") if ds.attrs.get(k))
    preset = f", preset {ds.attrs['preset']}" if ds.attrs.get("preset") else ""
    fig.suptitle(f"claims of {what or 'the run'}{preset}: " + ", ".join(f"{c} {o}" for o, c in counts.items() if c),
                 fontsize=9)
    handles = [Line2D([], [], marker="o", ls="", color="0.3", label="dynlab's estimate (bar: its interval)"),
               Line2D([], [], ls="--", color="0.3", label="threshold"),
               Patch(color="tab:green", alpha=0.15, label="where the claim holds"),
               *(Patch(color=c, label=o) for o, c in VERDICT_COLOURS.items())]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return fig


def panel_grid(n: int, size: tuple[float, float] = (3.0, 2.5)):
    """A figure of ``n`` small panels, at most 4 per row (unused cells hidden): ``(fig, axes)``, axes flat."""
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def label_panel(ax, title: str, xlabel: str, ylabel: str) -> None:
    """Title and axis labels in the small type of a [`panel_grid`][] panel."""
    ax.set_title(title, fontsize=8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)


def finish_panels(fig, axes, title: str):
    """The legend on the first panel, the figure's title, a tight layout; returns ``fig``."""
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_dataset(ds: xr.Dataset):
    """The figure that fits a result dataset, by its ``analysis`` attribute.

    Registered analyses and programs bring their own figure (``register(..., figure=...)``,
    [`dynlab.registry.Entry`][]); training curves and sweeps are drawn here; anything else
    gets [`generic`][].
    """
    from dynlab import registry

    kind = ds.attrs.get("analysis")
    for registered in ("analysis", "program"):
        if isinstance(kind, str) and kind in registry.names(registered):
            figure = registry.get(registered, kind).figure
            if figure is not None:
                return figure(ds)
    if kind == "training":
        return learning_curve(ds)
    if kind == "sweep":
        return sweep(ds)
    if kind == "findings":
        return findings(ds)
    return generic(ds)
