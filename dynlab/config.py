"""Run configurations: nested dicts of TOML values, ``--set`` overrides, and validation.

A run config has the sections of a scenario file (DESIGN §3)::

    seed = 0
    [model]  unit = "aru", hidden = 64, layers = 1, ...   # model keys + the unit's keys
    [task]   name = "adding", length = 50, ...
    [rule]   name = "bptt", ...
    [train]  steps = 500, batch_size = 64, optimizer = "adam", lr = 1e-3, ...

``--set section.key=value`` overrides any key; the value is parsed as a TOML value (numbers,
booleans, strings, arrays), never evaluated as code. A bare word that is not valid TOML
(``--set model.activation=relu``) is taken as a string.
"""

from __future__ import annotations

import copy
import re
import tomllib
from typing import Any

from dynlab.errors import ConfigError

SECTIONS = ("model", "task", "rule", "train")
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def parse_value(text: str) -> Any:
    """Parse one ``--set`` value as a TOML value (``128``, ``1e-3``, ``true``, ``"x"``, ``[1, 2]``)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        if _BARE_WORD.match(text):
            return text
        raise ConfigError(
            f"cannot parse value {text!r}: use a TOML value (e.g. 128, 1e-3, true, \"name\", [1, 2])"
        ) from None


def parse_set(assignment: str) -> tuple[list[str], Any]:
    """Split ``section.key=value`` into (``["section", "key"]``, parsed value)."""
    if "=" not in assignment:
        raise ConfigError(f"malformed --set {assignment!r}: expected section.key=value, e.g. model.hidden=128")
    path, _, value = assignment.partition("=")
    keys = path.strip().split(".")
    if not all(_BARE_WORD.match(k) and "." not in k for k in keys) or not value.strip():
        raise ConfigError(f"malformed --set {assignment!r}: expected section.key=value, e.g. model.hidden=128")
    return keys, parse_value(value.strip())


def apply_values(config: dict, values: dict[str, Any]) -> dict:
    """A copy of ``config`` with each dotted key (``"model.hidden"``) set to its value."""
    config = copy.deepcopy(config)
    for dotted, value in values.items():
        keys = dotted.split(".")
        if not all(_BARE_WORD.match(k) for k in keys):
            raise ConfigError(f"malformed config key {dotted!r}: expected section.key, e.g. model.hidden")
        node = config
        for k in keys[:-1]:
            child = node.setdefault(k, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{dotted!r}: {k!r} is a value, not a section")
            node = child
        node[keys[-1]] = value
    return config


def apply_sets(config: dict, assignments: list[str] | tuple[str, ...]) -> dict:
    """A copy of ``config`` with each ``section.key=value`` assignment applied."""
    for assignment in assignments:
        keys, value = parse_set(assignment)
        config = apply_values(config, {".".join(keys): value})
    return config


def load_toml(path) -> dict:
    """Read a TOML file; a missing or malformed file is a :class:`ConfigError`."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {e}") from None


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if v == v and abs(v) != float("inf") else ("nan" if v != v else ("inf" if v > 0 else "-inf"))
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise ConfigError(f"cannot write {v!r} ({type(v).__name__}) to TOML")


def _toml_key(k: str) -> str:
    return k if re.match(r"^[A-Za-z0-9_-]+$", k) else _toml_value(k)


def dumps(config: dict) -> str:
    """Write a nested dict of TOML values as TOML text (top-level scalars first, then tables)."""

    def pairs(d: dict) -> list[str]:
        return [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in d.items() if not isinstance(v, dict) and v is not None]

    lines = pairs(config)

    def table(prefix: str, d: dict) -> None:
        lines.extend(["", f"[{prefix}]", *pairs(d)])
        for k, v in d.items():
            if isinstance(v, dict):
                table(f"{prefix}.{_toml_key(k)}", v)

    for k, v in config.items():
        if isinstance(v, dict):
            table(_toml_key(k), v)
    return "\n".join(lines).lstrip("\n") + "\n"
