r"""The task-trained flip-flop network as a teacher (Sussillo & Barak 2013).

A GRU trained by dynlab's own trainer on the N-bit flip-flop ([`dynlab.tasks.cognitive.flipflop`][])
with BPTT, then used as a [`NetworkTeacher`][dynlab.teachers.network.NetworkTeacher] driven by the
flip-flop's inputs ([`TaskInputs`][]). Its fingerprint: $2^N$ stable fixed points at zero input,
one near each corner of the output cube, joined by saddles.

Training is done once per configuration: the run directory
``<cache>/teachers/flipflop-<digest>`` ([`dynlab.teachers.cache`][]) is a complete dynlab run
(``dynlab analyze ... --checkpoint`` reads it), keyed by the digest of its config; later calls
load it (checksums verified). A run that was killed is resumed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import equinox as eqx
import jax

from dynlab.tasks.base import Task
from dynlab.teachers.cache import cache_dir
from dynlab.teachers.network import NetworkTeacher


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
    trials are those of its training task (``length`` steps)."""
    from dynlab import experiment, store
    from dynlab.train import train

    config = trained_config(bits=bits, hidden=hidden, steps=steps, length=length, seed=seed)
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]
    run_dir = cache_dir() / "teachers" / f"flipflop-{digest}"
    with jax.ensure_compile_time_eval():  # concrete arrays even while a config is checked abstractly
        metrics = store.load_metrics(run_dir) if run_dir.is_dir() else None
        if metrics is not None and int(metrics["step"][-1]) + 1 >= steps:
            exp = experiment.load_run(run_dir)
        else:
            exp = experiment.build(config)
            resume = run_dir.is_dir()
            if not resume:
                store.claim_run_dir(run_dir)
            exp = dataclasses.replace(exp, model=train(exp, run_dir, resume=resume).model)
    return NetworkTeacher(exp.model, TaskInputs(exp.task))
