"""Errors raised for user mistakes.

Every mistake a user can make (an unknown name, a bad value, a missing file, a corrupt or
mismatched checkpoint) raises a [`DynlabError`][] subclass whose message says what was wrong
and what is valid. The CLI prints that message on one line and exits with status 2.
"""

from __future__ import annotations

import os


class DynlabError(Exception):
    """Base class of every error caused by user input (exit status 2 on the CLI)."""


class UnknownNameError(DynlabError, KeyError):
    """A unit, rule, task, analysis, scenario or loss name that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ConfigError(DynlabError, ValueError):
    """An unknown config key, a value of the wrong type or out of range, a malformed ``--set``."""


class DataError(DynlabError, FileNotFoundError):
    """A data file that is missing or not in the expected format."""


class CheckpointError(DynlabError):
    """A missing, corrupt or structurally mismatched checkpoint / run directory."""


class StorageError(DynlabError, OSError):
    """The file system refused a write: it is full (ENOSPC), over its quota (EDQUOT) or read-only
    (EROFS). The message names the file and the free space; every file written before is kept and
    no temporary is left ([`dynlab.store.atomic_write`][]). Exit status 2 on the CLI, like a user
    mistake: what to change (free space, another output directory) is the user's."""


class PluginError(DynlabError):
    """An installed plug-in that breaks its contract: it ends the process while being imported,
    or registers an analysis without the figure every analysis draws."""


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C (``KeyboardInterrupt``) that says where it stopped dynlab, e.g. while a plug-in was
    imported (where the plug-in itself may have raised it); the CLI prints it after
    ``aborted`` and exits 130, as for any Ctrl-C."""


class DivergenceError(Exception):
    """Training produced a non-finite loss or state.

    Not a user-input error: the run stopped, and the last good checkpoint and the metrics so far
    were kept on disk. ``step`` is the first step whose loss was non-finite.
    """

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


class NonFiniteResult(Exception):
    """A computation finished but its result holds NaN or infinite values.

    Not a user-input error: the result was written (``path``) and is kept; the CLI reports it on
    one line with exit status 1.
    """


def require_positive(name: str, value, *, integer: bool = True, finite: bool = True) -> None:
    """Raise [`ConfigError`][] unless ``value`` is a positive int (or a positive number, finite
    unless ``finite=False``)."""
    import math

    kind = "a positive integer" if integer else "a positive finite number" if finite else "a positive number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not value > 0 or (finite and not math.isfinite(value)):
        raise ConfigError(f"{name} must be {kind}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# How an error that is not a DynlabError reads as one line (the CLI prints these)


def exhausted(e: BaseException) -> str | None:
    """The one line for an allocation that failed although [`dynlab.budget`][] let it through
    (its estimate is an upper bound of the shapes it knows; a plug-in may allocate more), or
    ``None`` when ``e`` is not an allocation failure.

    **Enforces** "an allocation failure is one line saying which size to lower, never an
    internal error": Python's ``MemoryError``, XLA's ``RESOURCE_EXHAUSTED``, and jaxlib's ``INTERNAL:
    Error dispatching computation: ... Out of memory allocating N bytes.`` (how its CPU client reports
    an output buffer it could not allocate, once the buffer is waited for).
    """
    text = first_line(e)
    if "RESOURCE_EXHAUSTED" in text:
        detail = text.split("RESOURCE_EXHAUSTED:", 1)[-1].strip()
    elif "Out of memory allocating" in text:
        detail = text[text.index("Out of memory allocating"):]
    elif isinstance(e, MemoryError):
        detail = "out of memory"
    else:
        return None
    return (f"out of memory ({detail or 'MemoryError'}); lower the sizes of the run: model.hidden, task.length, "
            "train.batch_size / train.eval_size, or the analysis's --steps, --k, --samples")


def unusable_path(e: OSError) -> str | None:
    """The one line for a path the command cannot use (a read-only file system or directory, a
    name too long, a deleted working directory, a full disk), or ``None`` for other OS errors.

    **Enforces** "a place that cannot be written is a user's mistake, not an internal error".
    """
    import errno

    reasons = {errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
               errno.EPERM: "operation not permitted", errno.ENAMETOOLONG: "a file name is too long",
               errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
               errno.ENOENT: "no such file or directory", errno.ENOTDIR: "a part of the path is not a directory"}
    if e.errno not in reasons:
        return None
    name = e.filename if e.filename is not None else ""
    if len(str(name)) > 80:
        name = f"{str(name)[:60]}…({len(str(name))} characters)"
    try:
        os.getcwd()
    except FileNotFoundError:
        return ("the working directory no longer exists (deleted while dynlab ran or before it started); "
                "cd to an existing directory")
    return f"cannot use {str(name)!r}: {reasons[e.errno]}" if name else f"{reasons[e.errno]} ({first_line(e)})"


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (``""`` when it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else ""
