"""TPUClusterResolver: finds the TPU workers of a job by name (TensorFlow's rules).

The name comes from, in order: the ``tpu`` argument (if truthy), then the
environment variables ``KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS``, ``TPU_NAME`` and
``TPU_CONFIG`` (JSON with ``tpu_node_name``, ``project``, ``zone``).

- ``grpc://host[:port],grpc://...``: the workers are listed; the port defaults
  to 8470. For JAX they are the job's hosts, in process order.
- ``"local"``: the TPUs attached to this host.
- any other name: a Cloud TPU node, which TensorFlow looks up through the Cloud
  TPU API. This library makes no network calls: on the TPU VM itself JAX finds
  the job's hosts; elsewhere the constructor raises a ``RuntimeError`` that
  says to pass ``grpc://`` endpoints or to run on the TPU VM.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from tpustrategy._src.cluster.base import ClusterResolver, format_master_url
from tpustrategy._src.cluster.cluster_spec import ClusterSpec

DEFAULT_TPU_PORT = 8470
# The port JAX's Cloud TPU cluster detection uses for its coordinator.
JAX_TPU_COORDINATOR_PORT = 8482
_ENV_NAMES = ("KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_NAME")


def running_on_tpu_vm() -> bool:
    """Returns whether this host has TPU chips attached (no network access)."""
    from tpustrategy._src.jax_shims import backend

    return backend.tpu_chips_attached() > 0


def _tpu_config() -> dict[str, Any]:
    raw = os.environ.get("TPU_CONFIG", "")
    if not raw.strip():
        return {}
    try:
        config = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError(
            f"TPU_CONFIG is not valid JSON. Received: {raw!r}.\n"
            'Fix: set TPU_CONFIG to e.g. \'{"tpu_node_name": "my-tpu", "project": "p", '
            '"zone": "us-central2-b"}\', or pass tpu=... to TPUClusterResolver.'
        ) from None
    return config if isinstance(config, dict) else {}


def _endpoint(text: str) -> str:
    address = text.strip()
    if address.startswith("grpc://"):
        address = address[len("grpc://"):]
    address = address.rstrip("/")
    host, sep, port = address.rpartition(":")
    # "host" alone or an IPv6 literal without a port: add the default port.
    if not sep or (host.count(":") and not host.endswith("]")) or not port.isdigit():
        return f"{address}:{DEFAULT_TPU_PORT}"
    return address


class TPUClusterResolver(ClusterResolver):
    """The TPU workers of a job (``tf.distribute.cluster_resolver.TPUClusterResolver``).

    Args:
      tpu: a TPU name, ``"local"``, ``"grpc://host:port[,grpc://...]"``, or a
        one-element list of one of those. Default: from the environment.
      zone: the Cloud zone (for a named TPU).
      project: the Cloud project (for a named TPU).
      job_name: the job name of the workers in ``cluster_spec()``.
      coordinator_name: accepted for TensorFlow compatibility.
      coordinator_address: ``host:port`` of the JAX coordinator; default the
        first worker's host at port 8482 (JAX's own choice on Cloud TPU).
      credentials: accepted for TensorFlow compatibility.
      service: accepted for TensorFlow compatibility.
      discovery_url: accepted for TensorFlow compatibility.

    Raises:
      ValueError: no TPU name anywhere, or an empty list.
      NotImplementedError: a list of several TPUs.
      RuntimeError: a Cloud TPU name off the TPU VM (the Cloud TPU API is not reachable).

    Example:
      >>> r = TPUClusterResolver("grpc://10.0.0.2,grpc://10.0.0.3:8471")
      >>> r.cluster_spec().as_dict(), r.master()
      ({'worker': ['10.0.0.2:8470', '10.0.0.3:8471']}, 'grpc://10.0.0.2:8470')
    """

    def __init__(self, tpu: str | Sequence[str] | None = None, zone: str | None = None,
                 project: str | None = None, job_name: str = "worker",
                 coordinator_name: str | None = None, coordinator_address: str | None = None,
                 credentials: Any = "default", service: Any = None,
                 discovery_url: str | None = None):
        if isinstance(tpu, (list, tuple)):
            if not tpu:
                raise ValueError("At least one TPU must be specified.")
            if len(tpu) != 1:
                raise NotImplementedError(
                    "Using multiple TPUs in a single session is not yet implemented")
            tpu = tpu[0]
        if not tpu:
            tpu = next((os.environ[e] for e in _ENV_NAMES if e in os.environ), None)
        if not tpu:
            config = _tpu_config()
            tpu = config.get("tpu_node_name")
            project = project or config.get("project")
            zone = zone or config.get("zone")
        if not tpu:
            raise ValueError("Please provide a TPU Name to connect to.")
        self._tpu = str(tpu)
        self._zone, self._project = zone, project
        self._job_name = job_name
        self._task_type, self._task_id = job_name, 0
        self._rpc_layer = None
        self._environment = ""
        self._coordinator_name = coordinator_name
        self._coordinator = coordinator_address
        self._discovery_url = discovery_url or os.environ.get("TPU_API_DISCOVERY_URL")
        self._endpoints: list[str] = []
        self._serialized_topology: bytes | None = None
        if self._tpu.startswith("grpc://"):
            self._endpoints = [_endpoint(e) for e in self._tpu.split(",") if e.strip()]
        elif self._tpu != "local" and not running_on_tpu_vm():
            raise RuntimeError(
                f"TPUClusterResolver(tpu={self._tpu!r}): the Cloud TPU API is not reachable "
                "from tpustrategy (it makes no network calls), so a TPU name cannot be "
                f"turned into worker addresses here (project={project!r}, zone={zone!r}).\n"
                "Fix: run the program on the TPU VM itself (JAX finds the TPU hosts there), "
                "or pass the workers' endpoints, e.g. "
                "TPUClusterResolver('grpc://10.0.0.2:8470,grpc://10.0.0.3:8470')."
            )

    # -- TensorFlow's surface ----------------------------------------------------------

    def cluster_spec(self) -> ClusterSpec:
        """Returns ``{job_name: ["host:port", ...]}``; empty for ``"local"`` or a named TPU."""
        return ClusterSpec({self._job_name: self._endpoints} if self._endpoints else {})

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """Returns ``grpc://<worker>`` (the first worker unless ``task_id`` says otherwise)."""
        if not self._endpoints:
            return ""
        index = 0 if task_id is None else task_id
        return format_master_url(self._endpoints[index], rpc_layer or "grpc")

    def get_master(self) -> str:
        """Same as ``master()``."""
        return self.master()

    def get_job_name(self) -> str:
        """Returns the job name of the TPU workers."""
        return self._job_name

    def get_coordination_service_leader(self) -> str:
        """Returns ``/job:<job_name>/task:0``."""
        return f"/job:{self._job_name}/task:0"

    @property
    def tpu(self) -> str:
        """The resolved TPU name."""
        return self._tpu

    @staticmethod
    def connect(tpu: str | None = None, zone: str | None = None,
                project: str | None = None) -> TPUClusterResolver:
        """Resolves, connects and initializes the TPU system in one call (TensorFlow's ``connect``).

        The same as ``r = TPUClusterResolver(tpu, zone, project)``,
        ``tps.config.experimental_connect_to_cluster(r)`` and
        ``tps.tpu.experimental.initialize_tpu_system(r)``.

        Returns:
          The resolver.
        """
        from tpustrategy._src.cluster.connect import (
            experimental_connect_to_cluster,
            initialize_tpu_system,
        )

        resolver = TPUClusterResolver(tpu, zone=zone, project=project)
        experimental_connect_to_cluster(resolver)
        initialize_tpu_system(resolver)
        return resolver

    def get_tpu_system_metadata(self) -> Any:
        """The job's cores, hosts and topology (``tps.tpu.experimental.TPUSystemMetadata``).

        Starts JAX's backend. Without a TPU it describes the default backend's
        devices, as ``initialize_tpu_system`` does.
        """
        from tpustrategy._src.devices import tpu_system
        from tpustrategy._src.devices.topology import Topology

        if self._serialized_topology is not None:
            topology = Topology(serialized=self._serialized_topology)
        else:
            from tpustrategy._src.cluster.connect import initialize_tpu_system

            topology = initialize_tpu_system()
        return tpu_system.system_metadata(topology)

    @property
    def tpu_hardware_feature(self) -> Any:
        """The chips' features (``tps.tpu.experimental.HardwareFeature``; ``UNSUPPORTED`` off TPU)."""
        from tpustrategy._src.devices import tpu_system

        return tpu_system.hardware_feature()

    def set_tpu_topology(self, serialized_tpu_topology: bytes) -> None:
        """Sets the topology ``get_tpu_system_metadata`` reports (a serialized ``TopologyProto``)."""
        from tpustrategy._src.devices.topology import Topology

        Topology(serialized=serialized_tpu_topology)  # checks the bytes now, not at the next read
        self._serialized_topology = bytes(serialized_tpu_topology)

    # -- what tps.initialize needs -----------------------------------------------------

    @property
    def coordinator_address(self) -> str | None:
        """The given ``coordinator_address``, else the first worker's host at port 8482."""
        if self._coordinator is not None:
            return self._coordinator
        if len(self._endpoints) > 1:
            return f"{self._endpoints[0].rpartition(':')[0]}:{JAX_TPU_COORDINATOR_PORT}"
        return None

    @property
    def num_processes(self) -> int | None:
        """One process per worker; for ``"local"`` off a TPU VM, 1; else JAX decides."""
        if self._endpoints:
            return len(self._endpoints)
        if self._tpu == "local" and not running_on_tpu_vm():
            return 1
        return None

    @property
    def process_id(self) -> int | None:
        """0 for a single worker; ``TPU_WORKER_ID`` if set; else JAX decides."""
        if self.num_processes == 1:
            return 0
        worker = os.environ.get("TPU_WORKER_ID", "").strip()
        return int(worker) if worker.isdigit() else None

    def __repr__(self) -> str:
        return f"TPUClusterResolver(tpu={self._tpu!r}, job_name={self._job_name!r})"
