"""Sweeps on a real Dask cluster, as users run them: ``dask scheduler`` and ``dask worker`` processes.

* A worker killed with SIGKILL while it computes a cell: the scheduler gives the cell to another
  worker, which empties the partial cell directory first (``cell._fresh``); the merged dataset is
  identical to an in-process run.
* A scheduler that cannot be reached is one line, exit 2, and leaves no run directory behind
  (``sweep.connect``, ``cli._run_scenario``).

The kill moment is made deterministic by the one test hook of [`dynlab.scenarios.cell`][]
(``DYNLAB_TEST_HOOK_DIR``: each cell announces itself with ``started-<pid>-<cell>`` and waits while
``hold`` exists). Every wait is bounded; only the processes started here are stopped, in ``finally``.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

from cli_runner import TINY_CELL, invoke
from dynlab.scenarios import load
from dynlab.scenarios import sweep as sweep_module
from dynlab.scenarios.sweep import run_sweep

SIX = ("""
name = "six"
"""
       + TINY_CELL
       + """[sweep]
seed = [0, 1, 2, 3, 4, 5]
""")

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


def parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


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
    (tmp_path / "six.toml").write_text(SIX)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "hold").touch()  # every cell waits, once announced, until the kill is done
    port = free_port()
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker0", "worker1", "run")}
    procs = []

    def start(name, args, env=None):
        p = subprocess.Popen(args, cwd=tmp_path, stdout=logs[name], stderr=subprocess.STDOUT,
                             start_new_session=True, env=env)
        procs.append(p)
        return p

    try:
        scheduler = start("scheduler", [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])
        wait_for(lambda: listening(port), 30, "the scheduler", [scheduler])
        env = {**os.environ, "DYNLAB_TEST_HOOK_DIR": str(hooks)}
        workers = [start(f"worker{i}", [DASK, "worker", f"tcp://127.0.0.1:{port}", "--nthreads", "1",
                                        "--no-dashboard"], env) for i in range(2)]
        run = start("run", [sys.executable, "-m", "dynlab.cli", "run", "six.toml", "--scheduler",
                            f"tcp://127.0.0.1:{port}", "--out", "d", "-q"])
        first = wait_for(lambda: sorted(hooks.glob("started-*")), 60, "a cell to start", procs)[0]
        pid, cell = int(first.name.split("-")[1]), first.name.split("-", 2)[2]
        assert parent_pid(pid) in {w.pid for w in workers}  # a worker process of ours (under its nanny)
        os.kill(pid, signal.SIGKILL)  # the worker dies while it computes `cell`
        (hooks / "hold").unlink()
        run.wait(timeout=60)
        log = (tmp_path / "run.log").read_text()
        assert run.returncode == 0, log[-3000:]
        restarted = [p for p in hooks.glob(f"started-*-{cell}") if p != first]
        assert restarted, "the killed worker's cell was not computed again"
    finally:
        for p in reversed(procs):
            stop(p)
        for f in logs.values():
            f.close()
    merged = xr.load_dataset(tmp_path / "d" / "sweep.nc")
    assert (merged["status"] == "ok").all() and merged["status"].size == 6
    reference = run_sweep(load(str(tmp_path / "six.toml")), tmp_path / "in-process")
    xr.testing.assert_identical(merged.drop_attrs(), reference.drop_attrs())


@pytest.mark.parametrize("address", ["unused-port", "tcp://host:8786"])
def test_unreachable_scheduler_is_one_line_and_leaves_no_run_dir(address, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_module, "CONNECT_TIMEOUT", "1s")
    if address == "unused-port":
        address = f"tcp://127.0.0.1:{free_port()}"
    (tmp_path / "six.toml").write_text(SIX)
    res = invoke(["run", "six.toml", "--scheduler", address, "-q"], tmp_path)
    assert res.exit_code == 2, (res.output, res.stderr)
    err = res.stderr.strip()
    assert err.startswith("error: cannot reach a Dask scheduler at ") and "\n" not in err, res.stderr
    assert not (tmp_path / "runs").exists()  # the default run directory (and runs/) was not left behind
    res = invoke(["run", "six.toml", "--scheduler", address, "--out", "d", "-q"], tmp_path)
    assert res.exit_code == 2 and not (tmp_path / "d").exists(), res.stderr
