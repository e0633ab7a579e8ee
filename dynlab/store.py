"""Run directories: config, checkpoints, metrics and analyses as netCDF, figures (DESIGN §4).

A run directory holds:

    .claimed           the claim: created exclusively when the directory became this run's
    config.toml        the full run config (what built the model, task, rule and trainer)
    checkpoint.eqx     (step, model, optimiser state): what ``dynlab train --resume`` continues
    model.eqx          the model's arrays (equinox.tree_serialise_leaves; no pickle)
    metrics.nc         training curves, an xarray Dataset
    checksums.toml     SHA-256 of checkpoint.eqx, model.eqx and metrics.nc
    import.toml        an imported model's source file and its SHA-256 (``dynlab import``)
    *.nc, *.png        analyses and figures

Guarantees, each enforced by one function here:

- every file is written atomically ([`atomic_write`][]): under a temporary name
  ``.NAME.<pid>.tmp`` in the same folder, moved into place with ``os.replace``; temporaries of a
  killed process are removed when its run is resumed or opened ([`remove_stale_temporaries`][]);
- a checkpoint and its metrics are one consistent unit ([`commit`][]): metrics.nc is never
  older than checkpoint.eqx, model.eqx is the checkpoint's model, so a run killed at any moment
  resumes ([`dynlab.train.train`][]) to files identical to an uninterrupted run's;
- array files carry a SHA-256 that is verified on load ([`verify`][]); a mismatch is
  "corrupt checkpoint: FILE (checksum mismatch)". Run directories written before checksums
  existed (no checksums.toml) still load;
- a run directory is claimed atomically ([`claim_run_dir`][]): of two processes creating the
  same directory, exactly one gets it;
- a resumed run keeps its model structure ([`resume_config`][]);
- a result never replaces what exists ([`check_outputs`][]): an output file that exists is
  refused unless the command was told to overwrite, and a run's or a sweep's own files
  ([`own_file`][]) are refused even then;
- a full or read-only file system is one line naming the file and the free space
  ([`StorageError`][dynlab.errors.StorageError]), every earlier file kept and no temporary left
  ([`atomic_write`][], [`commit`][]); netCDF is encoded in memory first ([`netcdf_bytes`][]), so
  HDF5 never writes to a file that can fail half-way;
- every config written can be read back: no value that reading refuses ([`write_config`][]);
- a claimed directory that a refused command leaves holding nothing of its own is removed
  again ([`release_claim`][]).

Test hook: [`fault_point`][] (``$DYNLAB_TEST_KILL_AT``) kills the process at named moments.
It is not flushed to disk (no ``fsync``): the guarantees cover a killed process, not a power cut.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import time
import tomllib
from pathlib import Path
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab import config as cfgmod
from dynlab.errors import CheckpointError, ConfigError, DataError, StorageError

CLAIM = ".claimed"
CONFIG = "config.toml"
MODEL = "model.eqx"
CHECKPOINT = "checkpoint.eqx"
METRICS = "metrics.nc"
CHECKSUMS = "checksums.toml"
IMPORTED = "import.toml"
"""Where an imported run's weights came from ([`dynlab.imports.run`][])."""

RUN_FILES = frozenset({CLAIM, CONFIG, MODEL, CHECKPOINT, METRICS, CHECKSUMS, IMPORTED})
"""The files a run directory keeps for itself: no result is ever written over one ([`own_file`][])."""
SWEEP_MARKERS = frozenset({"scenario.toml", "scenario.sha256"})
"""Files that make a directory a sweep directory (written by [`dynlab.scenarios.sweep`][], which
the core may not import; a test checks that the names agree)."""
SWEEP_FILES = SWEEP_MARKERS | {"sweep.nc", "findings.nc", "sweep.lock", "cells", ".interrupted", "across.toml"}
"""The files a sweep directory keeps for itself (its result, its claims' verdicts, lock,
interruption and across-cells markers); everything under its ``cells`` too."""

# ---------------------------------------------------------------------------------------------
# The test hook

KILL_ENV = "DYNLAB_TEST_KILL_AT"
_reached: dict[str, int] = {}


def fault_point(moment: str) -> None:
    """The one test hook: with ``$DYNLAB_TEST_KILL_AT="MOMENT:N"`` the process kills itself with
    SIGKILL the N-th time it reaches ``MOMENT`` (a fault test's deterministic ``kill -9``).

    Moments: ``claimed`` (run directory claimed, no config.toml yet), ``config`` (config.toml
    written), ``tmp-written`` (any atomic write: temporary file complete, not yet moved into
    place), ``checksums-pending`` (a commit's checksums.toml lists the old and new digests),
    ``replaced-metrics.nc`` / ``replaced-checkpoint.eqx`` / ``replaced-model.eqx`` (that file of a
    commit moved into place), ``committed`` (a commit complete), ``chunk`` (a compiled chunk of
    training steps computed, not yet recorded) and ``eval`` (a held-out evaluation recorded).
    Unset, it costs one environment lookup.
    """
    spec = os.environ.get(KILL_ENV)
    if not spec:
        return
    name, _, n = spec.rpartition(":")
    if name != moment:
        return
    _reached[moment] = _reached.get(moment, 0) + 1
    if str(_reached[moment]) == n.strip():
        os.kill(os.getpid(), signal.SIGKILL)


# ---------------------------------------------------------------------------------------------
# Atomic writes and temporaries


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")


def atomic_write(path: Path, write: Callable[[Path], None], *, replace: bool = True) -> Path:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then move it to ``path``.

    **Enforces** "every write is atomic": a killed process leaves the old file or the new one,
    never half of one (plus at most a temporary ``.NAME.<pid>.tmp``, see
    [`remove_stale_temporaries`][]). A write that fails (a full disk included) removes its
    temporary and leaves the old file as it was; a full, over-quota or read-only file system is a
    one-line [`StorageError`][dynlab.errors.StorageError] ([`storage_error`][]). With
    ``replace=False`` a file that appeared at ``path`` meanwhile is kept: the new one is linked
    into place only if the name is free (``FileExistsError`` otherwise), so that a result checked
    not to replace anything ([`check_outputs`][]) never does, however long it took.
    """
    path = Path(path)
    tmp = _tmp_name(path)
    try:
        write(tmp)
        fault_point("tmp-written")
        if replace:
            os.replace(tmp, path)
        else:
            _move_if_free(tmp, path)
    except OSError as e:
        _remove(tmp)  # first: the free space named is what the failed write leaves
        raise storage_error(e, path) from None
    finally:
        _remove(tmp)
    return path


def _move_if_free(tmp: Path, path: Path) -> None:
    """Move ``tmp`` to ``path`` unless a file is there (``FileExistsError``): a hard link, which
    the file system refuses atomically when the name is taken; a file system without hard links
    gets the check and ``os.replace`` (atomic, though a file created in between is replaced)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV):
            raise
        if path.exists() or path.is_symlink():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from None
        os.replace(tmp, path)
        return
    tmp.unlink()


def _remove(tmp: Path) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
        pass


_NO_ROOM = {errno.ENOSPC: "the file system is full", errno.EDQUOT: "the disk quota is exceeded",
            errno.EROFS: "the file system is read-only"}


def _bytes(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def storage_error(error: OSError, path: Path) -> OSError:
    """``error`` as a one-line [`StorageError`][dynlab.errors.StorageError] naming ``path`` and the
    free space when the file system refused the write for lack of room or because it is read-only
    (ENOSPC, EDQUOT, EROFS); any other error unchanged."""
    if isinstance(error, StorageError) or error.errno not in _NO_ROOM:
        return error
    try:
        free = f" ({_bytes(shutil.disk_usage(Path(path).absolute().parent).free)} free)"
    except OSError:
        free = ""
    return StorageError(f"cannot write {str(path)!r}: {_NO_ROOM[error.errno]}{free}; earlier files are kept as "
                        "they were: free some space or write elsewhere")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temporaries(run_dir: Path | str) -> list[Path]:
    """Delete the temporaries ``.NAME.<pid>.tmp`` that a killed process left in ``run_dir``.

    **Enforces** "no temporary files are left behind" (called when a run is resumed or opened).
    Only temporaries of processes that no longer exist are removed, so a run that another
    process is still writing is left alone; a directory that cannot be written is left as it is.
    Returns the removed paths.
    """
    removed = []
    try:
        entries = list(Path(run_dir).iterdir())
    except OSError:
        return removed
    for p in entries:
        m = _TMP.match(p.name)
        if m and not _alive(int(m["pid"])):
            try:
                p.unlink()
                removed.append(p)
            except OSError:
                pass
    return removed


# ---------------------------------------------------------------------------------------------
# Claiming run directories


def claim_run_dir(path: Path | str) -> Path:
    """Create ``path`` (and its parents) and claim it as a run directory, or fail.

    **Enforces** "a run directory is claimed atomically": the claim is the exclusive creation
    (``O_CREAT | O_EXCL``) of ``path/.claimed``, which exactly one process can win. ``path`` may
    be new or an existing empty directory; one that holds a run, a claim or any other file is a
    [`ConfigError`][dynlab.errors.ConfigError]. Every run directory dynlab creates goes through here
    ([`new_run_dir`][], ``dynlab train --out``, ``dynlab transfer ... --out``).
    """
    path = Path(path)
    shown = str(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{shown!r} exists and is not a directory; give a new or empty directory")
    missing = [a for a in path.absolute().parents if not a.exists()]
    created = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir()
        created = 1 + sum(1 for a in missing if a.is_dir())
    except FileExistsError:
        if not path.is_dir():
            raise ConfigError(f"{shown!r} exists and is not a directory; give a new or empty directory") from None
        names = {p.name for p in path.iterdir()}
        if CONFIG in names:
            raise ConfigError(f"{shown!r} already holds a run; use --resume {shown} or another --out") from None
        if CLAIM in names and names - {CLAIM}:
            raise ConfigError(f"{shown!r} already holds the results of an earlier dynlab command "
                              f"({_some(names - {CLAIM})}); choose another --out") from None
        if CLAIM in names:
            raise ConfigError(_claimed_message(path)) from None
        if names:
            raise ConfigError(f"{shown!r} is not empty and holds no run ({_some(names)}); "
                              "give a new or empty directory") from None
    try:
        fd = os.open(path / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise ConfigError(_claimed_message(path)) from None
    with os.fdopen(fd, "w") as f:
        f.write(f"pid = {os.getpid()}\nhost = {json.dumps(socket.gethostname())}\n"
                f"time = {json.dumps(datetime.datetime.now().isoformat(timespec='seconds'))}\n"
                f"created = {created}\n")
    fault_point("claimed")
    return path


def _some(names) -> str:
    names = sorted(names)
    return ", ".join(names[:3]) + (", …" if len(names) > 3 else "")


def release_claim(path: Path | str, *, written: tuple[str, ...] = ()) -> bool:
    """Undo [`claim_run_dir`][] of a command that was refused: remove ``path``'s claim, the files
    ``written`` by this process (e.g. its config.toml), and the directories the claim created.

    **Enforces** "a refused command leaves no directory behind", and only that: nothing happens
    unless the claim is this process's (same pid and host) and the directory holds nothing but
    the claim, ``written`` and empty folders (which the command made after claiming it, and which
    are removed); a directory that existed before the claim stays (empty), and a parent is
    removed only if the claim created it and it is empty. Returns whether the claim was released.
    """
    path = Path(path)
    try:
        claim = tomllib.loads((path / CLAIM).read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False
    if claim.get("pid") != os.getpid() or claim.get("host") != socket.gethostname():
        return False
    try:
        entries = list(path.iterdir())
        folders = [p for p in entries if p.is_dir() and not p.is_symlink()]  # made after the claim
        if any(p.name not in (CLAIM, *written) for p in entries if p not in folders) or any(
                not q.is_dir() or q.is_symlink() for folder in folders for q in folder.rglob("*")):
            return False  # it holds a result: the claim stays
    except OSError:
        return False
    try:
        for folder in folders:
            for inner, _, _ in os.walk(folder, topdown=False):
                os.rmdir(inner)
        for p in sorted(entries, key=lambda p: p.name == CLAIM):  # the claim last
            if p not in folders:
                p.unlink()
        path = path.absolute()
        for folder in [path, *path.parents][: int(claim.get("created", 0))]:
            folder.rmdir()  # fails (and stops) at a folder that is not empty: it holds something else
    except OSError:
        pass
    return True


def _claimed_message(path: Path) -> str:
    if (path / CONFIG).exists():
        return f"{str(path)!r} already holds a run; use --resume {path} or another --out"
    try:
        pid = tomllib.loads((path / CLAIM).read_text()).get("pid", "?")
    except (OSError, tomllib.TOMLDecodeError):
        pid = "?"
    return (f"{str(path)!r} was claimed by another dynlab process (pid {pid}) and holds no run yet; "
            f"choose another --out, or remove the directory if that process is gone")


def new_run_dir(prefix: str, root: Path | str = "runs") -> Path:
    """A fresh, claimed directory ``root/prefix-YYYYmmdd-HHMMSS[-n]`` ([`claim_run_dir`][]).

    Processes started in the same second get different ``-n`` suffixes: a name another process
    created first is skipped, never shared.
    """
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{prefix}-{stamp}"
    n = 1
    while True:
        path = base if n == 1 else Path(f"{base}-{n}")
        if not path.exists():
            try:
                return claim_run_dir(path)
            except ConfigError:
                pass  # another process created or claimed it in between: take the next name
        n += 1


def claim_output(out: Path | str | None, prefix: str, *, config: dict | None = None) -> Path:
    """A command's output directory: ``out``, or a fresh ``runs/<prefix>-<time>``, claimed
    atomically ([`claim_run_dir`][]): a directory that holds a run, is claimed by another
    process or holds other files is a one-line error. With ``config``, its config.toml is written
    at once ([`write_config`][]), so that a claimed run directory can be resumed
    from the start; a config that cannot be written releases the claim again."""
    run_dir = new_run_dir(prefix) if out is None else claim_run_dir(out)
    if config is not None:
        with released_on_failure(run_dir, written=(CONFIG,)):
            write_config(run_dir, config)
    return run_dir


@contextlib.contextmanager
def released_on_failure(run_dir: Path | str, *, written: tuple[str, ...] = ()):
    """Run the body; when it raises (Ctrl-C included), [`release_claim`][] ``run_dir`` and raise
    again: a command that stops before it wrote a result leaves no directory behind."""
    try:
        yield
    except BaseException:
        release_claim(run_dir, written=written)
        raise


def runs_under(root: Path | str) -> list[Path]:
    """Every run directory under ``root`` (a folder holding ``config.toml`` and ``model.eqx``,
    e.g. a sweep's cells), sorted."""
    return sorted(p.parent for p in Path(root).rglob(MODEL) if (p.parent / CONFIG).is_file())


# ---------------------------------------------------------------------------------------------
# Outputs never replace what exists


def own_file(path: Path | str) -> str | None:
    """What ``path`` is when it names a file that a run or sweep directory keeps for itself, else ``None``.

    A run directory (one holding ``config.toml`` or ``.claimed``) owns [`RUN_FILES`][] and every
    file already in it (what a command wrote there: ``learning_curve.png``, an analysis's
    ``lyapunov.nc`` and its figure, all regenerable only by running again); a sweep directory (one
    holding ``scenario.toml`` or ``scenario.sha256``) owns [`SWEEP_FILES`][], every file already in
    it, and everything under its ``cells``. A new name in either is free. The folders of ``path``
    are resolved (``r/sub/../model.eqx`` is ``r/model.eqx``); its last name is not, because a
    write replaces a link, not its target.
    """
    path = Path(path)
    try:
        folder = path.parent.resolve()
    except (OSError, RuntimeError):
        return None

    def has(directory: Path, names) -> bool:
        return any((directory / n).exists() for n in names)

    exists = path.exists() or path.is_symlink()
    if (path.name in RUN_FILES or exists) and has(folder, (CONFIG, CLAIM)):
        return f"the file {path.name} of the run directory {str(path.parent)!r}"
    if (path.name in SWEEP_FILES or exists) and has(folder, SWEEP_MARKERS):
        return f"the file {path.name} of the sweep directory {str(path.parent)!r}"
    for inside in [folder, *folder.parents]:
        if inside.name == "cells" and has(inside.parent, SWEEP_MARKERS):
            return f"a file of the cells of the sweep directory {str(inside.parent)!r}"
    return None


def check_outputs(outputs, *, overwrite: bool = False, reading=()) -> None:
    """Refuse, before any work, the output files of a command that would lose what exists.

    ``outputs``: ``(option, path)`` pairs, ``option`` being what the user changes to pick another
    file (``"--out"``, ``"--plot"``); ``reading``: the files the command reads.

    **Enforces** "outputs never replace what exists", as one-line
    [`ConfigError`][dynlab.errors.ConfigError]s naming the option:

    - a file of a run or a sweep ([`own_file`][]: model, checkpoint, metrics, config, sweep,
      cells, and every file already in either, e.g. a run's ``learning_curve.png``) is refused,
      even with ``overwrite``;
    - so is a file the command reads, two outputs naming one file, and an existing directory;
    - an existing file (or link) is refused unless ``overwrite``; with it, the file is replaced
      atomically when the result is written ([`atomic_write`][]).
    """
    seen: dict[str, str] = {}
    read = {os.path.normpath(Path(r).absolute()) for r in reading}
    for option, path in outputs:
        if path is None:
            continue
        path = Path(path)
        shown = str(path)
        key = os.path.normpath(path.absolute())
        what = own_file(path)
        if what is not None:
            raise ConfigError(f"{option} {shown!r} is {what}; a result never replaces a run's or sweep's own files, "
                              f"not even with --overwrite: choose another {option}")
        if key in read:
            raise ConfigError(f"{option} {shown!r} is the file this command reads; choose another {option}")
        if key in seen:
            raise ConfigError(f"{option} {shown!r} is also the file of {seen[key]}; choose another {option}")
        seen[key] = option
        if path.is_dir():
            raise ConfigError(f"{option} {shown!r} is a directory; name a file")
        if (path.exists() or path.is_symlink()) and not overwrite:
            raise ConfigError(f"{option} {shown!r} exists; give --overwrite to replace it, or choose another {option}")


def check_output_dir(path: Path | str, option: str = "--out") -> None:
    """Refuse a directory that already holds something, before any work: ``path`` must be new,
    empty, or hold only this process's own claim ([`claim_run_dir`][]).

    **Enforces** "outputs never replace what exists" for commands that write a directory of
    results (a programmed scenario, ``dynlab reproduce``): a second run into one directory is a
    one-line [`ConfigError`][dynlab.errors.ConfigError], the first run's files untouched.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {str(path)!r} exists and is not a directory; give a new or empty directory")
    try:
        names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    except OSError as e:
        raise ConfigError(f"{option} {str(path)!r} cannot be read ({e.strerror}); choose another {option}") from None
    if names == {CLAIM}:
        try:
            claim = tomllib.loads((path / CLAIM).read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            claim = {}
        if claim.get("pid") == os.getpid() and claim.get("host") == socket.gethostname():
            return
        raise ConfigError(_claimed_message(path))
    if names:
        raise ConfigError(f"{option} {str(path)!r} already holds files ({_some(names)}); results are written into "
                          f"a new or empty directory: choose another {option}")


def check_writable(folder: Path, option: str) -> None:
    """A one-line [`ConfigError`][] unless files can be created in ``folder`` (made if missing).

    Checked by creating (and removing) a temporary file in the nearest existing ancestor, which
    also catches read-only file systems and paths through a regular file.
    """
    import tempfile

    folder = Path(folder).absolute()
    ancestor = folder
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    try:
        if not ancestor.is_dir():
            raise NotADirectoryError(f"{ancestor} is not a directory")
        with tempfile.TemporaryFile(dir=ancestor):
            pass
    except OSError as e:
        reason = e.strerror or str(e)
        raise ConfigError(f"cannot write results under {str(folder)!r} ({reason}); choose another {option}") from None


def rescue_dataset(ds: xr.Dataset, name: str, error: OSError) -> None:
    """Save a computed dataset that could not be written where asked into the temporary
    directory, then raise a one-line error naming both places (a result is never lost silently)."""
    import tempfile

    reason = ("the file appeared while the result was computed, and was kept" if isinstance(error, FileExistsError)
              else error.strerror or error)
    folder = None
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"dynlab-{name}-"))
        path = write_dataset(folder / f"{name}.nc", ds)
    except OSError as again:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        raise DataError(f"could not write the result ({reason}), nor save it in the temporary directory "
                        f"({again.strerror or again})") from None
    raise DataError(f"could not write the result ({reason}); it was saved to {path}") from None


# ---------------------------------------------------------------------------------------------
# Config


def write_config(run_dir: Path, config: dict) -> None:
    """Write ``config.toml`` ([`dynlab.config.dumps`][], tomli-w), atomically.

    **Enforces** "nothing written is unreadable": a value that [`read_config`][] would refuse (NaN,
    an integer past 64 bits) or that is not UTF-8 text (a lone surrogate) is a one-line
    [`ConfigError`][dynlab.errors.ConfigError] naming the file, and nothing is written. The TOML
    writer escapes every string, so each one reads back as itself.
    """
    where = f"{str(Path(run_dir) / CONFIG)!r}"
    cfgmod.check_numbers(f"{where}:", config, allow_inf=True)
    try:
        data = cfgmod.dumps(config).encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(f"{where} would not read back ({e.reason}: {e.object[e.start:e.end]!a}); "
                          "check the config's strings") from None
    atomic_write(Path(run_dir) / CONFIG, lambda p: p.write_bytes(data))
    fault_point("config")


def read_config(run_dir: Path | str) -> dict:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory {str(run_dir)!r} does not exist")
    if not (run_dir / CONFIG).is_file():
        raise CheckpointError(f"{str(run_dir)!r} is not a dynlab run directory: it has no {CONFIG}")
    try:
        return cfgmod.load_toml(run_dir / CONFIG)
    except ConfigError as e:
        raise CheckpointError(str(e)) from None


def _full_model_section(model: dict) -> dict:
    """``model`` with every unset key at its default (so that setting a default changes nothing)."""
    from dynlab import registry
    from dynlab.models import SequenceModel

    try:
        unit = registry.get("unit", model.get("unit", "aru")).obj
        defaults = {**registry.defaults(SequenceModel), **registry.defaults(unit)}
    except Exception:  # an unknown unit: building the model reports it
        defaults = {}
    defaults = {k: v for k, v in defaults.items() if k not in ("unit", "input_size", "output_size")}
    return {**defaults, **model}


def resume_config(run_dir: Path | str, overrides: list[str]) -> dict:
    """The stored config of ``run_dir`` with ``--set`` ``overrides`` applied, for a resumed run.

    **Enforces** "a resumed run keeps its model's structure": an override that changes the stored
    ``[model]`` section (its keys with their defaults filled in) is a
    [`ConfigError`][dynlab.errors.ConfigError] naming the key, before any checkpoint is read; one that
    leaves it equal (``--set model.hidden=64`` on a run of width 64) is accepted, and the stored
    section is kept as it was written.
    """
    stored = read_config(run_dir)
    config = cfgmod.apply_sets(stored, overrides)
    before, after = _full_model_section(stored.get("model", {})), _full_model_section(config.get("model", {}))
    changed = sorted(k for k in set(before) | set(after) if before.get(k, None) != after.get(k, None))
    if changed:
        k = changed[0]
        was = "unset" if k not in before else f"{k} = {json.dumps(before[k])}"  # one line, as TOML writes a value
        raise ConfigError(
            f"--set model.{k} does not match the resumed run's model ({was}): --set model.* cannot change "
            f"a resumed model's structure; resume without it, or train a new run with --out"
        )
    if "model" in stored:
        config["model"] = stored["model"]
    return config


# ---------------------------------------------------------------------------------------------
# Checksums and commits


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_checksums(run_dir: Path | str) -> dict[str, list[str]]:
    """The accepted SHA-256 digests per file name recorded in ``checksums.toml`` ({} if none)."""
    path = Path(run_dir) / CHECKSUMS
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise CheckpointError(f"corrupt checkpoint: {str(path)!r} cannot be read ({e.strerror})") from None
    try:
        table = tomllib.loads(text)
        if not all(isinstance(v, list) and all(isinstance(d, str) for d in v) for v in table.values()):
            raise ValueError
        return table
    except (tomllib.TOMLDecodeError, ValueError, UnicodeDecodeError):
        raise CheckpointError(f"corrupt checkpoint: {str(path)!r} is not a valid checksum list") from None


def _write_checksums(run_dir: Path, table: dict[str, list[str]]) -> None:
    lines = ["# SHA-256 of the run's array files, written by dynlab and verified on load", ""]
    lines += [f"{json.dumps(name)} = {json.dumps(digests)}" for name, digests in sorted(table.items())]
    atomic_write(run_dir / CHECKSUMS, lambda p: p.write_text("\n".join(lines) + "\n"))


def verify(path: Path | str) -> bytes:
    """The bytes of the array file ``path``, after checking them against its recorded SHA-256.

    **Enforces** "array files carry a checksum that is verified on load": a file whose digest
    is not among those recorded in its directory's ``checksums.toml`` raises
    [`CheckpointError`][dynlab.errors.CheckpointError] "corrupt checkpoint: FILE (checksum mismatch)". A file
    without a recorded digest (a run directory of an older dynlab) is read unchecked. A run that
    is being written meanwhile is handled: the file is read first and the record after it, and
    every commit records a file's new digest before moving the file into place.
    """
    path = Path(path)
    for attempt in range(3):
        data = path.read_bytes()
        recorded = read_checksums(path.parent).get(path.name)
        if recorded is None or _sha256(data) in recorded:
            return data
        time.sleep(0.05 * (attempt + 1))  # a commit may have finished between the two reads
    raise CheckpointError(f"corrupt checkpoint: {str(path)!r} (checksum mismatch)")


def recover(run_dir: Path | str) -> None:
    """Make the directory of a run that was killed whole again, before it is resumed.

    Removes the killed writer's temporaries ([`remove_stale_temporaries`][]) and settles
    ``checksums.toml``: a file that a killed [`commit`][] left with two accepted digests keeps
    only the one it matches (a file that matches none is left to [`verify`][] to report).
    """
    run_dir = Path(run_dir)
    remove_stale_temporaries(run_dir)
    table = read_checksums(run_dir)
    settled = dict(table)
    for name, digests in table.items():
        if len(digests) > 1 and (run_dir / name).is_file():
            digest = _sha256((run_dir / name).read_bytes())
            if digest in digests:
                settled[name] = [digest]
    if settled != table:
        _write_checksums(run_dir, settled)


def commit(run_dir: Path | str, files: dict[str, Callable[[Path], None]]) -> None:
    """Write several files of ``run_dir`` as one consistent unit, with their checksums.

    ``files`` maps names to writers ``write(tmp_path)``, in the order they are moved into place.
    Every file is first written to its temporary; then ``checksums.toml`` records each one's new
    digest next to its old one; then the files are moved into place in order; then
    ``checksums.toml`` keeps only the new digests. A process killed at any moment therefore
    leaves every file either old or new and verifiable, and a file earlier in ``files`` is never
    older than a later one. A file system that is full or read-only is a one-line
    [`StorageError`][dynlab.errors.StorageError] naming the file, with every temporary removed and
    every file as it was before the commit (or, past the checksums, as a killed commit leaves it).

    **Enforces** "a checkpoint and its metrics are one consistent unit" through the order
    [`save_checkpoint`][] gives: metrics.nc, then checkpoint.eqx, then model.eqx. Resuming
    ([`dynlab.train.train`][]) cuts the metrics back to the checkpoint's step and rewrites
    model.eqx from the checkpoint, so a resumed run's files equal an uninterrupted run's.
    """
    run_dir = Path(run_dir)
    tmps = {name: _tmp_name(run_dir / name) for name in files}
    name = CHECKSUMS
    try:
        digests = {}
        for name, write in files.items():
            write(tmps[name])
            fault_point("tmp-written")
            digests[name] = _sha256(tmps[name].read_bytes())
        table = read_checksums(run_dir)
        # the old digests stay accepted until every file is in place (all of them: an earlier
        # commit may have been killed before it moved its file, which is then still the older one)
        pending = {name: [digests[name]] + [d for d in table.get(name, []) if d != digests[name]] for name in files}
        _write_checksums(run_dir, {**table, **pending})
        fault_point("checksums-pending")
        for name in files:
            os.replace(tmps[name], run_dir / name)
            fault_point(f"replaced-{name}")
        _write_checksums(run_dir, {**table, **{name: [d] for name, d in digests.items()}})
        fault_point("committed")
    except OSError as e:
        for tmp in tmps.values():
            _remove(tmp)
        raise storage_error(e, run_dir / name) from None  # the file being written when it failed
    finally:
        for tmp in tmps.values():
            _remove(tmp)


# ---------------------------------------------------------------------------------------------
# Checkpoints, models, metrics


def _serialise(obj) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        buffer = io.BytesIO()
        eqx.tree_serialise_leaves(buffer, obj)
        path.write_bytes(buffer.getvalue())

    return write


def netcdf_attr(value):
    """An attribute value netCDF (h5netcdf) can store: numbers within 64 bits, strings, arrays and
    lists of numbers, lists of strings; booleans become 0/1 and anything else (an integer past
    64 bits, ``None``, a mapping, a mixed list) its text, so that no value ends a write."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, bytes)) or (isinstance(value, (list, tuple)) and value
                                           and all(isinstance(v, str) for v in value)):
        return value
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError, OverflowError):
        kind = "O"
    return value if kind in "iufc" else str(value)


def netcdf_bytes(ds: xr.Dataset) -> bytes:
    """``ds`` encoded as netCDF (h5netcdf) in memory.

    **Enforces** "a computed result is never lost at write time": every attribute is made
    storable first (booleans as 0/1, what netCDF cannot hold as its text), and HDF5 writes to
    memory only, so that a full disk fails in an ordinary file write ([`atomic_write`][]) and
    never inside HDF5 (which can crash on a file it could not finish).
    """
    import dask

    ds = ds.copy(deep=False)
    ds.attrs = {k: netcdf_attr(v) for k, v in ds.attrs.items()}
    for variable in ds.variables.values():
        variable.attrs = {k: netcdf_attr(v) for k, v in variable.attrs.items()}
    # inside a Dask worker xarray would take a distributed lock named after the file, which a
    # buffer in memory does not have; the data are in memory, so no scheduler is needed
    with dask.config.set(scheduler="synchronous"):
        return bytes(ds.to_netcdf(engine="h5netcdf"))


def _netcdf(ds: xr.Dataset) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(netcdf_bytes(ds))


def save_checkpoint(run_dir: Path, step: int, model, opt_state, metrics: xr.Dataset | None = None) -> None:
    """Write ``metrics`` (if given), ``checkpoint.eqx`` (step, model, optimiser state) and
    ``model.eqx`` as one unit, in that order ([`commit`][])."""
    files = {METRICS: _netcdf(metrics)} if metrics is not None else {}
    files[CHECKPOINT] = _serialise((jnp.asarray(step, jnp.int32), model, opt_state))
    files[MODEL] = _serialise(model)
    commit(run_dir, files)


def save_model(run_dir: Path, model) -> None:
    """Write ``model.eqx`` alone, with its checksum (a model that was derived, not trained; or
    the model of a resumed checkpoint)."""
    commit(run_dir, {MODEL: _serialise(model)})


def save_metrics(run_dir: Path, metrics: xr.Dataset) -> None:
    """Write ``metrics.nc`` alone, with its checksum."""
    commit(run_dir, {METRICS: _netcdf(metrics)})


class _Mismatch(Exception):
    """A stored array that does not fit the model its config builds: the message says which and how."""


def _leaf_reader(like):
    """The ``filter_spec`` of ``equinox.tree_deserialise_leaves`` that reads each array leaf of
    ``like`` and checks it against the template.

    **Enforces** "a run loads under either precision, and a genuine mismatch says what differs": a
    float array stored at one precision is read into the template's (a float32 run loaded under
    ``jax_enable_x64`` becomes float64, so its analyses run in float64: the values are the same
    numbers, widened exactly); a shape, or a kind of number (float, int, bool, complex), that differs
    is a [`_Mismatch`][] naming the array's path in the model. Leaves are visited in
    ``jax.tree_util`` flattening order, the order ``tree_serialise_leaves`` wrote them."""
    paths = iter([jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(like)[0]])

    def read(f, x):
        where = next(paths, "?")
        if not isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) or jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return eqx.default_deserialise_filter_spec(f, x)
        y = np.load(f, allow_pickle=False)
        if y.shape != x.shape:
            raise _Mismatch(f"array {where} has shape {y.shape} in the file, {tuple(x.shape)} in the model")
        if y.dtype != x.dtype:
            if np.dtype(y.dtype).kind != np.dtype(x.dtype).kind:
                raise _Mismatch(f"array {where} holds {y.dtype} in the file, {np.dtype(x.dtype)} in the model")
            y = y.astype(x.dtype)
        return jnp.asarray(y)

    return read


def _deserialise(path: Path, like, what: str):
    if not path.is_file():
        raise CheckpointError(f"{what} {str(path)!r} does not exist")
    data = verify(path)
    try:
        return eqx.tree_deserialise_leaves(io.BytesIO(data), like, filter_spec=_leaf_reader(like))
    except Exception as e:
        cause = e
        while cause is not None and not isinstance(cause, _Mismatch):  # equinox re-raises it, wrapped
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise CheckpointError(f"{what} {str(path)!r} does not match the model its config.toml builds: "
                                  f"{cause}") from None
        # a truncated or foreign file
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{what} {str(path)!r} is corrupt or does not match the model its config.toml builds ({detail})"
        ) from None


def load_checkpoint(run_dir: Path, model_like, opt_state_like):
    """``(step, model, opt_state)`` from ``checkpoint.eqx`` (checksum verified), shaped like the templates."""
    step, model, opt_state = _deserialise(
        Path(run_dir) / CHECKPOINT, (jnp.asarray(0, jnp.int32), model_like, opt_state_like), "checkpoint"
    )
    return int(step), model, opt_state


def load_model_arrays(run_dir: Path, model_like):
    """The model stored in ``model.eqx`` (checksum verified), shaped like ``model_like``."""
    return _deserialise(Path(run_dir) / MODEL, model_like, "model file")


def load_metrics(run_dir: Path | str) -> xr.Dataset | None:
    """The training curves in ``metrics.nc`` (checksum verified), or ``None`` if there are none."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return None
    data = verify(path)
    try:
        return xr.load_dataset(io.BytesIO(data), engine="h5netcdf")
    except Exception as e:
        raise CheckpointError(f"corrupt checkpoint: {str(path)!r} is not readable netCDF ({type(e).__name__})") from None


def write_dataset(path: Path, ds: xr.Dataset, *, replace: bool = True) -> Path:
    """Write an xarray Dataset as netCDF (h5netcdf engine), atomically ([`netcdf_bytes`][],
    [`atomic_write`][]; ``replace=False``: never over a file that exists)."""
    data = netcdf_bytes(ds)
    return atomic_write(Path(path), lambda p: p.write_bytes(data), replace=replace)


def write_figure(path: Path, fig, *, replace: bool = True) -> Path:
    """Save a matplotlib figure as PNG, atomically, and close it if pyplot holds it (``replace=False``:
    never over a file that exists, [`atomic_write`][]). No title keeps an absolute file-system path:
    each is cut to its last name ([`dynlab.figures.without_paths`][])."""
    import sys

    from dynlab.figures import without_paths

    titles = [fig._suptitle] + [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    for title in titles:
        if title is not None and "/" in title.get_text():
            title.set_text(without_paths(title.get_text()))
    try:
        buffer = io.BytesIO()  # drawn in memory: only a plain file write meets the disk
        fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    finally:
        if "matplotlib.pyplot" in sys.modules:  # a figure made with pyplot (dynlab's own are not)
            sys.modules["matplotlib.pyplot"].close(fig)
    return atomic_write(Path(path), lambda p: p.write_bytes(buffer.getvalue()), replace=replace)
