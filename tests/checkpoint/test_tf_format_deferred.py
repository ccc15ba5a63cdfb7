"""Deferred restoration from TensorFlow checkpoints: objects created after ``restore`` get their values.

As ``tf.train.Checkpoint.restore`` documents: values whose objects do not
exist yet wait, and an object created later at their path in the object graph
takes its value when it is set. The checkpoint is TensorFlow 2.21's own
(``fixtures/tf/nested``, from tools/make_tf_checkpoint_fixtures.py), the
expected values those TensorFlow read back from it (``expected.json``).
"""

from __future__ import annotations

import json
import os

import numpy as np

import tpustrategy as tps

PREFIX = os.path.join(os.path.dirname(__file__), "fixtures", "tf", "nested", "ckpt-1")


def _tf_value(key: str) -> np.ndarray:
    with open(os.path.join(os.path.dirname(PREFIX), "expected.json")) as f:
        entry = json.load(f)["tensors"][f"{key}/.ATTRIBUTES/VARIABLE_VALUE"]
    return np.asarray(entry["values"], np.dtype(entry["dtype"])).reshape(entry["shape"])


class Shell:
    """A model object whose layers are created later."""


class Dense:
    def __init__(self, n_in: int, n_out: int):
        self.kernel = tps.Variable(np.zeros((n_in, n_out), np.float32))
        self.bias = tps.Variable(np.zeros(n_out, np.float32))


def test_layers_and_variables_created_after_restore_take_their_saved_values():
    net = Shell()
    ckpt = tps.train.Checkpoint(net=net)
    status = ckpt.restore(PREFIX)
    assert "net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE" in status.unused  # waiting: no object yet
    assert ckpt.save_counter == 1

    net.l1 = Dense(3, 4)  # a layer built later: its variables get their values when attached
    np.testing.assert_array_equal(net.l1.kernel.numpy(), _tf_value("net/l1/kernel"))
    np.testing.assert_array_equal(net.l1.bias.numpy(), _tf_value("net/l1/bias"))
    assert "net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE" not in status.unused

    net.l2 = Shell()
    net.l2.kernel = tps.Variable(np.zeros((4, 2), np.float32))  # a variable attached to it later still
    np.testing.assert_array_equal(net.l2.kernel.numpy(), _tf_value("net/l2/kernel"))
    net.l2.bias = tps.Variable(np.zeros(2, np.float32))

    net.layers = []
    net.layers.append(net.l1)
    net.layers.append(Dense(2, 2))  # an item appended to a restored list
    np.testing.assert_array_equal(net.layers[1].kernel.numpy(), _tf_value("net/layers/1/kernel"))

    net.step = tps.Variable(np.int32(0))  # int64 in the checkpoint, 32 bits here (64-bit types off)
    assert int(net.step.numpy()) == 5
    ckpt.extra = {"lr": tps.Variable(np.float32(0))}  # a new object of the Checkpoint itself
    assert float(ckpt.extra["lr"].numpy()) == 0.125
    status.assert_consumed()


def test_a_value_that_does_not_fit_its_late_object_raises_and_changes_nothing():
    net = Shell()
    tps.train.Checkpoint(net=net).restore(PREFIX).expect_partial()
    wrong = Dense(4, 4)
    try:
        net.l1 = wrong
    except ValueError as e:
        assert "net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE" in str(e) and "shape (3, 4)" in str(e)
    else:
        raise AssertionError("a kernel of shape (4, 4) took a (3, 4) value")
    assert not wrong.kernel.numpy().any() and not wrong.bias.numpy().any()


def test_a_new_restore_replaces_what_an_earlier_one_left_waiting(tmp_path):
    net = Shell()
    ckpt = tps.train.Checkpoint(net=net)
    ckpt.restore(PREFIX).expect_partial()
    other = tps.train.Checkpoint(net=Shell(), step=tps.Variable(np.int32(7)))
    path = other.write(str(tmp_path / "other"), format="tensorflow")
    ckpt.restore(path).expect_partial()
    net.l1 = Dense(3, 4)  # nothing of the first checkpoint waits any more
    assert not net.l1.kernel.numpy().any()
