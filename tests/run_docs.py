"""Run the documentation's commands as a reader would, page after page, and report each one.

    python tests/run_docs.py [--budget MINUTES] [PAGE ...]

The suite checks that every command on the docs pages *parses* (``test_docs_commands.py``) and
runs README's commands (``test_readme.py``); running all the pages' commands takes tens of
minutes, so this script does it on demand. The pages are taken in the site's navigation order
(or the PAGEs given, paths under ``docs/``), each part of the site (getting started, concepts,
how-to, papers) in a fresh directory of its own, as a reader following it would; each page's
fenced blocks in order:

- ```` ```bash ````: every ``dynlab …`` line is one command, run in this process (``-q`` added to
  ``train``/``run``/``reproduce``), timed. A comment line above it may say
  ``(quick: ARGS)`` — ARGS appended, as README's quick forms — or ``(not run: WHY)``; a command
  whose comment above states a time over the budget (``# 11.4 min …``, ``# ~35 min``) and gives
  no quick form is not run either, and counted as such: a page gives a reduced form of every
  long scenario, and that form is run. Other lines run in a shell, with this interpreter's ``bin`` first on ``PATH``
  (``mkdir``, ``cp``, ``pip install -e ./mypkg``: **run it in a scratch environment**, since a
  plug-in package gets installed into it), those ending in ``&`` (a Dask scheduler and its
  workers) in the background, stopped at the end; ``pip install … && dynlab …`` runs its
  ``dynlab`` part only (the environment is the install), and ``pytest`` not at all.
- a block with ``title="FILE"``, or a TOML block whose first line is ``# FILE.toml``: written to
  FILE (a plug-in's module, a scenario file); a ``.py`` file at the top level is then imported,
  which registers its plug-ins as adding it to the repository would (a package's files are left
  to the page's ``pip install``).
- an untitled ```` ```python ```` block: executed in one namespace per page. Interface sketches,
  fenced ```` ```{.python .sketch} ````, are not code to run.

Prints one line per step (status, seconds, command) and the commands that ran longer than the
budget without a stated time. Exit status 1 if any step failed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: the suite's helpers
from test_readme import shell_lines  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r'^```(\w+)(?:[ \t]+title="([^"]+)")?[^\n]*\n(.*?)^```', re.S | re.M)
QUICK = re.compile(r"\(quick: (.*?)\)")
NOT_RUN = re.compile(r"\(not run: (.*?)\)")
STATED = re.compile(r"(\d+(?:\.\d+)?)\s*min")


def nav_pages() -> list[Path]:
    """The pages in mkdocs.yml's navigation order."""
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:"):]
    return [DOCS / m for m in re.findall(r"([\w/-]+\.md)\s*$", nav, re.M) if (DOCS / m).is_file()]


def run_command(command: str, cwd: Path) -> tuple[int, str]:
    from dynlab.cli import main

    args = shlex.split(command)[1:]
    args += ["-q"] * (args[0] in {"train", "run", "reproduce"} and "--help" not in args)
    result = CliRunner().invoke(main, args)
    return result.exit_code, (result.stderr or result.output).strip()


def import_file(path: Path, cwd: Path) -> bool:
    """Import a module written at the top of ``cwd`` from the docs (registers its plug-ins, as adding
    it to the repository would); a file deeper down (a package's) is left to its installation.
    ``cwd`` is on ``sys.path`` only for the import: processes started later (a sweep's Dask
    workers) inherit ``sys.path``, and ``cwd/mypkg/`` would shadow the installed package there."""
    rel = path.relative_to(cwd)
    if len(rel.parts) > 1:
        return False
    saved = list(sys.path)
    sys.path.insert(0, str(cwd))
    try:
        importlib.invalidate_caches()
        importlib.import_module(rel.stem)
    finally:
        sys.path[:] = saved
    return True


def section(page: Path) -> str:
    """A page's part of the site (``how-to``, ``papers``, ...; the top-level pages are ``home``): each
    part runs in its own directory. Its pages build on each other (the how-to pages on the files of
    the earlier ones), the parts do not (the same run directory is trained on two of them)."""
    rel = page.relative_to(DOCS)
    return rel.parts[0] if len(rel.parts) > 1 else "home"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", help="pages under docs/ (default: all, in navigation order)")
    parser.add_argument("--budget", type=float, default=5.0, help="minutes: longer stated times are not run")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args(argv)
    pages = [DOCS / p for p in args.pages] or nav_pages()
    base = Path(tempfile.mkdtemp(prefix="dynlab-docs-run-"))
    # shell lines run with this interpreter's environment first on PATH (its pip, its dask)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    background: list[subprocess.Popen] = []
    failed, over, not_run = [], [], []
    print(f"working in {base}/<part of the site>")
    try:
        for page in pages:
            name = page.relative_to(DOCS).as_posix()
            cwd = base / section(page)
            cwd.mkdir(exist_ok=True)
            os.chdir(cwd)
            namespace = {"__name__": f"docs:{name}"}
            for lang, title, body in FENCE.findall(page.read_text()):
                first = body.splitlines()[0] if body else ""
                if lang == "toml" and not title and (m := re.match(r"# ([\w.-]+\.toml)$", first)):
                    title = m.group(1)
                if title:
                    path = cwd / title
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(body)
                    status = "wrote"
                    if path.suffix == ".py":
                        try:
                            status = "wrote and imported" if import_file(path, cwd) else status
                        except Exception as error:  # noqa: BLE001 - a report, not a handler
                            status = f"FAILED ({type(error).__name__}: {error})"
                            failed.append(f"{name}: {title}")
                    print(f"{name}: {status} {title}")
                elif lang == "python":
                    start = time.time()
                    try:
                        with contextlib.redirect_stdout(io.StringIO()):
                            exec(compile(body, f"{name} (python)", "exec"), namespace)
                        print(f"{name}: ok {time.time() - start:6.1f} s  python block ({len(body.splitlines())} lines)")
                    except ModuleNotFoundError as error:
                        print(f"{name}: not run  python block: needs {error.name} (not a dependency)")
                        not_run.append(f"{name}: python block needing {error.name}")
                    except Exception as error:  # noqa: BLE001
                        print(f"{name}: FAILED python block: {type(error).__name__}: {error}")
                        failed.append(f"{name}: python block")
                elif lang == "bash":
                    for line, comment in shell_lines(body):
                        # `pip install … && dynlab …`: the install is the environment this runs in
                        command = line.rpartition("&&")[2].strip()
                        if not command.startswith("dynlab "):
                            if command.startswith("pytest"):  # the suite itself
                                print(f"{name}: not run (the test suite)  {line}")
                            elif command.endswith("&"):
                                background.append(subprocess.Popen(command[:-1], shell=True, cwd=cwd, env=env,
                                                                   stdout=subprocess.DEVNULL,
                                                                   stderr=subprocess.DEVNULL))
                                time.sleep(5)
                                print(f"{name}: started  {command}")
                            else:
                                start = time.time()
                                done = subprocess.run(line, shell=True, cwd=cwd, env=env, capture_output=True, text=True)
                                ok = "ok" if done.returncode == 0 else f"EXIT {done.returncode}"
                                print(f"{name}: {ok} {time.time() - start:6.1f} s  {line}", flush=True)
                                if done.returncode != 0:
                                    print("    " + "\n    ".join((done.stderr or done.stdout).strip().splitlines()[-3:]))
                                    failed.append(f"{name}: {line}")
                            continue
                        why, quick = NOT_RUN.search(comment), QUICK.search(comment)
                        stated = [float(x) for x in STATED.findall(comment)]
                        if why or (stated and max(stated) > args.budget and not quick):
                            reason = why.group(1) if why else f"stated {max(stated):g} min"
                            print(f"{name}: not run ({reason})  {command}")
                            not_run.append(f"{name}: {command} ({reason})")
                            continue
                        if quick:
                            command += " " + quick.group(1)
                        start = time.time()
                        code, output = run_command(command, cwd)
                        took = time.time() - start
                        ok = "ok" if code == 0 else f"EXIT {code}"
                        print(f"{name}: {ok} {took:6.1f} s  {command}", flush=True)
                        if code != 0:
                            print("    " + "\n    ".join(output.splitlines()[-3:]))
                            failed.append(f"{name}: {command}")
                        if took > 60 * args.budget and not stated:
                            over.append(f"{name}: {command} ({took / 60:.1f} min, no time stated)")
    finally:
        for process in background:
            process.terminate()
    print(f"\n{len(failed)} failed, {len(not_run)} not run, {len(over)} over {args.budget:g} min without a stated time")
    for line in failed:
        print("failed:", line)
    for line in over:
        print("over:", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
