"""``tps.train.CheckpointOptions``: TensorFlow 2.21's fields, checked, accepted everywhere."""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest

import tpustrategy as tps

# tf.train.CheckpointOptions.__init__ in TensorFlow 2.21 (inspect.signature, defaults as printed).
TF_SIGNATURE = [("experimental_io_device", None), ("experimental_enable_async_checkpoint", False),
                ("experimental_write_callbacks", None), ("enable_async", False),
                ("experimental_skip_slot_variables", False), ("experimental_sharding_callback", None)]


def test_the_fields_and_defaults_are_tensorflows():
    parameters = list(inspect.signature(tps.train.CheckpointOptions).parameters.values())
    assert [(p.name, p.default) for p in parameters] == TF_SIGNATURE
    options = tps.train.CheckpointOptions()
    assert [(name, getattr(options, name)) for name, _ in TF_SIGNATURE] == TF_SIGNATURE
    assert not options.asynchronous


def test_tpu_code_constructs_it_as_in_tensorflow():
    options = tps.train.CheckpointOptions(experimental_io_device="/job:localhost",
                                          experimental_enable_async_checkpoint=True)
    assert options.experimental_io_device == "/job:localhost" and options.asynchronous
    assert tps.train.CheckpointOptions(enable_async=True).asynchronous
    assert "enable_async=True" in repr(tps.train.CheckpointOptions(enable_async=True))
    duplicate = copy.copy(options)
    assert duplicate is not options and duplicate.experimental_enable_async_checkpoint


@pytest.mark.parametrize("kwargs, match", [
    ({"experimental_io_device": 3}, r"experimental_io_device must be a device name \(str\) or None; received int: 3"),
    ({"enable_async": "yes"}, r"enable_async must be True or False; received str: 'yes'"),
    ({"experimental_enable_async_checkpoint": 1}, r"experimental_enable_async_checkpoint must be True or False"),
    ({"experimental_skip_slot_variables": None}, r"experimental_skip_slot_variables must be True or False"),
    ({"experimental_write_callbacks": print}, r"experimental_write_callbacks must be a list of callables"),
    ({"experimental_write_callbacks": [1]}, r"experimental_write_callbacks must be a list of callables"),
    ({"experimental_sharding_callback": 3}, r"experimental_sharding_callback must be a callable .* received int: 3"),
])
def test_wrong_types_name_the_argument_and_the_fix(kwargs, match):
    with pytest.raises(TypeError, match=rf"(?s)tps.train.CheckpointOptions: {match}.*Fix:"):
        tps.train.CheckpointOptions(**kwargs)


def test_every_api_accepts_options_and_rejects_other_values(tmp_path):
    options = tps.train.CheckpointOptions(experimental_io_device="/job:localhost")
    ckpt = tps.train.Checkpoint(x=np.arange(3.0), options=options)
    saved = ckpt.save(str(tmp_path / "s" / "ckpt"), options=options)
    written = ckpt.write(str(tmp_path / "w"), options=options)
    ckpt.restore(saved, options=options).assert_consumed()
    ckpt.read(written, options=options).assert_consumed()
    assert ckpt.read(written, options=options, like={"x": np.zeros(3)})["x"].tolist() == [0.0, 1.0, 2.0]
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path / "m"))
    assert manager.save(options=options).endswith("ckpt-2")
    for call, api in ((lambda: ckpt.save(str(tmp_path / "x"), options={}), "Checkpoint.save"),
                      (lambda: ckpt.write(str(tmp_path / "x"), options="async"), "Checkpoint.write"),
                      (lambda: ckpt.restore(saved, options=1), "Checkpoint.restore"),
                      (lambda: manager.save(options=True), "CheckpointManager.save"),
                      (lambda: tps.train.Checkpoint(options=[]), "tps.train.Checkpoint")):
        with pytest.raises(TypeError, match=rf"{api}: options must be a tps.train.CheckpointOptions or None"):
            call()


def test_skip_slot_variables_leaves_the_optimizer_state_alone(tmp_path):
    with tps.MirroredStrategy().scope():
        w = tps.Variable(np.ones(3, np.float32))
        optimizer = tps.optimizers.Adam(0.1)
        optimizer.build([w])
    for slot in optimizer._slots:
        slot.assign(np.full(slot.shape, 5, slot.dtype))
    path = tps.train.Checkpoint(w=w, opt=optimizer).write(str(tmp_path / "c"))
    w.assign(np.zeros(3, np.float32))
    for slot in optimizer._slots:
        slot.assign(np.zeros(slot.shape, slot.dtype))
    skip = tps.train.CheckpointOptions(experimental_skip_slot_variables=True)
    status = tps.train.Checkpoint(w=w, opt=optimizer).restore(path, options=skip)
    assert w.numpy().tolist() == [1.0, 1.0, 1.0]
    assert all(not np.asarray(s.numpy()).any() for s in optimizer._slots)  # not restored
    assert "w" in status.matched and not any("_slots" in k for k in status.matched)
    tps.train.Checkpoint(w=w, opt=optimizer).restore(path).assert_consumed()
    assert all((np.asarray(s.numpy()) == 5).all() for s in optimizer._slots)
