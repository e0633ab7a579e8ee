"""The registry of plug-ins: units, models, rules, tasks, analyses, losses, scenarios, programs and
the weight formats of models trained elsewhere ([`dynlab.imports`][]).

Each kind maps short names (the ones used on the CLI and in scenario files) to a constructor and
a one-line description. Registering a new plug-in is one decorator line:

    @register("unit", "aru", "Adaptive Recurrent Unit: per-neuron controller sets gamma's n, s")
    class ARUCell(Cell): ...

[`build`][] checks every keyword against the constructor's signature before calling it, so an
unknown config key or a value of the wrong type is a [`ConfigError`][dynlab.errors.ConfigError] that
lists what is valid, never a ``TypeError`` from deep inside a constructor. A class whose Python
API takes values where configs spell strings (``ElmNet(activation=AdaptiveGamma())`` vs
``adaptation = "aru"``) defines a ``from_config`` classmethod, the one place where spellings become
values; the registry builds it through that and takes its config keys from it
([`constructor`][]).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import types
import typing
from typing import Any, Callable, Literal

from dynlab.config import bare, check_value, describe
from dynlab.errors import ConfigError, UnknownNameError
from dynlab.option_groups import fold_legacy, group_of, parse_group, parse_groups
from dynlab.outputs import Output, check_dataset

KINDS = ("unit", "model", "rule", "task", "analysis", "loss", "scenario", "program", "format", "transfer")
BUILTIN_MODULES = ("dynlab.losses", "dynlab.models", "dynlab.ffmodels", "dynlab.rnn_param", "dynlab.rnn_residual", "dynlab.units",
                   "dynlab.tasks", "dynlab.imports", "dynlab.transfer", "dynlab.rules", "dynlab.analyses",
                   "dynlab.scenarios")
"""The packages whose modules register dynlab's own plug-ins when imported."""
PLUGIN_GROUP = "dynlab.plugins"
"""The entry-point group of third-party plug-ins: an installed package declares e.g.
``[project.entry-points."dynlab.plugins"] mypkg = "mypkg.dynlab_plugins"``; that module is
imported and its ``@register`` lines add units, rules, tasks, analyses or programs."""
PLURALS = {"unit": "units", "model": "models", "rule": "rules", "task": "tasks", "analysis": "analyses",
           "loss": "losses", "scenario": "scenarios", "program": "programs", "format": "formats",
           "transfer": "transfers"}


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered plug-in: its kind, name, the object itself and a one-line description.

    Analyses and programs may carry ``figure`` (``figure(ds) -> matplotlib Figure``, what
    ``dynlab plot`` draws for a dataset whose ``analysis`` attribute is this name) and
    ``summary`` (``summary(ds) -> str``, what the command line prints after computing it; a
    program's gets the dict of datasets the program returns, see [`dynlab.scenarios.summary`][]).
    Programs of paper scenarios carry ``claims`` (``claims(params) -> list[Claim]``, called with the
    run's resolved parameters): the paper's claims, judged on the datasets the program returns
    ([`dynlab.claims.judge`][]) whenever the scenario runs.

    ``takes`` (analyses) says what an analysis compares: ``"model"`` (the default) is a function of
    one model, run in every cell of a scenario; ``"runs"`` is a function of several trained runs,
    ``fn(runs, **options)`` with ``runs`` a sequence of run directories (at least 2), returning a
    dataset with a ``run`` dim in the order given (DSA). A scenario runs such an analysis once,
    across its cells, after the sweep ([`dynlab.scenarios.across`][]). ``"rules"`` is a function of
    one model and the rules its config names, ``fn(model, rules, **options)`` with ``rules`` a dict
    name -> rule of at least two ([`dynlab.experiment.rule_names`][]), run in every cell (e.g.
    ``grad-compare``: the rules' gradients on the same model and batch).

    ``finite`` (analyses) names the result variables that must hold finite numbers: the command
    line prints the summary, keeps the dataset and then exits with
    [`NonFiniteResult`][dynlab.errors.NonFiniteResult] when one does not.

    ``headline`` (analyses) names the per-cell scalars a sweep's figure draws, one panel each, as
    ``(variable, label)`` pairs ([`dynlab.figures.sweep`][]): what a reader compares across cells.

    ``outputs`` (analyses) declares the variables of its dataset, each with its dims and kind
    ([`dynlab.outputs.Output`][]): claims, ``where``, headlines and comparisons across cells are
    checked against them before any work. ``()``: not declared (a plug-in's may omit them; its
    claims are then checked by their prefix only).

    ``coordinates`` (analyses) names, for an own dim of its outputs whose coordinate is an option's
    values, that option (``perturb``: ``{"strength": "strengths"}``): a claim's ``where`` on that dim
    is checked against the values the scenario's entry gives, before any work.

    ``check`` checks options against what they apply to, before any work: an analysis's
    ``check(model, **options)`` (defaults filled in, ``task`` left out; the model may be abstract)
    raises ``ConfigError`` for options the model cannot take (a Lyapunov ``k`` above its state
    dimension); an analysis of runs's ``check(configs, names, **options)`` gets the compared cells'
    configs; a program's ``check(**params)`` the combinations its signature cannot express
    ([`dynlab.scenarios.spec.check_cells`][]).
    """

    kind: str
    name: str
    obj: Any
    description: str
    figure: Callable | None = None
    summary: Callable | None = None
    claims: Callable | None = None
    takes: str = "model"
    finite: tuple[str, ...] = ()
    headline: tuple[tuple[str, str], ...] = ()
    outputs: tuple[Output, ...] = ()
    check: Callable | None = None
    coordinates: tuple[tuple[str, str], ...] = ()

    def output(self, name: str) -> Output | None:
        """The declared output ``name``, ``None`` if it is not one."""
        return next((o for o in self.outputs if o.name == name), None)


_REGISTRY: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}


_loading = False


def load_plugins() -> None:
    """Import the built-in plug-in packages ([`BUILTIN_MODULES`][]), then every installed
    package's entry point of group [`PLUGIN_GROUP`][]; once, on the first lookup.

    Loading on demand keeps ``import dynlab`` and ``dynlab --help`` free of JAX. A plug-in that
    fails to import is a warning naming it, not a failure of dynlab; one that calls
    ``sys.exit`` while imported is a one-line [`PluginError`][dynlab.errors.PluginError], one interrupted
(``KeyboardInterrupt``) an [`Interrupted`][dynlab.errors.Interrupted] naming it. Entry points are metadata of
    installed packages: nothing named in a config, scenario or option is ever imported.
    """
    global _loading
    if _loading:
        return
    _loading = True
    import importlib
    import importlib.metadata
    import warnings

    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except SystemExit as e:  # a plug-in may not end dynlab (it exited 3, silently)
            from dynlab.errors import PluginError

            raise PluginError(f"dynlab plug-in {ep.name!r} ({ep.value}) called sys.exit({e.code!r}) while being "
                              "imported; uninstall or fix it") from None
        except KeyboardInterrupt:  # Ctrl-C, or the plug-in raised it: either way, name where it stopped
            from dynlab.errors import Interrupted

            raise Interrupted(f"while importing dynlab plug-in {ep.name!r} ({ep.value}); if Ctrl-C was not pressed, "
                              "the plug-in raised KeyboardInterrupt: uninstall or fix it") from None
        except Exception as e:
            warnings.warn(f"dynlab plug-in {ep.name!r} ({ep.value}) failed to load: {type(e).__name__}: {e}",
                          RuntimeWarning, stacklevel=2)


def _check_kind(kind: str) -> None:
    if kind not in _REGISTRY:
        raise UnknownNameError(f"unknown kind {kind!r}; valid kinds: {', '.join(KINDS)}")


ANALYSIS_TAKES = ("model", "runs", "rules")
"""What a registered analysis is a function of ([`Entry`][] ``takes``)."""


def register(kind: str, name: str, description: str | None = None, *, figure: Callable | None = None,
             summary: Callable | None = None, claims: Callable | None = None, takes: str = "model",
             finite: tuple[str, ...] = (), headline: tuple[tuple[str, str], ...] = (),
             outputs: tuple[Output, ...] = (), check: Callable | None = None,
             coordinates: dict[str, str] | None = None) -> Callable:
    """Decorator registering ``obj`` under ``kind``/``name``.

    The description defaults to the first line of the object's docstring. ``figure`` and
    ``summary`` (analyses and programs), ``claims`` (programs), ``takes``, ``finite``,
    ``headline``, ``outputs`` and ``coordinates`` (analyses) and ``check`` are described on [`Entry`][]. An analysis is checked here, once: every parameter
    without a default must be one the command line and a scenario can give
    ([`check_analysis_signature`][]), and the variables its ``headline`` and ``finite`` name must
    be declared outputs. An analysis that declares outputs is registered (and returned) wrapped so
    that every dataset it returns is compared with them ([`dynlab.outputs.check_dataset`][]): a
    declaration cannot drift from the code unnoticed.
    """
    if claims is not None and kind != "program":
        raise ValueError("only programs declare claims")
    if (outputs or headline) and kind != "analysis":
        raise ValueError("only analyses declare outputs and headlines")
    declared = {o.name for o in outputs}
    named = [v for v, _ in headline] + ([] if not outputs else list(finite))
    undeclared = [v for v in named if v not in declared]
    if undeclared:
        raise ValueError(f"analysis {name!r}: headline/finite variable {undeclared[0]!r} is not a declared output; "
                         f"outputs: {', '.join(sorted(declared)) or '(none declared)'}")
    if takes not in ANALYSIS_TAKES or (takes != "model" and kind != "analysis"):
        raise ValueError(f"takes must be one of {ANALYSIS_TAKES}, and only analyses take runs or rules")
    _check_kind(kind)

    def decorate(obj):
        if name in _REGISTRY[kind]:
            raise ValueError(f"{kind} {name!r} is registered twice")
        doc = description or (inspect.getdoc(obj) or "").strip().splitlines()[0:1]
        text = doc if isinstance(doc, str) else (doc[0] if doc else "")
        if kind == "analysis":
            check_analysis_signature(name, obj, takes)
        if outputs:
            obj = _checked(name, obj, tuple(outputs))
        _REGISTRY[kind][name] = Entry(kind, name, obj, text, figure, summary, claims, takes, tuple(finite),
                                      tuple(headline), tuple(outputs), check, tuple((coordinates or {}).items()))
        return obj

    return decorate


def _checked(name: str, fn: Callable, outputs: tuple[Output, ...]) -> Callable:
    """``fn`` with every dataset it returns compared with its declared ``outputs`` (a warning
    naming the difference; the dataset is returned as it is)."""

    @functools.wraps(fn)
    def analysis(*args, **kwargs):
        ds = fn(*args, **kwargs)
        check_dataset(name, outputs, ds)
        return ds

    return analysis


def names(kind: str) -> list[str]:
    """Registered names of a kind, sorted."""
    _check_kind(kind)
    load_plugins()
    return sorted(_REGISTRY[kind])


def entries(kind: str) -> list[Entry]:
    _check_kind(kind)
    return [_REGISTRY[kind][n] for n in names(kind)]


def get(kind: str, name: str) -> Entry:
    """The entry for ``name``; unknown names raise an error listing the valid ones."""
    _check_kind(kind)
    if not isinstance(name, str) or name not in _REGISTRY[kind]:
        load_plugins()
    try:
        return _REGISTRY[kind][name]
    except (KeyError, TypeError):
        valid = ", ".join(names(kind)) or "(none registered)"
        raise UnknownNameError(f"unknown {kind} {name!r}; valid {PLURALS.get(kind, kind + 's')}: {valid}") from None


# ---------------------------------------------------------------------------------------------
# Config keys: a constructor's keyword parameters are its config keys.


def constructor(obj: Any) -> Callable:
    """What builds ``obj`` from config keys: a class's ``from_config`` classmethod when it defines one
    (it turns the config's spellings into the values ``__init__`` takes), else ``obj`` itself."""
    from_config = getattr(obj, "from_config", None) if inspect.isclass(obj) else None
    return from_config if callable(from_config) else obj


def _targets(obj: Any) -> tuple[Callable, ...]:
    """The callables whose keyword parameters are ``obj``'s config keys, the one called first: a
    function; a class's ``__init__``; or its ``from_config`` and, when that passes ``**config`` on
    to the class, ``__init__`` too."""
    if not inspect.isclass(obj):
        return (obj,)
    build_with = constructor(obj)
    if build_with is obj:
        return (obj.__init__,)
    forwards = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(build_with).parameters.values())
    return (build_with, obj.__init__) if forwards else (build_with,)


def config_keys(obj: Any, *, exclude: tuple[str, ...] = ("key", "self")) -> dict[str, inspect.Parameter]:
    """The keyword parameters of a constructor (or function), i.e. the config keys it accepts
    (for a class with ``from_config``: its keys, and the class's that it passes on)."""
    keys: dict[str, inspect.Parameter] = {}
    for target in _targets(obj):
        for n, p in inspect.signature(target).parameters.items():
            if n not in exclude and n not in keys and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                keys[n] = p
    return keys


def defaults(obj: Any, *, exclude: tuple[str, ...] = ("key", "self")) -> dict[str, Any]:
    """Config keys of ``obj`` that have defaults, with those defaults."""
    return {n: p.default for n, p in config_keys(obj, exclude=exclude).items() if p.default is not p.empty}


def check_config(where: str, obj: Any, config: dict[str, Any], *, extra: dict | None = None,
                 exclude: tuple[str, ...] = ("key", "self")) -> None:
    """Validate ``config`` against ``obj``'s keyword parameters (plus ``extra`` parameters).

    Raises [`ConfigError`][] naming the bad key and listing valid keys, or naming the bad value
    and what is valid: each value is checked against its key's annotation by pydantic
    ([`dynlab.config.check_value`][]: its type, its bounds, finite unless annotated
    [`dynlab.config.FloatOrInf`][]); tables passed on to other constructors are checked there. A key
    annotated with an option group ([`dynlab.option_groups`][]) is checked by the group's own parser.
    """
    params = dict(config_keys(obj, exclude=exclude))
    params.update(extra or {})
    open_ended = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(_targets(obj)[-1]).parameters.values())
    for k, v in config.items():
        if k not in params and open_ended:
            continue  # forwarded (e.g. a model's unit keys): the receiver checks them
        if k not in params:
            raise ConfigError(f"unknown config key {where}.{k}; valid keys: {', '.join(sorted(params))}")
        hints = _type_hints(obj)
        annotation = hints.get(k, params[k].annotation)
        if group_of(annotation) is not None:  # a value of options that belong together: its own one check
            parse_group(f"{where}.{k}", annotation, v, params[k].default)
            continue
        check_value(f"{where}.{k}", annotation, v)


@functools.cache
def _type_hints(obj: Any) -> types.MappingProxyType:
    """``obj``'s resolved annotations (read-only), resolved once per object: they do not change after
    its definition, and [`check_config`][] asks for them for every key of every cell of a sweep
    (loading the scenarios of docs/papers/cross-paper.md resolved them 10,054 times: 11.8 -> 8.5 s CPU)."""
    hints: dict[str, Any] = {}
    for target in reversed(_targets(obj)):  # the one called first wins
        try:
            hints.update(typing.get_type_hints(target, include_extras=True))
        except Exception:  # unresolvable forward references: fall back to raw annotations
            pass
    return types.MappingProxyType(hints)


def name_of(kind: str, obj: Any) -> str:
    """The name ``obj`` is registered under as a ``kind``; an [`UnknownNameError`][] when it is not."""
    _check_kind(kind)
    load_plugins()
    for name, entry in _REGISTRY[kind].items():
        if entry.obj is obj:
            return name
    raise UnknownNameError(f"{getattr(obj, '__name__', obj)!r} is not a registered {kind}; valid "
                           f"{PLURALS.get(kind, kind + 's')}: {', '.join(names(kind))}")


def make(kind: str, name: str, /, **kwargs) -> Any:
    """Construct the registered ``kind``/``name`` from keyword arguments **already checked** (a run
    config after [`dynlab.experiment.validate`][]): what [`build`][] does, without checking them again."""
    return constructor(get(kind, name).obj)(**kwargs)


def build(kind: str, name: str | None = None, /, **kwargs) -> Any:
    """Construct the registered ``kind``/``name`` with checked keyword arguments.

    ``name`` may be omitted for models (the ``"sequence"`` model). An analysis takes its options
    as a scenario entry does: older flat keys fold into their option groups (``k=8`` is
    ``qr={"k": 8}``) and a group's table becomes its value ([`dynlab.option_groups`][]).
    """
    if name is None and kind == "model":
        name = "sequence"
    entry = get(kind, name)
    if kind == "analysis":
        kwargs = parse_groups(entry.obj, fold_legacy(entry.obj, kwargs, f"analysis.{name}"), f"analysis.{name}")
    check_config(kind, entry.obj, {k: v for k, v in kwargs.items() if k != "key"})
    return constructor(entry.obj)(**kwargs)


ANALYSIS_ARGUMENTS = {"model": ("model",), "runs": ("runs",), "rules": ("model",)}
"""The first parameter of an analysis, by what it takes ([`Entry`][] ``takes``; ``"rules"``: the
model, then the rules, [`RULES_ARGUMENT`][]); a function whose
first parameter is something else (``compare_pc_bp(task, widths, ...)``) has a command of its own."""
RULES_ARGUMENT = "rules"
"""The second parameter of an analysis that takes ``"rules"``: the cell's rules, given by the runner."""


def of_what_it_takes(fn: Callable, takes: str) -> bool:
    """Is the analysis a function of what its ``takes`` says (its first parameter is the model, or
    the runs: [`ANALYSIS_ARGUMENTS`][])? Only then can a scenario's cell (or its sweep) give it
    its input and ``dynlab analyze NAME`` be generated from it; a function of a task and a grid
    (``compare_pc_bp(task, widths, ...)``) builds its own models and has a command of its own."""
    parameters = list(inspect.signature(fn).parameters)
    return parameters[:1] == list(ANALYSIS_ARGUMENTS[takes])


PARSED = (bool, int, float, str)
"""The value types a command-line option or a TOML value can give (and lists of numbers)."""


def value_kinds(annotation: Any) -> dict:
    """What an annotation admits, for parsing its text: ``scalars`` (the other types), ``words``
    (``Literal`` values, in order), ``none`` (``None`` allowed) and ``list`` (the item type of a
    ``Sequence``/``list``/``tuple``, ``None`` when it is not one); ``Annotated`` and unions are looked through."""
    found: dict = {"scalars": set(), "words": [], "none": False, "list": None}

    def visit(a):
        a = bare(a)
        origin = typing.get_origin(a)
        if origin in (typing.Union, types.UnionType):
            for arg in typing.get_args(a):
                visit(arg)
        elif origin is Literal:
            found["words"] += [str(w) for w in typing.get_args(a) if str(w) not in found["words"]]
        elif a is type(None):
            found["none"] = True
        elif origin in (list, tuple, collections.abc.Sequence) or a in (list, tuple):
            items = [i for i in typing.get_args(a) if i is not Ellipsis]
            found["list"] = bare(items[0]) if items else float
        else:
            found["scalars"].add(a)

    visit(annotation)
    return found


def parsable(annotation: Any) -> bool:
    """Can an option of this annotation be given as text ([`dynlab.cli.analyze`][]) and as a TOML
    value? Booleans, numbers, strings, ``Literal``s, ``None``, and sequences of numbers."""
    if group_of(annotation) is not None:
        return True  # its text is a TOML word or key=value pairs ([`dynlab.option_groups.parse_text`][])
    kinds = value_kinds(annotation)
    return kinds["scalars"] <= set(PARSED) and kinds["list"] in (None, int, float)


def check_analysis_signature(name: str, fn: Callable, takes: str) -> None:
    """**Enforces** "an analysis that cannot be given its options fails when it is registered,
    not when it is used": every parameter after the model (or runs) that has no default, other
    than ``task`` (a task name), must be of a type the command line and a scenario can give
    ([`parsable`][]). A ``ValueError`` naming the parameter otherwise."""
    if not of_what_it_takes(fn, takes):
        return  # it brings its own command (pc-bp)
    parameters = list(inspect.signature(fn).parameters.values())
    hints = _type_hints(fn)
    for p in parameters[1:]:
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.default is not p.empty or p.name == "task" \
                or (takes == "rules" and p.name == RULES_ARGUMENT):
            continue
        annotation = hints.get(p.name, p.annotation)
        if annotation is p.empty or not parsable(annotation):
            raise ValueError(f"analysis {name!r}: parameter {p.name!r} has no default and its type "
                             f"({describe(annotation) if annotation is not p.empty else 'not annotated'}) cannot be "
                             "given on the command line or in a scenario: give it a default or a type of "
                             "bool, int, float, str, a Literal or a list of numbers")
