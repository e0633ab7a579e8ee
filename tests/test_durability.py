"""Training runs survive faults (issue 17: items 3, 4, 14, 16, 17).

``kill -9`` of ``dynlab train`` at any moment, then ``--resume``, gives the files of an
uninterrupted run; two processes never share a run directory; a corrupted array file is a
one-line "corrupt checkpoint" error; ``--set model.*`` cannot change a resumed model; ``train``
takes ``--data-dir``.

The kills are real: a subprocess runs ``dynlab train`` with ``$DYNLAB_TEST_KILL_AT`` (the test
hook [`dynlab.store.fault_point`][]), which SIGKILLs it at a named moment; the resumes and the
uninterrupted reference run in-process. Subprocesses share a JAX compilation cache (the same
compiled programs, faster start) and run two at a time.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import xarray as xr

from cli_runner import invoke, one_line_error
from dynlab import data, experiment, store
from dynlab.errors import ConfigError

TRAIN = ["train", "--model", "rnn", "--task", "adding", "--set", "model.hidden=8", "--steps", "60",
         "--set", "train.checkpoint_every=10", "--set", "train.eval_every=20", "--set", "train.log_every=5",
         "--set", "train.batch_size=8", "--set", "train.eval_size=16", "-q"]
COMPARED = ("checkpoint.eqx", "model.eqx", "metrics.nc", "checksums.toml", "config.toml")
TMP = re.compile(r"^\..+\.\d+\.tmp$")

# (moment, n) of the test hook, in the order a 60-step run reaches them (checkpoints every 10 steps,
# chunks of 5 steps, evaluations every 20; commit 1 is step 0's checkpoint, commit 7 step 60's,
# commit 8 the final metrics).
MOMENTS = [
    ("config", 2),                    # config.toml written, no checkpoint yet: resume starts at step 0
    ("replaced-checkpoint.eqx", 1),   # step 0's checkpoint in place, no model.eqx yet
    ("eval", 2),                      # between checkpoints: evaluation at step 20 recorded, no checkpoint
    ("tmp-written", 13),              # inside a commit: temporaries written, nothing moved yet
    ("checksums-pending", 4),         # checksums.toml lists old and new digests
    ("replaced-metrics.nc", 3),       # metrics.nc newer than checkpoint.eqx
    ("replaced-checkpoint.eqx", 4),   # model.eqx older than checkpoint.eqx
    ("replaced-checkpoint.eqx", 7),   # the final checkpoint in place, model.eqx stale: nothing left to train
    ("replaced-metrics.nc", 7),       # the final metrics written, checksums not settled
    ("tmp-written", 40),              # learning_curve.png half done
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("jax-cache")


def _env(cache: Path, kill: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != store.KILL_ENV}
    env.update(JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    if kill is not None:
        env[store.KILL_ENV] = kill
    return env


def _start(cwd: Path, out: str, cache: Path, kill: str | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dynlab.cli", *TRAIN, "--out", out], cwd=cwd, env=_env(cache, kill),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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


def test_kill_at_each_moment_then_resume_gives_identical_files(reference, cache, tmp_path):
    def killed(i_moment):
        i, (moment, n) = i_moment
        out = f"k{i}"
        proc = _start(tmp_path, out, cache, kill=f"{moment}:{n}")
        _, err = proc.communicate(timeout=120)
        return out, moment, n, proc.returncode, err

    moments = list(enumerate(MOMENTS))
    first = killed(moments[-1])  # one that compiles everything fills the compilation cache alone; then two at a time
    with ThreadPoolExecutor(2) as pool:
        runs = [first, *pool.map(killed, moments[:-1])]
    for out, moment, n, rc, err in runs:
        what = f"killed at {moment}:{n}"
        assert rc == -9, f"{what}: the process was not killed there (exit {rc}): {err}"
        res = _resume(tmp_path / out)
        assert "Traceback" not in res.stderr, what
        assert_same_run(tmp_path / out, reference, what)


def test_random_kills_then_resume(reference, cache, tmp_path):
    """kill -9 at random times after metrics.nc appears (two runs at a time, ~10 s), then resume.

    Every kill moment is covered deterministically by the test above; this one adds random
    timings, as many as fit in ~10 s of the suite's time budget (it was 20 s: the suite must stay
    under CI's 15 minutes with the README and paper-preset tests added)."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    start, pair_seconds, i, results = time.monotonic(), 0.0, 0, []

    def one(k):
        out = f"r{k}"
        proc = _start(tmp_path, out, cache)
        while not (tmp_path / out / "metrics.nc").exists() and proc.poll() is None:
            time.sleep(0.005)
        delay = rng.uniform(0, 1.6)  # the run lives ~1.5 s more
        time.sleep(delay)
        proc.kill()
        proc.communicate()
        return out, delay

    while i == 0 or time.monotonic() - start + pair_seconds < 10:  # at least one pair; ~10 s in all
        t0 = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            results += list(pool.map(one, (i, i + 1)))
        i, pair_seconds = i + 2, time.monotonic() - t0
    for out, delay in results:
        _resume(tmp_path / out)
        assert_same_run(tmp_path / out, reference, f"killed {delay:.3f} s after metrics.nc appeared (seed {seed})")


def test_resume_says_where_it_continues(reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    res = _resume(run)
    assert f"resuming {run} from step 60 of 60" in res.output
    assert "resuming" not in _resume(run, "-q").output
    assert_same_run(run, reference)


# ---------------------------------------------------------------------------------------------
# Item 4: a run directory is claimed atomically


def test_two_processes_same_out_exactly_one_wins(reference, cache, tmp_path):
    procs = [_start(tmp_path, "runs/dup", cache) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], (codes, outs)
    err = next(e for p, (_, e) in zip(procs, outs) if p.returncode == 2).strip()
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
