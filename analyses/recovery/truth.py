r"""A teacher's ground truth, computed once by dynlab's own analyses and kept on disk.

[`teacher_truth`][] returns the teacher's [`fingerprint`][dynlab.analyses.recovery.fingerprint.fingerprint]
(fixed points with their stability; the Lyapunov spectrum with intervals, $\lambda_1$, the number
of positive exponents and the Kaplan–Yorke dimension) under its own inputs of ``length`` steps,
drawn from ``options.seed``. The first call computes it and writes two netCDF files,
``fixed-points.nc`` and ``lyapunov.nc``, atomically ([`dynlab.store.write_dataset`][]) into
``<cache>/teachers/truth-<digest>`` ([`dynlab.teachers.cache`][]), where the digest covers the
teacher's dynamics ([`Teacher.digest`][dynlab.teachers.base.Teacher.digest]), ``length`` and the
options; later calls read them. A changed teacher or option is a new entry, never a stale one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import jax
import xarray as xr

from dynlab import store
from dynlab.analyses.recovery.fingerprint import FingerprintOptions, fingerprint, of_teacher
from dynlab.errors import CheckpointError
from dynlab.teachers.cache import cache_dir, require_writable

FILES = ("fixed-points.nc", "lyapunov.nc")


def truth_dir(teacher, length: int, options: FingerprintOptions) -> Path:
    """Where the truth of ``teacher`` measured with ``options`` on trials of ``length`` steps is kept."""
    key = json.dumps({"teacher": teacher.digest(), "length": length, **dataclasses.asdict(options)}, sort_keys=True)
    return cache_dir() / "teachers" / f"truth-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def teacher_inputs(teacher, length: int, options: FingerprintOptions):
    """The teacher's inputs that its fingerprint, and a student's, are measured under."""
    return teacher.inputs(jax.random.key(options.seed), options.trials, length)


def teacher_truth(teacher, length: int,
                  options: FingerprintOptions = FingerprintOptions()) -> tuple[xr.Dataset, xr.Dataset]:
    """``(fixed points, Lyapunov spectrum)`` of ``teacher`` (module docstring), cached."""
    where = truth_dir(teacher, length, options)
    paths = [where / name for name in FILES]
    if all(p.is_file() for p in paths):
        try:
            return tuple(xr.load_dataset(p, engine="h5netcdf") for p in paths)
        except (OSError, ValueError):
            raise CheckpointError(f"the cached teacher truth in {str(where)!r} is not readable netCDF; "
                                  "remove the folder to compute it again") from None
    require_writable()  # before the work whose result it keeps
    results = fingerprint(of_teacher(teacher), teacher_inputs(teacher, length, options), options)
    where.mkdir(parents=True, exist_ok=True)
    for path, ds in zip(paths, results):
        store.write_dataset(path, ds.assign_attrs(teacher_digest=teacher.digest()))
    return results
