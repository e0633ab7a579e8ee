"""Where teachers keep what they compute once: ``$DYNLAB_CACHE`` › ``~/.cache/dynlab``.

The task-trained flip-flop network ([`dynlab.teachers.flipflop`][]) is a run directory there and
the ground truth of every teacher a netCDF file ([`dynlab.analyses.recovery.truth`][]), each
named by the digest of what it was computed from, so a changed teacher never reads a stale
entry. Nothing in it is downloaded, and nothing of it is committed: it is regenerated on first
use.

**Enforces** "a cache that cannot be written is refused before the work whose result it would
keep" ([`require_writable`][]): a read-only ``$DYNLAB_CACHE`` is one line, not an ``OSError``
after a teacher trained or a ground truth was computed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dynlab.errors import StorageError

ENV = "DYNLAB_CACHE"


def cache_dir() -> Path:
    """``$DYNLAB_CACHE`` if set (and not empty), else ``~/.cache/dynlab``; not created here."""
    value = os.environ.get(ENV, "")
    return Path(value).expanduser() if value else Path.home() / ".cache" / "dynlab"


def require_writable() -> Path:
    """The teachers' folder of the [`cache_dir`][], created and writable, or a one-line
    [`StorageError`][dynlab.errors.StorageError] naming it and ``$DYNLAB_CACHE``."""
    folder = cache_dir() / "teachers"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise StorageError(f"the teacher cache {str(folder)!r} cannot be written ({e.strerror}); set ${ENV} "
                           "to a writable folder") from None
    return folder
