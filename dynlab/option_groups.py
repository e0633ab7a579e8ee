r"""Options that belong together, given as one value: ``input = {drive = 1.0}``, ``--qr k=8``.

An analysis parameter annotated with a subclass of [`OptionGroup`][] (the input protocol
[`dynlab.analyses.protocol.Protocol`][], the QR settings
[`dynlab.analyses.qr_settings.QRSettings`][]) takes one frozen value in Python and one TOML
value in a scenario file: a word (``"autonomous"``) or an inline table (``{task = "train",
drive = 0.5}``). On the command line its option takes the same table written as
``key=value,key=value`` ([`parse_text`][]: each value a TOML value, a bare word a string), so
``--input noise=0.1,seed=3`` and ``input = {noise = 0.1, seed = 3}`` are one value.

**Enforces** "a config is checked once, where TOML or command-line text becomes a value": both
spellings go through the group's one [`OptionGroup.parse`][], whose constructors check every
field (finite, in range) and raise one [`ConfigError`][dynlab.errors.ConfigError] line naming
the option.

**Older flat spellings.** A group may name flat keys that analyses took before the group existed
([`OptionGroup.legacy`][]: ``drive``, ``task``; ``k``, ``reortho_every``). [`fold_legacy`][]
moves them into the group's table, in one place, for a scenario entry and a command alike:
``drive = 0.0`` is ``input = {drive = 0.0}``, ``--k 8`` is ``--qr k=8``. A key given both ways
is refused. A group with a key of its own name (the PC inference settings'
``inference``, the method: [`dynlab.analyses.pc_bp.InferenceSettings`][]) takes a word or a
value given for the group as that key's, so ``inference = "lbfgs"`` beside ``energy =
"inference"`` is ``inference = {inference = "lbfgs", energy = "inference"}``. From Python, a
function decorated with [`legacy_keywords`][] takes the flat keys as keywords too.
"""

from __future__ import annotations

import abc
import functools
import inspect
import typing
from typing import Any, ClassVar

from dynlab.config import parse_value
from dynlab.errors import ConfigError


class OptionGroup(abc.ABC):
    """Base of the value types of option groups (frozen dataclasses)."""

    legacy: ClassVar[dict[str, Any]] = {}
    """Flat keys an analysis took before this group, each a key of the group's table, with the
    annotation its command-line option is parsed by ([`fold_legacy`][])."""

    @classmethod
    @abc.abstractmethod
    def parse(cls, value: Any, *, default: OptionGroup | None = None) -> OptionGroup:
        """The value of a TOML value (a word or a table), or ``value`` itself when it already is one.
        ``default``: the analysis's default value, for groups whose partial tables keep its other
        fields. Raises a [`ConfigError`][dynlab.errors.ConfigError] saying what is valid."""


def group_of(annotation: Any) -> type[OptionGroup] | None:
    """The [`OptionGroup`][] subclass an annotation names (``Annotated`` looked through), else ``None``."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation if inspect.isclass(annotation) and issubclass(annotation, OptionGroup) else None


def parse_group(where: str, annotation: Any, value: Any, default: Any = None) -> OptionGroup:
    """``value`` (a TOML value or a value of the group) as a checked value of the group the
    annotation names; a [`ConfigError`][dynlab.errors.ConfigError] prefixed with ``where`` otherwise."""
    group = group_of(annotation)
    try:
        return group.parse(value, default=default if isinstance(default, group) else None)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def parse_text(text: str, where: str) -> str | dict:
    """Command-line text as the TOML value of a group: ``"autonomous"`` stays a word,
    ``"noise=0.1,seed=3"`` becomes ``{"noise": 0.1, "seed": 3}`` (each value parsed by
    [`dynlab.config.parse_value`][]: numbers, booleans, a bare word as a string, an array
    ``constant=[1.0,0.0,0.0]``, whose commas do not separate pairs; NaN refused)."""
    text = text.strip()
    if "=" not in text:
        return text
    table: dict = {}
    for item in _items(text):
        key, eq, raw = (part.strip() for part in item.partition("="))
        if not eq or not key or not raw:
            raise ConfigError(f"{where} must be key=value pairs separated by commas (e.g. drive=1.0 or "
                              f"noise=0.1,seed=3), got {text!r}")
        if key in table:
            raise ConfigError(f"{where} gives {key} twice: {text!r}")
        table[key] = parse_value(raw, f"{where} {key}")
    return table


def _items(text: str) -> list[str]:
    """``text`` split at the commas outside brackets: ``"constant=[1,0],drive=1"`` is two items."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return [*items, text[start:]]


def group_parameters(fn) -> dict[str, tuple[type[OptionGroup], Any]]:
    """The parameters of ``fn`` whose annotation is an option group: ``{name: (group, default)}``."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: the raw annotations
        hints = {}
    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        group = group_of(hints.get(name, p.annotation))
        if group is not None:
            out[name] = (group, p.default)
    return out


def legacy_keys(fn) -> dict[str, tuple[str, Any]]:
    """The older flat keys ``fn`` still takes through its groups: ``{key: (group parameter, annotation)}``."""
    return {key: (name, annotation) for name, (group, _) in group_parameters(fn).items()
            for key, annotation in group.legacy.items()}


def fold_legacy(fn, options: dict, where: str) -> dict:
    """``options`` with the older flat keys of ``fn``'s groups moved into the groups' tables
    (``{"drive": 0.0}`` -> ``{"input": {"drive": 0.0}}``); a key given both flat and in the
    group's table, or flat beside a group given as a word or a value, is a ConfigError (but for
    a group with a key of its own name, whose word or value is that key's: see the module)."""
    options, legacy = dict(options), legacy_keys(fn)
    named = {key for key, (name, _) in legacy.items() if key == name}  # groups with a key of their own name
    for key, (name, _) in legacy.items():
        if key == name or key not in options:
            continue
        value = options.pop(key)
        table = options.get(name, {})
        if name in named and not isinstance(table, (dict, OptionGroup)):
            table = {name: table}  # the group's word or value is that key's
        if not isinstance(table, dict) or key in table:
            raise ConfigError(f"{where}.{key} is also given in {where}.{name}; give it once, "
                              f"as {name} = {{{key} = ...}}")
        options[name] = {**table, key: value}
    return options


def parse_groups(fn, options: dict, where: str) -> dict:
    """``options`` with the value of every option group of ``fn`` that it gives parsed
    ([`parse_group`][]; a table that leaves keys out keeps the default's)."""
    groups = group_parameters(fn)
    return {key: parse_group(f"{where}.{key}", groups[key][0], value, groups[key][1]) if key in groups else value
            for key, value in options.items()}


def legacy_keywords(fn):
    """``fn`` callable from Python with its groups' older flat keys as keywords, and with a
    group's table or word in place of its value: the keywords go through [`fold_legacy`][] and
    [`parse_groups`][] before ``fn`` runs, so ``compare_pc_bp(energy="inference")`` is
    ``compare_pc_bp(inference=InferenceSettings(energy="inference"))``. Its signature, help and
    registration are ``fn``'s (``functools.wraps``)."""
    where = fn.__qualname__

    @functools.wraps(fn)
    def called(*args, **options):
        return fn(*args, **parse_groups(fn, fold_legacy(fn, options, where), where))

    return called
