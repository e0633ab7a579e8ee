r"""Sequential MNIST: ``smnist`` (pixels in reading order) and ``psmnist`` (a fixed random permutation).

One pixel per step, $T = 784$, $N_x = 1$, ten classes scored at the last step (``ce_last``; the
ARU paper's psMNIST, notes §2). Options, all recorded in the run config:

* ``dataset``: ``"mnist"`` (handwritten digits, folder ``mnist/``) or ``"fashion-mnist"``
  (Zalando's clothing images, folder ``fashion-mnist/``; the PC paper's Fig. A.6): the same IDX
  files under the same names, read by the same code ([`read_mnist`][]);
* ``downsample = k``: each $k \times k$ block of the $28 \times 28$ image is replaced by its mean
  before anything else, so $T = (28/k)^2$ (``k = 2``: $14 \times 14$, $T = 196$) — CPU-scale runs;
* ``perm_seed`` (``psmnist`` only): the permutation of the $T$ positions is
  ``jax.random.permutation(jax.random.key(perm_seed), T)``, the same for every sample and split;
* ``rotate``: rotate every digit by this many degrees (counter-clockwise, bilinear, same frame)
  before down-sampling — the paper's 45° rotation-transfer probe (App. B.3);
* ``standardize``: pixels in $[0, 1]$ are standardised with the data set's usual mean and std
  (MNIST 0.1307, 0.3081 — torchvision's pipeline; the paper does not say, notes §4 [gap];
  Fashion-MNIST 0.2860, 0.3530, the statistics of its 60k training images), else left in $[0, 1]$.

Data (``<folder>`` is ``mnist`` or ``fashion-mnist``): the 60k training split
``<folder>/train-{images-idx3,labels-idx1}-ubyte[.gz]`` when present (the test split is then
``<folder>/t10k-*``), otherwise a seeded split of the 10k file ``<folder>/t10k-*`` into
``test_size`` test images and the rest for training (``split_seed``). Images must be
$28 \times 28$ with one label in 0–9 each, else a [`DataError`][dynlab.errors.DataError] names
the file, what was expected and what was found. Files are read once, at
construction; the pixels are held as arrays in the task, so [`batch`][dynlab.tasks.mnist.PixelSequenceTask.batch] is pure
and jit-able. Training batches are drawn with replacement; test batches without replacement
(a held-out evaluation of ``n`` samples sees ``n`` distinct digits, as long as the split has them).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dynlab.data import data_dir as resolve_data_dir
from dynlab.data import data_file
from dynlab.errors import ConfigError, DataError, require_positive
from dynlab.idx import read_idx
from dynlab.registry import register
from dynlab.tasks.base import Task

SIDE = 28
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # the usual MNIST pixel statistics (pixels in [0, 1])


@dataclasses.dataclass(frozen=True)
class MnistLike:
    """A data set distributed exactly as MNIST is (same IDX files, same names), in its own folder."""

    folder: str  # inside the data directory
    title: str  # in messages and task descriptions
    mean: float  # usual pixel mean and std, pixels in [0, 1]
    std: float


DATASETS = {
    "mnist": MnistLike("mnist", "MNIST", MNIST_MEAN, MNIST_STD),
    "fashion-mnist": MnistLike("fashion-mnist", "Fashion-MNIST", 0.2860, 0.3530),
}
"""The MNIST-format data sets by their ``dataset`` option value."""

Dataset = Literal["mnist", "fashion-mnist"]


def mnist_like(dataset: str) -> MnistLike:
    """The entry of [`DATASETS`][] for ``dataset``; a [`ConfigError`][dynlab.errors.ConfigError] lists the valid ones."""
    if dataset not in DATASETS:
        raise ConfigError(f"task.dataset must be one of {', '.join(map(repr, DATASETS))}, got {dataset!r}")
    return DATASETS[dataset]


def has_mnist(stem: str, data_dir: str | os.PathLike | None = None, *, dataset: str = "mnist") -> bool:
    """Whether the images of split ``stem`` (``"train"`` or ``"t10k"``) are in the data directory."""
    name = resolve_data_dir(data_dir) / mnist_like(dataset).folder / f"{stem}-images-idx3-ubyte"
    return name.is_file() or name.with_name(name.name + ".gz").is_file()


def _mnist_file(stem: str, kind: str, what: str, data_dir, dataset: str = "mnist") -> Path:
    """``<folder>/<stem>-<kind>.gz``, or the uncompressed file when only that one exists."""
    ds = mnist_like(dataset)
    name = f"{ds.folder}/{stem}-{kind}"
    if (resolve_data_dir(data_dir) / name).is_file() and not (resolve_data_dir(data_dir) / f"{name}.gz").is_file():
        return data_file(name, layout=f"{ds.title} {what}, IDX", explicit=data_dir)
    return data_file(f"{name}.gz", layout=f"{ds.title} {what}, IDX gzip, or uncompressed as {name}", explicit=data_dir)


def read_mnist(stem: str, data_dir: str | os.PathLike | None = None, *,
               dataset: str = "mnist") -> tuple[np.ndarray, np.ndarray, Path]:
    r"""``(images[n, 28, 28] uint8, labels[n] uint8, image path)`` of split ``stem`` (``train``/``t10k``).

    Each file is read as ``<folder>/<name>.gz`` or, if only that exists, ``<folder>/<name>``
    (``<folder>``: ``mnist`` or ``fashion-mnist``, by ``dataset``); a missing one is a
    [`DataError`][dynlab.errors.DataError] naming it and the directory searched
    ([`data_file`][dynlab.data.data_file]), and so are images that are not $28 \times 28$, a
    label count unlike the image count, and a label outside 0–9.
    """
    title = mnist_like(dataset).title
    img = _mnist_file(stem, "images-idx3-ubyte", f"{stem} images", data_dir, dataset)
    lab = _mnist_file(stem, "labels-idx1-ubyte", f"{stem} labels", data_dir, dataset)
    images, labels = read_idx(img, ndim=3), read_idx(lab, ndim=1)
    for path, array in ((img, images), (lab, labels)):
        if array.dtype != np.uint8:
            raise DataError(f"{path}: expected {title} unsigned bytes (IDX type 08); found IDX of {array.dtype}")
    if images.shape[1:] != (SIDE, SIDE) or images.shape[0] != labels.shape[0]:
        raise DataError(f"{img}: expected {title} images of 28x28 with one label each; found {images.shape[0]} "
                        f"images of {images.shape[1]}x{images.shape[2]} and {labels.shape[0]} labels in {lab.name}")
    if labels.size and labels.max() > 9:
        raise DataError(f"{lab}: expected {title} labels 0-9; found {int(labels.max())} "
                        f"(label {int(np.argmax(labels > 9))})")
    return images, labels, img


def block_mean(images: np.ndarray, k: int) -> np.ndarray:
    """Mean over non-overlapping ``k x k`` blocks: ``[n, 28, 28] -> [n, 28/k, 28/k]`` (float32)."""
    n, side = images.shape[0], images.shape[1] // k
    return images.reshape(n, side, k, side, k).astype(np.float32).mean(axis=(2, 4))


def rotate_images(images: np.ndarray, degrees: float) -> np.ndarray:
    """Every image rotated counter-clockwise by ``degrees`` about its centre (bilinear, zero fill)."""
    from scipy import ndimage

    return ndimage.rotate(images.astype(np.float32), degrees, axes=(2, 1), reshape=False, order=1, cval=0.0)


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


class PixelSequenceTask(Task):
    """Images shown one pixel per step, ``x[T, input_size]``, the class scored at the last step.

    Subclasses fill the fields; the sequences are held as ``[n, T]`` (one input per step) or
    ``[n, T, C]``. Training batches are drawn with replacement, test batches without (as long as
    the split has enough images).
    """

    x_train: jax.Array
    y_train: jax.Array
    x_test: jax.Array
    y_test: jax.Array
    source: str = eqx.field(static=True)

    def batch(self, key, batch_size, split="train"):
        if split not in ("train", "test"):
            raise ConfigError(f"split must be 'train' or 'test', got {split!r}")
        x, y = (self.x_train, self.y_train) if split == "train" else (self.x_test, self.y_test)
        n = x.shape[0]
        if split == "train" or batch_size > n:
            idx = jax.random.randint(key, (batch_size,), 0, n)
        else:
            idx = jax.random.choice(key, n, (batch_size,), replace=False)
        mask = jnp.zeros((batch_size, self.length)).at[:, -1].set(1.0)
        return x[idx].reshape(batch_size, self.length, self.input_size), y[idx], mask

    def describe(self) -> str:
        return f"{type(self).__name__} (T={self.length}, {self.x_train.shape[0]} train / {self.x_test.shape[0]} test, {self.source})"


@register("task", "smnist", "sequential MNIST or Fashion-MNIST (task.dataset): one pixel per step in reading order "
                            "(T=784/k^2), class at the end")
class SequentialMNIST(PixelSequenceTask):
    """MNIST digits (or Fashion-MNIST images) as pixel sequences ``x[T, 1]`` with the label scored at the last step.

    Args:
        dataset: ``"mnist"`` or ``"fashion-mnist"`` (the folder read, and the statistics of ``standardize``).
        downsample: block-mean factor ``k`` (a divisor of 28); ``T = (28/k)^2``.
        rotate: rotation of every digit in degrees (0: none).
        standardize: standardise pixels with the data set's mean and std (else pixels in ``[0, 1]``).
        test_size: test images taken from the 10k file when the 60k training split is absent.
        split_seed: seed of that train/test split.
        data_dir: data directory (default: ``$DYNLAB_DATA``, then ``~/.cache/dynlab/data``).
    """

    def __init__(self, *, dataset: Dataset = "mnist", downsample: int = 1, rotate: float = 0.0, standardize: bool = True,
                 test_size: int = 2000, split_seed: int = 0, data_dir: str | None = None):
        self._setup(None, dataset, downsample, rotate, standardize, test_size, split_seed, data_dir)

    def _setup(self, perm_seed, dataset, downsample, rotate, standardize, test_size, split_seed, data_dir) -> None:
        ds = mnist_like(dataset)
        _check_int("task.downsample", downsample, 1)
        if SIDE % downsample:
            raise ConfigError(f"task.downsample must divide 28 (1, 2, 4, 7, 14, 28), got {downsample}")
        require_positive("task.test_size", test_size)
        _check_int("task.split_seed", split_seed, 0)
        if isinstance(rotate, bool) or not isinstance(rotate, (int, float)):
            raise ConfigError(f"task.rotate must be a number of degrees, got {rotate!r}")
        if has_mnist("train", data_dir, dataset=dataset):
            (x_tr, y_tr, where), (x_te, y_te, _) = (read_mnist(stem, data_dir, dataset=dataset) for stem in ("train", "t10k"))
            source = f"{ds.title} train/t10k ({where.parent})"
        else:
            images, labels, where = read_mnist("t10k", data_dir, dataset=dataset)
            if test_size >= images.shape[0]:
                raise ConfigError(f"task.test_size = {test_size} leaves no training images of the {images.shape[0]} in {where}")
            order = permutation(split_seed, images.shape[0])
            test, train = order[:test_size], order[test_size:]
            x_tr, y_tr, x_te, y_te = images[train], labels[train], images[test], labels[test]
            source = f"{ds.title} t10k split {images.shape[0] - test_size}/{test_size} (split_seed {split_seed}, {where.parent})"
        T = (SIDE // downsample) ** 2
        perm = None if perm_seed is None else permutation(perm_seed, T)

        def sequences(images):
            images = images.astype(np.float32) / 255.0
            if rotate:
                images = rotate_images(images, rotate)
            seq = block_mean(images, downsample).reshape(images.shape[0], T)
            if standardize:
                seq = (seq - ds.mean) / ds.std
            return jnp.asarray(seq if perm is None else seq[:, perm])

        self.x_train, self.x_test = sequences(x_tr), sequences(x_te)
        self.y_train, self.y_test = jnp.asarray(y_tr, jnp.int32), jnp.asarray(y_te, jnp.int32)
        self.input_size, self.output_size, self.length = 1, 10, T
        self.loss, self.chance = "ce_last", 0.1
        self.source = source


@functools.lru_cache(maxsize=16)
def permutation(seed: int, n: int) -> np.ndarray:
    """``jax.random.permutation(jax.random.key(seed), n)`` as a read-only NumPy array, concrete also
    while a config check traces the task, computed once per (seed, n) in a process: a study builds its
    cells' tasks many times (checks, then training), and each permutation was a JAX computation."""
    with jax.ensure_compile_time_eval():
        order = np.asarray(jax.random.permutation(jax.random.key(seed), n))
    order.flags.writeable = False
    return order


@register("task", "psmnist", "permuted sequential MNIST or Fashion-MNIST (task.dataset): pixels in a fixed seeded "
                             "random order (T=784/k^2)")
class PermutedSequentialMNIST(SequentialMNIST):
    """[`SequentialMNIST`][] with the pixel positions in a fixed random order (``perm_seed``)."""

    perm_seed: int = eqx.field(static=True)

    def __init__(self, *, perm_seed: int = 0, dataset: Dataset = "mnist", downsample: int = 1, rotate: float = 0.0,
                 standardize: bool = True, test_size: int = 2000, split_seed: int = 0, data_dir: str | None = None):
        _check_int("task.perm_seed", perm_seed, 0)
        self.perm_seed = perm_seed
        self._setup(perm_seed, dataset, downsample, rotate, standardize, test_size, split_seed, data_dir)

    def describe(self) -> str:
        return super().describe().replace("(T=", f"(perm_seed {self.perm_seed}, T=", 1)
