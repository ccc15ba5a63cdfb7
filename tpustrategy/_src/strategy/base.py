"""``Strategy``: the cross-replica API shared by every strategy.

A strategy owns a ``jax.sharding.Mesh`` over its replicas' devices (axis
``"replica"``, and ``"core"`` when a replica has several cores). ``run`` validates
its arguments and hands the call to ``execution.runner.ReplicaRunner.call``, which
compiles the replica function into one program over that mesh (uniform or ragged)
or, when it cannot be compiled, runs it eagerly (one thread per replica);
``reduce`` and friends combine the results.

Inside ``strategy/`` this module sits above ``extended``, ``logical_devices``,
``reduce``, ``gather`` and ``run_options`` (which never import it) and below
``default``, ``context`` and ``strategies``; it reads the context stack from
``context.stack`` directly, not through the ``strategy.context`` accessors, which
need the default strategy and so sit above it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from tpustrategy._src.context import contracts, extensions, stack
from tpustrategy._src.execution import dispatch, host_values
from tpustrategy._src.execution.runner import MISS, ReplicaRunner
from tpustrategy._src.execution.tracebacks import hide_library_frames
from tpustrategy._src.reduce_op import canonical_reduce_op
from tpustrategy._src.strategy.extended import StrategyExtended
from tpustrategy._src.strategy.logical_devices import logical_device_scope
from tpustrategy._src.strategy.reduce import reduce_value
from tpustrategy._src.strategy.run_options import check_run_options
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, PerReplica

_NO_AXIS = object()


class ValueContext:
    """What ``experimental_distribute_values_from_function`` passes to ``value_fn``."""

    def __init__(self, replica_id_in_sync_group: int = 0, num_replicas_in_sync: int = 1):
        self._replica_id = replica_id_in_sync_group
        self._num_replicas = num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self) -> int:
        return self._replica_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas

    def __str__(self) -> str:
        return (
            f"tf.distribute.ValueContext(replica id {self._replica_id},  total replicas in "
            f"sync: {self._num_replicas})"
        )

    __repr__ = __str__


class Strategy:
    """Base class of all strategies (``tf.distribute.Strategy``)."""

    _is_default = False
    # The class of ``strategy.extended`` (``TPUStrategy`` has its own, as in TensorFlow).
    _extended_type: type[StrategyExtended] = StrategyExtended
    _per_replica_input = False  # see ``supports_per_replica_input``
    # TensorFlow's OneDeviceStrategy (and the default strategy) hand back ``value_fn``'s value
    # itself; every other strategy wraps even one replica's value in a PerReplica.
    _plain_values_from_function = False

    def __init__(self, devices: Sequence[jax.Device], *, replica_offset: int = 0,
                 local_devices: Sequence[jax.Device] | None = None, core_grid: Any = None):
        from tpustrategy._src.devices.mesh import replica_mesh

        # One device per replica (its logical core 0 when it has several cores).
        self._devices = tuple(devices)
        self._local_devices = tuple(local_devices if local_devices is not None else devices)
        self._replica_offset = replica_offset
        self._mesh = replica_mesh(self._devices, core_grid)
        self._num_cores = int(np.shape(core_grid)[1]) if core_grid is not None else 1
        self._runner = ReplicaRunner(self)
        self._scope_depth = 0

    # Properties ----------------------------------------------------------------
    @property
    def num_replicas_in_sync(self) -> int:
        """Number of replicas over all hosts (a Python int)."""
        return len(self._devices)

    @property
    def mesh(self) -> jax.sharding.Mesh:
        """The ``jax.sharding.Mesh`` the strategy runs on: axis ``"replica"``, and ``"core"``
        when each replica has several cores."""
        return self._mesh

    @property
    def num_cores_per_replica(self) -> int:
        """Logical cores (devices) per replica: 1, or ``DeviceAssignment.num_cores_per_replica``."""
        return self._num_cores

    @property
    def extended(self) -> StrategyExtended:
        """The ``tf.distribute.StrategyExtended`` methods (``reduce_to``, ``batch_reduce_to``, ``update``...)."""
        found: StrategyExtended | None = getattr(self, "_extended", None)
        if found is None:
            found = self._extended = self._extended_type(self)
        return found

    @property
    def cluster_resolver(self) -> Any:
        """The cluster resolver the strategy was built with (None for single-host strategies)."""
        return getattr(self, "_cluster_resolver", None)

    @property
    def worker_devices(self) -> tuple[jax.Device, ...]:
        """This host's replica devices, in replica order."""
        return self._local_devices

    @property
    def first_local_replica(self) -> int:
        """The global replica id of this process's first replica (0 on one process)."""
        return self._replica_offset

    @property
    def replica_devices(self) -> tuple[jax.Device, ...]:
        """Every replica's device (its first core) over the whole job, in replica order."""
        return self._devices

    @property
    def is_default(self) -> bool:
        """Whether this is the default strategy (no scope entered): one replica, nothing distributed."""
        return self._is_default

    @property
    def supports_per_replica_input(self) -> bool:
        """Whether ``distribute_datasets_from_function`` takes ``InputReplicationMode.PER_REPLICA``
        (one pipeline per replica): ``MirroredStrategy`` and its subclasses only, as in TensorFlow."""
        return self._per_replica_input

    # Scope ----------------------------------------------------------------------
    def scope(self) -> StrategyScope:
        """Makes this strategy current; variables created inside are mirrored.

        The returned context manager can be entered again, also after it was left
        (TensorFlow's can: ``scope_a = s.scope(); with scope_a: ...; with scope_a: ...``).

        Raises:
          RuntimeError: (on entering) inside a replica function, or while another
            strategy's scope is active.
        """
        return StrategyScope(self)

    def _scope_replica_context(self) -> Any:
        """The replica context a scope of this strategy sets: None (cross-replica context)."""
        return None

    def _enter_for(self, api: str) -> contextlib.AbstractContextManager[Any]:
        stack.require_cross_replica_or_default(self, api)
        entry = stack.current_entry()
        if entry is not None and entry.strategy is self:
            return contextlib.nullcontext()
        return stack.push(self, None)

    def logical_device_scope(self, logical_device_id: int) -> Any:
        """``ReplicaContext.experimental_logical_device`` (validated; see ``logical_devices``)."""
        return logical_device_scope(self, logical_device_id)

    # run ------------------------------------------------------------------------
    def run(self, fn: Callable[..., Any], args: Any = (), kwargs: Any = None, options: Any = None) -> Any:
        """Runs ``fn`` on every replica, as one compiled program.

        Args:
          fn: the replica function.
          args: a tuple or list; ``PerReplica`` leaves are split per replica,
            other values are broadcast (each replica gets its own copy).
          kwargs: a dict, treated like ``args``.
          options: a ``tps.RunOptions`` (accepted for TensorFlow compatibility).

        Returns:
          The regrouped results: ``PerReplica`` for values that differ per
          replica, ``Mirrored`` for values provably equal on every replica,
          Python values unwrapped; with one replica, plain values.

        Raises:
          ValueError: if ``args`` is not a list or tuple.
          RuntimeError: inside a replica function, or inside another strategy's scope.
        """
        __tracebackhide__ = True  # noqa: F841 - pytest's and IPython's marker
        try:
            if kwargs is None and options is None and (type(args) is tuple or type(args) is list):
                # A call like one before it (same function, same kinds of arguments) goes straight
                # to its program; everything else, and every check, is on the path below.
                result = self._runner.fast_call(fn, args)
                if result is not MISS:
                    return result
            return self._run(fn, args, kwargs, options)
        except Exception as e:  # library frames left out (``execution.tracebacks``)
            hide_library_frames(e)
            raise

    def _run(self, fn: Callable[..., Any], args: Any, kwargs: Any, options: Any) -> Any:
        if type(args) is not tuple and not isinstance(args, (tuple, list)):
            # TensorFlow's exact text first (programs and tests match on it), then the fix.
            raise ValueError(
                f"positional args must be a list or tuple, got {type(args)}\nstrategy.run: `args` holds "
                f"the replica function's positional arguments. Received: args={args!r:.80}.\nFix: wrap "
                "one argument in a tuple, strategy.run(fn, args=(value,)).")
        if not callable(fn):
            raise TypeError(
                f"strategy.run: `fn` must be a callable (the replica function). Received: fn={fn!r:.60}."
                "\nFix: pass the function itself, e.g. strategy.run(step, args=(x,)), not its result.")
        if options is not None:
            check_run_options(options)
        if kwargs is None:
            kwargs = {}
        elif not isinstance(kwargs, dict):
            raise ValueError(f"keyword args must be a dict, got {type(kwargs)}")  # TensorFlow's text
        stack.require_cross_replica_or_default(self, "run")
        return self._runner.call(fn, args, kwargs)

    experimental_run_v2 = run

    # reduce ---------------------------------------------------------------------
    def reduce(self, reduce_op: Any, value: Any, axis: Any = _NO_AXIS) -> Any:
        """Reduces ``value`` across replicas (and along ``axis`` inside each replica).

        Args:
          reduce_op: ``ReduceOp.SUM``/``MEAN`` or a case-insensitive string.
          value: a ``PerReplica``/``Mirrored``, a plain value, or (with
            ``axis=None``) a nested structure of them.
          axis: ``None`` to reduce across replicas only, or an int/tuple/list of
            axes reduced inside each replica first. Required, as in TF2.

        Returns:
          The reduced value (a ``jax.Array``, or the same structure of them).
        """
        if axis is _NO_AXIS:
            raise TypeError(
                "StrategyBase.reduce() missing 1 required positional argument: 'axis'\nFix: pass "
                "axis=None to reduce across replicas only (TF2 requires it), or axis=0 to also "
                "reduce the batch axis inside each replica."
            )
        op = canonical_reduce_op(reduce_op)
        with self._enter_for("reduce"):
            n = self.num_replicas_in_sync
            leaves, treedef = regroup.flatten(value)
            split = self._placement_split()
            reduced = [reduce_value(op, leaf, axis, n, split) for leaf in leaves]
            dispatch.track(reduced)  # a cross-device reduction is a program with a collective
            return jax.tree_util.tree_unflatten(treedef, reduced)

    # Values ------------------------------------------------------------------------
    def experimental_local_results(self, value: Any) -> tuple[Any, ...]:
        """The local replicas' components of ``value`` as a tuple."""
        traced = host_values.local_results_in_trace(value, len(self._local_devices))
        if traced is not None:
            return traced
        return regroup.local_results(value, len(self._local_devices))

    def gather(self, value: Any, axis: int) -> Any:
        """Concatenates every replica's component of ``value`` along ``axis`` (cross-replica).

        Every replica of the job is included, on every process (TensorFlow's
        rule); the result is one array on this strategy's devices.
        """
        from tpustrategy._src.strategy.gather import gather_value

        with self._enter_for("gather"):
            split = self._placement_split()
            return jax.tree_util.tree_map(
                lambda v: gather_value(v, axis, self.num_replicas_in_sync, split), value,
                is_leaf=lambda x: isinstance(x, DistributedValues) or contracts.is_distributed_variable(x))

    def experimental_distribute_values_from_function(self, value_fn: Callable[[ValueContext], Any]) -> Any:
        """Calls ``value_fn(ValueContext(i, R))`` for each local replica; wraps results in PerReplica.

        As in TensorFlow, ``OneDeviceStrategy`` and the default strategy return the value
        itself; every other strategy wraps it, one replica included (``regroup(...,
        always_wrap=True)``).
        """
        n = self.num_replicas_in_sync
        results = [
            value_fn(ValueContext(self._replica_offset + i, n))
            for i in range(len(self._local_devices))
        ]
        if len(results) == 1 and n == 1 and self._plain_values_from_function:
            return results[0]
        leaves0, treedef = jax.tree_util.tree_flatten(results[0])
        columns = [jax.tree_util.tree_flatten(r)[0] for r in results]
        grouped = [PerReplica([col[k] for col in columns]) for k in range(len(leaves0))]
        split = self._placement_split()
        for value in grouped:
            value.set_home(split)
        return jax.tree_util.tree_unflatten(treedef, grouped)

    # Input ------------------------------------------------------------------------------
    def experimental_distribute_dataset(self, dataset: Any, options: Any = None, *,
                                        input_pipeline: tuple[int, int] | None = None) -> Any:
        """Splits each global batch of ``dataset`` across the replicas (DESIGN §4).

        Args:
          dataset: a ``tpustrategy.data.Dataset`` of global batches.
          options: a ``tps.InputOptions``.
          input_pipeline: ``(pipeline_id, num_pipelines)`` to build one pipeline of
            a multi-host job in this process (testing); default: this process's.

        Returns:
          A ``DistributedDataset``: iterate it for steps of per-replica values.
        """
        from tpustrategy._src.input.distributed import DistributedDataset

        stack.require_cross_replica_or_default(self, "experimental_distribute_dataset")
        return DistributedDataset(self, dataset, options, input_pipeline=input_pipeline)

    def distribute_datasets_from_function(self, dataset_fn: Callable[..., Any], options: Any = None, *,
                                          input_pipeline: tuple[int, int] | None = None) -> Any:
        """Calls ``dataset_fn(InputContext)`` once per input pipeline; no rebatching or sharding."""
        from tpustrategy._src.input.from_function import DistributedDatasetsFromFunction

        stack.require_cross_replica_or_default(self, "distribute_datasets_from_function")
        if not callable(dataset_fn):
            raise TypeError(
                "distribute_datasets_from_function: `dataset_fn` must be a function of an "
                f"InputContext that returns a dataset. Received: dataset_fn={dataset_fn!r:.60}.\nFix: "
                "pass `lambda ctx: dataset` (batched per replica: ctx.get_per_replica_batch_size(B)), or "
                "call strategy.experimental_distribute_dataset(dataset) for a dataset of global batches."
            )
        return DistributedDatasetsFromFunction(self, dataset_fn, options, input_pipeline=input_pipeline)

    experimental_distribute_datasets_from_function = distribute_datasets_from_function

    def experimental_make_numpy_dataset(self, numpy_input: Any) -> Any:
        """A dataset of the rows of (nested) NumPy arrays; the arrays are sliced, not copied."""
        from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset

        stack.require_cross_replica_or_default(self, "experimental_make_numpy_dataset")
        if isinstance(numpy_input, list) and all(isinstance(x, np.ndarray) for x in numpy_input):
            numpy_input = np.stack(numpy_input)  # tf.data list semantics: a list is stacked
        return TensorSliceDataset(numpy_input, copy=False)

    def __repr__(self) -> str:
        return object.__repr__(self)

    def _placement_split(self) -> Any:
        from tpustrategy._src.execution.program import Placement

        return Placement.of(self).split


class StrategyScope:
    """``strategy.scope()``: a re-enterable context manager (each ``with`` pushes its own entry)."""

    __slots__ = ("_strategy", "_open")

    def __init__(self, strategy: Strategy):
        self._strategy = strategy
        self._open: list[contextlib.ExitStack] = []

    def __enter__(self) -> Strategy:
        strategy = self._strategy
        entry = stack.current_entry()
        if entry is not None:
            if entry.replica_context is not None and not entry.replica_context.is_default:
                raise RuntimeError(stack.CROSS_REPLICA_ERROR)
            if entry.strategy is not strategy and not entry.strategy.is_default:
                raise stack.mixing_error(entry.strategy, strategy)
        exits = contextlib.ExitStack()
        exits.enter_context(stack.push(strategy, strategy._scope_replica_context(), is_scope=True))
        # Keras 3 support joins the scope only when the user imported Keras.
        exits.enter_context(extensions.scope_extensions(strategy))
        self._open.append(exits)
        return strategy

    def __exit__(self, *exc: Any) -> bool | None:
        return self._open.pop().__exit__(*exc)
