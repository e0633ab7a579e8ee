r"""A weight format's options from a file: ``dynlab import --options-file FILE``.

Published models often come with the constructor's keyword arguments beside their weights: the
ELM authors publish each NeuronIO model with a ``model_config.json`` whose keys are the code's
``ELM(...)`` arguments, which are the ``elm-neuron`` format's options
([`dynlab.imports.elm`][]). [`read_options`][] reads such a file, a JSON object (``.json``) or a
TOML table (``.toml``, [`dynlab.config.load_toml`][]), as ``{key: value}``; each key is then
checked against the format's signature, as ``--option KEY=VALUE`` is. JSON's ``null`` is Python's
``None``, the code's "not given" (``"input_to_synapse_routing": null``): it is kept, and the
format's check takes it where its parameter may be ``None`` and refuses it elsewhere.

**Enforces**, each as a one-line [`ConfigError`][dynlab.errors.ConfigError] (or
[`DataError`][dynlab.errors.DataError] for a path that is not a readable regular file,
[`dynlab.imports.weights.regular_file`][]): a suffix other than ``.json`` and ``.toml``; a file
over [`dynlab.config.MAX_TOML_BYTES`][] (refused without reading the rest); text that is not UTF-8
or not JSON; JSON's non-standard ``NaN`` and ``Infinity``; a key given twice (JSON lets the last
win silently); nesting deeper than Python's parser recurses; a top level that is not an object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dynlab import config as cfgmod
from dynlab.errors import ConfigError
from dynlab.imports.weights import regular_file

__all__ = ["read_options"]


def read_options(path: Path | str) -> dict[str, Any]:
    """The options held in ``path`` (a JSON object or a TOML table; see the module doc)."""
    path = regular_file(path, "options file")
    shown = str(path)
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return cfgmod.load_toml(path)
    if suffix != ".json":
        raise ConfigError(f"options file {shown!r}: unknown suffix {path.suffix or '(none)'!r}; valid: .json "
                          "(e.g. the model_config.json published beside the weights), .toml")
    with open(path, "rb") as f:
        raw = f.read(cfgmod.MAX_TOML_BYTES + 1)
    if len(raw) > cfgmod.MAX_TOML_BYTES:
        raise ConfigError(f"options file {shown!r} is larger than {cfgmod.MAX_TOML_BYTES // (1 << 20)} MiB, "
                          "the most an options file may hold")
    try:
        doc = json.loads(raw.decode("utf-8"), parse_constant=_non_finite, object_pairs_hook=_unique)
    except UnicodeDecodeError:
        raise ConfigError(f"options file {shown!r} is not UTF-8 text") from None
    except RecursionError:
        raise ConfigError(f"options file {shown!r} is nested too deeply to be options") from None
    except _Refused as e:
        raise ConfigError(f"options file {shown!r}: {e}") from None
    except ValueError as e:  # JSONDecodeError, or an integer of more digits than Python converts
        raise ConfigError(f"options file {shown!r} is not valid JSON: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"options file {shown!r} holds a JSON {type(doc).__name__}; an object of the "
                          "format's options ({\"key\": value, ...}) was expected")
    return doc


class _Refused(Exception):
    """A value JSON's parser accepts and an options file must not hold (raised inside the parse)."""


def _non_finite(name: str):
    raise _Refused(f"{name} is not a number an option may take (JSON itself has no {name})")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    table = dict(pairs)
    if len(table) < len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Refused(f"key {twice[:80]!r} is given twice")
    return table
