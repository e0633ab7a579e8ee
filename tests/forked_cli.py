"""Real ``dynlab`` processes without a fresh interpreter each: forked from one that has imported dynlab.

A test about a real process (``kill -9`` at a named moment, two processes racing for one run
directory) needs a process of its own, not the interpreter start-up: starting ``python -m
dynlab.cli`` costs ~5 s of CPU in imports (JAX, the plug-ins, xarray, matplotlib) before the
command begins. [`ForkServer`][] starts one interpreter that imports all of that, with the JAX
backend *not* started (forking a process whose XLA threads run is unsafe; the server checks), and
forks a child per command: a separate process, with its own pid, its own XLA backend, its own
file descriptors 1 and 2, that runs ``dynlab.cli.main(ARGS)`` in the command's working directory
and environment and ends with the command's exit status, or dies of the signal that killed it,
exactly as ``python -m dynlab.cli ARGS`` would from that point on. What it does not repeat is the
interpreter's start and imports, which a test of a fresh interpreter (what gets imported, the
console entry point) must not use this for.

Used by ``test_durability.py`` only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

SERVER = r'''
import importlib, json, os, signal, sys, time, traceback

import dynlab.cli
from dynlab import registry

registry.load_plugins()
for name in sys.argv[1:]:  # what the commands import later: imported once, here
    importlib.import_module(name)
from jax._src import xla_bridge

if xla_bridge.backends_are_initialized():  # its threads would not exist in a forked child
    sys.exit("forked_cli: the JAX backend started in the fork server")


def child(job):
    os.chdir(job["cwd"])
    os.environ.update(job.get("env", {}))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    sys.argv = ["dynlab", *job["args"]]
    code = 0
    try:
        dynlab.cli.main(job["args"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def read(path):
    try:
        return open(path).read()
    except FileNotFoundError:  # the child ended before it began the command (its error: the server's stderr)
        return ""


def batch(jobs, parallel):
    todo, running, results = list(enumerate(jobs)), {}, [None] * len(jobs)
    while todo or running:
        while todo and len(running) < parallel:
            i, job = todo.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    child(job)
                except BaseException:  # before the command started: on the server's stderr
                    traceback.print_exc()
                    sys.stderr.flush()
                finally:
                    os._exit(1)
            running[pid] = {"i": i, "job": job, "start": time.monotonic(), "seen": None, "killed": False}
        now = time.monotonic()
        for pid, run in list(running.items()):
            kill = run["job"].get("kill")
            if kill and not run["killed"]:  # SIGKILL `after` s after the file `when` appeared
                if run["seen"] is None and os.path.exists(kill["when"]):
                    run["seen"] = now
                if run["seen"] is not None and now - run["seen"] >= kill["after"]:
                    os.kill(pid, signal.SIGKILL)
                    run["killed"] = True
            if now - run["start"] > run["job"].get("timeout", 120) and not run["killed"]:
                os.kill(pid, signal.SIGKILL)
                run["killed"] = "timeout"
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                del running[pid]
                job = run["job"]
                results[run["i"]] = {"pid": pid, "returncode": os.waitstatus_to_exitcode(status),
                                     "timed_out": run["killed"] == "timeout",
                                     "after_when": None if run["seen"] is None else now - run["seen"],
                                     "cpu": usage.ru_utime + usage.ru_stime,
                                     "stdout": read(job["stdout"]), "stderr": read(job["stderr"])}
        time.sleep(0.005)
    return results


print("ready", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    print(json.dumps(batch(request["jobs"], request["parallel"])), flush=True)
'''

PRELOAD = ("dynlab.train", "dynlab.experiment", "dynlab.store", "dynlab.figures", "dynlab.cli.train", "optax", "equinox",
           "xarray", "h5netcdf", "dask.array", "distributed", "matplotlib.pyplot", "scipy.linalg.cython_blas")
"""Modules a ``dynlab train`` imports when it runs, imported by the server instead of by each child."""


@dataclass
class Finished:
    """One forked command, named as ``subprocess.run``'s result names it (``returncode`` -9: killed)."""

    pid: int
    returncode: int
    timed_out: bool
    after_when: float | None
    """Seconds from the first sight of the ``kill`` file to the end (``None``: never seen or no ``kill``)."""
    cpu: float
    """CPU seconds the process used."""
    stdout: str
    stderr: str


class ForkServer:
    """One interpreter with dynlab imported (environment ``env``, which JAX reads at import: its
    compilation cache, its platform) that forks a child per command of [`run`][]."""

    def __init__(self, env: dict, preload=PRELOAD):
        self.proc = subprocess.Popen([sys.executable, "-P", "-c", SERVER, *preload], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", f"the fork server did not start (exit {self.proc.wait()})"

    def run(self, jobs: list[dict], parallel: int = 2) -> list[Finished]:
        """Run ``jobs``, ``parallel`` at a time; each a dict: ``args`` (of ``dynlab``), ``cwd``,
        ``stdout`` and ``stderr`` (files they go to), optionally ``env`` (added to the server's),
        ``kill`` (``{"when": PATH, "after": S}``: SIGKILL S seconds after PATH exists, unless the
        command ended first; PATH is looked for every 5 ms) and ``timeout`` (s, default 120: then
        SIGKILL, and ``timed_out``)."""
        self.proc.stdin.write(json.dumps({"jobs": jobs, "parallel": parallel}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the fork server died (exit {self.proc.wait()})"
        return [Finished(**r) for r in json.loads(line)]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
