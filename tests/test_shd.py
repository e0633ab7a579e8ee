"""SHD / SHD-Adding: the HDF5 schema, binning, adding labels, splits, the synthetic stand-in, bad files.

The fixture files are written here with h5py in exactly the published schema. Expected inputs
come from a per-spike Python loop (and, for one sample, from counting by hand), independent of
the task's vectorised binning and in-jit densification.
"""

import warnings

import equinox as eqx
import h5py
import jax
import numpy as np
import pytest

from cli_runner import invoke
from dynlab.errors import DataError
from dynlab.tasks.shd import SHDAddingTask, SHDTask, find_shd_files, read_shd, synthetic_shd

BIN_MS, DURATION_MS = 4.0, 20.0  # 5 bins
# sample 0 of the training file, binned by hand (bin = floor(t / 4 ms), t >= 20 ms dropped):
# t = 0.5, 3.1, 3.9 ms on channel 3 -> bin 0 (count 3); 12.1 ms ch 699 -> bin 3; 19.9 ms ch 400 -> bin 4; 25 ms dropped
SAMPLE0 = (np.array([0.0005, 0.0031, 0.0039, 0.0121, 0.0199, 0.0250]), np.array([3, 3, 3, 699, 400, 5]))
SAMPLE0_POOLED = np.array([[3, 0], [0, 0], [0, 0], [0, 1], [0, 1]])  # channel_pool = 350: channels 0-349, 350-699
TRAIN_SPEAKERS, TEST_SPEAKERS = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0], [1, 2, 7, 8, 7, 8]
TRAIN_LABELS, TEST_LABELS = [3, 17, 9, 12, 0, 19, 5, 14, 8, 11], [2, 13, 6, 19, 10, 4]
draw = eqx.filter_jit(lambda task, key, n, split: task.batch(key, n, split))  # jit-able; one compile per task kind


def _samples(n, rng):
    return [(np.sort(rng.uniform(0, 0.026, k)), rng.integers(0, 700, k)) for k in rng.integers(5, 40, n)]


def write_shd(path, samples, labels, speakers):
    """An SHD file: vlen spike times (float) and units (uint16), labels and extra/speaker (uint16)."""
    with h5py.File(path, "w") as f:
        times = f.create_dataset("spikes/times", (len(samples),), dtype=h5py.vlen_dtype(np.float32))
        units = f.create_dataset("spikes/units", (len(samples),), dtype=h5py.vlen_dtype(np.uint16))
        for i, (t, u) in enumerate(samples):
            times[i], units[i] = t.astype(np.float32), u.astype(np.uint16)
        f.create_dataset("labels", data=np.asarray(labels, np.uint16))
        f.create_dataset("extra/speaker", data=np.asarray(speakers, np.uint16))


def expected_counts(t, u, pool=1):
    """Binned counts by a plain loop over spikes."""
    grid = np.zeros((5, -(-700 // pool)))
    for ti, ui in zip(np.asarray(t, np.float32).astype(np.float64), u):
        b = int(np.floor(ti * 1000.0 / BIN_MS))
        if b < 5:
            grid[b, ui // pool] += 1
    return grid


@pytest.fixture(scope="module")
def shd_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "shd").mkdir()
    rng = np.random.default_rng(0)
    train = [SAMPLE0] + _samples(9, rng)
    test = _samples(6, rng)
    write_shd(root / "shd" / "shd_train.h5", train, TRAIN_LABELS, TRAIN_SPEAKERS)
    write_shd(root / "shd" / "shd_test.h5", test, TEST_LABELS, TEST_SPEAKERS)
    expected = np.stack([expected_counts(t, u) for t, u in train + test])
    assert len({e.tobytes() for e in expected}) == len(expected)  # every sample identifiable by its input
    return root, expected


def build(kind, root, **kw):
    return kind(bin_ms=BIN_MS, duration_ms=DURATION_MS, source="file", data_dir=str(root), **kw)


def identify(x, expected):
    """Index of the fixture sample whose binned counts are exactly ``x``."""
    hits = np.flatnonzero((expected == np.asarray(x)[None]).all(axis=(1, 2)))
    assert len(hits) == 1
    return int(hits[0])


def test_schema_round_trip_and_hand_binned_counts(shd_dir):
    root, expected = shd_dir
    spikes = read_shd(root / "shd" / "shd_train.h5")
    assert len(spikes) == 10 and list(spikes.labels) == TRAIN_LABELS and list(spikes.speakers) == TRAIN_SPEAKERS
    np.testing.assert_allclose(spikes.times[:6], SAMPLE0[0], rtol=1e-6)  # float32 in the file
    np.testing.assert_array_equal(spikes.units[:6], SAMPLE0[1])
    task = build(SHDTask, root)
    dense0 = np.asarray(task.dense(0))
    assert dense0.shape == (5, 700) and dense0.sum() == 5
    assert dense0[0, 3] == 3 and dense0[3, 699] == 1 and dense0[4, 400] == 1
    pooled = build(SHDTask, root, channel_pool=350)
    np.testing.assert_array_equal(np.asarray(pooled.dense(0)), SAMPLE0_POOLED)
    binary = build(SHDTask, root, binary=True)
    assert np.asarray(binary.dense(0))[0, 3] == 1
    for i in range(16):  # every sample of both files against the per-spike loop
        np.testing.assert_array_equal(np.asarray(task.dense(i)), expected[i])


def test_shd_batches_draw_binned_samples_with_their_labels(shd_dir):
    root, expected = shd_dir
    task = build(SHDTask, root)
    x, y, mask = draw(task, jax.random.key(0), 64, "train")
    assert x.shape == (64, 5, 700) and task.input_size == 700 and task.output_size == 20
    labels = np.array(TRAIN_LABELS + TEST_LABELS)
    train_split = set(np.asarray(task.splits["train"]).tolist())
    for xb, yb in zip(np.asarray(x), np.asarray(y)):
        i = identify(xb, expected)
        assert i in train_split and yb == labels[i]
    np.testing.assert_array_equal(np.asarray(mask), np.eye(5)[[-1] * 64])


def test_adding_pairs_two_digits_end_to_end_and_labels_their_sum(shd_dir):
    root, expected = shd_dir
    task = build(SHDAddingTask, root)
    assert task.length == 10 and task.output_size == 19
    x, y, mask = draw(task, jax.random.key(1), 64, "test")
    labels = np.array(TRAIN_LABELS + TEST_LABELS)
    pairs = []
    for xb, yb in zip(np.asarray(x), np.asarray(y)):
        i, j = identify(xb[:5], expected), identify(xb[5:], expected)  # first digit, then the second
        assert i >= 10 and j >= 10  # both from the test file
        assert yb == labels[i] % 10 + labels[j] % 10
        pairs.append((i, j))
    assert len({i for i, _ in pairs}) > 3 and any(i != j for i, j in pairs)  # independent draws
    assert np.all(np.asarray(mask)[:, -1] == 1) and np.asarray(mask).sum() == 64
    # chance: the most frequent digit sum under the training split's digit frequencies
    digits = np.array(TRAIN_LABELS)[np.asarray(task.splits["train"])] % 10
    p = np.bincount(digits, minlength=10) / len(digits)
    best = max(sum(p[a] * p[s - a] for a in range(10) if 0 <= s - a < 10) for s in range(19))
    assert task.chance == pytest.approx(best)


def test_splits_are_disjoint_and_heldout_speakers_are_unseen(shd_dir):
    root, expected = shd_dir
    task = build(SHDTask, root)
    split = {k: set(np.asarray(v).tolist()) for k, v in task.splits.items()}
    assert split["train"] | split["validation"] == set(range(10)) and not split["train"] & split["validation"]
    assert len(split["validation"]) == 2  # 20 % of 10
    assert split["test"] == set(range(10, 16))
    speakers = np.asarray(task.speakers)
    np.testing.assert_array_equal(speakers, TRAIN_SPEAKERS + TEST_SPEAKERS)
    assert split["heldout"] == {12, 13, 14, 15}  # test samples of speakers 7 and 8, absent from training
    assert not {speakers[i] for i in split["heldout"]} & {speakers[i] for i in split["train"] | split["validation"]}
    x, _, _ = draw(task, jax.random.key(2), 64, "heldout")
    assert {identify(xb, expected) for xb in np.asarray(x)} <= split["heldout"]
    other = build(SHDTask, root, seed=1)
    assert set(np.asarray(other.splits["validation"]).tolist()) != split["validation"]  # seeded


def test_synthetic_set_has_the_files_interface_and_unseen_speakers():
    train, test = synthetic_shd(3, 60, 40)
    again, _ = synthetic_shd.__wrapped__(3, 60, 40)
    np.testing.assert_array_equal(train.times, again.times)  # seeded
    for s in (train, test):
        assert s.units.min() >= 0 and s.units.max() < 700 and set(np.unique(s.labels)) <= set(range(20))
        t, sample = s.times, s.sample_of_event
        assert np.all((np.diff(t) >= 0) | (np.diff(sample) > 0))  # sorted by time within each sample
    assert set(train.speakers) == set(range(10)) and {10, 11} <= set(test.speakers)


def test_missing_files_fall_back_to_synthetic_with_one_warning(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = SHDAddingTask(data_dir=str(tmp_path), synthetic_samples=40, bin_ms=100.0)
    assert [str(w.message).startswith("SHD files not found, using the synthetic") for w in caught] == [True]
    assert "synthetic" in task.describe() and task.splits["heldout"].shape[0] > 0
    with pytest.raises(DataError, match=r"searched .*shd.*shd_\*\.h5.* and "):
        SHDTask(data_dir=str(tmp_path), source="file")


def test_bad_files_are_one_line_data_errors(shd_dir, tmp_path):
    root, _ = shd_dir
    good = (root / "shd" / "shd_train.h5").read_bytes()
    (tmp_path / "shd_train.h5").write_bytes(good[: len(good) // 2])  # truncated, found in the data dir itself
    (tmp_path / "shd_test.h5").write_bytes(good)
    assert find_shd_files(tmp_path)[0] == tmp_path / "shd_train.h5"
    with pytest.raises(DataError, match="cannot read as HDF5"):
        SHDTask(source="file", data_dir=str(tmp_path))
    with h5py.File(tmp_path / "shd_train.h5", "w") as f:  # wrong schema: no speakers
        f.create_dataset("spikes/times", (1,), dtype=h5py.vlen_dtype(np.float32))
        f.create_dataset("spikes/units", (1,), dtype=h5py.vlen_dtype(np.uint16))
        f.create_dataset("labels", data=np.zeros(1, np.uint16))
    with pytest.raises(DataError, match="missing extra/speaker"):
        read_shd(tmp_path / "shd_train.h5")
    result = invoke(["train", "--model", "gru", "--task", "shd", "--steps", "1", "--set", "task.source='file'",
                     "--set", f"task.data_dir='{tmp_path}'"], tmp_path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "not an SHD file: missing extra/speaker" in lines[0]
