"""TensorFlow's mirrored_variable_test.testNonMatchingVariableCreation: one variable, one name."""

from __future__ import annotations

import warnings

import jax
import pytest

import tpustrategy as tps

pytestmark = pytest.mark.devices(2)


def _model_fn(name):
    v = tps.Variable(1.0, name=name)
    tps.get_replica_context().merge_call(lambda _: _)
    return v


def test_replicas_creating_a_variable_under_different_names_raise_runtime_error():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    names = tps.PerReplica(("foo", "bar"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the per-replica strings choose the eager path, with a warning
        with pytest.raises(RuntimeError, match=r"different names \['foo', 'bar'\]") as info:
            strategy.extended.call_for_each_replica(_model_fn, args=(names,))
    assert "Fix: pass the same `name` on every replica" in str(info.value)


def test_replicas_creating_a_variable_under_one_name_share_it():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = strategy.extended.call_for_each_replica(_model_fn, args=(tps.PerReplica(("foo", "foo")),))
    assert v.name == "foo:0"
    assert [float(c) for c in strategy.experimental_local_results(v)] == [1.0, 1.0]
