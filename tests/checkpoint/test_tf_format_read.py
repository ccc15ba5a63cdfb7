"""Reading checkpoints written by TensorFlow 2.21 (fixtures from tools/make_tf_checkpoint_fixtures.py).

Every fixture folder holds TensorFlow's files and ``expected.json``: what
TensorFlow's own ``tf.train.load_checkpoint`` read back from them (keys,
dtypes, shapes, values) and the root's children in ``tf.train.CheckpointView``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct

import ml_dtypes
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.checkpoint.tf_format import bundle, sstable, wire

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tf")
PREFIXES = {"dtypes": "dtypes", "nested": "ckpt-1", "manager": "ckpt-3", "keras3": "ckpt-1",
            "mirrored": "mirrored", "sharded": "sharded", "sliced": "model", "tf_keras2": "ckpt-1",
            "same_as_ours": "plain"}
GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _expected(name: str) -> dict:
    with open(os.path.join(FIXTURES, name, "expected.json")) as f:
        return json.load(f)


def _as_list(value: np.ndarray) -> list:
    value = np.asarray(value)
    if value.dtype == object or value.dtype.kind == "S":
        return [bytes(v).hex() for v in value.reshape(-1)]
    if value.dtype.kind == "c":
        return [[float(v.real), float(v.imag)] for v in value.reshape(-1)]
    if value.dtype.kind == "b":
        return [bool(v) for v in value.reshape(-1)]
    if value.dtype.kind in "iu":
        return [int(v) for v in value.reshape(-1)]
    return [float(v) for v in value.astype(np.float64).reshape(-1)]


def _copy(tmp_path, name: str) -> str:
    folder = str(tmp_path / name)
    shutil.copytree(os.path.join(FIXTURES, name), folder)
    return folder


def _many_keys(tmp_path) -> str:
    """The two-block index fixture, unpacked (it is stored gzipped)."""
    folder = tmp_path / "many_keys"
    folder.mkdir()
    for name in os.listdir(os.path.join(FIXTURES, "many_keys")):
        with gzip.open(os.path.join(FIXTURES, "many_keys", name)) as f:
            (folder / name[:-3]).write_bytes(f.read())
    return str(folder)


@pytest.mark.parametrize("name", sorted(PREFIXES))
def test_every_value_reads_as_tensorflow_read_it(name):
    expected = _expected(name)["tensors"]
    reader = tps.train.load_checkpoint(os.path.join(FIXTURES, name, PREFIXES[name]))
    assert isinstance(reader, tps.train.CheckpointReader)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    assert sorted(shapes) == sorted(expected)
    for key, want in expected.items():
        assert shapes[key] == want["shape"], key
        assert reader.has_tensor(key)
        if key == GRAPH:
            assert isinstance(reader.get_tensor(key), bytes)
            continue
        got = dtypes[key]
        assert ("string" if got == np.dtype(object) else got.name) == want["dtype"], key
        value = np.asarray(reader.get_tensor(key))
        assert list(value.shape) == want["shape"], key
        assert _as_list(value) == want["values"], key


def test_every_dtype_comes_back_as_its_numpy_dtype():
    reader = tps.train.load_checkpoint(os.path.join(FIXTURES, "dtypes", "dtypes"))
    get = lambda name: reader.get_tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE")  # noqa: E731
    assert get("bf16").dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(get("bf16").astype(np.float32)[[0, 1, 3]], [1.0, -3.5, 0.0078125])
    assert get("bf16")[2] == ml_dtypes.bfloat16(1e30)  # rounded as TensorFlow rounds it
    assert get("f16").dtype == np.float16 and get("f16")[2] == 65504
    assert get("u64").dtype == np.uint64 and get("u64")[0] == 2**64 - 1
    assert get("i64").dtype == np.int64 and get("i64")[0] == -(2**63)
    assert get("c128").dtype == np.complex128 and get("c128")[0, 0] == 3 - 1j
    assert get("b").dtype == np.bool_ and get("b").tolist() == [True, False, True]
    assert get("s").tolist() == [b"hello", b"", b"\x00\xffbytes", "caf\u00e9".encode()]
    assert get("s_scalar") == b"one string"  # a scalar string is bytes, as in TensorFlow
    assert get("empty").shape == (0, 3)
    assert get("scalar").shape == () and float(get("scalar")) == 7.25


def test_object_paths_and_load_variable():
    folder = os.path.join(FIXTURES, "nested")
    reader = tps.train.load_checkpoint(folder)  # a folder: its state file's newest checkpoint
    np.testing.assert_array_equal(reader.get_tensor("net/l1/bias"), [0, 1, 2, 3])
    assert tps.train.load_variable(folder, "net/step") == 5
    assert tps.train.load_variable(folder, "net/step/.ATTRIBUTES/VARIABLE_VALUE:0") == 5
    names = [n for n, _ in tps.train.list_variables(folder)]
    assert names == sorted(_expected("nested")["tensors"])
    with pytest.raises(tps.errors.NotFoundError, match="Key net/l3 not found.*net/l1/bias"):
        reader.get_tensor("net/l3")


def test_a_managers_folder_latest_state_and_older_checkpoint():
    folder = os.path.join(FIXTURES, "manager")
    expected = _expected("manager")
    assert tps.train.latest_checkpoint(folder) == os.path.join(folder, "ckpt-3")
    state = tps.train.get_checkpoint_state(folder)
    assert state.model_checkpoint_path == os.path.join(folder, "ckpt-3")
    assert state.all_model_checkpoint_paths == [os.path.join(folder, p) for p in expected["checkpoints"]]
    np.testing.assert_array_equal(tps.train.load_variable(folder, "v"), [4.0, 5.0])
    np.testing.assert_array_equal(tps.train.load_variable(os.path.join(folder, "ckpt-2"), "v"),
                                  expected["older_v"])
    assert tps.train.load_variable(folder, "save_counter") == 3


def test_get_checkpoint_state_of_a_folder_without_one(tmp_path):
    assert tps.train.get_checkpoint_state(str(tmp_path)) is None
    with pytest.raises(TypeError, match="checkpoint_dir must be a folder path"):
        tps.train.get_checkpoint_state(3)


def test_checkpoints_iterator_yields_the_latest_then_times_out(tmp_path):
    folder = _copy(tmp_path, "manager")
    assert list(tps.train.checkpoints_iterator(folder, timeout=0)) == [os.path.join(folder, "ckpt-3")]
    calls = []

    def timeout_fn() -> bool:
        calls.append(1)
        return True

    assert list(tps.train.checkpoints_iterator(folder, timeout=0, timeout_fn=timeout_fn)) == [
        os.path.join(folder, "ckpt-3")]
    assert calls == [1]
    with pytest.raises(ValueError, match="min_interval_secs must be a number of seconds >= 0"):
        next(tps.train.checkpoints_iterator(folder, min_interval_secs=-1))
    with pytest.raises(TypeError, match="timeout_fn must be callable"):
        next(tps.train.checkpoints_iterator(folder, timeout_fn=3))


def test_checkpoint_view_children_descendants_and_match():
    for name in ("nested", "keras3", "mirrored", "dtypes"):
        expected = _expected(name)
        view = tps.train.CheckpointView(os.path.join(FIXTURES, name, PREFIXES[name]))
        assert sorted(view.children(0)) == expected["root_children"]
        assert len(view.descendants()) == expected["descendants"]
    view = tps.train.CheckpointView(os.path.join(FIXTURES, "nested", "ckpt-1"))
    net = view.children(0)["net"]
    assert sorted(view.children(net)) == ["l1", "l2", "layers", "step"]
    assert view.children(view.children(net)["layers"])["0"] == view.children(net)["l1"]  # one node, two edges

    class Obj:
        pass

    tree = Obj()
    tree.l1 = Obj()
    tree.l1.kernel = tps.Variable(np.zeros((3, 4), np.float32))
    root = tps.train.Checkpoint(net=tree)
    found = view.match(root)
    assert found[0] is root and found[net] is tree
    assert found[view.children(view.children(net)["l1"])["kernel"]] is tree.l1.kernel
    with pytest.raises(ValueError, match="node_id must be an int"):
        view.children(1000)


def test_a_name_based_checkpoint_has_no_object_graph():
    prefix = os.path.join(FIXTURES, "sliced", "model")
    with pytest.raises(ValueError, match="does not appear to be object-based"):
        tps.train.CheckpointView(prefix)
    with pytest.raises(ValueError, match="does not appear to be object-based"):
        tps.train.Checkpoint(v=tps.Variable(np.zeros(2, np.int32))).restore(prefix)


def test_sliced_partitioned_variables_are_put_together():
    reader = tps.train.load_checkpoint(os.path.join(FIXTURES, "sliced", "model"))
    assert sorted(reader.get_variable_to_shape_map()) == ["part", "plain"]  # slice entries hidden
    np.testing.assert_array_equal(reader.get_tensor("part"), np.arange(40, dtype=np.float32).reshape(10, 4))
    table = sstable.read_table(open(os.path.join(FIXTURES, "sliced", "model.index"), "rb").read())
    slices = [k for k, _ in table if k[:1] == b"\x00"]
    assert len(slices) == 3  # three parts of 4, 3 and 3 rows
    entry = wire.decode_entry(dict(table)[b"part"])
    assert entry.slices == [[(0, 4), (0, 4)], [(4, 3), (0, 4)], [(7, 3), (0, 4)]]
    assert bundle.slice_key(b"part", [(4, 3), (0, 4)]) in slices


def test_slice_keys_of_large_and_negative_numbers_sort_as_orderedcode():
    # OrderedCode's signed encoding keeps numeric order in byte order.
    numbers = [-(2**40), -70000, -65, -64, -1, 0, 1, 63, 64, 100, 8191, 8192, 2**33, 2**62]
    encoded = [bundle._signed_increasing(n) for n in numbers]
    assert encoded == sorted(encoded)
    assert bundle._signed_increasing(0) == b"\x80" and bundle._signed_increasing(-1) == b"\x7f"
    assert bundle._signed_increasing(64) == b"\xc0\x40"  # two bytes: header 10, then 14 bits


def test_sharded_data_files():
    folder = os.path.join(FIXTURES, "sharded")
    assert sorted(f for f in os.listdir(folder) if ".data-" in f) == [
        f"sharded.data-0000{i}-of-00004" for i in range(4)]
    for i in range(4):
        np.testing.assert_array_equal(tps.train.load_variable(os.path.join(folder, "sharded"), f"v{i}"),
                                      np.full(64, i, np.float32))


def test_an_index_of_two_blocks(tmp_path):
    folder = _many_keys(tmp_path)
    data = open(os.path.join(folder, "many.index"), "rb").read()
    footer = data[-sstable.FOOTER_SIZE:]
    _, _, pos = sstable._handle(footer, 0)
    index_offset, index_size, _ = sstable._handle(footer, pos)
    assert len(sstable.block_entries(sstable._block(data, index_offset, index_size, "index"))) == 2
    expected = json.load(open(os.path.join(folder, "expected.json")))["tensors"]
    reader = tps.train.load_checkpoint(os.path.join(folder, "many"))
    assert sorted(reader.get_variable_to_shape_map()) == sorted(expected)
    for i in (0, 57, 99):
        key = f"{i:03d}_" + "k" * 3000 + "/.ATTRIBUTES/VARIABLE_VALUE"
        assert reader.get_tensor(key).tolist() == expected[key]["values"] == [float(i), -float(i)]


def test_a_tf_keras_2_checkpoint_with_optimizer_slots():
    prefix = os.path.join(FIXTURES, "tf_keras2", "ckpt-1")
    reader = tps.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    assert shapes["model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"] == [3, 4]
    assert shapes["model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE"] == [3, 4]
    assert reader.get_tensor("optimizer/iter") == 2  # two steps of batch 2
    nodes = wire.decode_object_graph(reader.get_tensor(GRAPH))
    slots = [s for n in nodes for s in n.slot_variables]
    assert sorted({s.slot_name for s in slots}) == ["m", "v"] and len(slots) == 8


# Damage ----------------------------------------------------------------------------------------
def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


def test_a_changed_data_byte_is_data_loss_naming_the_file(tmp_path):
    folder = _copy(tmp_path, "nested")
    data = os.path.join(folder, "ckpt-1.data-00000-of-00001")
    entry = bundle.BundleReader(os.path.join(folder, "ckpt-1")).entries["net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"]
    _flip(data, entry.offset + 5)
    reader = tps.train.load_checkpoint(folder)
    np.testing.assert_array_equal(reader.get_tensor("net/l1/bias"), [0, 1, 2, 3])  # others still read
    with pytest.raises(tps.errors.DataLossError, match="checksum mismatch for 'net/l1/kernel") as info:
        reader.get_tensor("net/l1/kernel")
    assert info.value.filename == data and data in str(info.value)
    net = tps.train.Checkpoint(l1=tps.train.Checkpoint(kernel=tps.Variable(np.zeros((3, 4), np.float32))))
    with pytest.raises(tps.errors.DataLossError, match="ckpt-1.data-00000-of-00001"):
        tps.train.Checkpoint(net=net).restore(os.path.join(folder, "ckpt-1"))
    np.testing.assert_array_equal(net.l1.kernel.numpy(), np.zeros((3, 4)))  # nothing changed


def test_a_changed_string_byte_is_data_loss(tmp_path):
    folder = _copy(tmp_path, "dtypes")
    entry = bundle.BundleReader(os.path.join(folder, "dtypes")).entries["s/.ATTRIBUTES/VARIABLE_VALUE"]
    _flip(os.path.join(folder, "dtypes.data-00000-of-00001"), entry.offset + entry.size - 1)
    with pytest.raises(tps.errors.DataLossError, match="checksum mismatch for 's/"):
        tps.train.load_variable(os.path.join(folder, "dtypes"), "s")


def test_a_changed_index_byte_is_data_loss_naming_the_index(tmp_path):
    folder = _copy(tmp_path, "nested")
    index = os.path.join(folder, "ckpt-1.index")
    _flip(index, 40)
    with pytest.raises(tps.errors.DataLossError, match="checksum mismatch in the data block") as info:
        tps.train.load_checkpoint(folder)
    assert info.value.filename == index


def test_a_truncated_or_foreign_index_is_data_loss(tmp_path):
    folder = _copy(tmp_path, "nested")
    index = os.path.join(folder, "ckpt-1.index")
    data = open(index, "rb").read()
    open(index, "wb").write(data[:-10])
    with pytest.raises(tps.errors.DataLossError, match="magic number"):
        tps.train.load_checkpoint(folder)
    open(index, "wb").write(b"x" * 10)
    with pytest.raises(tps.errors.DataLossError, match="shorter than a table's 48-byte footer"):
        tps.train.load_checkpoint(folder)


def test_a_truncated_or_missing_data_file_is_data_loss(tmp_path):
    folder = _copy(tmp_path, "sharded")
    last = os.path.join(folder, "sharded.data-00003-of-00004")
    data = open(last, "rb").read()
    open(last, "wb").write(data[:100])
    reader = tps.train.load_checkpoint(os.path.join(folder, "sharded"))
    with pytest.raises(tps.errors.DataLossError, match="runs past the end of the file"):
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    os.remove(last)
    reader = tps.train.load_checkpoint(os.path.join(folder, "sharded"))
    with pytest.raises(tps.errors.DataLossError, match="missing its data file .*00003-of-00004") as info:
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    assert info.value.filename == last


def test_a_block_with_snappy_or_unknown_compression_is_refused():
    block = sstable._BlockBuilder(16)
    block.add(b"a", b"1")
    contents = block.finish()
    for kind, message in ((1, "snappy-compressed"), (7, "unknown compression type 7")):
        trailer = bytes([kind])
        data = contents + trailer + struct.pack("<I", sstable.mask(sstable.crc32c(contents + trailer)))
        with pytest.raises(sstable.TableError, match=message):
            sstable._block(data, 0, len(contents), "data")


def test_a_missing_checkpoint_is_not_found(tmp_path):
    with pytest.raises(tps.errors.NotFoundError, match="no checkpoint or folder"):
        tps.train.load_checkpoint(str(tmp_path / "ckpt-9"))


def test_a_variant_tensor_is_named_and_skippable(tmp_path):
    prefix = str(tmp_path / "it")
    bundle.write_bundle(prefix, {"x": np.zeros(2, np.float32)})
    rows = sstable.read_table(open(prefix + ".index", "rb").read())
    entry = wire.BundleEntry(dtype=21, shape=[], offset=0, size=0)  # DT_VARIANT: a tf.data iterator's state
    rows.append((b"y", wire.encode_entry(entry)))
    open(prefix + ".index", "wb").write(sstable.write_table(rows))
    reader = tps.train.load_checkpoint(prefix)
    with pytest.raises(tps.errors.UnimplementedError, match="'y' .* is a TensorFlow variant tensor"):
        reader.get_tensor("y")
    np.testing.assert_array_equal(reader.get_tensor("x"), [0, 0])
