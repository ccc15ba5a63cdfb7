"""A scalar string feature is `bytes` (README: strings are bytes), as a TensorFlow program's
`.numpy()` of a 0-d string tensor gives."""

from __future__ import annotations

import numpy as np

import tpustrategy.data as tpsd

SPEC = {"name": tpsd.FixedLenFeature([], "string"), "label": tpsd.FixedLenFeature([], "int64"),
        "tags": tpsd.FixedLenFeature([2], "string")}


def _record(name: bytes, label: int) -> bytes:
    return tpsd.make_example({"name": name, "label": label, "tags": [b"a", b"b"]}).SerializeToString()


def test_parse_single_example_gives_a_scalar_string_as_bytes():
    out = tpsd.parse_single_example(_record(b"cat", 3), SPEC)
    assert type(out["name"]) is bytes and out["name"] == b"cat" and len(out["name"]) == 3
    assert np.asarray(out["name"]).item() == b"cat"
    assert out["label"].shape == () and int(out["label"]) == 3
    assert out["tags"].dtype == object and out["tags"].tolist() == [b"a", b"b"]


def test_in_a_pipeline_and_batched():
    records = np.array([_record(b"cat", 1), _record(b"dog", 2)], dtype=object)
    ds = tpsd.Dataset.from_tensor_slices(records).map(lambda s: tpsd.parse_single_example(s, SPEC))
    names = [e["name"] for e in ds]
    assert names == [b"cat", b"dog"] and all(isinstance(n, bytes) for n in names)
    batch = next(iter(ds.batch(2)))
    assert batch["name"].dtype == object and batch["name"].tolist() == [b"cat", b"dog"]
