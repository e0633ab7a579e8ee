"""The data directory (DESIGN §5): ``--data-dir`` › ``$DYNLAB_DATA`` › ``~/.cache/dynlab/data``.

Loaders read original formats from there; nothing is ever downloaded. A missing file is a
[`DataError`][dynlab.errors.DataError] naming the file, the layout expected and where it looked.

The data directory is the user's choice (``--data-dir``, ``$DYNLAB_DATA``); a ``data_dir`` key
written in a config or scenario *file* only chooses a folder inside it ([`confine_file_data_dir`][]),
so that a file cannot make a run read any file of the machine.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from dynlab.errors import ConfigError, DataError

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


def confine_file_data_dir(value, source: str) -> str:
    """A ``task.data_dir`` read from a config or scenario file (``source`` names it), resolved inside
    the data directory ([`data_dir`][]): a relative path is taken from the data directory, and the
    result, symbolic links and ``..`` resolved, must be that directory or inside it.

    Enforces: a file cannot point a task at data outside the data directory the user chose; a
    ``data_dir`` that leaves it is one [`ConfigError`][dynlab.errors.ConfigError] line. Returns the
    resolved absolute path, which the run then records.
    """
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: task.data_dir must be a folder name inside the data directory, got {value!r}")
    root = data_dir().resolve()
    path = (root / Path(value).expanduser()).resolve()
    if path != root and root not in path.parents:
        raise ConfigError(
            f"{source}: task.data_dir {value!r} resolves to {str(path)!r}, outside the data directory {str(root)!r}; "
            f"a config or scenario file may only name a folder inside it (choose the directory itself with "
            f"--data-dir or ${ENV})"
        )
    return str(path)


def confine_file_data_dirs(doc: dict, source: str) -> dict:
    """``doc`` (a config or scenario file's document) with every ``task.data_dir`` it sets, in
    ``[task]`` and on ``[sweep]`` axes (zipped ones included), confined by
    [`confine_file_data_dir`][] (a copy; unchanged when it sets none)."""
    import copy

    doc = copy.deepcopy(doc)
    task = doc.get("task")
    if isinstance(task, dict) and "data_dir" in task:
        task["data_dir"] = confine_file_data_dir(task["data_dir"], source)
    sweep = doc.get("sweep")
    tables = [sweep] if isinstance(sweep, dict) else []
    if tables and isinstance(sweep.get("zip"), dict):
        tables += [t for t in sweep["zip"].values() if isinstance(t, dict)]
    for table in tables:
        values = table.get("task.data_dir")
        if isinstance(values, list):
            table["task.data_dir"] = [confine_file_data_dir(v, source) for v in values]
    return doc
