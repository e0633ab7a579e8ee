"""Fixed-batch feed-forward tasks of the PC width/depth study (Innocenti et al., §A.8).

Both hold one fixed set of samples: ``batch(key, n)`` returns the first ``n`` samples of the
split (wrapping around if ``n`` exceeds the pool) and ignores ``key``. Inputs come as
``x[n, 1, D]`` and targets as ``y[n, 1, d_out]`` (one "time step"), so the sequence trainer and
``Rule.evaluate`` work unchanged; [`fixed_batch`][FixedBatchTask.fixed_batch] gives the flat ``[P, D]``,
``[P, d_out]`` arrays the PC–BP comparison uses. The image tasks, ``pc-mnist`` (MNIST or
Fashion-MNIST, ``dataset``) and ``pc-cifar10``, also offer a pool to stream fresh batches from
([`ImageBatchTask.stream_pool`][]).
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
from dynlab.tasks.cifar import channel_stats, cifar_pixels, has_cifar10, read_cifar10
from dynlab.tasks.mnist import Dataset, has_mnist, mnist_like, read_mnist


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
                          "streaming needs an image task (pc-mnist, pc-cifar10)")

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


def load_mnist_split(data_dir: str | None = None, *, dataset: str = "mnist") -> tuple[np.ndarray, np.ndarray, str]:
    """``(images[n, 784] uint8, labels[n], description)`` from the data directory.

    Reads the 60k training split of ``dataset`` (``mnist`` or ``fashion-mnist``) if present, else
    the 10k test split (which is what CI has for MNIST).
    """
    stem = "train" if has_mnist("train", data_dir, dataset=dataset) else "t10k"
    images, labels, img = read_mnist(stem, data_dir, dataset=dataset)
    return images.reshape(images.shape[0], -1), labels, f"{mnist_like(dataset).title} {stem} split ({img.parent})"


def synthetic_images(key, n: int, size: int = 784) -> tuple[np.ndarray, np.ndarray]:
    """Image-shaped stand-in: 10 random stroke prototypes of ``size`` pixels (784: 28x28), noisy
    copies, uint8 pixels; ``(pixels[n, size], labels[n])``."""
    k_proto, k_lab, k_noise = jax.random.split(key, 3)
    proto = (jax.random.uniform(k_proto, (10, size)) > 0.8).astype(jnp.float32)
    labels = jax.random.randint(k_lab, (n,), 0, 10)
    pix = jnp.clip(proto[labels] + 0.3 * jax.random.normal(k_noise, (n, size)), 0.0, 1.0)
    return np.asarray(pix * 255).astype(np.uint8), np.asarray(labels)


SYNTHETIC_BATCHES = 32
"""Size of the synthetic stand-in for the image data, in batches (test batch included)."""


def _check_source(batch, seed, source) -> None:
    require_positive("task.batch", batch)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"task.seed must be a non-negative integer, got {seed!r}")
    if source not in ("auto", "file", "synthetic"):
        raise ConfigError(f"task.source must be one of 'auto', 'file', 'synthetic', got {source!r}")


class ImageBatchTask(FixedBatchTask):
    r"""One fixed batch of images with one-hot targets and MSE (the PC paper's Fig. 1 setting).

    The images read (flat ``[n, D]`` bytes) are put in a seeded random order (``seed``); the
    first ``batch`` of them are the fixed training batch, the next ``batch`` the test split, and
    the training batch followed by all the images after the test split form the training pool.
    Pixels are scaled to $[0, 1]$ and standardised per channel, $x = (p/255 - m_c)/s_c$, the
    channel $c$ of input $d$ being $\lfloor d C / D \rfloor$ (channel planes one after another, as
    the CIFAR-10 record stores them). [`stream_pool`][] gives the whole training pool, in that
    order, for runs that draw a fresh batch each step. (The paper, §A.8, says "batch size 64";
    its public code trains on the first batch of its loader only, as the fixed batch does.)
    Chance (dynlab ``mse`` of predicting 1/10 everywhere): 0.09.
    """

    pool_pixels: Array
    pool_labels: Array
    pixel_mean: tuple[float, ...] = eqx.field(static=True)
    pixel_std: tuple[float, ...] = eqx.field(static=True)

    def _setup(self, images: np.ndarray, labels: np.ndarray, where: str, batch: int, key,
               mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        if images.shape[0] < 2 * batch:
            raise ConfigError(f"task.batch = {batch} needs {2 * batch} images, the data has {images.shape[0]}")
        self.pixel_mean, self.pixel_std = mean, std
        with jax.ensure_compile_time_eval():  # concrete also when a config check traces the task
            order = np.asarray(jax.random.permutation(key, images.shape[0]))
        test, pool = order[batch:2 * batch], np.concatenate([order[:batch], order[2 * batch:]])
        self.pool_pixels, self.pool_labels = jnp.asarray(images[pool]), jnp.asarray(labels[pool])
        self.x_train, self.y_train = self._standardise(images[pool[:batch]], labels[pool[:batch]])
        self.x_test, self.y_test = self._standardise(images[test], labels[test])
        self.input_size, self.output_size, self.length = images.shape[1], 10, 1
        self.loss, self.chance, self.source = "mse", 0.09, where

    def _standardise(self, pixels, labels) -> tuple[Array, Array]:
        n, channels = pixels.shape[0], len(self.pixel_mean)
        x = jnp.asarray(pixels, jnp.float32).reshape(n, channels, -1) / 255.0
        x = (x - jnp.asarray(self.pixel_mean, jnp.float32)[:, None]) / jnp.asarray(self.pixel_std, jnp.float32)[:, None]
        return x.reshape(n, -1), jax.nn.one_hot(jnp.asarray(labels), 10, dtype=jnp.float32)

    def stream_pool(self) -> tuple[Array, Array]:
        """The training pool, standardised: ``(x[n, D], y[n, 10])``; its first ``batch`` rows are [`fixed_batch`][dynlab.tasks.pc_tasks.FixedBatchTask.fixed_batch]."""
        return self._standardise(self.pool_pixels, self.pool_labels)


@register("task", "pc-mnist", "PC fixed MNIST or Fashion-MNIST (task.dataset) batch: 64 images, one-hot targets, MSE "
                              "(synthetic if files absent)")
class MNISTBatchTask(ImageBatchTask):
    r"""One fixed batch of MNIST digits, or Fashion-MNIST images, with one-hot targets and MSE
    ([`ImageBatchTask`][]; $D = 784$).

    ``dataset``: ``mnist`` (the paper's Fig. 1 uses CIFAR-10, ``pc-cifar10``) or ``fashion-mnist``
    (its Fig. A.6); the images are those of the data directory's split
    ([`load_mnist_split`][]), standardised with the data set's usual mean and std (MNIST 0.1307,
    0.3081; Fashion-MNIST 0.2860, 0.3530).

    ``source``: ``file`` (the data files must exist), ``synthetic`` (generated digits-like data,
    [`synthetic_images`][], standardised as the data set), or ``auto`` (the files if present,
    else synthetic with a warning; a file that is present but bad is an error).
    """

    def __init__(self, *, batch: int = 64, seed: int = 0, source: Literal["auto", "file", "synthetic"] = "auto",
                 dataset: Dataset = "mnist", data_dir: str | None = None):
        _check_source(batch, seed, source)
        ds = mnist_like(dataset)
        key = jax.random.key(seed)
        images = None
        if source != "synthetic":
            try:
                images, labels, where = load_mnist_split(data_dir, dataset=dataset)
            except DataError as e:
                if source == "file" or any(has_mnist(stem, data_dir, dataset=dataset) for stem in ("train", "t10k")):
                    raise  # "auto" falls back only when the files are absent, never over a bad file
                warnings.warn(f"{ds.title} files not found, using synthetic digits instead ({e})", RuntimeWarning,
                              stacklevel=2)
        if images is None:
            images, labels = synthetic_images(jax.random.fold_in(key, 1), SYNTHETIC_BATCHES * batch)
            where = "synthetic digits"
        self._setup(images, labels, where, batch, key, (ds.mean,), (ds.std,))


@register("task", "pc-cifar10", "PC fixed CIFAR-10 batch: 64 images (3072 inputs), one-hot targets, MSE "
                                "(synthetic if files absent)")
class CIFAR10BatchTask(ImageBatchTask):
    r"""One fixed batch of CIFAR-10 images with one-hot targets and MSE (the PC paper's Fig. 1;
    [`ImageBatchTask`][]).

    An image is flattened as its binary record stores it, $D = 3072$: input
    $1024\,c + 32\,i + j$ is channel $c$ (red, green, blue) at row $i$, column $j$ (torchvision's
    ``ToTensor`` then ``flatten`` gives the same order). The images are the training files
    ``data_batch_1.bin`` … ``data_batch_<train_batches>.bin``
    ([`read_cifar10`][dynlab.tasks.cifar.read_cifar10]); each colour channel is standardised
    with its mean and std over all the images read (the paper does not say [gap]; on the full
    training set these are the usual 0.4914, 0.4822, 0.4465 and 0.2470, 0.2435, 0.2616).

    ``source``: ``file`` (the data files must exist), ``synthetic`` (noisy copies of ten random
    3072-pixel prototypes, [`synthetic_images`][]), or ``auto`` (the files if present, else
    synthetic with a warning; a file that is present but bad is an error).
    """

    def __init__(self, *, batch: int = 64, seed: int = 0, source: Literal["auto", "file", "synthetic"] = "auto",
                 train_batches: int = 5, data_dir: str | None = None):
        _check_source(batch, seed, source)
        key = jax.random.key(seed)
        images = None
        if source != "synthetic":
            try:
                images, labels, folder = read_cifar10("train", data_dir, train_batches=train_batches)
                where = f"CIFAR-10 {train_batches}/5 training files ({folder})"
            except DataError as e:
                if source == "file" or has_cifar10(data_dir):
                    raise  # "auto" falls back only when the files are absent, never over a bad file
                warnings.warn(f"CIFAR-10 files not found, using synthetic images instead ({e})", RuntimeWarning,
                              stacklevel=2)
        if images is None:
            images, labels = synthetic_images(jax.random.fold_in(key, 1), SYNTHETIC_BATCHES * batch, 3 * 32 * 32)
            images, where = images.reshape(-1, 3, 32, 32), "synthetic images"
        mean, std = channel_stats(cifar_pixels(images))
        if min(std) <= 0:
            raise DataError(f"{where}: a colour channel is the same in every pixel of every image (std 0); "
                            "cannot standardise it")
        self._setup(images.reshape(images.shape[0], -1), labels, where, batch, key, mean, std)
