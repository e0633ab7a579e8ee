"""Training runs survive faults (issue 17: items 3, 4, 14, 16, 17).

``kill -9`` of ``dynlab train`` at any moment, then ``--resume``, gives the files of an
uninterrupted run; two processes never share a run directory; a corrupted array file is a
one-line "corrupt checkpoint" error; ``--set model.*`` cannot change a resumed model; ``train``
takes ``--data-dir``.

The kills are real: a separate process runs ``dynlab train`` with ``$DYNLAB_TEST_KILL_AT`` (the
test hook [`dynlab.store.fault_point`][]), which SIGKILLs it at a named moment, or is sent SIGKILL
at a random time; the resumes and the uninterrupted reference run in-process. The processes are
forked from one interpreter that has imported dynlab (``forked_cli.ForkServer``): each is its own
process with its own XLA backend and dies of the real signal; what they share is the interpreter
start and imports (~5 s of CPU each when every kill started ``python -m dynlab.cli``), which no
check here is about. They use the suite's JAX compilation cache, which the in-process reference
run filled (the same programs: the children compile nothing), and run two at a time.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import xarray as xr

from cli_runner import invoke, one_line_error
from dynlab import data, experiment, store
from dynlab.errors import ConfigError
from forked_cli import ForkServer

TRAIN = ["train", "--model", "rnn", "--task", "adding", "--set", "model.hidden=8", "--steps", "40",
         "--set", "train.checkpoint_every=10", "--set", "train.eval_every=20", "--set", "train.log_every=5",
         "--set", "train.batch_size=8", "--set", "train.eval_size=16", "-q"]
COMPARED = ("checkpoint.eqx", "model.eqx", "metrics.nc", "checksums.toml", "config.toml")
TMP = re.compile(r"^\..+\.\d+\.tmp$")

# (moment, n) of the test hook, in the order a 40-step run reaches them: config.toml is written
# twice; commit 1 is step 0's checkpoint (checkpoint.eqx and model.eqx, no metrics yet), commits 2
# to 5 the checkpoints of steps 10 to 40 (metrics.nc, checkpoint.eqx, model.eqx, in that order),
# commit 6 the final metrics alone; chunks of 5 steps, evaluations at steps 0, 20 and 40. A commit
# of k files makes k + 2 temporaries (its files, then checksums.toml twice: pending, settled).
# One moment per recovery path (store.commit's order, store.recover, train.train's resume):
# no checkpoint; the first checkpoint without model or metrics; temporaries to remove; checksums
# to settle back to the old files; metrics newer than the checkpoint, cut back (keeping the
# evaluation at the checkpoint's step); checksums to settle to the new files and a stale model,
# with nothing left to train. The 60-step run this replaced had four more moments, each a path
# kept here: ("eval", 2), a kill between checkpoints, leaves the files of ("tmp-written", 13) less
# its temporaries; ("replaced-checkpoint.eqx", 4), a stale model.eqx mid-run, is settled as at the
# final checkpoint and trains on as ("replaced-metrics.nc", 3) does (a resume rewrites model.eqx
# from the checkpoint whatever it held); ("replaced-metrics.nc", 7), the final metrics with their
# checksums unsettled, settles one file to its new digest where the final checkpoint's moment
# settles three (old and new); ("tmp-written", 40), a half-written learning_curve.png, is a
# temporary removed by the same function as at ("tmp-written", 13), then nothing left to train.
MOMENTS = [
    ("config", 2),                    # config.toml written, no checkpoint yet: resume starts at step 0
    ("replaced-checkpoint.eqx", 1),   # step 0's checkpoint in place, no model.eqx, no metrics.nc yet
    ("tmp-written", 13),              # inside commit 3: temporaries written, nothing moved yet
    ("checksums-pending", 4),         # checksums.toml lists old and new digests, every file still old
    ("replaced-metrics.nc", 3),       # metrics.nc (step 30) newer than checkpoint.eqx (step 20)
    ("replaced-checkpoint.eqx", 5),   # the final checkpoint in place, model.eqx stale: nothing left to train
]


def _env() -> dict:
    """The children's environment: the suite's compilation cache (conftest), or none."""
    env = {k: v for k, v in os.environ.items() if k != store.KILL_ENV}
    env.update(JAX_PLATFORMS="cpu", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    return env


@pytest.fixture(scope="module")
def server():
    forks = ForkServer(_env())
    yield forks
    forks.close()


def _job(cwd: Path, out: str, moment: str | None = None, **extra) -> dict:
    """``dynlab TRAIN --out OUT`` in ``cwd`` for [`ForkServer.run`][], killed by the test hook at
    ``moment`` (MOMENT:N); ``extra`` adds to the job or replaces its keys."""
    name = out.replace("/", "-")
    job = {"args": [*TRAIN, "--out", out], "cwd": str(cwd), "stdout": str(cwd / f"{name}.stdout"),
           "stderr": str(cwd / f"{name}.stderr"), "env": {store.KILL_ENV: moment} if moment else {}}
    return {**job, **extra}


def _resume(run: Path, *extra):
    res = invoke(["train", "--resume", str(run), *extra], run.parent)
    assert res.exit_code == 0, (run, res.output, res.stderr)
    return res


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run (in-process)."""
    root = tmp_path_factory.mktemp("reference")
    res = invoke([*TRAIN, "--out", "ref"], root)
    assert res.exit_code == 0, res.output + res.stderr
    return root / "ref"


def assert_same_run(run: Path, reference: Path, what: str = "", compared=COMPARED):
    """The files of ``run`` equal the reference's: .eqx, checksums and config byte for byte,
    metrics.nc both as a dataset and byte for byte; no temporaries left."""
    for name in compared:
        assert (run / name).read_bytes() == (reference / name).read_bytes(), f"{what}: {name} differs"
    got, want = (xr.load_dataset(d / "metrics.nc", engine="h5netcdf") for d in (run, reference))
    assert got.identical(want), what
    assert (run / "learning_curve.png").is_file(), what
    left = [p.name for p in run.iterdir() if TMP.match(p.name)]
    assert not left, f"{what}: temporaries left: {left}"


# ---------------------------------------------------------------------------------------------
# Item 3: kill -9 at any moment, then --resume: identical files


def test_kill_at_each_moment_then_resume_gives_identical_files(reference, server, tmp_path):
    jobs = [_job(tmp_path, f"k{i}", f"{moment}:{n}") for i, (moment, n) in enumerate(MOMENTS)]
    for (moment, n), job, done in zip(MOMENTS, jobs, server.run(jobs)):
        what = f"killed at {moment}:{n}"
        assert done.returncode == -9 and not done.timed_out, \
            f"{what}: the process was not killed there (exit {done.returncode}, timed out: {done.timed_out}): {done.stderr}"
        run = tmp_path / job["args"][-1]
        res = _resume(run)
        assert "Traceback" not in res.stderr, what
        assert_same_run(run, reference, what)


def test_random_kills_then_resume(reference, server, tmp_path):
    """kill -9 at a random time after metrics.nc appears (two runs at once), then resume.

    Every kill moment is covered deterministically by the test above; this one adds random
    timings: one pair per suite run (each run of the suite draws new ones; it was as many pairs
    as fit in ~10 s, 3 to 4, when each kill started a fresh interpreter). A run lives 2.2-6.5 s
    after metrics.nc appears (measured, two at a time on 2 cores shared with other work, load 2
    to 6: ``after_when`` of runs not killed), so a delay of up to 1.6 s lands in its middle
    commits; the kills at its last files are the deterministic moments above."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    delays = [rng.uniform(0, 1.6) for _ in range(2)]
    jobs = [_job(tmp_path, f"r{k}", kill={"when": str(tmp_path / f"r{k}" / "metrics.nc"), "after": delay})
            for k, delay in enumerate(delays)]
    for job, delay, done in zip(jobs, delays, server.run(jobs)):
        assert done.returncode in (-9, 0) and not done.timed_out, (done.returncode, done.stderr)
        _resume(tmp_path / job["args"][-1])
        assert_same_run(tmp_path / job["args"][-1], reference, f"killed {delay:.3f} s after metrics.nc appeared (seed {seed})")


def test_resume_says_where_it_continues(reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    res = _resume(run)
    assert f"resuming {run} from step 40 of 40" in res.output
    assert "resuming" not in _resume(run, "-q").output
    assert_same_run(run, reference)


# ---------------------------------------------------------------------------------------------
# Item 4: a run directory is claimed atomically


def test_two_processes_same_out_exactly_one_wins(reference, server, tmp_path):
    jobs = [_job(tmp_path, "runs/dup", stdout=str(tmp_path / f"{i}.stdout"), stderr=str(tmp_path / f"{i}.stderr"))
            for i in range(2)]
    procs = server.run(jobs, parallel=2)
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], (codes, [p.stderr for p in procs])
    err = next(p.stderr for p in procs if p.returncode == 2).strip()
    assert err.startswith("error: ") and "\n" not in err and "runs/dup" in err, err
    assert "already holds a run" in err or "claimed by another dynlab process" in err, err
    assert_same_run(tmp_path / "runs" / "dup", reference, "the winner")


def test_claims(tmp_path):
    # auto-named directories created in the same second by many threads are all distinct and claimed
    with ThreadPoolExecutor(8) as pool:
        dirs = list(pool.map(lambda _: store.new_run_dir("same", tmp_path / "runs"), range(16)))
    assert len(set(dirs)) == 16 and all((d / store.CLAIM).is_file() for d in dirs)
    # an empty existing directory can be claimed once; a claimed, non-empty or file path cannot
    (tmp_path / "empty").mkdir()
    assert store.claim_run_dir(tmp_path / "empty") == tmp_path / "empty"
    for path, says in ((tmp_path / "empty", "claimed by another dynlab process"),
                       (tmp_path / "runs", "is not empty and holds no run")):
        with pytest.raises(ConfigError, match=says):
            store.claim_run_dir(path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        store.claim_run_dir(tmp_path / "file")
    # through the CLI: one line, exit 2, and a claimed directory without config can't be resumed either
    one_line_error(invoke([*TRAIN, "--out", "empty"], tmp_path), "claimed by another dynlab process (pid")
    one_line_error(invoke(["train", "--resume", "empty"], tmp_path), "has no config.toml")
    one_line_error(invoke([*TRAIN, "--out", "file"], tmp_path), "'file' is a file")


# ---------------------------------------------------------------------------------------------
# Item 14: checksums verified on load


def _overwrite_64_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes((b + 1) % 256 for b in data[middle:middle + 64])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["model.eqx", "checkpoint.eqx", "metrics.nc"])
def test_corrupt_array_file_is_one_line(reference, tmp_path, name):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    size = (run / name).stat().st_size
    _overwrite_64_bytes(run / name)
    assert (run / name).stat().st_size == size
    fragments = ("corrupt checkpoint", name, "(checksum mismatch)")
    if name == "model.eqx":  # what analyses load (experiment.load_run)
        one_line_error(invoke(["analyze", "lyapunov", "--checkpoint", "run", "-q"], tmp_path), *fragments)
        with pytest.raises(store.CheckpointError, match=r"corrupt checkpoint: .*model\.eqx.* \(checksum mismatch\)"):
            experiment.load_run(run)
    else:  # what --resume loads
        before = {p.name: p.read_bytes() for p in run.iterdir()}
        one_line_error(invoke(["train", "--resume", "run", "-q"], tmp_path), *fragments)
        assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # nothing was touched


def test_run_without_checksums_still_loads_and_resumes(reference, tmp_path):
    """A run directory of an older dynlab (no checksums.toml, no claim) loads and resumes."""
    run = tmp_path / "old"
    shutil.copytree(reference, run)
    (run / store.CHECKSUMS).unlink()
    (run / store.CLAIM).unlink()
    experiment.load_run(run)
    _resume(run, "-q")
    # the files the resume wrote (model.eqx, metrics.nc) are recorded in checksums.toml again
    assert_same_run(run, reference, compared=[n for n in COMPARED if n != store.CHECKSUMS])
    assert set(store.read_checksums(run)) == {"model.eqx", "metrics.nc"}


# ---------------------------------------------------------------------------------------------
# Item 17: --set model.* on --resume


def test_resume_cannot_change_model_structure(reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    err = one_line_error(invoke(["train", "--resume", "run", "--set", "model.hidden=32", "-q"], tmp_path),
                         "--set model.hidden", "hidden = 8", "cannot change a resumed model's structure")
    assert "corrupt" not in err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    # overrides that leave the model as it is are fine (the stored width; a default the config omits)
    _resume(run, "--set", "model.hidden=8", "--set", "model.layers=1", "-q")
    assert_same_run(run, reference)


# ---------------------------------------------------------------------------------------------
# Item 16 (part): dynlab train --data-dir


def test_train_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNLAB_DATA", str(tmp_path / "env"))
    missing = tmp_path / "nonexistent"
    err = one_line_error(invoke(["train", "--task", "smnist", "--data-dir", str(missing), "-q"], tmp_path),
                         f"in data directory {str(missing)!r} (from --data-dir)")
    assert "DYNLAB_DATA" in err  # the message's hint names both ways of pointing at the data
    assert not (tmp_path / "runs").exists()
    assert data.data_dir() == tmp_path / "env"  # the option held for that command only
