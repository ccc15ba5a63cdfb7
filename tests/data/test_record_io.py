"""Tests of the chunked TFRecord / text-line / fixed-length readers."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import google_crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpustrategy._src.data.sources import record_io
from tpustrategy._src.data.sources.record_io import (
    read_fixed_length_chunks,
    read_text_line_chunks,
    read_tfrecord_chunks,
)
from tpustrategy._src.data.sources.writer import TFRecordWriter
from tpustrategy._src.errors import DataLossError


def _masked(data: bytes) -> int:
    # Written out independently of tpustrategy._src.data.sources._crc on purpose.
    crc = int.from_bytes(google_crc32c.Checksum(data).digest(), "big")
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _encode(records: list[bytes]) -> bytes:
    out = []
    for r in records:
        length = struct.pack("<Q", len(r))
        out += [length, struct.pack("<I", _masked(length)), r, struct.pack("<I", _masked(r))]
    return b"".join(out)


def _compress(data: bytes, compression_type: str) -> bytes:
    if compression_type == "GZIP":
        return gzip.compress(data)
    if compression_type == "ZLIB":
        return zlib.compress(data)
    return data


def _write(tmp_path, records, compression_type="", name="f.tfrecord"):
    path = os.path.join(tmp_path, name)
    with open(path, "wb") as f:
        f.write(_compress(_encode(records), compression_type))
    return path


def _read(path, **kw):
    return [r for _, chunk in read_tfrecord_chunks(path, **kw) for r in chunk]


def _mixed_records(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        if (i // 300) % 2:  # runs of equal-sized records take the vectorised path
            records.append(rng.bytes(100))
        else:
            records.append(rng.bytes(int(rng.integers(0, 400))))
    return records


@pytest.mark.parametrize("compression_type", [None, "", "GZIP", "ZLIB"])
def test_records_written_by_the_writer_read_back_exactly(tmp_path, compression_type):
    records = [b"", b"\x00", b"abc\x00\x00", os.urandom(300_000)] + _mixed_records(3000)
    path = os.path.join(tmp_path, "f")
    with TFRecordWriter(path, compression_type) as w:
        for r in records:
            w.write(r)
    assert _read(path, compression_type=compression_type) == records


def test_an_empty_file_yields_no_chunks(tmp_path):
    path = _write(tmp_path, [])
    assert list(read_tfrecord_chunks(path)) == []
    assert (
        list(read_tfrecord_chunks(_write(tmp_path, [], "GZIP", "g"), compression_type="GZIP")) == []
    )


def test_empty_records_and_trailing_zero_bytes_round_trip(tmp_path):
    records = [b""] * 2000 + [b"\x00" * k for k in range(20)] + [b"x\x00"]
    assert _read(_write(tmp_path, records)) == records


@pytest.mark.parametrize("buffer_size", [1, 13, 1000, None])
def test_records_larger_than_the_buffer_are_read_whole(tmp_path, buffer_size):
    records = [os.urandom(70_000), b"small", os.urandom(200_001), b""]
    assert _read(_write(tmp_path, records), buffer_size=buffer_size) == records


def test_chunks_hold_at_most_chunk_records_and_offsets_are_record_boundaries(tmp_path):
    records = _mixed_records(5000)
    data = _encode(records)
    path = _write(tmp_path, records)
    boundaries = {0}
    pos = 0
    for r in records:
        pos += len(r) + 16
        boundaries.add(pos)
    chunks = list(read_tfrecord_chunks(path, buffer_size=8192))
    assert [r for _, c in chunks for r in c] == records
    assert all(0 < len(c) <= record_io.CHUNK_RECORDS for _, c in chunks)
    offsets = [o for o, _ in chunks]
    assert offsets == sorted(offsets) and set(offsets) <= boundaries
    assert len(data) == pos


@pytest.mark.parametrize("compression_type", ["", "GZIP"])
def test_resuming_at_every_yielded_offset_gives_the_rest_of_the_stream(tmp_path, compression_type):
    records = _mixed_records(4000, seed=1)
    path = _write(tmp_path, records, compression_type)
    chunks = list(read_tfrecord_chunks(path, compression_type=compression_type, buffer_size=50_000))
    seen = 0
    for offset, _chunk in chunks[:: 1 if not compression_type else 3]:
        seen = sum(len(c) for o, c in chunks if o < offset)
        assert _read(path, compression_type=compression_type, start_offset=offset) == records[seen:]
    assert seen > 0


def _read_with_a_flipped_data_byte(tmp_path, records, bad, at, bit):
    """Reads the records' file with byte ``at`` of record ``bad``'s data flipped by ``bit``:
    (the records yielded before the DataLossError, the error, the path, the record's offset)."""
    data = bytearray(_encode(records))
    bad_offset = sum(len(r) + 16 for r in records[:bad])
    data[bad_offset + 12 + at] ^= bit
    path = os.path.join(tmp_path, "bad.tfrecord")
    open(path, "wb").write(bytes(data))
    got = []
    with pytest.raises(DataLossError) as info:
        for _, chunk in read_tfrecord_chunks(path):
            got += chunk
    return got, info.value, path, bad_offset


def test_a_flipped_data_byte_yields_the_good_records_then_raises_with_file_and_offset(tmp_path):
    records = [bytes([i]) * 50 for i in range(100)]  # equal sizes: the strided framing
    got, error, path, bad_offset = _read_with_a_flipped_data_byte(tmp_path, records, 37, 5, 0x01)
    assert bad_offset == 37 * 66  # each record is 50 + 16 bytes
    assert got == records[:37]
    assert f"corrupted record at offset {bad_offset} in {path}: data CRC mismatch" in str(error)
    assert error.filename == path and error.offset == bad_offset


@pytest.mark.parametrize("bad", [0, 1, 23, 59])
def test_a_flipped_data_byte_among_records_of_mixed_sizes_is_reported_at_its_record(tmp_path, bad):
    # Sizes that never repeat 8 times in a row: the record-by-record framing, not the strided one.
    records = [bytes([i % 251]) * (20 + i % 7) for i in range(60)]
    got, error, _, bad_offset = _read_with_a_flipped_data_byte(tmp_path, records, bad, 3, 0x10)
    assert got == records[:bad]
    assert error.offset == bad_offset and "data CRC mismatch" in str(error)


def test_a_flipped_length_byte_is_reported_as_a_length_crc_mismatch(tmp_path):
    records = [os.urandom(i) for i in range(40)]
    data = bytearray(_encode(records))
    bad_offset = sum(len(r) + 16 for r in records[:10])
    data[bad_offset] ^= 0x40
    path = os.path.join(tmp_path, "bad.tfrecord")
    open(path, "wb").write(bytes(data))
    got = []
    with pytest.raises(DataLossError, match=f"offset {bad_offset} .*length CRC mismatch"):
        for _, chunk in read_tfrecord_chunks(path):
            got += chunk
    assert got == records[:10]


@pytest.mark.parametrize("cut", [1, 11, 12, 20, 16 + 30 - 1])
def test_a_truncated_last_record_raises_truncated_with_its_offset(tmp_path, cut):
    records = [b"a" * 30] * 3
    data = _encode(records)
    path = os.path.join(tmp_path, "t.tfrecord")
    open(path, "wb").write(data[: 2 * 46 + cut])
    got = []
    with pytest.raises(DataLossError, match=f"truncated record at offset {2 * 46} in "):
        for _, chunk in read_tfrecord_chunks(path):
            got += chunk
    assert got == records[:2]


def test_a_truncated_gzip_stream_raises_data_loss_after_the_good_records(tmp_path):
    records = [os.urandom(1000) for _ in range(200)]
    compressed = gzip.compress(_encode(records))
    path = os.path.join(tmp_path, "t.gz")
    open(path, "wb").write(compressed[: len(compressed) // 2])
    got = []
    with pytest.raises(DataLossError):
        for _, chunk in read_tfrecord_chunks(path, compression_type="GZIP"):
            got += chunk
    assert 0 < len(got) < 200 and got == records[: len(got)]


def test_reading_an_uncompressed_file_as_gzip_raises_data_loss_naming_the_type(tmp_path):
    path = _write(tmp_path, [b"abc"])
    with pytest.raises(DataLossError, match="GZIP"):
        _read(path, compression_type="GZIP")


def test_reading_a_gzip_file_without_compression_type_suggests_the_fix(tmp_path):
    path = _write(tmp_path, [b"abc" * 100], "GZIP")
    with pytest.raises(DataLossError, match="compression_type='GZIP'"):
        _read(path)


def test_concatenated_gzip_members_are_read_in_turn(tmp_path):
    a, b = [b"one", b"two"], [b"three"]
    path = os.path.join(tmp_path, "cat.gz")
    open(path, "wb").write(gzip.compress(_encode(a)) + gzip.compress(_encode(b)))
    assert _read(path, compression_type="GZIP") == a + b


@pytest.mark.parametrize("bad", ["gzip", "Gzip", "BZ2", 1])
def test_an_unknown_compression_type_names_the_valid_values(tmp_path, bad):
    with pytest.raises(ValueError, match="None, '', 'GZIP' or 'ZLIB'"):
        read_tfrecord_chunks(_write(tmp_path, []), compression_type=bad)


def test_bad_start_offsets_raise_value_errors(tmp_path):
    path = _write(tmp_path, [b"abc"])
    with pytest.raises(ValueError, match="start_offset must be a non-negative int"):
        read_tfrecord_chunks(path, start_offset=-1)
    with pytest.raises(ValueError, match="past the end"):
        _read(path, start_offset=10_000)
    assert _read(path, start_offset=19) == []


def test_a_start_offset_inside_a_record_raises_data_loss(tmp_path):
    path = _write(tmp_path, [b"x" * 100] * 3)
    with pytest.raises(DataLossError, match="offset 5 "):
        _read(path, start_offset=5)


_FUZZ_RECORDS = [os.urandom(n) for n in (0, 1, 7, 30, 30, 30, 30, 30, 30, 30, 30, 30, 200, 3)]
_FUZZ_DATA = _encode(_FUZZ_RECORDS)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(
        st.tuples(st.integers(0, len(_FUZZ_DATA) - 1), st.integers(1, 255)), min_size=0, max_size=3
    ),
    cut=st.integers(0, len(_FUZZ_DATA)),
    buffer_size=st.sampled_from([None, 16, 64, 1000]),
)
def test_random_damage_gives_a_prefix_of_the_records_or_data_loss_never_anything_else(
    tmp_path, flips, cut, buffer_size
):
    data = bytearray(_FUZZ_DATA[:cut])
    for pos, xor in flips:
        if pos < len(data):
            data[pos] ^= xor
    path = os.path.join(tmp_path, "fuzz.tfrecord")
    open(path, "wb").write(bytes(data))
    got = []
    try:
        for _, chunk in read_tfrecord_chunks(path, buffer_size=buffer_size):
            got += chunk
    except DataLossError:
        assert got == _FUZZ_RECORDS[: len(got)]
    else:
        # Clean end: only possible at a record boundary of an undamaged prefix.
        assert got == _FUZZ_RECORDS[: len(got)]
        assert len(_encode(got)) == len(data)


# --------------------------------------------------------------------------- text lines


def _lines(path, **kw):
    return [line for _, chunk in read_text_line_chunks(path, **kw) for line in chunk]


@pytest.mark.parametrize(
    "text, lines",
    [
        (b"", []),
        (b"a\nb\n", [b"a", b"b"]),
        (b"a\nb", [b"a", b"b"]),
        (b"a\r\nb\r\n\n", [b"a", b"b", b""]),
        (b"a\rb\r\r\n", [b"ab"]),
        (b"\n\n", [b"", b""]),
        (b"last\r", [b"last"]),
        (b"x\n\r", [b"x"]),
        (b"\x00\xff\n", [b"\x00\xff"]),
    ],
)
def test_text_lines_follow_tensorflow_text_line_dataset(tmp_path, text, lines):
    path = os.path.join(tmp_path, "t.txt")
    open(path, "wb").write(text)
    assert _lines(path) == lines
    assert _lines(path, buffer_size=1) == lines
    open(path + ".gz", "wb").write(gzip.compress(text))
    assert _lines(path + ".gz", compression_type="GZIP") == lines


def test_text_chunk_offsets_resume_at_the_next_line(tmp_path):
    lines = [
        os.urandom(int(n)).replace(b"\n", b"").replace(b"\r", b"")
        for n in np.random.default_rng(2).integers(0, 50, 5000)
    ]
    path = os.path.join(tmp_path, "t.txt")
    open(path, "wb").write(b"\n".join(lines))
    expected = [x for x in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    chunks = list(read_text_line_chunks(path, buffer_size=3000))
    assert [x for _, c in chunks for x in c] == expected
    for offset, _ in chunks[::7]:
        seen = sum(len(c) for o, c in chunks if o < offset)
        assert _lines(path, start_offset=offset) == expected[seen:]


# --------------------------------------------------------------------------- fixed length


def test_fixed_length_records_skip_header_and_footer_and_resume(tmp_path):
    body = os.urandom(7 * 3000)
    path = os.path.join(tmp_path, "f.bin")
    open(path, "wb").write(b"HEAD" + body + b"FOOT!")
    records = [body[i : i + 7] for i in range(0, len(body), 7)]
    kw = dict(header_bytes=4, footer_bytes=5, buffer_size=1000)
    chunks = list(read_fixed_length_chunks(path, 7, **kw))
    assert [r for _, c in chunks for r in c] == records
    assert chunks[0][0] == 4
    offset = chunks[2][0]
    assert [
        r for _, c in read_fixed_length_chunks(path, 7, start_offset=offset, **kw) for r in c
    ] == records[(offset - 4) // 7 :]
    open(path + ".gz", "wb").write(gzip.compress(b"HEAD" + body + b"FOOT!"))
    got = [
        r
        for _, c in read_fixed_length_chunks(path + ".gz", 7, compression_type="GZIP", **kw)
        for r in c
    ]
    assert got == records


def test_a_fixed_length_body_that_is_not_a_multiple_raises_tensorflows_message(tmp_path):
    path = os.path.join(tmp_path, "f.bin")
    open(path, "wb").write(b"H" + b"x" * 10 + b"F")
    message = (
        f'Excluding the header (1 bytes) and footer (1 bytes), input file "{path}" has body '
        "length 10 bytes, which is not an exact multiple of the record length (4 bytes)."
    )
    with pytest.raises(DataLossError) as info:
        list(read_fixed_length_chunks(path, 4, header_bytes=1, footer_bytes=1))
    assert message in str(info.value)
    open(path, "wb").write(gzip.compress(b"H" + b"x" * 10 + b"F"))
    got = []
    with pytest.raises(DataLossError, match="body length 10 bytes"):
        for _, c in read_fixed_length_chunks(
            path, 4, header_bytes=1, footer_bytes=1, compression_type="GZIP"
        ):
            got += c
    assert got == [b"xxxx", b"xxxx"]


def test_fixed_length_arguments_are_validated(tmp_path):
    path = os.path.join(tmp_path, "f.bin")
    open(path, "wb").write(b"12345678")
    with pytest.raises(ValueError, match="record_bytes must be an int >= 1"):
        read_fixed_length_chunks(path, 0)
    with pytest.raises(ValueError, match="not a record boundary"):
        read_fixed_length_chunks(path, 4, start_offset=3)


def test_a_run_of_records_read_in_one_piece_is_checked_like_the_chunked_reader(tmp_path):
    """`read_tfrecord_run` (a worker's read of a batch whose place is known) gives the records, or
    the DataLossError of the chunked reader at the same offset, or names a range that does not
    hold the records it was said to."""
    from tpustrategy._src.data.sources.record_io import read_tfrecord_run

    path = str(tmp_path / "run.tfrecord")
    sizes = [40] * 6 + [7, 300, 0, 40, 40]
    with TFRecordWriter(path) as w:
        for k, n in enumerate(sizes):
            w.write(bytes([k]) * n)
    bounds = np.cumsum([0] + [n + 16 for n in sizes]).tolist()
    want = [bytes([k]) * n for k, n in enumerate(sizes)]
    for a, b in [(0, 6), (0, len(sizes)), (5, 9), (7, 8), (9, 11)]:
        assert read_tfrecord_run(path, bounds[a], bounds[b], b - a) == want[a:b]
    with pytest.raises(DataLossError, match="not the 3 records"):
        read_tfrecord_run(path, bounds[0], bounds[2], 3)  # a range that holds 2
    with pytest.raises(DataLossError, match="not the 1 records"):
        read_tfrecord_run(path, bounds[0], bounds[2], 1)  # one that holds more
    with open(path, "r+b") as f:  # damage record 7's data
        f.seek(bounds[7] + 12 + 100)
        f.write(b"\xff")
    with pytest.raises(DataLossError) as got:
        read_tfrecord_run(path, bounds[5], bounds[9], 4)
    with pytest.raises(DataLossError) as chunked:
        list(read_tfrecord_chunks(path))
    assert got.value.offset == chunked.value.offset == bounds[7] and "data CRC" in str(got.value)
