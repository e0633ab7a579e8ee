"""A reader for the IDX format of MNIST-style data sets (optionally gzip-compressed).

An IDX file is a big-endian header — two zero bytes, a type code, the number of dimensions
``n`` — then ``n`` 32-bit big-endian sizes, then the data in C order. MNIST uses type 0x08
(unsigned byte): magic 0x00000803 for images ``[count, rows, cols]`` and 0x00000801 for labels
``[count]``. Every inconsistency (bad magic, truncated data, trailing bytes, wrong rank) is a
[`DataError`][dynlab.errors.DataError] naming the file.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np

from dynlab.errors import DataError

# type code -> big-endian numpy dtype
TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def parse_idx(raw: bytes, *, name: str = "<bytes>", ndim: int | None = None) -> np.ndarray:
    """Decode IDX bytes into an array (native byte order). ``ndim``: the rank the caller expects."""
    if len(raw) < 4:
        raise DataError(f"{name}: not an IDX file (only {len(raw)} bytes)")
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in TYPES:
        raise DataError(f"{name}: not an IDX file (magic {raw[:4].hex()}; expected 0000 then a type code in "
                        f"{', '.join(f'{t:02x}' for t in TYPES)} and the rank)")
    dtype, rank = np.dtype(TYPES[raw[2]]), raw[3]
    if ndim is not None and rank != ndim:
        raise DataError(f"{name}: IDX rank {rank}, expected {ndim} (magic {raw[:4].hex()})")
    header = 4 + 4 * rank
    if len(raw) < header:
        raise DataError(f"{name}: truncated IDX header")
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank))
    expected = header + declared_bytes(shape, dtype, name=name)
    if len(raw) != expected:
        raise DataError(f"{name}: IDX data has {len(raw) - header} bytes, the header {shape} says "
                        f"{expected - header} ({'truncated' if len(raw) < expected else 'trailing bytes'})")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


MAX_IDX_BYTES = 1 << 32
"""The largest IDX data read (4 GiB; MNIST's training images are 47 MB), checked against the
header before any data is read or decompressed."""


def declared_bytes(shape: tuple[int, ...], dtype: np.dtype, *, name: str) -> int:
    """The data bytes an IDX header of ``shape`` declares (exact: Python integers never overflow).

    **Enforces** "compressed data is checked by its expanded size": more than
    [`MAX_IDX_BYTES`][] is a [`DataError`][] before anything is read.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_IDX_BYTES:
        raise DataError(f"{name}: the IDX header declares {shape} = {nbytes:,} bytes of data, more than the "
                        f"{MAX_IDX_BYTES:,} an IDX file may hold here; is the file corrupt?")
    return nbytes


def _read_bounded(path: Path, ndim: int | None) -> bytes:
    """The decompressed bytes of ``path`` (gzip), never more than its header declares plus one
    byte (so that trailing data is still seen): a gzip bomb stops at the header's size."""
    out = bytearray()
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    limit = 4 + 4 * 255 + 1  # the longest header, until the header is known
    known = False
    with open(path, "rb") as f:
        pending = b""
        while len(out) < limit:
            chunk = pending or f.read(1 << 20)
            if not chunk:
                break
            out += d.decompress(chunk, limit - len(out))
            pending = d.unconsumed_tail
            if d.eof:
                break
            if not known and len(out) >= 4 and out[0] == 0 and out[1] == 0 and out[2] in TYPES \
                    and len(out) >= 4 + 4 * out[3]:
                rank = out[3]
                shape = tuple(int.from_bytes(out[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank))
                limit = 4 + 4 * rank + declared_bytes(shape, np.dtype(TYPES[out[2]]), name=str(path)) + 1
                known = True
        if not d.eof and len(out) < limit:  # the input ended inside the stream: a cut-off download
            parse_idx(bytes(out), name=f"{path} (gzip stream cut off)", ndim=ndim)  # raises when data is missing
            raise DataError(f"{path}: gzip stream cut off after complete IDX data (no end-of-stream marker)")
    return bytes(out)


def read_idx(path: str | os.PathLike, *, ndim: int | None = None) -> np.ndarray:
    """Read an IDX file; names ending in ``.gz`` are decompressed, incrementally and never
    beyond the size the IDX header declares ([`declared_bytes`][]).

    A gzip stream that ends early (a cut-off download) is decompressed as far as it goes, so the
    error says how many data bytes its IDX header promised and how many arrived.
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            raw = _read_bounded(path, ndim)
        else:
            if path.stat().st_size > MAX_IDX_BYTES + 4 + 4 * 255:
                raise DataError(f"{path}: {path.stat().st_size:,} bytes, more than the {MAX_IDX_BYTES:,} bytes of "
                                "data an IDX file may hold here")
            raw = path.read_bytes()
    except DataError:
        raise
    except (OSError, gzip.BadGzipFile, zlib.error) as e:  # DataError is an OSError too: re-raised above
        raise DataError(f"{path}: cannot read ({e})") from None
    return parse_idx(raw, name=str(path), ndim=ndim)


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write ``array`` as IDX (gzip if the name ends in ``.gz``); used to make test files."""
    array = np.asarray(array)
    code = {np.dtype(v).newbyteorder("="): k for k, v in TYPES.items()}.get(array.dtype)
    if code is None:
        raise DataError(f"cannot write dtype {array.dtype} as IDX")
    raw = bytes([0, 0, code, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    raw += array.astype(np.dtype(TYPES[code])).tobytes()
    Path(path).write_bytes(gzip.compress(raw) if str(path).endswith(".gz") else raw)
