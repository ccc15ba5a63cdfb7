"""Gathers of values equal on every replica are built on each device, without a collective.

``invariance.gathers_of_equal_values`` finds the top-level whole-axis ``all_gather``s whose
operand is provably equal on every replica; ``evaluate.eval_jaxpr`` stacks the operand
instead of communicating. The common case is a write of an ``ONLY_FIRST_REPLICA`` variable
(Keras's ``optimizer.iterations.assign_add(1)``): replica 0's value is everyone's. Checked:
which equations are found (and which must not be), that the stacked value has the gather's
bits (-0.0, subnormals, NaN payloads), and end to end that such a program has no all-gather
while a write of a varying value keeps it — with the variable's values worked out by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import tpustrategy as tps
from tpustrategy._src.execution import evaluate, invariance
from tpustrategy._src.execution import program as program_module

N = 4


@pytest.fixture
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(N)])


def _jaxpr(fn, *args):
    return jax.make_jaxpr(fn, axis_env=[("replica", N)])(*args).jaxpr


def test_only_gathers_of_equal_values_over_the_whole_axis_are_found():
    def fn(x, m):
        return (jax.lax.all_gather(m + 1.0, "replica"),                       # equal: found
                jax.lax.all_gather(x, "replica"),                             # varies: kept
                jax.lax.all_gather(jax.lax.psum(x, "replica"), "replica"),    # a psum is equal: found
                jax.lax.all_gather(m * jax.lax.axis_index("replica"), "replica"),  # varies: kept
                jax.lax.all_gather(m, "replica", tiled=True),                 # tiled: kept
                jax.lax.all_gather(m, "replica", axis_index_groups=[[0, 1], [2, 3]]))  # groups: kept

    jaxpr = _jaxpr(fn, jnp.ones(3), jnp.ones(3))
    gathers = [e for e in jaxpr.eqns if e.primitive.name == "all_gather"]
    assert len(gathers) == 6
    found = invariance.gathers_of_equal_values(jaxpr, [True, False])
    assert [any(f is g for f in found) for g in gathers] == [True, False, True, False, False, False]
    # With both inputs varying only the gather of the psum is of an equal value.
    found = invariance.gathers_of_equal_values(jaxpr, [True, True])
    assert [any(f is g for f in found) for g in gathers] == [False, False, True, False, False, False]


@pytest.mark.devices(N)
@pytest.mark.parametrize("dim", [0, 1])
def test_the_stacked_value_has_the_gather_s_bits(strategy, dim):
    bits = np.array([0x80000000, 0x00000001, 0x7FC01234, 0x3F800000, 0xFF800000, 0x00400000],
                    np.uint32)   # -0.0, the smallest subnormal, a NaN with a payload, 1.0, -inf, a subnormal
    m = bits.view(np.float32).reshape(2, 3)
    jaxpr = jax.make_jaxpr(lambda v: jax.lax.all_gather(v, "replica", axis=dim),
                           axis_env=[("replica", N)])(m)

    def run(local_gathers):
        body = jax.shard_map(
            lambda v: evaluate.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, v, local_gathers=local_gathers)[0][None],
            mesh=strategy.mesh, in_specs=P(), out_specs=P("replica"), check_vma=False)
        return np.asarray(jax.jit(body)(m))

    found = invariance.gathers_of_equal_values(jaxpr.jaxpr, [False])
    assert len(found) == 1
    local, gathered = run(found), run(())
    assert local.shape == gathered.shape == (N,) + np.shape(np.stack([m] * N, axis=dim))
    assert local.view(np.uint32).tobytes() == gathered.view(np.uint32).tobytes()


def _lowered_text(monkeypatch, call):
    """The StableHLO of the program ``call`` runs (its first ``Program`` call)."""
    seen = []
    original = program_module.Program.__call__

    def spy(self, arrays, extra=()):
        seen.append((self, list(arrays), list(extra)))
        return original(self, arrays, extra)

    monkeypatch.setattr(program_module.Program, "__call__", spy)
    call()
    monkeypatch.setattr(program_module.Program, "__call__", original)
    program, arrays, extra = seen[0]
    values = [v.read_value() for v in program.variables]
    return program.jitted.lower(*arrays, *values, *extra).as_text()


@pytest.mark.devices(N)
@pytest.mark.parametrize("entry", ["run", "function"])
def test_a_first_replica_write_of_an_equal_value_communicates_nothing(strategy, monkeypatch, entry):
    with strategy.scope():
        steps = tps.Variable(0, dtype=jnp.int32, aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)
        scale = tps.Variable(2.0)
    x = tps.PerReplica([jnp.float32(r) for r in range(N)])

    def step(v):
        steps.assign_add(1)
        return v * scale

    @tps.function
    def function_step(v):
        return strategy.run(step, (v,))

    call = (lambda: strategy.run(step, (x,))) if entry == "run" else (lambda: function_step(x))
    text = _lowered_text(monkeypatch, call)
    assert "stablehlo.all_gather" not in text, text
    for _ in range(2):
        out = call()
    assert int(steps.read_value()) == 3
    assert [float(c) for c in out.values] == [2.0 * r for r in range(N)]


@pytest.mark.devices(N)
def test_a_first_replica_write_of_a_varying_value_still_takes_replica_0_s(strategy, monkeypatch):
    with strategy.scope():
        last = tps.Variable(0.0, aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)
        total = tps.Variable(0.0, aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)
    x = tps.PerReplica([jnp.float32(10 + r) for r in range(N)])

    def step(v):
        last.assign(v)                  # varies: gathered, replica 0's
        total.assign_add(last * 0.0 + 1.0)   # reads the written (equal) value: equal, not gathered

    text = _lowered_text(monkeypatch, lambda: strategy.run(step, (x,)))
    assert text.count("stablehlo.all_gather") == 1, text
    strategy.run(step, (x,))
    assert float(last.read_value()) == 10.0
    assert float(total.read_value()) == 2.0
