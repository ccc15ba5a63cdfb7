"""tps.tpu.DeviceAssignment: TF's placement core for core (golden cases), lookups, errors."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import case, ids
from tpustrategy._src.devices import placement
from tpustrategy.tpu import DeviceAssignment, DeviceOrderMode, Topology

_BUILT = [i for i in ids("tpu_device_assignment") if "output" in case(i)]
_FAILED = [i for i in ids("tpu_device_assignment") if "error" in case(i)]


def _topology(case_id: str = "da_v3_8_default_8_replicas") -> Topology:
    given = case(case_id)["input"]
    return Topology(mesh_shape=given["mesh_shape"], device_coordinates=given["device_coordinates"])


def _full_topology(mesh_shape: list[int], tasks: int = 1) -> Topology:
    positions = [list(p) for p in itertools.product(*(range(n) for n in mesh_shape))]
    per_task = len(positions) // tasks
    return Topology(mesh_shape=mesh_shape, device_coordinates=[
        positions[t * per_task:(t + 1) * per_task] for t in range(tasks)])


def _build(case_id: str) -> DeviceAssignment:
    given = case(case_id)["input"]
    return DeviceAssignment.build(_topology(case_id), computation_shape=given["computation_shape"],
                                  num_replicas=given["num_replicas"])


def test_golden_cases_of_both_tpu_categories_are_all_covered():
    assert set(_BUILT) | set(_FAILED) == set(ids("tpu_device_assignment"))
    assert len(_BUILT) == 6 and _FAILED == ["da_v3_8_too_many_replicas"]
    assert ids("tpu_strategy") == ["tpu_strategy_without_tpu"]


@pytest.mark.parametrize("case_id", _BUILT)
def test_build_places_every_core_where_tensorflow_does(case_id):
    golden = case(case_id)["output"]
    da = _build(case_id)
    assert da.num_replicas == golden["num_replicas"]
    assert da.num_cores_per_replica == golden["num_cores_per_replica"]
    assert da.core_assignment.tolist() == golden["core_assignment"]
    assert da.core_assignment.dtype == np.int32


@pytest.mark.parametrize("case_id", _BUILT)
def test_every_replica_core_has_tensorflows_coordinates_ordinal_and_device_names(case_id):
    job = case(case_id)["input"]["job"]
    da = _build(case_id)
    for r, cores in enumerate(case(case_id)["output"]["replicas"]):
        for c, want in enumerate(cores):
            assert list(da.coordinates(r, c)) == want["coordinates"]
            assert da.tpu_ordinal(r, c) == want["tpu_ordinal"]
            assert da.tpu_device(r, c, job=job) == want["tpu_device"]
            assert da.host_device(r, c, job=job) == want["host_device"]


@pytest.mark.parametrize("case_id", _BUILT)
def test_lookup_replicas_gives_tensorflows_sorted_replicas_per_task_and_core(case_id):
    da = _build(case_id)
    for key, want in case(case_id)["output"]["lookup_replicas"].items():
        task, core = map(int, re.fullmatch(r"task(\d+)_core(\d+)", key).groups())
        assert da.lookup_replicas(task, core) == want


@pytest.mark.parametrize("case_id", _FAILED)
def test_too_many_replicas_is_tensorflows_error(case_id):
    error = case(case_id)["error"]
    with pytest.raises(ValueError) as info:
        _build(case_id)
    assert str(info.value).startswith(error["core"])
    assert "Fix: ask for at most 8 replicas" in str(info.value)


def test_two_core_replicas_on_a_v3_8_form_a_ring_over_the_chips():
    da = DeviceAssignment.build(_topology(), computation_shape=[1, 1, 1, 2], num_replicas=4)
    assert [da.coordinates(r, 0)[:2] for r in range(4)] == [(0, 0), (1, 0), (1, 1), (0, 1)]


def test_mesh_order_mode_lays_the_same_replicas_out_as_a_grid():
    da = DeviceAssignment.build(_topology(), computation_shape=[1, 1, 1, 2], num_replicas=4,
                                device_order_mode=DeviceOrderMode.MESH)
    assert [da.coordinates(r, 0)[:2] for r in range(4)] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_ring_order_mode_equals_auto_where_rings_fit():
    auto = DeviceAssignment.build(_topology(), computation_shape=[1, 1, 1, 2], num_replicas=4)
    ring = DeviceAssignment.build(_topology(), computation_shape=[1, 1, 1, 2], num_replicas=4,
                                  device_order_mode=DeviceOrderMode.RING)
    assert np.array_equal(auto.core_assignment, ring.core_assignment)


def test_ring_order_mode_where_rings_do_not_fit_is_tensorflows_error():
    with pytest.raises(ValueError, match=re.escape(
            "device_order_mode=DeviceOrderMode.RING is not compatible with the 3D tiling "
            "current topology.  Try setting device_order_mode=DeviceOrderMode.AUTO")):
        DeviceAssignment.build(_topology(), num_replicas=4, device_order_mode=DeviceOrderMode.RING)


def test_default_is_one_replica_on_core_zero():
    da = DeviceAssignment.build(_topology())
    assert da.core_assignment.tolist() == [[[0, 0, 0, 0]]]
    assert da.tpu_device() == "/task:0/device:TPU:0"


def test_computation_stride_spreads_a_replicas_cores_across_chips():
    # Values from TensorFlow's algorithm: each replica takes chip x=0 and x=1, core 0 or 1.
    da = DeviceAssignment.build(_topology(), computation_shape=[2, 1, 1, 1],
                                computation_stride=[1, 1, 1, 2], num_replicas=4)
    assert da.core_assignment.tolist() == [
        [[0, 0, 0, 0], [1, 0, 0, 0]], [[0, 0, 0, 1], [1, 0, 0, 1]],
        [[0, 1, 0, 0], [1, 1, 0, 0]], [[0, 1, 0, 1], [1, 1, 0, 1]]]


def test_a_3d_torus_is_walked_as_one_ring_of_neighbouring_chips():
    da = DeviceAssignment.build(_full_topology([4, 4, 4, 1]), num_replicas=64)
    chips = [da.coordinates(r, 0)[:3] for r in range(64)]
    assert sorted(chips) == sorted(itertools.product(range(4), range(4), range(4)))
    steps = [sum(abs(a - b) for a, b in zip(p, q)) for p, q in zip(chips, chips[1:] + chips[:1])]
    assert steps == [1] * 64


def test_replica_grid_prefers_both_cores_of_a_chip_then_x():
    assert placement.replica_grid_shape(np.array([2, 2, 1, 2]), 4) == [2, 1, 1, 2]
    assert placement.replica_grid_shape(np.array([2, 2, 1, 2]), 2) == [1, 1, 1, 2]


def test_build_accepts_a_serialized_topology():
    da = DeviceAssignment.build(_topology().serialized(), num_replicas=2)
    assert da.core_assignment.tolist() == [[[0, 0, 0, 0]], [[0, 0, 0, 1]]]


def test_a_slice_with_missing_chips_places_replicas_in_task_order():
    holed = Topology(mesh_shape=[4, 1, 1, 1], device_coordinates=[[[0, 0, 0, 0]], [[2, 0, 0, 0]],
                                                                  [[3, 0, 0, 0]]])
    assert holed.missing_devices.tolist() == [[1, 0, 0, 0]]
    da = DeviceAssignment.build(holed, num_replicas=3)
    assert da.core_assignment.tolist() == [[[0, 0, 0, 0]], [[2, 0, 0, 0]], [[3, 0, 0, 0]]]
    assert [da.host_device(r) for r in range(3)] == [f"/task:{t}/device:CPU:0" for t in range(3)]


def test_a_slice_with_missing_chips_names_the_shortfall():
    holed = Topology(mesh_shape=[4, 1, 1, 1], device_coordinates=[[[0, 0, 0, 0]], [[2, 0, 0, 0]]])
    with pytest.raises(ValueError, match=re.escape("need 4 devices, but the topology has only 2")):
        DeviceAssignment.build(holed, num_replicas=4)
    with pytest.raises(ValueError, match="cannot honour computation_stride"):
        DeviceAssignment.build(holed, computation_stride=[2, 1, 1, 1])


def test_footprint_larger_than_the_mesh_is_tensorflows_error():
    with pytest.raises(ValueError) as info:
        DeviceAssignment.build(_topology(), computation_shape=[3, 1, 1, 1])
    assert str(info.value).startswith(
        "computation footprint [3 1 1 1] does not fit in TPU topology shape [2 2 1 2]")
    with pytest.raises(ValueError, match=re.escape("computation footprint [1 1 1 4] does not fit")):
        DeviceAssignment.build(_topology(), computation_shape=[1, 1, 1, 2],
                               computation_stride=[1, 1, 1, 2])


def test_computation_shape_of_three_entries_is_tensorflows_error():
    with pytest.raises(ValueError) as info:
        DeviceAssignment.build(_topology(), computation_shape=[1, 1, 1])
    assert str(info.value).startswith("computation_shape must have shape [4]; got (3,)")
    with pytest.raises(ValueError, match=re.escape("computation_stride must have shape [4]; got (2,)")):
        DeviceAssignment.build(_topology(), computation_stride=[1, 1])


def test_non_positive_shape_or_stride_is_tensorflows_error():
    with pytest.raises(ValueError, match=re.escape(
            "computation_shape must be positive; got computation_shape=[0 1 1 1]")):
        DeviceAssignment.build(_topology(), computation_shape=[0, 1, 1, 1])
    with pytest.raises(ValueError, match=re.escape(
            "computation_stride must be positive; got computation_stride=[1 1 1 0]")):
        DeviceAssignment.build(_topology(), computation_stride=[1, 1, 1, 0])


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "4"])
def test_num_replicas_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match=re.escape(f"Received: num_replicas={bad!r}")):
        DeviceAssignment.build(_topology(), num_replicas=bad)


def test_unknown_device_order_mode_lists_the_valid_ones():
    with pytest.raises(ValueError, match=re.escape("one of ['AUTO', 'RING', 'MESH']")):
        DeviceAssignment.build(_topology(), device_order_mode=7)


def test_build_with_something_else_than_a_topology_is_tensorflows_error():
    with pytest.raises(ValueError, match=re.escape(
            "`topology` is not a Topology object; got <class 'list'>")):
        DeviceAssignment.build([2, 2, 1, 2])  # type: ignore[arg-type]


# Direct constructor: the errors of TF's golden da_direct_constructor_errors (tf_behaviour §12.2).

def test_rank_2_core_assignment_is_tensorflows_error():
    with pytest.raises(ValueError) as info:
        DeviceAssignment(_topology(), [[0, 0, 0, 0]])
    assert str(info.value).startswith("core_assignment must be a rank 3 numpy array, got shape (1, 4)")


def test_core_assignment_minor_dimension_is_tensorflows_error():
    with pytest.raises(ValueError) as info:
        DeviceAssignment(_topology(), [[[0, 0, 0]]])
    assert str(info.value).startswith(
        "core_assignment.shape[-1] must have size equal to topology rank (4), "
        "got core_assignment.shape=(1, 1, 3)")


def test_constructor_with_something_else_than_a_topology_is_tensorflows_error():
    with pytest.raises(ValueError) as info:
        DeviceAssignment("v3-8", [[[0, 0, 0, 0]]])  # type: ignore[arg-type]
    assert str(info.value).startswith("topology must be a Topology object, got <class 'str'>")


def test_direct_constructor_keeps_the_given_order():
    da = DeviceAssignment(_topology(), [[[1, 1, 0, 1], [0, 0, 0, 0]], [[1, 0, 0, 0], [0, 1, 0, 1]]])
    assert da.num_replicas == 2 and da.num_cores_per_replica == 2
    assert da.tpu_ordinal(0, 0) == 7 and da.tpu_ordinal(1, 1) == 5
    assert da.coordinates(1, 0) == (1, 0, 0, 0)
    assert da.lookup_replicas(0, 1) == [0, 1]


def test_constructor_rejects_positions_outside_the_mesh_missing_or_used_twice():
    with pytest.raises(ValueError, match=re.escape(
            "logical core 0 of replica 1 is at [2, 0, 0, 0], outside the TPU mesh")):
        DeviceAssignment(_topology(), [[[0, 0, 0, 0]], [[2, 0, 0, 0]]])
    holed = Topology(mesh_shape=[2, 1, 1, 1], device_coordinates=[[[0, 0, 0, 0]]])
    with pytest.raises(ValueError, match="where the topology has no device"):
        DeviceAssignment(holed, [[[1, 0, 0, 0]]])
    with pytest.raises(ValueError, match=re.escape(
            "logical core 1 of replica 0 is at [0, 0, 0, 0], the core already used by "
            "logical core 0 of replica 0")):
        DeviceAssignment(_topology(), [[[0, 0, 0, 0], [0, 0, 0, 0]]])


def test_lookup_of_an_absent_task_is_tensorflows_error():
    da = _build("da_v3_8_4_replicas")
    with pytest.raises(ValueError, match=re.escape(
            "Can not find any replica in task: 1 contains logical_core: 0")):
        da.lookup_replicas(1, 0)


def test_replica_index_out_of_range_names_the_sizes():
    da = _build("da_v3_8_4_replicas")
    with pytest.raises(IndexError, match=re.escape("the assignment has 4 replicas of 1 logical cores")):
        da.coordinates(4, 0)


def test_core_assignment_is_read_only():
    with pytest.raises(ValueError, match="read-only"):
        _build("da_v3_8_4_replicas").core_assignment[0, 0, 0] = 1


def test_public_package_exports_device_assignment():
    assert tps.tpu.DeviceAssignment is DeviceAssignment
    assert tps.tpu.DeviceOrderMode.RING == 1
    assert repr(_build("da_v3_8_4_replicas")).startswith(
        "DeviceAssignment(num_replicas=4, num_cores_per_replica=1, topology=Topology(")


def test_tpu_strategy_runs_one_replica_per_assigned_replica():
    da = DeviceAssignment.build(_topology(), num_replicas=4)
    strategy = tps.TPUStrategy(device_assignment=da)
    assert strategy.num_replicas_in_sync == 4
    ids_ = strategy.run(lambda: tps.get_replica_context().replica_id_in_sync_group)
    assert [int(v) for v in strategy.experimental_local_results(ids_)] == [0, 1, 2, 3]


def test_tpu_strategy_without_a_tpu_runs_on_the_default_backend():
    # Golden tpu_strategy_without_tpu: TF fails (IndexError / "Please provide a TPU Name");
    # by design (DESIGN §1) TPUStrategy() falls back to JAX's default devices instead.
    golden = case("tpu_strategy_without_tpu")["output"]
    assert golden["experimental_no_args"]["core"] == "Please provide a TPU Name to connect to."
    strategy = tps.TPUStrategy()
    assert strategy.num_replicas_in_sync == 8
