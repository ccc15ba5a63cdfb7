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


def test_a_variable_named_per_replica_with_a_digit_suffix_is_one_variable_named_by_replica_0():
    # mirrored_variable_test.testVariableWithSameCanonicalNameAcrossThreads: "foo_0" and
    # "foo_1" are one canonical name ("foo"); the variable keeps replica 0's name.
    strategy = tps.MirroredStrategy(jax.devices()[:2])

    def model_fn():
        replica_id = int(tps.get_replica_context().replica_id_in_sync_group)
        v = tps.Variable(1.0, name="foo_" + str(replica_id))
        tps.get_replica_context().merge_call(lambda _: _)
        return v

    with strategy.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # int(replica id) chooses the eager path, with a warning
        result = strategy.extended.call_for_each_replica(model_fn)
    assert isinstance(result, tps.Variable) and result.kind == "mirrored"
    assert result.name == "foo_0:0"
    assert [c.name for c in result.values] == ["foo_0:0", "foo_0/replica_1:0"]


def test_variables_with_one_canonical_name_keep_their_own_names_in_creation_order():
    # mirrored_variable_test.testMultipleVariablesWithSameCanonicalName.
    strategy = tps.MirroredStrategy(jax.devices()[:2])

    def model_fn():
        vs = [tps.Variable(1.0, name=n) for n in ("foo/bar", "foo_1/bar", "foo_1/bar_1", "foo/bar_1")]
        tps.get_replica_context().merge_call(lambda _: _)
        return vs

    with strategy.scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = strategy.extended.call_for_each_replica(model_fn)
    assert [v.kind for v in result] == ["mirrored"] * 4
    assert [v.name for v in result] == ["foo/bar:0", "foo_1/bar:0", "foo_1/bar_1:0", "foo/bar_1:0"]


@pytest.mark.parametrize("name, canonical", [
    (None, "Variable"), ("foo_0", "foo"), ("foo_1/bar_2", "foo/bar"), ("foo_12", "foo_12"),
    ("a_1/b_3/c", "a/b/c"), ("foo", "foo"),
])
def test_canonical_names_follow_tensorflows_shared_variable_rule(name, canonical):
    from tpustrategy._src.variables.variable import canonical_variable_name
    assert canonical_variable_name(name) == canonical


def test_mismatched_names_raise_tensorflows_first_line():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match=r"^Tried to create variable bar with mismatching name on device 1\n"):
            strategy.extended.call_for_each_replica(_model_fn, args=(tps.PerReplica(("foo", "bar")),))
