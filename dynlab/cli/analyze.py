r"""``dynlab analyze NAME``: every registered analysis of a model is a command, generated from it.

[`generated_command`][] builds the command of a registered analysis ``fn(model, *, ...)``, a
plug-in's included, from the function alone: one option per keyword parameter of a type the
command line can give ([`dynlab.registry.parsable`][]; ``n_values`` -> ``--n-values``, booleans
as ``--x/--no-x``), with no default of its own: an option not given is not passed, so the
signature holds the only default. Its text becomes a value through the one number parser
([`dynlab.config.parse_number`][], with the bounds the annotation declares) and is checked
against the signature ([`dynlab.registry.check_config`][]), before any work. ``--task``
(a task name, the model's own task when it names it) and the analysis's default task are
resolved by the function a scenario uses ([`dynlab.scenarios.spec.analysis_options`][]), so the
command with no options and an ``[[analyses]]`` entry with no options run the same configuration.
The help is the docstring: its first paragraph, and a line per parameter where the docstring's
``Args:`` section has one. What is printed is the analysis's registered summary; the figure its
registered figure. An analysis of several runs (``takes="runs"``, ``fn(runs, *, ...)``: ``dsa``)
takes ``RUN_DIR...`` and ``--runs DIR`` ([`run_directories`][]) in place of the model, and writes
``NAME.nc`` into a new run directory unless ``--out`` is given. ``pc-bp`` and ``pc-bptt``, functions
of a task and a grid, are [`dynlab.cli.compare`][]'s. Nothing is imported until a command is
looked up, so ``dynlab --help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing

from pathlib import Path

import click

from dynlab.cli.analysis import analysis_model, run_analysis, run_on_runs
from dynlab.cli.main import _RegistryGroup
from dynlab.cli.options import analysis_options, runs_options, seed_option
from dynlab.errors import ConfigError

COMMON = ("model", "runs", "task", "seed")
"""Parameters filled from the common options (the model from ``--model``/``--checkpoint``/``--set``,
the runs from ``RUN_DIR...``/``--runs``, ``--task``, ``--seed``), not given options of their own."""


class _AnalyzeGroup(_RegistryGroup):
    """The ``analyze`` group: ``pc-bp`` and ``pc-bptt`` ([`dynlab.cli.compare`][]), then one command
    generated per registered analysis of a model or of runs."""

    kind = "analysis"

    def generates(self, entry) -> bool:
        from dynlab import registry

        return registry.of_what_it_takes(entry.obj, entry.takes)

    def make(self, name: str) -> click.Command:
        return generated_command(name)


@click.group(cls=_AnalyzeGroup)
def analyze():
    """Run an analysis on a fresh or trained model; write a labelled netCDF dataset and a figure."""


def flag(key: str) -> str:
    """A parameter's option: ``n_values`` -> ``--n-values``."""
    return "--" + key.replace("_", "-")


def option_value(name: str, annotation, text: str):
    """Command-line text as a value of the parameter's type: numbers (and comma-separated lists of
    numbers) read by [`dynlab.config.parse_number`][] and checked against the annotation, bounds
    included, by the validator of TOML and Python values ([`dynlab.config.check_value`][]; for a
    number or a list, ``3`` is the number), a ``Literal`` word or ``None`` as itself, else the text."""
    from dynlab import registry
    from dynlab.config import check_value, parse_number, parse_numbers
    from dynlab.option_groups import group_of, parse_text

    if group_of(annotation) is not None:  # checked as a value once folded with its older flat keys
        return parse_text(text, name)
    kinds = registry.value_kinds(annotation)
    if text in kinds["words"]:
        return text
    if text.strip().lower() == "none" and kinds["none"]:
        return None
    if kinds["words"] and not kinds["scalars"] and kinds["list"] is None:
        from dynlab.errors import ConfigError

        raise ConfigError(f"{name} must be one of {', '.join(kinds['words'])}, got {text!r}")
    if kinds["list"] is not None and not (kinds["scalars"] & {int, float} and "," not in text):  # one number: itself
        value = parse_numbers(name, text, integer=kinds["list"] is int)
    elif int in kinds["scalars"] or float in kinds["scalars"]:
        value = parse_number(name, text, integer=float not in kinds["scalars"])
    else:
        return text
    check_value(name, annotation, value, shown=text)
    return value


def parameter_help(doc: str) -> dict[str, str]:
    """The docstring's ``Args:`` (or ``Arguments:``, ``Parameters:``) section as ``{parameter: its
    text}``, read by `docstring_parser`'s Google-style parser; ``a, b: text`` gives both, and a
    text that runs over several lines is one line here. A docstring the parser refuses gives no
    help ({}): a missing help line is what `tests/test_option_help.py` reports, not a crash."""
    import docstring_parser

    try:
        params = docstring_parser.google.parse(doc).params
    except docstring_parser.ParseError:
        return {}
    helps: dict[str, str] = {}
    for param in params:
        for name in param.arg_name.split(","):
            helps[name.strip()] = _plain(" ".join((param.description or "").split()))
    return helps


def _plain(text: str) -> str:
    """Docs-site cross-references (``[`name`][target]``) as plain ``name``, and ``$math$`` as ``math``, in a terminal."""
    text = re.sub(r"\[(`[^`]+`)\]\[[^\]]*\]", r"\1", text)
    return re.sub(r"\$([^$\n]+)\$", r"\1", text)


@dataclasses.dataclass(frozen=True)
class SignatureOptions:
    """The options of a registered function's keyword parameters ([`signature_options`][]):
    ``options`` ``{key: click decorator}`` in the signature's order, ``spelled`` ``{key: its
    option's name}``, and ``parse(given, **common)``, the given texts (``None``: not given, so
    not passed) as checked values."""

    options: dict
    spelled: dict
    parse: typing.Callable


def signature_options(name: str, fn, exclude=COMMON, where: str | None = None) -> SignatureOptions:
    """One option per keyword parameter of ``fn`` (but ``exclude``) of a type the command line can
    give, each without a default of its own, its help from the docstring's ``Args:``, and one per
    older flat key of its option groups (``--k``; with the key's help and default where the
    group's docstring has an ``Args:`` line for it); and the parser of their text
    ([`option_value`][], option groups, [`dynlab.registry.check_config`][]), whose errors begin
    with ``where`` (default ``analyze NAME``)."""
    from dynlab import registry
    from dynlab.option_groups import fold_legacy, group_parameters, legacy_keys, parse_group

    hints = typing.get_type_hints(fn, include_extras=True)
    own = {n: p for n, p in registry.config_keys(fn, exclude=exclude).items()
           if p.default is not p.empty and registry.parsable(hints.get(n, p.annotation))}
    groups, legacy = group_parameters(fn), legacy_keys(fn)
    helps = parameter_help(inspect.getdoc(fn) or "")
    names = {key: [*_spellings(hints.get(key, p.annotation)), flag(key)] for key, p in own.items()}
    annotations = {key: hints.get(key, p.annotation) for key, p in own.items()}
    options = {}
    for key, p in own.items():
        if key in groups:
            options[key] = click.option(*names[key], key, metavar="KEY=VALUE,...", default=None,
                                        help=f"{helps.get(key, '')} [default {p.default}]".strip())
        else:
            options[key] = _option(names[key], key, annotations[key], helps.get(key, ""), p.default)
    for key, (group_key, annotation) in legacy.items():
        if key not in exclude and key not in own:  # an older flat spelling of a group's key: --drive, --k
            names[key], annotations[key] = [flag(key)], annotation
            group, default = groups[group_key]
            documented = parameter_help(inspect.getdoc(group) or "").get(key)  # the group's Args: its own option
            if documented is not None:
                options[key] = _option(names[key], key, annotation, documented, getattr(default, key))
            else:
                kind = registry.describe(annotation)
                options[key] = click.option(flag(key), key, metavar="VALUE" if " " in kind else kind.upper(),
                                            default=None, help=f"the same as {flag(group_key)} {key}=VALUE")

    def parse(given: dict, **common) -> dict:
        values = {key: text if isinstance(text, bool) else option_value(names[key][0], annotations[key], text)
                  for key, text in given.items() if text is not None}
        values = fold_legacy(fn, {**values, **common}, where or f"analyze {name}")
        values = {key: parse_group(flag(key), groups[key][0], value, groups[key][1]) if key in groups else value
                  for key, value in values.items()}
        registry.check_config(where or f"analyze {name}", fn, values, exclude=("model", "runs", "progress"))
        return values

    return SignatureOptions(options, {key: spelled[0] for key, spelled in names.items()}, parse)


def _option(names: list[str], key: str, annotation, text: str, default):
    """The option of a parameter (or of a group's key) with no default of its own: booleans as
    ``--x/--no-x``, other values with a metavar of their kind; its help ``text`` and ``default``."""
    from dynlab import registry

    kinds = registry.value_kinds(annotation)
    if kinds["scalars"] == {bool}:
        return click.option(f"{names[0]}/--no-{names[0][2:]}", key, default=None, help=f"{text} (default: {default})".strip())
    kind = "comma-separated numbers" if kinds["list"] else registry.describe(annotation)
    metavar = "LIST" if kinds["list"] else "VALUE" if " " in kind else kind.upper()
    return click.option(*names, key, metavar=metavar, default=None, help=f"{text} [{kind}; default {_shown(default)}]".strip())


def generated_command(name: str) -> click.Command:
    """The ``dynlab analyze NAME`` command of a registered analysis ``fn(model, *, ...)``."""
    from dynlab import registry
    from dynlab.option_groups import legacy_keys

    entry = registry.get("analysis", name)
    fn = entry.obj
    accepts = registry.config_keys(fn, exclude=("model",))
    signature = signature_options(name, fn)
    legacy = legacy_keys(fn)
    task_default = accepts["task"].default if "task" in accepts else None
    doc = inspect.getdoc(fn) or entry.description
    quiet_summary = entry.summary is not None and "quiet" in inspect.signature(entry.summary).parameters

    def on_model(unit, checkpoint, task_name, seed, sets, out, plot, quiet, **given):
        from dynlab.analyses.protocol import TaskStream
        from dynlab.experiment import DEFAULT_TASK, initial_model
        from dynlab.scenarios.spec import analysis_options as resolve

        seed_v = None if seed is None else seed_option(seed)
        common = {"seed": seed_v} if seed_v is not None and "seed" in accepts else {}
        if task_name is not None and "task" in legacy:
            common["task"] = task_name  # --task NAME: the input protocol's task stream
        values = signature.parse(given, **common)
        # the task whose inputs drive the analysis: --task, else the protocol's task stream, else its default
        streamed = [key for key, value in values.items() if isinstance(value, TaskStream) and isinstance(value.task, str)]
        wanted = task_name or next((values[key].task for key in streamed), None) or task_default
        fresh_task = wanted if isinstance(wanted, str) and wanted != "train" else None
        exp, source = analysis_model(unit, checkpoint, fresh_task,
                                     list(sets) + ([] if checkpoint else [f"seed={seed_v or 0}"]))
        own_task = exp.config["task"].get("name", DEFAULT_TASK)
        for key in streamed:  # the model's own task, with its config (a checkpoint's, --set task.*)
            if values[key].task == own_task:
                values[key] = dataclasses.replace(values[key], task="train")
        if "task" in accepts and (task_name or task_default) == own_task:
            values["task"] = "train"
        elif task_name is not None and "task" in accepts:
            values["task"] = task_name
        options = resolve({"name": name, **values}, exp.task, own_initial=functools.partial(initial_model, exp))
        report(run_analysis(name, exp, source, checkpoint, out, plot, quiet, **options), quiet)

    def on_runs(run_dirs, roots, task_name, seed, out, plot, quiet, groups, **given):
        from dynlab.scenarios.spec import analysis_options as resolve

        values = signature.parse(given, **({} if seed is None else {"seed": seed_option(seed)}))
        if task_name is not None:
            values["task"] = task_name
        runs = run_directories(run_dirs, roots)
        if len(runs) < 2:
            raise ConfigError(f"{name} compares at least 2 run directories (RUN_DIR arguments or --runs DIR), "
                              f"got {len(runs)}")
        report(run_on_runs(name, runs, out, plot, quiet, groups=run_groups(runs, groups),
                           **resolve({"name": name, **values})), quiet)

    def report(ds, quiet):
        from dynlab.errors import NonFiniteResult

        if entry.summary is not None:
            click.echo(entry.summary(ds, quiet=quiet) if quiet_summary else entry.summary(ds))
        click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")
        bad = [v for v in entry.finite if v in ds and not bool(_finite(ds[v]))]
        if bad:
            raise NonFiniteResult(f"{', '.join(bad)} of the result {'holds' if len(bad) == 1 else 'hold'} NaN or inf "
                                  f"(the trajectory left the finite range); the dataset is kept in {ds.attrs['path']}")

    callback = on_runs if entry.takes == "runs" else on_model
    for option in reversed(list(signature.options.values())):
        callback = option(callback)
    if entry.takes == "runs":
        callback = click.option(
            "--group", "groups", multiple=True, metavar="NAME=DIR[,DIR...]",
            help="put these runs (or every run under a folder) in the group NAME; repeat for each group. The runs no "
                 "--group names are grouped by their unit (model.unit). Groups with several runs get their mean "
                 "distances and permutation tests against their replicates, as a study's cells do")(callback)
    common = runs_options if entry.takes == "runs" else analysis_options
    return click.command(name, help=_plain(doc.split("\n\n")[0]), short_help=entry.description)(common(callback))


def run_directories(given, roots) -> list[Path]:
    """The ``RUN_DIR`` arguments, then every run directory under each ``--runs`` folder
    ([`dynlab.store.runs_under`][]); each directory once."""
    from dynlab.store import runs_under

    runs = [Path(r) for r in given]
    for root in map(Path, roots):
        if not root.is_dir():
            raise ConfigError(f"--runs {str(root)!r} is not a directory")
        found = runs_under(root)
        if not found:
            raise ConfigError(f"--runs {str(root)!r} holds no run directory (a folder with config.toml and model.eqx)")
        runs += found
    unique = list(dict.fromkeys(r.resolve() for r in runs))
    return [Path(r) for r in unique] if len(unique) < len(runs) else runs


def run_groups(runs: list[Path], given) -> list[str]:
    """The group of each of ``runs``: the ``NAME`` of the ``--group NAME=DIR[,DIR...]`` that names
    it (a DIR that is a folder of runs names every run under it), else its unit (``model.unit``
    of its ``config.toml``). A ``--group`` of another form, naming a directory that is not among
    the runs, or putting a run in two groups, is a one-line [`ConfigError`][]."""
    from dynlab import store
    from dynlab.experiment import DEFAULT_UNIT

    where = {r.resolve(): i for i, r in enumerate(runs)}
    chosen: dict[int, str] = {}
    for text in given:
        group, _, dirs = text.partition("=")
        if not group.strip() or not dirs.strip():
            raise ConfigError(f"--group must be NAME=DIR[,DIR...] (a group's name and its runs), got {text!r}")
        for d in (p.strip() for p in dirs.split(",")):
            path = Path(d).resolve()
            if path in where:
                members = [where[path]]
            elif path.is_dir():
                members = [where[r.resolve()] for r in store.runs_under(path) if r.resolve() in where]
            else:
                members = []
            if not members:
                raise ConfigError(f"--group {group.strip()}: {d!r} is not one of the runs compared, nor a folder of them")
            for i in members:
                if chosen.get(i, group.strip()) != group.strip():
                    raise ConfigError(f"--group: the run {str(runs[i])!r} is in two groups, {chosen[i]!r} and "
                                      f"{group.strip()!r}")
                chosen[i] = group.strip()
    return [chosen.get(i) or str(store.read_config(r).get("model", {}).get("unit", DEFAULT_UNIT))
            for i, r in enumerate(runs)]


def _spellings(annotation) -> list[str]:
    """Other names of an option, declared with [`dynlab.config.Flag`][] (kept from before its command was generated)."""
    from dynlab.config import Flag

    if typing.get_origin(annotation) is not typing.Annotated:
        return []
    return [a.name for a in typing.get_args(annotation)[1:] if isinstance(a, Flag)]


def _shown(default) -> str:
    """A default as the option's text would spell it (lists comma-separated, long ones cut)."""
    if isinstance(default, (list, tuple)):
        items = [str(v) if isinstance(v, int) else f"{float(v):g}" for v in default]
        return ",".join(items) if len(items) <= 10 else f"{','.join(items[:3])},…,{items[-1]} ({len(items)} values)"
    return repr(default)


def _finite(variable) -> bool:
    import numpy as np

    return np.isfinite(np.asarray(variable.values, dtype=float)).all()
