"""A dataset function's closure is read when the transformation is made (TensorFlow traces it
then): each dataset built in a loop keeps its own loop variable."""

from __future__ import annotations

import numpy as np

import tpustrategy.data as tpsd


def _labeler(x, label):
    return x, label


def test_map_in_a_loop_keeps_each_datasets_own_loop_variable():
    # The port: `for i, ds in enumerate(parts): ds.map(lambda ex: labeler(ex, i))`. TensorFlow
    # 2.21 labels each part with its own i ([0, 0, 1, 1, 2, 2]); calling the lambda lazily gave 2.
    parts = [tpsd.Dataset.from_tensor_slices(np.arange(2) + 10 * k) for k in range(3)]
    labeled = []
    for i, ds in enumerate(parts):
        labeled.append(ds.map(lambda ex: _labeler(ex, i)))  # noqa: B023 - the pattern under test
    combined = labeled[0].concatenate(labeled[1]).concatenate(labeled[2])
    assert [int(label) for _, label in combined] == [0, 0, 1, 1, 2, 2]


def test_filter_flat_map_interleave_scan_take_while_bind_too():
    ds = tpsd.Dataset.range(6)
    made = {}
    for k in (2, 3):
        made[k] = (ds.filter(lambda x: x % k == 0),  # noqa: B023 - the pattern under test
                   ds.take(2).flat_map(lambda x: tpsd.Dataset.from_tensors(x * k)),  # noqa: B023 - the pattern under test
                   ds.take(2).interleave(lambda x: tpsd.Dataset.from_tensors(x + k), cycle_length=1),  # noqa: B023 - the pattern under test
                   ds.scan(0, lambda s, x: (s + k, s + k)),  # noqa: B023 - the pattern under test
                   ds.take_while(lambda x: x < k))  # noqa: B023 - the pattern under test
    for k, (f, fm, il, sc, tw) in made.items():
        assert [int(x) for x in f] == [x for x in range(6) if x % k == 0]
        assert [int(x) for x in fm] == [0, k]
        assert [int(x) for x in il] == [k, 1 + k]
        assert [int(x) for x in sc] == [k * (j + 1) for j in range(6)]
        assert [int(x) for x in tw] == list(range(k))


def test_a_captured_object_is_shared_and_nonlocal_assignments_still_reach_the_enclosing_scope():
    table = {"scale": 2}
    doubled = tpsd.Dataset.range(3).map(lambda x: x * table["scale"])
    table["scale"] = 3  # the same object: its later contents are seen, as a captured resource is
    assert [int(x) for x in doubled] == [0, 3, 6]

    calls = 0

    def count(x):
        nonlocal calls
        calls += 1
        return x

    assert [int(x) for x in tpsd.Dataset.range(4).map(count)] == [0, 1, 2, 3]
    assert calls == 4


def test_a_name_assigned_after_the_function_was_made_is_read_when_called():
    def make():
        ds = tpsd.Dataset.range(2).map(lambda x: x + offset)
        offset = 5  # noqa: F841 - assigned after the lambda: its cell was empty at map()
        return ds

    assert [int(x) for x in make()] == [5, 6]
