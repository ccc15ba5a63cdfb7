"""When the ragged back end cannot compile a step: errors that name the source line, and the eager
fallback — collectives inside lax loops, and no tracer left behind in any variable afterwards."""

import inspect
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

pytestmark = pytest.mark.devices(4)  # four ragged pieces, one per replica

PIECES = [np.full((2, 3), 1.0, np.float32), np.full((2, 3), 2.0, np.float32),
          np.full((2, 3), 3.0, np.float32), np.full((1, 3), 4.0, np.float32)]


def _strategy(n=4):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


def _line_of(fn, text):
    """``file:line`` of the line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


def _only_some_reduce(x):
    ctx = tps.get_replica_context()
    total = ctx.all_reduce("SUM", jnp.sum(x))
    if x.shape[0] > 1:  # the 1-row replica skips this all-reduce: the classes disagree
        total = total + ctx.all_reduce("SUM", jnp.max(x))
    return total


def test_classes_that_disagree_in_their_collectives_raise_inside_tps_function_naming_the_source_line():
    s = _strategy()
    step = tps.function(lambda x: s.run(_only_some_reduce, (x,)))
    with pytest.raises(ValueError) as info:
        step(tps.PerReplica(PIECES))
    message = str(info.value)
    assert "no eager fallback" in message
    assert re.search(r"replicas \[0, 1, 2\] make `psum` of f32\[\] at (.*), which replica 3 never makes", message)
    assert _line_of(_only_some_reduce, "jnp.max(x)") in message


def test_classes_that_disagree_fall_back_to_the_eager_path_with_one_warning_naming_the_line():
    s = _strategy()

    def gather_rows(x):  # an all_gather of the ragged pieces themselves: TensorFlow's eager result
        return tps.get_replica_context().all_gather(x, axis=0)

    with pytest.warns(UserWarning) as record:
        out = s.run(gather_rows, (tps.PerReplica(PIECES),))
    messages = [str(w.message) for w in record if "cannot be compiled" in str(w.message)]
    assert len(messages) == 1
    assert re.search(r"at the same point \(.*\), replicas \[0, 1, 2\] make `all_gather` of f32\[2,3\], "
                     r"replica 3 makes `all_gather` of f32\[1,3\]", messages[0])
    assert _line_of(gather_rows, "all_gather(x") in messages[0]
    for part in s.experimental_local_results(out):
        np.testing.assert_array_equal(np.asarray(part), np.concatenate(PIECES))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: later calls stay quiet
        s.run(gather_rows, (tps.PerReplica(PIECES),))


def test_the_eager_path_reports_a_collective_only_some_replicas_reach():
    s = _strategy()
    with pytest.warns(UserWarning, match="collectives disagree"):
        with pytest.raises(RuntimeError, match="different number of replica_context"):
            s.run(_only_some_reduce, (tps.PerReplica(PIECES),))


def _loop_over_the_piece(x):
    """A collective inside a while loop whose body closes over the ragged piece: the loop differs per
    class, and a while loop cannot be unrolled."""
    ctx = tps.get_replica_context()

    def body(state):
        i, carry = state
        return i + 1, carry + ctx.all_reduce("SUM", jnp.sum(x, axis=0)) * (i + 1).astype(jnp.float32)

    return jax.lax.while_loop(lambda state: state[0] < 3, body, (jnp.int32(0), jnp.zeros(3, jnp.float32)))[1]


def test_a_collective_inside_a_while_loop_that_differs_per_class_runs_eagerly_and_right():
    s = _strategy()
    with pytest.warns(UserWarning, match=r"cannot be compiled.*`while`"):
        out = s.run(_loop_over_the_piece, (tps.PerReplica(PIECES),))
    want = sum(p.sum(axis=0) for p in PIECES) * 6
    for part in s.experimental_local_results(out):
        np.testing.assert_allclose(np.asarray(part), want, rtol=1e-6)


def test_the_eager_path_runs_collectives_inside_lax_loops_and_conds():
    s = _strategy()

    def step(x):
        ctx = tps.get_replica_context()
        looped = jax.lax.fori_loop(0, 2, lambda i, c: c + ctx.all_reduce("SUM", x), jnp.float32(0.0))
        scanned, _ = jax.lax.scan(lambda c, _: (c + ctx.all_reduce("MEAN", x), None), jnp.float32(0.0),
                                  None, length=3)
        chosen = jax.lax.cond(jnp.float32(1.0) > 0, lambda v: ctx.all_reduce("SUM", v * 2), lambda v: v, x)
        return looped, scanned, chosen

    tps.config.run_functions_eagerly(True)
    try:
        looped, scanned, chosen = s.run(step, (tps.PerReplica([np.float32(i) for i in range(4)]),))
    finally:
        tps.config.run_functions_eagerly(False)
    assert [float(v) for v in s.experimental_local_results(looped)] == [12.0] * 4
    assert [float(v) for v in s.experimental_local_results(scanned)] == [4.5] * 4
    assert [float(v) for v in s.experimental_local_results(chosen)] == [12.0] * 4


# Every fallback route, followed by tps.function on the same variables --------------------------------
def _make_variables(s):
    with s.scope():
        return tps.Variable(np.zeros(3, np.float32), name="w"), tps.Variable(np.float32(0.0), name="steps")


def _python_value_step(w, count):
    def step(x):
        if float(jnp.sum(x)) > 0:  # a per-replica value as a Python value: needs the eager path
            w.assign_add(tps.get_replica_context().all_reduce("SUM", jnp.sum(x, axis=0)))
        count.assign_add(1.0)
        return jnp.sum(x)

    return step


def _disagreeing_step(w, count):
    def step(x):
        ctx = tps.get_replica_context()
        w.assign_add(ctx.all_reduce("SUM", jnp.sum(x, axis=0)))
        count.assign_add(1.0)
        return ctx.all_gather(x, axis=0)  # ragged pieces: the classes' all_gathers disagree

    return step


def _loop_step(w, count):
    def step(x):
        w.assign_add(_loop_over_the_piece(x))
        count.assign_add(1.0)
        return jnp.sum(x)

    return step


def _check_tps_function_after(s, w, count, w_before, count_before):
    for v in (w, count):
        assert not isinstance(v.read_value(), jax.core.Tracer)

    @tps.function
    def bump(x):
        def replica(x):
            ctx = tps.get_replica_context()
            w.assign_add(ctx.all_reduce("MEAN", jnp.sum(x, axis=0)))
            count.assign_add(1.0)
            return jnp.sum(x)

        return s.reduce("SUM", s.run(replica, (x,)), axis=None)

    uniform = tps.PerReplica([np.ones((2, 3), np.float32) * (i + 1) for i in range(4)])
    total = bump(uniform)
    assert float(total) == pytest.approx(2 * 3 * (1 + 2 + 3 + 4))
    np.testing.assert_allclose(np.asarray(w.read_value()), w_before + 2 * 2.5, rtol=1e-6)
    assert float(count.read_value()) == pytest.approx(count_before + 1.0)
    np.testing.assert_allclose(float(bump(uniform)), float(total))  # and again, from the cache


@pytest.mark.parametrize("make_step, want_w", [
    (_python_value_step, sum(p.sum(axis=0) for p in PIECES)),
    (_disagreeing_step, sum(p.sum(axis=0) for p in PIECES)),
    (_loop_step, sum(p.sum(axis=0) for p in PIECES) * 6),
], ids=["python-value", "classes-disagree", "collective-in-loop"])
def test_every_eager_fallback_leaves_no_tracer_and_a_later_tps_function_on_the_same_variables_works(
        make_step, want_w):
    s = _strategy()
    w, count = _make_variables(s)
    with pytest.warns(UserWarning, match="cannot be compiled"):
        s.run(make_step(w, count), (tps.PerReplica(PIECES),))
    np.testing.assert_allclose(np.asarray(w.read_value()), want_w, rtol=1e-6)
    assert float(count.read_value()) == 1.0
    _check_tps_function_after(s, w, count, np.asarray(want_w), 1.0)


@pytest.mark.parametrize("make_step", [_disagreeing_step, _loop_step], ids=["classes-disagree", "collective-in-loop"])
def test_a_failed_compile_inside_tps_function_leaves_no_tracer_and_the_next_tps_function_works(make_step):
    s = _strategy()
    w, count = _make_variables(s)
    failing = tps.function(lambda x: s.run(make_step(w, count), (x,)))
    with pytest.raises(ValueError, match="no eager fallback"):
        failing(tps.PerReplica(PIECES))
    np.testing.assert_array_equal(np.asarray(w.read_value()), np.zeros(3))
    assert float(count.read_value()) == 0.0
    _check_tps_function_after(s, w, count, np.zeros(3), 0.0)


def test_a_python_value_fallback_on_equal_pieces_leaves_no_tracer_and_a_later_tps_function_works():
    s = _strategy()
    w, count = _make_variables(s)
    equal = [np.full((2, 3), float(i + 1), np.float32) for i in range(4)]
    with pytest.warns(UserWarning, match="cannot be compiled"):
        s.run(_python_value_step(w, count), (tps.PerReplica(equal),))
    want = sum(p.sum(axis=0) for p in equal)
    np.testing.assert_allclose(np.asarray(w.read_value()), want, rtol=1e-6)
    _check_tps_function_after(s, w, count, want, 1.0)


def test_a_python_value_error_inside_tps_function_leaves_no_tracer_behind():
    s = _strategy()
    w, count = _make_variables(s)
    failing = tps.function(lambda x: s.run(_python_value_step(w, count), (x,)))
    with pytest.raises(TypeError):
        failing(tps.PerReplica(PIECES))
    _check_tps_function_after(s, w, count, np.zeros(3), 0.0)


def test_a_fallback_after_the_step_created_a_variable_from_a_traced_value_raises_instead_of_using_a_placeholder():
    s = _strategy()
    slots = {}

    def step(x):
        ctx = tps.get_replica_context()
        if "m" not in slots:  # lazily built state, initialised from the step's own values
            slots["m"] = tps.Variable(ctx.all_reduce("SUM", jnp.sum(x, axis=0)), name="m")
        slots["m"].assign_add(jnp.ones(3))
        return ctx.all_gather(x, axis=0)  # the classes disagree: no compiled program computes m's value

    with pytest.raises(ValueError, match=r"created variables from traced values \(m:0\)[^\n]*\nFix: create these"):
        s.run(step, (tps.PerReplica(PIECES),))


def test_results_whose_rank_differs_per_replica_come_back_per_device_from_the_eager_path():
    s = _strategy()
    pieces = [np.arange(2.0, dtype=np.float32).reshape(2, 1) + i for i in range(3)] + [np.full((1, 1), 7.0, np.float32)]
    with pytest.warns(UserWarning, match="output 0 has different ranks"):
        out = s.run(lambda x: jnp.squeeze(x) * 2, (tps.PerReplica(pieces),))
    parts = s.experimental_local_results(out)
    assert [p.shape for p in parts] == [(2,), (2,), (2,), ()]
    assert [next(iter(p.devices())) for p in parts] == list(jax.devices()[:4])
    for got, x in zip(parts, pieces):
        np.testing.assert_array_equal(np.asarray(got), np.squeeze(x) * 2)
