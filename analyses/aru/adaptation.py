r"""``adaptation`` (ARU Fig. 5c/d): $\lambda_1$ with $(n, s)$ frozen where the ARU sets them under a
step drive, adapted vs fixed, with its figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import jax
import numpy as np
import xarray as xr

from dynlab.analyses.aru.frozen_map import (
    aru_layer,
    check_confidence,
    check_realisations,
    check_steps,
    lambda1_runs,
    lambda_vars,
)
from dynlab.analyses.aru.plotting import ci_line, drive_colors, title
from dynlab.analyses.aru.traces import step_drive_traces, with_zero
from dynlab.config import Count, Range
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register


def plot_adaptation(ds: xr.Dataset):
    """Fig. 4a/5c/5d: mean n_t per drive; λ1 vs t̂ per drive; λ1 adapted vs fixed vs drive (mean ± CI)."""
    fig, (ax_n, ax_t, ax_d) = subplots(1, 3, figsize=(15, 4))
    drives = ds.drive.values
    colors, sm = drive_colors(drives)
    for d, c in zip(drives, colors):
        ax_n.plot(ds.time, ds.n_t.sel(drive=d).mean("neuron"), color=c, lw=1)
    ax_n.axvline(0, color="grey", ls="--", lw=0.8)
    ax_n.set(xlabel="steps since onset", ylabel="gain n_t (mean over neurons)", title="activation gain under a step drive")
    fig.colorbar(sm, ax=ax_n, label="ξ")
    t_hat = ds.t_hat.values
    for i, (d, c) in enumerate(zip(drives, colors)):
        ci_line(ax_t, t_hat, ds.isel(drive=i), "lambda1_t_hat", color=c)
    ax_t.axhline(float(ds.lambda1_fixed_mean.sel(drive=0)), color="k", lw=1, label="ξ = 0")
    ax_t.axhline(0, color="grey", lw=0.6)
    ax_t.set_xscale("symlog", linthresh=1)
    ax_t.set(xlim=(0, None), xlabel="t̂ (steps after onset)", ylabel="λ1 (per step)",
             title="λ1 with (n, s) frozen at t̂ (Fig. 5c)")
    ax_t.legend(fontsize=7)
    ci_line(ax_d, drives, ds, "lambda1_adapted", label="adaptive: (n∞(ξ), s∞(ξ))")
    ci_line(ax_d, drives, ds, "lambda1_fixed", label="fixed: (n∞(0), s∞(0))")
    ax_d.axhline(0, color="grey", lw=0.6)
    ax_d.set(xlabel="drive ξ", ylabel="λ1 (per step)", title="λ1 under a constant drive (Fig. 5d)")
    ax_d.legend(fontsize=7)
    conf = int(100 * ds.attrs.get("confidence", 0.95))
    over = ds.attrs.get("ci_population", f"{ds.sizes['ic']} initial conditions from the driven run")
    title(fig, ds, f"mean ± {conf}% CI over {over}; "
                    f"{ds.attrs.get('inputs', '')}, drive in map: {bool(ds.attrs.get('drive_in_map', 1))}")
    return fig


def _ci(ds, name, i):
    """``mean [low, high]`` of the finite runs (said to be over those when some escaped: the mean is
    conditional on not escaping), and the count and escape rate of the diverged ones."""
    n_div = int(ds[f"{name}_diverged"][i].sum())
    n = int(ds[f"{name}_diverged"][i].size)
    text = "" if n_div == n else (f"{float(ds[f'{name}_mean'][i]):+.5f} [{float(ds[f'{name}_ci_low'][i]):+.5f}, "
                                  f"{float(ds[f'{name}_ci_high'][i]):+.5f}]"
                                  + (f" over the {n - n_div}/{n} bounded runs" if n_div else ""))
    if n_div:
        text += f"{'; ' if text else ''}{n_div}/{n} escape at {float(ds[f'{name}_escape_mean'][i]):+.4f}"
    return text


def adaptation_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze adaptation`` prints: lambda_1 adapted against fixed per drive, with
    intervals, and how far (n, s) still drift at the end of the driven run."""
    from rich.table import Table

    from dynlab.analyses.tables import render

    conf = int(100 * ds.attrs["confidence"])
    table = Table(title=f"lambda_1 per step, mean [{conf}% CI over {ds.attrs['ci_population']}, Student t; "
                        f"{ds.sizes['ic']} initial conditions each] (runs escaping to infinity: their growth rate) "
                        f"— {ds.attrs['inputs']}")
    for col in ("xi", "adapted (n_inf(xi), s_inf(xi))", "fixed (n_inf(0), s_inf(0))", "|adapted| / |fixed|"):
        table.add_column(col, justify="right")
    for i, xi in enumerate(ds.drive.values):
        ratio = abs(float(ds.lambda1_adapted_mean[i])) / max(abs(float(ds.lambda1_fixed_mean[i])), 1e-300)
        table.add_row(f"{xi:g}", _ci(ds, "lambda1_adapted", i), _ci(ds, "lambda1_fixed", i),
                      "–" if np.isnan(ratio) else f"{ratio:.4g}")
    return render(table) + "\n" + ("steady-state check, max |n_T - n_(T-window)| per drive (worst realisation): "
                                   + ", ".join(f"{v:.2g}" for v in ds.n_drift.max("realisation").values))


@register(
    "analysis",
    "adaptation",
    "ARU Fig. 5c/d: lambda_1 with (n, s) frozen where the ARU sets them under a drive",
    figure=plot_adaptation,
    summary=adaptation_summary,
    outputs=(
        *Output.each("n_t s_t", "field", ("drive", "time", "neuron")),
        *Output.each("n_hat s_hat", "field", ("realisation", "drive", "t_hat", "neuron")),
        *Output.each("n_inf s_inf", "real", ("realisation", "drive", "neuron")),
        Output("n_drift", "real", ("realisation", "drive")),
        *(o for lam, dims in (("lambda1_adapted", ("drive",)), ("lambda1_fixed", ("drive",)),
                              ("lambda1_t_hat", ("drive", "t_hat")))
          for o in (*Output.each(f"{lam} {lam}_within_run_se {lam}_escape", "real", (*dims, "realisation", "ic")),
                    Output(f"{lam}_diverged", "field", (*dims, "realisation", "ic")),
                    *Output.each(f"{lam}_mean {lam}_ci_low {lam}_ci_high {lam}_ic_sd {lam}_escape_mean", "real", dims),
                    Output(f"{lam}_bounded", "exact", dims))),
    ),
)
def adaptation_analysis(
    model,
    *,
    drives: Sequence[float] = (1.0, 2.0, 5.0, 10.0, 20.0),
    t_hats: Sequence[int] = (0, 1, 2, 5, 10, 20, 50, 100),
    onset: int = 100,
    duration: int = 400,
    window: int = 50,
    realisations: Annotated[int, Range(minimum=2)] = 5,
    ics: Count = 4,
    steps: Count = 1000,
    burn_in: int = 200,
    task=None,
    drive_in_map: bool = True,
    confidence: float = 0.95,
    seed: int = 0,
    x64: bool = False,
) -> xr.Dataset:
    r"""The Fig. 5c/d protocol (paper §5.4): how the ARU's choice of $(n, s)$ under a drive changes $\lambda_1$.

    1. The ARU model runs ``onset`` steps without drive, then ``duration`` steps under the step
       drive $\xi$ (every neuron, controller included), on zero input or, with ``task``, on the
       task's input stream. $\xi = 0$ is always included.
    2. Its activation parameters are read at $\hat t$ steps after onset,
       $(n_{\hat t}(\xi), s_{\hat t}(\xi))$ ($\hat t = 0$: the first driven step, the onset value),
       and at steady state, $(n_\infty(\xi), s_\infty(\xi))$ = the mean over the last ``window``
       driven steps.
    3. Each set is frozen into the static network $F_{n,s}$ (equivalent to RNN+$\gamma$ static)
       whose $\lambda_1$ is computed under the drive $\xi$ (``drive_in_map=True``, default; the paper
       leaves this open; ``False`` drops $\xi$ from the map) at zero input (App. D.4):
       *adapted* = $(n_\infty(\xi), s_\infty(\xi))$, *fixed* = $(n_\infty(0), s_\infty(0))$, the
       parameters the network holds without drive, and one value per $\hat t$ (Fig. 5c).
    4. Initial conditions are ``ics`` activity vectors $h$ drawn (without replacement) from the
       driven run's second half, i.e. from its stationary distribution $\pi(\xi)$.

    **Replication.** Steps 1–4 are repeated for ``realisations`` independent input streams (the
    task's stream drawn from ``fold_in(key(seed), r)``), so that $(n_\infty, s_\infty)$, the frozen
    maps, the initial conditions and the tangent frames are all re-drawn: ``_mean`` is the mean over
    realisations of each realisation's mean over its initial conditions, and ``_ci_low``,
    ``_ci_high`` its Student-t ``confidence`` interval over the realisations (attrs name the
    population). That interval includes the error of $(n_\infty, s_\infty)$ from one
    ``window``-step average. ``_ic_sd`` is the spread over initial conditions within one
    realisation, which measures multistability, not the error. On zero input every realisation
    sees the same (zero) input and differs only in its initial conditions and frame; a run that
    settles to a fixed point then gives an interval about as wide as the rounding.

    **Returns** (dims ``drive``, ``t_hat``, ``realisation``, ``ic``, ``time`` = steps since onset,
    ``neuron``): ``n_t``, ``s_t`` (the traces of realisation 0), ``n_hat``, ``s_hat``, ``n_inf``,
    ``s_inf`` (per realisation); ``lambda1_adapted``, ``lambda1_fixed`` (``drive``, ``realisation``,
    ``ic``) and ``lambda1_t_hat`` (``drive``, ``t_hat``, ``realisation``, ``ic``), each with ``_mean``,
    ``_ci_low``, ``_ci_high``, ``_ic_sd``, and ``_diverged``, ``_escape``, ``_escape_mean`` for runs
    whose state escaped to infinity (their [`escape_rate`][], a positive $\lambda_1$); ``n_drift``
    (``realisation``, ``drive``): the largest change of $n$ over the last ``window`` steps, a check
    that the steady state was reached. Fewer than 2 realisations is a ConfigError.

    Args:
        drives: step drives xi (0 is always added).
        t_hats: steps after onset at which to freeze (n, s).
        onset: undriven steps before the drive.
        duration: driven steps.
        window: last driven steps averaged for (n_inf, s_inf).
        realisations: independent input streams the CI is over; (n_inf, s_inf) are re-estimated in each.
        ics: initial conditions per realisation, from its driven run (their spread: multistability).
        steps: length of each Lyapunov run.
        burn_in: Lyapunov steps not accumulated.
        task: the task whose input stream drives the model (default: zero input).
        drive_in_map: keep the drive xi in the frozen map whose lambda_1 is computed.
        confidence: level of the Student-t interval.
        seed: seed of the inputs and initial conditions.
        x64: compute in float64.
    """
    check_steps(steps, burn_in)
    require_positive("ics", ics)
    require_positive("window", window)
    check_realisations(realisations)
    check_confidence(confidence)
    drives = with_zero(drives)
    t_hats = np.asarray(t_hats)
    if t_hats.ndim != 1 or t_hats.size == 0 or t_hats.dtype.kind not in "iu" or t_hats.min() < 0 \
            or t_hats.max() >= duration:
        raise ConfigError(f"t_hats must be a list of integers in [0, duration = {duration}), got {list(t_hats)!r}")
    cell = aru_layer(model)
    if window > duration // 2:
        raise ConfigError(f"window must be at most duration / 2 = {duration // 2}, got {window}")
    if 2 * ics > duration:
        raise ConfigError(f"ics = {ics} initial conditions need duration >= {2 * ics} driven steps")
    T, H, D, R = onset + duration, cell.hidden, drives.size, realisations
    zero = int(np.flatnonzero(drives == 0)[0])
    second_half = np.arange(onset + duration - duration // 2, T)
    per = {k: [] for k in ("n_hat", "s_hat", "n_inf", "s_inf", "n_drift", "sets_n", "sets_s", "h0s")}
    for r in range(R):
        key_r = jax.random.fold_in(jax.random.key(seed), r)
        tr = step_drive_traces(model, drives, onset, duration, task, seed, key=key_r)
        if r == 0:
            traces = {"n": tr["n"], "s": tr["s"]}
        n_hat, s_hat = tr["n"][:, onset + t_hats], tr["s"][:, onset + t_hats]  # [D, K, H]
        n_inf, s_inf = tr["n"][:, -window:].mean(1), tr["s"][:, -window:].mean(1)  # [D, H]
        keys = jax.random.split(jax.random.fold_in(key_r, 2), D)
        picks = np.stack([np.asarray(jax.random.choice(k, second_half, (ics,), replace=False)) for k in keys])
        per["h0s"].append(np.take_along_axis(tr["h"], picks[:, :, None], axis=1))  # [D, I, H]
        per["sets_n"].append(np.concatenate([n_inf[:, None], np.broadcast_to(n_inf[zero], (D, 1, H)), n_hat], axis=1))
        per["sets_s"].append(np.concatenate([s_inf[:, None], np.broadcast_to(s_inf[zero], (D, 1, H)), s_hat], axis=1))
        per["n_drift"].append(np.abs(tr["n"][:, -1] - tr["n"][:, -window]).max(-1))
        for name, value in (("n_hat", n_hat), ("s_hat", s_hat), ("n_inf", n_inf), ("s_inf", s_inf)):
            per[name].append(value)
        del tr
    stacked = {k: np.stack(v) for k, v in per.items()}  # leading realisation axis
    K = stacked["sets_n"].shape[2]
    xi_map = np.tile(np.repeat(drives if drive_in_map else np.zeros(D), K), R)
    result = lambda1_runs(cell, stacked["sets_n"].reshape(R * D * K, H), stacked["sets_s"].reshape(R * D * K, H),
                          xi_map, np.repeat(stacked["h0s"].reshape(R * D, ics, H), K, axis=0), steps=steps,
                          burn_in=burn_in, seed=seed, x64=x64, realisation=np.repeat(np.arange(R), D * K))
    runs = result.reshape(R, D, K, ics).moveaxis(0, 2)  # [D, K, R, I]
    population = "independent input streams" if task is not None else "realisations (zero input: initial states, frames)"

    def vars_(name, sel, dims, long_name):
        return lambda_vars(name, runs.take(sel), dims, confidence, long_name, population)

    time = np.arange(T) - onset
    trace = {"units": "1"}
    data = {
        "n_t": (("drive", "time", "neuron"), traces["n"], {**trace, "long_name": "gain n_t (realisation 0)"}),
        "s_t": (("drive", "time", "neuron"), traces["s"], {**trace, "long_name": "saturation s_t (realisation 0)"}),
        "n_hat": (("realisation", "drive", "t_hat", "neuron"), stacked["n_hat"], {"long_name": "gain at t_hat after onset"}),
        "s_hat": (("realisation", "drive", "t_hat", "neuron"), stacked["s_hat"],
                  {"long_name": "saturation at t_hat after onset"}),
        "n_inf": (("realisation", "drive", "neuron"), stacked["n_inf"], {"long_name": "steady-state gain n_inf"}),
        "s_inf": (("realisation", "drive", "neuron"), stacked["s_inf"], {"long_name": "steady-state saturation s_inf"}),
        "n_drift": (("realisation", "drive"), stacked["n_drift"], {"long_name": "max |n_T - n_(T-window)| over neurons"}),
        **vars_("lambda1_adapted", np.s_[:, 0], ("drive",), "lambda_1 with steady-state (n, s) under the drive (adapted)"),
        **vars_("lambda1_fixed", np.s_[:, 1], ("drive",), "lambda_1 with the undriven steady-state (n, s) (fixed)"),
        **vars_("lambda1_t_hat", np.s_[:, 2:], ("drive", "t_hat"), "lambda_1 with (n, s) frozen at t_hat after onset"),
    }
    ds = xr.Dataset(
        data,
        coords={
            "drive": ("drive", drives, {"long_name": "step drive xi"}),
            "t_hat": ("t_hat", t_hats, {"long_name": "steps after onset", "units": "steps"}),
            "time": ("time", time, {"long_name": "steps since onset", "units": "steps"}),
            "neuron": ("neuron", np.arange(H)),
            "realisation": ("realisation", np.arange(R), {"long_name": f"independent realisation ({population})"}),
            "ic": ("ic", np.arange(ics), {"long_name": "initial condition within a realisation"}),
        },
    )
    return stamp(ds, analysis="adaptation", seed=seed, config=dict(onset=onset, duration=duration, window=window,
        realisations=R, ics=ics, steps=steps, burn_in=burn_in, drive_in_map=drive_in_map, confidence=confidence,
        x64=x64, inputs="zero input" if task is None else f"task {type(task).__name__}", hidden=H,
        ci_population=f"{R} {population}", ci_level=confidence, ci_method=ds.lambda1_adapted_ci_low.attrs["ci_method"]))
