"""``tps.function``: a cross-replica step compiled into one XLA program.

The ``tf.function`` role. ``fn`` is traced once per input signature; inside
it ``strategy.run`` (its own ``shard_map``), ``strategy.reduce``, variable reads
and writes and ``next(iterator)`` of a distributed iterator are all traced, so a
call is one dispatch. A Python loop of k steps inside ``fn`` gives TPU-style
steps-per-execution: k steps per dispatch.

Variables are functionalised (``variables.frames``): every variable the
function reads is an input of the program, every variable it writes an
output, written back after the program runs. Batches pulled from a
distributed iterator become inputs too: at trace time the real batches are
pulled (their shapes define the program); at later calls the same number of
batches is pulled before dispatch, and a changed batch shape retraces.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.strategy import dispatch
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, Mirrored
from tpustrategy._src.variables import frames

_STATIC, _ARRAY, _STACKED, _REPLICATED = 0, 1, 2, 3


@dataclass
class _Traced:
    jitted: Any
    out_treedef: Any
    out_kinds: list[Any]
    variables: list[Any]
    written: list[Any]
    pull_counts: list[tuple[Any, int]]  # (iterator, number of batches) in pull order
    pull_sigs: tuple[Any, ...]
    num_replicas: dict[int, int]


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic))


def _flatten_inputs(tree: Any) -> tuple[list[Any], list[Any], Any, tuple[Any, ...], list[int]]:
    """Splits a structure into (dynamic arrays, kinds per leaf, treedef, signature, replica counts)."""
    leaves, treedef = regroup.flatten(tree)
    dyn, kinds, sig, counts = [], [], [], []
    for leaf in leaves:
        if isinstance(leaf, Mirrored):
            x = leaf._primary()
            kinds.append(_REPLICATED)
        elif isinstance(leaf, DistributedValues):
            if leaf._is_ragged():
                raise ValueError(
                    "tps.function: a PerReplica input has components of different shapes "
                    f"({[np.shape(v) for v in leaf.values]}); a compiled program needs one shape.\n"
                    "Fix: use InputOptions(partial_batch='pad') or 'drop' on the distributed "
                    "dataset, or call strategy.run outside tps.function for the ragged step."
                )
            x = leaf._stacked if leaf._stacked is not None else np.stack([np.asarray(v) for v in leaf.values])
            kinds.append(_STACKED)
        elif isinstance(leaf, jax.core.Tracer) or _is_array(leaf):
            x = leaf
            kinds.append(_ARRAY)
        else:
            kinds.append(_STATIC)
            try:
                hash(leaf)
                sig.append((_STATIC, type(leaf), leaf))
            except TypeError:
                sig.append((_STATIC, type(leaf), id(leaf)))
            continue
        dyn.append(x)
        counts.append(leaf._num_replicas if isinstance(leaf, DistributedValues) else 0)
        sig.append((kinds[-1], tuple(np.shape(x)), str(x.dtype)))
    return leaves, dyn, treedef, (tuple(sig), tuple(kinds)), counts


def _rebuild(leaves: list[Any], kinds: list[int], tracers: list[Any], counts: list[int], treedef: Any) -> Any:
    it = iter(zip(tracers, counts))
    out = []
    for leaf, kind in zip(leaves, kinds):
        if kind == _STATIC:
            out.append(leaf)
            continue
        x, n = next(it)
        if kind == _STACKED:
            out.append(type(leaf)._from_stacked(x, n))
        elif kind == _REPLICATED:
            out.append(Mirrored._from_replicated(x, n))
        else:
            out.append(x)
    return jax.tree_util.tree_unflatten(treedef, out)


class Function:
    """A compiled cross-replica function (see ``function``)."""

    def __init__(self, fn: Callable[..., Any]):
        self._fn = fn
        self._cache: collections.OrderedDict[Any, _Traced] = collections.OrderedDict()
        self._known_vars: list[Any] = []
        self._created: list[Any] = []
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, dyn, treedef, sig, counts = _flatten_inputs((args, kwargs))
        traced = self._cache.get(sig)
        pulled: dict[int, list[Any]] = {}
        if traced is not None:
            pulled = self._prepull(traced)
            if pulled is None:
                traced = None
                pulled = self._last_prepulled
        if traced is None:
            traced = self._build(leaves, dyn, treedef, sig, counts, pulled)
            self._cache[sig] = traced
            if len(self._cache) > 64:
                self._cache.popitem(last=False)
            pulled = self._trace_pulled
        pull_arrays = []
        for it, k in traced.pull_counts:
            for batch in pulled[id(it)][:k]:
                pull_arrays.extend(_flatten_inputs(batch)[1])
        mesh = self._mesh(traced, dyn)
        placed = [self._place(x, mesh) for x in dyn]
        var_inputs = [self._place(frames.global_value(v), mesh) for v in traced.variables]
        outs = traced.jitted(*placed, *var_inputs, *[self._place(x, mesh) for x in pull_arrays])
        dispatch.track(outs)
        n_written = len(traced.written)
        if n_written:
            for var, new in zip(traced.written, outs[len(outs) - n_written:]):
                frames.set_global_value(var, new)
            outs = outs[: len(outs) - n_written]
        it = iter(outs)
        result = []
        for kind in traced.out_kinds:
            if kind[0] == "static":
                result.append(kind[1])
            elif kind[0] == "stacked":
                result.append(kind[2]._from_stacked(next(it), kind[1]))
            elif kind[0] == "replicated":
                result.append(Mirrored._from_replicated(next(it), kind[1]))
            else:
                result.append(next(it))
        return jax.tree_util.tree_unflatten(traced.out_treedef, result)

    # Helpers ----------------------------------------------------------------------------
    @staticmethod
    def _mesh(traced: _Traced, dyn: list[Any]) -> Any:
        for var in traced.variables:
            if var._strategy is not None:
                return var._strategy._mesh
        for x in dyn:
            mesh = getattr(getattr(x, "sharding", None), "mesh", None)
            if mesh is not None and getattr(mesh, "devices", np.empty(0)).size > 1:
                return mesh
        return None

    @staticmethod
    def _place(x: Any, mesh: Any) -> Any:
        if mesh is None or not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
            return x
        if len(x.sharding.device_set) == 1 and mesh.devices.size > 1:
            return jax.device_put(x, NamedSharding(mesh, P()))
        return x

    def _prepull(self, traced: _Traced) -> dict[int, list[Any]] | None:
        """Pulls the batches of one call; None (with them kept) if their shapes changed."""
        pulled: dict[int, list[Any]] = {}
        sigs = []
        for it, k in traced.pull_counts:
            batches = pulled.setdefault(id(it), [])
            for _ in range(k):
                batch = it._tps_pull()
                batches.append(batch)
                sigs.append(_flatten_inputs(batch)[3])
        if tuple(sigs) != traced.pull_sigs:
            self._last_prepulled = pulled
            return None
        return pulled

    def _build(self, leaves: list[Any], dyn: list[Any], treedef: Any, sig: Any, counts: list[int],
               prepulled: dict[int, list[Any]]) -> _Traced:
        known = list(self._known_vars)
        pulls: dict[int, list[Any]] = {k: list(v) for k, v in prepulled.items()}
        for _ in range(16):
            traced, missing, more = self._trace(leaves, dyn, treedef, counts, known, pulls)
            if traced is not None:
                self._known_vars = known
                self._trace_pulled = pulls
                return traced
            known += [v for v in missing if v not in known]
            for it, batch in more:
                pulls.setdefault(id(it), []).append(batch)
        raise RuntimeError("tps.function: the set of variables and pulled batches never settled.")

    def _trace(self, leaves: list[Any], dyn: list[Any], treedef: Any, counts: list[int],
               variables: list[Any], pulls: dict[int, list[Any]]) -> tuple[Any, list[Any], list[Any]]:
        kinds = [k for k in (_kind_of(leaf) for leaf in leaves)]
        avals = [jax.ShapeDtypeStruct(np.shape(x), jax.dtypes.canonicalize_dtype(x.dtype)) for x in dyn]
        var_avals = [jax.ShapeDtypeStruct(v._global_shape(), v.dtype) for v in variables]
        pull_specs = []  # (iterator id, leaves, dyn, treedef, kinds, counts) per available batch
        for it_id, batches in pulls.items():
            for batch in batches:
                b_leaves, b_dyn, b_treedef, b_sig, b_counts = _flatten_inputs(batch)
                pull_specs.append((it_id, b_leaves, b_dyn, b_treedef, b_sig[1], b_counts, b_sig))
        pull_avals = [jax.ShapeDtypeStruct(np.shape(x), jax.dtypes.canonicalize_dtype(x.dtype))
                      for spec in pull_specs for x in spec[2]]
        cell: dict[str, Any] = {}

        def body(*flat: Any) -> list[Any]:
            a = len(avals)
            v = a + len(var_avals)
            args_t, vars_t, pulls_t = flat[:a], flat[a:v], list(flat[v:])
            args, kwargs = _rebuild(leaves, kinds, list(args_t), counts, treedef)
            frame = frames.Frame("cross", dict(zip(variables, vars_t)), self._created)
            queues: dict[int, collections.deque] = collections.defaultdict(collections.deque)
            for it_id, b_leaves, b_dyn, b_treedef, b_kinds, b_counts, _ in pull_specs:
                mine, pulls_t[:] = pulls_t[: len(b_dyn)], pulls_t[len(b_dyn):]
                queues[it_id].append(_rebuild(b_leaves, b_kinds, mine, b_counts, b_treedef))
            frame.pull_queues = queues
            frame.pull_order = []
            frame.more_pulls = []
            with frames.active(frame):
                out = self._fn(*args, **kwargs)
            out_leaves, out_treedef = regroup.flatten(out)
            dynamic, out_kinds = [], []
            for leaf in out_leaves:
                if isinstance(leaf, Mirrored) and isinstance(getattr(leaf, "_replicated", None), jax.core.Tracer):
                    out_kinds.append(("replicated", leaf._num_replicas))
                    dynamic.append(leaf._replicated)
                elif isinstance(leaf, DistributedValues) and isinstance(leaf._stacked, jax.core.Tracer):
                    out_kinds.append(("stacked", leaf._num_replicas, type(leaf)))
                    dynamic.append(leaf._stacked)
                elif isinstance(leaf, jax.core.Tracer):
                    out_kinds.append(("array",))
                    dynamic.append(leaf)
                else:
                    out_kinds.append(("static", leaf))
            written = [v for v in frame.written if v in variables]
            cell.update(frame=frame, treedef=out_treedef, kinds=out_kinds, written=written)
            return dynamic + [frame.current(v) for v in written]

        closed = jax.make_jaxpr(body)(*avals, *var_avals, *pull_avals)
        frame = cell["frame"]
        if frame.missing or frame.more_pulls:
            return None, frame.missing, frame.more_pulls
        order: dict[int, int] = collections.Counter(id(it) for it in frame.pull_order)
        iterators = {id(it): it for it in frame.pull_order}
        pull_counts = [(iterators[i], order[i]) for i in iterators]
        pull_sigs = tuple(spec[6] for spec in pull_specs)
        jitted = jax.jit(lambda *flat: tuple(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *flat)))
        return _Traced(jitted, cell["treedef"], cell["kinds"], variables, cell["written"], pull_counts,
                       pull_sigs, {}), [], []


def _kind_of(leaf: Any) -> int:
    if isinstance(leaf, Mirrored):
        return _REPLICATED
    if isinstance(leaf, DistributedValues):
        return _STACKED
    if isinstance(leaf, jax.core.Tracer) or _is_array(leaf):
        return _ARRAY
    return _STATIC


def pull_in_frame(iterator: Any) -> Any:
    """``next(iterator)`` inside a ``tps.function`` trace: a traced batch (or None outside)."""
    frame = frames.current()
    if frame is None or frame.level != "cross" or not hasattr(frame, "pull_queues"):
        return None
    queue = frame.pull_queues.get(id(iterator))
    frame.pull_order.append(iterator)
    if queue:
        return queue.popleft()
    # A batch the trace has no input for yet: pull it now (concretely, outside the
    # trace), hand out a placeholder, and let the builder trace again with it as an input.
    with jax.ensure_compile_time_eval(), frames.suspended():
        batch = iterator._tps_pull()
    _flatten_inputs(batch)  # rejects ragged batches with a clear error
    frame.more_pulls.append((iterator, batch))
    return _placeholder(batch)


def _placeholder(batch: Any) -> Any:
    import jax.numpy as jnp

    def zeros(leaf: Any) -> Any:
        if isinstance(leaf, Mirrored):
            x = leaf._primary()
            return Mirrored._from_replicated(jnp.zeros(np.shape(x), x.dtype), leaf._num_replicas)
        if isinstance(leaf, DistributedValues):
            x = leaf._stacked
            return type(leaf)._from_stacked(jnp.zeros(np.shape(x), x.dtype), leaf._num_replicas)
        if _is_array(leaf):
            return jnp.zeros(np.shape(leaf), leaf.dtype)
        return leaf

    return jax.tree_util.tree_map(zeros, batch, is_leaf=lambda x: isinstance(x, DistributedValues))


def function(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Compiles a cross-replica step into one XLA program (``tf.function``).

    Args:
      fn: the function; usable as ``@tps.function`` or ``@tps.function(...)``.
      **options: accepted for compatibility (``jit_compile``, ``input_signature``,
        ``reduce_retracing``); the program is always compiled by XLA.

    Returns:
      A callable with the same signature; each call is one dispatch.

    Example:
      >>> @tps.function
      ... def train(iterator):
      ...     for _ in range(10):          # 10 steps per dispatch
      ...         loss = strategy.run(step, (next(iterator),))
      ...     return strategy.reduce("MEAN", loss, axis=None)
    """
    if fn is None:
        return lambda f: Function(f)
    return Function(fn)
