r"""A reader for the binary version of CIFAR-10 (Krizhevsky 2009), ``cifar-10-batches-bin/``.

The archive ``cifar-10-binary.tar.gz`` extracts to a folder holding ``data_batch_1.bin`` …
``data_batch_5.bin`` (the 50 000 training images, 10 000 per file), ``test_batch.bin`` (10 000
test images) and ``batches.meta.txt`` (the class names, one per line). A batch file is a plain
sequence of fixed-size records, with no header:

    <1 label byte, 0-9> <1024 red bytes> <1024 green bytes> <1024 blue bytes>

each colour plane $32 \times 32$ in row-major order (its first 32 bytes are the top row, left
to right). So the label of record $r$ is byte $3073\,r$ and the pixel of channel $c$ (0 red,
1 green, 2 blue), row $i$, column $j$ is byte $3073\,r + 1 + 1024\,c + 32\,i + j$. A file
whose size is not a whole number of records, or a label outside 0–9 (a CIFAR-100 file, which
has two label bytes), is a [`DataError`][dynlab.errors.DataError] naming the file, what was
expected and what was found.

Only these binary files are read. The "python version" of CIFAR-10 is pickled, and unpickling a
file can run code, so dynlab never reads it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dynlab.errors import DataError

SIDE = 32
CHANNELS = 3
RECORD = 1 + CHANNELS * SIDE * SIDE  # 3073 bytes: the label, then the red, green and blue planes
MAX_CIFAR_BYTES = 1 << 30
"""The largest batch file read (1 GiB), checked against the file's size before reading it."""
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
"""The class names by label, as in ``batches.meta.txt``."""


def parse_cifar(raw: bytes, *, name: str = "<bytes>") -> tuple[np.ndarray, np.ndarray]:
    """Decode CIFAR-10 binary records: ``(images[n, 3, 32, 32] uint8, labels[n] uint8)``.

    ``images[r, c, i, j]`` is channel ``c`` (red, green, blue) of row ``i``, column ``j`` of
    record ``r``, the layout of the file itself.
    """
    n, left = divmod(len(raw), RECORD)
    if n == 0 or left:
        raise DataError(f"{name}: expected CIFAR-10 binary records of {RECORD} bytes (1 label byte + 3x32x32 pixel "
                        f"bytes); found {len(raw)} bytes = {n} records and {left} bytes over"
                        + (" (truncated?)" if n else ""))
    records = np.frombuffer(raw, dtype=np.uint8).reshape(n, RECORD)
    labels = records[:, 0].copy()
    if labels.max() >= len(CLASSES):
        first = int(np.argmax(labels >= len(CLASSES)))
        raise DataError(f"{name}: expected CIFAR-10 labels 0-9 in the first byte of each record; found "
                        f"{int(labels[first])} in record {first} (a CIFAR-100 file has 2 label bytes per record)")
    return records[:, 1:].reshape(n, CHANNELS, SIDE, SIDE).copy(), labels


def read_cifar(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-10 binary batch file: ``(images[n, 3, 32, 32] uint8, labels[n] uint8)`` ([`parse_cifar`][])."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CIFAR_BYTES:  # checked before reading: a batch file is 30.7 MB
            raise DataError(f"{path}: {size:,} bytes, more than the {MAX_CIFAR_BYTES:,} a CIFAR-10 batch file may "
                            f"hold here (10,000 records of {RECORD} bytes is 30,730,000)")
        raw = path.read_bytes()
    except DataError:
        raise
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e})") from None
    return parse_cifar(raw, name=str(path))


def write_cifar(path: str | os.PathLike, images: np.ndarray, labels: np.ndarray) -> None:
    """Write ``images[n, 3, 32, 32]`` and ``labels[n]`` (both 0–255 integers) as a CIFAR-10 binary
    batch file; used to make test files."""
    images, labels = np.asarray(images), np.asarray(labels)
    if images.shape[1:] != (CHANNELS, SIDE, SIDE) or labels.shape != images.shape[:1]:
        raise DataError(f"cannot write images of shape {images.shape} with labels of shape {labels.shape} as CIFAR-10 "
                        "(expected [n, 3, 32, 32] and [n])")
    records = np.concatenate([labels.astype(np.uint8)[:, None], images.astype(np.uint8).reshape(len(labels), -1)], axis=1)
    Path(path).write_bytes(records.tobytes())
