"""``-q`` leaves only a command's results (issue 37): no spinner, no progress bar, no line saying
what is about to run; and ``dynlab list`` lists every kind."""

from __future__ import annotations

import contextlib

import click
import pytest

import dynlab
from cli_runner import invoke
from dynlab.cli import main
from dynlab.cli.main import PLURALS

ARU_ONLY = {"adaptation", "controller", "gain-scaling", "fractional-order", "jacobian-grid", "lyapunov-grid"}
"""Analyses that need an ARU (the others run on a 4-unit RNN, the fastest model to build)."""


class Reached(Exception):
    """Raised where a command's work would start: what it printed up to there is its preamble."""


def _analyze_commands() -> list[str]:
    group = main.get_command(click.Context(main), "analyze")
    return group.list_commands(click.Context(group))


@pytest.fixture
def work_starts(monkeypatch):
    """Replace the spinner and the progress bar of every command with a stub that records whether
    it was asked to be quiet, then stops the command (so that no analysis is computed)."""
    quiet_flags: list[bool] = []
    monkeypatch.setenv("DYNLAB_DEBUG", "1")  # the stub's exception reaches the test, not a traceback file

    @contextlib.contextmanager
    def stub(quiet, *args, **kwargs):
        quiet_flags.append(bool(quiet))
        raise Reached
        yield

    import importlib

    for module, name in (("analysis", "busy"), ("compare", "progress_bar")):
        monkeypatch.setattr(importlib.import_module(f"dynlab.cli.{module}"), name, stub)
    return quiet_flags


def _args(name: str, tmp_path) -> list[str]:
    if name == "dsa":  # two run directories as far as the command reads them before its work (their units, for the groups)
        for run in ("a", "b"):
            (tmp_path / run).mkdir(exist_ok=True)
            (tmp_path / run / "config.toml").write_text('[model]\nunit = "rnn"\n')
        return ["analyze", "dsa", str(tmp_path / "a"), str(tmp_path / "b")]
    if name == "pc-bp":
        return ["analyze", name, "--task", "toy", "--widths", "4", "--steps", "2"]
    if name == "pc-bptt":
        return ["analyze", name, "--task", "adding", "--widths", "4", "--lengths", "2", "--steps", "2"]
    model = "aru" if name in ARU_ONLY else "rnn"
    sets = [] if model == "aru" else ["--set", "model.hidden=4"]
    return ["analyze", name, "--model", model, *sets, "--out", str(tmp_path / f"{name}.nc")]


def test_every_analyze_command_says_nothing_before_its_result_under_q(work_starts, tmp_path):
    """Each analyze command, with -q, reaches its work having printed nothing and with its
    spinner or bar told to be quiet; without -q the same command announces what it runs (so the
    check can fail)."""
    names = _analyze_commands()
    assert {"lyapunov", "fixed-points", "dsa", "pc-bp", "spectra", "trw", "sta"} <= set(names)
    for name in names:
        args = _args(name, tmp_path)
        work_starts.clear()
        quiet = invoke([*args, "-q"], tmp_path)
        assert work_starts == [True] and isinstance(quiet.exception, Reached), (name, quiet.output)
        assert quiet.output == "", (name, quiet.output)  # stdout and stderr
        work_starts.clear()
        loud = invoke(args, tmp_path)
        assert work_starts == [False] and loud.stdout.strip(), (name, loud.output)


def test_lyapunov_under_q_prints_its_results_only(tmp_path):
    """The table, its summary line and the reading line, the dataset and the figure; not the
    glossary of the table's columns (printed without -q)."""
    args = ["analyze", "lyapunov", "--model", "rnn", "--set", "model.hidden=4", "--steps", "120", "--burn-in", "20",
            "--k", "1", "--realisations", "2", "--drive", "0.5"]  # k = 1: two exponents of 4 orthogonal modes are unresolved
    quiet = invoke([*args, "--out", str(tmp_path / "q.nc"), "-q"], tmp_path)
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""
    assert "λ1 = " in quiet.stdout and "dataset: " in quiet.stdout and "largest " in quiet.stdout
    assert "within-run SE: standard error" not in quiet.stdout
    loud = invoke([*args, "--out", str(tmp_path / "l.nc")], tmp_path)
    assert "within-run SE: standard error" in loud.stdout and "lyapunov of a freshly initialised model" in loud.stdout


def test_list_without_kind_lists_every_kind():
    """`dynlab list` has one heading per kind, losses and models included, each with its entries."""
    from click.testing import CliRunner

    out = CliRunner().invoke(main, ["list"]).output
    headings = [line[:-1] for line in out.splitlines() if not line.startswith(" ")]
    assert headings == list(PLURALS)
    for plural, kind in PLURALS.items():
        section = out.split(f"{plural}:\n", 1)[1]
        first = dynlab.names(kind)[0]
        assert section.startswith(f"  {first} "), (plural, section[:80])
