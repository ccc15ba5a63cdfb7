"""Tests of tpsd.Options: fields, validation and tf.data-style merging."""

from __future__ import annotations

import pytest

import tpustrategy.data as tpsd

Dataset = tpsd.Dataset
Policy = tpsd.AutoShardPolicy


def test_auto_shard_policy_values_match_tensorflow():
    assert [(p.name, int(p)) for p in Policy] == [("OFF", -1), ("AUTO", 0), ("FILE", 1), ("DATA", 2), ("HINT", 3)]
    assert tpsd.experimental.AutoShardPolicy is Policy
    assert tpsd.experimental.DistributeOptions is tpsd.DistributeOptions


def test_default_options_are_unset_with_tensorflow_defaults():
    opts = Dataset.range(3).options()
    assert opts.experimental_distribute.auto_shard_policy == Policy.AUTO
    assert opts.deterministic is None
    assert opts.threading.private_threadpool_size is None


def test_with_options_sets_the_auto_shard_policy():
    opts = tpsd.Options()
    opts.experimental_distribute.auto_shard_policy = Policy.DATA
    ds = Dataset.range(3).with_options(opts).map(lambda x: x)
    assert ds.options().experimental_distribute.auto_shard_policy == Policy.DATA
    assert [int(x) for x in ds] == [0, 1, 2]


def test_options_set_downstream_override_and_unset_fields_inherit():
    first = tpsd.Options()
    first.experimental_distribute.auto_shard_policy = Policy.FILE
    first.deterministic = False
    second = tpsd.Options()
    second.experimental_distribute.auto_shard_policy = Policy.OFF
    merged = Dataset.range(3).with_options(first).batch(2).with_options(second).options()
    assert merged.experimental_distribute.auto_shard_policy == Policy.OFF
    assert merged.deterministic is False


def test_options_of_zipped_pipelines_are_merged_from_every_input():
    a = tpsd.Options()
    a.deterministic = False
    b = tpsd.Options()
    b.experimental_distribute.auto_shard_policy = Policy.DATA
    ds = Dataset.zip((Dataset.range(2).with_options(a), Dataset.range(2).with_options(b)))
    assert ds.options().deterministic is False
    assert ds.options().experimental_distribute.auto_shard_policy == Policy.DATA


def test_later_changes_to_an_options_object_do_not_leak_into_a_dataset():
    opts = tpsd.Options()
    opts.deterministic = True
    ds = Dataset.range(1).with_options(opts)
    opts.deterministic = False
    assert ds.options().deterministic is True


def test_experimental_deterministic_is_an_alias_of_deterministic():
    opts = tpsd.Options()
    opts.experimental_deterministic = False
    assert opts.deterministic is False


def test_setting_a_wrong_type_or_value_names_the_field():
    opts = tpsd.Options()
    with pytest.raises(TypeError, match="Options.deterministic must be a bool; received str"):
        opts.deterministic = "yes"
    with pytest.raises(ValueError, match="auto_shard_policy must be one of .*AutoShardPolicy.FILE"):
        opts.experimental_distribute.auto_shard_policy = 7
    with pytest.raises(TypeError, match="private_threadpool_size must be an int"):
        opts.threading.private_threadpool_size = 1.5
    with pytest.raises(TypeError, match="experimental_distribute must be a DistributeOptions"):
        opts.experimental_distribute = Policy.DATA


def test_an_unknown_option_lists_the_valid_ones():
    with pytest.raises(AttributeError, match="has no option 'auto_shard'.*experimental_distribute"):
        tpsd.Options().auto_shard = 1
    with pytest.raises(AttributeError, match="no option 'policy'"):
        _ = tpsd.DistributeOptions().policy


def test_auto_shard_policy_accepts_its_integer_value():
    opts = tpsd.Options()
    opts.experimental_distribute.auto_shard_policy = 2
    assert opts.experimental_distribute.auto_shard_policy is Policy.DATA


def test_with_options_rejects_anything_but_options():
    with pytest.raises(TypeError, match="options must be a tpsd.Options; received dict"):
        Dataset.range(1).with_options({"deterministic": True})


def test_options_compare_by_value():
    a, b = tpsd.Options(), tpsd.Options()
    assert a == b
    b.threading.max_intra_op_parallelism = 1
    assert a != b
