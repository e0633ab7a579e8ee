"""The data directory (DESIGN §5): ``--data-dir`` › ``$DYNLAB_DATA`` › ``~/.cache/dynlab/data``.

Loaders read original formats from there; nothing is ever downloaded. A missing file is a
[`DataError`][dynlab.errors.DataError] naming the file, the layout expected and where it looked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from dynlab.errors import DataError

ENV = "DYNLAB_DATA"
DEFAULT = Path("~/.cache/dynlab/data")
_command_dir: Path | None = None  # a command's --data-dir, while it runs (see command_data_dir)


@contextlib.contextmanager
def command_data_dir(path: str | os.PathLike | None):
    """Within this block, ``path`` (a command's ``--data-dir``; ``None``: no change) is the data
    directory of every loader that is not given one explicitly."""
    global _command_dir
    previous = _command_dir
    _command_dir = previous if path is None else Path(path).expanduser()
    try:
        yield
    finally:
        _command_dir = previous


def data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The data directory: ``explicit`` if given, else the command's ``--data-dir``
    ([`command_data_dir`][]), else ``$DYNLAB_DATA``, else the cache default."""
    if explicit is not None:
        return Path(explicit).expanduser()
    if _command_dir is not None:
        return _command_dir
    env = os.environ.get(ENV)
    return Path(env).expanduser() if env else DEFAULT.expanduser()


def data_file(relative: str, *, layout: str, explicit: str | os.PathLike | None = None) -> Path:
    """The path of ``relative`` inside the data directory, which must exist.

    ``relative`` may not leave the data directory (no absolute paths, no ``..``). ``layout``
    describes the expected file for the error message (e.g. "MNIST test images, IDX gzip").
    """
    rel = Path(relative)
    if rel.is_absolute() or ".." in rel.parts:
        raise DataError(f"data file name {relative!r} must be relative to the data directory, without '..'")
    root = data_dir(explicit)
    path = root / rel
    if not path.is_file():
        source = ("--data-dir" if explicit is not None or _command_dir is not None
                  else f"${ENV}" if os.environ.get(ENV) else "the default")
        raise DataError(
            f"missing data file {str(rel)!r} ({layout}) in data directory {str(root)!r} (from {source}); "
            f"put the file there or point --data-dir / ${ENV} at a directory that has it"
        )
    return path
