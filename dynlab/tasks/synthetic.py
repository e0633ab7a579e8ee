"""Synthetic memory tasks that need no files.

Both generate fresh samples from the key, so "train" and "test" differ only by the key stream
the trainer uses for them (they never share a sample with probability ~1).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Criterion, Task


@register("task", "adding", "adding problem: sum the two marked values of a noise sequence (mse, chance 1/6)")
class AddingTask(Task):
    r"""The adding problem (Hochreiter & Schmidhuber 1997, in the form of Le et al. 2015).

    Input ``[T, 2]``: channel 0 holds values $v_t \sim U(0, 1)$, channel 1 marks two steps, one
    drawn uniformly in the first half and one in the second half. The target, scored at the last
    step only, is the sum of the two marked values.

    Chance: the best prediction that ignores the input is the mean, 1, whose mean squared error is
    $\operatorname{Var}(v_a + v_b) = 2 \cdot \tfrac{1}{12} = \tfrac{1}{6} \approx 0.1667$.

    The default ``length`` is 30, so that a 64-unit ARU solves it in about a minute on 2 CPU
    cores (measured: held-out MSE 0.006 after 1,500 steps); at length 50 the same network was
    still on the chance plateau (MSE 0.14) after 2,000 steps. Longer lengths are the classic
    hard versions (Le et al. use 150–750).
    """

    criterion = Criterion("mse", 0.01, higher_is_better=False,
                          source="Hochreiter & Schmidhuber 1997 stop training at an average error below 0.01 "
                                 "(chance 1/6)")

    def __init__(self, *, length: int = 30):
        require_positive("task.length", length)
        if length < 2:
            raise ConfigError(f"task.length must be at least 2 for the adding task, got {length}")
        self.input_size, self.output_size, self.length = 2, 1, length
        self.loss, self.chance = "mse", 1.0 / 6.0

    def batch(self, key, batch_size, split="train"):
        T, half = self.length, self.length // 2
        k_v, k_a, k_b = jax.random.split(key, 3)
        values = jax.random.uniform(k_v, (batch_size, T))
        first = jax.random.randint(k_a, (batch_size,), 0, half)
        second = jax.random.randint(k_b, (batch_size,), half, T)
        marks = jax.nn.one_hot(first, T) + jax.nn.one_hot(second, T)
        x = jnp.stack([values, marks], axis=-1)
        target = jnp.sum(values * marks, axis=1)
        y = jnp.zeros((batch_size, T, 1)).at[:, -1, 0].set(target)
        mask = jnp.zeros((batch_size, T)).at[:, -1].set(1.0)
        return x, y, mask


@register("task", "recall", "delayed recall: reproduce a symbol sequence after a delay (ce_all, chance 1/alphabet)")
class RecallTask(Task):
    r"""Delayed copy / recall.

    A sequence of ``symbols`` tokens drawn uniformly from an alphabet of ``alphabet`` is shown one
    per step (one-hot), then ``delay`` silent steps follow, then a cue channel switches on for
    ``symbols`` steps during which the model must output the tokens in order. Input
    ``[T, alphabet + 1]`` with $T = 2\,\text{symbols} + \text{delay}$; targets are scored only at
    the recall steps (loss ``ce_all``, metric per-symbol accuracy).

    Chance: without memory of the tokens every guess is right with probability $1/\text{alphabet}$.
    """

    alphabet: int = eqx.field(static=True)
    symbols: int = eqx.field(static=True)
    delay: int = eqx.field(static=True)

    def __init__(self, *, alphabet: int = 4, symbols: int = 3, delay: int = 10):
        require_positive("task.alphabet", alphabet)
        require_positive("task.symbols", symbols)
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ConfigError(f"task.delay must be a non-negative integer, got {delay!r}")
        self.alphabet, self.symbols, self.delay = alphabet, symbols, delay
        self.input_size, self.output_size = alphabet + 1, alphabet
        self.length = 2 * symbols + delay
        self.loss, self.chance = "ce_all", 1.0 / alphabet

    def batch(self, key, batch_size, split="train"):
        L, D, A = self.symbols, self.delay, self.alphabet
        tokens = jax.random.randint(key, (batch_size, L), 0, A)
        shown = jax.nn.one_hot(tokens, A + 1)  # the cue channel (index A) is off while showing
        silence = jnp.zeros((batch_size, D, A + 1))
        cue = jnp.zeros((batch_size, L, A + 1)).at[:, :, A].set(1.0)
        x = jnp.concatenate([shown, silence, cue], axis=1)
        y = jnp.concatenate([jnp.zeros((batch_size, L + D), tokens.dtype), tokens], axis=1)
        mask = jnp.concatenate([jnp.zeros((batch_size, L + D)), jnp.ones((batch_size, L))], axis=1)
        return x, y, mask
