r"""The trainer: any rule's gradients, an optax optimiser, seeded data, checkpoints, metrics.

Training runs in compiled chunks: one ``eqx.filter_jit`` call advances ``chunk`` steps with a
``lax.scan`` (data generated inside, per-step keys ``fold_in(data_key, step)``), so Python only
wakes up to update the progress bar, evaluate, checkpoint and check for divergence. Because every
step's randomness depends only on (seed, step), the loss curve does not depend on the chunking
and a resumed run continues exactly as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Callable, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from dynlab import store
from dynlab.errors import DivergenceError, require_positive

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
        eval_size: held-out samples per evaluation (the same samples every time).
        log_every: steps per compiled chunk (progress-bar refresh).
        checkpoint_every: write ``checkpoint.eqx`` every this many steps (and at the end).
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

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_every", "eval_size", "log_every", "checkpoint_every"):
            require_positive(f"train.{name}", getattr(self, name))
        require_positive("train.lr", self.lr, integer=False)
        for name in ("warmup", "clip", "weight_decay"):
            if getattr(self, name) < 0:
                from dynlab.errors import ConfigError

                raise ConfigError(f"train.{name} must be >= 0, got {getattr(self, name)!r}")

    def schedule_fn(self) -> optax.Schedule:
        decay = self.steps - self.warmup
        if self.schedule == "cosine":
            main = optax.cosine_decay_schedule(self.lr, max(decay, 1))
        else:
            main = optax.constant_schedule(self.lr)
        if self.warmup == 0:
            return main
        return optax.join_schedules([optax.linear_schedule(0.0, self.lr, self.warmup), main], [self.warmup])

    def optimizer_fn(self) -> optax.GradientTransformation:
        lr = self.schedule_fn()
        if self.optimizer == "adamw":
            opt = optax.adamw(lr, weight_decay=self.weight_decay)
        elif self.optimizer == "rmsprop":
            opt = optax.rmsprop(lr, decay=0.99)
        else:
            opt = OPTIMIZERS[self.optimizer](lr)
        return optax.chain(optax.clip_by_global_norm(self.clip), opt) if self.clip > 0 else opt


@dataclasses.dataclass
class TrainResult:
    model: eqx.Module
    metrics: xr.Dataset
    run_dir: Path | None
    steps_done: int
    seconds: float


def _keys(seed: int):
    root = jax.random.key(seed)
    return jax.random.fold_in(root, 1), jax.random.fold_in(root, 2), jax.random.fold_in(root, 3)


def _finite(tree) -> jax.Array:
    leaves = jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_inexact_array))
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(l)) for l in leaves]))


@eqx.filter_jit
def _run_chunk(params, static, opt_state, start, n, rule, task, optimizer, batch_size, data_key, rule_key):
    """Advance ``n`` steps from step ``start``; return the new state and per-step metrics."""

    def one_step(carry, i):
        params, opt_state = carry
        step = start + i
        model = eqx.combine(params, static)
        batch = task.batch(jax.random.fold_in(data_key, step), batch_size)
        grads, metrics = rule.grads(model, batch, jax.random.fold_in(rule_key, step))
        grads = eqx.filter(grads, eqx.is_inexact_array)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = eqx.apply_updates(params, updates)
        metrics = dict(metrics, grad_norm=optax.tree.norm(grads), finite=_finite(params))
        return (params, opt_state), metrics

    (params, opt_state), metrics = jax.lax.scan(one_step, (params, opt_state), jnp.arange(n))
    return params, opt_state, metrics


@eqx.filter_jit
def _evaluate(model, rule, task, eval_key, eval_size):
    return rule.evaluate(model, task.batch(eval_key, eval_size, split="test"))


class _Curves:
    """Per-step and per-evaluation metrics, turned into an ``xr.Dataset``."""

    def __init__(self, metric_name: str, previous: xr.Dataset | None, upto: int):
        self.metric = metric_name
        self.train: dict[str, list] = {"step": [], "loss": [], metric_name: [], "grad_norm": [], "lr": []}
        self.eval: dict[str, list] = {"eval_step": [], "eval_loss": [], f"eval_{metric_name}": []}
        if previous is not None:  # resuming: keep the curves up to the checkpoint
            tr = previous.sel(step=previous.step < upto)
            for k in self.train:
                self.train[k] = list(tr[k].values) if k != "step" else list(tr.step.values)
            ev = previous.sel(eval_step=previous.eval_step <= upto)
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


def train(
    experiment,
    run_dir: Path | None = None,
    *,
    resume: bool = False,
    progress: Callable | None = None,
) -> TrainResult:
    """Train ``experiment.model`` with ``experiment.rule`` on ``experiment.task``.

    Args:
        experiment: a :class:`dynlab.experiment.Experiment`.
        run_dir: where config, checkpoints, metrics and figures go (``None``: keep in memory).
        resume: continue from ``run_dir/checkpoint.eqx`` (same config) instead of starting anew.
        progress: called as ``progress(step, total, metrics_dict)`` after every chunk.

    Raises:
        DivergenceError: a non-finite loss or parameter. The last good checkpoint and the metrics
            up to the first bad step stay in ``run_dir``.
    """
    import dynlab

    cfg, model, task, rule = experiment.train, experiment.model, experiment.task, experiment.rule
    optimizer = cfg.optimizer_fn()
    data_key, rule_key, eval_key = _keys(experiment.seed)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt_state = optimizer.init(params)
    start, previous = 0, None
    if resume:
        start, model, opt_state = store.load_checkpoint(run_dir, model, opt_state)
        params, static = eqx.partition(model, eqx.is_inexact_array)
        if (Path(run_dir) / store.METRICS).is_file():
            previous = xr.load_dataset(Path(run_dir) / store.METRICS, engine="h5netcdf")
    elif run_dir is not None:
        store.write_config(run_dir, experiment.config)
        store.save_checkpoint(run_dir, 0, model, opt_state)

    from dynlab.config import dumps
    from dynlab.losses import get_loss

    metric = get_loss(task.loss).metric_name
    curves = _Curves(metric, previous, start)
    attrs = {
        "dynlab_version": dynlab.__version__,
        "analysis": "training",
        "config": dumps(experiment.config),
        "seed": experiment.seed,
        "task": task.describe(),
        "chance": task.chance,
        "metric": metric,
        "higher_is_better": int(get_loss(task.loss).higher_is_better),
    }
    lr_at = cfg.schedule_fn()
    chunk = math.gcd(cfg.log_every, cfg.eval_every, cfg.checkpoint_every)

    def save_metrics():
        if run_dir is not None:
            store.write_dataset(Path(run_dir) / store.METRICS, curves.dataset(attrs))

    def evaluate(step, params):
        res = _evaluate(eqx.combine(params, static), rule, task, eval_key, cfg.eval_size)
        curves.eval["eval_step"].append(step)
        curves.eval["eval_loss"].append(float(res["loss"]))
        curves.eval[f"eval_{metric}"].append(float(res[metric]))

    t0 = time.perf_counter()
    if start == 0:
        evaluate(0, params)
    step = start
    while step < cfg.steps:
        n = min(chunk, cfg.steps - step)
        new_params, new_opt, m = _run_chunk(
            params, static, opt_state, jnp.asarray(step), n, rule, task, optimizer, cfg.batch_size, data_key, rule_key
        )
        m = jax.device_get(m)
        ok = np.isfinite(m["loss"]) & m["finite"]
        n_ok = n if ok.all() else int(np.argmin(ok))
        for i in range(n if ok.all() else n_ok + 1):
            curves.train["step"].append(step + i)
            curves.train["lr"].append(float(lr_at(step + i)))
            for k in ("loss", metric, "grad_norm"):
                curves.train[k].append(float(m[k][i]))
        if not ok.all():
            bad = step + n_ok
            if n_ok > 0 and run_dir is not None:
                # the chunk's starting point produced finite losses: the newest good state we have
                store.save_checkpoint(run_dir, step, eqx.combine(params, static), opt_state)
            save_metrics()
            raise DivergenceError(
                f"training diverged at step {bad}: non-finite loss or parameters "
                f"(loss {m['loss'][n_ok]}); "
                + (f"last good checkpoint and metrics kept in {run_dir}" if run_dir else "lower train.lr or train.clip"),
                bad,
            )
        params, opt_state, step = new_params, new_opt, step + n
        if step % cfg.eval_every == 0 or step == cfg.steps:
            evaluate(step, params)
        if run_dir is not None and (step % cfg.checkpoint_every == 0 or step == cfg.steps):
            store.save_checkpoint(run_dir, step, eqx.combine(params, static), opt_state)
            save_metrics()
        if progress is not None:
            last = {"loss": float(m["loss"][-1]), metric: float(m[metric][-1])}
            if curves.eval["eval_step"]:
                last[f"eval_{metric}"] = curves.eval[f"eval_{metric}"][-1]
            progress(step, cfg.steps, last)
    seconds = time.perf_counter() - t0
    save_metrics()
    return TrainResult(eqx.combine(params, static), curves.dataset(attrs), run_dir, step, seconds)
