"""tps.io.gfile and read_file / write_file / matching_files, after TensorFlow's file_io_test."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import (
    AlreadyExistsError,
    NotFoundError,
    PermissionDeniedError,
    UnimplementedError,
)

gfile = tps.io.gfile


def test_file_doesnt_exist_until_written_and_reads_back(tmp_path):
    path = str(tmp_path / "foo")
    assert not gfile.exists(path)
    with gfile.GFile(path, "w") as f:
        f.write("testing")
    assert gfile.exists(path)
    assert gfile.GFile(path).read() == "testing"
    assert gfile.GFile(path, "rb").read() == b"testing"


def test_reading_a_missing_file_raises_not_found(tmp_path):
    f = gfile.GFile(str(tmp_path / "missing"))
    with pytest.raises(NotFoundError):
        f.read()
    with pytest.raises(NotFoundError):
        tps.io.read_file(str(tmp_path / "missing"))


def test_append_readline_readlines_and_iteration(tmp_path):
    path = str(tmp_path / "lines")
    with gfile.GFile(path, "w") as f:
        f.write("testing1\ntesting2\n")
    with gfile.GFile(path, "a") as f:
        f.write("testing3\n")
    f = gfile.GFile(path)
    assert f.readline() == "testing1\n"
    assert f.readlines() == ["testing2\n", "testing3\n"]
    assert f.readline() == ""
    assert list(gfile.GFile(path, "rb")) == [b"testing1\n", b"testing2\n", b"testing3\n"]


def test_size_seek_tell(tmp_path):
    path = str(tmp_path / "s")
    with gfile.GFile(path, "wb") as f:
        f.write(b"0123456789")
    with gfile.GFile(path, "rb") as f:
        assert f.size() == 10
        f.seek(3)
        assert f.tell() == 3 and f.read(2) == b"34"
        f.seek(-2, 2)
        assert f.read() == b"89"
        f.seek(offset=1, whence=1)


def test_read_on_write_only_file_is_permission_denied(tmp_path):
    with gfile.GFile(str(tmp_path / "w"), "w") as f, pytest.raises(PermissionDeniedError):
        f.read()


def test_directories_listdir_walk_stat(tmp_path):
    root = str(tmp_path / "root")
    gfile.makedirs(os.path.join(root, "a", "b"))
    gfile.makedirs(os.path.join(root, "a", "b"))  # no error when it exists
    with pytest.raises(AlreadyExistsError):
        gfile.mkdir(os.path.join(root, "a"))
    gfile.mkdir(os.path.join(root, "c"))
    tps.io.write_file(os.path.join(root, "a", "f.txt"), b"xyz")
    assert gfile.isdir(os.path.join(root, "a")) and not gfile.isdir(os.path.join(root, "a", "f.txt"))
    assert gfile.listdir(root) == ["a", "c"]
    walked = list(gfile.walk(root))
    assert walked[0] == (root, ["a", "c"], [])
    assert (os.path.join(root, "a"), ["b"], ["f.txt"]) in walked
    assert [w[0] for w in gfile.walk(root, topdown=False)][-1] == root
    st = gfile.stat(os.path.join(root, "a", "f.txt"))
    assert st.length == 3 and not st.is_directory and st.mtime_nsec > 0
    with pytest.raises(NotFoundError):
        gfile.listdir(os.path.join(root, "nope"))
    gfile.rmtree(os.path.join(root, "a"))
    assert not gfile.exists(os.path.join(root, "a"))
    with pytest.raises(NotFoundError):
        gfile.rmtree(os.path.join(root, "a"))


def test_rename_and_copy_refuse_to_overwrite_unless_asked(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    tps.io.write_file(a, b"A")
    tps.io.write_file(b, b"B")
    with pytest.raises(AlreadyExistsError, match="file already exists"):
        gfile.rename(a, b)
    with pytest.raises(AlreadyExistsError):
        gfile.copy(a, b)
    gfile.copy(a, b, overwrite=True)
    assert tps.io.read_file(b) == b"A"
    gfile.rename(a, str(tmp_path / "c"))
    assert not gfile.exists(a) and tps.io.read_file(str(tmp_path / "c")) == b"A"
    gfile.remove(b)
    with pytest.raises(NotFoundError):
        gfile.remove(b)


def test_glob_and_matching_files(tmp_path):
    for name in ("x1.txt", "x2.txt", "y.txt"):
        tps.io.write_file(str(tmp_path / name), b"")
    assert sorted(gfile.glob(str(tmp_path / "x*.txt"))) == [str(tmp_path / "x1.txt"), str(tmp_path / "x2.txt")]
    out = tps.io.matching_files(str(tmp_path / "*.txt"))
    assert out.dtype == object and list(out) == sorted(str(tmp_path / n).encode() for n in ("x1.txt", "x2.txt", "y.txt"))
    assert tps.io.matching_files(str(tmp_path / "none*")).shape == (0,)


def test_file_urls_work_and_cloud_schemes_raise_unimplemented(tmp_path):
    tps.io.write_file("file://" + str(tmp_path / "u"), b"url")
    assert gfile.GFile("file://" + str(tmp_path / "u"), "rb").read() == b"url"
    with pytest.raises(UnimplementedError, match="File system scheme 'gs' not implemented"):
        gfile.exists("gs://bucket/x")


def test_write_file_accepts_a_0d_string_array(tmp_path):
    contents = np.array(b"abc", object)
    tps.io.write_file(str(tmp_path / "d" / "e"), contents)
    assert tps.io.read_file(str(tmp_path / "d" / "e")) == b"abc"
