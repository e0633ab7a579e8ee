"""Fashion-MNIST (IDX, MNIST's layout) and CIFAR-10 (binary version) read from tiny files in the
published byte layouts: exact values, the tasks built on them, and bad files as one-line errors
with exit status 2 (issue 20, item 5)."""

import gzip

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from cli_runner import invoke, one_line_error
from dynlab.cifar import RECORD, parse_cifar, read_cifar, write_cifar
from dynlab.errors import ConfigError, DataError
from dynlab.idx import write_idx
from dynlab.tasks.mnist import read_mnist

FASHION_MEAN, FASHION_STD = 0.2860, 0.3530


def write_fashion(root, stem, images, labels, gz=True):
    (root / "fashion-mnist").mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if gz else ""
    write_idx(root / "fashion-mnist" / f"{stem}-images-idx3-ubyte{suffix}", np.asarray(images, np.uint8))
    write_idx(root / "fashion-mnist" / f"{stem}-labels-idx1-ubyte{suffix}", np.asarray(labels, np.uint8))


def cifar_bytes(images_hwc, labels):
    """The CIFAR-10 binary layout built from the format's description, independently of the reader:
    per record the label byte, then the red plane, the green plane, the blue plane, each row-major."""
    out = bytearray()
    for image, label in zip(images_hwc, labels):
        out.append(int(label))
        for c in range(3):
            for i in range(32):
                for j in range(32):
                    out.append(int(image[i, j, c]))
    return bytes(out)


def write_cifar_dir(root, train, test):
    """``train``: five ``(images[n, 32, 32, 3], labels)``; ``test``: one. Returns the folder."""
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True, exist_ok=True)
    for k, (images, labels) in enumerate(train, 1):
        write_cifar(folder / f"data_batch_{k}.bin", images.transpose(0, 3, 1, 2), labels)
    write_cifar(folder / "test_batch.bin", test[0].transpose(0, 3, 1, 2), test[1])
    return folder


@pytest.fixture(scope="module")
def fashion_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fashion")
    rng = np.random.default_rng(0)
    images, labels = rng.integers(0, 256, (24, 28, 28)), rng.integers(0, 10, 24)
    write_fashion(root, "t10k", images, labels)
    return root, images.astype(np.uint8), labels.astype(np.uint8)


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory):
    """Five training files of 4 images and a test file of 3, random bytes (images as [n, 32, 32, 3])."""
    root = tmp_path_factory.mktemp("cifar")
    rng = np.random.default_rng(1)
    train = [(rng.integers(0, 256, (4, 32, 32, 3)), rng.integers(0, 10, 4)) for _ in range(5)]
    test = (rng.integers(0, 256, (3, 32, 32, 3)), rng.integers(0, 10, 3))
    write_cifar_dir(root, train, test)
    return root, train, test


# ---- Fashion-MNIST: MNIST's files and reader, another folder and other statistics --------------------

def test_fashion_mnist_is_read_from_its_folder_exactly(fashion_dir, tmp_path):
    root, images, labels = fashion_dir
    got, got_labels, path = read_mnist("t10k", root, dataset="fashion-mnist")
    np.testing.assert_array_equal(got, images)
    np.testing.assert_array_equal(got_labels, labels)
    assert path == root / "fashion-mnist" / "t10k-images-idx3-ubyte.gz"
    write_fashion(tmp_path, "t10k", images[:5], labels[:5], gz=False)  # uncompressed files are read too
    np.testing.assert_array_equal(read_mnist("t10k", tmp_path, dataset="fashion-mnist")[0], images[:5])
    with pytest.raises(DataError, match=r"missing data file 'mnist/t10k-images-idx3-ubyte\.gz'"):
        read_mnist("t10k", tmp_path)  # the MNIST folder is another one


def test_fashion_mnist_tasks(fashion_dir):
    root, images, labels = fashion_dir
    common = dict(dataset="fashion-mnist", data_dir=str(root), test_size=4, split_seed=2)
    task = dynlab.build("task", "smnist", downsample=1, standardize=False, **common)
    order = np.asarray(jax.random.permutation(jax.random.key(2), 24))  # the documented t10k split
    np.testing.assert_array_equal(np.asarray(task.x_test), images[order[:4]].reshape(4, 784) / np.float32(255))
    np.testing.assert_array_equal(np.asarray(task.y_train), labels[order[4:]])
    assert "Fashion-MNIST t10k split 20/4" in task.describe()
    std = dynlab.build("task", "psmnist", downsample=14, perm_seed=1, **common)
    blocks = images[order[4:]].reshape(20, 2, 14, 2, 14).mean(axis=(2, 4)).reshape(20, 4) / 255
    perm = np.asarray(jax.random.permutation(jax.random.key(1), 4))
    np.testing.assert_allclose(np.asarray(std.x_train), ((blocks - FASHION_MEAN) / FASHION_STD)[:, perm], rtol=1e-5, atol=1e-6)
    x, y, mask = std.batch(jax.random.key(0), 3, split="test")
    assert x.shape == (3, 4, 1) and mask.shape == (3, 4) and set(np.asarray(y)) <= set(labels[order[:4]])

    pc = dynlab.build("task", "pc-mnist", dataset="fashion-mnist", source="file", batch=4, seed=3, data_dir=str(root))
    order = np.asarray(jax.random.permutation(jax.random.key(3), 24))
    flat = images.reshape(24, 784)
    expected = (jnp.asarray(flat[order[:4]], jnp.float32) / 255.0 - FASHION_MEAN) / FASHION_STD
    np.testing.assert_allclose(np.asarray(pc.x_train), np.asarray(expected), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(pc.y_test), np.eye(10)[labels[order[4:8]]])
    assert pc.input_size == 784 and "Fashion-MNIST t10k split" in pc.describe()


# ---- CIFAR-10 binary: the record layout --------------------------------------------------------------

def test_cifar_records_are_label_then_red_green_blue_planes_row_major(tmp_path):
    rng = np.random.default_rng(2)
    hwc, labels = rng.integers(0, 256, (3, 32, 32, 3)), np.array([7, 0, 9])
    raw = cifar_bytes(hwc, labels)
    assert len(raw) == 3 * 3073 == 3 * RECORD
    images, got_labels = parse_cifar(raw)
    assert images.shape == (3, 3, 32, 32) and images.dtype == np.uint8
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_array_equal(images, hwc.transpose(0, 3, 1, 2))  # images[r, c, i, j] = pixel (i, j), channel c
    r, c, i, j = 2, 1, 5, 30
    assert images[r, c, i, j] == raw[3073 * r + 1 + 1024 * c + 32 * i + j]  # the documented byte offset
    write_cifar(tmp_path / "b.bin", images, labels)
    assert (tmp_path / "b.bin").read_bytes() == raw  # the test-file writer writes the same bytes
    np.testing.assert_array_equal(read_cifar(tmp_path / "b.bin")[0], images)


def test_scifar10_shows_pixels_in_reading_order_with_three_channels(tmp_path):
    picture = np.zeros((32, 32, 3), np.uint8)
    picture[0, :, 0] = 255  # a red top row
    picture[:, 0, 1] = 255  # a green left column
    picture[31, 31, 2] = 255  # one blue pixel, bottom right
    rng = np.random.default_rng(3)
    batch = lambda: (np.concatenate([picture[None], rng.integers(0, 256, (1, 32, 32, 3))]), np.array([3, 5]))  # noqa: E731
    write_cifar_dir(tmp_path, [batch() for _ in range(5)], batch())
    task = dynlab.build("task", "scifar10", standardize=False, data_dir=str(tmp_path), train_batches=1)
    seq = np.asarray(task.x_train[0])
    assert seq.shape == (1024, 3) and task.length == 1024 and task.input_size == 3
    np.testing.assert_array_equal(seq[:32, 0], 1.0)  # steps 0..31: the top row
    np.testing.assert_array_equal(seq[32:, 0], 0.0)
    np.testing.assert_array_equal(np.flatnonzero(seq[:, 1]), np.arange(0, 1024, 32))  # the first pixel of every row
    np.testing.assert_array_equal(np.flatnonzero(seq[:, 2]), [1023])  # the last step
    gray = dynlab.build("task", "scifar10", standardize=False, grayscale=True, downsample=16, data_dir=str(tmp_path))
    luma = np.float32(0.299) * picture[..., 0] + np.float32(0.587) * picture[..., 1] + np.float32(0.114) * picture[..., 2]
    blocks = (luma / 255).reshape(2, 16, 2, 16).mean(axis=(1, 3)).reshape(4)
    np.testing.assert_allclose(np.asarray(gray.x_train[0, :, 0]), blocks, rtol=1e-6)
    assert gray.x_train.shape == (10, 4, 1) and "grayscale 5/5 training files" in gray.describe()


def test_scifar10_files_splits_standardisation_and_batches(cifar_dir):
    root, train, test = cifar_dir
    task = dynlab.build("task", "scifar10", downsample=8, data_dir=str(root))
    images = np.concatenate([im for im, _ in train])  # data_batch_1 .. 5, in that order
    np.testing.assert_array_equal(np.asarray(task.y_train), np.concatenate([lab for _, lab in train]))
    np.testing.assert_array_equal(np.asarray(task.y_test), test[1])
    pixels = images / 255.0
    mean, std = pixels.mean(axis=(0, 1, 2)), pixels.std(axis=(0, 1, 2))  # per channel, over the training images
    blocks = pixels.reshape(20, 4, 8, 4, 8, 3).mean(axis=(2, 4)).reshape(20, 16, 3)  # reading order of the 4x4 blocks
    np.testing.assert_allclose(np.asarray(task.x_train), (blocks - mean) / std, rtol=1e-4, atol=1e-5)
    test_blocks = (test[0] / 255.0).reshape(3, 4, 8, 4, 8, 3).mean(axis=(2, 4)).reshape(3, 16, 3)
    np.testing.assert_allclose(np.asarray(task.x_test), (test_blocks - mean) / std, rtol=1e-4, atol=1e-5)
    x, y, mask = task.batch(jax.random.key(0), 3, split="test")
    assert x.shape == (3, 16, 3) and mask.shape == (3, 16) and float(mask[:, -1].sum()) == 3 and float(mask.sum()) == 3
    assert sorted(np.asarray(y).tolist()) == sorted(test[1].tolist())  # a full test batch sees each image once
    assert (task.length, task.input_size, task.output_size, task.loss) == (16, 3, 10, "ce_last")
    two = dynlab.build("task", "scifar10", downsample=32, train_batches=2, data_dir=str(root))
    np.testing.assert_array_equal(np.asarray(two.y_train), np.concatenate([train[0][1], train[1][1]]))


def test_pc_cifar10_is_a_fixed_batch_of_flat_records(cifar_dir):
    root, train, _ = cifar_dir
    task = dynlab.build("task", "pc-cifar10", batch=4, seed=5, source="file", data_dir=str(root))
    chw = np.concatenate([im for im, _ in train]).transpose(0, 3, 1, 2)
    labels = np.concatenate([lab for _, lab in train])
    order = np.asarray(jax.random.permutation(jax.random.key(5), 20))
    pixels = chw / 255.0
    mean, std = pixels.mean(axis=(0, 2, 3)), pixels.std(axis=(0, 2, 3))
    expected = ((pixels - mean[:, None, None]) / std[:, None, None]).reshape(20, 3072)  # the record's byte order
    np.testing.assert_allclose(np.asarray(task.x_train), expected[order[:4]], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(task.x_test), expected[order[4:8]], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(task.y_train), np.eye(10)[labels[order[:4]]])
    x, y = task.stream_pool()
    assert x.shape == (16, 3072) and y.shape == (16, 10) and task.input_size == 3072 and task.loss == "mse"
    xb, yb, _ = task.batch(None, 4)
    assert xb.shape == (4, 1, 3072) and yb.shape == (4, 1, 10)
    from dynlab.analyses.pc_bp import FEEDFORWARD_TASKS

    assert FEEDFORWARD_TASKS["cifar10"] == "pc-cifar10"


# ---- bad files ---------------------------------------------------------------------------------------

def test_bad_files_are_data_errors_naming_file_expected_and_found(tmp_path, cifar_dir):
    root, train, test = cifar_dir
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    for name in ["data_batch_1.bin", "test_batch.bin"]:
        (folder / name).write_bytes((root / "cifar-10-batches-bin" / name).read_bytes())
    with pytest.raises(DataError, match=r"missing data file 'cifar-10-batches-bin/data_batch_2\.bin' \(CIFAR-10 training "
                                        r"batch 2 of 5, binary version"):
        dynlab.build("task", "scifar10", data_dir=str(tmp_path))
    (folder / "data_batch_2.bin").write_bytes((folder / "data_batch_1.bin").read_bytes()[:-1000])
    with pytest.raises(DataError, match=r"data_batch_2\.bin: expected CIFAR-10 binary records of 3073 bytes .*found "
                                        r"11292 bytes = 3 records and 2073 bytes over"):
        dynlab.build("task", "scifar10", data_dir=str(tmp_path), train_batches=2)
    (folder / "data_batch_2.bin").write_bytes((folder / "data_batch_1.bin").read_bytes()[:2 * RECORD])  # cut at a record
    with pytest.raises(DataError, match=r"data_batch_2\.bin: expected as many records as data_batch_1\.bin \(4; .*found 2"):
        dynlab.build("task", "scifar10", data_dir=str(tmp_path), train_batches=2)
    with pytest.raises(DataError, match=r"expected CIFAR-10 labels 0-9 .* found 42 in record 1"):
        parse_cifar(cifar_bytes(np.zeros((2, 32, 32, 3)), [1, 42]))
    with pytest.raises(ConfigError, match="train_batches must be at most 5"):
        dynlab.build("task", "scifar10", data_dir=str(tmp_path), train_batches=6)
    with pytest.raises(ConfigError, match="downsample must divide 32"):
        dynlab.build("task", "scifar10", data_dir=str(tmp_path), downsample=3)

    rng = np.random.default_rng(4)
    write_fashion(tmp_path, "t10k", rng.integers(0, 256, (6, 32, 32)), np.arange(6))
    with pytest.raises(DataError, match=r"expected Fashion-MNIST images of 28x28 with one label each; found 6 images of 32x32"):
        read_mnist("t10k", tmp_path, dataset="fashion-mnist")
    write_fashion(tmp_path, "t10k", rng.integers(0, 256, (6, 28, 28)), np.arange(5))
    with pytest.raises(DataError, match=r"found 6 images of 28x28 and 5 labels"):
        read_mnist("t10k", tmp_path, dataset="fashion-mnist")
    write_fashion(tmp_path, "t10k", rng.integers(0, 256, (6, 28, 28)), np.arange(6) + 5)
    with pytest.raises(DataError, match=r"expected Fashion-MNIST labels 0-9; found 10 \(label 5\)"):
        read_mnist("t10k", tmp_path, dataset="fashion-mnist")
    images = tmp_path / "fashion-mnist" / "t10k-images-idx3-ubyte.gz"
    raw = gzip.decompress(images.read_bytes())
    images.write_bytes(gzip.compress(raw)[:-200])  # a cut-off download
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte\.gz \(gzip stream cut off\): IDX data has \d+ bytes, "
                                        r"the header \(6, 28, 28\) says 4704 \(truncated\)"):
        read_mnist("t10k", tmp_path, dataset="fashion-mnist")


@pytest.fixture(scope="module")
def bad_dirs(tmp_path_factory, cifar_dir):
    """Data directories with one bad file each, for the command line."""
    root = tmp_path_factory.mktemp("bad")
    source = cifar_dir[0] / "cifar-10-batches-bin"
    short = root / "short-cifar" / "cifar-10-batches-bin"
    short.mkdir(parents=True)
    for f in source.iterdir():
        (short / f.name).write_bytes(f.read_bytes()[: -5 if f.name == "data_batch_3.bin" else None])
    write_fashion(root / "wide-fashion", "t10k", np.zeros((30, 28, 30)), np.zeros(30))
    write_fashion(root / "short-fashion", "t10k", np.zeros((30, 28, 28)), np.zeros(30), gz=False)
    cut = root / "short-fashion" / "fashion-mnist" / "t10k-images-idx3-ubyte"
    cut.write_bytes(cut.read_bytes()[:-28])
    return root


@pytest.mark.parametrize("args, fragments", [
    (["train", "--task", "scifar10", "--data-dir", "{root}/none"],
     ["missing data file 'cifar-10-batches-bin/data_batch_1.bin'", "in data directory", "(from --data-dir)"]),
    (["train", "--task", "smnist", "--set", "task.dataset=fashion-mnist", "--data-dir", "{root}/none"],
     ["missing data file 'fashion-mnist/t10k-images-idx3-ubyte.gz'", "Fashion-MNIST t10k images"]),
    (["train", "--task", "psmnist", "--set", "task.dataset=cifar"],
     ["task.dataset must be one of 'mnist', 'fashion-mnist', got 'cifar'"]),
    (["train", "--task", "scifar10", "--data-dir", "{root}/short-cifar"],
     ["data_batch_3.bin: expected CIFAR-10 binary records of 3073 bytes", "found 12287 bytes = 3 records and 3068 bytes over"]),
    (["compare", "pc-bp", "--task", "cifar10", "--widths", "4", "--depths", "2", "--data-dir", "{root}/short-cifar"],
     ["data_batch_3.bin: expected CIFAR-10 binary records"]),
    (["train", "--task", "pc-mnist", "--set", "task.dataset=fashion-mnist", "--data-dir", "{root}/wide-fashion"],
     ["t10k-images-idx3-ubyte.gz: expected Fashion-MNIST images of 28x28", "found 30 images of 28x30"]),
    (["train", "--task", "smnist", "--set", "task.dataset=fashion-mnist", "--data-dir", "{root}/short-fashion"],
     ["fashion-mnist/t10k-images-idx3-ubyte: IDX data has 23492 bytes, the header (30, 28, 28) says 23520 (truncated)"]),
])
def test_bad_data_is_one_line_exit_2(args, fragments, bad_dirs, tmp_path):
    args = [a.format(root=bad_dirs) for a in args]
    one_line_error(invoke([*args, "-q"], tmp_path), *fragments)
    assert not (tmp_path / "runs").exists()  # refused before any run directory


def test_a_training_step_on_sequential_cifar(cifar_dir, tmp_path):
    args = ["train", "--task", "scifar10", "--model", "rnn", "--set", "model.hidden=4", "--set", "task.downsample=16",
            "--steps", "2", "--set", "train.batch_size=4", "--set", "train.eval_size=3", "--set", "train.log_every=1",
            "--set", "train.eval_every=2", "--set", "train.checkpoint_every=2", "--data-dir", str(cifar_dir[0]),
            "--out", str(tmp_path / "run"), "-q"]
    result = invoke(args, tmp_path)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "run" / "config.toml").read_text()
    assert 'name = "scifar10"' in text and "train_batches = 5" in text and "grayscale = false" in text


def test_config_check_of_psmnist_with_only_the_t10k_file(fashion_dir):
    """With only the t10k file (as in CI's data directory) the train/test split and the pixel
    permutation are drawn with concrete keys even while `experiment.check` traces the task: a sweep
    over psmnist was refused with an internal TracerArrayConversionError before any cell ran."""
    from dynlab import experiment

    cfg = experiment.default_config("rnn", "psmnist")
    cfg["model"]["hidden"] = 4
    cfg["task"].update(dataset="fashion-mnist", data_dir=str(fashion_dir[0]), downsample=7, test_size=8)
    experiment.check(cfg)
