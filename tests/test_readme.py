"""README's commands run as written, in order, from an empty directory, and each exits 0.

README is read, not copied: its fenced blocks are taken in order.

- ```` ```bash ````: every `dynlab …` line (with `\\` continuations) is one command, run through
  the command line's own entry point in the directory. The quick start's install prefix
  (`pip install … &&`) is the environment this test runs in, and `pytest` is this suite: both
  are skipped. A command whose comment line above gives a quick form, `(quick: ARGS)`, runs
  with ARGS appended, as README offers a reader for a faster look.
- ```` ```toml ```` whose first line is `# NAME.toml`: written to NAME.toml, as README says to
  save it; later commands read it.
- ```` ```python ````: executed in the directory.

So a command that depends on a file README never creates, a renamed option or a Python example
that no longer matches the API fails here. The quick start's job is also checked against its
own numbers: intervals of non-zero width, and a printed reading that matches them.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import xarray as xr
from cli_runner import invoke
from test_lyapunov_model import check_reading

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
QUICK_START = "dynlab analyze lyapunov --model aru"
QUICK = re.compile(r"\(quick: (.*)\)\s*$")


@dataclass(frozen=True)
class Step:
    kind: str  # "command", "file" or "python"
    text: str
    name: str = ""


def shell_lines(block: str):
    """``(line, comment above it)`` for each logical line of a bash block: ``\\`` continuations
    joined, a trailing ``  # comment`` cut off."""
    line, comment = "", ""
    for raw in block.splitlines():
        if raw.lstrip().startswith("#"):
            comment = raw
            continue
        line += raw.rstrip()
        if line.endswith("\\"):
            line = line[:-1] + " "
            continue
        if line.strip():
            yield line.partition("  #")[0].strip(), comment
        line, comment = "", ""


def _commands(block: str) -> list[Step]:
    steps = []
    for line, comment in shell_lines(block):
        command = line.rpartition("&&")[2].strip()
        if command.startswith("dynlab "):
            quick = QUICK.search(comment)
            steps.append(Step("command", command + (" " + quick.group(1) if quick else "")))
    return steps


def readme_steps(text: str) -> list[Step]:
    """The steps of README in order (see the module docstring)."""
    steps = []
    for lang, body in FENCE.findall(text):
        if lang == "bash":
            steps += _commands(body)
        elif lang == "toml" and (name := re.match(r"# ([\w.-]+\.toml)\n", body)):
            steps.append(Step("file", body, name.group(1)))
        elif lang == "python":
            steps.append(Step("python", body))
    return steps


def test_readme_parsing_finds_the_quick_start_and_the_tour():
    steps = readme_steps((ROOT / "README.md").read_text())
    commands = [s.text for s in steps if s.kind == "command"]
    assert commands[0] == QUICK_START
    assert not any(c.startswith(("pip", "pytest")) for c in commands)
    assert any(s.kind == "file" for s in steps) and any(s.kind == "python" for s in steps)
    assert len(commands) >= 8


def test_readme_commands_run_in_order_from_an_empty_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    for step in readme_steps((ROOT / "README.md").read_text()):
        if step.kind == "file":
            (tmp_path / step.name).write_text(step.text)
        elif step.kind == "python":
            with contextlib.redirect_stdout(None):
                exec(compile(step.text, "README.md (python)", "exec"), {"__name__": "__readme__"})
        else:
            result = invoke(shlex.split(step.text)[1:] + ["-q"] * _takes_quiet(step.text), tmp_path)
            assert result.exit_code == 0, f"{step.text}\nexit {result.exit_code}:\n{result.output[-2000:]}"
            if step.text == QUICK_START:  # issue 23: its intervals have width > 0 and its reading matches them
                (run,) = (tmp_path / "runs").iterdir()
                check_reading(result.output, xr.load_dataset(run / "lyapunov.nc"))


def _takes_quiet(command: str) -> bool:
    """Whether a command has -q (no progress bar): train, run, reproduce."""
    return shlex.split(command)[1] in {"train", "run", "reproduce"}


def test_readme_counts_and_names_the_units_dynlab_list_units_lists():
    """README's "**15 units**" is the number `dynlab list units` prints, and its bullet names each by
    the name that command gives (issue 48, item 8)."""
    from dynlab import registry

    text = (ROOT / "README.md").read_text()
    bullet = re.search(r"^- \*\*(\d+) units\*\*(.*?)(?=^- )", text, re.S | re.M)
    assert bullet, "README lists its units in a bullet '- **N units** ...'"
    units = set(registry.names("unit"))
    assert int(bullet.group(1)) == len(units)
    assert set(re.findall(r"`([\w-]+)`", bullet.group(2))) == units
