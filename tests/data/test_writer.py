"""Tests of TFRecordWriter."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest

from tpustrategy._src.data.sources.record_io import read_tfrecord_chunks
from tpustrategy._src.data.sources.writer import TFRecordWriter


def _read(path, compression_type=None):
    return [r for _, c in read_tfrecord_chunks(path, compression_type=compression_type) for r in c]


def test_one_record_is_framed_as_length_crc_data_crc(tmp_path):
    path = os.path.join(tmp_path, "f")
    with TFRecordWriter(path) as w:
        w.write(b"hello")
    # Bytes written by tf.io.TFRecordWriter for the record b"hello".
    assert open(path, "rb").read() == bytes.fromhex("0500000000000000eab2043e68656c6c6fbb1f1c19")


@pytest.mark.parametrize("compression_type", ["GZIP", "ZLIB"])
def test_compressed_output_is_a_standard_stream_with_tensorflows_container(
    tmp_path, compression_type
):
    path = os.path.join(tmp_path, "f")
    with TFRecordWriter(path, compression_type) as w:
        w.write(b"abc")
    raw = open(path, "rb").read()
    plain = gzip.decompress(raw) if compression_type == "GZIP" else zlib.decompress(raw)
    assert len(plain) == 16 + 3 and plain[12:15] == b"abc"


def test_an_options_object_with_a_compression_type_is_accepted(tmp_path):
    class Options:
        compression_type = "ZLIB"

    path = os.path.join(tmp_path, "f")
    with TFRecordWriter(path, Options()) as w:
        w.write(b"x")
    assert _read(path, "ZLIB") == [b"x"]


def test_an_unknown_compression_type_names_the_writer_and_the_valid_values(tmp_path):
    with pytest.raises(ValueError, match=r"TFRecordWriter: compression_type must be one of .*'gz'"):
        TFRecordWriter(os.path.join(tmp_path, "f"), "gz")


def test_writing_after_close_raises_and_close_is_idempotent(tmp_path):
    w = TFRecordWriter(os.path.join(tmp_path, "f"))
    w.close()
    w.close()
    with pytest.raises(ValueError, match="TFRecordWriter.write: the writer for .* is closed"):
        w.write(b"x")


def test_str_records_are_utf8_and_other_types_raise_type_error(tmp_path):
    path = os.path.join(tmp_path, "f")
    with TFRecordWriter(path) as w:
        w.write("héllo")
        w.write(bytearray(b"ba"))
        w.write(memoryview(b"mv"))
        with pytest.raises(TypeError, match="record must be bytes. Received: a int"):
            w.write(3)
    assert _read(path) == ["héllo".encode(), b"ba", b"mv"]


@pytest.mark.parametrize("compression_type", [None, "GZIP", "ZLIB"])
def test_flush_makes_the_records_so_far_readable_while_the_writer_is_open(
    tmp_path, compression_type
):
    path = os.path.join(tmp_path, "f")
    w = TFRecordWriter(path, compression_type)
    w.write(b"first")
    w.flush()
    raw = open(path, "rb").read()
    if compression_type:
        plain = zlib.decompressobj(31 if compression_type == "GZIP" else 15).decompress(raw)
    else:
        plain = raw
    assert plain[12:17] == b"first"
    w.write(b"second")
    w.close()
    assert _read(path, compression_type) == [b"first", b"second"]


def test_many_records_cross_the_internal_buffer(tmp_path):
    path = os.path.join(tmp_path, "f")
    records = [os.urandom(i % 5000) for i in range(2000)]
    with TFRecordWriter(path, "GZIP") as w:
        for r in records:
            w.write(r)
    assert _read(path, "GZIP") == records


def test_a_non_path_raises_type_error_naming_the_argument():
    with pytest.raises(TypeError, match="TFRecordWriter: path must be a str"):
        TFRecordWriter(3)
