"""UnionResolver: one cluster made of the clusters of several resolvers.

The counterpart of ``tf.distribute.cluster_resolver.UnionResolver`` (TensorFlow's
rules): ``cluster_spec()`` merges the resolvers' specs job by job — the tasks of
a job given as lists by every resolver are concatenated in resolver order; once
any resolver gives a job as ``{task_index: address}``, the job's tasks are merged
by index and an index given twice raises ``KeyError``. ``task_type``,
``task_id`` and ``rpc_layer`` come from the keyword arguments, else from the
first resolver, as do ``environment``, ``num_accelerators`` and ``master()``.
"""

from __future__ import annotations

from typing import Any

from tpustrategy._src.cluster.base import ClusterResolver, format_master_url
from tpustrategy._src.cluster.cluster_spec import ClusterSpec

_API = "tps.cluster_resolver.UnionResolver"


class UnionResolver(ClusterResolver):
    """The union of the clusters of several resolvers.

    Args:
      *resolvers: one or more ``tps.cluster_resolver`` resolvers.
      task_type: this process's job (default: the first resolver's).
      task_id: this process's index in its job (default: the first resolver's).
      rpc_layer: the protocol of ``master()`` URLs (default: the first resolver's).

    Raises:
      ValueError: no resolver, or an unknown keyword argument.
      TypeError: an argument that is not a resolver.

    Example:
      >>> a = SimpleClusterResolver(ClusterSpec({"worker": ["w0:2222"]}))
      >>> b = SimpleClusterResolver(ClusterSpec({"ps": ["p0:2222"]}))
      >>> UnionResolver(a, b).cluster_spec().as_dict()
      {'worker': ['w0:2222'], 'ps': ['p0:2222']}
    """

    def __init__(self, *resolvers: ClusterResolver, **kwargs: Any):
        self._rpc_layer = kwargs.pop("rpc_layer", None)
        self._task_type = kwargs.pop("task_type", None)
        self._task_id = kwargs.pop("task_id", None)
        if kwargs:
            raise ValueError(
                f"{_API}: unexpected keyword arguments {sorted(kwargs)!r} (TensorFlow: 'Unexpected kwargs "
                f"provided {kwargs!r}'). It takes resolvers and task_type=, task_id=, rpc_layer=.")
        if not resolvers:
            raise ValueError(f"{_API}: At least one ClusterResolver is required.\nFix: "
                             "UnionResolver(resolver_a, resolver_b, ...).")
        for resolver in resolvers:
            if not isinstance(resolver, ClusterResolver):
                raise TypeError(
                    f"{_API}: All arguments must be a sub-class of `ClusterResolver.` Received: {resolver!r} "
                    f"({type(resolver).__name__}).\nFix: wrap a ClusterSpec in "
                    "tps.cluster_resolver.SimpleClusterResolver(spec).")
        self._resolvers = resolvers

    def cluster_spec(self) -> ClusterSpec:
        """The merged ``ClusterSpec`` (see the module docstring for the rules)."""
        specs = [r.cluster_spec().as_dict() for r in self._resolvers]
        indexed = {job for spec in specs for job, tasks in spec.items() if isinstance(tasks, dict)}
        merged: dict[str, Any] = {}
        for spec in specs:
            for job, tasks in spec.items():
                if job not in indexed:
                    merged.setdefault(job, []).extend(tasks)
                    continue
                by_index = dict(tasks) if isinstance(tasks, dict) else dict(enumerate(tasks))
                target = merged.setdefault(job, {})
                both = set(by_index) & set(target)
                if both:
                    raise KeyError(f"Duplicate keys detected when merging two ClusterSpecs: {both!r} (job {job!r}).")
                target.update(by_index)
        return ClusterSpec(merged)

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """A task's address in the merged spec, or (without a task) the first resolver's master."""
        if task_type is not None and task_id is not None:
            address = self.cluster_spec().task_address(task_type, task_id)
            return format_master_url(address, rpc_layer or self._rpc_layer)
        return self._resolvers[0].master(rpc_layer=rpc_layer)

    @property
    def task_type(self) -> str | None:
        return self._task_type or self._resolvers[0].task_type

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        return self._task_id if self._task_id is not None else self._resolvers[0].task_id

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer or self._resolvers[0].rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer

    @property
    def environment(self) -> str:
        return self._resolvers[0].environment

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: object = None) -> dict[str, int]:
        """The first resolver's answer."""
        return self._resolvers[0].num_accelerators(task_type, task_id, config_proto)

    @property
    def process_id(self) -> int | None:
        """This process's index in the merged cluster's JAX job (None without a task)."""
        from tpustrategy._src.cluster.simple import SimpleClusterResolver

        return SimpleClusterResolver(self.cluster_spec(), task_type=self.task_type, task_id=self.task_id).process_id

    def __repr__(self) -> str:
        return f"UnionResolver({', '.join(repr(r) for r in self._resolvers)})"
