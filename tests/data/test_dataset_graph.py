"""Tests of cardinality arithmetic, len(), laziness and the graph walk/rewrite API."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.core.graph import find_readers, rewrite, walk
from tpustrategy._src.data.transformations.batch import BatchDataset
from tpustrategy._src.data.transformations.shard import ShardDataset

Dataset = tpsd.Dataset
INF = tpsd.INFINITE_CARDINALITY
UNK = tpsd.UNKNOWN_CARDINALITY


def test_cardinality_constants_match_tensorflow_and_are_also_experimental():
    assert (INF, UNK) == (-1, -2)
    assert tpsd.experimental.INFINITE_CARDINALITY == -1
    assert tpsd.experimental.UNKNOWN_CARDINALITY == -2
    assert tpsd.AUTOTUNE == tpsd.experimental.AUTOTUNE == -1
    assert tpsd.SHARD_HINT == -1


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Dataset.range(10), 10),
        (lambda: Dataset.range(10, 0, -3), 4),
        (lambda: Dataset.from_tensors(1), 1),
        (lambda: Dataset.from_tensor_slices(np.zeros((7, 2))), 7),
        (lambda: Dataset.range(10).batch(3), 4),
        (lambda: Dataset.range(10).batch(3, drop_remainder=True), 3),
        (lambda: Dataset.range(9).batch(3), 3),
        (lambda: Dataset.range(10).padded_batch(4), 3),
        (lambda: Dataset.range(10).repeat(3), 30),
        (lambda: Dataset.range(10).repeat(), INF),
        (lambda: Dataset.range(0).repeat(), 0),
        (lambda: Dataset.range(10).repeat(0), 0),
        (lambda: Dataset.range(10).take(3), 3),
        (lambda: Dataset.range(10).take(30), 10),
        (lambda: Dataset.range(10).take(-1), 10),
        (lambda: Dataset.range(10).repeat().take(5), 5),
        (lambda: Dataset.range(10).skip(3), 7),
        (lambda: Dataset.range(10).skip(30), 0),
        (lambda: Dataset.range(10).skip(-1), 0),
        (lambda: Dataset.range(10).repeat().skip(5), INF),
        (lambda: Dataset.range(10).shard(3, 0), 4),
        (lambda: Dataset.range(10).shard(3, 1), 3),
        (lambda: Dataset.range(10).shard(3, 2), 3),
        (lambda: Dataset.range(10).filter(lambda x: True), UNK),
        (lambda: Dataset.range(10).filter(lambda x: True).take(3), UNK),
        (lambda: Dataset.range(10).filter(lambda x: True).repeat(), INF),
        (lambda: Dataset.range(10).filter(lambda x: True).repeat(2), UNK),
        (lambda: Dataset.range(10).filter(lambda x: True).batch(2), UNK),
        (lambda: Dataset.range(10).map(lambda x: x), 10),
        (lambda: Dataset.range(10).map(lambda x: x, num_parallel_calls=2), 10),
        (lambda: Dataset.range(10).shuffle(3), 10),
        (lambda: Dataset.range(10).prefetch(1), 10),
        (lambda: Dataset.range(10).cache(), 10),
        (lambda: Dataset.range(10).enumerate(), 10),
        (lambda: Dataset.range(10).with_options(tpsd.Options()), 10),
        (lambda: Dataset.range(10).flat_map(lambda x: Dataset.range(x)), UNK),
        (lambda: Dataset.range(10).interleave(lambda x: Dataset.range(x), cycle_length=2), UNK),
        (lambda: Dataset.range(10).batch(2, drop_remainder=True).unbatch(), 10),
        (lambda: Dataset.range(10).batch(2).unbatch(), UNK),
        (lambda: Dataset.zip((Dataset.range(3), Dataset.range(5))), 3),
        (lambda: Dataset.zip((Dataset.range(3), Dataset.range(5).repeat())), 3),
        (lambda: Dataset.zip((Dataset.range(3).repeat(), Dataset.range(5).repeat())), INF),
        (lambda: Dataset.zip((Dataset.range(3), Dataset.range(5).filter(lambda x: True))), UNK),
        (lambda: Dataset.range(3).concatenate(Dataset.range(4)), 7),
        (lambda: Dataset.range(3).concatenate(Dataset.range(4).repeat()), INF),
        (lambda: Dataset.range(3).concatenate(Dataset.range(4).filter(lambda x: True)), UNK),
        (lambda: Dataset.from_generator(lambda: iter([1]), output_types=np.int64), UNK),
        (lambda: tpsd.TFRecordDataset(["a", "b"]), UNK),
    ],
)
def test_cardinality_follows_tensorflow_arithmetic(make, expected):
    assert make().cardinality() == expected


def test_len_is_the_cardinality_and_raises_type_error_for_infinite_or_unknown():
    assert len(Dataset.range(10).batch(4)) == 3
    with pytest.raises(TypeError, match="The dataset is infinite"):
        len(Dataset.range(3).repeat())
    with pytest.raises(TypeError, match="The dataset length is unknown"):
        len(Dataset.range(3).filter(lambda x: True))


def test_building_a_pipeline_opens_no_file(tmp_path):
    missing = str(tmp_path / "missing.tfrecord")
    ds = tpsd.TFRecordDataset([missing]).map(lambda r: r).prefetch(1)
    ds = ds.concatenate(tpsd.TextLineDataset(missing)).batch(2)
    assert ds.cardinality() == UNK
    with pytest.raises(FileNotFoundError):
        list(ds)


def test_every_node_exposes_inputs_and_walk_visits_each_node_once():
    source = Dataset.range(10)
    ds = Dataset.zip((source.map(lambda x: x), source.skip(1))).batch(2)
    nodes = list(walk(ds))
    assert nodes[0] is ds and nodes[1] is ds.inputs[0]
    assert sum(n is source for n in nodes) == 1
    assert len(nodes) == len({id(n) for n in nodes}) == 5
    assert ds._graph_nodes() == nodes


def test_with_inputs_returns_a_copy_with_new_inputs_and_keeps_parameters():
    batch = Dataset.range(10).batch(4, drop_remainder=True)
    new = batch.with_inputs(Dataset.range(100, 108))
    assert isinstance(new, BatchDataset) and new is not batch
    assert (new.batch_size, new.drop_remainder) == (4, True)
    assert [b.tolist() for b in new] == [[100, 101, 102, 103], [104, 105, 106, 107]]
    assert [b.tolist() for b in batch][0] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="expected 1 inputs; received 2"):
        batch.with_inputs(Dataset.range(1), Dataset.range(1))


def test_replace_changes_a_parameter_on_a_copy():
    batch = Dataset.range(10).batch(4)
    smaller = batch._replace(batch_size=2)
    assert len(smaller) == 5 and len(batch) == 3
    with pytest.raises(ValueError, match="unknown parameters"):
        batch._replace(size=2)


def test_rewrite_inserts_a_file_shard_above_the_reader_file_names(tmp_path):
    from tpustrategy._src.data.sources.writer import TFRecordWriter

    paths = []
    for i in range(4):
        path = tmp_path / f"f{i}.tfrecord"
        with TFRecordWriter(str(path)) as w:
            w.write(f"file{i}".encode())
        paths.append(str(path))
    ds = tpsd.TFRecordDataset(paths).map(lambda r: r.upper()).batch(8)

    def shard_files(node):
        if node.is_reader:
            return node.with_inputs(node.filenames.shard(2, 1))
        return None

    sharded = rewrite(ds, shard_files)
    assert [b.tolist() for b in sharded] == [[b"FILE1", b"FILE3"]]
    assert [b.tolist() for b in ds] == [[b"FILE0", b"FILE1", b"FILE2", b"FILE3"]]
    (reader,) = find_readers(sharded)
    assert isinstance(reader.filenames, ShardDataset)


def test_interleave_keeps_fn_so_a_reader_inside_can_be_discovered(tmp_path):
    files = Dataset.from_tensor_slices([str(tmp_path / "x.tfrecord")])
    ds = files.interleave(lambda f: tpsd.TFRecordDataset(f), cycle_length=2)
    inner = ds.fn(b"sample.tfrecord")
    assert inner.is_reader and [pathlib.Path(p.decode()).name for p in inner.filenames] == ["sample.tfrecord"]


def test_node_parameters_are_exposed_for_graph_passes():
    shuffle = Dataset.range(5).shuffle(3, seed=1, reshuffle_each_iteration=False)
    assert (shuffle.buffer_size, shuffle.seed, shuffle.reshuffle_each_iteration) == (3, 1, False)
    shard = Dataset.range(5).shard(2, 1)
    assert (shard.num_shards, shard.index) == (2, 1)
    assert Dataset.range(5).repeat(2).count == 2
    assert Dataset.range(5).take(2).count == 2
    assert Dataset.range(5).prefetch(2).buffer_size == 2
    assert tpsd.TFRecordDataset("a").is_reader and not Dataset.range(1).is_reader


def test_no_data_module_imports_jax():
    import ast

    root = pathlib.Path(tpsd.__file__).resolve().parents[1]
    files = [*(root / "_src" / "data").rglob("*.py"), *(root / "data").rglob("*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n == "jax" or n.startswith("jax.") for n in names), f"{path} imports {names}"
