import os
from pathlib import Path

import pytest

from dynlab.data import data_dir, data_file
from dynlab.errors import DataError


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.delenv("DYNLAB_DATA", raising=False)
    assert data_dir() == Path("~/.cache/dynlab/data").expanduser()
    monkeypatch.setenv("DYNLAB_DATA", str(tmp_path / "env"))
    assert data_dir() == tmp_path / "env"
    assert data_dir(tmp_path / "cli") == tmp_path / "cli"


def test_missing_file_error_names_file_layout_and_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNLAB_DATA", str(tmp_path))
    with pytest.raises(DataError) as e:
        data_file("mnist/t10k-images-idx3-ubyte.gz", layout="MNIST test images, IDX gzip")
    msg = str(e.value)
    assert "t10k-images-idx3-ubyte.gz" in msg and "IDX gzip" in msg and str(tmp_path) in msg and "DYNLAB_DATA" in msg
    (tmp_path / "a.txt").write_text("x")
    assert data_file("a.txt", layout="text") == tmp_path / "a.txt"
    with pytest.raises(DataError, match="without '..'"):
        data_file("../a.txt", layout="text")


@pytest.mark.skipif(not os.environ.get("DYNLAB_DATA"), reason="DYNLAB_DATA is not set (CI sets it to ../shared/data)")
def test_shared_data_is_found():
    assert data_file("text/tinyshakespeare.txt", layout="plain text").stat().st_size == 1_115_394
