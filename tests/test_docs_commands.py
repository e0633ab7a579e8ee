"""Every `dynlab` command in the documentation's pages parses as written, and every scenario it runs loads.

The README test runs README's commands; the docs pages hold about a hundred more, several of them
runs of tens of minutes, so they are not run here. Each is instead taken through the command line's
own parser (click: the command path, every option's name and type, required options), and a
``dynlab run`` / ``dynlab reproduce`` of a built-in scenario or paper is loaded with its ``--set``
and ``--preset`` as the command would (every key and value checked, nothing trained). A renamed
option, subcommand or scenario parameter on any page fails here.

The gallery's commands (``docs/gallery.py``, run by the documentation build) are checked the same way.

The how-to pages define plug-ins (an analysis, a unit, a rule, a task) in Python blocks and use them
in later commands, on the same page or on the plug-in package's page; such a subcommand exists only
once that code has run, so a subcommand that some page's Python code registers
(``register("analysis", "NAME", ...)``) is accepted unresolved, and nothing else is.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from dynlab.cli import main
from test_readme import readme_steps

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def _page_commands(page: Path) -> list[str]:
    return [s.text for s in readme_steps(page.read_text()) if s.kind == "command"]


PYTHON = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
REGISTERED = {m for p in PAGES for code in PYTHON.findall(p.read_text())
              for m in re.findall(r'register\(\s*"\w+",\s*"([\w-]+)"', code)}
"""The names the docs' own Python code registers (the how-to pages' plug-ins)."""


def parse(args: list[str], defined: frozenset[str] = frozenset()) -> click.Context | None:
    """``dynlab ARGS`` through click's parser down to the leaf command; its context, or ``None`` for
    ``--help`` and where the subcommand is one of ``defined`` (registered by the docs' own code)."""
    from dynlab.errors import ConfigError

    command, name, parent, rest = main, "dynlab", None, list(args)
    while True:
        try:
            ctx = command.make_context(name, rest, parent=parent)
        except click.exceptions.Exit:  # --help: parsed, printed, exit 0
            return None
        if not isinstance(command, click.Group):
            return ctx
        rest = [*ctx._protected_args, *ctx.args]
        try:
            name, command, rest = command.resolve_command(ctx, rest)
        except ConfigError:
            if rest and rest[0] in defined:
                return None
            raise
        parent = ctx


def test_the_docs_hold_commands_and_the_parser_rejects_a_renamed_option():
    assert sum(len(_page_commands(p)) for p in PAGES) > 80
    assert {"state-norm", "leaky-tanh", "noisy-bptt", "parity"} <= REGISTERED
    parse(shlex.split("train --model aru --task adding --out runs/aru"))
    with pytest.raises(click.exceptions.NoSuchOption):
        parse(shlex.split("train --modle aru"))
    from dynlab.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown command"):
        parse(shlex.split("analyse lyapunov"))


def _gallery():
    import importlib.util
    import sys

    spec_ = importlib.util.spec_from_file_location("dynlab_docs_gallery", DOCS / "gallery.py")
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module  # its dataclasses look their module up
    spec_.loader.exec_module(module)
    return module


def _gallery_commands() -> list[str]:
    return [c for entry in _gallery().ENTRIES for c in entry.commands]


def test_every_gallery_entry_that_reads_a_run_waits_for_the_training():
    """The gallery builds its entries in parallel, and only those it knows read a trained run wait for
    the training entry: every run directory an entry reads (a ``runs/…`` argument that is not its own
    ``--out``) is one the training writes, and that entry is known to wait."""
    gallery = _gallery()
    assert gallery.TRAINED == {"runs/aru", "runs/aru-s1", "runs/gru", "runs/sith"}
    waiting = set()
    for entry in gallery.ENTRIES:
        if entry.name == "training":
            continue
        own = set().union(*map(gallery._outputs, entry.commands))
        read = {w for c in entry.commands for w in shlex.split(c) if w.startswith("runs/") and w not in own}
        read = {w.split("/findings.nc")[0] for w in read}  # a scenario's own verdicts, plotted after it
        assert read - own <= gallery.TRAINED, f"{entry.name} reads {sorted(read - gallery.TRAINED)}, not trained first"
        if read - own:
            assert gallery._reads_training(entry), entry.name
            waiting.add(entry.name)
    assert {"clv", "dsa", "sta", "perturb"} <= waiting and "lyapunov" not in waiting


@pytest.mark.parametrize("page", [*PAGES, "gallery"], ids=lambda p: str(p) if p == "gallery" else str(p.relative_to(DOCS)))
def test_every_command_of_the_page_parses_and_its_scenarios_load(page, monkeypatch, tmp_path):
    from dynlab.scenarios import spec
    from dynlab.scenarios.papers import PAPERS

    commands = _gallery_commands() if page == "gallery" else _page_commands(page)
    monkeypatch.chdir(tmp_path)  # nothing a parse does may touch the checkout
    for command in commands:
        ctx = parse(shlex.split(command)[1:], frozenset(REGISTERED))
        if ctx is None or ctx.info_name not in ("run", "reproduce"):
            continue
        p = ctx.params
        sets, preset = tuple(p.get("sets") or ()), p.get("preset")
        target = p.get("scenario") or p.get("paper")
        if ctx.info_name == "reproduce":
            if target is None:  # --list
                continue
            assert target in PAPERS, f"{page}: {command}: unknown paper {target!r}"
            names = [n for n, path in spec.builtin_names().items() if f'paper = "{target}"' in path.read_text()]
        elif target in spec.builtin_names():
            names = [target]
        else:
            continue  # a file the page writes (its TOML block), not checked here
        for name in names:
            spec.load(name, preset=preset, sets=sets)
