"""The ``dynlab`` command line: the top-level group, its error handling and the ``analyze`` group.

Every user mistake is one line on stderr and exit status 2 (no traceback); a diverged training
run is one line and exit status 1, with its last good checkpoint and metrics kept on disk. The
commands live beside this module, one concern per file, and only import downwards (this module,
[`dynlab.cli.options`][], [`dynlab.cli.analysis`][]); [`dynlab.cli`][] assembles them."""

from __future__ import annotations

import contextlib
import os
import sys

import click

from dynlab.errors import (ConfigError, DivergenceError, DynlabError, Interrupted, NonFiniteResult, exhausted,
                           first_line, unusable_path)


PLURALS = {"units": "unit", "rules": "rule", "tasks": "task", "analyses": "analysis", "scenarios": "scenario",
           "programs": "program", "losses": "loss", "models": "model", "formats": "format", "transfers": "transfer"}


class _CommandGroup(click.Group):
    """A command group whose unknown-command message lists the valid commands, and whose ``lazy``
    commands (name -> the function that makes it) are made when first looked up, so that
    ``dynlab --help`` imports no analysis."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = {}

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx, name):
        if name in self.lazy and name not in self.commands:
            self.add_command(self.lazy[name](), name)
        return super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        name = args[0] if args else None
        if name is not None and not name.startswith("-") and self.get_command(ctx, name) is None:
            valid = ", ".join(self.list_commands(ctx))
            raise ConfigError(f"unknown command {ctx.command_path} {name!r}; valid: {valid}")
        return super().resolve_command(ctx, args)


class _RegistryGroup(_CommandGroup):
    """A command group that also has one command per registered entry of ``kind`` that ``generates``
    accepts, made by ``make`` at each lookup (so a plug-in registered later, or again, is what runs):
    ``analyze``, ``transfer``."""

    kind: str = ""

    def generates(self, entry) -> bool:
        """Whether the registered ``entry`` gets a command."""
        return True

    def make(self, name: str) -> click.Command:
        """The generated command of the registered entry ``name``."""
        raise NotImplementedError

    def list_commands(self, ctx):
        from dynlab import registry

        generated = {e.name for e in registry.entries(self.kind) if self.generates(e)}
        return sorted({*super().list_commands(ctx), *generated})

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None:
            return command
        from dynlab import registry

        if name not in registry.names(self.kind) or not self.generates(registry.get(self.kind, name)):
            return None
        return self.make(name)


class _Group(_CommandGroup):
    """Turns every error into one line on stderr and a meaningful exit status.

    **Enforces** "no command ends in a traceback": user mistakes ([`DynlabError`][], click's
    usage errors) exit 2, divergence and non-finite results exit 1 with the data kept, Ctrl-C
    exits 130, and anything unexpected is one line with the traceback saved to a file.
    """

    def main(self, args=None, prog_name=None, **extra):
        import warnings

        shown = warnings.showwarning
        warnings.showwarning = _one_line_warning
        try:
            result = super().main(args=args, prog_name=prog_name or "dynlab", standalone_mode=False, **extra)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.Abort as e:  # click's form of Ctrl-C; an Interrupted says where it stopped
            click.echo(f"aborted {e.__cause__}" if isinstance(e.__cause__, Interrupted) else "aborted", err=True)
            sys.exit(130)
        except click.ClickException as e:
            hint = f" (see '{e.ctx.command_path} --help')" if getattr(e, "ctx", None) else ""
            click.echo(f"error: {e.format_message()}{hint}", err=True)
            sys.exit(2)
        except DynlabError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except DivergenceError as e:
            click.echo(f"diverged: {e}", err=True)
            sys.exit(1)
        except NonFiniteResult as e:
            click.echo(f"non-finite result: {e}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except (MemoryError, OSError, RuntimeError) as e:
            message = exhausted(e) if not isinstance(e, OSError) else unusable_path(e)
            if message is None:
                _internal_error(e)
            click.echo(f"error: {message}", err=True)
            sys.exit(2)
        except Exception as e:  # a bug, not a user mistake: still one line, the traceback in a file
            message = exhausted(e)  # XLA reports some failed allocations as a ValueError
            if message is None:
                _internal_error(e)
            click.echo(f"error: {message}", err=True)
            sys.exit(2)
        finally:
            warnings.showwarning = shown
        sys.exit(result if isinstance(result, int) else 0)


def _internal_error(e: BaseException):
    """A bug, not a user mistake: one line, exit status 1, the traceback saved to a file."""
    if os.environ.get("DYNLAB_DEBUG"):
        raise e
    click.echo(f"internal error: {type(e).__name__}: {first_line(e)} "
               f"(traceback in {_save_traceback()}; DYNLAB_DEBUG=1 shows it here)", err=True)
    sys.exit(1)


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """How a warning reaches the terminal during a command: ``warning: MESSAGE`` on one line of
    stderr (the message's whitespace collapsed), not Python's two lines of file, line and source."""
    click.echo(f"warning: {' '.join(str(message).split())}", err=True)


def _save_traceback() -> str:
    """Write the current exception's traceback to a temporary file; return its path."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="dynlab-error-", suffix=".txt", delete=False) as f:
        f.write(traceback.format_exc())
    return f.name


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="dynlab")
def main():
    """dynlab: recurrent units x learning rules x tasks x dynamical analyses, in JAX.

    \b
    Examples:
      dynlab list units
      dynlab train --model aru --task adding --steps 1500
      dynlab train --model rnn --task recall --set model.hidden=128 --set train.lr=1e-3
    """


def console() -> None:
    """The installed ``dynlab`` command: [`main`][] in this process, which ends with it.

    After Ctrl-C (exit status 130) the process ends at once (``os._exit``), its output flushed,
    without the interpreter's teardown: that teardown frees XLA's runtime while a computation the
    interrupt left behind may still be using it, and it segfaulted (exit 139 in a shell, after
    "aborted") 7 times in 38 when ``dynlab analyze lyapunov --model aru`` was interrupted at random
    moments, against 0 in 28 through this function (``benchmarks/interrupt.py``).
    Whatever a command keeps is written, and its Dask cluster closed, before the interrupt reaches
    here; the teardown had nothing left to finish. In-process callers (tests, notebooks) call
    [`main`][] and get ``SystemExit`` as before."""
    try:
        main()
    except SystemExit as e:
        if e.code == 130:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said
                    stream.flush()
            os._exit(130)
        raise


@main.command("list")
@click.argument("kind", required=False)
def list_cmd(kind):
    """List registered plug-ins with one-line descriptions.

    **Enforces** that without KIND every kind is listed, under its plural as a heading.

    KIND is one of: units, rules, tasks, analyses, scenarios, programs, losses, models, formats, transfers
    (default: all).
    """
    import dynlab
    from dynlab import registry

    kinds = list(PLURALS.values()) if kind is None else [PLURALS.get(kind, kind)]
    for k in kinds:
        if k not in dynlab.KINDS:
            raise ConfigError(f"unknown kind {kind!r}; valid: {', '.join(PLURALS)}")
        entries = registry.entries(k)
        if kind is None:
            click.echo(f"{next(p for p, s in PLURALS.items() if s == k)}:")
        width = max((len(e.name) for e in entries), default=0) + 2
        for e in entries:
            click.echo(f"  {e.name:<{width}}{e.description}")
        if not entries:
            click.echo("  (none yet)")


