r"""Scenario ``pc-time-law``: the width/length law of PC through time on the linear RNN under
mean-field, without skips and with a residual recurrence $h_t = h_{t-1} + T^{-\alpha}(\dots)$
([`dynlab.rnn_residual`][]), trained by PC through time at its exact equilibrium and by BPTT from
identical weights ([`dynlab.analyses.pc_bp.compare_pc_bptt`][]). The same law on every unit, as a
scenario file with no program: ``cross-pc-law`` (``model.recurrence = "time-residual"``,
[`dynlab.experiment.DEPTH_FACTOR`][]).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from dynlab.registry import register


LAW = {
    "mean_cosine": "cos(PC, BPTT) averaged over seeds and training steps (exact equilibrium)",
    "s_minus_1": "energy rescaling s - 1 = tr(S - I)/K_scored, mean over seeds and steps",
    "s_minus_1_theory": "large-N prediction: (T-1)/(gamma0^2 N) without skips, kappa (T-1)/(gamma0^2 N) at alpha = 1",
    "loss_pc": "loss of the PC-trained network after the last step, mean over seeds",
    "loss_bp": "loss of the BPTT-trained network after the last step, mean over seeds",
}


def recurrence_name(alpha: float | None) -> str:
    """The ``recurrence`` coordinate: ``plain`` (no skips) or ``T^-alpha`` (residual with that depth factor)."""
    return "plain" if alpha is None else f"T^-{alpha:g}"


def law_summary(datasets: dict) -> str:
    """Per recurrence: the fitted log–log slope of $s - 1$ against $T/N$ and the range of cos(PC, BPTT)."""
    from dynlab.scenarios.summary import text_table

    law = datasets["law"]
    rows = [[str(r), f"{float(law.slope.sel(recurrence=r)):.3f}",
             f"{float(law.mean_cosine.sel(recurrence=r).min()):.3f} … {float(law.mean_cosine.sel(recurrence=r).max()):.3f}"]
            for r in law.recurrence.values]
    return "pc-time-law (linear RNN, mean-field):\n" + text_table(["recurrence", "slope of s-1 vs T/N", "cos(PC, BPTT)"], rows)


@register("program", "pc-time-law", "the width/length law of PC through time: s - 1 and cos(PC, BPTT) over width x "
                                    "length for the linear RNN without skips and with a residual recurrence T^-alpha",
          summary=law_summary)
def run_pc_time_law(
    out_dir,
    *,
    progress=None,
    widths: list[int] = (16, 64, 256),
    lengths: list[int] = (2, 8, 32, 128),
    seeds: list[int] = (0, 1),
    time_alphas: list[float] = (0.5, 1.0),
    task: str = "adding",
    steps: int = 10,
    batch_size: int = 32,
    gamma0: float = 1.0,
) -> dict:
    r"""The linear RNN under mean-field ([`dynlab.rnn_param`][]), without skips and with the residual
    recurrence $h_t = h_{t-1} + T^{-\alpha}(\dots)$ for each of ``time_alphas``
    ([`dynlab.rnn_residual`][]), each trained ``steps`` steps by PC through time (exact equilibrium)
    and by BPTT from identical weights ([`dynlab.analyses.pc_bp.compare_pc_bptt`][], Adam at the
    parameterisation's rates) over ``widths`` × ``lengths`` × ``seeds`` on ``task``'s fixed batch.

    Writes ``pc_time_law.nc`` (dims ``recurrence``, ``width``, ``length``: [`LAW`][], plus per
    recurrence the log–log slope and intercept of $s - 1$ against $T/N$ — ``slope``,
    ``intercept``) and ``pc_time_law.png``; returns ``{"law": dataset}``. The derivation and
    what to expect: [`dynlab.rnn_residual`][] (slope 1 and $\kappa \approx 1.39$ at $\alpha = 1$).
    """
    import xarray as xr

    from dynlab import store
    from dynlab.analyses.pc_bp import compare_pc_bptt, rescaling_slope
    from dynlab.analyses.pc_bp_figures import time_law
    from dynlab.errors import ConfigError
    from dynlab.rnn_residual import KAPPA

    alphas = [None] + [float(a) for a in time_alphas]
    if any(a is not None and not (np.isfinite(a) and a >= 0) for a in alphas):
        raise ConfigError(f"time_alphas must be finite numbers >= 0, got {list(time_alphas)!r}")
    widths, lengths, seeds = [int(w) for w in widths], [int(t) for t in lengths], [int(s) for s in seeds]
    parts, slopes, intercepts = [], [], []
    done, total = 0, len(alphas)
    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first cell
    for alpha in alphas:
        t0 = time.perf_counter()
        ds = compare_pc_bptt(task, widths, lengths, seeds, steps=steps, param="mf", gamma0=gamma0,
                             activation="linear", energy="closed-form", batch_size=batch_size, time_alpha=alpha)
        slope, intercept = rescaling_slope(ds)
        slopes.append(slope), intercepts.append(intercept)
        n, t = np.meshgrid(np.asarray(widths, float), np.asarray(lengths, float), indexing="ij")
        theory = (t - 1) / (gamma0**2 * n) * (KAPPA if alpha == 1.0 else 1.0)
        parts.append(xr.Dataset({
            "mean_cosine": ds.mean_cosine,
            "s_minus_1": ds.s_minus_1.mean(("seed", "step")),
            "s_minus_1_theory": (("width", "length"), np.where(alpha in (None, 1.0), theory, np.nan)),
            "loss_pc": ds.loss_pc.isel(step=-1).mean("seed"),
            "loss_bp": ds.loss_bp.isel(step=-1).mean("seed"),
        }))
        done += 1
        if progress is not None:
            progress(done, total, {"recurrence": recurrence_name(alpha), "slope": slope,
                                   "s": f"{time.perf_counter() - t0:.0f}s"})
    law = xr.concat(parts, dim="recurrence", coords="minimal", compat="override")
    law = law.assign_coords(recurrence=[recurrence_name(a) for a in alphas])
    for name, text in LAW.items():
        law[name].attrs["long_name"] = text
    law["slope"] = ("recurrence", np.asarray(slopes), {"long_name": "log-log slope of s - 1 against T/N"})
    law["intercept"] = ("recurrence", np.asarray(intercepts), {"long_name": "its intercept (log s - 1 at T/N = 1)"})
    law.attrs.update(analysis="pc-time-law", scenario="pc-time-law", task=task, steps=steps, batch_size=batch_size,
                     param="mf", gamma0=gamma0, kappa=KAPPA, seeds=np.asarray(seeds))
    out = Path(out_dir)
    store.write_dataset(out / "pc_time_law.nc", law)
    store.write_figure(out / "pc_time_law.png", time_law(law))
    return {"law": law}
