"""Deferred restoration, as TensorFlow's checkpoint guide uses it: values wait for the objects
created after restore (attached variables, list appends, dict items, lazily built models)."""

from __future__ import annotations

import copy
import gc
import logging
import pickle

import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


class Dense:
    """A layer that builds its variables on its first call (like a Keras layer)."""

    def __init__(self, units: int):
        self.units = units
        self.kernel = None
        self.bias = None

    def __call__(self, x):
        if self.kernel is None:
            self.kernel = tps.Variable(jnp.zeros((x.shape[-1], self.units)))
            self.bias = tps.Variable(jnp.zeros((self.units,)))
        return x @ self.kernel.value() + self.bias.value()


class Net:
    def __init__(self):
        self.l1 = Dense(5)

    def __call__(self, x):
        return self.l1(x)


KERNEL = np.arange(5, dtype=np.float32).reshape(1, 5)
BIAS = np.full(5, 7.0, np.float32)


@pytest.fixture
def saved(tmp_path):
    net = Net()
    net(jnp.ones((1, 1)))
    net.l1.kernel.assign(KERNEL)
    net.l1.bias.assign(BIAS)
    ckpt = tps.train.Checkpoint(step=tps.Variable(3.0), net=net)
    return ckpt.save(str(tmp_path / "tf_ckpts" / "ckpt"))


def test_a_variable_attached_after_restore_gets_its_saved_value(saved):
    to_restore = tps.Variable(jnp.zeros([5]))
    fake_layer = tps.train.Checkpoint(bias=to_restore)
    fake_net = tps.train.Checkpoint(l1=fake_layer)
    new_root = tps.train.Checkpoint(net=fake_net)
    status = new_root.restore(saved)
    np.testing.assert_array_equal(to_restore.numpy(), BIAS)
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match="net/l1/kernel"):
        status.assert_consumed()
    delayed_restore = tps.Variable(jnp.zeros([1, 5]))
    fake_layer.kernel = delayed_restore
    np.testing.assert_array_equal(delayed_restore.numpy(), KERNEL)
    new_root.step = tps.Variable(0.0)
    assert float(new_root.step.numpy()) == 3.0
    status.assert_consumed()


def test_a_lazily_built_model_gets_its_values_when_it_builds(saved):
    net = Net()
    status = tps.train.Checkpoint(net=net).restore(saved)
    assert sorted(status.unused) == ["net/l1/bias", "net/l1/kernel", "step"]
    out = net(jnp.ones((2, 1)))
    np.testing.assert_array_equal(net.l1.kernel.numpy(), KERNEL)
    np.testing.assert_array_equal(net.l1.bias.numpy(), BIAS)
    np.testing.assert_array_equal(np.asarray(out), np.ones((2, 1)) @ KERNEL + BIAS)
    assert status.unused == ["step"]
    status.expect_partial()


def test_a_restored_layer_goes_back_to_its_class_and_copies_and_pickles(saved):
    net = Net()
    tps.train.Checkpoint(net=net).restore(saved).expect_partial()
    net(jnp.ones((1, 1)))
    assert type(net.l1) is Dense  # nothing waits under it any more
    clone = pickle.loads(pickle.dumps(copy.deepcopy(net)))
    assert type(clone) is Net
    np.testing.assert_array_equal(clone.l1.kernel.numpy(), KERNEL)


def test_list_appends_and_dict_items_after_restore_get_their_values(tmp_path):
    save = tps.train.Checkpoint()
    save.listed = [tps.Variable(1.0)]
    save.listed.append(tps.Variable(2.0))
    save.mapped = {"one": save.listed[0]}
    save.mapped["two"] = save.listed[1]
    save_path = save.save(str(tmp_path / "tf_list_example"))

    restore = tps.train.Checkpoint()
    v2 = tps.Variable(0.0)
    assert v2.numpy() == 0.0
    restore.mapped = {"two": v2}
    restore.restore(save_path)
    assert v2.numpy() == 2.0

    restore.listed = []
    assert restore.listed == []
    v1 = tps.Variable(0.0)
    restore.listed.append(v1)  # restores v1, from the restore() above
    assert v1.numpy() == 1.0
    restore.mapped["three"] = three = tps.Variable(-1.0)  # nothing saved there: unchanged
    assert three.numpy() == -1.0


def test_a_python_number_set_on_a_checkpoint_after_restore_takes_the_saved_number(tmp_path):
    path = tps.train.Checkpoint(epoch=4, w=tps.Variable(1.0)).save(str(tmp_path / "c"))
    ckpt = tps.train.Checkpoint(w=tps.Variable(0.0))
    status = ckpt.restore(path)
    ckpt.epoch = 0
    assert ckpt.epoch == 4
    status.assert_consumed()


def test_a_deferred_value_of_another_shape_raises_when_the_variable_is_attached(saved):
    fake_layer = tps.train.Checkpoint()
    root = tps.train.Checkpoint(net=tps.train.Checkpoint(l1=fake_layer))
    root.restore(saved).expect_partial()
    with pytest.raises(ValueError, match=r"(?s)net/l1/kernel.*shape \(1, 5\).*shape \(3,\)"):
        fake_layer.kernel = tps.Variable(jnp.zeros(3))


def test_unclaimed_values_are_logged_unless_expect_partial(saved, caplog):
    with caplog.at_level(logging.WARNING, logger="tpustrategy"):
        tps.train.Checkpoint(net=Net()).restore(saved).expect_partial()
        gc.collect()
    assert "expect_partial" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="tpustrategy"):
        tps.train.Checkpoint(net=Net()).restore(saved)
        gc.collect()
    assert "(root).net.l1.kernel" in caplog.text and "expect_partial" in caplog.text


def test_a_second_restore_replaces_the_values_still_waiting_from_the_first(saved, tmp_path):
    other = tps.train.Checkpoint(step=tps.Variable(9.0)).save(str(tmp_path / "other" / "c"))
    ckpt = tps.train.Checkpoint()
    ckpt.restore(saved).expect_partial()
    ckpt.restore(other)
    ckpt.step = tps.Variable(0.0)
    assert float(ckpt.step.numpy()) == 9.0
    ckpt.net = net = Net()
    net(jnp.ones((1, 1)))
    np.testing.assert_array_equal(net.l1.kernel.numpy(), np.zeros((1, 5)))  # first restore dropped
