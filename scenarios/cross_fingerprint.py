r"""Scenario ``cross-fingerprint``: a dynamical fingerprint of every unit trained on one task: its
fixed and slow points, its covariant Lyapunov vectors, and how similar its dynamics are to the
other units' (and to another seed of itself).

Each unit of [`UNITS`][dynlab.scenarios.every_unit.UNITS] is trained exactly as in
``cross-lyapunov`` ([`training_configs`][dynlab.scenarios.cross_lyapunov.training_configs]: BPTT on
``task``, every unit at the same ``width``), once per seed; at the defaults of both scenarios these
are the same trained networks whose Lyapunov spectra ``cross-lyapunov`` reports. Then, for each trained network, the
registered analyses run on its full state map under the task's own inputs:

- ``fixed-points`` ([`dynlab.analyses.fixed_points`][]): speed minimisation from ``fp_ics``
  initial states per round (visited states, probe trajectories and perturbations of them,
  [`dynlab.analyses.fixed_points.coverage`][]) at the task's mean input; the number of fixed ($q \le$ ``q_tol``) and slow
  points, each point's unstable directions ($|\mu| > 1 + $ ``marginal_tol``) and its stability class;
- ``clv`` ([`dynlab.analyses.clv`][]): the ``clv_k`` leading covariant Lyapunov vectors over
  ``clv_steps`` steps; the median and smallest angle between CLV 1 and the span of the others
  (hyperbolicity: near 0 means tangencies) and the median angle between CLV 1 and the read-out
  subspace (against that of a random direction);
- DSA ([`dsa_models`][dynlab.analyses.dsa.model.dsa_models], what the ``dsa`` analysis runs on run
  directories): every trained model (all units × seeds) driven by the same ``dsa_trials``
  held-out samples of the task, one distance matrix over them, so it holds both the distance between units and that between seeds
  of one unit (the noise floor a between-unit distance must clear).

Writes ``runs/<unit>-seed<k>/`` (the trained runs, each with its ``fixed-points.nc`` and
``clv.nc``), ``fixed_points.nc`` (dims ``unit``, ``seed``, ``stability``, ``point``: counts of
fixed and slow points, per-class counts, per-point unstable directions and speed, padded with -1 /
NaN), ``clv.nc`` (``unit``, ``seed``, ``vector``: the angle summaries and CLV exponents, held-out
loss), ``dsa.nc`` (the ``dsa`` dataset over ``run`` = "unit sSEED", with ``unit`` and
``train_seed`` along it) and ``fingerprint.png``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import xarray as xr

from dynlab.errors import ConfigError
from dynlab.provenance import stamp
from dynlab.registry import register
from dynlab.scenarios.every_unit import UNITS, check_units

STABILITY = ("stable", "marginal", "saddle", "unstable")
"""The stability classes of the ``fixed-points`` analysis (``dynlab.analyses.fixed_points.STABILITY_CLASSES``)."""

CLASS_COLORS = {"stable": "tab:blue", "marginal": "tab:olive", "saddle": "tab:orange", "unstable": "tab:red"}


# ------------------------------------------------------------------------------------------------
# figure and summary


def _parts(datasets) -> dict:
    """``{"fixed_points": ds, "clv": ds, "dsa": ds}`` from a dict of them or one or more datasets
    (each recognised by its variables)."""
    if isinstance(datasets, dict):
        datasets = list(datasets.values())
    elif isinstance(datasets, xr.Dataset):
        datasets = [datasets]
    out = {}
    for ds in datasets:
        if "n_points" in ds:
            out["fixed_points"] = ds
        elif "median_angle_rest" in ds and "unit" in ds.dims:
            out["clv"] = ds
        elif "distance" in ds:
            out["dsa"] = ds
    return out


def fingerprint_figure(datasets):
    """Up to three panels, one per part given (a dict of the datasets, or one of them): left, the
    fixed and slow points of every unit stacked by stability class (mean over seeds) with the
    largest number of unstable directions above each bar; middle, the angle between CLV 1 and the
    span of the others (median: filled, smallest: hollow) and between CLV 1 and the read-out
    (crosses), every seed; right, the DSA distance matrix over all units and seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dynlab.figures import legend_beside

    parts = _parts(datasets)
    if not parts:
        raise ConfigError("no cross-fingerprint part (fixed points, CLV or DSA) in the dataset(s)")
    n_runs = parts["dsa"].sizes["run"] if "dsa" in parts else 0
    widths = [1.0 if p != "dsa" else max(1.2, 0.1 * n_runs) for p in parts]
    fig, axes = plt.subplots(1, len(parts), figsize=(sum(4.6 * w for w in widths) + 0.5, max(4.2, 0.3 * n_runs + 1.5)),
                             gridspec_kw={"width_ratios": widths}, squeeze=False)
    axes = dict(zip(parts, axes[0]))
    if "fixed_points" in parts:
        ds, ax = parts["fixed_points"], axes["fixed_points"]
        x = np.arange(ds.sizes["unit"])
        bottom = np.zeros(len(x))
        for cls in ds.stability.values:
            h = ds.class_count.sel(stability=cls).mean("seed").values
            ax.bar(x, h, 0.7, bottom=bottom, color=CLASS_COLORS.get(str(cls)), label=str(cls))
            bottom += np.nan_to_num(h)
        for xi, unit in zip(x, ds.unit.values):
            top = ds.max_unstable.sel(unit=unit).max("seed")
            if np.isfinite(top) and top >= 0:
                ax.text(xi, bottom[xi], f"{int(top)}", ha="center", va="bottom", fontsize=7)
        ax.set_ylim(0, 1.25 * max(float(np.nanmax(bottom)), 1.0))  # room for the labels and the legend
        ax.set_xticks(x, ds.unit.values, rotation=30, fontsize=8)
        ax.set(ylabel="points (mean over seeds)",
               title=f"fixed and slow points by stability\n(above: most unstable directions at a point; q ≤ {ds.attrs.get('q_max', '?')})")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7, ncol=2)
    if "clv" in parts:
        ds, ax = parts["clv"], axes["clv"]
        x = np.arange(ds.sizes["unit"])
        n_seed = ds.sizes["seed"]
        offsets = (np.arange(n_seed) - (n_seed - 1) / 2) * 0.12
        for j, seed in enumerate(ds.seed.values):
            first = j == 0
            sel = ds.sel(seed=seed)
            ax.plot(x + offsets[j], np.degrees(sel.median_angle_rest), "o", color="tab:blue", ms=5,
                    label="CLV 1 ∠ span(rest), median" if first else None)
            ax.plot(x + offsets[j], np.degrees(sel.min_angle_rest), "o", mfc="none", color="tab:blue", ms=5,
                    label="… smallest" if first else None)
            ax.plot(x + offsets[j], np.degrees(sel.readout_angle_median), "x", color="tab:red", ms=5,
                    label="CLV 1 ∠ read-out, median" if first else None)
        ax.plot(x, np.degrees(ds.readout_random_angle), "_", color="tab:red", ms=14, alpha=0.5,
                label="random direction ∠ read-out")
        ax.set_xticks(x, ds.unit.values, rotation=30, fontsize=8)
        ax.set_ylim(0, 92)
        ax.set(ylabel="angle (degrees)", title=f"leading covariant Lyapunov vector (k = {ds.sizes['vector']})")
        ax.title.set_fontsize(9)
        legend_beside(ax, below=True, fontsize=6.5)
    if "dsa" in parts:
        ds, ax = parts["dsa"], axes["dsa"]
        labels = [str(v) for v in ds.run.values]
        d = ds.distance.values
        im = ax.imshow(d, cmap="viridis", vmin=0.0, vmax=max(float(np.nanmax(d)), 1e-12))
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        if "unit" in ds.coords:  # lines between units
            units = [str(u) for u in ds.unit.values]
            for i in range(1, len(units)):
                if units[i] != units[i - 1]:
                    ax.axhline(i - 0.5, color="w", lw=0.8)
                    ax.axvline(i - 0.5, color="w", lw=0.8)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="DSA distance (rad)")
        ax.set_title(f"dynamical similarity, {ds.attrs.get('trials', '?')} test trials, rank {ds.attrs.get('rank', '?')}",
                     fontsize=9)
    fig.suptitle(f"dynamical fingerprint of every unit after training — {next(iter(parts.values())).attrs.get('task', '')}",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _per_seed(values, fmt="d") -> str:
    """Per-seed values joined by ``/`` (``—`` for a missing one)."""
    return "/".join("—" if not np.isfinite(v) else format(int(v) if fmt == "d" else float(v), fmt)
                    for v in np.asarray(values, float).ravel())


def _range(values) -> str:
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v >= 0)]
    if v.size == 0:
        return "—"
    lo, hi = int(v.min()), int(v.max())
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def nearest_units(dsa: xr.Dataset) -> dict:
    """Per unit: ``(within, nearest, distance)``: the mean DSA distance between its own seeds (NaN
    with one seed), the other unit at the smallest mean distance over all pairs of their runs, and
    that distance."""
    units = np.array([str(u) for u in dsa.unit.values])
    d = dsa.distance.values
    out = {}
    for u in dict.fromkeys(units):
        own = units == u
        block = d[np.ix_(own, own)]
        within = float(block[~np.eye(own.sum(), dtype=bool)].mean()) if own.sum() > 1 else float("nan")
        others = {v: float(d[np.ix_(own, units == v)].mean()) for v in dict.fromkeys(units) if v != u}
        best = min(others, key=others.get) if others else "—"
        out[u] = (within, best, others.get(best, float("nan")))
    return out


def summary(datasets: dict) -> str:
    r"""One row per unit: held-out loss; fixed (and slow) points per seed; the smallest speed $q$ any
    minimisation reached (over seeds; above ``q_max`` = no point kept); the unstable
    directions over all points and seeds (min–max); the stability classes met; CLV 1's median and
    smallest angle to the span of the others and its median angle to the read-out (mean over
    seeds, degrees); the mean DSA distance between the unit's own seeds; and the nearest other
    unit by mean DSA distance."""
    from dynlab.scenarios.summary import text_table

    fp, clv, dsa = datasets["fixed_points"], datasets["clv"], datasets["dsa"]
    near = nearest_units(dsa)
    rows = []
    for u in fp.unit.values:
        f, c = fp.sel(unit=u), clv.sel(unit=u)
        fixed = "/".join("—" if not np.isfinite(a) else f"{int(a)}({int(b)})"
                         for a, b in zip(f.n_fixed.values.astype(float), f.n_slow.values.astype(float)))
        classes = ", ".join(f"{int(f.class_count.sel(stability=s).sum())} {s}" for s in f.stability.values
                            if f.class_count.sel(stability=s).sum() > 0) or "—"
        deg = lambda v: "—" if not np.isfinite(v) else f"{np.degrees(v):.1f}°"  # noqa: E731
        within, best, dist = near.get(str(u), (np.nan, "—", np.nan))
        rows.append([str(u), _per_seed(c.eval_loss.values, ".3g"), fixed, f"{float(f.min_q.min()):.1e}",
                     _range(f.n_unstable.values), classes,
                     deg(float(c.median_angle_rest.mean())), deg(float(c.min_angle_rest.min())),
                     deg(float(c.readout_angle_median.mean())),
                     "—" if not np.isfinite(within) else f"{within:.3f}",
                     f"{best} ({dist:.3f})" if np.isfinite(dist) else "—"])
    header = ["unit", "loss", "fixed(slow) pts", "min q", "unstable dims", "classes", "CLV∠rest med", "CLV∠rest min",
              "CLV1∠read-out", "DSA seeds", "nearest unit by DSA"]
    n = fp.sizes["seed"]
    return (f"cross-fingerprint: {fp.attrs.get('task', '')}, width {fp.attrs.get('width', '?')}; per seed (a/b) "
            f"or over {n} seed{'s' * (n > 1)}: points at the task's mean input, angles in degrees (CLV∠rest min: "
            "smallest over seeds and time), DSA distances in rad:\n" + text_table(header, rows))


# ------------------------------------------------------------------------------------------------
# the program


def check_params(*, units, seeds, **_) -> None:
    """Before any work: known, distinct units, at least two of them (DSA compares units), and
    at least one seed; one [`ConfigError`][dynlab.errors.ConfigError] line otherwise."""
    from dynlab.errors import DynlabError

    try:
        units = check_units(units)
    except ConfigError:
        raise
    except DynlabError as e:  # an unknown unit name: the registry's line, as a config error
        raise ConfigError(f"params.units: {e}") from None
    if len(set(units)) < len(units):
        raise ConfigError(f"params.units names a unit twice: {units}")
    if len(units) < 2:
        raise ConfigError(f"params.units must name at least 2 units (DSA compares units), got {units}")
    if isinstance(seeds, (str, int)) or not seeds:
        raise ConfigError(f"params.seeds must be a non-empty list of integers, got {seeds!r}")


def _analysis(name: str):
    from dynlab import registry

    return registry.get("analysis", name).obj


def _check_analyses(configs, fp_options: dict, clv_options: dict, dsa_options: dict, length: int) -> None:
    """The analyses' own checks on every unit's model (built abstractly), before any training."""
    import equinox as eqx

    from dynlab import experiment
    from dynlab.analyses.dsa import check_dsa

    check_dsa(**dsa_options, length=length)
    seen = set()
    for (unit, _), config in configs.items():
        if unit in seen:
            continue
        seen.add(unit)

        def hooks(config=config, unit=unit):
            model = experiment.build(config).model
            for name, options in (("fixed-points", fp_options), ("clv", clv_options)):
                try:
                    _analysis(name).check(model, **options)
                except ConfigError as e:
                    raise ConfigError(f"{unit}: {name}: {e}") from None

        eqx.filter_eval_shape(hooks)


@register("program", "cross-fingerprint",
          "fixed points, covariant Lyapunov vectors and DSA distances of every unit after training on one task",
          figure=fingerprint_figure, summary=summary)
def run_cross_fingerprint(
    out_dir,
    *,
    progress=None,
    units: list[str] = UNITS,
    width: int = 32,
    seeds: list[int] = (0, 1),
    task: str = "adding",
    length: int = 20,
    steps: int = 1500,
    batch_size: int = 64,
    lr: float = 3e-3,
    n_test: int = 1000,
    fp_ics: int = 64,
    fp_steps: int = 1000,
    fp_burn_in: int = 200,
    fp_max_steps: int = 1000,
    clv_k: int = 8,
    clv_steps: int = 1000,
    clv_transient: int = 500,
    dsa_trials: int = 32,
    dsa_delays: int = 5,
    dsa_rank: int = 10,
    dsa_pcs: int = 10,
    dsa_iterations: int = 1000,
    dsa_restarts: int = 4,
) -> dict:
    """Train every unit and seed, then fixed points, CLVs and DSA; returns ``{"fixed_points", "clv",
    "dsa"}`` datasets (also written).

    ``fp_*``: the ``fixed-points`` options ``ics``, ``steps`` (trajectory the initial states are
    drawn from), ``burn_in``, ``max_steps`` (solver); ``clv_*``: ``k``, ``steps`` and both
    transients of ``clv`` (window = ``clv_steps``); ``dsa_*``: the trials, ``n_delays``, ``rank``,
    ``pcs``, ``iterations`` and ``restarts`` of DSA (its inputs and restarts drawn from key 0).
    Every analysis runs under the task's inputs, seeded by the training seed.
    """
    import jax

    from dynlab import experiment, store
    from dynlab.analyses.dsa import dsa_models
    from dynlab.errors import DivergenceError, DynlabError
    from dynlab.perturbations import evaluate_under
    from dynlab.scenarios.cross_lyapunov import training_configs
    from dynlab.train import train

    check_params(units=units, seeds=seeds)
    units, seeds = list(units), [int(s) for s in seeds]
    out = Path(out_dir)
    configs = training_configs(units, seeds, width=width, task=task, length=length, steps=steps,
                               batch_size=batch_size, lr=lr)
    fp_options = dict(ics=fp_ics, steps=fp_steps, burn_in=fp_burn_in, max_steps=fp_max_steps)
    clv_options = dict(k=clv_k, steps=clv_steps, window=clv_steps, transient_forward=clv_transient,
                       transient_backward=clv_transient)
    dsa_options = dict(trials=dsa_trials, n_delays=dsa_delays, delay_interval=1, rank=dsa_rank, pcs=dsa_pcs,
                       ridge=0.0, iterations=dsa_iterations, restarts=dsa_restarts, tol=1e-6)
    _check_analyses(configs, fp_options, clv_options, dsa_options, length)

    shape = (len(units), len(seeds))
    n_points, n_fixed = np.full(shape, -1), np.full(shape, -1)
    class_count = np.zeros(shape + (len(STABILITY),), int)
    found: dict[tuple[int, int], xr.Dataset] = {}  # the points of each network (rounds of runs may find more than fp_ics)
    loss, min_q = np.full(shape, np.nan), np.full(shape, np.nan)
    angle_med, angle_min, readout_med = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    clv_exponent, readout_vec = np.full(shape + (clv_k,), np.nan), np.full(shape + (clv_k,), np.nan)
    random_angle, state_dim = np.full(len(units), np.nan), np.zeros(len(units), int)
    status = np.full(shape, "ok", dtype=object)
    seconds = np.zeros(shape)
    trained, task_obj = {}, None
    done, total = 0, len(configs) + 1
    if progress is not None:
        progress(0, total, {})  # the total from the start, not after the first cell
    for i, unit in enumerate(units):
        for j, seed in enumerate(seeds):
            t0 = time.perf_counter()
            exp = experiment.build(configs[unit, seed])
            task_obj = exp.task
            run_dir = out / "runs" / f"{unit}-seed{seed}"
            run_dir.mkdir(parents=True, exist_ok=True)
            try:
                model = train(exp, run_dir).model
            except DivergenceError as e:
                status[i, j] = f"diverged: {e}"
                continue
            trained[unit, seed] = model
            loss[i, j] = float(evaluate_under(model, exp.task, None, jax.random.key(seed), n_test)["loss"])
            try:
                fp = _analysis("fixed-points")(model, task=exp.task, seed=seed, **fp_options)
                store.write_dataset(run_dir / "fixed-points.nc", fp)
                n = fp.sizes["point"]
                n_points[i, j], n_fixed[i, j] = n, int(fp.is_fixed.sum())
                min_q[i, j] = float(np.nanmin(fp.ic_q.values))
                for c, cls in enumerate(STABILITY):
                    class_count[i, j, c] = int((fp.stability.values == cls).sum())
                found[i, j] = fp[["n_unstable", "q", "stability_code"]]
                state_dim[i] = fp.attrs["state_dim"]
            except DynlabError as e:
                status[i, j] = f"fixed-points: {e}"
            try:
                cl = _analysis("clv")(model, task=exp.task, seed=seed, **clv_options)
                store.write_dataset(run_dir / "clv.nc", cl)
                angle_med[i, j], angle_min[i, j] = float(cl.median_angle_rest), float(cl.min_angle_rest)
                clv_exponent[i, j] = cl.clv_exponent.values
                if "readout_angle" in cl:
                    readout_vec[i, j] = cl.readout_angle.median("time").values
                    readout_med[i, j] = readout_vec[i, j, 0]
                    random_angle[i] = cl.attrs["readout_random_angle"]
            except DynlabError as e:
                status[i, j] = f"clv: {e}"
            seconds[i, j] = time.perf_counter() - t0
            done += 1
            if progress is not None:
                progress(done, total, {"unit": unit, "seed": seed, "loss": loss[i, j], "points": int(n_points[i, j]),
                                       "CLV∠rest°": np.degrees(angle_med[i, j]), "s": seconds[i, j]})

    from dynlab import registry

    fp_defaults = registry.defaults(_analysis("fixed-points"))
    common = {"scenario": "cross-fingerprint", "task": task_obj.describe(), "width": width, "steps": steps, "lr": lr,
              "protocol": "task inputs", "n_test": n_test}
    n_max = max([1, *(ds.sizes["point"] for ds in found.values())])
    per_point = {"n_unstable": np.full(shape + (n_max,), -1), "q": np.full(shape + (n_max,), np.nan),
                 "stability_code": np.full(shape + (n_max,), -1)}
    for (i, j), ds in found.items():
        for name, arr in per_point.items():
            arr[i, j, : ds.sizes["point"]] = ds[name].values
    fp_ds = stamp(xr.Dataset(
        {
            "n_points": (("unit", "seed"), n_points, {"long_name": "fixed and slow points found (-1: not run)"}),
            "n_fixed": (("unit", "seed"), n_fixed, {"long_name": "fixed points (q <= q_tol)"}),
            "n_slow": (("unit", "seed"), np.where(n_points >= 0, n_points - n_fixed, -1),
                       {"long_name": "slow points (q_tol < q <= q_max)"}),
            "class_count": (("unit", "seed", "stability"), class_count, {"long_name": "points of each stability class"}),
            "max_unstable": (("unit", "seed"), per_point["n_unstable"].max(axis=-1),
                             {"long_name": "most unstable directions at any point (-1: no point)"}),
            "n_unstable": (("unit", "seed", "point"), per_point["n_unstable"],
                           {"long_name": "unstable directions of each point (-1: padding)"}),
            "q": (("unit", "seed", "point"), per_point["q"], {"long_name": "speed q at each point (NaN: padding)"}),
            "min_q": (("unit", "seed"), min_q, {"long_name": "smallest speed q any minimisation reached (kept or not)"}),
            "stability_code": (("unit", "seed", "point"), per_point["stability_code"],
                               {"long_name": f"stability class index into {list(STABILITY)} (-1: padding)"}),
            "state_dim": ("unit", state_dim, {"long_name": "dimension of the full state map"}),
            "status": (("unit", "seed"), status.astype(str), {"long_name": "ok, diverged, or the analysis that failed"}),
            "seconds": (("unit", "seed"), seconds, {"long_name": "wall time (train + loss + fixed points + CLV)", "units": "s"}),
        },
        coords={"unit": units, "seed": seeds, "stability": list(STABILITY), "point": np.arange(n_max)},
    ), analysis="cross-fingerprint", config={**common, **{f"fp_{k}": v for k, v in fp_options.items()},
                                              **{k: fp_defaults[k] for k in ("q_tol", "q_max", "marginal_tol")}})
    rad, us, usv = {"units": "rad"}, ("unit", "seed"), ("unit", "seed", "vector")
    clv_ds = stamp(xr.Dataset(
        {
            "median_angle_rest": (us, angle_med, {**rad, "long_name": "median angle between CLV 1 and span(CLV 2..k)"}),
            "min_angle_rest": (us, angle_min, {**rad, "long_name": "smallest angle between CLV 1 and span(CLV 2..k)"}),
            "readout_angle_median": (us, readout_med,
                                     {**rad, "long_name": "median angle between CLV 1 and the read-out subspace"}),
            "readout_angle": (usv, readout_vec, {**rad, "long_name": "median angle between CLV i and the read-out subspace"}),
            "readout_random_angle": ("unit", random_angle,
                                     {**rad, "long_name": "typical angle of a random direction to the read-out subspace"}),
            "clv_exponent": (usv, clv_exponent, {"units": "1/step", "long_name": "time mean of the CLV growth rates"}),
            "eval_loss": (us, loss, {"long_name": f"held-out task loss ({n_test} samples)"}),
            "status": (us, status.astype(str), {"long_name": "ok, diverged, or the analysis that failed"}),
        },
        coords={"unit": units, "seed": seeds, "vector": np.arange(1, clv_k + 1)},
    ), analysis="cross-fingerprint", config={**common, **{f"clv_{k}": v for k, v in clv_options.items()},
                                              "chance": task_obj.chance})

    t0 = time.perf_counter()
    keys = list(trained)
    if len({u for u, _ in keys}) < 2:
        raise ConfigError(f"DSA needs trained models of at least 2 units; only {sorted({u for u, _ in keys})} trained "
                          "without diverging")
    xs = task_obj.batch(jax.random.key(0), dsa_trials, split="test")[0]
    dsa_ds = dsa_models([trained[k] for k in keys], xs, labels=[f"{u} s{s}" for u, s in keys], seed=0,
                        **{k: v for k, v in dsa_options.items() if k != "trials"})
    dsa_ds = dsa_ds.assign_coords(unit=("run", [u for u, _ in keys]), train_seed=("run", [s for _, s in keys]))
    dsa_ds = stamp(dsa_ds, analysis="dsa", seed=0, config={"task": task, "scenario": "cross-fingerprint",
                                                           "seconds": time.perf_counter() - t0})
    if progress is not None:
        progress(total, total, {"dsa runs": len(keys), "s": time.perf_counter() - t0})

    store.write_dataset(out / "fixed_points.nc", fp_ds)
    store.write_dataset(out / "clv.nc", clv_ds)
    store.write_dataset(out / "dsa.nc", dsa_ds)
    result = {"fixed_points": fp_ds, "clv": clv_ds, "dsa": dsa_ds}
    store.write_figure(out / "fingerprint.png", fingerprint_figure(result))
    return result


run_cross_fingerprint.check = check_params
