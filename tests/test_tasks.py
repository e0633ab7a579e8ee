"""Synthetic tasks: targets follow from the inputs, and the chance levels are what they claim."""

import jax
import jax.numpy as jnp
import numpy as np

import dynlab
from dynlab.losses import get_loss


def test_adding_targets_and_chance_level():
    task = dynlab.build("task", "adding", length=20)
    x, y, mask = task.batch(jax.random.key(0), 20000)
    x, y, mask = map(np.asarray, (x, y, mask))
    assert x.shape == (20000, 20, 2) and y.shape == (20000, 20, 1)
    marks = x[..., 1]
    assert np.all(marks.sum(1) == 2) and np.all(marks[:, :10].sum(1) == 1)
    np.testing.assert_allclose(y[:, -1, 0], (x[..., 0] * marks).sum(1), rtol=1e-6)
    assert np.all(mask[:, :-1] == 0) and np.all(mask[:, -1] == 1)
    # the input-blind optimum predicts 1 everywhere; its mse must be the documented chance 1/6
    const = jnp.ones((20000, 20, 1))
    mse = float(get_loss(task.loss).loss(const, y, mask))
    assert abs(mse - task.chance) < 0.005  # standard error of this estimate is ~0.0013


def test_recall_structure_and_chance():
    task = dynlab.build("task", "recall", alphabet=5, symbols=4, delay=7)
    x, y, mask = map(np.asarray, task.batch(jax.random.key(1), 3000))
    assert x.shape == (3000, 15, 6) and task.length == 15 and task.chance == 1 / 5
    shown = x[:, :4, :5].argmax(-1)
    np.testing.assert_array_equal(y[:, -4:], shown)  # recall the tokens in order
    assert np.all(x[:, 4:11] == 0) and np.all(x[:, 11:, 5] == 1) and np.all(x[:, 11:, :5] == 0)
    np.testing.assert_array_equal(mask, np.r_[np.zeros(11), np.ones(4)][None].repeat(3000, 0))
    # a model that always answers symbol 0 scores ~1/alphabet
    logits = jnp.zeros((3000, 15, 5)).at[..., 0].set(1.0)
    acc = float(get_loss(task.loss).metric(logits, y, mask))
    assert abs(acc - 0.2) < 0.02


def test_batches_are_seeded():
    task = dynlab.build("task", "recall")
    a = task.batch(jax.random.key(7), 4)
    b = task.batch(jax.random.key(7), 4)
    c = task.batch(jax.random.key(8), 4)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not np.array_equal(a[0], c[0])
