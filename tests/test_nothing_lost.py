"""Nothing lost (issue 37): outputs never replace what exists, a run's own files never, nothing
written is unreadable, a refused command leaves no directory, a full disk loses nothing.

Each data-loss case of the issue is checked as a user sees it: the exit status is 2 with one
line on stderr, and the hash of every file that was there is unchanged; with ``--overwrite``,
outside a run's own files, the file is replaced atomically (a new inode, no temporary left).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from cli_runner import invoke, one_line_error
from dynlab import config as cfgmod
from dynlab import store
from dynlab.errors import ConfigError, StorageError

TRAIN = ["train", "--model", "rnn", "--set", "model.hidden=4", "--set", "task.length=6", "--steps", "2",
         "--set", "train.batch_size=4", "--set", "train.eval_size=8", "-q"]
LYAPUNOV = ["analyze", "lyapunov", "--steps", "20", "--k", "1", "--burn-in", "5", "--realisations", "2",
            "--ics", "1", "-q"]
TMP = re.compile(r"^\..+\.\d+\.tmp$")


def hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` (by relative path)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def no_temporaries(folder: Path) -> bool:
    return not [p for p in Path(folder).rglob("*") if TMP.match(p.name)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A folder holding ``r``, a run trained for 2 steps."""
    root = tmp_path_factory.mktemp("nothing-lost")
    res = invoke([*TRAIN, "--out", "r"], root)
    assert res.exit_code == 0, res.output
    return root


@pytest.fixture
def work(trained, tmp_path):
    """A scratch folder with a copy of the trained run ``r``."""
    shutil.copytree(trained / "r", tmp_path / "r")
    return tmp_path


# ---------------------------------------------------------------------------------------------
# An existing output is refused unless --overwrite; with it, replaced atomically


def test_analysis_output_that_exists_is_refused_then_replaced_with_overwrite(work):
    first = invoke([*LYAPUNOV, "--checkpoint", "r", "--out", "prev.nc"], work)
    assert first.exit_code == 0, first.output
    before = hashes(work)
    inodes = {p: (work / p).stat().st_ino for p in ("prev.nc", "prev.png")}
    one_line_error(invoke([*LYAPUNOV, "--checkpoint", "r", "--out", "prev.nc"], work),
                   "--out 'prev.nc' exists", "--overwrite")
    one_line_error(invoke([*LYAPUNOV, "--checkpoint", "r", "--out", "new.nc", "--plot", "prev.png"], work),
                   "--plot 'prev.png' exists")
    assert hashes(work) == before and not (work / "new.nc").exists()
    again = invoke([*LYAPUNOV, "--checkpoint", "r", "--out", "prev.nc", "--overwrite", "--seed", "1"], work)
    assert again.exit_code == 0, again.output
    assert all((work / p).stat().st_ino != inode for p, inode in inodes.items())  # replaced, not written into
    assert xr.load_dataset(work / "prev.nc", engine="h5netcdf").attrs["analysis"] == "lyapunov"
    assert no_temporaries(work)


@pytest.mark.parametrize("command", ["lyapunov", "spectra", "trw", "sta", "perturb", "jacobian-grid",
                                     "fixed-points", "activity", "dsa", "pc-bp"])
def test_every_analyze_command_refuses_an_existing_out_before_any_work(command, work):
    """Hand-written, generated and compare commands share the one check."""
    (work / "prev.nc").write_bytes(b"an earlier result")
    before = hashes(work)
    args = {"dsa": ["analyze", "dsa", "r", "r2"],
            "pc-bp": ["analyze", "pc-bp", "--widths", "4", "--depths", "2", "--task", "toy", "--steps", "1"]
            }.get(command, ["analyze", command, "--model", "rnn", "--set", "model.hidden=4"])
    if command == "dsa":
        shutil.copytree(work / "r", work / "r2")
        before = hashes(work)
    one_line_error(invoke([*args, "--out", "prev.nc", "-q"], work), "--out 'prev.nc' exists")
    assert hashes(work) == before and not (work / "runs").exists()


def test_compare_refuses_an_existing_dataset_or_figure(work):
    tiny = ["compare", "pc-bp", "--widths", "4", "--depths", "2", "--task", "toy", "--steps", "1", "--seeds", "1", "-q"]
    (work / "prev2.nc").write_bytes(b"an earlier result")
    (work / "new_cosine.png").write_bytes(b"an earlier figure")
    before = hashes(work)
    one_line_error(invoke([*tiny, "--out", "prev2.nc"], work), "--out 'prev2.nc' exists")
    one_line_error(invoke([*tiny, "--out", "new.nc"], work), "'new_cosine.png' exists")
    assert hashes(work) == before and not (work / "new.nc").exists()


def test_plot_out_that_exists_is_refused_then_replaced_with_overwrite(work):
    (work / "fig.png").write_bytes(b"an earlier figure")
    before = hashes(work)
    one_line_error(invoke(["plot", "r/metrics.nc", "--out", "fig.png"], work), "--out 'fig.png' exists")
    assert hashes(work) == before
    inode = (work / "fig.png").stat().st_ino
    done = invoke(["plot", "r/metrics.nc", "--out", "fig.png", "--overwrite"], work)
    assert done.exit_code == 0, done.stderr
    assert (work / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (work / "fig.png").stat().st_ino != inode
    # the default figure never replaces one: FILE-2.png beside FILE.png
    (work / "r" / "metrics.png").write_bytes(b"an earlier figure")
    done = invoke(["plot", "r/metrics.nc"], work)
    assert done.exit_code == 0 and (work / "r" / "metrics-2.png").is_file(), done.stderr
    assert (work / "r" / "metrics.png").read_bytes() == b"an earlier figure" and no_temporaries(work)


def test_a_file_that_appears_while_computing_is_kept(tmp_path):
    """The write of a result checked not to replace anything never does, however long it took."""
    ds = xr.Dataset({"x": ("i", [1.0])})
    (tmp_path / "late.nc").write_bytes(b"created while the analysis ran")
    with pytest.raises(FileExistsError):
        store.write_dataset(tmp_path / "late.nc", ds, replace=False)
    assert (tmp_path / "late.nc").read_bytes() == b"created while the analysis ran" and no_temporaries(tmp_path)
    store.write_dataset(tmp_path / "free.nc", ds, replace=False)
    assert xr.load_dataset(tmp_path / "free.nc", engine="h5netcdf").identical(ds) and no_temporaries(tmp_path)


# ---------------------------------------------------------------------------------------------
# A run's or sweep's own files are refused even with --overwrite


def test_a_runs_own_files_are_refused_even_with_overwrite(work):
    before = hashes(work)
    for args, says in [
        (["--out", "r/metrics.nc", "--plot", "r/model.eqx"], "--out 'r/metrics.nc' is the file metrics.nc of the run"),
        (["--out", "x.nc", "--plot", "r/model.eqx"], "--plot 'r/model.eqx' is the file model.eqx of the run"),
        (["--out", "x.nc", "--plot", "r/checkpoint.eqx"], "checkpoint.eqx of the run"),
        (["--out", "r/../r/./metrics.nc"], "metrics.nc of the run"),
        (["--out", "x.nc", "--plot", "r/.claimed"], ".claimed of the run"),
    ]:
        one_line_error(invoke([*LYAPUNOV, "--checkpoint", "r", *args, "--overwrite"], work), says, "even with --overwrite")
    for out in ("r/config.toml", "r/metrics.nc", "r/checksums.toml"):
        one_line_error(invoke(["plot", "r/metrics.nc", "--out", out, "--overwrite"], work), f"--out '{out}' is the file")
    assert hashes(work) == before and not (work / "x.nc").exists()


@pytest.fixture
def sweep_dir(tmp_path):
    """A sweep directory as dynlab.scenarios.sweep writes it (its own names), with one cell."""
    from dynlab.scenarios import sweep

    s = tmp_path / "s"
    (s / "cells" / "abc").mkdir(parents=True)
    (s / sweep.SCENARIO).write_text('name = "s"\n')
    (s / sweep.DIGEST).write_text("0" * 64 + "\n")
    xr.Dataset({"status": ("seed", ["ok"])}, coords={"seed": [0]}, attrs={"analysis": "sweep"}).to_netcdf(
        s / sweep.RESULT, engine="h5netcdf")
    (s / "cells" / "abc" / "lyapunov.nc").write_bytes((s / sweep.RESULT).read_bytes())
    return s


def test_a_sweeps_own_files_are_refused_even_with_overwrite(sweep_dir):
    from dynlab.scenarios import sweep

    named = {getattr(sweep, n) for n in ("SCENARIO", "DIGEST", "RESULT", "FINDINGS", "STOP", "LOCK") if hasattr(sweep, n)}
    assert named | {"cells"} <= store.SWEEP_FILES  # the core's list knows every file the sweep writes
    root = sweep_dir.parent
    before = hashes(root)
    for out in ("s/sweep.nc", "s/scenario.toml", "s/scenario.sha256", "s/cells/abc/x.png", "s/cells/abc/lyapunov.nc"):
        one_line_error(invoke(["plot", "s/sweep.nc", "--out", out, "--overwrite"], root), f"--out '{out}' is ")
    one_line_error(invoke([*LYAPUNOV, "--model", "rnn", "--set", "model.hidden=4", "--out", "s/cells/new.nc"], root),
                   "cells of the sweep directory")
    assert hashes(root) == before


# ---------------------------------------------------------------------------------------------
# A programmed scenario run twice into one --out


def _toy_program(out_dir, progress=None, *, n: int):
    store.write_dataset(Path(out_dir) / "y.nc", xr.Dataset({"y": ("i", np.arange(float(n)))}))
    return {"y": xr.Dataset({"y": ("i", np.arange(float(n)))})}


def test_a_programmed_scenario_never_replaces_an_earlier_run(tmp_path, monkeypatch):
    from dynlab import registry
    from dynlab.scenarios import spec

    monkeypatch.setitem(registry._REGISTRY["program"], "toy", registry.Entry("program", "toy", _toy_program, "toy"))
    (tmp_path / "toy.toml").write_text('name = "toy"\nprogram = "toy"\n[params]\nn = 3\n')
    first = invoke(["run", "toy.toml", "--out", "o", "-q"], tmp_path)
    assert first.exit_code == 0, first.output
    before = hashes(tmp_path / "o")
    one_line_error(invoke(["run", "toy.toml", "--set", "params.n=5", "--out", "o", "-q"], tmp_path),
                   "'o' already holds the results of an earlier dynlab command", "choose another --out")
    with pytest.raises(ConfigError, match="already holds files"):
        spec.load(str(tmp_path / "toy.toml")).run(tmp_path / "o")
    assert hashes(tmp_path / "o") == before


# ---------------------------------------------------------------------------------------------
# Nothing written is unreadable: config values with newlines


@pytest.mark.parametrize("text", ['a[s\n]', 'tab\there', 'quote " and \\ backslash', 'cr\r\x00\x1f\x7f', 'é ∑ 😀', ''])
def test_any_string_in_a_config_reads_back(text, tmp_path):
    config = {"seed": 0, "train": {"freeze": [text], "note": text}, "task": {"name": text}}
    assert tomllib.loads(cfgmod.dumps(config)) == config
    store.write_config(tmp_path, config)
    assert store.read_config(tmp_path) == config


def test_a_config_that_would_not_read_back_is_never_written(tmp_path):
    with pytest.raises(ConfigError, match="would not read back"):
        store.write_config(tmp_path, {"task": {"name": "\udc80"}})  # a lone surrogate: not UTF-8
    assert not (tmp_path / store.CONFIG).exists() and no_temporaries(tmp_path)


def test_a_refused_train_leaves_no_directory_and_the_retry_works(tmp_path):
    refused = invoke([*TRAIN, "--set", 'train.freeze=["a[s\\n]"]', "--out", "r"], tmp_path)
    one_line_error(refused, "train.freeze pattern")
    assert not (tmp_path / "r").exists()
    refused = invoke([*TRAIN, "--set", 'train.freeze=["nothing"]'], tmp_path)  # the default runs/train-…
    one_line_error(refused, "train.freeze pattern")
    assert not (tmp_path / "runs").exists()
    (tmp_path / "empty").mkdir()  # a directory that existed stays, empty
    one_line_error(invoke([*TRAIN, "--set", 'train.freeze=["nothing"]', "--out", "empty"], tmp_path))
    assert (tmp_path / "empty").is_dir() and not list((tmp_path / "empty").iterdir())
    retried = invoke([*TRAIN, "--out", "r"], tmp_path)
    assert retried.exit_code == 0, retried.output


def test_a_refused_reproduce_leaves_no_directory(tmp_path):
    (tmp_path / "data").mkdir()  # the aru paper's scenario needs MNIST: missing here
    for out in ([], ["--out", "o"]):
        res = invoke(["reproduce", "aru", "--data-dir", str(tmp_path / "data"), "-q", *out], tmp_path)
        one_line_error(res, "missing data file")
        assert not (tmp_path / "runs").exists() and not (tmp_path / "o").exists()


def test_release_claim_removes_only_what_this_process_claimed(tmp_path):
    run = store.claim_run_dir(tmp_path / "a" / "b")
    (run / "result.nc").write_text("x")
    assert not store.release_claim(run) and (run / "result.nc").exists()  # holds a result: kept
    (run / "result.nc").unlink()
    (run / store.CLAIM).write_text('pid = 1\nhost = "elsewhere"\ncreated = 2\n')  # another process's claim
    assert not store.release_claim(run) and run.exists()
    shutil.rmtree(tmp_path / "a")
    run = store.claim_run_dir(tmp_path / "a" / "b")
    (run / "scenario" / "runs" / "x").mkdir(parents=True)
    (run / "scenario" / "runs" / "x" / "model.eqx").write_text("x")  # a file deep inside: kept
    assert not store.release_claim(run) and (run / "scenario" / "runs" / "x" / "model.eqx").exists()
    (run / "scenario" / "runs" / "x" / "model.eqx").unlink()  # only empty folders made after the claim: removed
    assert store.release_claim(run) and not (tmp_path / "a").exists() and tmp_path.is_dir()


# ---------------------------------------------------------------------------------------------
# A full disk: one line, every earlier result kept, no temporary left


def _full_disk(path: Path, monkeypatch):
    """Make every plain file write under ``path`` fail with ENOSPC (what a full disk does)."""
    real = Path.write_bytes

    def write_bytes(self, data):
        if str(self.absolute()).startswith(str(path)):
            real(self, data[: len(data) // 2])  # part written, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def test_atomic_write_and_commit_on_a_full_disk_keep_every_file(work, monkeypatch):
    run = work / "r"
    before = hashes(work)
    ds = store.load_metrics(run)
    _full_disk(work, monkeypatch)
    with pytest.raises(StorageError, match=r"cannot write '.*prev\.nc': the file system is full \(.* free\)"):
        store.write_dataset(work / "prev.nc", ds)
    with pytest.raises(StorageError, match="metrics.nc': the file system is full"):
        store.save_metrics(run, ds)  # a commit: metrics.nc and checksums.toml
    assert hashes(work) == before and no_temporaries(work)
    assert store.load_metrics(run).identical(ds)  # still verified against its checksum


def test_an_analysis_onto_a_full_disk_keeps_the_result_and_every_earlier_file(work, monkeypatch):
    (work / "earlier.nc").write_bytes(b"an earlier result")
    before = hashes(work)
    _full_disk(work, monkeypatch)
    res = invoke([*LYAPUNOV, "--checkpoint", "r", "--out", "x.nc"], work)
    err = one_line_error(res, "the file system is full", "it was saved to")
    assert hashes(work) == before and no_temporaries(work)
    rescued = xr.load_dataset(err.rsplit("saved to ", 1)[1], engine="h5netcdf")
    assert rescued.attrs["analysis"] == "lyapunov" and np.isfinite(rescued["mean"].values).all()


def test_a_sweep_onto_a_full_disk_stops_with_one_line_and_keeps_its_finished_cells(tmp_path, monkeypatch):
    from cli_runner import TINY_CELL
    from dynlab.scenarios.cell import MARKER, read_marker

    (tmp_path / "s.toml").write_text('name = "s"\n' + TINY_CELL + "[sweep]\nseed = [0, 1]\n")
    cells = tmp_path / "s" / "cells"
    real = Path.write_bytes

    def write_bytes(self, data):  # the disk fills up once the first cell is finished
        if str(self.absolute()).startswith(str(cells)) and list(cells.glob(f"*/{MARKER}")):
            real(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    one_line_error(invoke(["run", "s.toml", "--out", "s", "-q"], tmp_path), "the file system is full")
    finished = [d for d in cells.iterdir() if (d / MARKER).exists()]
    assert len(finished) == 1 and read_marker(finished[0])["status"] == "ok"  # intact: its files match its marker
    assert no_temporaries(tmp_path / "s") and not (tmp_path / "s" / "sweep.nc").exists()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs (root only; skipped where it cannot be mounted)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_an_analysis_onto_a_real_full_disk(work, tiny_disk):
    (tiny_disk / "earlier.bin").write_bytes(os.urandom(40_000))
    before = hashes(tiny_disk)
    res = invoke([*LYAPUNOV, "--checkpoint", "r", "--out", str(tiny_disk / "x.nc")], work)
    err = one_line_error(res, "the file system is full", "it was saved to")
    assert hashes(tiny_disk) == before and no_temporaries(tiny_disk)
    assert xr.load_dataset(err.rsplit("saved to ", 1)[1], engine="h5netcdf").attrs["analysis"] == "lyapunov"


# ---------------------------------------------------------------------------------------------
# A computed value is never lost at write time


def test_attributes_netcdf_cannot_hold_are_written_as_text(tmp_path):
    ds = xr.Dataset({"x": ("i", [1.0, 2.0], {"flag": True, "huge": 10**20})},
                    attrs={"reortho_every": 99999999999999999999, "none": None, "table": {"a": 1}, "mixed": [1, "a"],
                           "ok": 3, "floats": [0.5, 1.5], "names": ["a", "b"]})
    store.write_dataset(tmp_path / "d.nc", ds)
    back = xr.load_dataset(tmp_path / "d.nc", engine="h5netcdf")
    assert back.attrs["reortho_every"] == "99999999999999999999" and back.x.attrs["huge"] == "100000000000000000000"
    assert back.x.attrs["flag"] == 1 and back.attrs["ok"] == 3 and list(back.attrs["floats"]) == [0.5, 1.5]
    assert back.attrs["names"] == ["a", "b"] and back.attrs["mixed"] == "[1, 'a']"
    np.testing.assert_array_equal(back.x.values, [1.0, 2.0])
    assert ds.attrs["reortho_every"] == 99999999999999999999  # the caller's dataset is left as it was


def test_an_absurd_option_value_loses_no_computed_result(work):
    """Refused where it is parsed, or computed and written: never computed and then lost."""
    res = invoke([*LYAPUNOV, "--checkpoint", "r", "--out", "l.nc", "--reortho-every", "99999999999999999999"], work)
    if res.exit_code == 2:
        one_line_error(res, "--reortho-every")
        assert not (work / "l.nc").exists()
    else:
        assert res.exit_code == 0, res.output
        assert xr.load_dataset(work / "l.nc", engine="h5netcdf").attrs["analysis"] == "lyapunov"


def test_a_table_for_a_whole_section_sets_its_keys_and_keeps_the_unit(tmp_path):
    """#37: ``--model rnn --set 'model={hidden=8}'`` trained the default ARU (the table replaced the
    section, --model's unit with it). A section's table sets its keys; a program's dict parameter
    is still replaced whole."""
    from dynlab.config import apply_sets

    assert apply_sets({"model": {"unit": "rnn"}}, ["model={hidden=8}"]) == {"model": {"unit": "rnn", "hidden": 8}}
    assert apply_sets({"params": {"networks": {"a": 1, "b": 2}}}, ["params.networks={a=3}"]) == {
        "params": {"networks": {"a": 3}}}
    r = invoke(["train", "--model", "rnn", "--set", "model={hidden=8}", "--steps", "1", "--out", "r", "-q"], tmp_path)
    assert r.exit_code == 0, r.output
    from dynlab import store

    assert store.read_config(tmp_path / "r")["model"] == {"unit": "rnn", "hidden": 8}
