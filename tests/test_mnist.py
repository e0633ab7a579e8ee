"""Sequential MNIST tasks on small IDX files written here: permutation, down-sampling, splits, errors."""

import jax
import numpy as np
import pytest

import dynlab
from dynlab import experiment
from dynlab.errors import DataError
from dynlab.idx import write_idx
from cli_runner import invoke


def write_mnist(root, stem, images, labels, gz=True):
    (root / "mnist").mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    write_idx(root / "mnist" / f"{stem}-images-idx3-ubyte{suffix}", images.astype(np.uint8))
    write_idx(root / "mnist" / f"{stem}-labels-idx1-ubyte{suffix}", labels.astype(np.uint8))


@pytest.fixture(scope="module")
def blocks_dir(tmp_path_factory):
    """40 identical images whose 2x2 blocks are constant and hold their block index 0..195."""
    root = tmp_path_factory.mktemp("mnist_blocks")
    block = np.arange(196).reshape(14, 14)
    image = np.kron(block, np.ones((2, 2), dtype=int))
    write_mnist(root, "t10k", np.repeat(image[None], 40, axis=0), np.arange(40) % 10)
    return root


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mnist_random")
    rng = np.random.default_rng(0)
    write_mnist(root, "t10k", rng.integers(0, 256, (30, 28, 28)), rng.integers(0, 10, 30), gz=False)
    return root


def build(name, root, **kw):
    return dynlab.build("task", name, data_dir=str(root), test_size=10, standardize=False, **kw)


def test_permutation_is_a_seeded_bijection(blocks_dir):
    plain = build("smnist", blocks_dir, downsample=2)
    np.testing.assert_allclose(np.asarray(plain.x_train[0]) * 255, np.arange(196), atol=1e-3)
    perms = {}
    for seed in (0, 0, 7):
        task = build("psmnist", blocks_dir, downsample=2, perm_seed=seed)
        perm = np.rint(np.asarray(task.x_train[0]) * 255).astype(int)
        np.testing.assert_array_equal(np.sort(perm), np.arange(196))  # a bijection of the 196 positions
        np.testing.assert_array_equal(np.rint(np.asarray(task.x_test) * 255), np.broadcast_to(perm, (10, 196)))
        np.testing.assert_array_equal(perm, np.asarray(jax.random.permutation(jax.random.key(seed), 196)))
        if seed in perms:
            np.testing.assert_array_equal(perm, perms[seed])
        perms[seed] = perm
    assert not np.array_equal(perms[0], perms[7]) and not np.array_equal(perms[0], np.arange(196))


def test_downsampling_is_the_block_mean(random_dir):
    from dynlab.tasks.mnist import read_mnist

    images, _, _ = read_mnist("t10k", random_dir)
    task = build("smnist", random_dir, downsample=4, split_seed=3)
    order = np.asarray(jax.random.permutation(jax.random.key(3), 30))[10:]  # the documented split
    by_hand = np.zeros((20, 7, 7))
    for n, i in enumerate(order):
        for r in range(7):
            for c in range(7):
                by_hand[n, r, c] = sum(int(images[i, 4 * r + a, 4 * c + b]) for a in range(4) for b in range(4)) / 16 / 255
    np.testing.assert_allclose(np.asarray(task.x_train), by_hand.reshape(20, 49), rtol=1e-6)
    std = dynlab.build("task", "smnist", data_dir=str(random_dir), test_size=10, downsample=4, split_seed=3)
    np.testing.assert_allclose(np.asarray(std.x_train), (by_hand.reshape(20, 49) - 0.1307) / 0.3081, rtol=1e-5, atol=1e-6)
    assert task.length == 49 and task.input_size == 1 and task.output_size == 10


def test_rotation_by_90_degrees_is_rot90(random_dir):
    from dynlab.tasks.mnist import read_mnist

    images = read_mnist("t10k", random_dir)[0][:3].astype(np.float32)
    from dynlab.tasks.mnist import rotate_images

    np.testing.assert_allclose(rotate_images(images, 90.0), np.rot90(images, 1, axes=(1, 2)), atol=1e-4)


def test_splits_batches_and_recorded_config(tmp_path, random_dir):
    task = build("psmnist", random_dir, downsample=7)
    x, y, mask = task.batch(jax.random.key(1), 10, split="test")
    assert x.shape == (10, 16, 1) and mask.shape == (10, 16) and float(mask[:, :-1].sum()) == 0 and float(mask[:, -1].sum()) == 10
    rows = lambda a: {tuple(r) for r in np.asarray(a)}  # noqa: E731
    assert rows(x[:, :, 0]) == rows(task.x_test)  # a full test batch sees each test digit once
    assert not rows(task.x_test) & rows(task.x_train)  # disjoint split
    rng = np.random.default_rng(1)
    write_mnist(tmp_path, "train", rng.integers(0, 256, (12, 28, 28)), rng.integers(0, 10, 12))
    write_mnist(tmp_path, "t10k", rng.integers(0, 256, (5, 28, 28)), rng.integers(0, 10, 5))
    both = build("smnist", tmp_path, downsample=14)
    assert both.x_train.shape == (12, 4) and both.x_test.shape == (5, 4) and "train/t10k" in both.describe()
    exp = experiment.build({"model": {"unit": "rnn", "hidden": 3}, "task": {"name": "psmnist", "data_dir": str(random_dir),
                                                                           "test_size": 10, "downsample": 14}})
    assert exp.config["task"]["perm_seed"] == 0 and exp.config["task"]["downsample"] == 14  # recorded in run configs


def test_missing_files_name_the_files_and_directory(tmp_path):
    with pytest.raises(DataError, match=r"missing data file 'mnist/t10k-images-idx3-ubyte\.gz' .* in data directory '.*empty'"):
        dynlab.build("task", "psmnist", data_dir=str(tmp_path / "empty"))
    res = invoke(["train", "--task", "psmnist", "--set", f"task.data_dir=\"{tmp_path / 'empty'}\"", "-q"], tmp_path)
    assert res.exit_code == 2 and "missing data file 'mnist/t10k-images-idx3-ubyte.gz'" in res.output
    assert "Traceback" not in res.output
