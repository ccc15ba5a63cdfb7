"""A fused ``map(fn).batch(n)`` over a TFRecord reader, or over ``interleave(TFRecordDataset)``,
whose workers read their records by byte ranges (`record_feeds.ReaderFeed`,
`record_feeds.InterleaveFeed`).

Every case runs the pipeline with the workers forced on and compares it with the same pipeline in
this process (``experimental_worker_processes=False``): the batches, the errors and where they come,
and checkpoints taken in one and restored into the other. Per-record map functions live at module
level so that the workers can import them.
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tests.data.test_parallel_processes import no_process_left_behind  # noqa: F401 (autouse)
from tests.data.test_record_spans import corrupt, mixed_files, outcome, same, uniform_files
from tpustrategy._src.data.core.iterator import IterContext
from tpustrategy._src.data.parallel import processes
from tpustrategy._src.data.sources import record_feeds, record_spans

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not processes.AVAILABLE, reason="worker processes need Linux (memfd)"),
]


def parse(record):
    """One record: its index and a digest of every byte (arrays, so batches stack)."""
    raw = np.frombuffer(record, np.uint8)
    return np.int64(struct.unpack_from("<I", record)[0]), np.array([len(record), int(raw.sum())], np.int64)


def failing_on_7(record):
    if struct.unpack_from("<I", record)[0] == 7:
        raise ValueError("record 7")
    return parse(record)


def shapes_differ_at_7(record):
    i = struct.unpack_from("<I", record)[0]
    return np.zeros(3 if i == 7 else 2, np.int64)


def compressed_or_plain(name):
    return tpsd.TFRecordDataset(name, compression_type="")  # plain after all: "" is no compression


def not_a_reader(name):
    return tpsd.TFRecordDataset(name).take(1000)


def source(files, kind, **interleave):
    names = [str(f) for f in files]
    if kind == "reader":
        return tpsd.TFRecordDataset(names)
    if kind == "parallel_reads":  # an interleave of one-file readers inside the reader: 3 files a record each in turn
        return tpsd.TFRecordDataset(names, num_parallel_reads=3)
    if kind == "autotune_reads":  # one file at a time up to 17 cores
        return tpsd.TFRecordDataset(names, num_parallel_reads=tpsd.AUTOTUNE)
    fn = interleave.pop("inner", tpsd.TFRecordDataset)
    parallel = {"num_parallel_calls": 2} if kind == "parallel_interleave" else {}
    args = {"cycle_length": 1, **parallel, **interleave}  # 1 slot: what AUTOTUNE gives up to 17 cores
    return tpsd.Dataset.from_tensor_slices(names).interleave(fn, **args)


def pipeline(files, kind="interleave", fn=parse, batch=8, drop=False, on=True, **interleave):
    ds = source(files, kind, **interleave).map(fn, num_parallel_calls=2).batch(batch, drop_remainder=drop)
    opts = tpsd.Options()
    opts.threading.experimental_worker_processes = on
    return ds.with_options(opts)


@pytest.fixture
def spans_described(monkeypatch):
    """How many batches were described as byte ranges here (read by a worker)."""
    count = [0]
    described = record_feeds._RecordFeed._next_span

    def counted(self):
        span = described(self)
        count[0] += 1
        return span

    monkeypatch.setattr(record_feeds._RecordFeed, "_next_span", counted)
    return count


@pytest.fixture
def uniform(tmp_path):
    return uniform_files(tmp_path, 700, [13, 18, 23])


@pytest.fixture
def mixed(tmp_path):
    """One empty file among them."""
    return mixed_files(tmp_path, 1, 2000, [9, 0, 23, 30])


KINDS = ["reader", "interleave", "parallel_interleave", "parallel_reads", "autotune_reads"]


# --------------------------------------------------------------------------- the stream


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("files", ["uniform", "mixed"])
@pytest.mark.parametrize("batch,drop", [(8, False), (8, True), (50, False), (1, False)])
def test_batches_equal_the_pipeline_that_reads_here(kind, files, batch, drop, request, spans_described):
    files = request.getfixturevalue(files)
    want = outcome(iter(pipeline(files, kind, batch=batch, drop=drop, on=False)))
    got = outcome(iter(pipeline(files, kind, batch=batch, drop=drop)))
    assert want[1] is None and got[1] is None
    same(got[0], want[0])
    assert spans_described[0] >= len(want[0]), "the workers did not read the records by ranges"


def test_a_block_length_does_not_change_the_order(uniform, spans_described):
    want = outcome(iter(pipeline(uniform, "reader", batch=6, on=False)))[0]
    got = outcome(iter(pipeline(uniform, "parallel_interleave", batch=6, block_length=4)))
    assert got[1] is None
    same(got[0], want)
    assert spans_described[0]


@pytest.mark.parametrize("inner", [compressed_or_plain, not_a_reader])
def test_inner_datasets_that_are_not_plain_readers(uniform, inner, spans_described):
    """`compression_type=""` is a plain reader (read by ranges); a reader with a ``take`` is not (its
    records are read here) -- the batches are the same either way."""
    want = outcome(iter(pipeline(uniform, batch=6, on=False, inner=inner)))
    got = outcome(iter(pipeline(uniform, batch=6, inner=inner)))
    assert want[1] is None and got[1] is None
    same(got[0], want[0])
    assert bool(spans_described[0]) == (inner is compressed_or_plain)


@pytest.mark.parametrize("kind", ["interleave", "parallel_interleave"])
@pytest.mark.parametrize("cycle,block", [(2, 1), (3, 2), (2, 5), (4, 3)])
@pytest.mark.parametrize("files", ["uniform", "mixed"])
def test_an_interleave_of_several_open_files_keeps_its_order(kind, cycle, block, files, request, spans_described):
    """Several slots: a batch takes blocks of several files in turn (a segment per block; each file's
    part of a span read at once), exhausted files replaced in their slot, in the interleave's order."""
    files = request.getfixturevalue(files)
    want = outcome(iter(pipeline(files, kind, batch=7, on=False, cycle_length=cycle, block_length=block)))
    got = outcome(iter(pipeline(files, kind, batch=7, cycle_length=cycle, block_length=block)))
    assert want[1] is None and got[1] is None
    same(got[0], want[0])
    assert spans_described[0] >= len(want[0])


@pytest.mark.parametrize("at", [0, 2, 5])
@pytest.mark.parametrize("saved_on,restored_on", [(True, True), (True, False), (False, True)])
def test_a_checkpoint_of_an_interleave_of_several_open_files_resumes_exactly(at, saved_on, restored_on, mixed):
    args = {"cycle_length": 3, "block_length": 2}
    want = outcome(iter(pipeline(mixed, "parallel_interleave", batch=4, on=False, **args)))[0]
    it = iter(pipeline(mixed, "parallel_interleave", batch=4, on=saved_on, **args))
    head = [next(it) for _ in range(at)]
    state = it.get_state()
    it.close()
    again = iter(pipeline(mixed, "parallel_interleave", batch=4, on=restored_on, **args))
    again.set_state(state)
    rest, err = outcome(again)
    assert err is None
    same(head + rest, want)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("where", ["data", "length", "truncated"])
def test_damage_is_reported_where_the_pipeline_that_reads_here_reports_it(kind, where, mixed):
    target = str(mixed[3])
    sizes = [len(r) + 16 for r in tpsd.TFRecordDataset(target)]
    at = sum(sizes[:9])  # record 9 of the last file
    if where == "data":
        corrupt(target, at + 12 + 3)
    elif where == "length":
        corrupt(target, at + 2)
    else:
        os.truncate(target, at + 12 + 1)
    want = outcome(iter(pipeline(mixed, kind, batch=5, on=False)))
    got = outcome(iter(pipeline(mixed, kind, batch=5)))
    assert want[1] is not None and got[1] == want[1]
    same(got[0], want[0])


@pytest.mark.parametrize("where", ["data", "truncated"])
def test_damage_in_an_interleave_of_several_open_files_is_reported_in_its_place(where, mixed):
    target = str(mixed[2])
    sizes = [len(r) + 16 for r in tpsd.TFRecordDataset(target)]
    at = sum(sizes[:11])  # record 11 of the third file, read between the others' blocks
    if where == "data":
        corrupt(target, at + 12 + 2)
    else:
        os.truncate(target, at + 12 + 1)
    args = {"cycle_length": 3, "block_length": 2}
    want = outcome(iter(pipeline(mixed, "parallel_interleave", batch=4, on=False, **args)))
    got = outcome(iter(pipeline(mixed, "parallel_interleave", batch=4, **args)))
    assert want[1] is not None and got[1] == want[1]
    same(got[0], want[0])


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_file_is_reported_where_the_pipeline_that_reads_here_reports_it(kind, uniform, tmp_path):
    files = [uniform[0], tmp_path / "missing.tfrecord", uniform[1]]
    want = outcome(iter(pipeline(files, kind, on=False)))
    got = outcome(iter(pipeline(files, kind)))
    assert want[1] is not None and got[1] == want[1]
    same(got[0], want[0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fn", [failing_on_7, shapes_differ_at_7])
def test_an_element_error_comes_in_its_place_and_the_stream_goes_on(kind, fn, uniform):
    def everything(it):
        got = []
        while True:
            try:
                got.append(("ok", next(it)))
            except StopIteration:
                return got
            except Exception as e:
                got.append(("error", type(e), str(e).split("\n")[0]))

    want = everything(iter(pipeline(uniform, kind, fn=fn, on=False)))
    got = everything(iter(pipeline(uniform, kind, fn=fn)))
    assert [g[0] for g in got] == [w[0] for w in want] and "error" in [w[0] for w in want]
    for g, w in zip(got, want):
        if g[0] == "error":
            assert g == w
        else:
            same([g[1]], [w[1]])


# --------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("files", ["uniform", "mixed"])
@pytest.mark.parametrize("at", [0, 1, 4, 8])
@pytest.mark.parametrize("saved_on,restored_on", [(True, True), (True, False), (False, True)])
def test_a_checkpoint_resumes_exactly_in_either_pipeline(kind, files, at, saved_on, restored_on, request):
    files = request.getfixturevalue(files)
    want = outcome(iter(pipeline(files, kind, batch=5, on=False)))[0]
    it = iter(pipeline(files, kind, batch=5, on=saved_on))
    head = [next(it) for _ in range(at)]
    state = it.get_state()
    it.close()
    again = iter(pipeline(files, kind, batch=5, on=restored_on))
    again.set_state(state)
    rest, err = outcome(again)
    assert err is None
    same(head + rest, want)


@pytest.mark.parametrize("cycle", [1, 3])
def test_the_interleave_feed_states_restore_into_the_interleave(mixed, cycle):
    """The feed's state, after every span, is a position the interleave itself resumes from."""
    ds = source(mixed, "parallel_interleave", cycle_length=cycle, block_length=3)
    records = list(ds)
    ctx = IterContext(ds.options(), (0,))
    feed = ds._record_feed(ctx, 4)(ds._make_iterator(ctx).get_state())
    seen = 0
    try:
        while True:
            state = feed.get_state()
            again = ds._make_iterator(ctx)
            again.set_state(state)
            assert list(again) == records[seen:]
            again.close()
            try:
                span = next(feed)
            except StopIteration:
                break
            got = span.read()
            assert got == records[seen : seen + len(got)] and 0 < len(got) <= 4
            seen += len(got)
    finally:
        feed.close()
    assert seen == len(records)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "parallel_reads"])  # one file open at a time
def test_a_running_iterator_moved_into_a_file_gone_since_reports_it_as_the_pipeline_that_reads_here(
        kind, uniform, monkeypatch):
    """A running fused iterator moved to a position its feed cannot take (`SpanFallback` in its
    ``set_state`` or ``_skip``: a file deleted since) hands over to the pipeline that reads the records here,
    which reports the missing file as it always does."""
    it = iter(pipeline(uniform, kind, batch=5, on=False))
    for _ in range(4):  # 20 records: inside the second file (13 + 18 records)
        next(it)
    state = it.get_state()["pipeline"]
    it.close()
    os.remove(uniform[1])
    refused = []  # the running feed's moves (its set_state, then _skip) that raised SpanFallback
    def counting(move):
        def counted(self, arg):
            try:
                return move(self, arg)
            except record_spans.SpanFallback:
                refused.append(type(self).__name__)
                raise

        return counted

    for feed in (record_feeds.ReaderFeed, record_feeds.InterleaveFeed):
        for name in ("set_state", "_skip"):
            monkeypatch.setattr(feed, name, counting(getattr(feed, name)))

    def moved(on):
        ds = pipeline(uniform, kind, batch=5, on=on)
        node = ds._make_iterator(IterContext(ds.options(), (0,)))
        try:
            next(node)  # running (with the workers' feed, when on)
            try:
                node.set_state(state)
            except Exception as e:
                return [], (type(e), str(e).split("\n")[0])
            return outcome(node)
        finally:
            node.close()

    want, got = moved(False), moved(True)
    assert want[1] is not None and got[1] == want[1]
    same(got[0], want[0])
    assert refused, "the running feed was not asked to move"
