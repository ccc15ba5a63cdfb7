"""The modules of ``strategy/`` form layers, and the names they share with lower packages are public.

``base`` sits above ``extended`` and ``logical_devices`` and below ``default``, ``context``
and the concrete strategies; the contract pieces these moves rely on (the default replica
context outside every scope, ``TPUStrategy``'s own ``extended``, ``supports_per_replica_input``)
keep TensorFlow's behaviour.
"""

from __future__ import annotations

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.context import contracts

STRATEGY = pathlib.Path(tps.__file__).resolve().parent / "_src" / "strategy"

# Lowest first: a module may import only modules of earlier rows (lazily or not).
ORDER = [
    {"run_options", "communication", "reduce", "gather", "logical_devices", "run_arguments"},
    {"extended"},
    {"base"},
    {"default"},
    {"context"},
    {"strategies"},
    {"central_storage"},
]


def _imports_inside_the_package(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tpustrategy._src.strategy":
                found.update(a.name for a in node.names)
            elif node.module.startswith("tpustrategy._src.strategy."):
                found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.rsplit(".", 1)[1] for a in node.names
                         if a.name.startswith("tpustrategy._src.strategy."))
    return found


def _row(module: str) -> int:
    return next(i for i, row in enumerate(ORDER) if module in row)


def test_every_strategy_module_has_a_row():
    modules = {p.stem for p in STRATEGY.glob("*.py") if p.stem != "__init__"}
    assert modules == set().union(*ORDER)


def test_strategy_modules_import_only_lower_rows():
    upward = []
    for path in sorted(STRATEGY.glob("*.py")):
        if path.stem == "__init__":
            continue
        for target in sorted(_imports_inside_the_package(path)):
            if _row(target) >= _row(path.stem):
                upward.append(f"{path.stem} -> {target}")
    assert not upward, upward


# The pieces the layering relies on ------------------------------------------------------------------
def test_supports_per_replica_input_is_true_for_mirrored_strategies_only():
    mirrored = tps.MirroredStrategy(jax.devices()[:2])
    assert mirrored.supports_per_replica_input is True
    assert tps.experimental.CentralStorageStrategy(jax.devices()[:2]).supports_per_replica_input is True
    assert tps.OneDeviceStrategy(jax.devices()[0]).supports_per_replica_input is False
    assert tps.TPUStrategy().supports_per_replica_input is False
    assert tps.get_strategy().supports_per_replica_input is False
    assert isinstance(mirrored, contracts.StrategyContract)


def test_per_replica_input_mode_is_refused_where_the_strategy_does_not_support_it():
    opts = tps.InputOptions(experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA,
                            experimental_fetch_to_device=False)
    with pytest.raises(NotImplementedError, match="OneDeviceStrategy builds one input pipeline"):
        tps.OneDeviceStrategy(jax.devices()[0]).distribute_datasets_from_function(
            lambda ctx: tpsd.Dataset.range(2).batch(1), opts)


@pytest.mark.devices(2)
def test_per_replica_input_mode_builds_one_pipeline_per_replica_where_supported():
    opts = tps.InputOptions(experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA,
                            experimental_fetch_to_device=False)
    seen = []

    def fn(ctx):
        seen.append(ctx.input_pipeline_id)
        return tpsd.Dataset.range(2).batch(1)

    tps.experimental.CentralStorageStrategy(jax.devices()[:2]).distribute_datasets_from_function(fn, opts)
    assert seen == [0, 1]  # one pipeline per replica


def test_only_tpu_strategy_requires_static_shapes_and_its_extended_is_a_strategy_extended():
    tpu = tps.TPUStrategy()
    assert isinstance(tpu.extended, tps.StrategyExtended)
    assert tpu.extended is tpu.extended
    assert tpu.extended.experimental_require_static_shapes is True
    assert tpu.extended.worker_devices == tuple(jax.devices())  # every replica's (one process here)
    mirrored = tps.MirroredStrategy(jax.devices()[:2])
    assert mirrored.extended.experimental_require_static_shapes is False
    assert tps.get_strategy().extended.experimental_require_static_shapes is False
    assert mirrored.extended.worker_devices == tuple(jax.devices()[:2])


def test_replica_ctx_all_reduce_outside_every_scope_uses_the_default_replica_context():
    # One replica: the default context's all-reduce, which leaves the value (an int MEAN in float).
    one = tps.OneDeviceStrategy(jax.devices()[0])
    total = one.extended._replica_ctx_all_reduce("SUM", {"a": jnp.asarray([1.0, 2.0]), "b": 3})
    np.testing.assert_array_equal(np.asarray(total["a"]), [1.0, 2.0])
    assert float(total["b"]) == 3.0
    mean = tps.get_strategy().extended._replica_ctx_all_reduce("MEAN", jnp.asarray(4, jnp.int32))
    assert mean.dtype == jnp.float32 and float(mean) == 4.0


@pytest.mark.devices(2)
def test_replica_ctx_all_reduce_of_several_replicas_outside_a_replica_function_is_refused():
    # Several replicas outside a replica function, and cross-replica context, refuse it.
    four = tps.MirroredStrategy(jax.devices()[:4])
    with pytest.raises(RuntimeError, match="replica context"):
        four.extended._replica_ctx_all_reduce("SUM", jnp.asarray(1.0))
    with four.scope(), pytest.raises(RuntimeError, match="replica context"):
        four.extended._replica_ctx_all_reduce("SUM", jnp.asarray(1.0))


def test_update_non_slot_in_cross_replica_context_runs_under_the_strategy():
    s = tps.MirroredStrategy(jax.devices()[:2])
    seen = []

    def fn(x):
        seen.append((tps.get_strategy() is s, tps.in_cross_replica_context(), float(x)))
        return x + 1

    with s.scope():
        assert float(s.extended.update_non_slot(None, fn, args=(2.0,))) == 3.0
        assert tps.get_strategy() is s
    assert seen == [(True, True, 2.0)]
    assert tps.get_strategy() is not s
