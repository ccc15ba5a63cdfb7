"""Dataset options (``tf.data.Options``) and the constants that go with them.

Options are pipeline-wide settings attached with ``Dataset.with_options``.
Like ``tf.data.Options`` they are mutable objects whose fields are validated
on assignment; a field that was never set is *unset* and inherits from
upstream. ``a.merge(b)`` returns a copy of ``a`` with every field that ``b``
sets overriding ``a`` (options set further downstream win).
"""

from __future__ import annotations

import copy
import enum
from typing import Any, ClassVar

AUTOTUNE = -1
"""Let the library pick a parallelism or buffer size (``tf.data.AUTOTUNE``)."""

SHARD_HINT = -1
"""Placeholder ``num_shards`` that the HINT auto-shard policy fills in."""

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


class AutoShardPolicy(enum.IntEnum):
    """How a dataset is split across input pipelines (``tf.data.experimental.AutoShardPolicy``).

    OFF: every pipeline reads everything. AUTO: shard by file when a reader is
    found, otherwise by data. FILE: pipeline i reads files i, i+W, ...
    DATA: every pipeline reads everything and keeps its share of elements.
    HINT: replace ``SHARD_HINT`` placeholders in ``shard`` calls.
    """

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class _OptionsBase:
    """Validated, mergeable option fields; subclasses list them in ``_fields``."""

    # name -> (allowed type(s), default, validator or None)
    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {}
    _aliases: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        object.__setattr__(self, "_values", {})
        for name, (kind, _default) in self._fields.items():
            if isinstance(kind, type) and issubclass(kind, _OptionsBase):
                self._values[name] = kind()

    def __getattr__(self, name: str) -> Any:
        name = type(self)._aliases.get(name, name)
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(self._unknown(name))
        return self._values.get(name, fields[name][1])

    def __setattr__(self, name: str, value: Any) -> None:
        name = type(self)._aliases.get(name, name)
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(self._unknown(name))
        kind, _default = fields[name]
        if isinstance(kind, type) and issubclass(kind, _OptionsBase):
            if not isinstance(value, kind):
                raise TypeError(
                    f"{type(self).__name__}.{name} must be a {kind.__name__}; received "
                    f"{type(value).__name__}: {value!r}.\n"
                    f"Fix: set its fields instead, e.g. options.{name}.<field> = ..."
                )
            self._values[name] = value
            return
        if value is None:
            self._values.pop(name, None)
            return
        self._values[name] = self._validate(name, kind, value)

    def _validate(self, name: str, kind: Any, value: Any) -> Any:
        cls = type(self).__name__
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError(
                    f"{cls}.{name} must be a bool; received {type(value).__name__}: {value!r}.\n"
                    f"Fix: set {name} = True or False (or None to unset it)."
                )
            return value
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"{cls}.{name} must be an int; received {type(value).__name__}: {value!r}.\n"
                    f"Fix: set {name} to a non-negative int (or None to unset it)."
                )
            if value < 0:
                raise ValueError(f"{cls}.{name} must be >= 0; received {value}.")
            return value
        if kind is list:
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise TypeError(
                    f"{cls}.{name} must be a list of str; received {type(value).__name__}: {value!r}.\n"
                    f"Fix: e.g. {name} = ['keras']."
                )
            return list(value)
        if kind is str:
            if not isinstance(value, str):
                raise TypeError(
                    f"{cls}.{name} must be a str; received {type(value).__name__}: {value!r}.\n"
                    f"Fix: set {name} to a string (or None to unset it)."
                )
            return value
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            try:
                return kind(value)
            except ValueError:
                valid = ", ".join(f"{kind.__name__}.{m.name}" for m in kind)
                raise ValueError(
                    f"{cls}.{name} must be one of {valid}; received {value!r}.\n"
                    f"Fix: use a member of {kind.__name__}."
                ) from None
        return value  # pragma: no cover

    def _unknown(self, name: str) -> str:
        valid = ", ".join(sorted([*type(self)._fields, *type(self)._aliases]))
        return (
            f"{type(self).__name__} has no option {name!r}. Valid options: {valid}.\n"
            "Fix: check the spelling against tf.data.Options."
        )

    def merge(self, other: _OptionsBase) -> Any:
        """A copy of ``self`` where every field that ``other`` sets overrides it."""
        if type(other) is not type(self):
            raise TypeError(
                f"{type(self).__name__}.merge: expected a {type(self).__name__}; "
                f"received {type(other).__name__}."
            )
        out = copy.deepcopy(self)
        for name, value in other._values.items():
            if isinstance(value, _OptionsBase):
                out._values[name] = out._values[name].merge(value)
            else:
                out._values[name] = value
        return out

    def __deepcopy__(self, memo: dict) -> Any:
        new = type(self)()
        for k, v in self._values.items():
            new._values[k] = copy.deepcopy(v, memo)
        return new

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in type(self)._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self)._fields)
        return f"{type(self).__name__}({parts})"


class DistributeOptions(_OptionsBase):
    """Distribution options (``tf.data.experimental.DistributeOptions``).

    Attributes:
      auto_shard_policy: an `AutoShardPolicy` (default AUTO).
      num_devices: the number of devices the dataset is split over (or None).
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "auto_shard_policy": (AutoShardPolicy, AutoShardPolicy.AUTO),
        "num_devices": (int, None),
    }


class AutotuneAlgorithm(enum.IntEnum):
    """The autotuning algorithm (``tf.data.experimental.AutotuneAlgorithm``); accepted, no effect here."""

    DEFAULT = 0
    HILL_CLIMB = 1
    GRADIENT_DESCENT = 2
    MAX_PARALLELISM = 3
    STAGE_BASED = 4


class ExternalStatePolicy(enum.IntEnum):
    """What to do with external state when checkpointing (``tf.data.experimental.ExternalStatePolicy``).

    Accepted, no effect: iterator states here are JSON position records, which
    never serialize a function's captured state.
    """

    WARN = 0
    IGNORE = 1
    FAIL = 2


class ThreadingOptions(_OptionsBase):
    """Threading options (``tf.data.ThreadingOptions``).

    Attributes:
      private_threadpool_size: the most worker threads a parallel ``map``
        runs; larger ``num_parallel_calls`` and ``AUTOTUNE`` are capped at
        it. 0 or None: no cap.
      max_intra_op_parallelism: the threads NumPy's BLAS may use inside one
        worker process of a parallel ``map`` (default 1, so that the workers
        do not oversubscribe the CPUs); no effect on threads (the BLAS pool of
        this process is process-wide).
      experimental_worker_processes: tpustrategy's own: where a parallel
        ``map`` runs its function. None (default): measured, with 2+ workers.
        ``map(...).batch(...)`` (fused, see
        ``OptimizationOptions.map_and_batch_fusion``) maps its first batch in
        this process and moves to worker processes, which map and stack whole
        batches, when the function costs 10 µs of CPU or more per element
        (2+ CPUs); an unfused ``map`` starts on threads and moves when an
        element costs 20 µs or more, with 4+ CPUs (on 2 cores one hand-off per
        element cost more than the second core gave). True:
        processes from the first element; False: threads only. A function
        that cannot be sent to a process stays on threads with one
        ``tpsd.experimental.ThreadFallbackWarning``.
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "max_intra_op_parallelism": (int, None),
        "private_threadpool_size": (int, None),
        "experimental_worker_processes": (bool, None),
    }


class AutotuneOptions(_OptionsBase):
    """Autotuning options (``tf.data.experimental.AutotuneOptions``).

    Attributes:
      enabled: False turns adaptive sizing off: ``prefetch(AUTOTUNE)`` keeps
        a fixed buffer of 2 elements and ``AUTOTUNE`` parallelism is 1 worker.
      cpu_budget: the worker threads ``AUTOTUNE`` parallelism resolves to
        (default: the CPUs this process may run on).
      ram_budget: the bytes an adaptive ``prefetch`` buffer may hold
        (default 64 MiB per buffer).
      autotune_algorithm, initial_parallelism, min_parallelism: accepted;
        no effect (there is no tuning loop to steer).
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "enabled": (bool, None),
        "cpu_budget": (int, None),
        "ram_budget": (int, None),
        "autotune_algorithm": (AutotuneAlgorithm, None),
        "initial_parallelism": (int, None),
        "min_parallelism": (int, None),
    }


_OPTIMIZATIONS = (
    "apply_default_optimizations", "filter_fusion", "filter_parallelization", "inject_prefetch",
    "map_and_batch_fusion", "map_and_filter_fusion", "map_fusion", "map_parallelization",
    "noop_elimination", "parallel_batch", "seq_interleave_prefetch", "shuffle_and_repeat_fusion",
)


class OptimizationOptions(_OptionsBase):
    """Graph rewrite switches (``tf.data.experimental.OptimizationOptions``).

    Every field is accepted. ``map_and_batch_fusion`` (None or True, the
    default as in TensorFlow) fuses a parallel ``map`` followed by ``batch``
    when the map runs in worker processes: a worker maps and stacks whole
    batches (the same batches, errors and checkpoints as unfused); False keeps
    them apart. The other fields have no effect (the pipeline is not
    rewritten).
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {name: (bool, None) for name in _OPTIMIZATIONS}


class Options(_OptionsBase):
    """Pipeline-wide options (``tf.data.Options``).

    Attributes:
      deterministic: whether parallel transformations keep element order
        when they are called with ``deterministic=None`` (default True).
        ``experimental_deterministic`` is an alias.
      experimental_distribute: a `DistributeOptions` (auto-shard policy).
      threading: a `ThreadingOptions` (``experimental_threading`` is an alias).
      autotune: an `AutotuneOptions` (CPU and RAM budgets of AUTOTUNE).
      experimental_optimization: an `OptimizationOptions` (no effect).
      experimental_slack: accepted; no effect (there is no prefetch slack to
        leave: the consumer takes chunks as they are ready).
      experimental_warm_start: True starts the worker threads of ``prefetch``
        and parallel ``map`` when the iterator is created instead of at the
        first ``next``.
      experimental_symbolic_checkpoint: accepted; iterator states here are
        always symbolic (positions, never buffered elements).
      experimental_external_state_policy: an `ExternalStatePolicy`; accepted,
        no effect (states never hold function state).
      dataset_name: a name for the pipeline (kept, shown in ``repr``).
      framework_type: a list of framework names (kept; no effect).

    Example:
      >>> opts = Options()
      >>> opts.experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA
      >>> ds = Dataset.range(8).with_options(opts)
    """

    # The fields, declared for static lookups (values live in ``_values``; see `_OptionsBase`).
    autotune: AutotuneOptions
    dataset_name: str | None
    deterministic: bool | None
    experimental_deterministic: bool | None
    experimental_distribute: DistributeOptions
    experimental_external_state_policy: ExternalStatePolicy | None
    experimental_optimization: OptimizationOptions
    experimental_slack: bool | None
    experimental_symbolic_checkpoint: bool | None
    experimental_threading: ThreadingOptions
    experimental_warm_start: bool | None
    framework_type: list[str] | None
    threading: ThreadingOptions

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "autotune": (AutotuneOptions, None),
        "dataset_name": (str, None),
        "deterministic": (bool, None),
        "experimental_distribute": (DistributeOptions, None),
        "experimental_external_state_policy": (ExternalStatePolicy, None),
        "experimental_optimization": (OptimizationOptions, None),
        "experimental_slack": (bool, None),
        "experimental_symbolic_checkpoint": (bool, None),
        "experimental_warm_start": (bool, None),
        "framework_type": (list, None),
        "threading": (ThreadingOptions, None),
    }
    _aliases: ClassVar[dict[str, str]] = {
        "experimental_deterministic": "deterministic",
        "experimental_threading": "threading",
    }
