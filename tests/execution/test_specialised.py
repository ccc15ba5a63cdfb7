"""Straight-line code for one structure agrees with the generic walks it stands for.

A key's compiled guard (``leaves.compile_guard``) passes exactly the calls whose key is that
key: for every pair of argument structures below, the guard of one passes the other exactly
when their keys are equal (``leaves.call_key``), and then returns the very dynamic inputs
``call_key`` collects, in its order. A result plan's generated rendering
(``results.ResultPlan.compile``) makes the tree its loop rendering and ``tree_unflatten`` make,
with new containers every call, and each kind of leaf as the plan says.
"""

from __future__ import annotations

import collections
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.execution import leaves
from tpustrategy._src.execution.outputs import Kind, OutKind
from tpustrategy._src.execution.program import Placement
from tpustrategy._src.execution.results import ResultPlan, ResultStep
from tpustrategy._src.values.leaf import LeafKind

Pair = collections.namedtuple("Pair", "a b")
Other = collections.namedtuple("Other", "a b")


@pytest.fixture(scope="module")
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])


def _calls(strategy):
    """Argument tuples differing from the first (and from each other) in one thing each."""
    f32 = jnp.zeros((2, 3), jnp.float32)
    # Program results: stacked per-replica values and replicated ones (host-built values have no
    # fast key until a call stacks them).
    pr = strategy.run(lambda: jnp.full((2,), 1.0) * tps.get_replica_context().replica_id_in_sync_group)
    pr_other_shape = strategy.run(lambda: jnp.full((3,), 1.0) * tps.get_replica_context().replica_id_in_sync_group)
    mirrored = strategy.run(lambda: jnp.ones(3))
    mirrored_int = strategy.run(lambda: jnp.ones(3, jnp.int32))
    return {
        "base": ([f32, (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "other array shape": ([jnp.zeros((3, 3)), (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "other array dtype": ([f32.astype(jnp.int32), (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "weak-typed array": ([jnp.full((2, 3), 1.0), (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "tuple for list": ((f32, (f32, f32)), {"lr": 0.1, "x": pr}, 3, None),
        "shorter inner": ([f32, (f32,)], {"lr": 0.1, "x": pr}, 3, None),
        "other scalar value": ([f32, (f32, f32)], {"lr": 0.2, "x": pr}, 3, None),
        "int for float": ([f32, (f32, f32)], {"lr": 1, "x": pr}, 3, None),
        "bool for int": ([f32, (f32, f32)], {"lr": 0.1, "x": pr}, True, None),
        "str for None": ([f32, (f32, f32)], {"lr": 0.1, "x": pr}, 3, "none"),
        "other dict keys": ([f32, (f32, f32)], {"lr": 0.1, "y": pr}, 3, None),
        "extra dict key": ([f32, (f32, f32)], {"lr": 0.1, "x": pr, "z": 1}, 3, None),
        "other per-replica shape": ([f32, (f32, f32)], {"lr": 0.1, "x": pr_other_shape}, 3, None),
        "mirrored for per-replica": ([f32, (f32, f32)], {"lr": 0.1, "x": mirrored}, 3, None),
        "namedtuple": ([f32, Pair(f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "other namedtuple": ([f32, Other(f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "numpy": ([np.zeros((2, 3), np.float32), (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "mirrored": ([mirrored, (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "mirrored int": ([mirrored_int, (f32, f32)], {"lr": 0.1, "x": pr}, 3, None),
        "one fewer argument": ([f32, (f32, f32)], {"lr": 0.1, "x": pr}, 3),
        "new objects, same key": ([jnp.ones((2, 3)), (jnp.ones((2, 3)), f32)], {"lr": 0.1, "x": pr}, 3, None),
    }


@pytest.mark.devices(4)
def test_a_guard_passes_exactly_the_calls_with_its_key_and_returns_their_inputs(strategy):
    split = Placement.of(strategy).split
    calls = _calls(strategy)
    keys = {name: leaves.call_key(args, {}, split) for name, args in calls.items()}
    assert [name for name, k in keys.items() if k is None] == []
    distinct = {k[0] for k in keys.values()}
    assert len(distinct) == len(calls) - 1  # every case is its own key but "new objects, same key"
    for name_a, (name_b, args_b) in itertools.product(calls, calls.items()):
        guard = leaves.compile_guard(keys[name_a][0])
        assert guard is not None, name_a
        got = guard(args_b, split)
        if keys[name_a][0] == keys[name_b][0]:
            want = keys[name_b][1]
            assert got is not None and len(got) == len(want), (name_a, name_b)
            assert all(x is y for x, y in zip(got, want)), (name_a, name_b)
        else:
            assert got is None, (name_a, name_b)


def test_a_key_with_an_entry_it_does_not_know_has_no_guard():
    assert leaves.compile_guard((1, ("not a kind", 3))) is None
    assert leaves.compile_guard((2, (LeafKind.STATIC, int, 1))) is None  # fewer entries than arguments


@pytest.mark.devices(4)
def test_a_loop_passing_its_state_back_takes_the_guard_and_a_changed_structure_does_not(strategy):
    # Functional state through strategy.run: the second call on is checked by the guard; a call
    # whose structure changes (a dict gains a key) is looked up again and gets its own program.
    n = strategy.num_replicas_in_sync
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(n)])

    def step(state, x):
        total = tps.get_replica_context().all_reduce("SUM", x)
        return {k: v + total for k, v in state.items()}

    state = {"a": jnp.zeros(2)}
    runner = strategy._runner  # noqa: SLF001 - the cache under test
    for _ in range(4):
        state = strategy.run(step, (state, x))
    assert runner._fast.last_hit is not None and runner._fast.last_hit[0] is step  # noqa: SLF001
    want = 4 * sum(range(n))
    np.testing.assert_allclose(np.asarray(state["a"].values[0]), [want, want])
    state = dict(state, b=jnp.ones(2))  # another structure: not the guarded key
    state = strategy.run(step, (state, x))
    np.testing.assert_allclose(np.asarray(state["b"].values[0]), [1 + sum(range(n))] * 2)
    np.testing.assert_allclose(np.asarray(state["a"].values[0]), [want + sum(range(n))] * 2)
    assert sorted(state) == ["a", "b"]


# Result builders -------------------------------------------------------------------------------
Empty = collections.namedtuple("Empty", "")


def _plain_plan(treedef):
    return ResultPlan(tuple(ResultStep(LeafKind.ARRAY, i) for i in range(treedef.num_leaves)), treedef)


@pytest.mark.parametrize("tree", [
    [(1, 2), (3, 4)],
    ((1, (2,)), {"b": 3, "a": [4, None]}, 5),
    {"opt": (Empty(), Empty()), "params": Pair(1, 2)},
    7,
    (None, [], (), Empty(), {"x": []}),
])
def test_a_builder_makes_the_tree_unflatten_would(tree):

    leaves_, treedef = jax.tree_util.tree_flatten(tree)
    plan = _plain_plan(treedef)
    build = plan.compile()
    assert build is not None
    outs = [f"leaf{i}" for i in range(len(leaves_))]
    first, second = build(outs, None), build(outs, None)
    want = jax.tree_util.tree_unflatten(treedef, outs)
    assert first == want and type(first) is type(want) and plan.build(outs, []) == want
    assert jax.tree_util.tree_structure(first) == treedef
    # Containers that could be changed are new every call; leafless tuples may be shared.
    for a, b in zip(jax.tree_util.tree_leaves(first, is_leaf=lambda x: isinstance(x, (list, dict))),
                    jax.tree_util.tree_leaves(second, is_leaf=lambda x: isinstance(x, (list, dict)))):
        if isinstance(a, (list, dict)):
            assert a is not b


@pytest.mark.devices(4)
@pytest.mark.parametrize("rendering", ["generated", "loop"])
def test_a_plan_makes_each_kind_of_leaf_in_both_renderings(strategy, rendering):
    n = strategy.num_replicas_in_sync
    mirrored_array = strategy.run(lambda: jnp.arange(3.0))
    mirrored_array = mirrored_array.replicated_array if n > 1 else mirrored_array
    stacked_array = jnp.zeros((n, 2))
    spec = tps.Mirrored.spec_of(mirrored_array, n)
    kinds = [OutKind(Kind.MIRRORED, num_replicas=n), OutKind(Kind.VARYING),
             OutKind(Kind.STATIC, value="static"), OutKind(Kind.STATIC_PER_REPLICA, value=(1, 2)),
             OutKind(Kind.ARRAY)]
    treedef = jax.tree_util.tree_structure((0, 0, 0, 0, 0))
    plan = ResultPlan.of(kinds, treedef, n)
    assert [s.kind for s in plan.steps] == [
        LeafKind.MIRRORED, LeafKind.PER_REPLICA if n > 1 else LeafKind.ARRAY, LeafKind.STATIC,
        LeafKind.STATIC_PER_REPLICA, LeafKind.ARRAY]
    build = plan.compile() if rendering == "generated" else plan.build
    m, v, s, spr, p = build([mirrored_array, stacked_array, 5], [spec, None, None])
    assert type(m) is tps.Mirrored and m.replicated_array is mirrored_array and m.leaf(None)[0] is spec
    if n > 1:
        assert type(v) is tps.PerReplica and v.num_replicas == n and v.shapes == ((2,),) * n
    else:  # TensorFlow: one replica's varying result comes back as it is
        assert v is stacked_array
    assert s == "static" and p == 5
    assert type(spr) is tps.PerReplica and list(spr.values) == [1, 2]


def test_a_custom_node_has_no_generated_builder_and_the_loop_makes_it():

    tree = jax.tree_util.Partial(lambda a: a, 1)  # a custom pytree node
    leaves_, treedef = jax.tree_util.tree_flatten(tree)
    plan = _plain_plan(treedef)
    assert plan.compile() is None
    assert plan.build([7] * len(leaves_), []).args == (7,)
