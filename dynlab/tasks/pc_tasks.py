"""Fixed-batch feed-forward tasks of the PC width/depth study (Innocenti et al., §A.8).

Both hold one fixed set of samples: ``batch(key, n)`` returns the first ``n`` samples of the
split (wrapping around if ``n`` exceeds the pool) and ignores ``key``. Inputs come as
``x[n, 1, D]`` and targets as ``y[n, 1, d_out]`` (one "time step"), so the sequence trainer and
``Rule.evaluate`` work unchanged; :meth:`~FixedBatchTask.fixed_batch` gives the flat ``[P, D]``,
``[P, d_out]`` arrays the PC–BP comparison uses. ``pc-mnist`` also offers a pool to stream
fresh batches from (:meth:`MNISTBatchTask.stream_pool`).
"""

from __future__ import annotations

import warnings
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from dynlab.errors import ConfigError, DataError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Task
from dynlab.tasks.mnist import MNIST_MEAN, MNIST_STD, has_mnist, read_mnist


class FixedBatchTask(Task):
    """A task whose samples are fixed arrays, per split."""

    x_train: Array
    y_train: Array
    x_test: Array
    y_test: Array
    source: str = eqx.field(static=True)

    def batch(self, key, batch_size, split="train"):
        if split not in ("train", "test"):
            raise ConfigError(f"split must be 'train' or 'test', got {split!r}")
        x, y = (self.x_train, self.y_train) if split == "train" else (self.x_test, self.y_test)
        idx = jnp.arange(batch_size) % x.shape[0]
        return x[idx][:, None, :], y[idx][:, None, :], jnp.ones((batch_size, 1), x.dtype)

    def fixed_batch(self, split: str = "train") -> tuple[Array, Array]:
        """The whole fixed batch of ``split``: ``(x[P, D], y[P, d_out])``."""
        return (self.x_train, self.y_train) if split == "train" else (self.x_test, self.y_test)

    def stream_pool(self) -> tuple[Array, Array]:
        """Training samples to stream fresh batches from: ``(x[n, D], y[n, d_out])`` (tasks that have more than one batch)."""
        raise ConfigError(f"task {type(self).__name__} has one fixed batch and no pool to stream batches from; "
                          "streaming needs the MNIST task (pc-mnist)")

    def describe(self) -> str:
        return f"{type(self).__name__} (P={self.x_train.shape[0]}, D={self.input_size}, loss {self.loss}, {self.source})"


@register("task", "pc-toy", "PC toy task: x in R^40 ~ N(0, 1), 20 samples, y = +1 (first half) / -1, full batch")
class ToyTask(FixedBatchTask):
    r"""The paper's toy regression task (§A.8, Fig. 2): $x_\mu \in \mathbb R^{D} \sim \mathcal N(0, I)$,
    $P$ samples, $y_\mu = +1$ for the first half and $-1$ for the rest (as in the public code),
    trained full batch. The test split is the training set (the task measures optimisation).
    ``seed`` draws the inputs. Chance (dynlab ``mse`` of the constant mean prediction 0): 1.
    """

    def __init__(self, *, input_size: int = 40, samples: int = 20, seed: int = 0):
        require_positive("task.input_size", input_size)
        require_positive("task.samples", samples)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"task.seed must be a non-negative integer, got {seed!r}")
        x = jax.random.normal(jax.random.key(seed), (samples, input_size))
        y = jnp.where(jnp.arange(samples) < samples // 2, 1.0, -1.0)[:, None]
        self.x_train, self.y_train, self.x_test, self.y_test = x, y, x, y
        self.input_size, self.output_size, self.length = input_size, 1, 1
        self.loss, self.chance, self.source = "mse", 1.0, f"generated (seed {seed})"


def load_mnist_split(data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """``(images[n, 784] uint8, labels[n], description)`` from the data directory.

    Reads the 60k training split if present, else the 10k test split (which is what CI has).
    """
    stem = "train" if has_mnist("train", data_dir) else "t10k"
    images, labels, img = read_mnist(stem, data_dir)
    return images.reshape(images.shape[0], -1), labels, f"MNIST {stem} split ({img.parent})"


def synthetic_digits(key, n: int) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-shaped stand-in: 10 random stroke prototypes on 28x28, noisy copies, uint8 pixels."""
    k_proto, k_lab, k_noise = jax.random.split(key, 3)
    proto = (jax.random.uniform(k_proto, (10, 28 * 28)) > 0.8).astype(jnp.float32)
    labels = jax.random.randint(k_lab, (n,), 0, 10)
    pix = jnp.clip(proto[labels] + 0.3 * jax.random.normal(k_noise, (n, 28 * 28)), 0.0, 1.0)
    return np.asarray(pix * 255).astype(np.uint8), np.asarray(labels)


SYNTHETIC_BATCHES = 32
"""Size of the synthetic stand-in for MNIST, in batches (test batch included)."""


@register("task", "pc-mnist", "PC fixed MNIST batch: 64 images, one-hot targets, MSE (synthetic if files absent)")
class MNISTBatchTask(FixedBatchTask):
    r"""One fixed batch of MNIST digits with one-hot targets and MSE (the paper's Fig. 1 setting).

    The images of the data directory's MNIST split (:func:`load_mnist_split`) are put in a seeded
    random order (``seed``); the first ``batch`` of them are the fixed training batch, the next
    ``batch`` the test split, and the training batch followed by all the images after the test
    split form the training pool. Pixels are scaled
    to $[0, 1]$ and standardised with the usual MNIST mean 0.1307 and std 0.3081.
    :meth:`stream_pool` gives the whole training pool, in that order, for runs that draw a fresh
    batch each step. (The paper, §A.8, says "batch size 64"; its public code trains on the first
    batch of its loader only, as the fixed batch does.)

    ``source``: ``file`` (the data files must exist), ``synthetic`` (generated digits-like data,
    :func:`synthetic_digits`), or ``auto`` (the files if present, else synthetic with a
    warning). Chance (dynlab ``mse`` of predicting 1/10 everywhere): 0.09.
    """

    pool_pixels: Array
    pool_labels: Array

    def __init__(self, *, batch: int = 64, seed: int = 0, source: Literal["auto", "file", "synthetic"] = "auto",
                 data_dir: str | None = None):
        require_positive("task.batch", batch)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"task.seed must be a non-negative integer, got {seed!r}")
        if source not in ("auto", "file", "synthetic"):
            raise ConfigError(f"task.source must be one of 'auto', 'file', 'synthetic', got {source!r}")
        key = jax.random.key(seed)
        images = None
        if source != "synthetic":
            try:
                images, labels, where = load_mnist_split(data_dir)
            except DataError as e:
                if source == "file":
                    raise
                warnings.warn(f"MNIST files not found, using synthetic digits instead ({e})", RuntimeWarning, stacklevel=2)
        if images is None:
            images, labels = synthetic_digits(jax.random.fold_in(key, 1), SYNTHETIC_BATCHES * batch)
            where = "synthetic digits"
        if images.shape[0] < 2 * batch:
            raise ConfigError(f"task.batch = {batch} needs {2 * batch} images, the data has {images.shape[0]}")
        order = np.asarray(jax.random.permutation(key, images.shape[0]))
        test, pool = order[batch:2 * batch], np.concatenate([order[:batch], order[2 * batch:]])
        self.pool_pixels, self.pool_labels = jnp.asarray(images[pool]), jnp.asarray(labels[pool])
        self.x_train, self.y_train = self._standardise(images[pool[:batch]], labels[pool[:batch]])
        self.x_test, self.y_test = self._standardise(images[test], labels[test])
        self.input_size, self.output_size, self.length = 784, 10, 1
        self.loss, self.chance, self.source = "mse", 0.09, where

    @staticmethod
    def _standardise(pixels, labels) -> tuple[Array, Array]:
        x = (jnp.asarray(pixels, jnp.float32) / 255.0 - MNIST_MEAN) / MNIST_STD
        return x, jax.nn.one_hot(jnp.asarray(labels), 10, dtype=jnp.float32)

    def stream_pool(self) -> tuple[Array, Array]:
        """The training pool, standardised: ``(x[n, 784], y[n, 10])``; its first ``batch`` rows are :meth:`fixed_batch`."""
        return self._standardise(self.pool_pixels, self.pool_labels)
