"""``InputContext``, ``InputOptions`` and ``InputReplicationMode``."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class InputReplicationMode(enum.Enum):
    """How ``distribute_datasets_from_function`` builds input pipelines."""

    PER_WORKER = "PER_WORKER"
    PER_REPLICA = "PER_REPLICA"


class InputContext:
    """What ``dataset_fn`` of ``distribute_datasets_from_function`` is told about its pipeline.

    Args:
      num_input_pipelines: number of input pipelines (processes) in the job.
      input_pipeline_id: this pipeline's id in ``[0, num_input_pipelines)``.
      num_replicas_in_sync: number of replicas taking part in a step.
    """

    def __init__(self, num_input_pipelines: int = 1, input_pipeline_id: int = 0, num_replicas_in_sync: int = 1):
        for name, value, low in (
            ("num_input_pipelines", num_input_pipelines, 1),
            ("input_pipeline_id", input_pipeline_id, 0),
            ("num_replicas_in_sync", num_replicas_in_sync, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"InputContext: `{name}` must be an int >= {low}. Received: {value!r}.")
        if input_pipeline_id >= num_input_pipelines:
            raise ValueError(
                f"InputContext: `input_pipeline_id` {input_pipeline_id} must be smaller than "
                f"`num_input_pipelines` {num_input_pipelines}."
            )
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """``global_batch_size // num_replicas_in_sync``; raises when it does not divide."""
        if global_batch_size % self._num_replicas_in_sync != 0:
            raise ValueError(
                f"The `global_batch_size` {global_batch_size} is not divisible by "
                f"`num_replicas_in_sync` {self._num_replicas_in_sync} "
            )
        return global_batch_size // self._num_replicas_in_sync

    def __str__(self) -> str:
        return (
            f"tf.distribute.InputContext(input pipeline id {self._input_pipeline_id}, total: "
            f"{self._num_input_pipelines})"
        )

    __repr__ = __str__


_PARTIAL = ("ragged", "pad", "drop")


@dataclass(frozen=True, kw_only=True)
class InputOptions:
    """Options of distributed datasets.

    Attributes:
      experimental_fetch_to_device: put per-replica batches on their devices as
        ``jax.Array``s (string leaves stay on the host). False keeps NumPy.
      experimental_replication_mode: PER_WORKER (one pipeline per process) or
        PER_REPLICA (``distribute_datasets_from_function`` on MirroredStrategy only).
      experimental_place_dataset_on_device: accepted for compatibility; must be
        False unless PER_REPLICA with fetch_to_device=False.
      experimental_per_replica_buffer_size: host batches prepared ahead per replica.
      partial_batch: "ragged" (default: the last batch gives ragged
        per-replica values, run on the eager path), "pad" (pad to the static
        per-replica size and yield ``(batch, mask)`` so every step compiles the
        same program), or "drop" (skip a partial last global batch).
      prefetch_to_device: steps prepared ahead on a background thread.
    """

    experimental_fetch_to_device: bool = True
    experimental_replication_mode: InputReplicationMode = InputReplicationMode.PER_WORKER
    experimental_place_dataset_on_device: bool = False
    experimental_per_replica_buffer_size: int = 1
    partial_batch: str = "ragged"
    prefetch_to_device: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.experimental_replication_mode, InputReplicationMode):
            raise ValueError(
                "InputOptions: `experimental_replication_mode` must be an InputReplicationMode. "
                f"Received: {self.experimental_replication_mode!r}.\nFix: pass "
                "tps.InputReplicationMode.PER_WORKER (the default) or PER_REPLICA."
            )
        if self.partial_batch not in _PARTIAL:
            raise ValueError(
                f"InputOptions: `partial_batch` must be one of {_PARTIAL}. Received: "
                f"{self.partial_batch!r}."
            )
        for name in ("experimental_per_replica_buffer_size", "prefetch_to_device"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"InputOptions: `{name}` must be an int >= 0. Received: {value!r}.")


def check_options(options: Any) -> InputOptions:
    """``options`` (None: the defaults), of the right type."""
    if options is None:
        return InputOptions()
    if not isinstance(options, InputOptions):
        raise TypeError(f"`options` must be a tps.InputOptions. Received: {type(options).__name__}.")
    return options


def check_placement(options: InputOptions) -> None:
    """The dataset placement against the replication mode, checked where TensorFlow checks it:
    when a dataset is distributed, after the strategy's own checks (TensorFlow's ``input_util``;
    ``InputOptions`` itself accepts every combination)."""
    per_replica = options.experimental_replication_mode is InputReplicationMode.PER_REPLICA
    if options.experimental_place_dataset_on_device and not per_replica:
        raise ValueError(
            "When `experimental_place_dataset_on_device` is set for dataset placement, you must "
            "also specify `PER_REPLICA` for the replication mode\n"
            "Fix: pass experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA (with "
            "distribute_datasets_from_function and experimental_fetch_to_device=False), or leave "
            "experimental_place_dataset_on_device False."
        )
    if options.experimental_place_dataset_on_device and options.experimental_fetch_to_device:
        raise ValueError(
            "`experimental_place_dataset_on_device` can not be set to True when "
            "experimental_fetch_to_device is True and replication mode is set to `PER_REPLICA`\n"
            "Fix: pass experimental_fetch_to_device=False with it."
        )
