"""tps.tpu.Topology: mesh lookups, TF device names, validation, TopologyProto bytes, JAX devices."""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import jax
import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import case
from tpustrategy._src.devices import topology_proto
from tpustrategy.tpu import Topology


def _golden_topology(case_id: str) -> Topology:
    given = case(case_id)["input"]
    return Topology(mesh_shape=given["mesh_shape"], device_coordinates=given["device_coordinates"])


V3_8 = "da_v3_8_default_8_replicas"  # the v3-8 topology (TF's topology_v3_8)
POD = "da_pod_4_hosts_mp2_16_replicas"  # 4 hosts x 8 cores, mesh [4, 4, 1, 2]


def _fake_tpu(id_: int, coords: tuple[int, int, int], core: int, process: int = 0,
              slice_index: int = 0) -> SimpleNamespace:
    return SimpleNamespace(id=id_, coords=coords, core_on_chip=core, process_index=process,
                           slice_index=slice_index, platform="tpu")


def _fake_devices_like(topology: Topology) -> list[SimpleNamespace]:
    """JAX-style TPU devices for a topology: ids run task by task, device by device."""
    devices = []
    for t, d in itertools.product(range(topology.num_tasks), range(topology.num_tpus_per_task)):
        x, y, z, core = topology.device_coordinates[t, d].tolist()
        devices.append(_fake_tpu(len(devices), (x, y, z), core, process=t))
    return devices


def test_v3_8_topology_has_one_task_of_eight_cores_on_two_by_two_chips():
    topology = _golden_topology(V3_8)
    assert topology.mesh_shape.tolist() == [2, 2, 1, 2]
    assert topology.mesh_rank == 4
    assert topology.num_tasks == 1 and topology.num_tpus_per_task == 8
    assert topology.device_coordinates.shape == (1, 8, 4)
    assert topology.device_coordinates.dtype == np.int32
    assert topology.missing_devices.shape == (0, 4)


def test_v3_8_lookups_give_the_ordinal_in_device_coordinates_order():
    topology = _golden_topology(V3_8)
    for ordinal, coords in enumerate(topology.device_coordinates[0].tolist()):
        assert topology.task_ordinal_at_coordinates(coords) == 0
        assert topology.tpu_device_ordinal_at_coordinates(coords) == ordinal
        assert topology.tpu_device_name_at_coordinates(coords) == f"/task:0/device:TPU:{ordinal}"
        assert topology.cpu_device_name_at_coordinates(coords) == "/task:0/device:CPU:0"


def test_device_names_have_a_job_part_only_when_a_job_is_given():
    topology = _golden_topology(POD)
    assert topology.tpu_device_name_at_coordinates([3, 1, 0, 1], job="worker") == (
        "/job:worker/task:1/device:TPU:7")
    assert topology.cpu_device_name_at_coordinates([3, 1, 0, 1], job="worker") == (
        "/job:worker/task:1/device:CPU:0")
    assert topology.tpu_device_name_at_coordinates((0, 3, 0, 0)) == "/task:2/device:TPU:4"
    assert topology.cpu_device_name_at_coordinates(np.array([2, 2, 0, 1])) == "/task:3/device:CPU:0"


def test_pod_topology_maps_every_core_to_its_host():
    topology = _golden_topology(POD)
    assert topology.num_tasks == 4 and topology.num_tpus_per_task == 8
    for t, d in itertools.product(range(4), range(8)):
        coords = topology.device_coordinates[t, d]
        assert topology.task_ordinal_at_coordinates(coords) == t
        assert topology.tpu_device_ordinal_at_coordinates(coords) == d


def test_positions_without_a_device_are_missing_devices():
    coords = [[[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]]
    topology = Topology(mesh_shape=[2, 2, 1, 1], device_coordinates=coords)
    assert topology.missing_devices.tolist() == [[1, 1, 0, 0]]
    with pytest.raises(ValueError, match=re.escape("no TPU device at coordinates [1, 1, 0, 0]")):
        topology.task_ordinal_at_coordinates([1, 1, 0, 0])


def test_lookup_outside_the_mesh_names_the_coordinates_and_the_mesh():
    topology = _golden_topology(V3_8)
    with pytest.raises(ValueError, match=re.escape("[2, 0, 0, 0] are not a position in the TPU "
                                                   "mesh of shape [2, 2, 1, 2]")):
        topology.tpu_device_ordinal_at_coordinates([2, 0, 0, 0])
    with pytest.raises(ValueError, match="expected 4 integers"):
        topology.tpu_device_name_at_coordinates([0, 0, 0])


def test_arrays_are_read_only():
    topology = _golden_topology(V3_8)
    with pytest.raises(ValueError, match="read-only"):
        topology.mesh_shape[0] = 4
    with pytest.raises(ValueError, match="read-only"):
        topology.device_coordinates[0, 0, 0] = 1


def test_mesh_shape_of_three_entries_is_rejected_with_tf_message():
    with pytest.raises(ValueError, match=re.escape(
            "`mesh_shape` must be a sequence of 4 positive entries; got [2 2 1]")):
        Topology(mesh_shape=[2, 2, 1], device_coordinates=[[[0, 0, 0]]])


def test_non_positive_mesh_shape_is_rejected():
    with pytest.raises(ValueError, match="4 positive entries"):
        Topology(mesh_shape=[2, 0, 1, 2], device_coordinates=np.zeros((1, 1, 4), np.int32))


def test_device_coordinates_of_wrong_rank_is_rejected_with_tf_message():
    with pytest.raises(ValueError, match=re.escape(
            "`device_coordinates` must be a rank 3 int32 array with minor dimension equal to "
            "the mesh shape rank; got shape (8, 4)")):
        Topology(mesh_shape=[2, 2, 1, 2], device_coordinates=np.zeros((8, 4), np.int32))


def test_coordinates_outside_the_mesh_name_the_device_and_the_mesh():
    with pytest.raises(ValueError, match=re.escape(
            "device 1 of task 0 has coordinates [0, 2, 0, 0], outside the mesh of shape "
            "[2, 2, 1, 1]")):
        Topology(mesh_shape=[2, 2, 1, 1], device_coordinates=[[[0, 0, 0, 0], [0, 2, 0, 0]]])


def test_two_devices_at_one_position_are_rejected():
    with pytest.raises(ValueError, match=re.escape(
            "device 0 of task 0 and device 0 of task 1 both have coordinates [1, 0, 0, 0]")):
        Topology(mesh_shape=[2, 1, 1, 1], device_coordinates=[[[1, 0, 0, 0]], [[1, 0, 0, 0]]])


def test_missing_arguments_say_what_to_pass():
    with pytest.raises(ValueError, match="both `mesh_shape` and `device_coordinates` are required"):
        Topology(mesh_shape=[2, 2, 1, 2])


def test_arrays_passed_positionally_as_serialized_get_a_type_error_with_the_fix():
    with pytest.raises(TypeError, match=re.escape("pass the arrays by keyword")):
        Topology([2, 2, 1, 2])  # type: ignore[arg-type]


def test_serialized_and_arrays_together_are_rejected():
    topology = _golden_topology(V3_8)
    with pytest.raises(ValueError, match="not both"):
        Topology(serialized=topology.serialized(), mesh_shape=[2, 2, 1, 2])


def test_serialized_topology_round_trips():
    topology = _golden_topology(POD)
    again = Topology(serialized=topology.serialized())
    assert again.mesh_shape.tolist() == topology.mesh_shape.tolist()
    assert np.array_equal(again.device_coordinates, topology.device_coordinates)
    assert again.serialized() == topology.serialized()
    assert again.tpu_device_name_at_coordinates([3, 1, 0, 1], job="w") == "/job:w/task:1/device:TPU:7"


def test_serialized_bytes_match_protobufs_encoding_of_topology_proto():
    pb2 = pytest.importorskip("google.protobuf.descriptor_pb2")
    from google.protobuf import descriptor_pool, message_factory

    f = pb2.FieldDescriptorProto
    file = pb2.FileDescriptorProto(name="tensorflow/core/protobuf/tpu/topology.proto",
                                   package="tensorflow.tpu", syntax="proto3")
    msg = file.message_type.add(name="TopologyProto")
    for name, number, label in (("mesh_shape", 1, f.LABEL_REPEATED), ("num_tasks", 2, f.LABEL_OPTIONAL),
                                ("num_tpu_devices_per_task", 3, f.LABEL_OPTIONAL),
                                ("device_coordinates", 4, f.LABEL_REPEATED)):
        msg.field.add(name=name, number=number, type=f.TYPE_INT32, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    proto_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.tpu.TopologyProto"))

    topology = _golden_topology(POD)
    proto = proto_cls(mesh_shape=[4, 4, 1, 2], num_tasks=4, num_tpu_devices_per_task=8,
                      device_coordinates=topology.device_coordinates.ravel().tolist())
    assert topology.serialized() == proto.SerializeToString()
    parsed = proto_cls.FromString(topology.serialized())
    assert list(parsed.mesh_shape) == [4, 4, 1, 2] and parsed.num_tasks == 4


def test_unpacked_repeated_fields_and_unknown_fields_parse():
    # mesh_shape as four separate varints, an unknown field 9, then the rest.
    wire = bytes([0x08, 1, 0x08, 1, 0x08, 1, 0x08, 2, 0x48, 7, 0x10, 1, 0x18, 2,
                  0x22, 8, 0, 0, 0, 0, 0, 0, 0, 1])
    topology = Topology(serialized=wire)
    assert topology.mesh_shape.tolist() == [1, 1, 1, 2]
    assert topology.device_coordinates.tolist() == [[[0, 0, 0, 0], [0, 0, 0, 1]]]


def test_negative_int32_values_decode_as_negative():
    fields = topology_proto.TopologyFields([1, 1, 1, 1], -1, 1, [])
    assert topology_proto.parse(topology_proto.serialize(fields)).num_tasks == -1


def test_truncated_bytes_are_not_a_topology():
    wire = _golden_topology(V3_8).serialized()
    with pytest.raises(ValueError, match="not a well-formed TopologyProto"):
        Topology(serialized=wire[:-3])


def test_serialized_coordinate_count_must_match_tasks_times_devices():
    wire = topology_proto.serialize(topology_proto.TopologyFields([2, 1, 1, 1], 1, 2, [0, 0, 0, 0]))
    with pytest.raises(ValueError, match=re.escape("= 8 entries; got 4")):
        Topology(serialized=wire)


def test_from_jax_devices_reads_a_v3_8_like_tf_does():
    golden = _golden_topology(V3_8)
    topology = Topology.from_jax_devices(_fake_devices_like(golden))
    assert topology.mesh_shape.tolist() == [2, 2, 1, 2]
    assert np.array_equal(topology.device_coordinates, golden.device_coordinates)


def test_from_jax_devices_makes_one_task_per_process_with_ordinals_in_id_order():
    golden = _golden_topology(POD)
    devices = _fake_devices_like(golden)
    topology = Topology.from_jax_devices(devices[::-1])  # the order given does not matter
    assert topology.num_tasks == 4 and topology.num_tpus_per_task == 8
    assert np.array_equal(topology.device_coordinates, golden.device_coordinates)


def test_from_jax_devices_shifts_a_sub_slice_to_start_at_zero():
    devices = [_fake_tpu(i, (2 + i, 4, 1), 0) for i in range(4)]
    topology = Topology.from_jax_devices(devices)
    assert topology.mesh_shape.tolist() == [4, 1, 1, 1]
    assert topology.device_coordinates[0, :, 0].tolist() == [0, 1, 2, 3]
    assert topology.missing_devices.size == 0


def test_from_jax_devices_on_cpu_says_only_tpu_devices_have_coordinates():
    # The CPU-only side of golden tpu_strategy_without_tpu: no TPU, no topology.
    with pytest.raises(ValueError, match=re.escape("(platform 'cpu') has no TPU mesh coordinates")):
        Topology.from_jax_devices()
    with pytest.raises(ValueError, match="Topology\\(mesh_shape="):
        Topology.from_jax_devices(jax.devices()[:2])


def test_from_jax_devices_rejects_several_slices():
    devices = [_fake_tpu(0, (0, 0, 0), 0), _fake_tpu(1, (0, 0, 0), 0, slice_index=1)]
    with pytest.raises(ValueError, match=re.escape("span 2 TPU slices (slice_index [0, 1])")):
        Topology.from_jax_devices(devices)


def test_from_jax_devices_rejects_uneven_processes():
    devices = [_fake_tpu(0, (0, 0, 0), 0, 0), _fake_tpu(1, (1, 0, 0), 0, 0),
               _fake_tpu(2, (2, 0, 0), 0, 1)]
    with pytest.raises(ValueError, match=re.escape("got {0: 2, 1: 1}")):
        Topology.from_jax_devices(devices)


def test_from_jax_devices_rejects_a_repeated_device_and_an_empty_list():
    device = _fake_tpu(0, (0, 0, 0), 0)
    with pytest.raises(ValueError, match="more than once"):
        Topology.from_jax_devices([device, device])
    with pytest.raises(ValueError, match="empty"):
        Topology.from_jax_devices([])


def test_public_package_exports_topology():
    assert tps.tpu.Topology is Topology
    assert repr(_golden_topology(V3_8)) == (
        "Topology(mesh_shape=[2, 2, 1, 2], num_tasks=1, num_tpus_per_task=8)")
