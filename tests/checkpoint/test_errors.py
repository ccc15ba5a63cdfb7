"""Wrong input to a checkpoint says what was received, what is required, and the fix."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def test_a_shape_mismatch_names_the_key_and_both_shapes_and_changes_nothing(tmp_path):
    with tps.MirroredStrategy().scope():
        a, b = tps.Variable(np.ones(3, np.float32)), tps.Variable(np.ones((2, 2), np.float32))
    path = tps.train.Checkpoint(a=a, b=b).save(str(tmp_path / "c"))
    with tps.MirroredStrategy().scope():
        a2, b2 = tps.Variable(np.zeros(3, np.float32)), tps.Variable(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"(?s)variable 'b' was saved with shape \(2, 2\) and dtype float32.*"
                                         r"has shape \(2, 3\).*Fix: build the model"):
        tps.train.Checkpoint(a=a2, b=b2).restore(path)
    assert a2.numpy().tolist() == [0.0, 0.0, 0.0]


def test_a_dtype_mismatch_of_an_array_is_reported(tmp_path):
    path = tps.train.Checkpoint(x=np.ones(3, np.int32)).save(str(tmp_path / "c"))
    with pytest.raises(ValueError, match=r"'x' was saved with shape \(3,\) and dtype int32.*dtype float32"):
        tps.train.Checkpoint(x=np.ones(3, np.float32)).restore(path)


def test_a_value_saved_under_a_name_cannot_restore_into_an_iterator(tmp_path):
    path = tps.train.Checkpoint(it=5).save(str(tmp_path / "c"))
    with pytest.raises(ValueError, match="'it' holds a value in the checkpoint but is a iterator here"):
        tps.train.Checkpoint(it=iter(tpsd.Dataset.range(3))).restore(path)


def test_a_dataset_is_refused_with_the_iterator_fix():
    with pytest.raises(TypeError, match=r"(?s)data= is a dataset \(RangeDataset\).*it = iter\(dataset\)"):
        tps.train.Checkpoint(data=tpsd.Dataset.range(3)).save("/tmp/never")


def test_an_object_without_state_is_refused(tmp_path):
    with pytest.raises(TypeError, match=r"(?s)fn= is a function .*holds no checkpointable state.*Fix: pass tps.Variables"):
        tps.train.Checkpoint(fn=lambda x: x).save(str(tmp_path / "c"))


def test_method_names_cannot_name_objects():
    with pytest.raises(ValueError, match="'save' is the name of a Checkpoint method"):
        tps.train.Checkpoint(save=1)


def test_a_path_must_be_a_string():
    with pytest.raises(TypeError, match=r"file_prefix must be a non-empty path \(str or os.PathLike\); received int: 3"):
        tps.train.Checkpoint(x=1).save(3)


def test_a_template_without_data_cannot_be_saved(tmp_path):
    with pytest.raises(TypeError, match="'x' is a jax.ShapeDtypeStruct, which has no data to save"):
        tps.train.Checkpoint(x=jax.ShapeDtypeStruct((2,), np.float32)).save(str(tmp_path / "c"))
    assert tps.train.latest_checkpoint(str(tmp_path)) is None


def test_object_arrays_are_refused_rather_than_pickled(tmp_path):
    with pytest.raises(TypeError, match="NumPy array of Python objects, which cannot be saved without pickle"):
        tps.train.Checkpoint(x=np.array([b"a", None], dtype=object)).save(str(tmp_path / "c"))


def test_a_pytree_leaf_that_is_not_state_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"(?s)'tree/f' is a builtin_function_or_method .*which a checkpoint cannot hold"):
        tps.train.Checkpoint(tree={"w": np.ones(1), "f": print}).save(str(tmp_path / "c"))


def test_an_iterator_that_refuses_its_state_leaves_every_iterator_where_it_was(tmp_path):
    first, second = iter(tpsd.Dataset.range(10)), iter(tpsd.Dataset.range(10).batch(2))
    next(first), next(first), next(second)
    path = tps.train.Checkpoint(a=first, b=second).save(str(tmp_path / "c"))
    other_first = iter(tpsd.Dataset.range(10))
    unlike = iter(tpsd.Dataset.range(10).map(lambda x: x).filter(lambda x: True))  # another pipeline
    with pytest.raises(ValueError, match=r"(?s)iterator 'b' refused its saved position.*no object was changed"):
        tps.train.Checkpoint(a=other_first, b=unlike).restore(path)
    assert int(next(other_first)) == 0


def test_a_missing_orbax_gives_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "orbax.checkpoint", None)
    with pytest.raises(ImportError, match=r"(?s)needs orbax-checkpoint.*pip install 'tpustrategy\[checkpoint\]'"):
        tps.train.Checkpoint(x=np.ones(2)).save(str(tmp_path / "c"))
    # Checkpoints without arrays do not need orbax at all.
    it = iter(tpsd.Dataset.range(4))
    next(it)
    path = tps.train.Checkpoint(it=it, step=2).save(str(tmp_path / "d"))
    fresh = iter(tpsd.Dataset.range(4))
    tps.train.Checkpoint(it=fresh, step=0).restore(path)
    assert int(next(fresh)) == 1
