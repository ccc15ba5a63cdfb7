"""Host values across processes, checked on one process with a fake two-process all-gather."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import multihost_utils

import tpustrategy as tps
from tpustrategy._src.execution import host_values
from tpustrategy._src.replica import across_processes


def _two_processes(monkeypatch, other_shapes):
    """process_allgather as if a second process held components of ``other_shapes``."""
    other = np.asarray([len(other_shapes)] + [len(s) for s in other_shapes] + [d for s in other_shapes for d in s],
                       np.int64)

    def fake(x):
        x = np.asarray(x)
        if x.ndim == 0:  # the row widths
            return np.stack([x, np.asarray(other.size, x.dtype)])
        return np.stack([x, np.pad(other, (0, x.size - other.size))])

    monkeypatch.setattr(multihost_utils, "process_allgather", fake)


def test_shapes_over_processes_decodes_every_process_in_order(monkeypatch):
    _two_processes(monkeypatch, [(5, 1), (2, 3, 4)])
    assert across_processes.shapes_over_processes([(1,), (2, 2)]) == [[(1,), (2, 2)], [(5, 1), (2, 3, 4)]]


def test_host_values_of_different_ranks_on_two_processes_raise_before_any_program(monkeypatch):
    _two_processes(monkeypatch, [(1, 2)])
    values = tps.PerReplica([np.ones((1,), np.float32)])
    with pytest.raises(tps.errors.InvalidArgumentError) as info:
        host_values.agree_on_shapes(values)
    message = str(info.value)
    assert "strategy.run" in message and "Shape mismatch" in message
    assert "Shape must be rank 1 but is rank 2" in message and "Fix" in message


def test_host_values_learn_the_other_processes_shapes(monkeypatch):
    _two_processes(monkeypatch, [(5, 2)])
    values = tps.PerReplica([np.ones((3, 2), np.float32)])
    host_values.agree_on_shapes(values)
    assert values.shapes == ((3, 2), (5, 2))


def test_the_all_gather_across_processes_runs_with_jit_on_inside_the_eager_path(monkeypatch):
    seen = []

    def record(x):
        seen.append(jax.config.jax_disable_jit)
        return np.stack([np.asarray(x)] * 2)

    monkeypatch.setattr(multihost_utils, "process_allgather", record)
    with jax.disable_jit():
        across_processes.allgather(np.int32(1))
    assert seen == [False]


def test_a_captured_value_is_evaluated_outside_the_trace():
    concrete = jnp.arange(4.0)

    def traced(x):
        total = host_values.evaluate_captured(lambda: jnp.sum(concrete))
        assert isinstance(total, np.ndarray)  # a concrete value, not a tracer of this trace
        return x + total

    assert float(jax.jit(traced)(1.0)) == 7.0


def test_an_error_while_evaluating_a_captured_value_reaches_the_caller():
    def broken():
        raise tps.errors.InvalidArgumentError("Shape mismatch: test")

    with pytest.raises(tps.errors.InvalidArgumentError, match="Shape mismatch"):
        jax.make_jaxpr(lambda x: x + host_values.evaluate_captured(broken))(1.0)


@pytest.mark.devices(4)
def test_local_results_are_rebuilt_from_the_distributed_value_they_wrap():
    s = tps.MirroredStrategy(devices=jax.devices()[:4])
    value = s.experimental_distribute_values_from_function(lambda ctx: np.float32(ctx.replica_id_in_sync_group))
    local = host_values.LocalResults(value, 4)
    assert isinstance(local, tuple) and [float(x) for x in local] == [0.0, 1.0, 2.0, 3.0]
    leaves, treedef = jax.tree_util.tree_flatten(local, is_leaf=lambda x: isinstance(x, tps.DistributedValues))
    assert leaves == [value]
    rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(rebuilt, host_values.LocalResults) and [float(x) for x in rebuilt] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.devices(2)
def test_local_results_stay_plain_tuples_on_one_process():
    s = tps.MirroredStrategy(devices=jax.devices()[:2])
    f = tps.function(lambda v: s.experimental_local_results(v))
    out = f(s.experimental_distribute_values_from_function(lambda ctx: np.float32(ctx.replica_id_in_sync_group)))
    assert type(out) is tuple and [float(x) for x in out] == [0.0, 1.0]
