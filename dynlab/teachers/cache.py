"""Where teachers keep what they compute once: ``$DYNLAB_CACHE`` › ``~/.cache/dynlab``.

The task-trained flip-flop network ([`dynlab.teachers.flipflop`][]) is a run directory there and
the ground truth of every teacher a netCDF file ([`dynlab.analyses.recovery.truth`][]), each
named by the digest of what it was computed from, so a changed teacher never reads a stale
entry. Nothing in it is downloaded, and nothing of it is committed: it is regenerated on first
use.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "DYNLAB_CACHE"


def cache_dir() -> Path:
    """``$DYNLAB_CACHE`` if set (and not empty), else ``~/.cache/dynlab``; not created here."""
    value = os.environ.get(ENV, "")
    return Path(value).expanduser() if value else Path.home() / ".cache" / "dynlab"
