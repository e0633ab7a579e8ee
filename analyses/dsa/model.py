r"""Dynamical similarity between trained dynlab models, registered as the analysis ``dsa``.

Every model is driven by input sequences of one task (``trials`` samples per draw; each model
its own independent draws, so that a pair's distance and the null compare alike:
[`dynlab.analyses.dsa.null`][]) from its initial state; its observed trajectory is its full flat state
([`dynlab.analyses.state_map`][]) at every step, centred over trials and steps and projected on
its top ``pcs`` principal components (an orthogonal projection onto the dominant subspace: an
orthogonal change of the state's coordinates changes the component scores only in sign, which the
core's sign convention removes). The core ([`dynlab.analyses.dsa.core`][]) then fits each model's
HAVOK-DMD operator and computes the angular Procrustes distance over vector fields between every
pair. Models of different units and sizes compare: every operator is $r \times r$.

Run directories are comparable when they were trained on the same task (the ``[task]`` sections of
their ``config.toml`` agree), so that inputs of one task drive them all; ``task`` overrides the
stored task (every model must then read as many inputs per step as it gives).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.dsa.core import dsa_distances, havok_dmd
from dynlab.analyses.dsa.figure import dsa_figure, dsa_summary
from dynlab.analyses.dsa.null import ALPHA, POWER, pair_null
from dynlab.config import Count, Flag, NonNegative, Range
from dynlab.errors import ConfigError, require_positive
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register

__all__ = ["check_dsa", "check_dsa_runs", "common_task", "comparable_runs", "dsa_analysis", "dsa_models", "observed_trajectories",
           "run_labels"]

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
    return _principal_components(h, pcs)


def _principal_components(h: np.ndarray, pcs: int | None) -> tuple[np.ndarray, float]:
    """States ``h`` ``[trials, T, N]`` centred and projected on their top ``pcs`` components, with
    the variance fraction they keep. The components come from the smaller of the two Gram
    matrices (rows x rows or N x N), whose eigenvectors are the SVD's: as exact, and much faster
    than an SVD of the long flat matrix."""
    trials, steps, n = h.shape
    flat = h.reshape(-1, n)
    flat = flat - flat.mean(axis=0)
    if pcs is None or pcs >= n:
        return flat.reshape(trials, steps, n), 1.0
    if flat.shape[0] < n:
        w, u = np.linalg.eigh(flat @ flat.T)
        scores = u[:, ::-1][:, :pcs] * np.sqrt(np.maximum(w[::-1][:pcs], 0.0))
    else:
        w, v = np.linalg.eigh(flat.T @ flat)
        scores = flat @ v[:, ::-1][:, :pcs]
    total = float(np.sum(flat**2))
    kept = float(np.sum(scores**2) / total) if total > 0 else 1.0
    return scores.reshape(trials, steps, pcs), kept


@eqx.filter_jit
def _states(model, xs):
    """Flat states ``[trials, T, N]`` of ``model`` over ``xs`` (one compilation per model structure)."""
    from dynlab.analyses.state_map import run_in, state_map

    smap = state_map(model)
    xs = xs.astype(smap.h0.dtype)
    return jax.vmap(lambda x: run_in(smap, (x, jnp.zeros(x.shape[0], x.dtype))))(xs)


def check_dsa(*, trials: int, n_delays: int, delay_interval: int, rank: int, pcs: int | None, ridge: float,
              iterations: int, restarts: int, tol: float, length: int | None = None, null_draws: int | None = None, **_) -> None:
    """The options of [`dsa_models`][] / [`dsa_analysis`][]; one ConfigError line otherwise
    (``length``: the task's steps per trial, when known; ``pcs="all"``: every component)."""
    pcs = None if pcs == "all" else pcs
    if null_draws is not None and (isinstance(null_draws, bool) or not isinstance(null_draws, int) or null_draws < 0
                                   or null_draws % 2):
        raise ConfigError(f"null_draws must be an even integer >= 0 (the draws are used in pairs; 0: no null), "
                          f"got {null_draws!r}")
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


def dsa_models(models: Sequence, inputs, *, null_inputs=None, labels: Sequence[str] | None = None, n_delays: int = 10,
               delay_interval: int = 1, rank: int = 10, pcs: int | None = 16, ridge: float = 0.0,
               iterations: int = 2000, restarts: int = 4, tol: float = 1e-6, seed: int = 0) -> xr.Dataset:
    r"""The DSA distance matrix of ``models`` (dynlab sequence models) driven by ``inputs``, with
    each model's distance from itself under other input draws as the null; labels name them
    (default ``model0``, ``model1``, …).

    ``inputs`` is ``[M, K, trials, T, D]``: each model's own $K$ draws; the distance of models
    $i, j$ is the mean over $k$ of the distance between $i$'s operator under its draw $k$ and $j$'s
    under its own draw $k$. When the draws of different models are independent (as
    [`dsa_analysis`][] makes them), these are the same kind of comparison as the null and the test
    is exact ([`dynlab.analyses.dsa.null`][]). ``[M, trials, T, D]`` is one draw per model ($K = 1$);
    ``[trials, T, D]`` drives every model with one shared draw: its distances are those of the
    paper's examples (a model and its copy at 0), but the null below does not match them.
    ``null_inputs`` ``[M, draws, trials, T, D]`` are each model's further draws, taken in disjoint
    pairs (1, 2), (3, 4), …: its distances from itself between the two draws of each pair are
    independent, and they are the null of every pair of models it is in; with ``None`` (or fewer
    than 2 draws) there is no null and no pair is distinguishable.

    Options: ``n_delays``, ``delay_interval`` and ``rank`` of the HAVOK fit
    ([`havok_dmd`][dynlab.analyses.dsa.core.havok_dmd]), ``ridge`` its ridge $\lambda$, ``pcs``
    the principal components observed ([`observed_trajectories`][]), ``iterations``,
    ``restarts`` and ``tol`` of the orthogonal alignment
    ([`dsa_distances`][dynlab.analyses.dsa.core.dsa_distances]), ``seed`` its random restarts.

    **Returns** an `xr.Dataset` with dims `run`, `run_b` (the same models), `draw`, `draw_pair`,
    `mode_i`, `mode_j`, `eigen`, `component`:

    - `distance` (`run`, `run_b`): the angular DSA distance (radians), symmetric: between two
      models, the mean of `distance_by_draw` (`run`, `run_b`, `draw`; NaN on the diagonal); 0 on
      the diagonal (a model's operator against itself; its mean distance from itself between
      independent draws is the diagonal of `null_mean`);
    - `self_distance` (`run`, `draw_pair`): each model's distance from itself between its null
      draws `draw_a` and `draw_b` (numbered from `K`; draws `0 … K-1` are ``inputs``);
    - `null_level`, `p_value`, `distinguishable` (`run`, `run_b`): the pair's null level (radians;
      above it, the mean distance is beyond the pooled self-distances of the two models at level
      `alpha`), the permutation p-value of its distances, and `p_value <= alpha`;
    - `null_mean`, `detectable` (`run`, `run_b`): the mean of the pair's pooled self-distances, and
      the smallest distance the pair's test calls distinguishable with probability `power` (0.8):
      its power at these replicates ([`detectable`][dynlab.analyses.dsa.null.detectable]);
    - `gradient_norm`, `iterations`, `converged` (`gradient_norm` <= `tol`), `restart_spread`,
      `asymmetry`, `reproduced` (`run`, `run_b`; the worst over the draws), `self_converged`,
      `self_reproduced` (`run`, `draw_pair`): the optimiser's report for each pair (module
      [`core`][dynlab.analyses.dsa.core]; `reproduced`: how many restarts reached the kept optimum);
    - `operator` (`run`, `mode_i`, `mode_j`): each model's fitted $A$ (draw 0);
      `eigenvalue_real`, `eigenvalue_imag` (`run`, `eigen`): its eigenvalues by decreasing modulus;
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
    if xs.ndim == 3:
        xs = np.broadcast_to(xs, (n, 1, *xs.shape))
    elif xs.ndim == 4:
        xs = xs[:, None]
    if xs.ndim != 5 or xs.shape[0] != n:
        raise ConfigError(f"inputs must be [trials, T, D] (one draw for every model), [models ({n}), trials, T, D] "
                          f"(one draw each) or [models ({n}), draws, trials, T, D], got shape {np.shape(inputs)}")
    between_draws = xs.shape[1]
    null = np.zeros((n, 0, *xs.shape[2:]), xs.dtype) if null_inputs is None else np.asarray(null_inputs)
    if null.ndim != 5 or null.shape[0] != n or null.shape[2:] != xs.shape[2:]:
        raise ConfigError(f"null_inputs must be [models ({n}), draws, {', '.join(map(str, xs.shape[2:]))}] "
                          f"like the inputs, got shape {null.shape}")
    check_dsa(trials=xs.shape[2], n_delays=n_delays, delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge,
              iterations=iterations, restarts=restarts, tol=tol, length=xs.shape[3])
    for label, model in zip(labels, models):
        if model.input_size != xs.shape[4]:
            raise ConfigError(f"{label} reads {model.input_size} inputs per step but the inputs have {xs.shape[4]}: "
                              "DSA drives every model with inputs of one task")
    draws = between_draws + null.shape[1]
    fits, kept = [], []
    for i, (label, model) in enumerate(zip(labels, models)):
        every = np.concatenate([xs[i], null[i]])  # [draws, trials, T, D], one compiled run
        h = np.asarray(_states(model, jnp.asarray(every.reshape(-1, *every.shape[2:]))), np.float64)
        if not np.isfinite(h).all():
            raise ConfigError(f"{label}: the state became NaN or inf under the inputs: it has no trajectory to compare")
        h = h.reshape(draws, xs.shape[2], *h.shape[1:])
        for k in range(draws):
            traj, frac = _principal_components(h[k], pcs)
            try:
                fits.append(havok_dmd(traj, n_delays=n_delays, rank=rank, interval=delay_interval, ridge=ridge))
            except ConfigError as e:
                raise ConfigError(f"{label}{'' if k < between_draws else f' (null draw {k})'}: {e}") from None
            kept.append(frac)
    index = np.arange(n * draws).reshape(n, draws)  # operator of model i under draw k
    # disjoint pairs: independent self-distances (pairs sharing a draw are correlated, and a rank
    # test against correlated values rejects too often: 13% instead of 5% in 30 pairs, measured)
    self_pairs = [(a, a + 1) for a in range(between_draws, draws - 1, 2)]
    pairs = [(index[i, k], index[j, k]) for i, j in itertools.combinations(range(n), 2) for k in range(between_draws)]
    pairs += [(index[i, a], index[i, b]) for i in range(n) for a, b in self_pairs]
    everything = np.stack([f.operator for f in fits])
    d = dsa_distances(everything, iterations=iterations, restarts=restarts, tol=tol, key=jax.random.key(seed), pairs=pairs)
    off = ~np.eye(n, dtype=bool)
    by_draw = lambda v: np.stack([v[np.ix_(index[:, k], index[:, k])] for k in range(between_draws)], axis=-1)  # noqa: E731
    a_draw, b_draw = np.array([a for a, _ in self_pairs], int), np.array([b for _, b in self_pairs], int)
    within = lambda v: v[index[:, a_draw], index[:, b_draw]].reshape(n, len(self_pairs))  # noqa: E731
    self_distance = within(d.angle)
    between = np.where(off[..., None], by_draw(d.angle), np.nan)
    null_test = pair_null(between, self_distance, ALPHA)
    distance = np.where(off, np.mean(between, axis=-1), 0.0)
    worst = lambda v, how: np.where(off, how(by_draw(v), axis=-1), 0)  # noqa: E731  (the worst draw of a pair)
    gradient_norm = worst(d.gradient_norm, np.max)
    fits, kept = fits[::draws], kept[::draws]
    ops = everything[index[:, 0]]
    eig = np.linalg.eigvals(ops)
    eig = np.take_along_axis(eig, np.argsort(-np.abs(eig), axis=1, kind="stable"), axis=1)
    n_sv = min(SINGULAR_VALUES_KEPT, max(f.singular_values.size for f in fits))
    sv = np.full((n, n_sv), np.nan)
    for i, f in enumerate(fits):
        sv[i, : min(n_sv, f.singular_values.size)] = f.singular_values[:n_sv]
    pair = ("run", "run_b")
    self_dims = ("run", "draw_pair")
    return xr.Dataset(
        {
            "distance": (pair, distance, {
                "units": "rad", "dissimilarity": 1,
                "long_name": "DSA distance: angle between the operators after the best orthogonal alignment, mean over "
                             "independent input draws of the two runs"}),
            "distance_by_draw": (("run", "run_b", "draw"), between, {
                "units": "rad", "long_name": "DSA distance between the two runs' operators under their own k-th input draws"}),
            "self_distance": (self_dims, self_distance, {
                "units": "rad", "long_name": "DSA distance of the model from itself between two input draws (the null)"}),
            "null_level": (pair, null_test.level, {
                "units": "rad", "long_name": f"the pair's null level: the smallest mean distance beyond the pooled "
                                             f"self-distances of both models at level {ALPHA:g} (inf: too few draws)"}),
            "null_mean": (pair, null_test.null_mean, {
                "units": "rad", "long_name": "mean of the pooled self-distances of both models"}),
            "detectable": (pair, null_test.detectable, {
                "units": "rad", "long_name": f"the smallest mean distance the pair's test calls distinguishable with "
                                             f"probability {POWER:g} (its power at these draws)"}),
            "p_value": (pair, null_test.p_value, {
                "units": "1", "long_name": "permutation p-value of the distances against the pooled self-distances of both models"}),
            "distinguishable": (pair, null_test.distinguishable, {"long_name": f"p_value <= {ALPHA:g}: the models differ "
                                                                               "beyond their distance from themselves"}),
            "gradient_norm": (pair, gradient_norm, {"long_name": "Riemannian gradient norm |W|_F at the kept optimum "
                                                                 "(the largest over the draws)"}),
            "iterations": (pair, worst(d.iterations, np.max), {"long_name": "iterations of the kept restart (the most over the draws)"}),
            "converged": (pair, gradient_norm <= tol, {"long_name": f"gradient_norm <= tol ({tol:g})"}),
            "reproduced": (pair, np.where(off, np.min(by_draw(d.reproduced), axis=-1), restarts), {
                "long_name": "restarts that reached the kept optimum, the fewest over the draws"}),
            "self_converged": (self_dims, within(d.gradient_norm) <= tol, {
                "long_name": f"the self-distance's alignment converged: gradient_norm <= tol ({tol:g})"}),
            "self_reproduced": (self_dims, within(d.reproduced), {
                "long_name": "restarts that reached the self-distance's kept optimum"}),
            "restart_spread": (pair, worst(d.restart_spread, np.max), {
                "units": "rad", "long_name": "largest minus smallest angle over the restarts (local optima left behind)"}),
            "asymmetry": (pair, worst(d.asymmetry, np.max), {"units": "rad", "long_name": "|theta(i,j) - theta(j,i)| of the two "
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
                "eigen": np.arange(rank), "component": np.arange(n_sv),
                "draw": ("draw", np.arange(between_draws), {"long_name": "a run's own input draw for the distances between runs"}),
                "draw_pair": ("draw_pair", np.arange(len(self_pairs)), {"long_name": "a pair of a model's null draws"}),
                "draw_a": ("draw_pair", a_draw, {"long_name": "the pair's first null draw"}),
                "draw_b": ("draw_pair", b_draw, {"long_name": "the pair's second null draw"})},
        attrs={"optimiser": "Riemannian gradient descent on O(r), Cayley retraction, Barzilai-Borwein steps with "
                            "Armijo backtracking (Wen & Yin 2013); restarts: spectral (Hoffman-Wielandt on the symmetric parts), "
                            "identity, a reflection, Haar-random",
               "null": "each model's distance from itself between two of its own input draws; a pair pools both models' "
                       "and its distances between independent draws are tested against them by permutation "
                       "(dynlab.analyses.dsa.null)"},
    ).pipe(stamp, analysis="dsa", seed=seed, config={
        "n_delays": n_delays, "delay_interval": delay_interval, "rank": rank, "pcs": "all" if pcs is None else pcs,
        "ridge": ridge, "iterations": iterations, "restarts": restarts, "tol": tol, "trials": int(xs.shape[2]),
        "steps": int(xs.shape[3]), "draws": between_draws, "null_draws": draws - between_draws, "alpha": ALPHA,
        "power": POWER})


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


def _dotted(table: dict, prefix: str = "") -> dict:
    """A config as dotted keys: ``{"model": {"unit": "gru"}}`` -> ``{"model.unit": "gru"}``."""
    out = {}
    for key, value in table.items():
        out.update(_dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return out


CELL_NAME = re.compile(r"[0-9a-f]{16}")
"""The name of a sweep's cell directory: a hash of its config ([`dynlab.scenarios.spec.Cell.key`][])."""


def run_labels(runs: Sequence[Path], configs: Sequence[dict]) -> list[str]:
    """Each run's label, the user's: its directory's name; a sweep's cell, whose name is a hash,
    by the config values that set it apart from the other cells given, as a study names its cells
    (``"unit=gru, seed=1"``). Two runs of one name get their parent folder's name before it, then
    their whole path. No label is made from a run's config alone: an imported GRU's config names
    ``gru``, ``bptt`` and seed 0, as dynlab's own seed-0 GRU does."""
    from dynlab.figures import format_value, key_label

    runs = [Path(r) for r in runs]
    cells = [i for i, r in enumerate(runs) if CELL_NAME.fullmatch(r.name)]
    flat = {i: _dotted(configs[i]) for i in cells}
    keys = sorted({k for i in cells for k in flat[i]})
    differ = [k for k in keys if len({repr(flat[i].get(k)) for i in cells}) > 1]
    labels = [r.name for r in runs]
    for i in cells:
        shown = [k for k in differ if k in flat[i]]
        labels[i] = ", ".join(f"{key_label(k)}={format_value(flat[i][k])}" for k in shown) or labels[i]
    for better in ([f"{r.parent.name}/{label}" for r, label in zip(runs, labels)], [str(r) for r in runs]):
        if len(set(labels)) == len(labels):
            break
        labels = [b if labels.count(label) > 1 else label for label, b in zip(labels, better)]
    return labels


@register(
    "analysis",
    "dsa",
    "dynamical similarity (Ostrow et al. 2023): HAVOK-DMD operators compared up to rotation, over run directories",
    figure=dsa_figure,
    summary=dsa_summary,
    takes="runs",
    outputs=(
        Output("distance", "real", ("run", "run_b"), (0.0, math.pi), "DSA distance (rad)", dissimilarity=True),
        Output("distance_by_draw", "real", ("run", "run_b", "draw"), (0.0, math.pi)),
        Output("self_distance", "real", ("run", "draw_pair"), (0.0, math.pi)),
        *Output.each("null_level null_mean detectable restart_spread asymmetry gradient_norm", "real", ("run", "run_b")),
        Output("p_value", "fraction", ("run", "run_b")),
        *Output.each("distinguishable iterations converged reproduced", "field", ("run", "run_b")),
        *Output.each("self_converged self_reproduced", "field", ("run", "draw_pair")),
        Output("operator", "field", ("run", "mode_i", "mode_j")),
        *Output.each("eigenvalue_real eigenvalue_imag", "field", ("run", "eigen")),
        *Output.each("explained pcs_variance", "fraction", ("run",)), Output("fit_error", "real", ("run",)),
        Output("singular_values", "field", ("run", "component")),
    ),
    check=check_dsa_runs,
)
def dsa_analysis(runs: Sequence[str | Path], *, task=None, trials: Count = 16,
                 n_delays: Annotated[int, Range(minimum=1), Flag("--delays")] = 10, delay_interval: Count = 1,
                 rank: Count = 10, pcs: Count | Literal["all"] = 16, ridge: Annotated[float, Range(minimum=0)] = 0.0,
                 iterations: Count = 2000, restarts: Count = 4, tol: Annotated[float, Range(minimum=0)] = 1e-6,
                 draws: Count = 4, null_draws: NonNegative = 20, seed: int = 0) -> xr.Dataset:
    r"""The DSA distance matrix between the trained models of ``runs`` (run directories of
    ``dynlab train``, at least 2), as [`dsa_models`][] computes it, with the null that says which
    pairs are distinguishable.

    Each model is driven by ``draws`` draws of its own of ``trials`` test samples of their common
    task (or of ``task``, a [`Task`][dynlab.tasks.base.Task]), seeded by ``seed`` and its place in
    ``runs``: the distance of two runs is the mean over these draws of the distance between their
    operators under independent inputs, the same comparison as the null (a run against its copy
    is not at 0). Each model is also driven by ``null_draws`` further draws of its own, in
    disjoint pairs: its distances from itself between the two draws of each pair are the null
    ([`dynlab.analyses.dsa.null`][]), against which a permutation test of the pair's ``draws``
    distances decides "distinguishable" at 5%. A pair costs ``draws`` alignments and the null
    ``null_draws / 2`` per run; a pair of runs pools their ``null_draws`` self-distances (0 turns
    the null off). Each pair also states its power: the smallest distance it would call
    distinguishable in 80% of repetitions (lower with more ``draws``, ``null_draws`` or ``trials``).
    The dataset is that of [`dsa_models`][] with, along `run`, the coordinates `path`, `unit`,
    `rule`, `train_seed` and `task`; labels are the directories' names ([`run_labels`][]).

    Args:
        runs: the run directories (``dynlab train``), at least 2.
        task: drive every model with this task's inputs (default: the runs' common task).
        trials: test samples of the task driving every model.
        n_delays: delays of the embedding.
        delay_interval: steps between delays.
        rank: rank r of the HAVOK-DMD operator.
        pcs: principal components of each model's state observed (``all``: every component).
        ridge: ridge lambda of the operator's least squares.
        iterations: most Riemannian steps per restart of the orthogonal alignment.
        restarts: starting points of the alignment.
        tol: stop a restart when the Riemannian gradient norm is below this.
        draws: input draws of its own per run for the distances between runs: a pair's distance
            is the mean over them, and its test gains power with more.
        null_draws: further input draws of its own per run, in pairs: the run's distances from
            itself between the two draws of each pair are its null (even; 0: no null, no verdicts).
        seed: seed of the input samples and restarts.
    """
    from dynlab import experiment

    pcs = None if pcs == "all" else pcs
    runs = [Path(r) for r in runs]
    configs = comparable_runs(runs, same_task=task is None)
    check_dsa(trials=trials, n_delays=n_delays, delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge,
              iterations=iterations, restarts=restarts, tol=tol, length=None if task is None else task.length,
              null_draws=null_draws)
    exps = [experiment.load_run(r) for r in runs]
    drive = exps[0].task if task is None else task
    labels = run_labels(runs, configs)
    for label, exp in zip(labels, exps):
        if exp.model.input_size != drive.input_size:
            raise ConfigError(f"run {label} reads {exp.model.input_size} inputs per step but the task "
                              f"{_task_name(drive)!r} gives {drive.input_size}: these runs cannot be driven by one input")
    check_dsa(trials=trials, n_delays=n_delays, delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge,
              iterations=iterations, restarts=restarts, tol=tol, length=drive.length)
    # every run its own draws, independent of every other run's (the statistic compares like the
    # null): the samples of one batch are independent, so one batch holds them all (one compilation)
    every = np.asarray(drive.batch(jax.random.key(seed), len(runs) * (draws + null_draws) * trials, split="test")[0])
    every = every.reshape(len(runs), draws + null_draws, trials, *every.shape[1:])
    xs, null = every[:, :draws], every[:, draws:]
    ds = dsa_models([e.model for e in exps], xs, null_inputs=null, labels=labels, n_delays=n_delays,
                    delay_interval=delay_interval, rank=rank, pcs=pcs, ridge=ridge, iterations=iterations,
                    restarts=restarts, tol=tol, seed=seed)
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
