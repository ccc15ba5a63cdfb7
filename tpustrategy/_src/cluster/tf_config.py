"""TFConfigClusterResolver: the cluster described by the ``TF_CONFIG`` environment variable.

``TF_CONFIG`` is JSON: ``{"cluster": {"chief": [...], "worker": [...]}, "task":
{"type": "worker", "index": 1}, "rpc_layer": "grpc", "environment": ""}``. The
variable is read on every call, as in TensorFlow.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tpustrategy._src.cluster.base import ClusterResolver
from tpustrategy._src.cluster.cluster_spec import ClusterSpec


def load_tf_config() -> dict[str, Any]:
    """Returns the parsed ``TF_CONFIG`` (``{}`` when unset or empty).

    Raises:
      ValueError: if ``TF_CONFIG`` is not a JSON object.
    """
    raw = os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return {}
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"TF_CONFIG is not valid JSON ({err.msg} at position {err.pos}). Received: {raw!r}.\n"
            'Fix: set TF_CONFIG to e.g. \'{"cluster": {"worker": ["host0:1234", '
            '"host1:1234"]}, "task": {"type": "worker", "index": 0}}\'.'
        ) from None
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must hold a JSON object. Received: {raw!r}.")
    return config


class TFConfigClusterResolver(ClusterResolver):
    """Reads the cluster, this task and the rpc layer from ``TF_CONFIG``.

    Args:
      task_type: overrides ``TF_CONFIG["task"]["type"]``.
      task_id: overrides ``TF_CONFIG["task"]["index"]``.
      rpc_layer: overrides ``TF_CONFIG["rpc_layer"]``.
      environment: overrides ``TF_CONFIG["environment"]``.

    Example:
      >>> os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["a:1", "b:1"]},
      ...                                       "task": {"type": "worker", "index": 1}})
      >>> r = TFConfigClusterResolver()
      >>> r.coordinator_address, r.num_processes, r.process_id
      ('a:1', 2, 1)
    """

    def __init__(self, task_type: str | None = None, task_id: int | None = None,
                 rpc_layer: str | None = None, environment: str | None = None):
        self._override_type = task_type
        self._override_id = task_id
        self._override_rpc = rpc_layer
        self._override_env = environment

    def cluster_spec(self) -> ClusterSpec:
        """Returns ``TF_CONFIG["cluster"]`` as a ``ClusterSpec`` (empty if absent)."""
        return ClusterSpec(load_tf_config().get("cluster") or {})

    @property
    def _task_type(self) -> str | None:  # type: ignore[override]
        if self._override_type is not None:
            return self._override_type
        task_type = (load_tf_config().get("task") or {}).get("type")
        return str(task_type) if task_type is not None else None

    @_task_type.setter
    def _task_type(self, value: str | None) -> None:
        self._override_type = value

    @property
    def _task_id(self) -> int | None:  # type: ignore[override]
        if self._override_id is not None:
            return self._override_id
        index = (load_tf_config().get("task") or {}).get("index")
        if index is None:
            return None
        try:
            return int(index)
        except (TypeError, ValueError):
            raise ValueError(
                f"TF_CONFIG: task.index must be an int. Received: {index!r}."
            ) from None

    @_task_id.setter
    def _task_id(self, value: int | None) -> None:
        self._override_id = value

    @property
    def _rpc_layer(self) -> str | None:  # type: ignore[override]
        if self._override_rpc is not None:
            return self._override_rpc
        return load_tf_config().get("rpc_layer")

    @_rpc_layer.setter
    def _rpc_layer(self, value: str | None) -> None:
        self._override_rpc = value

    @property
    def _environment(self) -> str:  # type: ignore[override]
        if self._override_env is not None:
            return self._override_env
        return load_tf_config().get("environment", "")

    @_environment.setter
    def _environment(self, value: str) -> None:
        self._override_env = value
