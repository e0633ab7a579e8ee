r"""The task-trained flip-flop network as a teacher (Sussillo & Barak 2013).

A GRU trained by dynlab's own trainer on the N-bit flip-flop ([`dynlab.tasks.cognitive.flipflop`][])
with BPTT, then used as a [`NetworkTeacher`][dynlab.teachers.network.NetworkTeacher] driven by the
flip-flop's inputs ([`TaskInputs`][]). Its fingerprint: $2^N$ stable fixed points at zero input,
one near each corner of the output cube, joined by saddles.

Training is done once per configuration: the run directory
``<cache>/teachers/flipflop-<digest>`` ([`dynlab.teachers.cache`][]) is a complete dynlab run
(``dynlab analyze ... --checkpoint`` reads it), keyed by the digest of its config; later calls
load it (checksums verified).

**Enforces**: the cache never holds a partial teacher. Training runs in a temporary directory
beside the entry (``.flipflop-<digest>.<random>.partial``), renamed to the entry only when every
step is done; a failure or Ctrl-C removes it (a killed process's is never read, and trains anew).
Before any work: the cache can be written, the teacher's model and one training step fit in
memory ([`dynlab.budget`][]; XLA would abort the process on ``hidden = 10^6``), and the teacher trains
at most [`MAX_TRAIN_STEPS`][] steps (its training runs while a study is checked, so a bound keeps
the check finite).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import equinox as eqx
import jax

from dynlab.errors import ConfigError
from dynlab.tasks.base import Task
from dynlab.teachers.cache import cache_dir, require_writable
from dynlab.teachers.base import stand_in
from dynlab.teachers.network import NetworkTeacher

MAX_TRAIN_STEPS = 100_000
"""The most steps the teacher trains (``task.train_steps``), 67 x the default."""


class TaskInputs(eqx.Module):
    """A task's inputs as a teacher's input protocol (the targets are dropped)."""

    task: Task

    def __call__(self, key, batch_size: int, length: int):
        return self.task.batch(key, batch_size)[0][:, :length]

    def identity(self) -> dict:
        fields = {k: v for k, v in vars(self.task).items() if isinstance(v, (int, float, str, bool))}
        return {"task": type(self.task).__name__, **fields}


def trained_config(*, bits: int, hidden: int, steps: int, length: int, seed: int) -> dict:
    """The run config of the teacher: a GRU of ``hidden`` units on the ``bits``-bit flip-flop of
    trials of ``length`` steps, ``steps`` BPTT steps from ``seed`` (the task's and trainer's other
    settings: their defaults)."""
    return {"seed": seed, "model": {"unit": "gru", "hidden": hidden},
            "task": {"name": "flipflop", "bits": bits, "length": length}, "rule": {"name": "bptt"},
            "train": {"steps": steps}}


def flipflop_teacher(*, bits: int = 3, hidden: int = 64, steps: int = 1500, length: int = 64,
                     seed: int = 0) -> NetworkTeacher:
    """The trained flip-flop teacher (module docstring), trained on first use and cached; its
    trials are those of its training task (``length`` steps). While a config is being checked
    ([`dynlab.experiment.checking`][]) and the teacher is not cached yet, the untrained network of the
    same shapes stands in: checking a study never trains it."""
    from dynlab import experiment, store

    if steps > MAX_TRAIN_STEPS:
        raise ConfigError(f"task.train_steps = {steps:,} is more than the flip-flop teacher trains: at most "
                          f"{MAX_TRAIN_STEPS:,} (default 1,500)")
    config = trained_config(bits=bits, hidden=hidden, steps=steps, length=length, seed=seed)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    run_dir = cache_dir() / "teachers" / f"flipflop-{digest}"
    if not _complete(run_dir, steps):
        try:  # abstractly, outside the compile-time evaluation below, which would make every array
            experiment.check(config)
        except ConfigError as e:  # the teacher's model.hidden is the task's hidden
            raise ConfigError(str(e).replace("model.hidden", "task.hidden")) from None
        require_writable()
    with jax.ensure_compile_time_eval():  # concrete arrays even while a config is checked abstractly
        if _complete(run_dir, steps):
            exp = experiment.load_run(run_dir)
        elif experiment.checking():  # a study being checked: the network's shapes stand in, nothing trains
            exp = experiment.build(config, training=False, weights=False)  # checked to train just above
            exp = dataclasses.replace(exp, model=stand_in(exp.model))
        else:
            exp = experiment.build(config)
            exp = dataclasses.replace(exp, model=_train_whole(exp, run_dir))
    return NetworkTeacher(exp.model, TaskInputs(exp.task))


def _complete(run_dir: Path, steps: int) -> bool:
    """Whether ``run_dir`` holds a teacher trained all ``steps`` steps (an entry that an earlier
    version resumed in place may not)."""
    from dynlab import store

    with jax.ensure_compile_time_eval():
        metrics = store.load_metrics(run_dir) if (run_dir / store.MODEL).is_file() else None
    return metrics is not None and int(metrics["step"][-1]) + 1 >= steps


def _train_whole(exp, run_dir: Path):
    """Train ``exp`` in a temporary directory beside ``run_dir`` and rename it to ``run_dir`` when
    done, so that ``run_dir`` is a complete run or absent; returns the trained model. A process that
    finished the same teacher first keeps its entry (they are the same: same config, same seed)."""
    from dynlab import store
    from dynlab.train import train

    partial = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}.", suffix=".partial", dir=run_dir.parent))
    try:
        store.claim_run_dir(partial)
        model = train(exp, partial).model
        try:
            partial.rename(run_dir)
        except OSError:  # run_dir exists: another process's complete teacher, or an incomplete one to replace
            if not _complete(run_dir, exp.train.steps):
                shutil.rmtree(run_dir)
                partial.rename(run_dir)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return model
