r"""Scenario ``cross-pc-alignment``: PC through time against BPTT on every unit, across width and
sequence length.

For each unit of :data:`~dynlab.scenarios.every_unit.UNITS` at each ``width``
(:func:`~dynlab.scenarios.every_unit.model_section`), each sequence ``length`` $T$ of ``task`` and
each seed, the same initial model and the same fixed batch are trained for ``steps`` steps twice
from identical weights: once with the PC-through-time gradient (:mod:`dynlab.rules.pc_time`:
activities for every step, inferred in parallel over $t$ from the forward pass until the
worst-sample convergence criterion holds, then the local weight gradient) and once with BPTT of the
same objective. Inference runs heavy-ball momentum (0.9) on the activities with step ``beta`` =
0.1 for at most ``inference_steps`` = 1000 steps, until the gradient norm falls to ``rtol`` = 1e-4 of
its initial value (plain gradient descent at β = 0.3 left the gated units converged but the slow
ones below). Every step records the cosine between the PC and the BPTT gradient at the PC
network (NaN where inference did not converge; ``cosine_unconverged`` keeps them), both losses, the
energy and the inference steps (:func:`dynlab.analyses.pc_bp.run_sequence_cell`, ``plain=True``:
Adam at ``lr`` for both rules, no width parameterisation, since the units have none).

Units with slow memory — the ELM neuron and network (τ up to 100–500 steps) and SITH-RNN
(frozen decays up to 81 steps) — make the energy ill-conditioned: at width 8, T = 20, neither
3000 steps of gradient descent, 2000 of momentum nor the diffrax gradient flow met the criterion,
and their cosines (ELM neuron and SITH-RNN 0.72–0.88, ELM network −0.06 to 0.82, depending on the
optimiser) are those of
unconverged activities. The dataset keeps both; the figure marks them hollow.

What to expect: the PC gradient tends to BPTT's as the equilibrium errors vanish; for a linear
RNN under the mean-field parameterisation that is wide networks and short sequences (``pc-bptt``,
cosine ≥ 0.99 at $N = 256$, $T = 5$). Here every unit is in its own standard parameterisation, so
the width trend is each unit's own.

**Reference, the theory's case**: the linear RNN under the mean-field parameterisation
(``rnn-param``, :func:`dynlab.analyses.pc_bp.compare_pc_bptt`, exact equilibrium, Adam with the
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
}


@register("program", "cross-pc-alignment", "PC through time vs BPTT on every unit: gradient cosine over width x sequence length")
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
    inference_steps: int = 1000,
    activity_optimizer: str = "momentum",
    beta: float = 0.1,
    rtol: float = 1e-4,
    reference_widths: list[int] = (16, 64, 256),
    reference_lengths: list[int] = (2, 8, 32),
    reference_steps: int = 100,
) -> dict:
    """Run the grid; returns ``{"pc_alignment": dataset, "linear_rnn": dataset}`` (also written with
    their figures). ``reference_widths`` empty skips the linear-RNN reference (module doc)."""
    import jax

    from dynlab import experiment, store
    from dynlab.analyses.pc_bp import CompareConfig, compare_pc_bptt, length_task, run_sequence_cell
    from dynlab.figures_cross import pc_alignment
    from dynlab.analyses.pc_bp_figures import cosine_heatmap, rescaling_vs_l_over_n

    units, seeds = check_units(units), [int(s) for s in seeds]
    widths, lengths = [int(w) for w in widths], [int(t) for t in lengths]
    cfg = CompareConfig(model="rnn", energy="inference", steps=steps, lr=lr, optimizer="adam", beta=beta,
                        activity_optimizer=activity_optimizer,
                        inference_steps=inference_steps, rtol=rtol, batch_size=batch_size)
    make_task = length_task(task)
    configs = {(u, w, t, s): {"seed": s, "model": model_section(u, w), "task": {"name": task, "length": t}}
               for u in units for w in widths for t in lengths for s in seeds}
    for c in configs.values():  # every config valid before any work
        experiment.check(c)
    batches = {t: make_task(t).batch(jax.random.key(0), batch_size, "train") for t in lengths}
    shape = (len(units), len(widths), len(lengths), len(seeds), steps)
    data = {k: np.full(shape, np.nan) for k in RECORDED}
    seconds = np.zeros(shape[:3])
    attrs = dict(analysis="cross-pc-alignment", scenario="cross-pc-alignment",
                 task=f"{task} (loss {make_task(lengths[0]).loss})", steps=steps, batch_size=batch_size, lr=lr,
                 inference_steps=inference_steps, beta=beta, rtol=rtol, optimizer="adam (plain, both rules)",
                 activity_optimizer=activity_optimizer)
    out = Path(out_dir)
    done, total = 0, len(units) * len(widths) * len(lengths)
    for i, unit in enumerate(units):
        for a, width in enumerate(widths):
            for b, length in enumerate(lengths):
                t0 = time.perf_counter()
                x, y, mask = batches[length]
                for j, seed in enumerate(seeds):
                    exp = experiment.build(configs[unit, width, length, seed])
                    res = jax.device_get(run_sequence_cell(exp.model, x, y, mask, cfg, exp.task.loss, plain=True))
                    res["cosine_unconverged"] = res["cosine"]
                    res["cosine"] = np.where(res["converged"], res["cosine"], np.nan)
                    for k in RECORDED:
                        data[k][i, a, b, j] = np.asarray(res[k], np.float64)
                seconds[i, a, b] = time.perf_counter() - t0
                done += 1
                if progress is not None:
                    progress(done, total, {"unit": unit, "N": width, "T": length,
                                           "cos": float(np.nanmean(data["cosine_unconverged"][i, a, b])),
                                           "conv": float(np.mean(data["converged"][i, a, b]))})
        ds = _dataset(data, seconds, units, widths, lengths, seeds, steps, attrs)
        store.write_dataset(out / "pc_alignment.nc", ds)  # after every unit: finished units stay on disk
    store.write_figure(out / "pc_alignment.png", pc_alignment(ds))
    if not reference_widths:
        return {"pc_alignment": ds}
    linear = compare_pc_bptt(task, list(reference_widths), list(reference_lengths), seeds, steps=reference_steps,
                             param="mf", activation="linear", energy="closed-form", batch_size=32)
    store.write_dataset(out / "linear_rnn.nc", linear)
    store.write_figure(out / "linear_rnn_cosine.png", cosine_heatmap(linear))
    store.write_figure(out / "linear_rnn_rescaling.png", rescaling_vs_l_over_n(linear))
    return {"pc_alignment": ds, "linear_rnn": linear}


def _dataset(data, seconds, units, widths, lengths, seeds, steps, attrs) -> xr.Dataset:
    """The scenario's dataset from the recorded arrays (NaN where a unit has not run yet)."""
    dims = ("unit", "width", "length", "seed", "step")
    variables = {k: (dims, data[k] == 1 if k == "converged" else data[k], {"long_name": v}) for k, v in RECORDED.items()}
    ds = xr.Dataset(variables, coords={"unit": units, "width": widths, "length": lengths, "seed": seeds,
                                       "step": np.arange(steps)}, attrs=attrs)
    ds["mean_cosine"] = ds.cosine.mean(("seed", "step"), skipna=True)
    ds["mean_cosine"].attrs["long_name"] = "cosine averaged over seeds and steps (converged steps only)"
    ds["fraction_converged"] = ds.converged.mean(("seed", "step"))
    ds["seconds"] = (("unit", "width", "length"), seconds, {"long_name": "wall time per cell (all seeds)", "units": "s"})
    return ds
