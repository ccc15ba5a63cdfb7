"""TPU system metadata, hardware features, XLAOptions, and tf.config's runtime settings."""

from __future__ import annotations

import jax
import pytest

import tpustrategy as tps
from tpustrategy._src.not_provided import NotProvidedError

HF = tps.tpu.experimental.HardwareFeature


def test_xla_options_default_to_tensorflows_values():
    # TF 2.21: XLAOptions(use_spmd_for_xla_partitioning=True, enable_xla_dynamic_padder=True, use_shardy_partitioner=False)
    assert tuple(tps.tpu.XLAOptions()) == (True, True, False)
    assert tps.tpu.XLAOptions(use_shardy_partitioner=True).use_shardy_partitioner
    assert tps.RunOptions(experimental_xla_options=tps.tpu.XLAOptions()).experimental_xla_options.enable_xla_dynamic_padder


def test_system_metadata_of_the_eight_cpu_devices_counts_cores_hosts_and_names_them():
    resolver = tps.cluster_resolver.TPUClusterResolver("local")
    meta = resolver.get_tpu_system_metadata()
    assert isinstance(meta, tps.tpu.experimental.TPUSystemMetadata)
    assert (meta.num_cores, meta.num_hosts, meta.num_of_cores_per_host) == (8, 1, 8)
    assert meta.devices[3].name == "/job:worker/replica:0/task:0/device:CPU:3"
    assert list(meta.topology.mesh_shape) == [8, 1, 1, 1]


def test_set_tpu_topology_is_what_the_metadata_reports_and_bad_bytes_fail_at_once():
    resolver = tps.cluster_resolver.TPUClusterResolver("local")
    topology = tps.tpu.experimental.Topology(mesh_shape=[2, 2, 1, 2],
                                             device_coordinates=[[[0, 0, 0, 0], [0, 0, 0, 1]],
                                                                 [[1, 0, 0, 0], [1, 0, 0, 1]],
                                                                 [[0, 1, 0, 0], [0, 1, 0, 1]],
                                                                 [[1, 1, 0, 0], [1, 1, 0, 1]]])
    resolver.set_tpu_topology(topology.serialized())
    assert list(resolver.get_tpu_system_metadata().topology.mesh_shape) == [2, 2, 1, 2]
    with pytest.raises((ValueError, TypeError)):
        resolver.set_tpu_topology("not bytes")


@pytest.mark.parametrize(("kind", "feature", "per_chip"), [
    (None, "UNSUPPORTED", 0), ("TPU v3", "V1", 0), ("TPU v4", "V2", 2), ("TPU v5p", "V2", 4),
    ("TPU v5 lite", "UNSUPPORTED", 0)])
def test_hardware_feature_by_tpu_generation(kind, feature, per_chip):
    hf = HF(device_kind=kind)
    assert hf.embedding_feature is HF.EmbeddingFeature[feature]
    assert hf.num_embedding_devices_per_chip == per_chip


def test_the_resolvers_hardware_feature_off_tpu_is_unsupported():
    feature = tps.cluster_resolver.TPUClusterResolver("local").tpu_hardware_feature
    assert feature.embedding_feature is HF.EmbeddingFeature.UNSUPPORTED


def test_visible_devices_are_all_devices_and_can_be_set_again_to_the_same_set_after_start():
    jax.devices()
    cpus = tps.config.list_physical_devices("CPU")
    assert tps.config.get_visible_devices("CPU") == cpus
    tps.config.set_visible_devices(cpus, "CPU")  # the same set: accepted, as TensorFlow
    assert tps.config.experimental.get_visible_devices is tps.config.get_visible_devices


def test_changing_visible_devices_after_start_raises_tensorflows_runtime_error():
    jax.devices()
    with pytest.raises(RuntimeError, match="(?s)Visible devices cannot be modified after being initialized.*Fix:"):
        tps.config.set_visible_devices([], "CPU")
    with pytest.raises(TypeError, match="PhysicalDevice"):
        tps.config.set_visible_devices(["CPU:0"])


def test_memory_info_of_a_cpu_and_memory_growth_of_a_cpu_raise_as_tensorflow():
    with pytest.raises(ValueError, match="not supported for device 'CPU:0'"):
        tps.config.experimental.get_memory_info("CPU:0")
    with pytest.raises(ValueError, match="Cannot set memory growth on non-GPU devices"):
        tps.config.experimental.set_memory_growth(tps.config.list_physical_devices("CPU")[0], True)
    with pytest.raises(NotProvidedError, match="tf.config.experimental.reset_memory_stats"):
        tps.config.experimental.reset_memory_stats("GPU:0")


def test_tensor_float_32_toggles_jaxs_default_matmul_precision():
    before = jax.config.jax_default_matmul_precision
    try:
        tps.config.experimental.enable_tensor_float_32_execution(False)
        assert jax.config.jax_default_matmul_precision == "float32"
        assert not tps.config.experimental.tensor_float_32_execution_enabled()
        tps.config.experimental.enable_tensor_float_32_execution(True)
        assert tps.config.experimental.tensor_float_32_execution_enabled()
    finally:
        jax.config.update("jax_default_matmul_precision", before)


def test_threads_and_soft_placement_are_recorded_and_frozen_after_start():
    jax.devices()
    assert tps.config.threading.get_inter_op_parallelism_threads() == 0
    tps.config.threading.set_intra_op_parallelism_threads(0)  # unchanged: fine
    with pytest.raises(RuntimeError, match="cannot be modified after initialization"):
        tps.config.threading.set_inter_op_parallelism_threads(4)
    with pytest.raises(ValueError, match="must be an int >= 0"):
        tps.config.threading.set_intra_op_parallelism_threads(-1)
    assert tps.config.get_soft_device_placement() is True
    tps.config.set_soft_device_placement(False)
    assert tps.config.get_soft_device_placement() is False
    tps.config.set_soft_device_placement(True)


def test_connect_to_host_needs_a_host():
    with pytest.raises(ValueError, match="Must provide at least one remote_host"):
        tps.config.experimental_connect_to_host()


def test_connect_resolves_connects_and_initializes_the_tpu_system_in_that_order(monkeypatch):
    from tpustrategy._src.cluster import connect

    calls = []
    monkeypatch.setattr(connect, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r)))
    monkeypatch.setattr(connect, "initialize_tpu_system", lambda r: calls.append(("initialize", r)))
    resolver = tps.cluster_resolver.TPUClusterResolver.connect("grpc://10.0.0.2:8470,grpc://10.0.0.3:8470")
    assert isinstance(resolver, tps.cluster_resolver.TPUClusterResolver)
    assert calls == [("connect", resolver), ("initialize", resolver)]
    assert resolver.cluster_spec().as_dict() == {"worker": ["10.0.0.2:8470", "10.0.0.3:8470"]}


def test_connect_to_host_connects_to_a_one_job_cluster_of_the_hosts(monkeypatch):
    from tpustrategy._src.cluster import connect

    seen = {}
    monkeypatch.setattr(connect, "experimental_connect_to_cluster",
                        lambda spec, job_name: seen.update(spec=spec.as_dict(), job=job_name))
    tps.config.experimental_connect_to_host(["h0:2222", "h1:2222"], job_name="worker")
    assert seen == {"spec": {"worker": ["h0:2222", "h1:2222"]}, "job": "worker"}


def test_hiding_the_gpus_before_jax_starts_leaves_only_the_cpu_backend():
    import os
    import subprocess
    import sys

    code = ("import jax, tpustrategy as tps\n"
            "tps.config.set_visible_devices([], 'GPU')\n"
            "print(jax.config.jax_platforms, [d.device_type for d in tps.config.get_visible_devices()],\n"
            "      {d.platform for d in jax.devices()})\n"
            "try:\n"
            "    tps.config.set_visible_devices([], 'CPU')\n"
            "except RuntimeError as e:\n"
            "    print('refused after start')\n")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["cpu ['CPU'] {'cpu'}", "refused after start"]
