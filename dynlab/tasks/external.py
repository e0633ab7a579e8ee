"""The task of a model trained elsewhere: only its input and output widths.

A run directory's config names a task, because the task fixes the model's input and output
widths and drives analyses run with ``--task``. A model imported from PyTorch
([`dynlab.imports`][]) was trained on data dynlab does not have; its config names this task,
which says the widths and nothing else.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dynlab.errors import require_positive
from dynlab.registry import register
from dynlab.tasks.base import Task


@register("task", "external", "a model trained elsewhere: input and output widths only; white-noise inputs, zero targets")
class ExternalTask(Task):
    r"""The input and output widths of a model trained elsewhere (``dynlab import``).

    Its batches are white noise, $x_t \sim N(0, 1)$ i.i.d. per step and channel, with zero
    targets scored at every step (loss ``mse``): an input stream for analyses driven by a task
    (``--task external``), not something to train on. ``chance`` is the mean squared error of a
    model that outputs zeros, 0. To analyse an imported model under the inputs it was trained
    on, give its analyses another task of the same widths, or feed it inputs from Python.
    """

    def __init__(self, *, input_size: int = 1, output_size: int = 1, length: int = 100):
        require_positive("task.input_size", input_size)
        require_positive("task.output_size", output_size)
        require_positive("task.length", length)
        self.input_size, self.output_size, self.length = input_size, output_size, length
        self.loss, self.chance = "mse", 0.0

    def batch(self, key, batch_size, split="train"):
        x = jax.random.normal(key, (batch_size, self.length, self.input_size))
        y = jnp.zeros((batch_size, self.length, self.output_size))
        return x, y, jnp.ones((batch_size, self.length))
