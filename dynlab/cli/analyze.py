r"""``dynlab analyze NAME``: every registered analysis is a command.

Analyses with a hand-written command (their own options, a printed summary) register it on
[`analyze`][]; every other registered analysis of a model, a plug-in's included, gets a command
generated from its typed signature ([`generated_command`][]): one option per keyword
parameter (``n_values`` -> ``--n-values``), parsed by the one number parser and validated against
the signature, the common options of [`dynlab.cli.options.analysis_options`][], its docstring
as ``--help``, and its registered figure and summary. Nothing is imported until a command is
looked up, so ``dynlab --help`` stays fast.
"""

from __future__ import annotations

import inspect
import re
import typing

import click

from dynlab.cli.analysis import analysis_model, run_analysis
from dynlab.cli.main import _CommandGroup
from dynlab.cli.options import analysis_options, int_option, seed_option

COMMON = ("model", "steps", "seed", "x64", "task")
"""Parameters filled from the common options (``--model/--checkpoint``, ``--steps``, ``--seed``,
``--x64``, ``--task``), not given options of their own."""


class _AnalyzeGroup(_CommandGroup):
    """The ``analyze`` group: hand-written commands first, then one generated per registered analysis."""

    def list_commands(self, ctx):
        from dynlab import registry

        generated = [e.name for e in registry.entries("analysis") if _analyses_a_model(e.obj)]
        return sorted(set(super().list_commands(ctx)) | set(generated))

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None:
            return command
        from dynlab import registry

        if name in registry.names("analysis") and _analyses_a_model(registry.get("analysis", name).obj):
            return generated_command(name)
        return None


@click.group(cls=_AnalyzeGroup)
def analyze():
    """Run an analysis on a fresh or trained model; write a labelled netCDF dataset and a figure."""


def _analyses_a_model(fn) -> bool:
    parameters = list(inspect.signature(fn).parameters)
    return bool(parameters) and parameters[0] == "model"


def _base(annotation):
    """``X | None`` -> ``X``; ``Annotated[X, ...]`` -> ``X``."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType")):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = options[0] if len(options) == 1 else annotation
    return annotation


def _parse(name: str, annotation, text: str):
    """A command-line string as the parameter's type (numbers through the one number parser)."""
    from dynlab.config import parse_number, parse_numbers

    base = _base(annotation)
    origin = typing.get_origin(base)
    if base is int:
        return parse_number(name, text, integer=True)
    if base is float:
        return parse_number(name, text)
    if origin in (list, tuple) or base in (list, tuple):
        items = typing.get_args(base)
        return parse_numbers(name, text, integer=bool(items) and items[0] is int)
    return text


def generated_command(name: str) -> click.Command:
    """The ``dynlab analyze NAME`` command of a registered analysis ``fn(model, *, ...)``."""
    from dynlab import registry

    entry = registry.get("analysis", name)
    fn = entry.obj
    hints = typing.get_type_hints(fn, include_extras=True)
    own = {n: p for n, p in registry.config_keys(fn, exclude=COMMON).items() if p.default is not p.empty}
    accepts = set(inspect.signature(fn).parameters)

    def callback(unit, checkpoint, task_name, steps, seed, sets, out, plot, x64, quiet, **given):
        seed_v = seed_option(seed)
        options = {}
        for key, value in given.items():
            if value is None or value is False:
                continue
            flag = "--" + key.replace("_", "-")
            options[key] = True if value is True else _parse(flag, hints.get(key, own[key].annotation), value)
        registry.check_config(f"analyze {name}", fn, options, exclude=COMMON)
        exp, task, source = analysis_model(unit, checkpoint, task_name,
                                           list(sets) + ([] if checkpoint else [f"seed={seed_v}"]))
        common = {"steps": int_option("--steps", steps, minimum=1), "seed": seed_v, "x64": x64, "task": task}
        options.update({k: v for k, v in common.items() if k in accepts})
        ds = run_analysis(name, exp, source, checkpoint, out, plot, quiet, **options)
        if entry.summary is not None:
            click.echo(entry.summary(ds))
        click.echo(f"dataset: {ds.attrs['path']}\nfigure:  {ds.attrs['figure']}")

    for key, p in reversed(own.items()):
        annotation = hints.get(key, p.annotation)
        flag = "--" + key.replace("_", "-")
        if _base(annotation) is bool:
            callback = click.option(flag, key, is_flag=True, default=None, help=f"(default: {p.default})")(callback)
        else:
            kind = registry.describe(annotation)
            callback = click.option(flag, key, metavar="VALUE" if " " in kind else kind.upper(), default=None,
                                    help=f"{kind}; default {p.default!r}")(callback)
    # the docstring's cross-references ([`name`][target], for the docs site) read as plain `name` in a terminal
    doc = re.sub(r"\[(`[^`]+`)\]\[[^\]]*\]", r"\1", inspect.getdoc(fn) or entry.description)
    return click.command(name, help=doc, short_help=entry.description)(analysis_options(callback))
