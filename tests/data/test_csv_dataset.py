"""TensorFlow's csv_dataset_test, ported: inputs and asserted results in our code."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.errors import InvalidArgumentError
from tpustrategy.testing import assert_iterator_checkpointing

CsvDataset = tpsd.experimental.CsvDataset


@pytest.fixture
def files(tmp_path):
    def make(inputs, linebreak="\n", compression_type=None):
        names = []
        for i, rows in enumerate(inputs):
            path = tmp_path / f"temp_{i}.csv"
            data = linebreak.join(rows).encode()
            if compression_type == "GZIP":
                data = gzip.compress(data)
            elif compression_type == "ZLIB":
                data = zlib.compress(data)
            path.write_bytes(data)
            names.append(str(path))
        return names

    return make


def rows(ds):
    return [tuple(v if isinstance(v, bytes) else v.item() for v in r) for r in ds]


def enc(expected):
    return [tuple(v.encode() if isinstance(v, str) else v for v in r) for r in expected]


@pytest.mark.parametrize(("defaults", "lines", "kwargs", "expected"), [
    ([[]] * 4, ["1,2,3,4"], {}, [(1.0, 2.0, 3.0, 4.0)]),
    ([[0]] * 4, ["1,2,3,4", "5,6,7,8"], {}, [(1, 2, 3, 4), (5, 6, 7, 8)]),
    ([[""]] * 4, ["1.0,2.1,hello,4.3", "5.4,6.5,goodbye,8.7"], {},
     [("1.0", "2.1", "hello", "4.3"), ("5.4", "6.5", "goodbye", "8.7")]),
    ([[0]] * 4, [",,,", "1,1,1,", ",2,2,2"], {}, [(0, 0, 0, 0), (1, 1, 1, 0), (0, 2, 2, 2)]),
    ([[""]] * 3, ['1,2"3,4'], {"use_quote_delim": False}, [("1", '2"3', "4")]),
    ([[""]] * 4, ['1,2,"3,4"', '"5,6",7,8'], {"use_quote_delim": False},
     [("1", "2", '"3', '4"'), ('"5', '6"', "7", "8")]),
    ([[0]] * 4, ["1:2:3:4", "5:6:7:8"], {"field_delim": ":"}, [(1, 2, 3, 4), (5, 6, 7, 8)]),
    ([[0]] * 4, ["1,NA,3,4", "NA,6,7,8"], {"na_value": "NA"}, [(1, 0, 3, 4), (0, 6, 7, 8)]),
    ([[""]] * 2, ["1,2,3,4", '"5","6","7","8"'], {"select_cols": [1, 2]}, [("2", "3"), ("6", "7")]),
    ([["NA"]], ["0", "", "2"], {}, [("0",), ("NA",), ("2",)]),
    ([[0.0]] * 4, ["0, 1, 2, 3"], {}, [(0.0, 1.0, 2.0, 3.0)]),
    ([[0]] * 2, ["col1,col2", "1,2"], {"header": True}, [(1, 2)]),
    ([[0]] * 2, ["col1,col2"], {"header": True}, []),
    ([[""]] * 2, [""], {}, []),
    ([np.float32, [0.0]], ["1.0,2.0", "3.0,4.0"], {}, [(1.0, 2.0), (3.0, 4.0)]),
    ([[""]] * 4, ['"a","b","c :)","d"', '"e","f","g :(","h"'], {},
     [("a", "b", "c :)", "d"), ("e", "f", "g :(", "h")]),
    ([[""]], ['"0"', '"1"', '"2"'], {}, [("0",), ("1",), ("2",)]),
    ([[""]] * 4, ['a,b,"""c""\n0","d\ne"', "f,g,h,i"], {}, [("a", "b", '"c"\n0', "d\ne"), ("f", "g", "h", "i")]),
    ([[""]], ['1,"2\n3",4', "5,6,7"], {"select_cols": [0]}, [("1",), ("5",)]),
    ([[""]], ["1,2,3", "5,6,7"], {"exclude_cols": [1, 2]}, [("1",), ("5",)]),
])
def test_rows_parse_like_tensorflow(files, defaults, lines, kwargs, expected):
    assert rows(CsvDataset(files([lines]), record_defaults=defaults, **kwargs)) == enc(expected)


def test_mixed_types_and_dtypes_of_the_defaults(files):
    defaults = [np.array([], np.int32), np.array([], np.float32), np.array([], object), np.array([], np.float64)]
    ds = CsvDataset(files([["1,2.1,3.2,4.3", "5,6.5,7.6,8.7"]]), record_defaults=defaults)
    assert [s.dtype for s in ds.element_spec] == [np.int32, np.float32, np.dtype(object), np.float64]
    first = next(iter(ds))
    assert first[0].dtype == np.int32 and first[1] == np.float32(2.1) and first[2] == b"3.2"
    assert first[3] == np.float64(4.3)


def test_multiple_files_and_line_breaks_and_compression(files):
    for linebreak in ("\n", "\r\n"):
        for ctype in (None, "GZIP", "ZLIB"):
            names = files([["1,2,3,4", "5,6,7,8"], ["9,10,11,12"]], linebreak=linebreak, compression_type=ctype)
            ds = CsvDataset(names, record_defaults=[[0]] * 4, compression_type=ctype)
            assert rows(ds) == [(1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11, 12)]


@pytest.mark.parametrize(("defaults", "lines", "kwargs", "message"), [
    ([[""]] * 3, ['1,2"3,4'], {}, "Unquoted fields cannot have quotes inside"),
    ([[""]] * 3, ['"a"b","c","d"'], {}, "Quote inside a string has to be escaped by another quote"),
    ([[0]] * 2, ["1,2,3,4", "5,6,7,8"], {"select_cols": [3, 4]}, "Expect 2 fields but have 1 in record"),
    ([[]] * 2, ["0,"], {}, "Field 1 is required but missing in record!"),
    ([[0.0]] * 2, ["0,1,2,3"], {}, "Expect 2 fields but have more in record"),
    ([[0.0]] * 5, ["0,1,2,3"], {}, "Expect 5 fields but have 4 in record"),
    ([[0]] * 2, [], {"header": True}, "Can't read header of file"),
    ([[""]] * 2, ["", "1,2"], {}, "Expect 2 fields but have 1 in record"),
    ([[""]], ["1,2,3", "5,6,7"], {"exclude_cols": [0]}, "Expect 1 fields but have more in record"),
    ([[""]] * 3, ["1,2,3", "5,6,7"], {"exclude_cols": [1]}, "Expect 3 fields but have 2 in record"),
    ([[0]], ["1.5"], {}, "not a valid int32"),
])
def test_bad_records_raise_tensorflows_message(files, defaults, lines, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        list(CsvDataset(files([lines]), record_defaults=defaults, **kwargs))


def test_select_and_exclude_together_are_rejected(files):
    with pytest.raises(InvalidArgumentError, match="Either select_cols or exclude_cols should be empty"):
        CsvDataset(files([["1,2,3"]]), record_defaults=[[""]], select_cols=[0], exclude_cols=[1, 2])


def test_good_records_before_a_bad_one_are_produced_first(files):
    it = iter(CsvDataset(files([["1,2", "3", "5,6"]]), record_defaults=[[0]] * 2))
    assert [v.item() for v in next(it)] == [1, 2]
    with pytest.raises(InvalidArgumentError, match="Expect 2 fields but have 1"):
        next(it)


def test_ignore_errors_skips_bad_records_and_goes_on(files):
    pytest.importorskip("tpustrategy._src.data.transformations.ignore_errors")
    names = files([['1,"2"3",4', '1,"2"3",4",5,5', 'a,b,"c"d"', "e,f,g"]])
    assert rows(CsvDataset(names, record_defaults=[[""]] * 3).ignore_errors()) == [(b"e", b"f", b"g")]
    names = files([['1,2"3,4', 'a,b,c"d', '9,8"7,6,5', "e,f,g"]])
    assert rows(CsvDataset(names, record_defaults=[[""]] * 3).ignore_errors()) == [(b"e", b"f", b"g")]


def test_repeat_and_prefetch_over_one_dataset(files):
    ds = CsvDataset(files([["1,,3,4", "5,6,,8"]]), record_defaults=[[0]] * 4)
    assert rows(ds.repeat(5).prefetch(1)) == [(1, 0, 3, 4), (5, 6, 0, 8)] * 5


def test_csv_dataset_resumes_from_every_state(files, tmp_path):
    lines = [f'{i},"q{i}\nline",{i * 0.5}' for i in range(3000)]
    names = files([lines[:1700], lines[1700:]], compression_type="GZIP")
    ds = CsvDataset(names, record_defaults=[[0], [""], [0.0]], compression_type="GZIP")
    out = assert_iterator_checkpointing(ds, max_elements=4000, num_checkpoints=30)
    assert len(out) == 3000 and out[2999][1] == b"q2999\nline"


def test_csv_files_are_sharded_by_file_under_auto_shard(files):
    from tpustrategy.data.experimental import auto_shard_dataset

    names = files([[f"{f}{i}" for i in range(3)] for f in range(1, 5)])
    ds = CsvDataset(names, record_defaults=[[0]])
    assert [int(r[0]) for r in auto_shard_dataset(ds, 2, 1)] == [20, 21, 22, 40, 41, 42]
