"""tps.io.decode_json_example against TensorFlow 2.21's bytes and errors (proto_cases.json)."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import InvalidArgumentError

CASES = json.loads((pathlib.Path(__file__).parent / "fixtures" / "proto_cases.json")
                   .read_text(encoding="utf-8"))["decode_json_example"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_matches_tensorflow(case):
    if "error" in case:
        with pytest.raises(InvalidArgumentError) as info:
            tps.io.decode_json_example(case["json"])
        # protobuf's messages pad with random spaces and give a position ("near 1:91
        # (offset 90)") that tps.io leaves out; the rest is the same text.
        theirs = re.sub(r"\s+", " ", case["error"]["message"])
        theirs = re.sub(r", near \d+:\d+ \(offset \d+\)", "", theirs)
        assert str(info.value).split("\n")[0] == theirs
        return
    out = tps.io.decode_json_example(case["json"])
    ref = case["output"]
    arr = np.asarray(out, dtype=object)
    assert list(arr.shape) == ref["shape"]
    assert isinstance(out, bytes) == (ref["shape"] == [])
    assert [bytes(v).hex() for v in arr.reshape(-1)] == ref["values"]


def test_output_parses_with_tpsd_parse_single_example():
    import tpustrategy.data as tpsd

    text = ('{"features": {"feature": {"x": {"floatList": {"value": [1.5, 2]}}, '
            '"n": {"int64List": {"value": ["7"]}}, "s": {"bytesList": {"value": ["aGk="]}}}}}')
    parsed = tpsd.parse_single_example(tps.io.decode_json_example(text), {
        "x": tpsd.FixedLenFeature([2], np.float32), "n": tpsd.FixedLenFeature([], np.int64),
        "s": tpsd.FixedLenFeature([], tpsd.string if hasattr(tpsd, "string") else object)})
    np.testing.assert_array_equal(parsed["x"], [1.5, 2.0])
    assert int(parsed["n"]) == 7 and bytes(np.asarray(parsed["s"], object)[()]) == b"hi"


def test_errors_end_with_the_expected_shape_of_the_json():
    with pytest.raises(InvalidArgumentError) as info:
        tps.io.decode_json_example('{"feature": {}}')
    assert "no such field: 'feature'" in str(info.value)
    assert '"int64List"' in str(info.value).split("\n", 1)[1]
