"""Nothing exhausted (issue 37): every size a user can give is checked before anything is
allocated, and every way to exhaust or crash the machine ends in one line ``error: ...`` with
exit status 2, within seconds, with no process left behind.

The real proof runs ``dynlab`` in a child process under a memory cap (``RLIMIT_AS``, set by a
small launcher): a few cases whose unchecked allocation is hundreds of GB (an XLA abort, a
trajectory, a dense layer, a gzip bomb), one after another in one process (``one_process``).
The others are refused before any allocation, which the in-process runner shows as faithfully
(and fast).
"""

import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from cli_runner import TINY_CELL, invoke, one_line_error

CAP = 4 * 2**30
"""The child's address-space cap: a tiny ``dynlab train`` runs under 2 GiB of address space
(measured: 2, 4 and 8 GiB all pass), and every case below would allocate 200 GB or more."""
RSS_CEILING = 1.5 * 2**30
"""Peak resident memory of a refused child: importing JAX and building a tiny model is ~0.5 GB."""


def _processes(field: int, value: int) -> list[int]:
    """The live processes (zombies excluded) whose ``/proc/PID/stat`` field ``field`` (after the
    name: 1 ppid, 3 session) is ``value``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[field]) == value and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _session_members(sid: int) -> list[int]:
    return _processes(3, sid)


def _children() -> set[int]:
    """This test process's live children (a worker a command started would be one)."""
    return set(_processes(1, os.getpid()))


LAUNCHER = """
import os, resource, subprocess, sys
cap = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""
"""Runs the command under the cap (the soft limit, which [`DRIVER`][] lifts for the commands that
are not about it). The command is forked from this small launcher, not from the test worker, so
that its peak RSS is its own: a forked child's ``ru_maxrss`` starts at the RSS of the process it
was forked from (Linux keeps the old address space's high-water mark across ``exec``), so forking
``dynlab`` from a test worker that has grown to 2.3 GB read as a 2.3 GB peak."""

DRIVER = """
import json, os, resource, sys, time
from dynlab.cli import main

cases, report = json.loads(sys.argv[1]), sys.argv[2]
for case in cases:
    if not case["capped"]:  # every capped case has run: lift the soft limit
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    os.chdir(case["cwd"])
    if case.get("estimate_off"):
        from dynlab import budget
        budget.check_training = lambda *a, **k: None
    saved, start = os.dup(2), time.monotonic()
    err = os.open(case["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(err, 2)  # what the command writes to the descriptor, Python's and the C++ libraries' alike
    try:
        main(case["args"])
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(err)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with open(report, "a") as f:
        f.write(json.dumps({"id": case["id"], "status": status, "peak_rss": peak,
                            "seconds": time.monotonic() - start}) + "\\n")
"""
"""One process that runs several ``dynlab`` commands as ``python -m dynlab.cli`` runs one (the exit
status from ``SystemExit``, stderr at file descriptor 2, each command's to a file of its own) and
writes a line per command to a report as it ends, so that a command that crashes the process (an
XLA abort) leaves the lines of those before it. A line's peak RSS is the process's high-water mark
when that command ended: a bound on that command's own peak and on every one's before it."""


def run_driver(cases, cwd, *, timeout, env=None):
    """[`DRIVER`][] in a fresh session under ``RLIMIT_AS = CAP`` (lifted before the first case that
    is not ``capped``): ({case id: its report line, with its ``stderr``}, the process's exit status,
    its own stderr, the processes of its session still alive); a process still running after
    ``timeout`` s is killed and fails the test."""
    report = Path(cwd) / ".report"
    with open(Path(cwd) / ".stderr", "w") as err:
        child = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(CAP), sys.executable, "-c", DRIVER,
                                  json.dumps(cases), str(report)],
                                 cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, env=env)
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            child.wait()
            pytest.fail(f"the commands {[c['args'] for c in cases]} ran past {timeout} s")
    time.sleep(0.2)
    stderr = {c["id"]: c["stderr"] for c in cases}
    lines = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    ended = {line["id"]: {**line, "stderr": Path(stderr[line["id"]]).read_text()} for line in lines}
    return ended, child.returncode, (Path(cwd) / ".stderr").read_text(), _session_members(child.pid)


def _gzip_bomb(path: Path, shape=(10, 28, 28), members: int = 320) -> None:
    """An IDX gzip whose header declares ``shape`` but whose stream expands to 5 GiB more (gzip
    members of 16 MiB of zeros, concatenated: 5 MB on disk), beside a valid labels file."""
    header = bytes([0, 0, 8, len(shape)]) + b"".join(int(n).to_bytes(4, "big") for n in shape)
    zeros = gzip.compress(bytes(1 << 24), 9)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(header + bytes(1 << 20)) + zeros * members)
    from dynlab.idx import write_idx

    write_idx(path.with_name("t10k-labels-idx1-ubyte.gz"), np.zeros(shape[0], np.uint8))


# ------------------------------------------------------------------------------------------------
# Under a memory cap, in a child process

CAPPED = {  # id: (args, fragments of its one-line error)
    # XLA aborted with a C++ check failure (exit -6) on the held-out batch of 512 x 10^9 steps
    "task-length": (["train", "--set", "task.length=1000000000", "--steps", "2"],
                    ["task.length=1000000000 needs about", "limit"]),
    "spectra-steps": (["analyze", "spectra", "--steps", "1000000000"], ["--steps 1000000000 needs about", "lower --steps"]),
    "pc-bp-widths": (["compare", "pc-bp", "--widths", "1000000000"], ["--widths 1000000000 needs about", "lower --widths"]),
    "gzip-bomb": (["train", "--task", "psmnist", "--steps", "2", "--data-dir", "bomb"],
                  ["t10k-images-idx3-ubyte.gz", "trailing"]),
}
ALLOCATION_TRIES = 4


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """Every command of this module that needs a real process, in one (a process per command cost
    ~4-5 s of CPU apiece, mostly starting JAX and loading the plug-ins), in this order: ``dynlab
    list units`` with a plug-in installed that calls ``sys.exit`` when imported (the process's
    first registry lookup, which loads the plug-ins: the one the fresh process of each command
    made); the cases of [`CAPPED`][], each in its own directory (they use dynlab's built-in
    plug-ins only, imported before any installed one); then, the cap lifted, the tries of the
    allocation failure. Returns what [`run_driver`][] returns. Measured peak RSS at the end of each
    capped case: 0.34-0.41 GB (against [`RSS_CEILING`][], 1.61 GB); at the end of the last try,
    0.50 GB."""
    site = tmp_path_factory.mktemp("site")
    info = site / "exiting_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "exiting_plugin.py").write_text("import sys\nsys.exit(3)\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: exiting-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dynlab.plugins]\nexiting = exiting_plugin\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    cwd = tmp_path_factory.mktemp("exiting")
    cases = [{"id": "exiting-plugin", "args": ["list", "units"], "cwd": str(cwd), "stderr": str(cwd / ".stderr"),
              "capped": True}]
    for case, (args, _) in CAPPED.items():
        cwd = tmp_path_factory.mktemp(case)
        if case == "gzip-bomb":
            _gzip_bomb(cwd / "bomb" / "mnist" / "t10k-images-idx3-ubyte.gz")
        cases.append({"id": case, "args": args, "cwd": str(cwd), "stderr": str(cwd / ".stderr"), "capped": True})
    cwd = tmp_path_factory.mktemp("allocation")
    for attempt in range(ALLOCATION_TRIES):
        out = f"r{attempt}"
        cases.append({"id": f"allocation-{attempt}",
                      "args": ["train", "--steps", "2", "--set", "model.hidden=1000000", "--out", out],
                      "cwd": str(cwd), "stderr": str(cwd / f"{out}.stderr"), "capped": False, "estimate_off": True})
    return run_driver(cases, tmp_path_factory.mktemp("driver"), timeout=300, env=env)


@pytest.mark.parametrize("case", list(CAPPED))
def test_an_exhausting_size_is_one_line_under_a_memory_cap(one_process, case):
    ended, status, crash, left = one_process
    assert case in ended, f"the process ended (status {status}) before {case} did: {crash[-3000:]}"
    got, fragments = ended[case], CAPPED[case][1]
    err = got["stderr"]
    assert got["status"] == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and all(f in err for f in fragments), err
    assert got["peak_rss"] < RSS_CEILING, got["peak_rss"]
    assert got["seconds"] < 90, got  # (one that hangs fails the process's timeout)
    assert not left, f"processes left behind: {left}"


# ------------------------------------------------------------------------------------------------
# Refused before any allocation (in-process)


def _scenario(tmp_path, name, sweep: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n{TINY_CELL}\n[sweep]\n{sweep}\n')
    return str(path)


def test_sweeps_are_refused_by_their_cell_count_before_building_cells(tmp_path, monkeypatch):
    from dynlab.scenarios import spec

    built = []
    cell = spec.Cell
    monkeypatch.setattr(spec, "Cell", lambda *a, **k: built.append(a[0]) or cell(*a, **k))
    axis = lambda n: str(list(range(1, n + 1)))  # noqa: E731
    billion = _scenario(tmp_path, "billion", f'seed = {axis(1000)}\n"model.hidden" = {axis(1000)}\n'
                                             f'"train.lr" = {[1e-3] * 1000}')
    one_line_error(invoke(["run", billion], tmp_path), "1,000,000,000 cells", "at most 10,000")
    million = _scenario(tmp_path, "million", f'seed = {axis(1000)}\n"model.hidden" = {axis(1000)}')
    one_line_error(invoke(["run", million], tmp_path), "1,000,000 cells", "1,000 seed x 1,000 model.hidden")
    assert built == []  # refused from the axes' lengths: not one cell was made
    # 10^6 seeds (7.9 MB) do not fit in a scenario file: refused by its size (1 MiB), before parsing
    seeds = tmp_path / "seeds.toml"
    with open(seeds, "w") as f:
        f.write('name = "seeds"\n[sweep]\nseed = [')
        f.writelines(f"{i}, " for i in range(10**6))
        f.write("]\n")
    one_line_error(invoke(["run", str(seeds)], tmp_path), "larger than 1 MiB")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("sets, fragments", [
    (["model.hidden=1000000000000"], ["model.hidden=1000000000000 is too large", "lower model.hidden"]),
    (["model.hidden=1000000"], ["model.hidden=1000000 needs about", "TB", "lower model.hidden"]),
    (["train.batch_size=100000000"], ["train.batch_size=100000000 needs about", "lower train.batch_size"]),
])
def test_model_and_batch_sizes_are_checked_from_shapes_before_training(tmp_path, sets, fragments):
    args = ["train", "--steps", "2", "--out", "r", *[a for s in sets for a in ("--set", s)]]
    one_line_error(invoke(args, tmp_path), *fragments)
    assert not (tmp_path / "r").exists()


def test_the_memory_limit_can_be_stated(tmp_path, monkeypatch):
    """``$DYNLAB_MEMORY_LIMIT`` lowers the limit: a config that fits the machine is refused when it
    does not fit the stated limit, naming it."""
    monkeypatch.setenv("DYNLAB_MEMORY_LIMIT", "1MB")
    one_line_error(invoke(["train", "--steps", "2", "--out", "r"], tmp_path), "limit 1 MB: $DYNLAB_MEMORY_LIMIT")
    monkeypatch.setenv("DYNLAB_MEMORY_LIMIT", "lots")
    one_line_error(invoke(["train", "--steps", "2", "--out", "r"], tmp_path), "is not a size")


def test_an_allocation_failure_that_slips_through_names_the_sizes(one_process):
    """With the estimate switched off, a 4 TB weight matrix that XLA cannot allocate is one line
    and exit status 2, not an internal error, and again on each later try in the same process:
    jaxlib aborted the whole process the third time its CPU client's failed buffer was read
    (``Check failed: buffer_.IsConcrete()``), unless the model is waited for where it is built.
    In a child process (that of [`one_process`][], after its capped commands, the cap lifted),
    so that such an abort fails this test, not the worker running it."""
    ended, status, crash, _ = one_process
    for attempt in range(ALLOCATION_TRIES):
        case = f"allocation-{attempt}"
        assert case in ended, f"the process ended (status {status}) before {case} did: {crash[-3000:]}"
        got = ended[case]
        one_line_error(SimpleNamespace(exit_code=got["status"], output="", stderr=got["stderr"]),
                       "out of memory", "lower the sizes", "model.hidden")
    assert status == 0, crash[-3000:]


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "big"])
def test_config_files_are_refused_by_kind_and_size_before_parsing(tmp_path, target, monkeypatch):
    from dynlab import config

    if target == "big":
        target = str(tmp_path / "big.toml")
        Path(target).write_text("# padding\n" * 200_000)
    parsed = []
    monkeypatch.setattr(config.tomllib, "loads", lambda text, **k: parsed.append(len(text)) or {})
    one_line_error(invoke(["train", "--config", target], tmp_path), "config file")
    assert parsed == []  # refused by the file's kind or size: nothing of it reached the parser


@pytest.mark.parametrize("args, fragment", [
    (["train", "--steps", "9223372036854775808"], "train.steps = 9223372036854775808 is out of range"),
    (["analyze", "lyapunov", "--realisations", "99999999999999999999"], "--realisations = 99999999999999999999"),
    (["analyze", "spectra", "--n-boot", "9223372036854775807", "--model", "rnn", "--set", "model.hidden=4"],
     "--n-boot 9223372036854775807 needs about"),
    (["analyze", "sta", "--samples", "9223372036854775807", "--model", "rnn", "--set", "model.hidden=4"],
     "--samples 9223372036854775807 needs about"),
    (["run", "sith-trw", "--workers", "1000"], "--workers 1000 is more than the"),
])
def test_integer_options_are_bounded(tmp_path, args, fragment):
    children = _children()
    one_line_error(invoke(args, tmp_path), fragment)
    assert _children() <= children  # no worker was started
    assert not (tmp_path / "runs").exists()


def test_workers_are_capped_at_the_cores_naming_the_cap(tmp_path):
    cores = len(os.sched_getaffinity(0))
    one_line_error(invoke(["run", "sith-trw", "--workers", str(cores + 1)], tmp_path),
                   f"the {cores} core", f"--workers 1 to {cores}")


@pytest.mark.parametrize("workers", ["0", "-1", "1.5"])
def test_bad_worker_counts_are_one_line(tmp_path, workers):
    """The worker count of the one process pool (Dask's, [`dynlab.scenarios.sweep.dask_client`][])."""
    one_line_error(invoke(["run", "sith-trw", "--workers", workers], tmp_path), "--workers")


def test_a_result_file_is_checked_before_it_is_read(tmp_path):
    import h5netcdf

    with h5netcdf.File(tmp_path / "huge.nc", "w") as f:  # 6 kB on disk, 800 GB declared
        f.dimensions = {"x": 10**11}
        f.create_variable("v", ("x",), "f8", chunks=(1 << 20,))
    one_line_error(invoke(["plot", "huge.nc"], tmp_path), "declares 800 GB", "'v'", "not read")
    (tmp_path / "secret.bin").write_bytes(b"outside" * 20)
    with h5py.File(tmp_path / "ext.nc", "w") as f:  # bytes of another file, through HDF5 external storage
        f.create_dataset("v", shape=(100,), dtype="u1", external=[("secret.bin", 0, 100)])
    one_line_error(invoke(["plot", "ext.nc"], tmp_path), "external storage")
    assert not (tmp_path / "huge.png").exists() and not (tmp_path / "ext.png").exists()


def test_data_files_whose_sizes_overflow_or_do_not_fit_are_data_errors(tmp_path):
    mnist = tmp_path / "data" / "mnist"
    mnist.mkdir(parents=True)
    header = bytes([0, 0, 8, 3]) + (0xFFFFFFFF).to_bytes(4, "big") * 3
    (mnist / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(header + bytes(100)))
    from dynlab.idx import write_idx

    write_idx(mnist / "t10k-labels-idx1-ubyte.gz", np.zeros(10, np.uint8))
    one_line_error(invoke(["train", "--task", "psmnist", "--data-dir", "data", "--out", "r"], tmp_path),
                   "declares (4294967295, 4294967295, 4294967295)")
    from dynlab.cifar import read_cifar
    from dynlab.errors import DataError

    with open(tmp_path / "sparse.bin", "wb") as f:  # 1 TB declared by its size, no blocks on disk
        f.truncate(10**12)
    with pytest.raises(DataError, match="1,000,000,000,000 bytes, more than"):
        read_cifar(tmp_path / "sparse.bin")
    shd = tmp_path / "data" / "shd"
    shd.mkdir()
    for split in ("train", "test"):
        with h5py.File(shd / f"shd_{split}.h5", "w") as f:
            for name in ("spikes/times", "spikes/units", "labels", "extra/speaker"):
                f[name] = np.int64(3)  # scalars, not one entry per sample
    one_line_error(invoke(["train", "--task", "shd", "--set", 'task.source="file"', "--data-dir", "data",
                           "--out", "r"], tmp_path), "must be a 1-D dataset")


def test_a_scheduler_that_answers_garbage_is_one_line(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def answer():  # a frame header announcing 6.46 EiB
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(struct.pack("<Q", 7_450_000_000_000_000_000) + os.urandom(64))

    threading.Thread(target=answer, daemon=True).start()
    try:
        path = _scenario(tmp_path, "s", "seed = [0]")
        port = server.getsockname()[1]
        one_line_error(invoke(["run", path, "--scheduler", f"tcp://127.0.0.1:{port}", "-q"], tmp_path),
                       "cannot reach a Dask scheduler", "6.46 EiB")
    finally:
        server.close()


def test_a_plugin_analysis_without_a_figure_is_refused_before_work(tmp_path, monkeypatch):
    from dynlab import registry

    calls = []
    monkeypatch.setitem(registry._REGISTRY["analysis"], "no-figure", registry.Entry(
        "analysis", "no-figure", lambda model, *, steps=5: calls.append(steps), "an analysis without a figure"))
    one_line_error(invoke(["analyze", "no-figure", "--model", "rnn", "--set", "model.hidden=4"], tmp_path),
                   "registered without a figure")
    assert not calls and not (tmp_path / "runs").exists()


def test_a_plugin_that_exits_at_import_is_one_line(one_process):
    """A plug-in calling ``sys.exit(3)`` while imported: one line, exit 2 (the first command of
    [`one_process`][], whose first registry lookup loads the plug-ins)."""
    ended, status, crash, _ = one_process
    assert "exiting-plugin" in ended, f"the process ended (status {status}) first: {crash[-3000:]}"
    got = ended["exiting-plugin"]
    assert got["status"] == 2, got
    err = got["stderr"]
    assert err.startswith("error: ") and err.count("\n") == 1 and "sys.exit(3)" in err, err


def test_places_that_cannot_be_written_are_one_line(tmp_path):
    long_name = "d" * 300
    one_line_error(invoke(["train", "--steps", "2", "--out", long_name], tmp_path), "file name is too long")
    one_line_error(invoke(["train", "--steps", "2", "--out", "/sys/dynlab-test"], tmp_path), "/sys/dynlab-test")
    if os.geteuid() != 0:  # root writes into read-only directories
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        one_line_error(invoke(["train", "--steps", "2"], ro), "permission denied")
    gone = tmp_path / "gone"
    gone.mkdir()
    old = os.getcwd()
    os.chdir(gone)
    try:
        gone.rmdir()
        from click.testing import CliRunner
        from dynlab.cli import main

        one_line_error(CliRunner().invoke(main, ["train", "--steps", "2"]), "working directory no longer exists")
    finally:
        os.chdir(old)


def test_a_read_only_file_system_is_one_line(tmp_path, monkeypatch):
    """EROFS (no read-only mount can be made in a test): the error of the first write."""
    import errno

    from dynlab import store

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "r"))

    monkeypatch.setattr(store, "claim_run_dir", read_only)
    one_line_error(invoke(["train", "--steps", "2", "--out", "r"], tmp_path), "read-only")
