"""Every damage of a saved folder is a DataLossError naming the checkpoint, or harmless.

Random damages (flipped bytes, truncation, deletion, appended bytes, edited
digits in the manifest, files swapped within the checkpoint or copied in from
another checkpoint of the same shapes) must each either raise
``tps.errors.DataLossError`` naming the checkpoint — with no object changed —
or restore values bit-identical to those saved. Nothing else is allowed: no
``KeyError``, no orbax error without names, no silently wrong value.
"""

from __future__ import annotations

import json
import os
import random
import shutil

import jax
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.checkpoint import files
from tpustrategy.errors import DataLossError


def _objects(value: int):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(np.arange(16, dtype=np.float32).reshape(4, 4) * value)
        b = tps.Variable(np.full(3, value, np.int32))
    it = iter(tps.data.Dataset.range(100))
    for _ in range(value):
        next(it)
    return tps.train.Checkpoint(w=w, b=b, table=np.linspace(0, value, 7), it=it, step=value, lr=0.1 * value)


def _values(ckpt) -> dict:
    return {"w": ckpt.w.numpy().tobytes(), "b": ckpt.b.numpy().tobytes(), "table": ckpt.table.tobytes(),
            "it": json.dumps(ckpt.it.get_state(), sort_keys=True), "step": ckpt.step, "lr": ckpt.lr}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("corruption")
    a, b = _objects(2), _objects(3)
    path_a, path_b = a.write(str(root / "a")), b.write(str(root / "b"))
    return path_a, path_b, _values(a)


def _files(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns)


def _damage(rng: random.Random, victim: str, other: str, kind: str) -> str:
    names = _files(victim)
    rel = rng.choice(names)
    full = os.path.join(victim, rel)
    data = bytearray(open(full, "rb").read())
    if kind == "flip" and data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        data = data[: rng.randrange(len(data))] if data else data
    elif kind == "delete":
        os.remove(full)
        return rel
    elif kind == "append":
        data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    elif kind == "digit":
        rel, full = files.MANIFEST, os.path.join(victim, files.MANIFEST)
        data = bytearray(open(full, "rb").read())
        digits = [i for i, c in enumerate(data) if chr(c).isdigit()]
        i = rng.choice(digits)
        data[i] = ord(str((int(chr(data[i])) + rng.randrange(1, 10)) % 10))
    elif kind == "foreign":
        candidates = [n for n in names if os.path.exists(os.path.join(other, n))]
        rel = rng.choice(candidates)
        full = os.path.join(victim, rel)
        data = bytearray(open(os.path.join(other, rel), "rb").read())
    elif kind == "swap":
        second = rng.choice(names)
        other_full = os.path.join(victim, second)
        a, b = open(full, "rb").read(), open(other_full, "rb").read()
        open(full, "wb").write(b)
        open(other_full, "wb").write(a)
        return f"{rel} <-> {second}"
    open(full, "wb").write(bytes(data))
    return rel


def _check_one(path: str, expected: dict, what: str) -> str:
    fresh = _objects(1)
    before = _values(fresh)
    try:
        fresh.restore(path).assert_consumed()
    except DataLossError as e:
        assert path in str(e) or path in (e.filename or ""), (what, str(e))
        assert "Fix:" in str(e), (what, str(e))
        assert _values(fresh) == before, what  # nothing changed
        return "error"
    assert _values(fresh) == expected, what
    return "identical"


@pytest.mark.parametrize("kind", ["flip", "truncate", "delete", "append", "digit", "foreign", "swap"])
def test_random_damages_are_data_loss_errors_or_harmless(saved, tmp_path, kind):
    path_a, path_b, expected = saved
    rng = random.Random(kind)
    outcomes = []
    for trial in range(12):
        victim = str(tmp_path / f"{kind}-{trial}")
        shutil.copytree(path_a, victim)
        what = f"{kind} {_damage(rng, victim, path_b, kind)}"
        outcomes.append(_check_one(victim, expected, what))
    if kind in ("delete", "digit", "foreign", "truncate"):
        assert "error" in outcomes


def test_a_data_file_from_another_checkpoint_is_caught_by_the_array_fingerprints(tmp_path):
    values = np.random.RandomState(0).randint(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)

    def write(seed: int) -> str:  # one value differs: both data files have the same size
        changed = values.copy()
        changed[7] ^= seed
        return tps.train.Checkpoint(x=changed).write(str(tmp_path / f"c{seed}"))

    path_a, path_b = write(1), write(2)

    # B's array files in A, with A's file list made to agree (sizes, CRC32Cs, its own checksum):
    # every container-level check passes; only the arrays' own fingerprints can tell.
    shutil.rmtree(os.path.join(path_a, "arrays"))
    shutil.copytree(os.path.join(path_b, "arrays"), os.path.join(path_a, "arrays"))
    _resealed(path_a, lambda m: m.update(files=files.inventory(path_a)))
    target = tps.train.Checkpoint(x=np.zeros(512, np.uint32))
    with pytest.raises(DataLossError, match=r"(?s)is damaged: the data read for 'x' \(a0\) is not what was saved") as err:
        target.restore(path_a)
    assert err.value.filename == os.path.join(path_a, "arrays") and not target.x.any()


def _resealed(path: str, edit) -> None:
    manifest = json.load(open(os.path.join(path, files.MANIFEST)))
    edit(manifest)
    manifest["manifest_crc32c"] = files._seal_of(manifest)
    json.dump(manifest, open(os.path.join(path, files.MANIFEST), "w"))


def test_a_variable_never_receives_a_placeholder(saved, tmp_path):
    path_a, _, _ = saved
    victim = str(tmp_path / "renamed")
    shutil.copytree(path_a, victim)
    _resealed(victim, lambda m: m["objects"]["w"]["parts"].update(value="a99"))
    fresh = _objects(1)
    with pytest.raises(DataLossError, match=r"lacks a99 that the manifest names"):
        fresh.restore(victim)
    assert not isinstance(fresh.w._value, jax.ShapeDtypeStruct)
    assert fresh.w.numpy().tolist() == (np.arange(16).reshape(4, 4)).tolist()


def test_stored_data_of_another_shape_names_the_checkpoint(saved, tmp_path):
    path_a, _, _ = saved
    victim = str(tmp_path / "reshaped")
    shutil.copytree(path_a, victim)

    def edit(m):
        m["objects"]["table"]["shape"] = [7, 1]

    _resealed(victim, edit)
    fresh = _objects(1)
    fresh.table = np.zeros((7, 1))
    with pytest.raises(DataLossError, match=rf"(?s)array data in {victim}/arrays does not match"):
        fresh.restore(victim)


@pytest.mark.parametrize("edit", ["crc", "kind", "files"])
def test_a_manifest_missing_entries_is_data_loss_not_key_error(saved, tmp_path, edit):
    path_a, _, _ = saved
    victim = str(tmp_path / edit)
    shutil.copytree(path_a, victim)

    def change(m):
        if edit == "crc":
            del next(iter(m["files"].values()))["crc32c"]
        elif edit == "kind":
            del m["objects"]["step"]["kind"]
        else:
            del m["files"]

    _resealed(victim, change)
    with pytest.raises(DataLossError, match="manifest.json is damaged"):
        _objects(1).restore(victim)


def test_one_changed_digit_in_the_manifest_is_caught(saved, tmp_path):
    path_a, _, _ = saved
    victim = str(tmp_path / "digit")
    shutil.copytree(path_a, victim)
    text = open(os.path.join(victim, files.MANIFEST)).read()
    assert '"type": "int", "value": 2}' in text
    open(os.path.join(victim, files.MANIFEST), "w").write(text.replace('"type": "int", "value": 2}', '"type": "int", "value": 3}'))
    fresh = _objects(1)
    with pytest.raises(DataLossError, match="does not match its checksum"):
        fresh.restore(victim)
    assert fresh.step == 1


def test_a_damaged_newest_checkpoint_raises_and_names_the_previous_one(tmp_path):
    directory = str(tmp_path)
    manager = tps.train.CheckpointManager(_objects(2), directory, max_to_keep=3)
    manager.save()
    manager.save()
    newest = manager.latest_checkpoint
    os.remove(os.path.join(newest, "iterators", "process-00000-of-00001.json"))
    restarted = tps.train.CheckpointManager(_objects(1), directory, max_to_keep=3)
    assert restarted.latest_checkpoint == newest == tps.train.latest_checkpoint(directory)  # not skipped
    previous = os.path.join(directory, "ckpt-1")
    fix = rf"Fix: restore the previous checkpoint explicitly, checkpoint.restore\('{previous}'\)"
    with pytest.raises(DataLossError, match=fix):
        restarted.restore_or_initialize()
    with pytest.raises(DataLossError, match=fix):
        restarted.checkpoint.restore(restarted.latest_checkpoint)
    restarted.checkpoint.restore(previous).assert_consumed()
    assert restarted.checkpoint.step == 2


def test_assert_consumed_fails_when_an_object_was_not_restored(saved):
    path_a, _, _ = saved
    fresh = _objects(1)
    fresh.extra = np.zeros(2)
    status = fresh.restore(path_a)
    with pytest.raises(AssertionError, match="'extra'"):
        status.assert_consumed()
    with pytest.raises(AssertionError, match="'extra'"):
        status.assert_existing_objects_matched()
