"""Ctrl-C at random moments of an analysis: how often the process crashes instead of exiting 130 (issue 48).

    python benchmarks/interrupt.py [--trials 14] [--window 7 13] [-- COMMAND ...]

Runs COMMAND (default ``analyze lyapunov --model aru``) ``--trials`` times through each of two
entry points, each in a fresh directory and its own session, and sends SIGINT to its process group
(as a terminal does) at a moment drawn uniformly from ``--window`` seconds:

- ``console``: the installed ``dynlab`` command (``dynlab.cli.console``), which ends the process at
  once after Ctrl-C;
- ``main``: the command line's group called the way it was before, whose ``SystemExit`` runs the
  interpreter's teardown.

Prints each run's exit status and the count of crashes (a negative status: killed by a signal)
per entry point. Not a test: the crash needs the interrupt to land while XLA computes.

Measured (2026-12-07, 2 idle cores): ``main`` crashed 7 times in 38 (segfaults, exit -11, always
after printing "aborted": 2 in 14 over 3-12 s, 4 in 14 over 7-13 s, and 1 in 10 in this script's
interleaved run), ``console`` 0 times in 28 (18 over 7-13 s, 10 interleaved).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ENTRIES = {
    "console": "from dynlab.cli import console; console()",
    "main": "import sys; from dynlab.cli import main; sys.exit(main())",
}


def trial(entry: str, command: list[str], delay: float) -> int:
    with tempfile.TemporaryDirectory(prefix="dynlab-interrupt-") as where:
        # -P: the checkout, if this runs from one, does not shadow the installed package; the child
        # restores Python's SIGINT handler, which a parent that ignores SIGINT would leave ignored
        launcher = f"import signal; signal.signal(signal.SIGINT, signal.default_int_handler); {ENTRIES[entry]}"
        proc = subprocess.Popen([sys.executable, "-P", "-c", launcher, *command], cwd=where, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "MPLBACKEND": "Agg"})
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):  # it finished first
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate()
        last = err.strip().splitlines()[-1] if err.strip() else ""
        print(f"  {entry:8s} SIGINT at {delay:5.2f} s: exit {proc.returncode:4d}  {last[:80]}", flush=True)
        return proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=14)
    parser.add_argument("--window", type=float, nargs=2, default=(7.0, 13.0), metavar=("FROM", "TO"))
    parser.add_argument("command", nargs="*", default=["analyze", "lyapunov", "--model", "aru"])
    args = parser.parse_args()
    rng = random.Random(0)
    codes: dict[str, list[int]] = {entry: [] for entry in ENTRIES}
    for _ in range(args.trials):
        for entry in ENTRIES:  # interleaved, so that both see the same machine
            codes[entry].append(trial(entry, args.command, rng.uniform(*args.window)))
    for entry, got in codes.items():
        crashed = sum(c < 0 for c in got)
        print(f"{entry}: {crashed} of {len(got)} crashed (killed by a signal); "
              f"{sum(c == 130 for c in got)} exited 130, {sum(c == 0 for c in got)} finished first")


if __name__ == "__main__":
    main()
