r"""The trainer: any rule's gradients, an optax optimiser, seeded data, checkpoints, metrics.

Training runs in compiled chunks: one ``eqx.filter_jit`` call advances ``chunk`` steps with a
``lax.scan`` (data generated inside, per-step keys ``fold_in(data_key, step)``), so Python only
wakes up to update the progress bar, evaluate, checkpoint and check for divergence. Because every
step's randomness depends only on (seed, step), the loss curve does not depend on the chunking
and a resumed run continues exactly as an uninterrupted one.

**Stateful tasks** ([`StatefulTask`][dynlab.tasks.base.StatefulTask], truncated BPTT over long streams):
the scan also carries the model state of every stream from one step's window to the next (the
rule's ``grads_from``), resetting the streams the task marks; that carried state travels with the
optimiser state — the trainer's ``opt_state`` is the pair (optax state, carried state), ``None``
for other tasks — so checkpoints hold it and resumed runs stay bit-identical. Held-out metrics
of a stateful task cover its whole test split in one unbroken state ([`stream_metrics`][]).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path
from typing import Callable, Literal, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from dynlab import store
from dynlab.errors import DivergenceError, require_positive
from dynlab.tasks.base import StatefulTask

OPTIMIZERS = {"adam": optax.adam, "adamw": optax.adamw, "sgd": optax.sgd, "rmsprop": optax.rmsprop}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Trainer settings (the ``[train]`` section).

    Attributes:
        steps: optimiser steps in total (a resumed run continues up to this number).
        batch_size: samples per step.
        optimizer: ``adam``, ``adamw``, ``sgd`` or ``rmsprop`` (``rmsprop`` uses decay 0.99,
            the ARU paper's setting).
        lr: peak learning rate.
        schedule: ``constant`` or ``cosine`` (decay to 0 at ``steps``), after ``warmup`` linear steps.
        warmup: linear warm-up steps.
        clip: clip gradients to this global norm; 0 disables clipping.
        weight_decay: decoupled weight decay (``adamw`` only).
        eval_every: evaluate on held-out batches every this many steps (and at the end).
        eval_size: held-out samples per evaluation (the same samples every time); stateful
            tasks evaluate their whole test split instead.
        log_every: steps per compiled chunk (progress-bar refresh).
        checkpoint_every: write ``checkpoint.eqx`` every this many steps (and at the end).
        trainable: glob patterns of the parameters to train ([`parameter_paths`][] names,
            e.g. ``"cells.*.n"``); default all.
        freeze: glob patterns of parameters kept fixed even if ``trainable`` matches them (e.g.
            a transplanted controller, [`dynlab.transfer`][]). Frozen parameters get exactly
            zero updates and no optimiser state, and gradient clipping sees only the trained
            ones; the ``grad_norm`` metric still covers every parameter.
    """

    steps: int = 1500
    batch_size: int = 64
    optimizer: Literal["adam", "adamw", "sgd", "rmsprop"] = "adam"
    lr: float = 3e-3
    schedule: Literal["constant", "cosine"] = "constant"
    warmup: int = 0
    clip: float = 1.0
    weight_decay: float = 0.0
    eval_every: int = 100
    eval_size: int = 512
    log_every: int = 10
    checkpoint_every: int = 100
    trainable: tuple[str, ...] = ("*",)
    freeze: tuple[str, ...] = ()

    def __post_init__(self):
        for name in ("trainable", "freeze"):  # TOML gives lists; a tuple keeps the config hashable
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                from dynlab.errors import ConfigError

                raise ConfigError(f"train.{name} must be a list of glob patterns (strings), got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for name in ("steps", "batch_size", "eval_every", "eval_size", "log_every", "checkpoint_every"):
            require_positive(f"train.{name}", getattr(self, name))
        require_positive("train.lr", self.lr, integer=False)
        for name in ("warmup", "clip", "weight_decay"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):  # NaN fails both
                from dynlab.errors import ConfigError

                raise ConfigError(f"train.{name} must be a finite number >= 0, got {value!r}")

    def schedule_fn(self) -> optax.Schedule:
        decay = self.steps - self.warmup
        if self.schedule == "cosine":
            main = optax.cosine_decay_schedule(self.lr, max(decay, 1))
        else:
            main = optax.constant_schedule(self.lr)
        if self.warmup == 0:
            return main
        return optax.join_schedules([optax.linear_schedule(0.0, self.lr, self.warmup), main], [self.warmup])

    @functools.cache  # one object per distinct config, so compiled training steps are reused across runs
    def optimizer_fn(self) -> optax.GradientTransformation:
        lr = self.schedule_fn()
        if self.optimizer == "adamw":
            opt = optax.adamw(lr, weight_decay=self.weight_decay)
        elif self.optimizer == "rmsprop":
            opt = optax.rmsprop(lr, decay=0.99)
        else:
            opt = OPTIMIZERS[self.optimizer](lr)
        opt = optax.chain(optax.clip_by_global_norm(self.clip), opt) if self.clip > 0 else opt
        if self.trainable == ("*",) and not self.freeze:
            return opt
        labels = functools.partial(trainable_labels, trainable=self.trainable, freeze=self.freeze)
        return optax.multi_transform({"train": opt, "freeze": optax.set_to_zero()}, labels)


def parameter_paths(tree) -> dict[str, jax.Array]:
    """The array leaves of a model (or its parameters) by dotted path, e.g. ``cells.0.w_hh``."""

    def name(key) -> str:
        for attr in ("name", "idx", "key"):  # GetAttrKey, SequenceKey, DictKey
            if hasattr(key, attr):
                return str(getattr(key, attr))
        return str(key)

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {".".join(name(k) for k in path): leaf for path, leaf in leaves if eqx.is_inexact_array(leaf)}


def trainable_labels(params, *, trainable: tuple[str, ...], freeze: tuple[str, ...]):
    """``params`` with each array replaced by ``"train"`` or ``"freeze"`` (for ``optax.multi_transform``).

    A parameter is trained iff its path matches a ``trainable`` glob and no ``freeze`` glob. A
    pattern that matches no parameter, or a selection that leaves nothing to train, is a
    [`ConfigError`][dynlab.errors.ConfigError] (a typo must not silently train everything).
    """
    from fnmatch import fnmatchcase

    from dynlab.errors import ConfigError

    paths = list(parameter_paths(params))
    for key, patterns in (("trainable", trainable), ("freeze", freeze)):
        for pattern in patterns:
            if not any(fnmatchcase(p, pattern) for p in paths):
                raise ConfigError(f"train.{key} pattern {pattern!r} matches no parameter; parameters: {', '.join(paths)}")
    train = {p for p in paths if any(fnmatchcase(p, t) for t in trainable) and not any(fnmatchcase(p, f) for f in freeze)}
    if not train:
        raise ConfigError(f"train.trainable {list(trainable)} minus train.freeze {list(freeze)} leaves nothing to train")
    labels = iter("train" if p in train else "freeze" for p in paths)
    return jax.tree_util.tree_map(lambda leaf: next(labels) if eqx.is_inexact_array(leaf) else None, params)


@dataclasses.dataclass
class TrainResult:
    model: eqx.Module
    metrics: xr.Dataset
    run_dir: Path | None
    steps_done: int
    seconds: float
    snapshots: dict = dataclasses.field(default_factory=dict)
    """The model after each step asked for in ``snapshots`` ([`train`][]): step -> model."""


def _keys(seed: int):
    root = jax.random.key(seed)
    return jax.random.fold_in(root, 1), jax.random.fold_in(root, 2), jax.random.fold_in(root, 3)


def _finite(tree) -> jax.Array:
    leaves = jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_inexact_array))
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(l)) for l in leaves]))


def _initial_carry(model, task, batch_size: int):
    """The model state carried from step to step: each stream's initial state, stacked
    ``[batch_size, ...]``, for stateful tasks; ``None`` for the others."""
    if not isinstance(task, StatefulTask):
        return None
    return jax.tree_util.tree_map(lambda s: jnp.broadcast_to(s, (batch_size,) + s.shape), model.init_state())


def _stateful_grads(model, rule, task, carried, step, batch_size, data_key, rule_key):
    """Truncated BPTT on window ``step`` of the task's streams, each starting where it ended at
    the previous step (``carried``) unless the task resets it to the initial state; returns the
    rule's gradients and metrics and the states to carry on."""
    reset = task.resets(data_key, step, batch_size)
    start = jax.tree_util.tree_map(lambda c, s0: jnp.where(reset.reshape((-1,) + (1,) * s0.ndim), s0, c),
                                   carried, model.init_state())
    return rule.grads_from(model, task.window(step, batch_size), start, rule_key)


def apply_gradients(optimizer: optax.GradientTransformation, grads, opt_state, params):
    """The optimiser's step on ``params`` from ``grads`` (filtered to the inexact arrays);
    returns ``(params, opt_state, grads)``."""
    grads = eqx.filter(grads, eqx.is_inexact_array)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, grads


def update(rule, optimizer: optax.GradientTransformation, params, static, opt_state, batch, key):
    """One training step: ``rule.grads`` at the model ``eqx.combine(params, static)`` on ``batch``,
    then the optimiser's update ([`apply_gradients`][]).

    The step every training loop of dynlab takes: [`train`][] (inside its ``lax.scan`` over
    steps) and the comparisons that train two rules from the same weights in lockstep
    ([`dynlab.analyses.pc_bp`][]). Returns ``(params, opt_state, grads, metrics)``.
    """
    grads, metrics = rule.grads(eqx.combine(params, static), batch, key)
    params, opt_state, grads = apply_gradients(optimizer, grads, opt_state, params)
    return params, opt_state, grads, metrics


def _chunk(params, static, opt_state, start, n, rule, task, optimizer, batch_size, data_key, rule_key):
    """Advance ``n`` steps from step ``start``; return the new state and per-step metrics.

    ``opt_state`` is the pair (optax state, carried model state) of the module docstring.
    """

    def one_step(carry, i):
        params, (opt_state, carried) = carry
        step = start + i
        data_k, rule_k = jax.random.fold_in(data_key, step), jax.random.fold_in(rule_key, step)
        if carried is None:
            params, opt_state, grads, metrics = update(rule, optimizer, params, static, opt_state,
                                                       task.batch(data_k, batch_size), rule_k)
        else:
            model = eqx.combine(params, static)
            grads, metrics, carried = _stateful_grads(model, rule, task, carried, step, batch_size, data_k, rule_k)
            params, opt_state, grads = apply_gradients(optimizer, grads, opt_state, params)
        metrics = dict(metrics, grad_norm=optax.tree.norm(grads), finite=_finite(params))
        return (params, (opt_state, carried)), metrics

    (params, opt_state), metrics = jax.lax.scan(one_step, (params, opt_state), jnp.arange(n))
    return params, opt_state, metrics


_run_chunk = eqx.filter_jit(_chunk)


@eqx.filter_jit
def _run_chunk_many(params, static, opt_state, start, n, rule, task, optimizer, batch_size, data_keys, rule_keys):
    """`_chunk` for several runs at once, vmapped over their leading axis."""

    def one(p, o, dk, rk):
        return _chunk(p, static, o, start, n, rule, task, optimizer, batch_size, dk, rk)

    return jax.vmap(one)(params, opt_state, data_keys, rule_keys)


def stream_metrics(model, rule, task: StatefulTask, split: str = "test") -> dict:
    """Loss and metric of ``model`` over the whole ``split`` of a stateful task, read as one stream
    from the initial state with one unbroken state (batch size 1): the windows in order, each
    starting where the previous one ended. Window means are weighted by their scored steps, so
    the result is the mean over every scored step of the split."""

    def one(state, k):
        batch = task.window(k, 1, split)
        metrics, state = rule.evaluate_from(model, batch, state)
        return state, (metrics, jnp.sum(batch[2]))

    _, (metrics, weight) = jax.lax.scan(one, _initial_carry(model, task, 1), jnp.arange(task.windows(1, split)))
    return jax.tree_util.tree_map(lambda m: jnp.sum(m * weight) / jnp.sum(weight), metrics)


def _held_out(model, rule, task, eval_key, eval_size):
    if isinstance(task, StatefulTask):
        return stream_metrics(model, rule, task)
    return rule.evaluate(model, task.batch(eval_key, eval_size, split="test"))


_evaluate = eqx.filter_jit(_held_out)


@eqx.filter_jit
def _evaluate_many(params, static, rule, task, eval_keys, eval_size):
    return jax.vmap(lambda p, k: _held_out(eqx.combine(p, static), rule, task, k, eval_size))(params, eval_keys)


def _stack(trees):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def _take(tree, i):
    return jax.tree_util.tree_map(lambda a: a[i], tree)


class _Curves:
    """Per-step and per-evaluation metrics, turned into an ``xr.Dataset``."""

    def __init__(self, metric_name: str, previous: xr.Dataset | None, upto: int):
        self.metric = metric_name
        self.train: dict[str, list] = {"step": [], "loss": [], metric_name: [], "grad_norm": [], "lr": []}
        self.eval: dict[str, list] = {"eval_step": [], "eval_loss": [], f"eval_{metric_name}": []}
        if previous is not None:  # resuming: keep the curves up to the checkpoint at step ``upto``
            # (metrics.nc is never older than checkpoint.eqx, but may be newer: cut it back)
            tr = previous.sel(step=previous.step < upto)
            for k in self.train:
                self.train[k] = list(tr[k].values) if k != "step" else list(tr.step.values)
            # the evaluation at ``upto`` was recorded before its checkpoint; at step 0 the loop redoes it
            ev = previous.sel(eval_step=(previous.eval_step <= upto) if upto > 0 else (previous.eval_step < 0))
            for k in self.eval:
                self.eval[k] = list(ev[k].values) if k != "eval_step" else list(ev.eval_step.values)

    def dataset(self, attrs: dict) -> xr.Dataset:
        m = self.metric
        units = {"loss": "", m: "", "grad_norm": "", "lr": ""}
        data = {
            k: ("step", np.asarray(self.train[k], np.float64), {"long_name": f"training {k} (batch, before update)", "units": units[k]})
            for k in ("loss", m, "grad_norm", "lr")
        }
        data.update(
            {
                "eval_loss": ("eval_step", np.asarray(self.eval["eval_loss"], np.float64), {"long_name": "held-out loss"}),
                f"eval_{m}": ("eval_step", np.asarray(self.eval[f"eval_{m}"], np.float64), {"long_name": f"held-out {m}"}),
            }
        )
        coords = {
            "step": ("step", np.asarray(self.train["step"], np.int64), {"long_name": "optimiser step"}),
            "eval_step": ("eval_step", np.asarray(self.eval["eval_step"], np.int64), {"long_name": "step of evaluation"}),
        }
        return xr.Dataset(data, coords=coords, attrs=attrs)


class _Run:
    """The bookkeeping of one training run: its directory, curves, attrs and how it ended."""

    def __init__(self, experiment, run_dir, start: int, previous: xr.Dataset | None):
        from dynlab.config import dumps
        from dynlab.losses import get_loss
        from dynlab.provenance import stamp_attrs

        spec = get_loss(experiment.task.loss)
        self.experiment, self.run_dir, self.metric = experiment, run_dir, spec.metric_name
        self.curves = _Curves(self.metric, previous, start)
        self.diverged: DivergenceError | None = None
        self.attrs = stamp_attrs(analysis="training", seed=experiment.seed, config={
            "config": dumps(experiment.config),
            "task": experiment.task.describe(),
            "chance": experiment.task.chance,
            "metric": self.metric,
            "higher_is_better": int(spec.higher_is_better),
        })

    def record_train(self, step: int, m: dict, lr_at) -> bool:
        """Append one chunk's per-step metrics up to the first non-finite step; False if there was one."""
        ok = np.isfinite(m["loss"]) & m["finite"]
        n = len(ok) if ok.all() else int(np.argmin(ok)) + 1
        for i in range(n):
            self.curves.train["step"].append(step + i)
            self.curves.train["lr"].append(float(lr_at(step + i)))
            for k in ("loss", self.metric, "grad_norm"):
                self.curves.train[k].append(float(m[k][i]))
        return bool(ok.all())

    def record_eval(self, step: int, res: dict) -> None:
        self.curves.eval["eval_step"].append(step)
        self.curves.eval["eval_loss"].append(float(res["loss"]))
        self.curves.eval[f"eval_{self.metric}"].append(float(res[self.metric]))

    def save_metrics(self) -> None:
        if self.run_dir is not None:
            store.save_metrics(self.run_dir, self.curves.dataset(self.attrs))

    def checkpoint(self, step: int, model, opt_state) -> None:
        """Write the metrics so far, then the checkpoint and model of ``step``, as one unit
        ([`dynlab.store.commit`][]: metrics.nc is never older than checkpoint.eqx)."""
        if self.run_dir is not None:
            store.save_checkpoint(self.run_dir, step, model, opt_state, metrics=self.curves.dataset(self.attrs))

    def diverge(self, chunk_start: int, model, opt_state) -> None:
        """Stop this run at its first non-finite step, keeping the newest good state on disk."""
        bad = self.curves.train["step"][-1]
        if bad > chunk_start:  # the chunk's starting point gave finite losses: newer than the last checkpoint
            self.checkpoint(chunk_start, model, opt_state)
        else:
            self.save_metrics()
        where = f"last good checkpoint and metrics kept in {self.run_dir}" if self.run_dir else "lower train.lr or train.clip"
        self.diverged = DivergenceError(
            f"training diverged at step {bad}: non-finite loss or parameters "
            f"(loss {self.curves.train['loss'][-1]}); {where}",
            bad,
        )

    def last_metrics(self) -> dict:
        last = {"loss": self.curves.train["loss"][-1], self.metric: self.curves.train[self.metric][-1]}
        if self.curves.eval["eval_step"]:
            last[f"eval_{self.metric}"] = self.curves.eval[f"eval_{self.metric}"][-1]
        return last


def _loop(runs, params, static, opt_state, start, cfg, advance, evaluate, progress, snapshots=()):
    """The training loop shared by one run and several vmapped runs.

    ``params`` and ``opt_state`` carry a leading run axis; ``advance(params, opt_state, step, n)``
    returns them advanced by ``n`` steps with per-step metrics ``[runs, n]``; ``evaluate(params)``
    returns held-out metrics ``[runs]``. A diverged run stops recording; the others go on. A chunk
    ends at each step of ``snapshots``, where each live run's model is kept.
    """
    lr_at = cfg.schedule_fn()
    chunk = math.gcd(cfg.log_every, cfg.eval_every, cfg.checkpoint_every)
    stops = sorted({int(s) for s in snapshots if start < s <= cfg.steps})
    kept = [{} for _ in runs]
    live = lambda: [(i, r) for i, r in enumerate(runs) if r.diverged is None]  # noqa: E731

    def evaluate_live(step, params):
        res = jax.device_get(evaluate(params))
        for i, run in live():
            run.record_eval(step, _take(res, i))
        store.fault_point("eval")

    t0 = time.perf_counter()
    if start == 0:
        evaluate_live(0, params)
    step = start
    while step < cfg.steps and live():
        n = min(chunk, cfg.steps - step, *(s - step for s in stops if s > step))
        new_params, new_opt, m = advance(params, opt_state, step, n)
        m = jax.device_get(m)
        store.fault_point("chunk")
        for i, run in live():
            if not run.record_train(step, _take(m, i), lr_at):
                run.diverge(step, eqx.combine(_take(params, i), static), _take(opt_state, i))
        params, opt_state, step = new_params, new_opt, step + n
        if step in stops:
            for i, _ in live():
                kept[i][step] = eqx.combine(_take(params, i), static)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            evaluate_live(step, params)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            for i, run in live():
                run.checkpoint(step, eqx.combine(_take(params, i), static), _take(opt_state, i))
        if progress is not None and live():
            progress(step, cfg.steps, live()[0][1].last_metrics())
    seconds = time.perf_counter() - t0
    results = []
    for i, run in enumerate(runs):
        if run.diverged is not None:
            results.append(run.diverged)
            continue
        run.save_metrics()
        model = eqx.combine(_take(params, i), static)
        results.append(TrainResult(model, run.curves.dataset(run.attrs), run.run_dir, step, seconds, kept[i]))
    return results


def train(
    experiment,
    run_dir: Path | None = None,
    *,
    resume: bool = False,
    progress: Callable | None = None,
    on_resume: Callable[[int], None] | None = None,
    snapshots: Sequence[int] = (),
) -> TrainResult:
    """Train ``experiment.model`` with ``experiment.rule`` on ``experiment.task``.

    Args:
        experiment: a [`dynlab.experiment.Experiment`][].
        run_dir: where config, checkpoints, metrics and figures go (``None``: keep in memory).
        resume: continue from ``run_dir/checkpoint.eqx`` (same config) instead of starting anew.
            The checkpoint and metrics are checksum-verified, the metrics cut back to the
            checkpoint's step, model.eqx rewritten from the checkpoint and temporaries of a
            killed writer removed, so that a run killed at any moment and resumed ends with the
            files of an uninterrupted run. A run killed before its first checkpoint (no
            checkpoint.eqx, model.eqx or metrics.nc) starts again from step 0.
        progress: called as ``progress(step, total, metrics_dict)`` after every chunk.
        on_resume: called as ``on_resume(step)`` with the step a resumed run continues from.
        snapshots: steps after which the model is kept in the result's ``snapshots`` (a
            scenario's ``step-N`` stages). Training passes through them, numbers unchanged.

    Raises:
        DivergenceError: a non-finite loss or parameter. The last good checkpoint and the metrics
            up to the first bad step stay in ``run_dir``.
    """
    cfg, model, task, rule = experiment.train, experiment.model, experiment.task, experiment.rule
    optimizer = cfg.optimizer_fn()
    data_key, rule_key, eval_key = _keys(experiment.seed)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt_state = (optimizer.init(params), _initial_carry(model, task, cfg.batch_size))
    start, previous = 0, None
    if resume:
        store.recover(run_dir)  # a killed run's temporaries and unsettled checksums
        if any((Path(run_dir) / name).exists() for name in (store.CHECKPOINT, store.MODEL, store.METRICS)):
            start, model, opt_state = store.load_checkpoint(run_dir, model, opt_state)
            params, static = eqx.partition(model, eqx.is_inexact_array)
            previous = store.load_metrics(run_dir)
            store.save_model(run_dir, model)  # model.eqx is the checkpoint's model, even if killed in between
        else:  # killed before its first checkpoint: nothing to continue, start at step 0
            store.save_checkpoint(run_dir, 0, model, opt_state)
        if on_resume is not None:
            on_resume(start)
    elif run_dir is not None:
        store.write_config(run_dir, experiment.config)
        store.save_checkpoint(run_dir, 0, model, opt_state)

    def advance(params, opt_state, step, n):
        out = _run_chunk(_take(params, 0), static, _take(opt_state, 0), jnp.asarray(step), n, rule, task, optimizer,
                         cfg.batch_size, data_key, rule_key)
        return jax.tree_util.tree_map(lambda a: a[None], out)

    def evaluate(params):
        res = _evaluate(eqx.combine(_take(params, 0), static), rule, task, eval_key, cfg.eval_size)
        return jax.tree_util.tree_map(lambda a: a[None], res)

    run = _Run(experiment, run_dir, start, previous)
    params, opt_state = jax.tree_util.tree_map(lambda a: a[None], (params, opt_state))
    (result,) = _loop([run], params, static, opt_state, start, cfg, advance, evaluate, progress, snapshots)
    if isinstance(result, DivergenceError):
        raise result
    return result


def _train_or_divergence(experiment, run_dir, progress, snapshots=()):
    from dynlab.errors import DivergenceError

    try:
        return train(experiment, run_dir, progress=progress, snapshots=snapshots)
    except DivergenceError as e:
        return e


def train_seeds(experiments, run_dirs=None, *, progress: Callable | None = None, snapshots: Sequence[int] = ()) -> list:
    """Train runs that differ only in their seed as one ``jax.vmap``-ed computation.

    Each run gets its own run directory, curves and checkpoints exactly as with [`train`][];
    a run that diverges stops alone (its entry in the returned list is the
    [`DivergenceError`][dynlab.errors.DivergenceError]), the others go on. The numbers equal those of
    separate [`train`][] calls up to float32 rounding (batched and unbatched matrix products
    may sum in different orders), not bit for bit.

    Only the float arrays are batched; everything else (integer wiring, routing indices) must be
    the same in every run. Units whose seed also draws those (``elm`` with random routing,
    ``elm-net``'s gather) are therefore trained one seed after another with [`train`][].
    """
    from dynlab.config import dumps
    from dynlab.errors import ConfigError

    base = {dumps({**e.config, "seed": 0}) for e in experiments}
    if len(base) != 1:
        raise ConfigError("train_seeds needs runs whose configs differ only in their seed")
    run_dirs = list(run_dirs) if run_dirs is not None else [None] * len(experiments)
    first = experiments[0]
    cfg, task, rule = first.train, first.task, first.rule
    optimizer = cfg.optimizer_fn()
    parts = [eqx.partition(e.model, eqx.is_inexact_array) for e in experiments]
    static = parts[0][1]
    if not all(bool(eqx.tree_equal(static, s)) for _, s in parts[1:]):
        return [_train_or_divergence(e, d, progress, snapshots) for e, d in zip(experiments, run_dirs)]
    params = _stack([p for p, _ in parts])
    opt_states = [(optimizer.init(p), _initial_carry(e.model, task, cfg.batch_size)) for e, (p, _) in zip(experiments, parts)]
    opt_state = _stack(opt_states)
    keys = [_keys(e.seed) for e in experiments]
    data_keys, rule_keys, eval_keys = (jnp.stack([k[j] for k in keys]) for j in range(3))
    for e, d, (p, s), o in zip(experiments, run_dirs, parts, opt_states):
        if d is not None:
            store.write_config(d, e.config)
            store.save_checkpoint(d, 0, eqx.combine(p, s), o)

    def advance(params, opt_state, step, n):
        return _run_chunk_many(params, static, opt_state, jnp.asarray(step), n, rule, task, optimizer,
                               cfg.batch_size, data_keys, rule_keys)

    def evaluate(params):
        return _evaluate_many(params, static, rule, task, eval_keys, cfg.eval_size)

    runs = [_Run(e, d, 0, None) for e, d in zip(experiments, run_dirs)]
    return _loop(runs, params, static, opt_state, 0, cfg, advance, evaluate, progress, snapshots)
