r"""Activity statistics of a spiking or rate population: sparsity, irregularity, correlations.

The ELM scaling-law paper (Fig. 8) characterises trained networks by the fraction of neurons
active at a time, the inter-spike-interval (ISI) distribution and its coefficient of variation,
the Fano factor of spike counts, and the distribution of pairwise correlations.
[`activity_statistics`][] computes these from any recorded activity $a_{b,t,n}$
(trial $b$, step $t$, neuron $n$); [`activity_analysis`][] (registered as `activity`) records
a dynlab model's state along a trajectory and applies it.

**Definitions** (threshold $\theta$, `threshold`):

- *active*: $a_{b,t,n} > \theta$. The fraction active at step $t$ is the mean over trials and
  neurons; per neuron, the fraction of steps (and trials) it is active.
- *events* ("spikes"): with `events="active"` every active step is one event (binary spike
  trains: one spike per step with a 1); with `events="onset"` only steps where the neuron turns
  active ($a_{t-1} \le \theta < a_t$, the step before $t = 0$ counting as inactive), so that a
  burst of consecutive active steps of a rate unit is one event.
- *ISI*: the steps between consecutive events of one neuron within one trial (never across
  trials). Per neuron, $\mathrm{CV} = \mathrm{sd}/\mathrm{mean}$ of its ISIs (sample sd,
  $\mathrm{ddof} = 1$; NaN with fewer than `min_intervals` ISIs). `isi_cv_mean` averages the
  neurons' CVs; `isi_cv_pooled` is the CV of all ISIs pooled (larger when rates differ).
- *Fano factor*: event counts $c_{b,w,n}$ in non-overlapping windows of `window` steps (a
  trailing incomplete window is dropped); per neuron $F = \mathrm{var}(c)/\mathrm{mean}(c)$ over
  all windows of all trials (sample variance, ddof = 1; NaN for a silent neuron). Slow rate
  changes within a recording raise $F$ above the value of a stationary process.
- *Pairwise correlations*: Pearson correlations between neurons of the window counts
  (`correlation_of="counts"`, spike-count correlations) or of the raw activity per step
  (`"activity"`), pooled over trials; neurons with zero variance are left out. Summarised by
  the mean, sd and a histogram of the $n(n-1)/2$ off-diagonal values.

Reference values: a Bernoulli train with event probability $p$ per step has geometric ISIs,
$\mathrm{CV} = \sqrt{1 - p}$, and binomial counts, $F = 1 - p$ (both $\to 1$, the Poisson
values, as $p \to 0$); a periodic train has CV $= 0$, and $F = 0$ when `window` is a multiple
of its period.
"""

from __future__ import annotations

import warnings
from typing import Literal

import jax
import numpy as np
import xarray as xr
from jax.typing import ArrayLike

from dynlab.config import Count
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp, stamp_attrs
from dynlab.registry import register

__all__ = ["activity_analysis", "activity_statistics", "plot_activity"]


def _intervals(events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All ISIs as `[B, T, N]` (0 where no interval ends) and the mask of where one ends."""
    steps = np.arange(events.shape[1])[None, :, None]
    last = np.maximum.accumulate(np.where(events, steps, -1), axis=1)  # latest event at or before t
    previous = np.concatenate([np.full_like(last[:, :1], -1), last[:, :-1]], axis=1)
    ends = events & (previous >= 0)
    return np.where(ends, steps - previous, 0), ends


def activity_statistics(
    activity: ArrayLike,
    *,
    threshold: float = 0.0,
    events: Literal["active", "onset"] = "active",
    window: int = 10,
    correlation_of: Literal["counts", "activity"] = "counts",
    bins: int = 40,
    min_intervals: int = 2,
) -> xr.Dataset:
    r"""Fraction active, ISI CV, Fano factor and pairwise correlations of recorded activity.

    **Arguments:**

    - `activity`: `[T, N]` or `[trials, T, N]`, real (spikes as 0/1, or rates).
    - `threshold`: $\theta$; a neuron is active where its activity exceeds it.
    - `events`: `"active"` or `"onset"` (see the module docstring).
    - `window`: the counting window in steps (Fano factor, count correlations); at least two
      windows must fit in the recording.
    - `correlation_of`: `"counts"` or `"activity"`.
    - `bins`: histogram bins of the correlations on $[-1, 1]$.
    - `min_intervals`: ISIs a neuron needs for its CV ($\ge 2$).

    **Returns:** an `xr.Dataset` with coords `time` (steps), `neuron`, `isi` (steps
    $1, \dots, T-1$), `correlation` (bin centres):

    - `fraction_active` (`time`); `neuron_fraction_active`, `event_rate` (events per step),
      `n_intervals`, `isi_mean`, `isi_cv`, `count_mean`, `fano` (`neuron`);
    - `isi_histogram` (`isi`): the number of ISIs of each length, all neurons;
    - `correlation_histogram` (`correlation`): the number of neuron pairs per bin;
    - scalars `mean_fraction_active`, `isi_cv_mean`, `isi_cv_pooled`, `fano_mean` (over
      non-silent neurons), `correlation_mean`, `correlation_std`, `n_pairs`;
    - attrs `analysis="activity"`, `dynlab_version`, `threshold`, `events`, `window`,
      `n_windows`, `n_trials`, `correlation_of`, `correlation_bin_width`, `min_intervals`.
    """
    x = np.asarray(activity)
    if x.ndim not in (2, 3) or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x) or x.size == 0:
        raise ConfigError(f"activity must be a non-empty real array [T, N] or [trials, T, N]; got shape {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise ConfigError("activity contains NaN or infinite values.")
    x = (x[None] if x.ndim == 2 else x).astype(np.float64)
    n_trials, steps, n = x.shape
    if events not in ("active", "onset"):
        raise ConfigError(f"events must be 'active' or 'onset'; got {events!r}.")
    if correlation_of not in ("counts", "activity"):
        raise ConfigError(f"correlation_of must be 'counts' or 'activity'; got {correlation_of!r}.")
    require_positive("window", window)
    require_positive("bins", bins)
    if isinstance(min_intervals, bool) or not isinstance(min_intervals, int) or min_intervals < 2:
        raise ConfigError(f"min_intervals must be an integer >= 2; got {min_intervals!r}.")
    n_windows = steps // window
    if n_trials * n_windows < 2:
        raise ConfigError(f"window = {window} leaves fewer than 2 counting windows in {n_trials} x {steps} steps.")
    threshold = float(threshold)

    active = x > threshold
    if events == "active":
        ev = active
    else:
        ev = active & ~np.concatenate([np.zeros_like(active[:, :1]), active[:, :-1]], axis=1)

    intervals, ends = _intervals(ev)
    count = ends.sum(axis=(0, 1))
    s1 = intervals.sum(axis=(0, 1), dtype=np.float64)
    s2 = np.sum(intervals.astype(np.float64) ** 2, axis=(0, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        isi_mean = s1 / count
        isi_var = (s2 - count * isi_mean**2) / (count - 1)
        isi_cv = np.where(count >= min_intervals, np.sqrt(np.clip(isi_var, 0, None)) / isi_mean, np.nan)
        total = count.sum()
        pooled_mean = s1.sum() / total
        pooled_var = (s2.sum() - total * pooled_mean**2) / (total - 1)
        isi_cv_pooled = np.sqrt(max(pooled_var, 0.0)) / pooled_mean if total >= min_intervals else np.nan
    isi_histogram = np.bincount(intervals[ends], minlength=steps)[1:steps]

    counts = ev[:, : n_windows * window].reshape(n_trials, n_windows, window, n).sum(axis=2)
    counts = counts.reshape(-1, n).astype(np.float64)
    count_mean = counts.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        fano = np.where(count_mean > 0, counts.var(axis=0, ddof=1) / count_mean, np.nan)

    signal = counts if correlation_of == "counts" else x.reshape(-1, n)
    varying = signal.std(axis=0) > 0
    edges = np.linspace(-1.0, 1.0, bins + 1)
    if varying.sum() >= 2:
        r = np.corrcoef(signal[:, varying].T)[np.triu_indices(int(varying.sum()), k=1)]
        r = np.clip(r, -1.0, 1.0)
        corr_mean, corr_std = float(r.mean()), float(r.std())
    else:
        r, corr_mean, corr_std = np.empty(0), np.nan, np.nan
        warnings.warn("activity_statistics: fewer than 2 neurons vary; no pairwise correlations.",
                      RuntimeWarning, stacklevel=2)
    corr_hist = np.histogram(r, bins=edges)[0]

    def nanmean(v: np.ndarray) -> float:
        return float(np.mean(v[np.isfinite(v)])) if np.isfinite(v).any() else float("nan")

    one, per_step = {"units": "1"}, {"units": "steps"}
    return xr.Dataset(
        {
            "fraction_active": ("time", active.mean(axis=(0, 2)), {**one, "long_name": "fraction of neurons active"}),
            "neuron_fraction_active": ("neuron", active.mean(axis=(0, 1)), {**one, "long_name": "fraction of steps active"}),
            "event_rate": ("neuron", ev.mean(axis=(0, 1)), {"units": "1/step", "long_name": "events per step"}),
            "n_intervals": ("neuron", count, {"long_name": "number of inter-event intervals"}),
            "isi_mean": ("neuron", isi_mean, {**per_step, "long_name": "mean inter-event interval"}),
            "isi_cv": ("neuron", isi_cv, {**one, "long_name": "ISI coefficient of variation"}),
            "count_mean": ("neuron", count_mean, {"long_name": f"mean events per {window}-step window"}),
            "fano": ("neuron", fano, {**one, "long_name": "Fano factor of window counts"}),
            "isi_histogram": ("isi", isi_histogram, {"long_name": "number of intervals"}),
            "correlation_histogram": ("correlation", corr_hist, {"long_name": "number of neuron pairs"}),
            "mean_fraction_active": ((), float(active.mean()), {**one, "long_name": "mean fraction active"}),
            "isi_cv_mean": ((), nanmean(isi_cv), {**one, "long_name": "mean of the neurons' ISI CVs"}),
            "isi_cv_pooled": ((), float(isi_cv_pooled), {**one, "long_name": "CV of all ISIs pooled"}),
            "fano_mean": ((), nanmean(fano), {**one, "long_name": "mean Fano factor (non-silent neurons)"}),
            "correlation_mean": ((), corr_mean, {**one, "long_name": "mean pairwise correlation"}),
            "correlation_std": ((), corr_std, {**one, "long_name": "sd of pairwise correlations"}),
            "n_pairs": ((), int(r.size), {"long_name": "neuron pairs correlated"}),
        },
        coords={
            "time": ("time", np.arange(steps), {**per_step, "long_name": "step t"}),
            "neuron": ("neuron", np.arange(n)),
            "isi": ("isi", np.arange(1, steps), {**per_step, "long_name": "inter-event interval"}),
            "correlation": ("correlation", (edges[:-1] + edges[1:]) / 2, {**one, "long_name": "correlation (bin centre)"}),
        },
        attrs=stamp_attrs(analysis="activity", config={
            "threshold": threshold,
            "events": events,
            "window": int(window),
            "n_windows": int(n_windows),
            "n_trials": int(n_trials),
            "correlation_of": correlation_of,
            "correlation_bin_width": float(edges[1] - edges[0]),
            "min_intervals": int(min_intervals),
        }),
    )


def check_activity(model, *, component: str, steps: int, burn_in: int, **_) -> None:
    """The options of [`activity_analysis`][] that ``model`` can take (``component`` is one of its states).

    Enforces, in one place: activity's options are valid for the model. Called by the analysis
    itself and, as its registered ``check``, by scenario validation for every cell's model
    before any cell runs ([`dynlab.scenarios.spec.check_cells`][]; the model may be abstract).
    """
    from dynlab.analyses.state_map import state_map

    require_positive("steps", steps)
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
        raise ConfigError(f"burn_in must be a non-negative integer, got {burn_in!r}")
    labels = state_map(model).labels
    if component not in labels:
        raise ConfigError(f"no state component {component!r}; valid: {', '.join(dict.fromkeys(labels))}")


def plot_activity(ds: xr.Dataset):
    """Fraction active over time, ISI distribution, pairwise correlations
    ([`dynlab.analyses.activity.activity_statistics`][])."""
    fig, (ax_f, ax_i, ax_c) = subplots(1, 3, figsize=(13, 3.8))
    ax_f.plot(ds.time, ds.fraction_active, lw=0.8)
    ax_f.set(xlabel="step", ylabel="fraction active", ylim=(0, 1),
             title=f"mean fraction active {float(ds.mean_fraction_active):.3f}")
    nonzero = ds.isi_histogram.where(ds.isi_histogram > 0, drop=True)
    if nonzero.size:
        ax_i.plot(nonzero.isi, nonzero, ".", ms=3)
        ax_i.set(xscale="log", yscale="log")
    else:  # no neuron had two events: nothing to put on log axes
        ax_i.text(0.5, 0.5, "no inter-event intervals", ha="center", va="center", transform=ax_i.transAxes)
    ax_i.set(xlabel="inter-event interval (steps)", ylabel="count",
             title=f"ISI CV {float(ds.isi_cv_mean):.2f} (pooled {float(ds.isi_cv_pooled):.2f}), "
                   f"Fano {float(ds.fano_mean):.2f}")
    ax_c.bar(ds.correlation, ds.correlation_histogram, width=ds.attrs["correlation_bin_width"])
    ax_c.set(xlabel=f"pairwise correlation ({ds.attrs['correlation_of']})", ylabel="pairs",
             title=f"mean {float(ds.correlation_mean):.3f} ± {float(ds.correlation_std):.3f}")
    fig.suptitle(f"{ds.attrs.get('component', '')} threshold {ds.attrs['threshold']:g}, events {ds.attrs['events']}, "
                 f"window {ds.attrs['window']}", fontsize=9)
    fig.tight_layout()
    return fig


@register(
    "analysis",
    "activity",
    "population activity statistics: fraction active, ISI CV, Fano factor, correlations",
    figure=plot_activity,
    outputs=(
        Output("fraction_active", "fraction", ("time",)),
        *Output.each("neuron_fraction_active", "fraction", ("neuron",)),
        *Output.each("event_rate isi_mean isi_cv count_mean fano", "real", ("neuron",)),
        Output("n_intervals", "count", ("neuron",)),
        Output("isi_histogram", "count", ("isi",)), Output("correlation_histogram", "count", ("correlation",)),
        Output("mean_fraction_active", "fraction"),
        *Output.each("isi_cv_mean isi_cv_pooled fano_mean correlation_mean correlation_std"),
        Output("n_pairs", "exact", description="neuron pairs correlated"),
    ),
    check=check_activity,
)
def activity_analysis(
    model,
    *,
    component: str = "layer0.h",
    steps: Count = 2000,
    burn_in: int = 200,
    drive: float | None = None,
    task=None,
    seed: int = 0,
    threshold: float = 0.0,
    events: str = "active",
    window: int = 10,
    correlation_of: str = "counts",
    bins: int = 40,
) -> xr.Dataset:
    r"""[`activity_statistics`][] of one state component of a model along a trajectory.

    The model's full state map runs for `burn_in + steps` steps under the protocol of
    [`dynlab.analyses.lyapunov.lyapunov_analysis`][] (autonomous, constant `drive`, or
    `task` inputs, seeded by `seed`); the last `steps` values of the state component labelled
    `component` (e.g. `"layer0.h"`: layer 0's activity, which for the ELM network is its
    neurons' outputs $a_t$) are analysed. The other options are
    [`activity_statistics`][]'s. Adds attrs `component`, `protocol`, `steps`, `burn_in`, `seed`.

    Args:
        component: the state component analysed, by its label in the model's state map (e.g. `layer0.h`).
        steps: steps of the trajectory that are analysed.
        burn_in: steps run first and left out (the transient).
        drive: a constant input to every step (None: autonomous, or the task's inputs with `task`).
        task: a task whose inputs drive the model.
        seed: the seed of the initial state and the task's inputs.
        threshold: a neuron is active where its activity exceeds this value.
        events: what counts as an event: `active` (every active step) or `onset` (a step that
            becomes active).
        window: the counting window in steps (Fano factor, count correlations).
        correlation_of: what pairs of neurons are correlated: `counts` (per window) or `activity`.
        bins: histogram bins of the pairwise correlations on [-1, 1].
    """
    from dynlab.analyses.state_map import protocol_inputs, protocol_name, run_in, state_map

    check_activity(model, component=component, steps=steps, burn_in=burn_in)
    smap = state_map(model)
    idx = [i for i, label in enumerate(smap.labels) if label == component]
    inputs = protocol_inputs(model, burn_in + steps, drive=drive, task=task, key=jax.random.key(seed))
    states = np.asarray(run_in(smap, inputs))[burn_in:, idx]
    ds = activity_statistics(states, threshold=threshold, events=events, window=window,
                             correlation_of=correlation_of, bins=bins)
    return stamp(ds, analysis="activity", seed=seed,
                 config=dict(component=component, protocol=protocol_name(drive, task), steps=steps, burn_in=burn_in))
