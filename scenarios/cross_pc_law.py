r"""Scenario ``cross-pc-law``: the width/length law of PC through time on every unit (issue 21, item 4).

For the linear RNN, [`dynlab.rnn_residual`][] derives and ``pc-time-law`` measures the
parameterisation under which the PC-through-time gradient tends to BPTT's as the width $N$ grows
at a fixed length $T$: the update of every step scaled by $T^{-1}$ and a mean-field read-out, with
$s - 1 \to \kappa (T - 1)/(\gamma_0^2 N)$. This scenario asks the same of the eight units of
``cross-pc-alignment``, each in two forms:

* ``standard``: the unit as registered (its own initialisation, the standard read-out);
* ``T^-alpha``: the same network under [`TimeResidual`][dynlab.time_residual.TimeResidual] — every
  state update scaled by $T^{-\alpha}$ (``alpha``, default 1) and the read-out weights by
  $1/(\gamma_0\sqrt N)$, $N$ the read-out's fan-in.

For each unit, form, ``width`` ([`model_section`][dynlab.scenarios.every_unit.model_section]), sequence
``length`` and seed, at initialisation, on the task's fixed batch:

* ``s_minus_1``: the energy's rescaling linearised at the forward pass
  ([`dynlab.rules.pc_time.rescaling`][]): $\sum_\tau \|\partial o/\partial e_\tau\|^2$ over the scored
  read-outs. It sets the size of the equilibrium's errors, so the law is about it: $s - 1 \to 0$
  means PC → BPTT.
* ``cosine``: cos(PC, BPTT) of the weight gradients, PC's at its inferred equilibrium (inference as in
  ``cross-pc-alignment``: L-BFGS in the error coordinates with smoothing on the kinked energies,
  the same criterion; NaN where it did not converge, ``cosine_unconverged`` keeps it), with the
  inference's steps and residual. ``smoothing_x64`` (default false here, true in
  ``cross-pc-alignment``) runs the smoothed solves in float64, which SITH-RNN needs to converge.

Per unit and form the log–log slope of $s - 1$ against $T/N_{out}$ over the grid (``slope``; 1 is
the law), and per unit, form and length the slope of $\log(1 - \cos)$ against $\log N$
(``cosine_width_slope``; negative: the cosine tends to 1 as the network widens). $N_{out}$, the
read-out's fan-in, is the unit's width for most units (SITH-RNN reads a quarter of it; the ELM
network reads 19 features at every width, so it has no width law here) and is recorded as
``readout_width``.

Writes ``pc_law.nc`` and ``pc_law.png`` (per unit: $1 - \cos$ against $N$ for each $T$, both forms;
last panel: $s - 1$ against $T/N_{out}$ under the depth factor, every unit).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.registry import register
from dynlab.scenarios.every_unit import UNITS, check_units, model_section

FORMS = ("standard", "T^-alpha")

RECORDED = {
    "s_minus_1": "energy rescaling s - 1 linearised at the forward pass (pc_time.rescaling)",
    "cosine": "cos(PC, BPTT) of the weight gradients at initialisation (NaN where inference did not converge)",
    "cosine_unconverged": "cos(PC, BPTT), converged or not",
    "converged": "inference met its convergence criterion",
    "inference_steps": "inference steps taken",
    "grad_ratio": "final residual of inference: worst-sample |grad_z F| / its initial value",
    "smoothing": "width of the smoothed energy inference ran on last (0: the exact energy)",
}


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log y against log x over the finite, positive points (NaN with fewer
    than two, or where x does not vary: the ELM network's read-out has the same fan-in at every width)."""
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2 or np.ptp(np.log(x[ok])) == 0:  # one point, or x the same everywhere (no slope)
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def _dataset(data, readout, seconds, units, widths, lengths, seeds, attrs) -> xr.Dataset:
    dims = ("unit", "form", "width", "length", "seed")
    variables = {k: (dims, data[k] == 1 if k == "converged" else data[k], {"long_name": v}) for k, v in RECORDED.items()}
    ds = xr.Dataset(variables, coords={"unit": units, "form": list(FORMS), "width": widths, "length": lengths,
                                       "seed": seeds}, attrs=attrs)
    ds["readout_width"] = (("unit", "width"), readout, {"long_name": "the read-out's fan-in N_out"})
    ds["seconds"] = (("unit", "form"), seconds, {"long_name": "wall time", "units": "s"})
    ds["mean_cosine"] = ds.cosine.mean("seed", skipna=True)
    ds["mean_cosine"].attrs["long_name"] = "cos(PC, BPTT), mean over seeds (converged inference only)"
    ds["fraction_converged"] = ds.converged.mean("seed")
    s1 = ds.s_minus_1.mean("seed")
    ratio = ds.length / ds.readout_width
    ds["slope"] = (("unit", "form"), np.array([[_slope(ratio.sel(unit=u).transpose("width", "length").values.ravel(),
                                                        s1.sel(unit=u, form=f).transpose("width", "length").values.ravel())
                                                 for f in FORMS] for u in units]),
                   {"long_name": "log-log slope of s - 1 against T/N_out (1: the law)"})
    defect = 1 - ds.mean_cosine
    ds["cosine_width_slope"] = (("unit", "form", "length"), np.array(
        [[[_slope(ds.readout_width.sel(unit=u).values.astype(float), defect.sel(unit=u, form=f, length=t).values)
           for t in lengths] for f in FORMS] for u in units]),
        {"long_name": "log-log slope of 1 - cos(PC, BPTT) against N_out (negative: cos -> 1 as N grows)"})
    return ds


def law_figure(ds: xr.Dataset):
    """Per unit: $1 - \\cos$ against the read-out width for each $T$, standard (dotted, hollow) and
    with the depth factor (solid); last panel: $s - 1$ against $T/N_{out}$ with the depth factor."""
    import matplotlib.pyplot as plt

    from dynlab.figures import finish_panels, label_panel, panel_grid

    units = list(ds.unit.values)
    fig, axes = panel_grid(len(units) + 1)
    for ax, unit in zip(axes, units):
        n = ds.readout_width.sel(unit=unit).values
        for k, length in enumerate(ds.length.values):
            for form, style in (("standard", ":"), ("T^-alpha", "-")):
                c = ds.cosine_unconverged.sel(unit=unit, form=form, length=length).mean("seed").values
                conv = ds.fraction_converged.sel(unit=unit, form=form, length=length).values
                defect = np.maximum(1 - c, 1e-7)
                ax.plot(n, defect, style, color=f"C{k}", lw=1,
                        label=f"T={int(length)}" if form == "T^-alpha" else None)
                ax.plot(n[conv == 1], defect[conv == 1], "o", ms=3, color=f"C{k}",
                        mfc=f"C{k}" if form == "T^-alpha" else "none")
                ax.plot(n[conv < 1], defect[conv < 1], "x", ms=5, color=f"C{k}")
        ax.set(xscale="log", yscale="log")
        ax.set_xticks(n, [str(int(v)) for v in n])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.yaxis.set_minor_formatter(plt.NullFormatter())
        slope = float(ds.slope.sel(unit=unit, form="T^-alpha"))
        fixed = f"; read-out fan-in {int(n[0])} at every width" if len(set(n.tolist())) == 1 else ""
        label_panel(ax, f"{unit}: s-1 slope {slope:.2f} with T^-{ds.attrs['alpha']:g}{fixed}", "read-out width N",
                    "1 - cos(PC, BPTT)")
    ax = axes[len(units)]
    ax.set(xscale="log", yscale="log")
    points = []
    for u, unit in enumerate(units):
        ratio = (ds.length / ds.readout_width.sel(unit=unit)).transpose("width", "length").values.ravel()
        s1 = ds.s_minus_1.sel(unit=unit, form="T^-alpha").mean("seed").transpose("width", "length").values.ravel()
        ax.plot(ratio, s1, "o", ms=3, color=f"C{u % 10}", label=unit)
        points += [(r, v) for r, v in zip(ratio, s1) if r > 0 and v > 0]
    if points:  # a guide of slope 1 through the points' geometric mean
        r, v = np.log(np.asarray(points)).mean(axis=0)
        grid = np.array([min(p[0] for p in points), max(p[0] for p in points)])
        ax.plot(grid, np.exp(v) * grid / np.exp(r), "k--", lw=0.8, label="slope 1")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.yaxis.set_minor_formatter(plt.NullFormatter())
    label_panel(ax, f"s - 1 with T^-{ds.attrs['alpha']:g}, every unit", "T / N_out", "s - 1")
    ax.legend(fontsize=5, ncol=2)
    return finish_panels(fig, axes, f"PC through time vs BPTT at initialisation — {ds.attrs.get('task', '')}; "
                                    "solid: depth factor T^-α and mean-field read-out, dotted: standard; x: not converged")


def law_summary(datasets: dict) -> str:
    """Per unit and form: the slope of s - 1 against T/N, cos at the widest network per length, converged."""
    from dynlab.scenarios.summary import text_table

    ds = datasets["law"]
    widest = ds.width.values[-1]
    rows = []
    for unit in ds.unit.values:
        for form in ds.form.values:
            cos = [ds.mean_cosine.sel(unit=unit, form=form, width=widest, length=t) for t in ds.length.values]
            rows.append([f"{unit} {form}", f"{float(ds.slope.sel(unit=unit, form=form)):.2f}",
                         *(f"{float(c):.3f}" if np.isfinite(float(c)) else "—" for c in cos),
                         f"{float(ds.fraction_converged.sel(unit=unit, form=form).mean()):.0%}"])
    return (f"cross-pc-law: slope of s-1 vs T/N (1: the law), cos(PC, BPTT) at width {int(widest)} (converged only):\n"
            + text_table(["unit, form", "slope", *(f"T={int(t)}" for t in ds.length.values), "converged"], rows,
                         max_rows=None))


@register("program", "cross-pc-law", "the width/length law of PC through time on every unit: s - 1 and cos(PC, BPTT) "
                                     "over width x length, standard and with a depth factor over time",
          figure=law_figure, summary=law_summary)
def run_cross_pc_law(
    out_dir,
    *,
    progress=None,
    units: list[str] = UNITS,
    widths: list[int] = (16, 64, 256),
    lengths: list[int] = (5, 20),
    seeds: list[int] = (0, 1),
    alpha: float = 1.0,
    gamma0: float = 1.0,
    task: str = "adding",
    batch_size: int = 16,
    inference: str = "lbfgs",
    inference_steps: int = 300,
    rtol: float = 1e-4,
    ftol: float = 1e-6,
    patience: int = 50,
    smoothing: list[float] | None = (1e-2, 1e-3),
    smoothing_x64: bool = False,
) -> dict:
    """Run the grid (module docstring); returns ``{"law": dataset}``, also written with its figure
    after every unit (finished units stay on disk)."""
    import equinox as eqx
    import jax

    from dynlab import experiment, memory_maps, store
    from dynlab.analyses.pc_bp import CompareConfig, length_task, run_sequence_cell
    from dynlab.rules.pc_time import rescaling

    rescaling = eqx.filter_jit(rescaling)  # compiled once per unit, form, width and length
    from dynlab.time_residual import TimeResidual, check_depth_factor

    units, seeds = check_units(units), [int(s) for s in seeds]
    widths, lengths = [int(w) for w in widths], [int(t) for t in lengths]
    check_depth_factor(alpha, gamma0)
    cfg = CompareConfig.from_options(model="rnn", energy="inference", steps=1, lr=1e-3, optimizer="adam",
                                     inference=inference, inference_steps=inference_steps, rtol=rtol, ftol=ftol,
                                     patience=patience, smoothing=list(smoothing) if smoothing else None,
                                     smoothing_x64=bool(smoothing) and smoothing_x64, batch_size=batch_size)
    make_task = length_task(task)
    configs = {(u, w, t, s): {"seed": s, "model": model_section(u, w), "task": {"name": task, "length": t}}
               for u in units for w in widths for t in lengths for s in seeds}
    for c in configs.values():  # every config valid before any work
        experiment.check(c)
    batches = {t: make_task(t).batch(jax.random.key(0), batch_size, "train") for t in lengths}
    shape = (len(units), len(FORMS), len(widths), len(lengths), len(seeds))
    data = {k: np.full(shape, np.nan) for k in RECORDED}
    readout = np.zeros((len(units), len(widths)), np.int64)
    seconds = np.zeros(shape[:2])
    attrs = dict(analysis="cross-pc-law", scenario="cross-pc-law", task=f"{task} (loss {make_task(lengths[0]).loss})",
                 alpha=float(alpha), gamma0=float(gamma0), batch_size=batch_size, inference=inference,
                 inference_steps=inference_steps, rtol=rtol, ftol=ftol, patience=patience,
                 smoothing=", ".join(f"{w:g}" for w in smoothing) if smoothing else "none",
                 smoothing_precision="float64" if smoothing and smoothing_x64 else "float32")
    out = Path(out_dir)
    total = len(units) * len(FORMS)
    if progress is not None:
        progress(0, total, {})
    for i, unit in enumerate(units):
        for f, form in enumerate(FORMS):
            t0 = time.perf_counter()
            for a, width in enumerate(widths):
                for b, length in enumerate(lengths):
                    x, y, mask = batches[length]
                    for j, seed in enumerate(seeds):
                        exp = experiment.build(configs[unit, width, length, seed])
                        model = exp.model
                        readout[i, a] = model.readout.in_features
                        if form != "standard":
                            model = TimeResidual(model, length, alpha=alpha, gamma0=gamma0)
                        res = jax.device_get(run_sequence_cell(model, x, y, mask, cfg, exp.task.loss, plain=True))
                        first = {k: float(np.asarray(v)[0]) for k, v in res.items()}  # the step at initialisation
                        first["cosine_unconverged"] = first["cosine"]
                        first["cosine"] = first["cosine"] if first["converged"] else np.nan
                        first["s_minus_1"] = float(rescaling(model, x, mask))  # res's is the linear networks' only
                        for k in RECORDED:
                            data[k][i, f, a, b, j] = first[k]
                    memory_maps.relieve()  # many compiled programs in one process (dynlab.memory_maps)
            seconds[i, f] = time.perf_counter() - t0
            if progress is not None:
                progress(i * len(FORMS) + f + 1, total, {"unit": unit, "form": form,
                                                          "conv": float(np.nanmean(data["converged"][i, f]))})
        law = _dataset(data, readout, seconds, units, widths, lengths, seeds, attrs)
        store.write_dataset(out / "pc_law.nc", law)
    store.write_figure(out / "pc_law.png", law_figure(law))
    return {"law": law}
