r"""Scenario ``cross-pc-alignment``: PC through time against BPTT on every unit, across width and
sequence length.

For each unit of [`UNITS`][dynlab.scenarios.every_unit.UNITS] at each ``width``
([`model_section`][dynlab.scenarios.every_unit.model_section]), each sequence ``length`` $T$ of ``task`` and
each seed, the same initial model and the same fixed batch are trained for ``steps`` steps twice
from identical weights: once with the PC-through-time gradient ([`dynlab.rules.pc_time`][]:
activities for every step, inferred in parallel over $t$ from the forward pass until the
worst-sample convergence criterion holds, then the local weight gradient) and once with BPTT of the
same objective. Inference is the value ``inference`` spells ([`dynlab.rules.pc_inference.from_config`][];
default ``lbfgs``: L-BFGS in the error coordinates, at most ``inference_steps`` = 1000 steps per
solve, a sample given up once its gradient has not halved in ``patience`` = 50; ``gauss-newton`` and
``levenberg-marquardt`` the same way; ``discrete`` runs ``activity_optimizer`` at step ``beta``), until
the criterion holds: the worst sample's $|\nabla_z\mathcal F|$ at most ``rtol`` = 1e-4 of its
value at the forward pass and a relative energy change of at most ``ftol`` = 1e-6 over the last
step. Every step records the cosine between the PC and the BPTT gradient at the PC network (NaN
where inference did not converge; ``cosine_unconverged`` keeps them), both losses, the energy,
the inference steps and what inference left (``grad_ratio`` = $g/g_0$, ``energy_change``)
([`dynlab.analyses.pc_bp.run_sequence_cell`][], ``plain=True``: Adam at ``lr`` for both rules,
no width parameterisation, since the units have none).

Heavy-ball momentum (β = 0.1, 1000 steps) converged on the ARU, GRU, LSTM and block-diagonal RNN,
on 67% of the tanh RNN's cells and never on the ELM neuron, the ELM network and SITH-RNN.
L-BFGS in the error coordinates converges on all cells of the first five (Gauss–Newton and
Levenberg–Marquardt on most: each stalls on some of the tanh and block-diagonal RNN's cells). The last
three have energies that are not differentiable (ReLU kinks in the ELM neuron's MLP and the ELM
network's read-out, a max over τ in SITH-RNN) and minima on those kinks, where no gradient vanishes
([`dynlab.rules.pc_inference`][]). For them ``smoothing`` (default ``[1e-2, 1e-3]``; ``[]`` turns it
off) runs the same method on energies smoothed to within each width in turn
([`Smoothed`][dynlab.rules.pc_inference.Smoothed]); the other units' energies have no kinks and are
inferred exactly as without it (and so are units whose exact solve converges). At width $10^{-3}$
SITH-RNN's log-sum-exp over 50 time cells has a curvature of $\ln 50 / 10^{-3}$, and the float32
energy stops resolving L-BFGS's progress at $g/g_0 = 2\cdot10^{-3}$–$8\cdot10^{-2}$ (its float32
gradient there agrees with float64's): in float32 SITH-RNN converged on 6 of 36 steps. Hence
``smoothing_x64`` (default true): the smoothed solves run in float64 and their result comes back
in float32 ([`Smoothed`][dynlab.rules.pc_inference.Smoothed]; on the width-64, $T = 50$ cell the
$10^{-2}$ solve takes 70 steps in float64 against 296 in float32), without the exact solve's
patience, within the budget of 1000 steps. Measured on the full grid: every unit converges on
all 36 steps (times in ``seconds``; the grid's cells run in ``workers`` = 2 processes,
[`dynlab.processes`][], with the same numbers as in one). Cells that did not converge keep their cosines only in
``cosine_unconverged``, and the figure marks them hollow.

What to expect: the PC gradient tends to BPTT's as the equilibrium errors vanish; for a linear
RNN under the mean-field parameterisation that is wide networks and short sequences (``pc-bptt``,
cosine ≥ 0.99 at $N = 256$, $T = 5$). Here every unit is in its own standard parameterisation, so
the width trend is each unit's own.

**Reference, the theory's case**: the linear RNN under the mean-field parameterisation
(``rnn-param``, [`dynlab.analyses.pc_bp.compare_pc_bptt`][], exact equilibrium, Adam with the
parameterisation's rates) over ``reference_widths`` × ``reference_lengths``, ``reference_steps``
steps — the width × length law (cosine → 1 as $T/N \to 0$, $s - 1 \propto T/N$) at full size.

Writes ``pc_alignment.nc`` (dims ``unit``, ``width``, ``length``, ``seed``, ``step``; ``mean_cosine``
over ``unit``, ``width``, ``length``), ``pc_alignment.png``, and for the reference ``linear_rnn.nc``
(the ``pc-bptt`` dataset), ``linear_rnn_cosine.png`` and ``linear_rnn_rescaling.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.errors import require_positive
from dynlab.registry import register
from dynlab.scenarios.every_unit import UNITS, check_units, model_section

RECORDED = {
    "cosine": "cosine of the PC and BPTT gradients (NaN where inference did not converge)",
    "cosine_unconverged": "cosine of the PC and BPTT gradients, converged or not",
    "loss_pc": "loss of the PC-trained network (1/2P sum over scored steps of |y - f|^2)",
    "loss_bp": "loss of the BPTT-trained network",
    "energy": "PC energy after inference",
    "converged": "inference met its convergence criterion",
    "inference_steps": "inference steps taken",
    "grad_ratio": "final residual of inference: worst-sample |grad_z F| / its initial value",
    "energy_change": "relative energy change over inference's last step",
    "smoothing": "width of the smoothed energy inference ran on last (0: the exact energy; smoothing)",
}


def pc_alignment(ds: xr.Dataset):
    """One panel per unit: the PC–BPTT gradient cosine against sequence length, one line per width
    (mean over seeds and training steps). Filled markers: inference converged at every step;
    hollow: it did not always (the cosine is then that of the unconverged activities)."""
    from dynlab.figures import finish_panels, label_panel, panel_grid
    import matplotlib.ticker

    fig, axes = panel_grid(ds.sizes["unit"])
    cos = ds.cosine_unconverged.mean(("seed", "step"))
    for ax, unit in zip(axes, ds.unit.values):
        for width in ds.width.values:
            c, conv = cos.sel(unit=unit, width=width).values, ds.fraction_converged.sel(unit=unit, width=width).values
            line, = ax.plot(ds.length, c, "-", label=f"N={int(width)}")
            ax.plot(ds.length.values[conv == 1], c[conv == 1], "o", ms=4, color=line.get_color())
            ax.plot(ds.length.values[conv < 1], c[conv < 1], "o", ms=5, mfc="none", color=line.get_color())
        ax.set_xscale("log")
        ax.set_xticks(ds.length.values, [str(int(t)) for t in ds.length.values])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_ylim(min(0.0, float(np.nanmin(cos.values))), 1.02)
        ax.axhline(1, color="k", lw=0.5)
        label_panel(ax, f"{unit}: converged {100 * float(ds.fraction_converged.sel(unit=unit).mean()):.0f}%"
                        + _smoothed(ds, unit), "sequence length T", "cos(PC, BPTT)")
    return finish_panels(fig, axes, f"PC through time vs BPTT gradient alignment — {ds.attrs.get('task', '')}; "
                                    "hollow: inference not converged")


def _smoothed(ds: xr.Dataset, unit, width=None) -> str:
    """``", smoothed to μ = …"`` where inference ran on a smoothed energy (``smoothing``), else ``""``."""
    if "smoothing" not in ds:  # written before smoothing existed
        return ""
    cells = ds.smoothing.sel(unit=unit) if width is None else ds.smoothing.sel(unit=unit, width=width)
    widest = float(cells.max())
    return f", smoothed to μ = {widest:g}" if widest > 0 else ""


def alignment_summary(datasets: dict) -> str:
    """Per unit and width: cos(PC, BPTT) at each sequence length (mean over seeds and training
    steps, converged inference only) and the fraction of steps whose inference converged."""
    from dynlab.scenarios.summary import text_table

    ds = datasets["pc_alignment"]
    lengths = ds.length.values
    def cos(u, w, t):
        value = float(ds.mean_cosine.sel(unit=u, width=w, length=t))
        return f"{value:.3f}" if np.isfinite(value) else "—"  # no converged step

    rows = [[f"{u} N={int(w)}", *(cos(u, w, t) for t in lengths),
             f"{float(ds.fraction_converged.sel(unit=u, width=w).mean()):.0%}{_smoothed(ds, u, w)}"]
            for u in ds.unit.values for w in ds.width.values]
    return ("cross-pc-alignment: cos(PC, BPTT), mean over seeds and steps (converged inference only; —: none):\n"
            + text_table(["unit, width", *(f"T={int(t)}" for t in lengths), "converged"], rows, max_rows=None))


@register("program", "cross-pc-alignment", "PC through time vs BPTT on every unit: gradient cosine over width x sequence length",
          figure=pc_alignment, summary=alignment_summary)
def run_cross_pc(
    out_dir,
    *,
    progress=None,
    units: list[str] = UNITS,
    widths: list[int] = (16, 64),
    lengths: list[int] = (5, 20, 50),
    seeds: list[int] = (0, 1),
    task: str = "adding",
    steps: int = 3,
    batch_size: int = 16,
    lr: float = 1e-3,
    inference: str = "lbfgs",
    inference_steps: int = 1000,
    activity_optimizer: str = "momentum",
    beta: float = 0.1,
    rtol: float = 1e-4,
    ftol: float = 1e-6,
    patience: int = 50,
    smoothing: list[float] | None = (1e-2, 1e-3),
    smoothing_x64: bool = True,
    workers: int = 2,
    reference_widths: list[int] = (16, 64, 256),
    reference_lengths: list[int] = (2, 8, 32),
    reference_steps: int = 100,
) -> dict:
    """Run the grid; returns ``{"pc_alignment": dataset, "linear_rnn": dataset}`` (also written with
    their figures). ``reference_widths`` empty skips the linear-RNN reference (module doc)."""
    from dynlab import experiment, processes, store
    from dynlab.analyses.pc_bp import CompareConfig, compare_pc_bptt, length_task
    from dynlab.analyses.pc_bp_figures import cosine_heatmap, rescaling_vs_l_over_n

    units, seeds = check_units(units), [int(s) for s in seeds]
    widths, lengths = [int(w) for w in widths], [int(t) for t in lengths]
    options = dict(model="rnn", energy="inference", steps=steps, lr=lr, optimizer="adam", beta=beta,
                   inference=inference, activity_optimizer=activity_optimizer,
                   inference_steps=inference_steps, rtol=rtol, ftol=ftol, patience=patience,
                   smoothing=list(smoothing) if smoothing else None,
                   smoothing_x64=bool(smoothing) and smoothing_x64, batch_size=batch_size)
    CompareConfig.from_options(**options)  # every setting valid before any work
    require_positive("workers", workers)
    for u in units:
        for w in widths:
            for t in lengths:
                experiment.check(_cell_config(u, w, t, seeds[0], task))
    shape = (len(units), len(widths), len(lengths), len(seeds), steps)
    data = {k: np.full(shape, np.nan) for k in RECORDED}
    seconds = np.zeros(shape[:3])
    attrs = dict(analysis="cross-pc-alignment", scenario="cross-pc-alignment",
                 task=f"{task} (loss {length_task(task)(lengths[0]).loss})", steps=steps, batch_size=batch_size, lr=lr,
                 inference=inference, inference_steps=inference_steps, beta=beta, rtol=rtol, ftol=ftol, patience=patience,
                 smoothing=", ".join(f"{w:g}" for w in smoothing) if smoothing else "none",
                 smoothing_precision="float64" if smoothing and smoothing_x64 else "float32",
                 optimizer="adam (plain, both rules)", activity_optimizer=activity_optimizer)
    out = Path(out_dir)
    # the cells, largest first (width x length: the longest inferences), so no long one is left to the end
    cells = sorted(((i, a, b) for i in range(len(units)) for a in range(len(widths)) for b in range(len(lengths))),
                   key=lambda c: -widths[c[1]] * lengths[c[2]])
    tasks = [(units[i], widths[a], lengths[b], seeds, task, options) for i, a, b in cells]
    if progress is not None:
        progress(0, len(cells), {})  # the total from the start, not after the first cell
    for done, (n, (records, took)) in enumerate(processes.completed(alignment_cell, tasks, workers), start=1):
        i, a, b = cells[n]
        for k in RECORDED:
            data[k][i, a, b] = records[k]
        seconds[i, a, b] = took
        if progress is not None:
            progress(done, len(cells), {"unit": units[i], "N": widths[a], "T": lengths[b],
                                        "cos": float(np.nanmean(records["cosine_unconverged"])),
                                        "conv": float(np.mean(records["converged"]))})
        ds = _dataset(data, seconds, units, widths, lengths, seeds, steps, attrs)
        store.write_dataset(out / "pc_alignment.nc", ds)  # after every cell: finished cells stay on disk
    store.write_figure(out / "pc_alignment.png", pc_alignment(ds))
    if not reference_widths:
        return {"pc_alignment": ds}
    linear = compare_pc_bptt(task, list(reference_widths), list(reference_lengths), seeds, steps=reference_steps,
                             param="mf", activation="linear", energy="closed-form", batch_size=32)
    store.write_dataset(out / "linear_rnn.nc", linear)
    store.write_figure(out / "linear_rnn_cosine.png", cosine_heatmap(linear))
    store.write_figure(out / "linear_rnn_rescaling.png", rescaling_vs_l_over_n(linear))
    return {"pc_alignment": ds, "linear_rnn": linear}


def _cell_config(unit: str, width: int, length: int, seed: int, task: str) -> dict:
    return {"seed": seed, "model": model_section(unit, width), "task": {"name": task, "length": length}}


def alignment_cell(unit: str, width: int, length: int, seeds: list[int], task: str, options: dict
                   ) -> tuple[dict[str, np.ndarray], float]:
    """One cell of ``cross-pc-alignment`` (a worker process's task, [`dynlab.processes`][]): ``unit`` at
    ``width`` on ``task`` of ``length`` steps, trained from each seed's weights on the same fixed batch
    (key 0) by PC through time and BPTT ([`run_sequence_cell`][dynlab.analyses.pc_bp.run_sequence_cell]);
    the [`RECORDED`][] arrays ``[seed, step]`` and the seconds it took."""
    import jax

    from dynlab import experiment, memory_maps
    from dynlab.analyses.pc_bp import CompareConfig, length_task, run_sequence_cell

    start = time.perf_counter()
    cfg = CompareConfig.from_options(**options)
    x, y, mask = length_task(task)(length).batch(jax.random.key(0), options["batch_size"], "train")
    out = {k: [] for k in RECORDED}
    for seed in seeds:
        exp = experiment.build(_cell_config(unit, width, length, seed, task))
        res = jax.device_get(run_sequence_cell(exp.model, x, y, mask, cfg, exp.task.loss, plain=True))
        res["cosine_unconverged"] = res["cosine"]
        res["cosine"] = np.where(res["converged"], res["cosine"], np.nan)
        for k in RECORDED:
            out[k].append(np.asarray(res[k], np.float64))
    memory_maps.relieve()  # many compiled programs in one process (dynlab.memory_maps)
    return {k: np.stack(v) for k, v in out.items()}, time.perf_counter() - start


def _dataset(data, seconds, units, widths, lengths, seeds, steps, attrs) -> xr.Dataset:
    """The scenario's dataset from the recorded arrays (NaN where a cell has not run yet)."""
    dims = ("unit", "width", "length", "seed", "step")
    variables = {k: (dims, data[k] == 1 if k == "converged" else data[k], {"long_name": v}) for k, v in RECORDED.items()}
    ds = xr.Dataset(variables, coords={"unit": units, "width": widths, "length": lengths, "seed": seeds,
                                       "step": np.arange(steps)}, attrs=attrs)
    ds["mean_cosine"] = ds.cosine.mean(("seed", "step"), skipna=True)
    ds["mean_cosine"].attrs["long_name"] = "cosine averaged over seeds and steps (converged steps only)"
    ds["fraction_converged"] = ds.converged.mean(("seed", "step"))
    ds["seconds"] = (("unit", "width", "length"), seconds, {"long_name": "wall time per cell (all seeds)", "units": "s"})
    return ds


# ------------------------------------------------------------------------------------------------
# The width/length law of PC through time (issue 21, item 4)

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
    store.write_figure(out / "pc_time_law.png", law_figure(law))
    return {"law": law}


def law_figure(law):
    """Left: $s - 1$ against $T/N$ per recurrence (fitted slope in the legend; dashed: the large-$N$
    prediction). Right: $1 - \\cos$ against $N$ for each $T$, plain (dotted) and $T^{-1}$ (solid)."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    ratio = law.T_over_N if "T_over_N" in law else law.length / law.width
    for rec in law.recurrence.values:
        sel = law.sel(recurrence=rec)
        x, y = np.asarray(ratio).ravel(), sel.s_minus_1.values.ravel()
        order = np.argsort(x)
        line, = left.plot(x[order], y[order], "o", ms=4, label=f"{rec}: slope {float(sel.slope):.2f}")
        theory = sel.s_minus_1_theory.values.ravel()
        if np.isfinite(theory).any():
            left.plot(x[order], theory[order], "--", lw=0.8, color=line.get_color())
    left.set(xscale="log", yscale="log", xlabel="T / N", ylabel="s - 1", title="energy rescaling (linear RNN, mean-field)")
    left.legend(fontsize=7)
    styles = {"plain": ":", "T^-1": "-"}
    for rec, style in styles.items():
        if rec not in law.recurrence.values:
            continue
        for i, length in enumerate(law.length.values):
            defect = 1 - law.mean_cosine.sel(recurrence=rec, length=length).values
            right.plot(law.width.values, np.maximum(defect, 1e-8), style, marker="o", ms=3, color=f"C{i}",
                       label=f"{rec}, T={int(length)}")
    right.set(xscale="log", yscale="log", xlabel="width N", ylabel="1 - cos(PC, BPTT)", title="alignment as N grows")
    right.set_xticks(law.width.values, [str(int(n)) for n in law.width.values])
    right.xaxis.set_minor_formatter(plt.NullFormatter())
    right.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig
