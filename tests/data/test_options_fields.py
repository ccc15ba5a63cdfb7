"""Every field of TensorFlow 2.21's tf.data.Options: present, validated, merged; those with an analogue act."""

from __future__ import annotations

import json
import pathlib
import threading
import time

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.parallel.threads import resolve_parallelism

X = tpsd.experimental
REFS = json.loads((pathlib.Path(__file__).parent / "fixtures" / "data_source_references.json").read_text())
SURFACE = json.loads(pathlib.Path("/work/shared/reference/tf_api_surface_2.21.json").read_text()) \
    if pathlib.Path("/work/shared/reference/tf_api_surface_2.21.json").exists() else None


def test_every_tensorflow_option_field_exists_and_starts_unset():
    o = tpsd.Options()
    for name, value in REFS["options_unset"].items():
        assert getattr(o, name) == value
    for name in ("autotune", "experimental_optimization", "experimental_threading", "threading",
                 "experimental_distribute", "experimental_external_state_policy", "framework_type",
                 "experimental_deterministic", "merge"):
        assert hasattr(o, name)
    assert o.threading is o.experimental_threading
    if SURFACE is not None:
        assert [m for m in SURFACE["tf.data.Options"]["members"] if not hasattr(o, m)] == []


def test_enums_have_tensorflows_members_and_values():
    assert {m.name: int(m) for m in X.AutotuneAlgorithm} == REFS["autotune_algorithms"]
    assert {m.name: int(m) for m in X.ExternalStatePolicy} == REFS["external_state_policies"]


def test_fields_are_validated_like_tensorflow():
    o = tpsd.Options()
    with pytest.raises(TypeError, match="experimental_slack must be a bool"):
        o.experimental_slack = 3
    with pytest.raises(TypeError, match="dataset_name must be a str"):
        o.dataset_name = 3
    with pytest.raises(ValueError, match="must be one of ExternalStatePolicy.WARN"):
        o.experimental_external_state_policy = 7
    with pytest.raises(TypeError, match="framework_type must be a list of str"):
        o.framework_type = "keras"
    with pytest.raises(AttributeError, match="has no option 'map_fuson'"):
        o.experimental_optimization.map_fuson = True
    o.experimental_external_state_policy = X.ExternalStatePolicy.FAIL
    o.autotune.autotune_algorithm = X.AutotuneAlgorithm.HILL_CLIMB
    o.experimental_optimization.map_fusion = True
    o.dataset_name = "train"
    o.framework_type = ["keras"]
    assert o.experimental_external_state_policy is X.ExternalStatePolicy.FAIL
    assert o.experimental_optimization.map_fusion is True and o.framework_type == ["keras"]


def test_downstream_options_win_field_by_field():
    a, b = tpsd.Options(), tpsd.Options()
    a.autotune.cpu_budget, a.experimental_slack = 3, True
    b.autotune.ram_budget, b.experimental_slack = 1 << 20, False
    ds = tpsd.Dataset.range(3).with_options(a).with_options(b)
    merged = ds.options()
    assert (merged.autotune.cpu_budget, merged.autotune.ram_budget, merged.experimental_slack) == (3, 1 << 20, False)


def _options(**fields):
    o = tpsd.Options()
    for path, value in fields.items():
        target = o
        *parents, leaf = path.split("__")
        for p in parents:
            target = getattr(target, p)
        setattr(target, leaf, value)
    return o


def test_autotune_parallelism_follows_the_cpu_budget_and_the_private_pool():
    assert resolve_parallelism(tpsd.AUTOTUNE, "t", options=_options(autotune__cpu_budget=3)) == 3
    assert resolve_parallelism(tpsd.AUTOTUNE, "t", options=_options(autotune__enabled=False)) == 1
    assert resolve_parallelism(8, "t", options=_options(threading__private_threadpool_size=2)) == 2
    assert resolve_parallelism(tpsd.AUTOTUNE, "t", options=_options(autotune__cpu_budget=6,
                                                                   threading__private_threadpool_size=4)) == 4


def _map_threads():
    return sum(1 for t in threading.enumerate() if t.name.startswith("tpsd-map-"))


def test_the_private_thread_pool_caps_parallel_map_workers_and_warm_start_starts_them():
    before = _map_threads()
    opts = _options(threading__private_threadpool_size=2, experimental_warm_start=True)
    ds = tpsd.Dataset.counter().map(lambda x: x + 1, num_parallel_calls=8).with_options(opts)
    it = iter(ds)
    it._tree()  # the pipeline is built; warm start launched the workers before any next()
    deadline = time.monotonic() + 10
    while _map_threads() - before < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _map_threads() - before == 2
    assert [int(next(it)) for _ in range(100)] == list(range(1, 101))
    it.close()


def test_prefetch_follows_the_autotune_ram_budget_and_a_fixed_buffer_without_autotune():
    it = iter(tpsd.Dataset.range(10).prefetch(tpsd.AUTOTUNE).with_options(_options(autotune__ram_budget=4096)))
    assert [int(x) for x in it] == list(range(10))
    tree = iter(tpsd.Dataset.range(10).prefetch(tpsd.AUTOTUNE).with_options(_options(autotune__enabled=False)))
    node = tree._tree()
    assert getattr(node, "_capacity", None) == 2 or getattr(getattr(node, "_it", None), "_capacity", None) == 2
    assert [int(x) for x in tree] == list(range(10))


def test_options_without_an_analogue_change_nothing():
    opts = _options(experimental_slack=True, experimental_symbolic_checkpoint=True, dataset_name="x",
                    experimental_optimization__map_and_batch_fusion=False,
                    experimental_external_state_policy=X.ExternalStatePolicy.IGNORE)
    ds = tpsd.Dataset.range(20).map(lambda x: x * 2).batch(6).with_options(opts)
    assert [b.tolist() for b in ds] == [b.tolist() for b in tpsd.Dataset.range(20).map(lambda x: x * 2).batch(6)]


def test_specs_iterators_and_optionals():
    ds = tpsd.Dataset.range(2)
    spec = tpsd.DatasetSpec.from_value(ds)
    assert spec == tpsd.DatasetSpec(tpsd.TensorSpec((), np.int64)) and spec.element_spec == ds.element_spec
    assert spec.is_compatible_with(tpsd.Dataset.range(5)) and not spec.is_compatible_with(ds.map(lambda x: x * 0.5))
    it = iter(ds)
    assert isinstance(it, tpsd.Iterator) and isinstance(ds.as_numpy_iterator(), tpsd.NumpyIterator)
    assert tpsd.IteratorSpec.from_value(it) == tpsd.IteratorSpec(ds.element_spec)
    first = it.get_next_as_optional()
    assert first.has_value() and int(first.get_value()) == 0
    assert int(X.get_next_as_optional(it).get_value()) == 1
    end = it.get_next_as_optional()
    assert not end.has_value() and end.element_spec == ds.element_spec
    with pytest.raises(tpsd_errors().InvalidArgumentError, match="has no value"):
        end.get_value()
    assert X.Optional.from_value(np.int64(3)).get_value() == 3


def tpsd_errors():
    import tpustrategy.errors as errors

    return errors


# TensorFlow's options_test, ported (its inputs and asserted results; the fields are TF 2.21's).


def test_a_dataset_without_options_has_the_default_options():
    assert tpsd.Dataset.range(0).options() == tpsd.Options()
    options = tpsd.Options()
    assert tpsd.Dataset.range(0).with_options(options).cache().options() == options


def test_options_given_twice_merge_and_the_later_one_wins():
    o1, o2 = tpsd.Options(), tpsd.Options()
    o1.autotune.enabled = True
    o2.experimental_deterministic = False
    ds = tpsd.Dataset.range(0).with_options(o1).with_options(o2)
    assert ds.options().autotune.enabled is True and ds.options().experimental_deterministic is False
    o3, o4 = tpsd.Options(), tpsd.Options()
    o3.autotune.enabled, o4.autotune.enabled = False, True
    assert tpsd.Dataset.range(0).with_options(o3).with_options(o4).options().autotune.enabled is True
    assert tpsd.Dataset.range(0).with_options(o1).with_options(o1).options() == o1


def test_options_of_several_inputs_are_merged():
    o1, o2 = tpsd.Options(), tpsd.Options()
    o1.autotune.enabled = True
    o2.experimental_deterministic = True
    ds = tpsd.Dataset.zip((tpsd.Dataset.range(0).with_options(o1), tpsd.Dataset.range(0).with_options(o2)))
    assert ds.options().autotune.enabled is True and ds.options().experimental_deterministic is True
    mixed = tpsd.Dataset.sample_from_datasets([tpsd.Dataset.range(2).with_options(o1), tpsd.Dataset.range(2)])
    assert mixed.options().autotune.enabled is True


def test_fresh_options_have_their_own_default_sub_options():
    a, b = tpsd.Options(), tpsd.Options()
    assert a.experimental_optimization is not b.experimental_optimization
    assert a.experimental_threading is not b.experimental_threading
    assert a.experimental_optimization == X.OptimizationOptions()
    assert a.experimental_threading == tpsd.ThreadingOptions()
    assert a.autotune == X.AutotuneOptions()


def test_options_survive_a_map_after_them():
    o = tpsd.Options()
    o.experimental_slack = True
    o.experimental_optimization.apply_default_optimizations = False
    ds = tpsd.Dataset.range(5).with_options(o).map(lambda x: 10 * x)
    assert ds.options().experimental_slack is True
    assert ds.options().experimental_optimization.apply_default_optimizations is False
    assert [int(x) for x in ds] == [0, 10, 20, 30, 40]
