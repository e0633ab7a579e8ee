"""The command line as a user runs it: exit statuses, one-line errors, nothing lost."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dynlab.cli import main
from cli_runner import invoke, one_line_error


TINY = ["--set", "model.hidden=4", "--set", "task.length=6", "--set", "train.batch_size=4",
        "--set", "train.eval_size=8", "-q"]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["train", "--model", "nope"], ["unknown unit 'nope'", "aru", "rnn-gamma"]),
        (["train", "--task", "nope"], ["unknown task 'nope'", "adding", "recall"]),
        (["train", "--rule", "nope"], ["unknown rule 'nope'", "bptt"]),
        (["train", "--set", "model.hidden"], ["malformed --set"]),
        (["train", "--set", "model.hidden=[1,"], ["cannot parse value"]),
        (["train", "--set", "model.hiden=3"], ["unknown config key model.hiden", "hidden", "n_g"]),
        (["train", "--set", "train.stepz=3"], ["unknown config key train.stepz", "steps"]),
        (["train", "--set", "bogus.x=3"], ["unknown config section", "model"]),
        (["train", "--set", "model.hidden=0"], ["hidden must be a positive integer, got 0"]),
        (["train", "--steps", "-5"], ["train.steps must be a positive integer, got -5"]),
        (["train", "--steps", "ten"], ["train.steps must be int, got 'ten'"]),
        (["train", "--set", "train.optimizer=adagrad"], ["train.optimizer must be one of 'adam'"]),
        (["train", "--resume", "no-such-run"], ["run directory 'no-such-run' does not exist"]),
        (["train", "--bogus"], ["No such option '--bogus'"]),
        (["list", "bogus"], ["unknown kind 'bogus'"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, fragments, tmp_path):
    one_line_error(invoke(args, tmp_path), *fragments)
    assert not (tmp_path / "runs").exists()  # nothing was created for a rejected command


def test_train_writes_run_and_resume(tmp_path):
    res = invoke(["train", "--model", "aru", "--steps", "20", "--out", "r", "--set", "model.n_g=2", *TINY], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    run = tmp_path / "r"
    for name in ("config.toml", "model.eqx", "checkpoint.eqx", "metrics.nc", "learning_curve.png"):
        assert (run / name).is_file(), name
    assert "held-out mse" in res.output
    again = invoke(["train", "--out", "r", *TINY], tmp_path)
    one_line_error(again, "already holds a run")
    more = invoke(["train", "--resume", "r", "--steps", "30", "-q"], tmp_path)
    assert more.exit_code == 0 and "30 steps" in more.output, more.output + more.stderr
    # a resumed run whose config now builds another structure is refused
    mism = invoke(["train", "--resume", "r", "--steps", "40", "--set", "model.hidden=5", "-q"], tmp_path)
    one_line_error(mism, "does not match")
    (run / "checkpoint.eqx").write_bytes(b"garbage")
    one_line_error(invoke(["train", "--resume", "r", "--steps", "40", "-q"], tmp_path), "corrupt")


def test_divergence_exit_1_keeps_checkpoint(tmp_path):
    res = invoke(["train", "--model", "rnn", "--out", "d", "--steps", "100", *TINY,
                  "--set", "model.activation=relu", "--set", "train.optimizer=sgd",
                  "--set", "train.lr=1e4", "--set", "train.clip=0"], tmp_path)
    assert res.exit_code == 1 and "diverged" in res.stderr and "Traceback" not in res.stderr
    assert (tmp_path / "d" / "checkpoint.eqx").is_file() and (tmp_path / "d" / "metrics.nc").is_file()


def test_list_and_help():
    res = CliRunner().invoke(main, ["list"])
    assert res.exit_code == 0 and "aru" in res.output and "adding" in res.output and "bptt" in res.output
    for cmd in (["--help"], ["train", "--help"], ["list", "--help"]):
        r = CliRunner().invoke(main, cmd)
        assert r.exit_code == 0 and "Usage" in r.output


FRESH_PROCESS = """
import importlib.util as u, os, runpy, sys
import dynlab, dynlab.rules, dynlab.analyses, dynlab.scenarios
print("outside dynlab:", [m for m in ("rules", "analyses", "scenarios") if u.find_spec(m) is not None], flush=True)


def console(args):  # python -m dynlab.cli ARGS
    sys.argv = ["dynlab", *args]
    runpy.run_module("dynlab.cli", run_name="__main__", alter_sys=True)


for i, args in enumerate(BAD_NUMBERS):  # each ends in SystemExit, caught; its stderr at the descriptor, to a file
    saved, err = os.dup(2), os.open(f"bad{i}.stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(err, 2)
    try:
        console(args)
    except SystemExit as e:
        status = e.code
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(err)
    print("bad", i, "exit", status, flush=True)
console(["train", "--model", "gru2"])  # ends the process: its exit status and stderr are the process's
"""
BAD_NUMBERS = (["analyze", "lyapunov", "--reortho-every", "0"], ["train", "--seed", "99999999999999999999"])


@pytest.fixture(scope="module")
def fresh_process(tmp_path_factory):
    """One real process outside the checkout (an installed dynlab, no PYTHONPATH) for the checks
    below: it lists the subpackages importable outside ``dynlab``, then runs ``python -m
    dynlab.cli``'s code for each of [`BAD_NUMBERS`][] (catching the ``SystemExit`` each ends in)
    and last for ``dynlab train --model gru2``, which ends the process. One process, not four: a
    start imports JAX and dynlab, and costs more than all four commands."""
    cwd = tmp_path_factory.mktemp("outside")
    proc = subprocess.run([sys.executable, "-c", f"BAD_NUMBERS = {BAD_NUMBERS!r}\n{FRESH_PROCESS}"],
                          capture_output=True, text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": ""})
    return proc, cwd


def test_real_process_no_traceback(fresh_process):
    """One check through a real subprocess (console entry point semantics)."""
    proc, _ = fresh_process
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_real_process_bad_numbers_no_traceback(fresh_process):
    """The console entry point itself (not the in-process runner), on bad numbers: exit status 2
    and one line on stderr, no traceback (moved here from test_hostile_inputs.py, whose own
    process it was, to the one process above)."""
    proc, cwd = fresh_process
    for i, args in enumerate(BAD_NUMBERS):
        assert f"bad {i} exit 2" in proc.stdout.splitlines(), (args, proc.stdout, proc.stderr)
        err = (cwd / f"bad{i}.stderr").read_text()
        assert err.count("\n") == 1 and "Traceback" not in err, (args, err)


def test_installed_namespace_only(fresh_process):
    """rules/analyses/scenarios are importable only inside dynlab (checked outside the repo)."""
    proc, _ = fresh_process
    assert "outside dynlab: []" in proc.stdout.splitlines(), (proc.stdout, proc.stderr)


@pytest.mark.parametrize("code, ends", [(130, True), (2, False), (0, False)])
def test_the_installed_command_ends_at_once_after_ctrl_c_and_only_then(monkeypatch, capsys, code, ends):
    """Issue 48: after Ctrl-C the interpreter's teardown freed XLA's runtime under a computation the
    interrupt left behind (a segfault after "aborted", 7 times in 38 at random moments of
    `dynlab analyze lyapunov --model aru`; 0 in 28 through `console`: benchmarks/interrupt.py). The
    console script ends the process itself for exit 130, its output flushed first; every other
    exit is Python's own."""
    import importlib

    cli = importlib.import_module("dynlab.cli.main")  # the module (dynlab.cli.main is also the group's name)

    def interrupted():
        print("aborted", file=sys.stderr, end="")
        raise SystemExit(code)

    class Ended(BaseException):
        """Where the process would have ended."""

    ended = []

    def end(status):  # the process would end here: nothing after it runs
        ended.append((status, capsys.readouterr().err))
        raise Ended

    monkeypatch.setattr(cli, "main", interrupted)
    monkeypatch.setattr(cli.os, "_exit", end)
    if ends:
        with pytest.raises(Ended):
            cli.console()
        assert ended == [(130, "aborted")]  # written out before the process ends
    else:
        with pytest.raises(SystemExit) as e:
            cli.console()
        assert e.value.code == code and ended == []
