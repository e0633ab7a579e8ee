r"""Sequential CIFAR-10: ``scifar10`` (pixels in reading order, the three colours of a pixel per step).

Each $32 \times 32$ RGB image is shown one pixel per step in reading order (row by row, left to
right), $T = 1024$, the pixel's red, green and blue values as the step's $N_x = 3$ inputs
($x_t = (R, G, B)$ at row $\lfloor t / 32 \rfloor$, column $t \bmod 32$); ten classes scored at
the last step (``ce_last``). This is the ARU paper's sCIFAR10 (notes §2), which is grayscale
(``grayscale = True``). Options, all recorded in the run config:

* ``downsample = k``: each $k \times k$ block of every colour plane is replaced by its mean, so
  $T = (32/k)^2$ (``k = 2``: $16 \times 16$, $T = 256$) — CPU-scale runs;
* ``grayscale``: one input per step, the luma $Y = 0.299 R + 0.587 G + 0.114 B$ (ITU-R BT.601,
  the weights of PIL's and torchvision's grayscale, without their rounding to bytes), taken
  before down-sampling;
* ``standardize``: every input channel is standardised with the mean and std of that channel
  over all pixels of the training images read (pixels in $[0, 1]$, before down-sampling); on the
  full 50k training set these are the usual 0.4914, 0.4822, 0.4465 and 0.2470, 0.2435, 0.2616.
  Else pixels are left in $[0, 1]$;
* ``train_batches``: how many of the five training files to read (``data_batch_1.bin`` onwards;
  10 000 images each) — fewer for small runs.

Data: the binary version of CIFAR-10 ([`dynlab.cifar`][]), ``cifar-10-batches-bin/`` in the
data directory: ``data_batch_1.bin`` … ``data_batch_5.bin`` for training, ``test_batch.bin`` for
testing. Files are read once, at construction; batches are drawn as for ``smnist``
([`PixelSequenceTask`][dynlab.tasks.mnist.PixelSequenceTask]).
"""

from __future__ import annotations

import os
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from dynlab.cifar import CHANNELS, RECORD, SIDE, read_cifar
from dynlab.data import data_dir as resolve_data_dir
from dynlab.data import data_file
from dynlab.errors import ConfigError, DataError, require_positive
from dynlab.registry import register
from dynlab.tasks.mnist import PixelSequenceTask, block_mean

FOLDER = "cifar-10-batches-bin"
TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILE = "test_batch.bin"
LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # ITU-R BT.601 weights of R, G, B
_FORMAT = (f"binary version from cifar-10-binary.tar.gz, not the pickled python one: records of {RECORD} bytes, "
           "1 label byte then the R, G, B planes of 32x32")


def has_cifar10(data_dir: str | os.PathLike | None = None) -> bool:
    """Whether the first CIFAR-10 training file, ``cifar-10-batches-bin/data_batch_1.bin``, is in the data directory."""
    return (resolve_data_dir(data_dir) / FOLDER / TRAIN_FILES[0]).is_file()


def read_cifar10(split: str = "train", data_dir: str | os.PathLike | None = None, *,
                 train_batches: int = 5) -> tuple[np.ndarray, np.ndarray, Path]:
    """``(images[n, 3, 32, 32] uint8, labels[n] uint8, folder)`` of ``split`` from the data directory.

    ``train``: ``cifar-10-batches-bin/data_batch_1.bin`` … ``data_batch_<train_batches>.bin``,
    concatenated in that order; ``test``: ``cifar-10-batches-bin/test_batch.bin``. Every file is
    looked up before any is read, so a missing one is reported at once
    ([`data_file`][dynlab.data.data_file]). The training files must hold the same number of
    records (10 000 each in the release): a file cut off at a record boundary is caught here.
    """
    if split not in ("train", "test"):
        raise ConfigError(f"split must be 'train' or 'test', got {split!r}")
    require_positive("task.train_batches", train_batches)
    if train_batches > len(TRAIN_FILES):
        raise ConfigError(f"task.train_batches must be at most {len(TRAIN_FILES)} (CIFAR-10 has 5 training files), "
                          f"got {train_batches}")
    if split == "train":
        layouts = {name: f"CIFAR-10 training batch {i} of 5, {_FORMAT}" for i, name in enumerate(TRAIN_FILES[:train_batches], 1)}
    else:
        layouts = {TEST_FILE: f"CIFAR-10 test batch, {_FORMAT}"}
    paths = [data_file(f"{FOLDER}/{name}", layout=layout, explicit=data_dir) for name, layout in layouts.items()]
    parts = [read_cifar(path) for path in paths]
    for path, (_, labels) in zip(paths[1:], parts[1:]):
        if len(labels) != len(parts[0][1]):
            raise DataError(f"{path}: expected as many records as {paths[0].name} ({len(parts[0][1])}; 10000 in the "
                            f"CIFAR-10 release); found {len(labels)} ({len(labels) * RECORD} bytes)")
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), paths[0].parent


def cifar_pixels(images: np.ndarray, *, grayscale: bool = False) -> np.ndarray:
    """``images[n, 3, 32, 32]`` bytes as float32 in $[0, 1]$, ``[n, 3, 32, 32]``, or ``[n, 1, 32, 32]``
    holding the luma $0.299 R + 0.587 G + 0.114 B$ when ``grayscale``."""
    x = images.astype(np.float32)
    x /= 255.0
    return np.einsum("c,nchw->nhw", LUMA, x)[:, None] if grayscale else x


def channel_stats(x: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and (population) std of ``x[n, C, H, W]`` over images and pixels, summed in float64."""
    means, stds = [], []
    for c in range(x.shape[1]):
        xc = x[:, c]
        mean = float(xc.mean(dtype=np.float64))
        var = float(np.square(xc).mean(dtype=np.float64)) - mean * mean
        means.append(mean)
        stds.append(max(var, 0.0) ** 0.5)
    return tuple(means), tuple(stds)


@register("task", "scifar10", "sequential CIFAR-10: one pixel (R, G, B: 3 inputs) per step in reading order "
                              "(T=1024/k^2), class at the end")
class SequentialCIFAR10(PixelSequenceTask):
    """CIFAR-10 images as pixel sequences ``x[T, 3]`` (``x[T, 1]`` in grayscale), the class scored at the last step.

    Args:
        downsample: block-mean factor ``k`` (a divisor of 32); ``T = (32/k)^2``.
        grayscale: one input per step, the luma of the pixel, instead of its three colours.
        standardize: standardise every input channel with its mean and std over the training images read.
        train_batches: training files read, ``data_batch_1.bin`` to ``data_batch_<train_batches>.bin`` (1–5).
        data_dir: data directory (default: ``$DYNLAB_DATA``, then ``~/.cache/dynlab/data``).
    """

    def __init__(self, *, downsample: int = 1, grayscale: bool = False, standardize: bool = True, train_batches: int = 5,
                 data_dir: str | None = None):
        require_positive("task.downsample", downsample)
        if SIDE % downsample:
            raise ConfigError(f"task.downsample must divide 32 (1, 2, 4, 8, 16, 32), got {downsample}")
        for name, flag in (("grayscale", grayscale), ("standardize", standardize)):
            if not isinstance(flag, bool):
                raise ConfigError(f"task.{name} must be true or false, got {flag!r}")
        train, y_train, folder = read_cifar10("train", data_dir, train_batches=train_batches)
        test, y_test, _ = read_cifar10("test", data_dir)
        side, channels = SIDE // downsample, 1 if grayscale else CHANNELS
        T = side * side
        train = cifar_pixels(train, grayscale=grayscale)
        mean, std = channel_stats(train) if standardize else ((0.0,) * channels, (1.0,) * channels)
        if min(std) <= 0:
            raise DataError(f"{folder}: a colour channel of the training images is constant (std {min(std):g}); "
                            "cannot standardize (set task.standardize = false)")

        def sequences(x):  # [n, C, 32, 32] -> [n, T, C], reading order, standardised
            n = x.shape[0]
            if downsample > 1:
                x = block_mean(x.reshape(n * channels, SIDE, SIDE), downsample).reshape(n, channels, side, side)
            seq = x.transpose(0, 2, 3, 1).reshape(n, T, channels)
            seq -= np.asarray(mean, np.float32)
            seq /= np.asarray(std, np.float32)
            return jnp.asarray(seq)

        self.x_train = sequences(train)
        del train
        self.x_test = sequences(cifar_pixels(test, grayscale=grayscale))
        self.y_train, self.y_test = jnp.asarray(y_train, jnp.int32), jnp.asarray(y_test, jnp.int32)
        self.input_size, self.output_size, self.length = channels, 10, T
        self.loss, self.chance = "ce_last", 0.1
        self.source = (f"CIFAR-10 {'grayscale' if grayscale else 'RGB'} {train_batches}/5 training "
                       f"files ({folder})")
