r"""Receptive fields of every neuron of every layer of a dynlab model, by spike-triggered
averaging (the SITH paper's Fig. 4d and S2), registered as the analysis ``sta``.

**Layers** are those of the temporal-receptive-window analysis ([`dynlab.analyses.trw.model_layers`][]):
every cell's output over time, and the internal layers of a layer stack (SITHCon, Nets 1–5).
**High activity** is a neuron's output above its own ``quantile`` (default 0.9: its top 10% of
steps) over the measured stream ([`spike_triggered_average`][dynlab.analyses.sta.core.spike_triggered_average]).

**Levels of the hierarchical language** (task ``hierarchical-language``, Sarkar & Howard). The
test stream is the 9 class sequences in class order ($9 \times 3^L$ letters, $L$ = ``levels``),
each letter lasting $3^m$ steps at dilation $m$. At level $\ell = 0 \dots L$ the stream is a
sequence of $9 \cdot 3^{L-\ell}$ items of $3^\ell$ letters (letter, word, sentence, paragraph,
sequence for $L = 4$); the grammar uses 9 distinct items per level, numbered here in the
lexicographic order of their letters (so letters by identity), which label them (1-based, as in
the paper). The
stimulus at level $\ell$ is the one-hot identity of the item under way, so the receptive field
$\mathrm{STA}_\ell(k) - \text{baseline}$ says which item, $k$ items back, precedes a neuron's
high activity, beyond its frequency in the stream. The stream is shown twice and the second
presentation measured (as ``trw``'s warm-up): lags reaching before it look into the first
presentation, which the network did see.

**A yardstick.** Every neuron has some selectivity from a finite number of high steps alone;
each level's is compared with the same neuron's under circular time shifts of its response
([`dynlab.analyses.sta.null`][]), and the layer trend is given with its interval, for the
selectivity and for its excess over the null.

**Any other task** (any unit): ``samples`` test samples of the task, each run from the initial
state; the stimulus is the raw input (one level, ``input``, in steps), so one-hot symbol tasks
(``recall``, ``charlm``) give each symbol's receptive field and continuous ones the classical STA.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.sta.core import spike_triggered_average
from dynlab.analyses.sta.figure import sta_figure, sta_summary
from dynlab.analyses.sta.null import N_SHIFTS, NULL_LEVEL, layer_trend, shift_null
from dynlab.config import Count, Range
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register

__all__ = ["Level", "check_sta", "hierarchy_levels", "level_receptive_fields", "sta_analysis"]

LEVEL_NAMES = ("letter", "word", "sentence", "paragraph")


@dataclasses.dataclass(frozen=True)
class Level:
    """One level of a symbol hierarchy over a stream."""

    name: str
    items: np.ndarray
    """``[J]`` the item (0 … ``symbols`` - 1) at each position of the stream, in order."""
    item_steps: int
    """Steps each item lasts."""
    labels: tuple[str, ...]
    """One label per item id (its letters, 1-based)."""

    @property
    def symbols(self) -> int:
        return len(self.labels)


def hierarchy_levels(task) -> list[Level]:
    """The levels $\\ell = 0 \\dots L$ of a ``hierarchical-language`` task's test stream at its
    dilation (module docstring)."""
    letters = np.asarray(task.symbols).reshape(-1)
    dilation = 3**task.dilation
    levels = []
    for level in range(task.levels + 1):
        size = 3**level
        segments = letters.reshape(-1, size)
        unique, inverse = np.unique(segments, axis=0, return_inverse=True)  # rows in lexicographic order
        items = inverse.ravel()
        labels = tuple("".join(str(int(s) + 1) for s in row) for row in unique)
        name = ("sequence" if level == task.levels else LEVEL_NAMES[level] if level < len(LEVEL_NAMES)
                else f"level {level}")
        levels.append(Level(name, items, size * dilation, labels))
    return levels


def level_stimulus(level: Level, steps: int, width: int, warmup_items: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(onehot [J', width], index [steps])``: the level's one-hot items (twice with
    ``warmup_items``, the stream having been shown once before) and the item each step sees."""
    if level.items.size * level.item_steps != steps:
        raise ConfigError(f"level {level.name!r} covers {level.items.size * level.item_steps} steps, the responses {steps}")
    onehot = np.eye(width, dtype=np.float32)[level.items]
    index = np.arange(steps) // level.item_steps
    if warmup_items:
        onehot = np.concatenate([onehot, onehot])
        index = index + level.items.size
    return onehot, index


def level_receptive_fields(levels, responses, *, lags: int, quantile: float, warmup_items: bool = True):
    """Spike-triggered averages of ``responses`` ``[T, N]`` (steps of one presentation of the
    stream) at every level: ``(sta [levels, N, lags, symbols], baseline [levels, lags, symbols],
    threshold [N], triggers [N])``, NaN-padded to the most symbols of any level.

    ``warmup_items``: the stream was shown once before the measured presentation, so the
    stimulus holds it twice and lags may reach into the first presentation.
    """
    responses = np.asarray(responses)
    T = responses.shape[0]
    width = max(level.symbols for level in levels)
    sta = np.full((len(levels), responses.shape[1], lags, width), np.nan)
    base = np.full((len(levels), lags, width), np.nan)
    threshold = triggers = None
    for i, level in enumerate(levels):
        onehot, index = level_stimulus(level, T, width, warmup_items)
        # zero rows after the last item, which no index reaches: every level has one shape (one compilation)
        onehot = np.concatenate([onehot, np.zeros((2 * T - onehot.shape[0], width), np.float32)])
        res = spike_triggered_average(onehot, responses, lags=lags, quantile=quantile, index=index)
        sta[i, :, :, : level.symbols] = res.sta[..., : level.symbols]
        base[i, :, : level.symbols] = res.baseline[..., : level.symbols]
        threshold, triggers = res.threshold, res.triggers
    return sta, base, threshold, triggers


def check_sta(model, *, task=None, quantile: float = 0.9, lags: int = 9, samples: int = 64, **_) -> None:
    """The options of [`sta_analysis`][] that ``model`` can take; one ConfigError line otherwise."""
    require_positive("lags", lags)
    require_positive("samples", samples)
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile < 1:
        raise ConfigError(f"quantile must be a number in [0, 1), got {quantile!r}")
    task = _task(model, task)
    if task.input_size != model.input_size:
        raise ConfigError(f"the task gives {task.input_size} inputs per step but the model reads {model.input_size}")
    if not _hierarchical(task) and lags > task.length:
        raise ConfigError(f"lags = {lags} exceeds the task's {task.length} steps per sample")


def _hierarchical(task) -> bool:
    from dynlab.tasks.hierarchical import HierarchicalLanguageTask

    return isinstance(task, HierarchicalLanguageTask)


TASK = "hierarchical-language"
"""The default task of the analysis (by name: a fresh one, for a model reading its 9 inputs)."""


def _task(model, task):
    from dynlab.tasks.hierarchical import N_SYMBOLS, HierarchicalLanguageTask

    if task is not None and task != TASK:
        return task
    if model.input_size != N_SYMBOLS:
        raise ConfigError(f"the model reads {model.input_size} inputs per step, not the hierarchical language's "
                          f"{N_SYMBOLS}: name the task whose inputs drive it (--task NAME)")
    return HierarchicalLanguageTask()


@register(
    "analysis",
    "sta",
    "receptive fields by spike-triggered averaging, per layer and neuron, at each level of the hierarchical language",
    figure=sta_figure,
    summary=sta_summary,
    outputs=(
        *Output.each("sta receptive_field", "field", ("level", "neuron", "lag", "symbol")),
        Output("baseline", "field", ("level", "lag", "symbol")),
        *Output.each("selectivity null_selectivity_median null_selectivity_q95 selectivity_z excess_selectivity", "real",
                     ("level", "neuron")),
        Output("selectivity_p", "fraction", ("level", "neuron")),
        Output("threshold", "real", ("neuron",)), Output("triggers", "count", ("neuron",)),
        Output("fraction_beating_null", "fraction", ("level", "layer_number")),
        *Output.each("null_clears_window null_shift_min null_shift_max", "field", ("level",)),
        *Output.each("layer_trend layer_trend_ci_low layer_trend_ci_high excess_layer_trend excess_layer_trend_ci_low "
                     "excess_layer_trend_ci_high", "real", ("level",)),
    ),
    check=check_sta,
)
def sta_analysis(model, *, task=TASK, quantile: Annotated[float, Range(minimum=0, below=1)] = 0.9, lags: Count = 9,
                 samples: Count = 64,
                 seed: int = 0) -> xr.Dataset:
    r"""Receptive fields of every neuron of every layer of ``model`` by spike-triggered averaging.

    Arguments:
        task: a ``hierarchical-language`` task (its grammar, levels, dilation and mode; the
            default when the model reads 9 inputs) or any other task (module docstring).
        quantile: a neuron's activity is high above this quantile of its outputs, in $[0, 1)$.
        lags: items back ($k = 0 \dots$ ``lags`` - 1) at every level (steps, for other tasks).
        samples: test samples of a task other than the hierarchical language (seeded by ``seed``).

    **Returns** an `xr.Dataset` with dims `level`, `neuron` (every layer's outputs in order),
    `lag` (items back, 0 = the item under way), `symbol`:

    - `sta` (`level`, `neuron`, `lag`, `symbol`): the spike-triggered average of the level's
      one-hot item (or of the raw input); `baseline` (`level`, `lag`, `symbol`): the average
      over all steps; `receptive_field` = `sta` − `baseline`;
    - `selectivity` (`level`, `neuron`): the root mean square of the receptive field over lags
      and symbols;
    - `threshold`, `triggers` (`neuron`): the quantile and the number of high steps;
    - the time-shifted null ([`dynlab.analyses.sta.null`][]; ``N_SHIFTS`` = 99 circular shifts of
      the response longer than the STA window, per level): `null_selectivity_median`,
      `null_selectivity_q95`, `selectivity_p` (p-value), `selectivity_z`, `excess_selectivity`
      (the selectivity minus the null's mean) (`level`, `neuron`); `fraction_beating_null`
      (`level`, `layer_number`: p ≤ 0.05); `null_clears_window`, `null_shift_min`,
      `null_shift_max` (`level`);
    - the layer trend per level ([`dynlab.analyses.sta.null.layer_trend`][]): `layer_trend` of
      the selectivity and `excess_layer_trend` of the excess, each with `_ci_low`, `_ci_high`
      (95%, Student t over the layers' neurons);
    - coordinates `layer`, `layer_name`, `index_in_layer` (`neuron`); `level_name`,
      `item_steps` (`level`); `symbol_label` (`level`, `symbol`).
    """
    from dynlab.analyses.trw import layer_names, model_layers

    check_sta(model, task=task, quantile=quantile, lags=lags, samples=samples)
    task = _task(model, task)
    names = layer_names(model)
    if _hierarchical(task):
        x = jnp.asarray(task.stream(task.dilation))
        T = x.shape[0]
        outs = model_layers(model, "sequence")(jnp.concatenate([x, x]))
        responses = np.concatenate([np.asarray(o[T:], np.float64) for o in outs], axis=1)
        levels = hierarchy_levels(task)
        sta, base, threshold, triggers = level_receptive_fields(levels, responses, lags=lags, quantile=quantile)
        nulls = []
        for lv in levels:
            onehot, index = level_stimulus(lv, T, lv.symbols)
            nulls.append(shift_null(onehot, responses, lags=lags, quantile=quantile, index=index,
                                    item_steps=lv.item_steps))
        config = {"task": "hierarchical-language", "stream_steps": T, "dilation": task.dilation, "mode": task.mode,
                  "levels": task.levels}
    else:
        xs = task.batch(jax.random.key(seed), samples, split="test")[0]
        outs = jax.vmap(model_layers(model, "scan"))(xs)
        responses = np.concatenate([np.asarray(o, np.float64) for o in outs], axis=2)
        res = spike_triggered_average(np.asarray(xs, np.float64), responses, lags=lags, quantile=quantile)
        sta, base, threshold, triggers = res.sta[None], res.baseline[None], res.threshold, res.triggers
        levels = [Level("input", np.arange(xs.shape[1]), 1, tuple(f"channel {d}" for d in range(xs.shape[2])))]
        nulls = [shift_null(np.asarray(xs, np.float64), responses, lags=lags, quantile=quantile)]
        config = {"task": type(task).__name__, "samples": samples, "sample_steps": int(xs.shape[1])}
    if not np.isfinite(responses).all():
        raise ConfigError("a layer's output became NaN or inf on the task's inputs: there is no activity to average")
    layer_of = np.concatenate([np.full(o.shape[-1], i + 1) for i, o in enumerate(outs)])
    index_in = np.concatenate([np.arange(o.shape[-1]) for o in outs])
    width = sta.shape[-1]
    labels = np.array([[lv.labels[s] if s < lv.symbols else "" for s in range(width)] for lv in levels])
    rf = sta - base[:, None]
    with np.errstate(invalid="ignore"):
        selectivity = np.sqrt(np.nanmean(rf**2, axis=(2, 3)))
    null_vars, null_coords = _null_variables(nulls, layer_of)
    ds = xr.Dataset(
        {
            "sta": (("level", "neuron", "lag", "symbol"), sta,
                    {"long_name": "spike-triggered average of the level's item (one-hot) or input"}),
            "baseline": (("level", "lag", "symbol"), base, {"long_name": "average over all steps"}),
            "receptive_field": (("level", "neuron", "lag", "symbol"), rf, {"long_name": "sta - baseline"}),
            "selectivity": (("level", "neuron"), selectivity,
                            {"long_name": "root mean square of the receptive field over lags and symbols"}),
            "threshold": ("neuron", threshold, {"long_name": f"the neuron's {quantile:g}-quantile: above it is high"}),
            "triggers": ("neuron", triggers, {"long_name": "number of high steps"}),
            **null_vars,
        },
        coords={
            "level": ("level", np.arange(len(levels))),
            "level_name": ("level", [lv.name for lv in levels]),
            "item_steps": ("level", [lv.item_steps for lv in levels], {"units": "steps", "long_name": "steps per item"}),
            "neuron": ("neuron", np.arange(responses.shape[-1])),
            "layer": ("neuron", layer_of, {"long_name": "layer (1 = first)"}),
            "layer_name": ("neuron", [names[i - 1] for i in layer_of]),
            "index_in_layer": ("neuron", index_in),
            "lag": ("lag", np.arange(lags), {"long_name": "items back (0 = the item under way)"}),
            "symbol": ("symbol", np.arange(width)),
            "symbol_label": (("level", "symbol"), labels),
            **null_coords,
        },
    )
    return stamp(ds, analysis="sta", seed=seed, config={"quantile": quantile, "lags": lags, "null_shifts": N_SHIFTS,
                                                          "null_level": NULL_LEVEL, **config})


def _null_variables(nulls, layer_of) -> tuple[dict, dict]:
    """The dataset variables of the levels' time-shifted nulls ([`dynlab.analyses.sta.null`][]) and
    their layer trends, and the `layer_number` coordinate."""
    p = np.stack([nt.p_value for nt in nulls])
    excess = np.stack([nt.excess for nt in nulls])
    numbers = np.unique(layer_of)
    with np.errstate(invalid="ignore"):
        beats = np.stack([[np.nanmean(p[i, layer_of == ell] <= NULL_LEVEL) for ell in numbers]
                          for i in range(len(nulls))])
    raw = [layer_trend(nt.observed, layer_of) for nt in nulls]
    over = [layer_trend(nt.excess, layer_of) for nt in nulls]
    pair = ("level", "neuron")

    def trend(trends, field, what):
        return "level", np.array([getattr(t, field) for t in trends]), {"long_name": what}

    data = {
        "null_selectivity_median": (pair, np.stack([nt.quantile(0.5) for nt in nulls]),
                                    {"long_name": "median selectivity with the response time-shifted (the null)"}),
        "null_selectivity_q95": (pair, np.stack([nt.quantile(0.95) for nt in nulls]),
                                 {"long_name": "0.95-quantile of the selectivity under the time-shifted null"}),
        "selectivity_p": (pair, p, {"long_name": "p-value of the selectivity against the time-shifted null "
                                                 "(1 + #shifts at least as selective) / (1 + #shifts)"}),
        "selectivity_z": (pair, np.stack([nt.z for nt in nulls]),
                          {"long_name": "selectivity minus the null's mean, in the null's standard deviations"}),
        "excess_selectivity": (pair, excess, {"long_name": "selectivity minus the mean of the time-shifted null"}),
        "fraction_beating_null": (("level", "layer_number"), beats,
                                  {"long_name": f"fraction of the layer's neurons with p <= {NULL_LEVEL}"}),
        "null_clears_window": ("level", np.array([nt.clears_window for nt in nulls]),
                               {"long_name": "every shift of the null is longer than the STA window (else the "
                                             "level's selectivity cannot be told from the null)"}),
        "null_shift_min": ("level", np.array([nt.shifts.min(initial=0) for nt in nulls]), {"units": "steps"}),
        "null_shift_max": ("level", np.array([nt.shifts.max(initial=0) for nt in nulls]), {"units": "steps"}),
        "layer_trend": trend(raw, "slope", "slope of the layers' mean selectivity per layer"),
        "layer_trend_ci_low": trend(raw, "low", "95% interval over neurons (Student t, Welch)"),
        "layer_trend_ci_high": trend(raw, "high", "95% interval over neurons (Student t, Welch)"),
        "excess_layer_trend": trend(over, "slope", "slope of the layers' mean excess selectivity per layer"),
        "excess_layer_trend_ci_low": trend(over, "low", "95% interval over neurons (Student t, Welch)"),
        "excess_layer_trend_ci_high": trend(over, "high", "95% interval over neurons (Student t, Welch)"),
    }
    return data, {"layer_number": ("layer_number", numbers, {"long_name": "layer (1 = first)"})}
