"""Sweeps on a real Dask cluster, as users run them: ``dask scheduler`` and ``dask worker`` processes.

* A worker killed with SIGKILL while it computes a cell: the scheduler gives the cell to another
  worker, which empties the partial cell directory first (``cell._fresh``); the merged dataset is
  identical to an in-process run.
* A scheduler that cannot be reached is one line, exit 2, and leaves no run directory behind
  (``sweep.connect``, ``cli._run_scenario``).

The kill moment is made deterministic by the one test hook of [`dynlab.scenarios.cell`][]
(``DYNLAB_TEST_HOOK_DIR``: each cell announces itself with ``started-<pid>-<cell>`` and waits while
``hold`` exists). Every wait is bounded; only the processes started here are stopped, in ``finally``.

The scheduler and the two workers are processes; the workers run without a nanny (``--no-nanny``),
so that the worker killed is the process computing the cell and the cell can only go to the
other worker (a nanny would add a process per worker and restart the killed one, which then
imports JAX and dynlab again: 45 s of CPU with nannies, six cells and the ``dynlab run`` client
in a process of its own; the client, which the kill is not about, runs in this process).
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import xarray as xr

from cli_runner import TINY_CELL, invoke
from dynlab.scenarios import load
from dynlab.scenarios import sweep as sweep_module
from dynlab.scenarios.sweep import run_sweep

TWO = ("""
name = "two"
"""
       + TINY_CELL
       + """[sweep]
seed = [0, 1]
""")
"""Two cells on two workers (six before): the cell of the worker killed can only go to the other one."""

DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout: float, what: str, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        for p in procs:
            assert p.poll() is None, f"{p.args[:3]} exited with {p.returncode} while waiting for {what}"
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop(proc: subprocess.Popen) -> None:
    """Stop a process this test started, with everything it started (its own session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_worker_killed_mid_cell_the_sweep_still_equals_in_process(tmp_path):
    """(The in-process run goes first: the workers then load its compiled programs from the suite's
    compilation cache, which they inherit.)"""
    (tmp_path / "two.toml").write_text(TWO)
    reference = run_sweep(load(str(tmp_path / "two.toml")), tmp_path / "in-process")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "hold").touch()  # every cell waits, once announced, until the kill is done
    port = free_port()
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker0", "worker1")}
    procs, ran = [], {}

    def start(name, args, env=None):
        p = subprocess.Popen(args, cwd=tmp_path, stdout=logs[name], stderr=subprocess.STDOUT,
                             start_new_session=True, env=env)
        procs.append(p)
        return p

    def run():  # dynlab run two.toml --scheduler ADDRESS, in this process
        ran["result"] = invoke(["run", "two.toml", "--scheduler", f"tcp://127.0.0.1:{port}", "--out", "d", "-q"],
                               tmp_path)

    client = threading.Thread(target=run, daemon=True)
    try:
        scheduler = start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])
        wait_for(lambda: listening(port), 30, "the scheduler", [scheduler])
        env = {**os.environ, "DYNLAB_TEST_HOOK_DIR": str(hooks)}
        workers = [start(f"worker{i}", [DASK, "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1", "--no-nanny",
                                        "--no-dashboard"], env) for i in range(2)]
        client.start()
        first = wait_for(lambda: sorted(hooks.glob("started-*")), 60, "a cell to start", procs)[0]
        pid, cell = int(first.name.split("-")[1]), first.name.split("-", 2)[2]
        assert pid in {w.pid for w in workers}  # a worker process of ours
        os.kill(pid, signal.SIGKILL)  # the worker dies while it computes `cell`
        (hooks / "hold").unlink()
        client.join(timeout=60)
        assert not client.is_alive(), "dynlab run did not finish within 60 s"
        res = ran["result"]
        assert res.exit_code == 0, (res.output, res.stderr)
        restarted = [p for p in hooks.glob(f"started-*-{cell}") if p != first]
        assert restarted, "the killed worker's cell was not computed again"
        assert int(restarted[0].name.split("-")[1]) in {w.pid for w in workers} - {pid}  # by the other worker
    finally:
        for p in reversed(procs):
            stop(p)
        for f in logs.values():
            f.close()
    merged = xr.load_dataset(tmp_path / "d" / "sweep.nc")
    assert (merged["status"] == "ok").all() and merged["status"].size == 2
    xr.testing.assert_identical(merged.drop_attrs(), reference.drop_attrs())


@pytest.mark.parametrize("address", ["unused-port", "tcp://host:8786"])
def test_unreachable_scheduler_is_one_line_and_leaves_no_run_dir(address, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_module, "CONNECT_TIMEOUT", "1s")
    if address == "unused-port":
        address = f"tcp://127.0.0.1:{free_port()}"
    (tmp_path / "two.toml").write_text(TWO)
    res = invoke(["run", "two.toml", "--scheduler", address, "-q"], tmp_path)
    assert res.exit_code == 2, (res.output, res.stderr)
    err = res.stderr.strip()
    assert err.startswith("error: cannot reach a Dask scheduler at ") and "\n" not in err, res.stderr
    assert not (tmp_path / "runs").exists()  # the default run directory (and runs/) was not left behind
    res = invoke(["run", "two.toml", "--scheduler", address, "--out", "d", "-q"], tmp_path)
    assert res.exit_code == 2 and not (tmp_path / "d").exists(), res.stderr
