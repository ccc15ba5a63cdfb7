"""The execution core's JAX knowledge: fails loudly when a JAX module or name it relies on moves."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from tpustrategy._src.execution import jaxpr_tools
from tpustrategy._src.jax_shims import primitives


def _jaxpr(fn, *args):
    return jax.make_jaxpr(fn, axis_env=[("replica", 4)])(*args).jaxpr


def test_the_collectives_the_rules_name_still_exist_in_jax():
    names = primitives.parallel()
    assert jaxpr_tools.INVARIANT_RESULT <= names
    assert {"psum", "axis_index", "ppermute", "all_to_all"} <= jaxpr_tools.varying_sources() | names


def test_every_equation_naming_the_replica_axis_is_a_collective():
    def fn(x):
        return (jax.lax.psum(x, "replica"), jax.lax.pmax(x, "replica"), jax.lax.all_gather(x, "replica"),
                jax.lax.ppermute(x, "replica", [(0, 1), (1, 0)]), jax.lax.axis_index("replica"),
                jax.lax.psum_scatter(x, "replica", tiled=True),
                jax.lax.all_to_all(x.reshape(4, 1), "replica", 0, 0), jnp.sin(x))

    eqns = _jaxpr(fn, jnp.ones(4)).eqns
    collective = {e.primitive.name for e in eqns if jaxpr_tools.is_collective(e)}
    assert {"psum", "pmax", "all_gather", "ppermute", "axis_index", "reduce_scatter", "all_to_all"} <= collective
    assert "sin" not in collective


def test_an_unknown_primitive_with_an_axis_parameter_counts_as_a_collective():
    async_start = jcore.Primitive("tps_test_psum_start")  # like JAX's async *_start / *_done pairs
    async_start.def_abstract_eval(lambda x, *, axes: x)
    eqn = _jaxpr(lambda x: async_start.bind(x, axes=("replica",)), jnp.ones(2)).eqns[0]
    assert jaxpr_tools.is_collective(eqn)


def test_a_jitted_function_called_replica_is_not_a_collective_but_contains_one_when_its_body_does():
    def replica(x):
        return x * 2

    plain = _jaxpr(jax.jit(replica), jnp.ones(2)).eqns[0]
    assert not jaxpr_tools.contains_collective(plain)
    looped = _jaxpr(lambda x: jax.lax.fori_loop(0, 2, lambda i, c: jax.lax.psum(c, "replica"), x), jnp.ones(2))
    assert jaxpr_tools.contains_collective(looped.eqns[0]) and not jaxpr_tools.is_collective(looped.eqns[0])


def test_every_kind_of_call_is_in_the_call_table_with_its_body():
    @jax.custom_jvp
    def with_jvp(x):
        return jax.lax.psum(x, "replica")

    with_jvp.defjvp(lambda p, t: (with_jvp(p[0]), t[0]))

    @jax.custom_vjp
    def with_vjp(x):
        return jax.lax.psum(x, "replica")

    with_vjp.defvjp(lambda x: (with_vjp(x), None), lambda _, g: (g,))

    def fn(x):
        return (jax.jit(lambda v: jax.lax.psum(v, "replica"))(x), with_jvp(x), with_vjp(x),
                jax.checkpoint(lambda v: jax.lax.psum(v, "replica"))(x))

    for eqn in _jaxpr(fn, jnp.ones(2)).eqns:
        assert eqn.primitive.name in jaxpr_tools.CALLS, eqn.primitive.name
        body, _ = jaxpr_tools.called(eqn)
        assert [e.primitive.name for e in body.eqns] == ["psum"]


def test_walk_visits_nested_jaxprs_and_bind_evaluates_an_equation():
    jaxpr = _jaxpr(lambda x: jax.lax.cond(x[0] > 0, jnp.sin, jnp.cos, x), jnp.ones(2))
    assert {"cond", "sin", "cos", "gt"} <= jaxpr_tools.primitives_in(jaxpr)
    sin = next(e for e in jaxpr_tools.walk(jaxpr) if e.primitive.name == "sin")
    assert float(jaxpr_tools.bind(sin, [jnp.float32(0.5)])[0]) == float(jnp.sin(jnp.float32(0.5)))
    assert float(jaxpr_tools.bind(sin, [jnp.float32(0.5)], keep_context=False)[0]) == float(jnp.sin(0.5))


def test_source_line_names_the_users_line():
    eqn = _jaxpr(lambda x: jax.lax.psum(x, "replica"), jnp.ones(2)).eqns[0]
    line = inspect.currentframe().f_lineno - 1
    assert jaxpr_tools.source_line(eqn).startswith(f"{__file__}:{line} ")
    assert jaxpr_tools.describe(eqn).startswith("`psum` of f32[2] at ")


def test_params_key_ignores_derivative_rules_and_tells_different_bodies_apart():
    relu_a = _jaxpr(lambda x: jax.nn.relu(x) + 1, jnp.ones(2)).eqns[0]
    relu_b = _jaxpr(lambda x: jax.nn.relu(x) * 3, jnp.ones(2)).eqns[0]
    other = _jaxpr(jax.jit(lambda x: x - 1), jnp.ones(2)).eqns[0]
    assert jaxpr_tools.params_key(relu_a) == jaxpr_tools.params_key(relu_b)
    assert jaxpr_tools.params_key(relu_a) != jaxpr_tools.params_key(other)


def test_both_halves_of_an_async_collective_are_collectives():
    from jax._src.lax import parallel  # JAX's async collectives have no public name yet

    # Traced in a shard_map, where the operand varies over the axis: JAX 0.11+ makes an async
    # all-reduce only of a varying value (its start half is then named psum_invariant_start).
    mesh = jax.sharding.Mesh(jax.devices()[:1], ("replica",))
    inner = jax.shard_map(lambda x: parallel.psum_start(x, "replica").done(), mesh=mesh,
                          in_specs=jax.sharding.PartitionSpec("replica"),
                          out_specs=jax.sharding.PartitionSpec())
    (outer,) = jax.make_jaxpr(inner)(jnp.ones(2)).eqns
    eqns = jaxpr_tools.subjaxprs(outer.params)[0].eqns
    names = [e.primitive.name for e in eqns]
    assert len(names) == 2 and names[0].startswith("psum") and names[0].endswith("_start"), names
    assert names[1] == "psum_done"
    assert all(jaxpr_tools.is_collective(e) for e in eqns)
    assert "axes" not in eqns[1].params  # the done half names no axis: the module rule finds it


def test_a_static_length_loop_unrolls_into_one_collective_per_iteration_with_the_same_results():
    def fn(x):
        return jax.lax.fori_loop(0, 3, lambda i, c: c + jax.lax.psum(c, "replica") * i, x)

    closed = jax.make_jaxpr(fn, axis_env=[("replica", 4)])(jnp.ones(2))
    (loop,) = closed.jaxpr.eqns
    body, consts = jaxpr_tools.unrolled(loop, 4)
    assert [e.primitive.name for e in body.eqns].count("psum") == 3
    assert not any(e.primitive.name == "scan" for e in body.eqns)
    assert jaxpr_tools.unrolled(loop, 4, max_length=2) is None  # too long: kept as one step
    while_loop = _jaxpr(lambda x: jax.lax.while_loop(lambda c: c[0] < 3, lambda c: c, x), jnp.ones(2)).eqns[0]
    assert jaxpr_tools.unrolled(while_loop, 4) is None
    # Same values when every replica holds the same x (psum then multiplies by the replica count).
    def run_one(x):  # the loop's operands: the counter's start (a literal) and x
        args = [a.val if jaxpr_tools.is_literal(a) else x for a in loop.invars]
        return jax.core.eval_jaxpr(body, consts, *args)[-1]

    run = jax.vmap(run_one, axis_name="replica")
    want = jax.vmap(fn, axis_name="replica")
    x = jnp.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(np.asarray(run(x)), np.asarray(want(x)))
