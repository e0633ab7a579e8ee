r"""Run directories as cells of a study: an imported PyTorch network, or a run trained elsewhere,
beside the cells the study trains.

A ``[[runs]]`` table names a run directory (``dynlab import`` output, or any ``dynlab train``
run) and the label it takes on one of the study's sweep axes:

```toml
[sweep.variants.network.gru]
model = {unit = "gru", hidden = 64}
[sweep.variants.network.lstm]
model = {unit = "lstm", hidden = 64}
[sweep]
seed = [0, 1, 2]

[[runs]]
path = "torch-gru"            # inside this file's folder or the data directory ($DYNLAB_DATA)
label = "torch GRU"           # default: the directory's name
axis = "network"              # default: the study's variant axis (else its axis of names)
```

The run is then one more value of that axis (``network = "torch GRU"``) at the first value of
every other axis (``seed = 0``; the other seeds of its label hold no cell: NaN, status ``n/a``).
Every ``[[analyses]]`` entry that selects it runs on it, at the stage ``trained`` (the run is
not trained by the study: it is analysed as it is); analyses across cells (``dsa``) compare it
with the trained cells, and claims select it by its label ([`dynlab.scenarios.spec`][]).

**Labels are the user's**: the ``label`` key, else the directory's name, never a hash or a
description made from the run's config (an imported GRU's config names ``gru``, ``bptt`` and
seed 0, as dynlab's own seed-0 GRU does).

**Enforces**, before any work, one line each: a path that is not a run directory (no
``config.toml`` and ``model.eqx``) or whose config does not build; a path that resolves (``..``
and symbolic links followed) outside the study's folder and the data directory ("paths from files
stay inside the run or data directory", DESIGN §6); a label given twice, or equal to a value the
axis already has; an axis that is not a list of names.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from dynlab.errors import CheckpointError, ConfigError

__all__ = ["ExternalRun", "parse_runs", "resolve_run"]

KEYS = ("path", "label", "axis")
"""The keys of a ``[[runs]]`` table."""
MAX_LABEL = 100


@dataclasses.dataclass(frozen=True)
class ExternalRun:
    """A run directory taken as a cell: its ``label`` on the sweep axis ``axis``, its resolved
    ``path``, its stored ``config`` and a ``digest`` of its config and weights (a run changed on
    disk is a new cell, recomputed on ``--resume``)."""

    label: str
    path: str
    axis: str
    config: dict
    digest: str


def roots(source: str) -> list[Path]:
    """Where a study's run paths may lead: the folder of its file (the working directory for a
    study given as a dict) and the data directory ([`dynlab.data.data_dir`][])."""
    from dynlab.data import data_dir

    folder = Path(source).parent if Path(source).is_file() else Path.cwd()
    return [folder.resolve(), data_dir().resolve()]


def resolve_run(value, where: str, allowed: list[Path]) -> Path:
    """``value`` (a ``[[runs]]`` path) as a run directory inside one of ``allowed``: a relative path
    is taken from each root in turn (the study's folder first); one ConfigError line otherwise."""
    from dynlab import store

    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.path must be the path of a run directory, got {value!r}")
    given = Path(value).expanduser()
    candidates = [given] if given.is_absolute() else [root / given for root in allowed]
    shown = " or ".join(repr(str(r)) for r in allowed)
    for candidate in candidates:
        path = candidate.resolve()
        if not any(path == root or root in path.parents for root in allowed):
            raise ConfigError(f"{where}.path {value!r} resolves to {str(path)!r}, outside the study's folder and the "
                              f"data directory ({shown}); a study names only runs inside them")
        if path.is_dir():
            lacking = [n for n in (store.CONFIG, store.MODEL) if not (path / n).is_file()]
            if lacking:
                raise ConfigError(f"{where}.path {value!r} is not a run directory: it has no {' and no '.join(lacking)} "
                                  "(make one with 'dynlab import' or 'dynlab train')")
            return path
    raise ConfigError(f"{where}.path {value!r}: no such run directory in {shown}")


def _label(table: dict, path: Path, where: str) -> str:
    label = table.get("label", path.name)
    if not isinstance(label, str) or not label.strip() or label != label.strip() or len(label) > MAX_LABEL \
            or not label.isprintable():
        raise ConfigError(f"{where}.label must be a printable name of 1-{MAX_LABEL} characters without leading or "
                          f"trailing spaces, got {label!r}")
    return label


def _axis(table: dict, axes, where: str):
    """The axis a run sits on: ``axis``, else the study's first variant axis, else its first axis
    of names (one key whose values are strings)."""
    def of_names(axis) -> bool:
        return bool(axis.variants) or (len(axis.values) == 1 and all(isinstance(v, str) for v in axis.values[axis.name]))

    fit = [a for a in axes if of_names(a)]
    if "axis" in table:
        name = table["axis"]
        chosen = next((a for a in axes if a.name == name), None)
        if chosen is None or not of_names(chosen):
            raise ConfigError(f"{where}.axis must be a sweep axis of names (a variant axis, or a key whose values are "
                              f"strings such as \"model.unit\"); axes of names: {', '.join(a.name for a in fit) or 'none'}, "
                              f"got {name!r}")
        return chosen
    variants = [a for a in fit if a.variants]
    if variants or fit:
        return (variants or fit)[0]
    raise ConfigError(f"{where}: a run sits beside the study's trained networks on a sweep axis of names, and this study "
                      "has none: add a variant axis ([sweep.variants.network.gru] with model = {unit = \"gru\"}) or a "
                      "list of names (\"model.unit\" = [\"gru\", \"lstm\"])")


def _digest(path: Path) -> str:
    """SHA-256 of a run's config and weights."""
    from dynlab import store

    h = hashlib.sha256()
    for name in (store.CONFIG, store.MODEL):
        with open(path / name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def parse_runs(tables, axes, source: str) -> tuple[ExternalRun, ...]:
    """The ``[[runs]]`` tables of a study (``tables``; ``None``: none) as [`ExternalRun`][] values,
    checked against its sweep ``axes`` before any work (module docstring)."""
    from dynlab import experiment, store

    if tables is None:
        return ()
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError("runs must be an array of tables ([[runs]]) with path and an optional label")
    allowed = roots(source)
    out: list[ExternalRun] = []
    for i, table in enumerate(tables):
        where = f"runs[{i}]"
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(KEYS)}")
        if "path" not in table:
            raise ConfigError(f"{where} needs path, the run directory to take as a cell")
        path = resolve_run(table["path"], where, allowed)
        label = _label(table, path, where)
        axis = _axis(table, axes, where)
        taken = [str(v) for v in axis.values[axis.name]] + [r.label for r in out if r.axis == axis.name]
        if label in taken:
            whose = f"a value of the axis {axis.name}" if label in taken[:axis.size] else "another run's"
            raise ConfigError(f"{where}: the label {label!r} is already {whose}; give each run a label of its own "
                              "(label = \"...\")")
        twice = next((r for r in out if r.path == str(path)), None)
        if twice is not None:
            raise ConfigError(f"{where}: the run {str(path)!r} is already a cell ({twice.label!r})")
        try:
            config = experiment.validate(store.read_config(path))
        except (ConfigError, CheckpointError) as e:
            raise ConfigError(f"{where}: the config.toml of {str(path)!r} is not valid: {e}") from None
        out.append(ExternalRun(label, str(path), axis.name, config, _digest(path)))
    return tuple(out)
