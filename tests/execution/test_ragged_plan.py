"""The ragged plan: shared segments run once, class-own values reach exactly the segments that read them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.execution import eager
from tpustrategy._src.execution.ragged_plan import Plan, Unsupported, check_collectives, flatten

PIECES = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i for i in range(3)] + [np.full((1, 3), 5.0, np.float32)]


def _programs(fn, *inputs_per_class):
    return [flatten(jax.make_jaxpr(fn, axis_env=[("replica", 4)])(*inputs)) for inputs in inputs_per_class]


def _sgd(w, x):
    g = jax.lax.psum(jnp.sum(jnp.broadcast_to(w, x.shape) * x, axis=0), "replica")
    return w - 0.1 * g / 4.0


def test_the_update_after_the_all_reduce_is_one_shared_segment_and_the_batch_work_is_not():
    w = jnp.zeros(3)
    plan = Plan(_programs(_sgd, (w, PIECES[0]), (w, PIECES[3])))
    assert [seg.shared for seg in plan.segments] == [False, True]
    assert plan.segments[1].made == [] and not plan.segments[1].switch
    assert plan.cut_ops[0][0] is None  # the all-reduce's operand comes from each class's own branch
    assert plan.outs[0] is not None and plan.outs[0].key[0] == "sh"  # the result is the shared value


def test_a_value_made_before_two_collectives_skips_the_segment_between_them():
    def fn(x):
        h = jnp.cumsum(x, axis=0)  # each class's own, ragged
        a = jax.lax.psum(jnp.sum(x), "replica")
        b = jax.lax.psum(a * 2.0, "replica")  # the segment between is shared
        return h + a + b

    plan = Plan(_programs(fn, (PIECES[0],), (PIECES[3],)))
    assert [seg.shared for seg in plan.segments] == [False, True, False]
    (slot,) = plan.segments[0].made
    assert slot.shape == (2, 3) and all(key is not None for key in slot.keys)
    assert plan.segments[2].slots_in == [(0, 0)]
    assert plan.segments[1].slots_in == []


def test_classes_with_a_collective_fewer_are_refused_by_the_plan_check():
    def fn(x):
        total = jax.lax.psum(jnp.sum(x), "replica")
        return total + jax.lax.psum(jnp.max(x), "replica") if x.shape[0] > 1 else total

    with pytest.raises(Unsupported, match=r"replica 1 never makes"):
        check_collectives(_programs(fn, (PIECES[0],), (PIECES[3],)), [0, 1])


@pytest.fixture
def no_eager(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the eager path was used")

    monkeypatch.setattr(eager, "run_eagerly", refuse)


@pytest.mark.devices(4)
def test_class_own_values_crossing_shared_segments_give_numpy_results(no_eager):
    s = tps.MirroredStrategy(devices=jax.devices()[:4])

    def step(x):
        ctx = tps.get_replica_context()
        h = jnp.cumsum(x, axis=0)
        a = ctx.all_reduce("SUM", jnp.sum(x))
        b = ctx.all_reduce("SUM", a * 2.0)
        c = ctx.all_reduce("SUM", jnp.sum(h) * a)
        return h + a + b, c

    out, c = s.run(step, (tps.PerReplica(PIECES),))
    a = sum(p.sum() for p in PIECES)
    b = 4 * 2 * a
    want_c = sum(np.cumsum(p, axis=0).sum() * a for p in PIECES)
    for got, p in zip(s.experimental_local_results(out), PIECES):
        np.testing.assert_allclose(np.asarray(got), np.cumsum(p, axis=0) + a + b, rtol=1e-6)
    np.testing.assert_allclose([float(v) for v in s.experimental_local_results(c)], [want_c] * 4, rtol=1e-6)
