r"""Dynamical similarity between trained dynlab models, registered as the analysis ``dsa``.

Every model is driven by the **same** input sequences (``trials`` samples of one task, seeded by
``seed``) from its initial state; its observed trajectory is its full flat state
([`dynlab.analyses.state_map`][]) at every step, centred over trials and steps and projected on
its top ``pcs`` principal components (an orthogonal projection onto the dominant subspace: an
orthogonal change of the state's coordinates changes the component scores only in sign, which the
core's sign convention removes). The core ([`dynlab.analyses.dsa.core`][]) then fits each model's
HAVOK-DMD operator and computes the angular Procrustes distance over vector fields between every
pair. Models of different units and sizes compare: every operator is $r \times r$.

Run directories are comparable when they were trained on the same task (the ``[task]`` sections of
their ``config.toml`` agree), so that one input sequence drives them all; ``task`` overrides the
stored task (every model must then read as many inputs per step as it gives).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.dsa.core import dsa_distances, havok_dmd
from dynlab.analyses.dsa.figure import dsa_figure, dsa_summary
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.registry import register

__all__ = ["check_dsa", "check_dsa_runs", "common_task", "comparable_runs", "dsa_analysis", "dsa_models", "observed_trajectories"]

SINGULAR_VALUES_KEPT = 40
"""At most this many leading Hankel singular values per model go into the dataset."""


def observed_trajectories(model, xs, pcs: int | None = 16) -> tuple[np.ndarray, float]:
    r"""The model's flat state over ``xs`` ``[trials, T, D]`` (from its initial state, zero
    drive), centred, on its top ``pcs`` principal components: ``([trials, T, min(pcs, N)], kept)``
    with ``kept`` the fraction of the state's variance they hold. ``pcs=None`` keeps every component
    (centred only)."""
    h = np.asarray(_states(model, jnp.asarray(xs)), np.float64)
    if not np.isfinite(h).all():
        raise ConfigError("a model's state became NaN or inf under the task's inputs: it has no trajectory to compare")
    trials, steps, n = h.shape
    flat = h.reshape(-1, n)
    flat = flat - flat.mean(axis=0)
    if pcs is None or pcs >= n:
        return flat.reshape(trials, steps, n), 1.0
    _, s, vt = np.linalg.svd(flat, full_matrices=False)
    total = float(np.sum(s**2))
    return (flat @ vt[:pcs].T).reshape(trials, steps, pcs), float(np.sum(s[:pcs] ** 2) / total) if total > 0 else 1.0


@eqx.filter_jit
def _states(model, xs):
    """Flat states ``[trials, T, N]`` of ``model`` over ``xs`` (one compilation per model structure)."""
    from dynlab.analyses.state_map import run_in, state_map

    smap = state_map(model)
    xs = xs.astype(smap.h0.dtype)
    return jax.vmap(lambda x: run_in(smap, (x, jnp.zeros(x.shape[0], x.dtype))))(xs)


def check_dsa(*, trials: int, n_delays: int, delay_interval: int, rank: int, pcs: int | None, ridge: float,
              iterations: int, restarts: int, tol: float, length: int | None = None, **_) -> None:
    """The options of [`dsa_models`][] / [`dsa_analysis`][]; one ConfigError line otherwise
    (``length``: the task's steps per trial, when known)."""
    for name, value in (("trials", trials), ("n_delays", n_delays), ("delay_interval", delay_interval), ("rank", rank),
                        ("iterations", iterations), ("restarts", restarts)):
        require_positive(name, value)
    if pcs is not None:
        require_positive("pcs", pcs)
    for name, value in (("ridge", ridge), ("tol", tol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
            raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    if pcs is not None and rank > pcs * n_delays:
        raise ConfigError(f"rank {rank} exceeds the {pcs * n_delays} delay coordinates (pcs {pcs} x n_delays {n_delays}); "
                          "lower the rank or raise pcs or n_delays")
    if length is not None:
        span = (n_delays - 1) * delay_interval + 1
        if length - span < 2:
            raise ConfigError(f"trials of {length} steps are too short for {n_delays} delays {delay_interval} apart "
                              f"(the embedding spans {span} steps); use fewer delays")


def dsa_models(models: Sequence, inputs, *, labels: Sequence[str] | None = None, n_delays: int = 10,
               delay_interval: int = 1, rank: int = 10, pcs: int | None = 16, ridge: float = 0.0,
               iterations: int = 2000, restarts: int = 4, tol: float = 1e-6, seed: int = 0) -> xr.Dataset:
    r"""The DSA distance matrix of ``models`` (dynlab sequence models) driven by ``inputs``
    ``[trials, T, D]``; labels name them (default ``model0``, ``model1``, …).

    Options: ``n_delays``, ``delay_interval`` and ``rank`` of the HAVOK fit
    ([`havok_dmd`][dynlab.analyses.dsa.core.havok_dmd]), ``ridge`` its ridge $\lambda$, ``pcs``
    the principal components observed ([`observed_trajectories`][]), ``iterations``,
    ``restarts`` and ``tol`` of the orthogonal alignment
    ([`dsa_distances`][dynlab.analyses.dsa.core.dsa_distances]), ``seed`` its random restarts.

    **Returns** an `xr.Dataset` with dims `run`, `run_b` (the same models), `mode_i`, `mode_j`,
    `eigen`, `component`:

    - `distance` (`run`, `run_b`): the angular DSA distance (radians), symmetric, zero diagonal;
    - `gradient_norm`, `iterations`, `converged` (`gradient_norm` <= `tol`), `restart_spread`,
      `asymmetry` (`run`, `run_b`): the optimiser's report for each pair (module
      [`core`][dynlab.analyses.dsa.core]);
    - `operator` (`run`, `mode_i`, `mode_j`): each model's fitted $A$; `eigenvalue_real`,
      `eigenvalue_imag` (`run`, `eigen`): its eigenvalues by decreasing modulus;
    - `explained`, `fit_error`, `pcs_variance` (`run`): the Hankel variance the rank keeps, the
      relative one-step error of the fit, and the state variance the principal components keep;
      `singular_values` (`run`, `component`): the leading Hankel singular values (NaN-padded).
    """
    n = len(models)
    labels = [f"model{i}" for i in range(n)] if labels is None else [str(label) for label in labels]
    if len(labels) != n:
        raise ConfigError(f"{len(labels)} labels for {n} models")
    if n < 2:
        raise ConfigError(f"DSA compares at least 2 models, got {n}")
    xs = np.asarray(inputs)
    if xs.ndim != 3:
        raise ConfigError(f"inputs must be [trials, T, D], got shape {xs.shape}")
    check_dsa(trials=xs.shape[0], n_delays=n_delays, delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge,
              iterations=iterations, restarts=restarts, tol=tol, length=xs.shape[1])
    for label, model in zip(labels, models):
        if model.input_size != xs.shape[2]:
            raise ConfigError(f"{label} reads {model.input_size} inputs per step but the inputs have {xs.shape[2]}: "
                              "DSA drives every model with the same inputs")
    fits, kept = [], []
    for label, model in zip(labels, models):
        traj, frac = observed_trajectories(model, xs, pcs)
        try:
            fits.append(havok_dmd(traj, n_delays=n_delays, rank=rank, interval=delay_interval, ridge=ridge))
        except ConfigError as e:
            raise ConfigError(f"{label}: {e}") from None
        kept.append(frac)
    ops = np.stack([f.operator for f in fits])
    d = dsa_distances(ops, iterations=iterations, restarts=restarts, tol=tol, key=jax.random.key(seed))
    eig = np.linalg.eigvals(ops)
    eig = np.take_along_axis(eig, np.argsort(-np.abs(eig), axis=1, kind="stable"), axis=1)
    n_sv = min(SINGULAR_VALUES_KEPT, max(f.singular_values.size for f in fits))
    sv = np.full((n, n_sv), np.nan)
    for i, f in enumerate(fits):
        sv[i, : min(n_sv, f.singular_values.size)] = f.singular_values[:n_sv]
    pair = ("run", "run_b")
    converged = d.gradient_norm <= tol
    return xr.Dataset(
        {
            "distance": (pair, d.angle, {"units": "rad", "long_name": "DSA distance: angle between the operators "
                                                                      "after the best orthogonal alignment"}),
            "gradient_norm": (pair, d.gradient_norm, {"long_name": "Riemannian gradient norm |W|_F at the kept optimum"}),
            "iterations": (pair, d.iterations, {"long_name": "iterations of the kept restart"}),
            "converged": (pair, converged, {"long_name": f"gradient_norm <= tol ({tol:g})"}),
            "restart_spread": (pair, d.restart_spread, {"units": "rad",
                                                       "long_name": "largest minus smallest angle over the restarts"}),
            "asymmetry": (pair, d.asymmetry, {"units": "rad", "long_name": "|theta(i,j) - theta(j,i)| of the two "
                                                                          "optimisations (0 for an exact optimiser)"}),
            "operator": (("run", "mode_i", "mode_j"), ops, {"long_name": "HAVOK-DMD operator A: v_{t+1} = A v_t"}),
            "eigenvalue_real": (("run", "eigen"), eig.real, {"long_name": "eigenvalues of A (real part)"}),
            "eigenvalue_imag": (("run", "eigen"), eig.imag, {"long_name": "eigenvalues of A (imaginary part)"}),
            "explained": ("run", np.array([f.explained for f in fits]),
                          {"long_name": "fraction of the Hankel variance in the rank-r coordinates"}),
            "fit_error": ("run", np.array([f.fit_error for f in fits]),
                          {"long_name": "relative one-step prediction error of the operator"}),
            "pcs_variance": ("run", np.array(kept), {"long_name": "fraction of the state variance in the observed components"}),
            "singular_values": (("run", "component"), sv, {"long_name": "leading singular values of the Hankel matrix"}),
        },
        coords={"run": ("run", labels), "run_b": ("run_b", labels), "mode_i": np.arange(rank), "mode_j": np.arange(rank),
                "eigen": np.arange(rank), "component": np.arange(n_sv)},
        attrs={"optimiser": "Riemannian gradient descent on O(r), Cayley retraction, Barzilai-Borwein steps with "
                            "Armijo backtracking (Wen & Yin 2013); restarts: spectral (Hoffman-Wielandt on the symmetric parts), "
                            "identity, a reflection, Haar-random"},
    ).pipe(stamp, analysis="dsa", seed=seed, config={
        "n_delays": n_delays, "delay_interval": delay_interval, "rank": rank, "pcs": "all" if pcs is None else pcs,
        "ridge": ridge, "iterations": iterations, "restarts": restarts, "tol": tol, "trials": int(xs.shape[0]),
        "steps": int(xs.shape[1])})


def _task_section(config: dict) -> dict:
    """A run's ``[task]`` with its unset keys at their defaults (runs that differ only in spelling
    a default out are one task)."""
    from dynlab import registry
    from dynlab.experiment import DEFAULT_TASK

    task = dict(config.get("task", {}))
    task.setdefault("name", DEFAULT_TASK)
    defaults = {k: v for k, v in registry.defaults(registry.get("task", task["name"]).obj).items() if v is not None}
    return {**defaults, **task}


def common_task(configs: Sequence[dict], names: Sequence[str]) -> None:
    """Check that run configs (named by ``names``) were trained on one task (their ``[task]``
    sections agree, defaults filled in); a one-line [`ConfigError`][dynlab.errors.ConfigError]
    naming the first difference otherwise."""
    first = _task_section(configs[0])
    for name, config in zip(names[1:], configs[1:]):
        task = _task_section(config)
        if task != first:
            key = next(k for k in ["name", *sorted(set(task) | set(first))] if task.get(k) != first.get(k))
            raise ConfigError(
                f"runs {names[0]} and {name} were trained on different tasks (task.{key} = "
                f"{first.get(key, 'unset')!r} vs {task.get(key, 'unset')!r}): DSA drives every model with the same "
                "inputs, so compare runs of one task or choose the inputs with --task")


def comparable_runs(runs: Sequence[str | Path], *, same_task: bool = True) -> list[dict]:
    """The configs of ``runs``, checked to be at least two distinct dynlab run directories and
    (``same_task``) trained on one task ([`common_task`][])."""
    from dynlab import store

    runs = [Path(r) for r in runs]
    if len(runs) < 2:
        raise ConfigError(f"DSA compares at least 2 run directories, got {len(runs)}")
    if len({r.resolve() for r in runs}) < len(runs):
        raise ConfigError("a run directory is given twice")
    configs = [store.read_config(r) for r in runs]
    if same_task:
        common_task(configs, [repr(str(r)) for r in runs])
    return configs


def check_dsa_runs(configs: Sequence[dict], names: Sequence[str], *, task=None, **options) -> None:
    """Before any work: can [`dsa_analysis`][] compare the runs these configs will train (a
    scenario's cells, named by ``names``)? At least 2 runs, one task to drive them (theirs in
    common, or ``task``, whose inputs every model must read), and options the task's length
    allows ([`check_dsa`][]); one ConfigError line otherwise."""
    from dynlab import registry

    if len(configs) < 2:
        raise ConfigError(f"DSA compares several trained models, and this scenario has {len(configs)} cell; "
                          "add a [sweep] axis (e.g. seed = [0, 1]) or compare runs with 'dynlab analyze dsa RUN_DIR RUN_DIR'")
    if task is None:
        common_task(configs, names)
        section = dict(_task_section(configs[0]))
        drive = registry.build("task", section.pop("name"), **section)
    else:
        drive = task
        for name, config in zip(names, configs):
            section = dict(_task_section(config))
            own = registry.build("task", section.pop("name"), **section)
            if own.input_size != drive.input_size:
                raise ConfigError(f"run {name} reads {own.input_size} inputs per step but the task "
                                  f"{_task_name(drive)!r} gives {drive.input_size}: these runs cannot be driven by one input")
    check_dsa(**options, length=drive.length)


def _labels(runs: Sequence[Path], configs: Sequence[dict]) -> list[str]:
    from dynlab.experiment import DEFAULT_RULE, DEFAULT_UNIT

    labels = [f"{c.get('model', {}).get('unit', DEFAULT_UNIT)} {c.get('rule', {}).get('name', DEFAULT_RULE)} "
              f"s{c.get('seed', 0)}" for c in configs]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({Path(r).name})" for label, r in zip(labels, runs)]
    if len(set(labels)) < len(labels):
        labels = [str(r) for r in runs]
    return labels


@register(
    "analysis",
    "dsa",
    "dynamical similarity (Ostrow et al. 2023): HAVOK-DMD operators compared up to rotation, over run directories",
    figure=dsa_figure,
    summary=dsa_summary,
    takes="runs",
)
def dsa_analysis(runs: Sequence[str | Path], *, task=None, trials: int = 16, n_delays: int = 10,
                 delay_interval: int = 1, rank: int = 10, pcs: int | None = 16, ridge: float = 0.0,
                 iterations: int = 2000, restarts: int = 4, tol: float = 1e-6, seed: int = 0) -> xr.Dataset:
    r"""The DSA distance matrix between the trained models of ``runs`` (run directories of
    ``dynlab train``, at least 2), as [`dsa_models`][] computes it.

    The models are driven by ``trials`` test samples of their common task (or of ``task``, a
    [`Task`][dynlab.tasks.base.Task]), drawn from ``seed``. The dataset is that of
    [`dsa_models`][] with, along `run`, the coordinates `path`, `unit`, `rule`, `train_seed` and
    `task`; labels are "unit rule sSEED" (with the directory name where two would agree).
    """
    from dynlab import experiment

    runs = [Path(r) for r in runs]
    configs = comparable_runs(runs, same_task=task is None)
    check_dsa(trials=trials, n_delays=n_delays, delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge,
              iterations=iterations, restarts=restarts, tol=tol, length=None if task is None else task.length)
    exps = [experiment.load_run(r) for r in runs]
    drive = exps[0].task if task is None else task
    labels = _labels(runs, configs)
    for label, exp in zip(labels, exps):
        if exp.model.input_size != drive.input_size:
            raise ConfigError(f"run {label} reads {exp.model.input_size} inputs per step but the task "
                              f"{_task_name(drive)!r} gives {drive.input_size}: these runs cannot be driven by one input")
    check_dsa(trials=trials, n_delays=n_delays, delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge,
              iterations=iterations, restarts=restarts, tol=tol, length=drive.length)
    xs = drive.batch(jax.random.key(seed), trials, split="test")[0]
    ds = dsa_models([e.model for e in exps], xs, labels=labels, n_delays=n_delays, delay_interval=delay_interval,
                    rank=rank, pcs=pcs, ridge=ridge, iterations=iterations, restarts=restarts, tol=tol, seed=seed)
    ds = ds.assign_coords(
        path=("run", [str(r) for r in runs]),
        unit=("run", [str(c.get("model", {}).get("unit", experiment.DEFAULT_UNIT)) for c in configs]),
        rule=("run", [str(c.get("rule", {}).get("name", experiment.DEFAULT_RULE)) for c in configs]),
        train_seed=("run", [int(c.get("seed", 0)) for c in configs]),
        task=("run", [_task_section(c)["name"] for c in configs]),
    )
    return stamp(ds, analysis="dsa", seed=seed, config={"task": _task_name(drive), "runs": [str(r) for r in runs]})


def _task_name(task) -> str:
    from dynlab import registry

    for entry in registry.entries("task"):
        if type(task) is entry.obj:
            return entry.name
    return type(task).__name__


dsa_analysis.check = check_dsa_runs
