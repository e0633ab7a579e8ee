"""Run configurations: nested dicts of TOML values, ``--set`` overrides, and validation.

A run config has the sections of a scenario file (DESIGN §3):

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

import collections.abc
import copy
import dataclasses
import functools
import inspect
import math
import os
import re
import tomllib
import types
import typing
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.types import AllowInfNan

from dynlab.errors import ConfigError

SECTIONS = ("model", "task", "rule", "train")
_BARE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
INT64 = (-(2**63), 2**63 - 1)  # TOML's integer range (tomllib itself accepts any size)
SEED_RANGE = (0, 2**32 - 1)


FloatOrInf = Annotated[float, AllowInfNan(True)]
"""The annotation of a float key for which ±inf is meaningful; every other number must be finite."""


def Range(*, minimum: float | None = None, maximum: float | None = None, above: float | None = None,
          below: float | None = None) -> annotated_types.Interval:
    """A numeric key's bounds, ``Annotated[int, Range(minimum=1)]``: ``minimum`` and ``maximum``
    inclusive, ``above`` and ``below`` exclusive; an ``annotated_types.Interval``, which pydantic
    checks ([`check_value`][]) wherever the value is given: command-line text, TOML or Python."""
    return annotated_types.Interval(gt=above, ge=minimum, lt=below, le=maximum)


@dataclasses.dataclass(frozen=True)
class Flag:
    """Marker of another command-line spelling of a key, ``Annotated[list[float], Flag("--strength")]``:
    the option's name before its command was generated from the key, kept working."""

    name: str


Count = Annotated[int, annotated_types.Ge(1)]
"""A positive integer (a number of steps, exponents, samples, …)."""
NonNegative = Annotated[int, annotated_types.Ge(0)]
"""An integer >= 0 (a burn-in, an onset)."""
Fraction = Annotated[float, annotated_types.Gt(0), annotated_types.Lt(1)]
"""A number strictly between 0 and 1."""

_STRICT = ConfigDict(strict=True, allow_inf_nan=False)
"""How values are checked: strictly (a bool is not a number, a string not an integer, a float not an
integer; an integer is a float), and every float finite unless its annotation says ``AllowInfNan``."""
_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def bare(annotation: Any) -> Any:
    """``annotation`` without ``Annotated`` (its bounds and markers)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return typing.get_args(annotation)[0]
    return annotation


def describe(annotation: Any) -> str:
    """An annotation in words (``"int"``, ``"one of 'a', 'b'"``, ``"float or None"``)."""
    annotation = bare(annotation)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _basic(annotation: Any) -> bool:
    """Is ``annotation`` made of what a config can hold (numbers, strings, booleans, ``None``,
    ``Literal``, lists, tables, ``Any``)? Other types (a task, a callable) are not config values."""
    if annotation in (bool, int, float, str, type(None), dict, list, tuple, Any, inspect.Parameter.empty):
        return True
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return True
    if origin is typing.Annotated:
        return _basic(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, dict, collections.abc.Sequence):
        return all(a is Ellipsis or _basic(a) for a in typing.get_args(annotation))
    return False


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation, config=_STRICT)


def _as_annotated(value: Any, annotation: Any) -> Any:
    """TOML's arrays are lists: as tuples where the annotation is a tuple (strict mode tells them apart)."""
    base = typing.get_args(annotation)[0] if typing.get_origin(annotation) is typing.Annotated else annotation
    options = typing.get_args(base) if typing.get_origin(base) in (typing.Union, types.UnionType) else (base,)
    if isinstance(value, list) and any(o is tuple or typing.get_origin(o) is tuple for o in options):
        return tuple(value)
    return value


def _admits_float(annotation: Any) -> bool:
    """Does the annotation take a float anywhere (as itself, in a union, as a sequence's items)?"""
    annotation = bare(annotation)
    return annotation is float or any(_admits_float(a) for a in typing.get_args(annotation) if a is not Ellipsis)


def bounds_text(annotation: Any) -> str:
    """The bounds an annotation declares, in words (``">= 1 and < 10"``), looked for through unions
    and the item types of sequences; ``""`` when it declares none."""
    parts = []
    for a in (typing.get_args(annotation)[1:] if typing.get_origin(annotation) is typing.Annotated else ()):
        for bound in (a if isinstance(a, annotated_types.GroupedMetadata) else [a]):
            for key, sign in _BOUNDS.items():
                if getattr(bound, key, None) is not None:
                    parts.append(f"{sign} {getattr(bound, key)}")
    if parts:
        return " and ".join(parts)
    for arg in typing.get_args(annotation) if typing.get_origin(annotation) is not typing.Annotated else ():
        found = bounds_text(arg) if arg is not Ellipsis else ""
        if found:
            return found
    return ""


def check_value(where: str, annotation: Any, value: Any, *, shown: Any = None) -> None:
    """Check ``value`` against its annotation with pydantic (strict mode, ``_STRICT``): its type,
    its bounds (``annotated_types``, [`Range`][]) and that it is finite (unless ``FloatOrInf``).

    **Enforces** "a value is checked where it is given, by one validator": command-line text
    ([`parse_number`][]), TOML and Python values ([`dynlab.registry.check_config`][]) give the same
    one-line [`ConfigError`][]: ``WHERE must be an integer >= 1, got '0'``. ``shown`` is the value as
    the user wrote it (command-line text), default its ``repr``. Types that are not config values
    (``_basic``: a task, a callable) are left to their receiver.
    """
    if annotation in (inspect.Parameter.empty, Any) or not _basic(annotation):
        return  # unannotated, anything, or not a config value
    try:
        _adapter(annotation).validate_python(_as_annotated(value, annotation))
    except ValidationError as e:
        shown_text, shown = shown, repr(value) if shown is None else repr(shown)
        errors = e.errors()
        if any(err["type"] == "finite_number" for err in errors) or (isinstance(value, float) and not math.isfinite(value)):
            raise ConfigError(f"{where} is {value}: give a finite number") from None
        bounds = bounds_text(annotation)
        out_of_range = [err for err in errors
                        if err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal")]
        if bounds and out_of_range:
            index = next((i for i in out_of_range[0]["loc"] if isinstance(i, int)), None)
            if isinstance(value, (list, tuple)) and index is not None:  # the item out of range, as written
                texts = str(shown_text).split(",") if shown_text is not None else None
                shown = repr(texts[index].strip() if texts and len(texts) == len(value) else value[index])
            kind = "a number" if _admits_float(annotation) else "an integer"
            raise ConfigError(f"{where} must be {kind} {bounds}, got {shown}") from None
        raise ConfigError(f"{where} must be {describe(annotation)}{f' {bounds}' if bounds else ''}, got {shown}") from None


def check_numbers(where: str, value: Any, *, allow_inf: bool = False) -> Any:
    """Check every number inside ``value`` (nested tables and arrays); return ``value``.

    **Enforces** the guarantee "every number is finite and in range where it is parsed": NaN is
    never a valid setting; ±inf only where ``allow_inf`` (keys annotated [`FloatOrInf`][]);
    integers must fit TOML's 64-bit range. It runs on every TOML document read
    ([`load_toml`][]), every ``--set`` value ([`parse_value`][]), every numeric command-line
    option ([`parse_number`][]) and every key checked against a signature
    ([`dynlab.registry.check_config`][], which knows which keys may be infinite).
    """
    if isinstance(value, dict):
        for k, v in value.items():
            check_numbers(f"{where} {k}" if where.endswith(":") else f"{where}.{k}" if where else str(k), v,
                          allow_inf=allow_inf)
    elif isinstance(value, (list, tuple)):
        for v in value:
            check_numbers(where, v, allow_inf=allow_inf)
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise ConfigError(f"{where} = {value} is out of range: integers must lie in [-2^63, 2^63 - 1]")
    elif isinstance(value, float):
        if math.isnan(value):
            raise ConfigError(f"{where} is nan: give a finite number")
        if math.isinf(value) and not allow_inf:
            raise ConfigError(f"{where} is {value}: give a finite number")
    return value


MAX_NESTING = "nested too deeply (arrays or tables inside one another, beyond what Python's TOML parser follows)"


def _one_value(document: str, where: str, text) -> Any:
    """The value ``v`` of ``document`` (``"v = TEXT"``), the one value a command-line option
    holds. **Enforces** "nothing given is dropped": more TOML after the value (``5\nx=3``) is a
    [`ConfigError`][], as is a value nested too deeply to parse (tomllib's ``RecursionError``)."""
    try:
        doc = tomllib.loads(document)
    except RecursionError:
        raise ConfigError(f"{where} is {MAX_NESTING}") from None
    if list(doc) != ["v"]:
        raise ConfigError(f"{where}: {str(text)!r} holds more than one value (more TOML after the first, "
                          f"{', '.join(k for k in doc if k != 'v')} = ...); give one value")
    return doc["v"]


def parse_value(text: str, where: str = "value") -> Any:
    """Parse one ``--set`` value as a TOML value (``128``, ``1e-3``, ``true``, ``"x"``, ``[1, 2]``).

    NaN and integers beyond 64 bits are refused here ([`check_numbers`][]); ±inf parses, and
    the key's signature decides whether it is allowed.
    """
    try:
        value = _one_value(f"v = {text}", where, text)
    except tomllib.TOMLDecodeError:
        if _BARE_WORD.match(text):
            return text
        raise ConfigError(
            f"cannot parse value {text!r}: use a TOML value (e.g. 128, 1e-3, true, \"name\", [1, 2])"
        ) from None
    return check_numbers(where, value, allow_inf=True)


def parse_number(name: str, text, *, integer: bool = False, minimum: float | None = None,
                 maximum: float | None = None, above: float | None = None, below: float | None = None):
    """One numeric command-line option: ``text`` as a finite int (``integer``) or float in range.

    ``minimum``/``maximum`` are inclusive bounds, ``above``/``below`` exclusive ones ([`Range`][]). ``None``
    stays ``None`` (the option was not given). The text is read as a TOML number and checked by
    [`check_value`][] (the one validator of TOML and Python values too); anything else is a
    one-line [`ConfigError`][] naming the option and what is valid.
    """
    if text is None:
        return None
    kind = "an integer" if integer else "a number"
    try:
        value = _one_value(f"v = {str(text).strip()}", name, text)
    except tomllib.TOMLDecodeError:
        raise ConfigError(f"{name} must be {kind}, got {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ConfigError(f"{name} must be {kind}, got {text!r}")
    bounds = Range(minimum=minimum, maximum=maximum, above=above, below=below)
    check_value(name, Annotated[int if integer else float, bounds], value, shown=text)
    check_numbers(name, value)  # within the bounds, still at most 64 bits (--steps 2^70 was accepted)
    return value


def parse_numbers(name: str, text, **bounds) -> list | None:
    """A comma-separated list of numbers (``"0,0.5,1"``), each checked by [`parse_number`][]."""
    if text is None:
        return None
    parts = [p.strip() for p in str(text).split(",")]
    if not all(parts):
        raise ConfigError(f"{name} must be a comma-separated list of numbers, e.g. 1,2,5; got {text!r}")
    return [parse_number(name, p, **bounds) for p in parts]


def number_list(name: str, values, **bounds) -> list:
    """A non-empty list of numbers given as values (from TOML or Python), each checked as
    [`parse_number`][] checks one (``integer``, ``minimum``, ``maximum``, ``above``): the one
    validator of numeric lists, beside [`parse_numbers`][] for their command-line spelling."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ConfigError(f"{name} must be a non-empty list of numbers, got {values!r}")
    values = list(values)
    if not values:
        raise ConfigError(f"{name} must be a non-empty list of numbers, got []")
    return [parse_number(name, v.item() if hasattr(v, "item") else v, **bounds) for v in values]


_SEGMENT = r'(?:([A-Za-z_][A-Za-z0-9_-]*)|"([A-Za-z_][A-Za-z0-9_.-]*)")'


def _key_path(path: str) -> list[str] | None:
    """The keys of a dotted path in TOML's dotted-key grammar, a segment bare (``model``) or
    double-quoted (``"model.unit"``, which may hold dots); ``None`` when ``path`` is not one."""
    if not re.fullmatch(rf"{_SEGMENT}(?:\.{_SEGMENT})*", path):
        return None
    return [bare or quoted for bare, quoted in re.findall(_SEGMENT, path)]


def parse_set(assignment: str) -> tuple[list[str], Any]:
    """Split ``section.key=value`` into (``["section", "key"]``, parsed value).

    A key holding dots is quoted as in TOML: ``sweep."model.unit"=["gru"]`` gives
    ``["sweep", "model.unit"]``."""
    if "=" not in assignment:
        raise ConfigError(f"malformed --set {assignment!r}: expected section.key=value, e.g. model.hidden=128")
    path, _, value = assignment.partition("=")
    keys = _key_path(path.strip())
    if keys is None or not value.strip():
        raise ConfigError(f"malformed --set {assignment!r}: expected section.key=value, e.g. model.hidden=128")
    return keys, parse_value(value.strip(), f"--set {path.strip()}")


def _set(config: dict, keys: list[str], value: Any) -> None:
    """Set the key at path ``keys`` of ``config`` (in place) to ``value``, as [`apply_values`][] says."""
    where = ".".join(keys)
    if not keys or not all(_BARE_WORD.match(k) for k in keys):
        raise ConfigError(f"malformed config key {where!r}: expected section.key, e.g. model.hidden")
    node = config
    for k in keys[:-1]:
        child = node.setdefault(k, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{where!r}: {k!r} is a value, not a section")
        node = child
    if len(keys) == 1 and keys[0] in SECTIONS and isinstance(value, dict) and isinstance(node.get(keys[0]), dict):
        node[keys[0]] = {**node[keys[0]], **value}
    else:
        node[keys[-1]] = value


def apply_values(config: dict, values: dict[str, Any]) -> dict:
    """A copy of ``config`` with each dotted key (``"model.hidden"``) set to its value.

    A table given for a whole run-config section (``model = {hidden = 8}``, one of
    [`SECTIONS`][]) sets its keys in that section and keeps the others: ``--model rnn --set
    'model={hidden=8}'`` trains an RNN of 8 units, as ``--set model.hidden=8`` does, rather than
    dropping the unit and training the default one. Any other key is replaced by its value (a
    program's ``params.networks = {…}`` is the whole table it names)."""
    config = copy.deepcopy(config)
    for dotted, value in values.items():
        _set(config, dotted.split("."), value)
    return config


def apply_sets(config: dict, assignments: list[str] | tuple[str, ...], regroup=None) -> dict:
    """A copy of ``config`` with each ``section.key=value`` assignment applied ([`parse_set`][]);
    ``regroup``, if given, maps an assignment's key path to the path it sets (in a scenario,
    ``sweep.model.unit`` sets the axis ``"model.unit"``: [`dynlab.scenarios.spec.sweep_path`][])."""
    return apply_paths(config, [parse_set(assignment) for assignment in assignments], regroup)


def apply_paths(config: dict, paths, regroup=None) -> dict:
    """A copy of ``config`` with each ``(key path, value)`` of ``paths`` set as [`apply_sets`][]
    sets an assignment (``regroup`` likewise)."""
    config = copy.deepcopy(config)
    for keys, value in paths:
        _set(config, regroup(keys) if regroup else keys, value)
    return config


MAX_TOML_BYTES = 1 << 20
"""The largest TOML file read (1 MiB; the built-in scenarios are about 2 KB)."""


def load_toml(path) -> dict:
    """Read a TOML file; a missing or malformed file is a [`ConfigError`][].

    **Enforces** "config files are refused by size before parsing": only a regular file is read
    (not ``/dev/zero``, a pipe or a socket), and at most [`MAX_TOML_BYTES`][] of it; a longer
    file is refused without reading the rest.
    """
    import stat

    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: a FIFO would block the open
            raise ConfigError(f"config file {str(path)!r} is not a regular file (a device, pipe or socket)")
        with open(path, "rb") as f:
            raw = f.read(MAX_TOML_BYTES + 1)
        if len(raw) > MAX_TOML_BYTES:
            raise ConfigError(f"config file {str(path)!r} is larger than {MAX_TOML_BYTES // (1 << 20)} MiB, "
                              "the most a config or scenario file may hold")
        doc = tomllib.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ConfigError(f"config file {str(path)!r} is {MAX_NESTING}") from None
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {str(path)!r} is a directory") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text") from None
    except PermissionError:
        raise ConfigError(f"config file {str(path)!r} cannot be read (permission denied)") from None
    return check_numbers(f"{path}:", doc, allow_inf=True)


def dumps(config: dict) -> str:
    """A nested dict of TOML values as TOML text, written by `tomli_w` (top-level values first, then
    tables) from ``_as_written``: keys whose value is ``None`` left out, tuples as lists, numpy
    numbers as Python numbers. A value TOML has no form for (an object, ``None`` in a list) is a
    one-line [`ConfigError`][]."""
    import tomli_w

    try:
        return tomli_w.dumps(_as_written(config))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"cannot write the config as TOML: {' '.join(str(e).split())}") from None


def _as_written(value: Any) -> Any:
    """``value`` as [`dumps`][] writes it: tuples as lists, numbers as Python numbers, keys whose
    value is ``None`` left out."""
    import numbers

    if isinstance(value, dict):
        return {k: _as_written(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_as_written(v) for v in value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value
