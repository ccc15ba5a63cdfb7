"""A program's generated call (``specialised.compile_call``) behaves as its general call.

After its first call a cached program is called through straight-line code made for it: the
inputs' shardings checked by identity, the dispatch, the bound on programs in flight, the
written variables' new values, the results. Each case below is checked against values worked
out by hand, and the generated code's side exits are each taken once: an input whose sharding
is not the one recorded goes through the general call (and is placed there), and a call inside
a user's ``jax.jit`` (traced outputs) finishes as the general call does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import tpustrategy as tps
from tpustrategy._src.execution import program as program_module
from tpustrategy._src.execution import specialised

N = 4


@pytest.fixture
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(N)])


@pytest.fixture
def generated(monkeypatch):
    """Every program whose call is generated in the test (with the number of its general calls
    until then), and how often each program's general call runs."""
    made: list[tuple[program_module.Program, object, int]] = []
    general_calls: dict[int, int] = {}
    real = program_module.Program._specialised

    def spy(self):
        fast = real(self)
        made.append((self, fast, general_calls.get(id(self), 0)))
        return fast

    real_call = program_module.Program.__call__

    def counting(self, arrays, extra=()):
        general_calls[id(self)] = general_calls.get(id(self), 0) + 1
        return real_call(self, arrays, extra)

    monkeypatch.setattr(program_module.Program, "_specialised", spy)
    monkeypatch.setattr(program_module.Program, "__call__", counting)
    return made, general_calls


def _is_generated(fast) -> bool:
    return (fast.__doc__ or "").startswith("def call(arrays):")


@pytest.mark.devices(N)
def test_a_loop_writing_a_variable_through_the_generated_call_gets_every_step_right(strategy, generated):
    made, general_calls = generated
    with strategy.scope():
        total = tps.Variable(np.zeros(3, np.float32))
    x = tps.PerReplica([np.full(3, float(r + 1), np.float32) for r in range(N)])

    def step(x, scale):
        ctx = tps.get_replica_context()
        s = ctx.all_reduce("SUM", x * scale)
        total.assign_add(s)
        return {"sum": s, "mine": x + 1.0, "pair": (s * 2.0, ctx.replica_id_in_sync_group)}

    want_sum = np.full(3, sum(range(1, N + 1)), np.float32)
    for i in range(5):
        out = strategy.run(step, (x, 2.0))
        assert isinstance(out["sum"], tps.Mirrored) and isinstance(out["mine"], tps.PerReplica)
        np.testing.assert_allclose(np.asarray(out["sum"].values[0]), 2 * want_sum)
        np.testing.assert_allclose(np.asarray(out["pair"][0].values[-1]), 4 * want_sum)
        assert [int(v) for v in strategy.experimental_local_results(out["pair"][1])] == list(range(N))
        for r, component in enumerate(strategy.experimental_local_results(out["mine"])):
            np.testing.assert_allclose(np.asarray(component), np.full(3, r + 2.0))
        np.testing.assert_allclose(np.asarray(total.read_value()), 2 * want_sum * (i + 1))
    (program, fast, before), = made
    assert _is_generated(fast) and program.fast is fast
    assert before <= 3 and general_calls[id(program)] == before  # none once generated


@pytest.mark.devices(N)
def test_a_mirrored_result_passed_back_keeps_the_generated_call_and_its_fast_key(strategy, generated):
    made, general_calls = generated

    def step(w, x):
        return w + tps.get_replica_context().all_reduce("MEAN", x)

    x = tps.PerReplica([np.full(2, float(r), np.float32) for r in range(N)])
    w = strategy.run(lambda: jnp.zeros(2))
    for _ in range(6):
        w = strategy.run(step, (w, x))
    np.testing.assert_allclose(np.asarray(w.values[0]), np.full(2, 6 * (N - 1) / 2))
    program, _, before = next(m for m in made if _is_generated(m[1]) and len(m[0].in_split) == 2)
    assert general_calls[id(program)] == before


@pytest.mark.devices(N)
def test_an_input_on_another_equal_sharding_takes_the_general_call_once(strategy, generated):
    made, general_calls = generated

    def step(x):
        return tps.get_replica_context().all_reduce("SUM", x)

    x = tps.PerReplica([np.full(2, float(r), np.float32) for r in range(N)])
    for _ in range(3):
        strategy.run(step, (x,))
    (program, fast, before), = made
    assert _is_generated(fast) and general_calls[id(program)] == before
    # The recorded sharding replaced by an equal object: the identity check fails, the general
    # call checks equality, records the input's sharding, and the next call is generated again.
    program._seen[0] = NamedSharding(strategy.mesh, P("replica"))
    for calls in (before + 1, before + 1):
        out = strategy.run(step, (x,))
        np.testing.assert_allclose(np.asarray(out.values[0]), np.full(2, sum(range(N))))
        assert general_calls[id(program)] == calls


@pytest.mark.devices(N)
def test_inside_a_users_jax_jit_the_call_finishes_as_the_general_call(strategy, generated):
    made, _ = generated
    x = tps.PerReplica([np.full(2, float(r), np.float32) for r in range(N)])

    def step(x):
        return tps.get_replica_context().all_reduce("SUM", x)

    for _ in range(3):
        strategy.run(step, (x,))
    assert _is_generated(made[-1][1])
    traced = jax.jit(lambda: strategy.run(step, (x,)).values[0])()
    np.testing.assert_allclose(np.asarray(traced), np.full(2, sum(range(N))))

    with strategy.scope():
        v = tps.Variable(np.zeros(2, np.float32))

    def write(x):
        s = tps.get_replica_context().all_reduce("SUM", x)
        v.assign(s)
        return s

    for _ in range(3):
        strategy.run(write, (x,))
    assert _is_generated(made[-1][1])
    with pytest.raises(TypeError, match="writes variables"):
        jax.jit(lambda: strategy.run(write, (x,)).values[0])()
    np.testing.assert_allclose(np.asarray(v.read_value()), np.full(2, sum(range(N))))  # not a tracer


@pytest.mark.devices(N)
def test_a_tps_function_loop_through_the_generated_call(strategy, generated):
    made, general_calls = generated
    with strategy.scope():
        w = tps.Variable(np.ones(2, np.float32))

    @tps.function
    def train(x):
        def step(x):
            w.assign_sub(0.5 * tps.get_replica_context().all_reduce("MEAN", x))
            return w.read_value()
        return strategy.run(step, (x,))

    x = tps.PerReplica([np.full(2, float(r), np.float32) for r in range(N)])
    want = np.ones(2, np.float32)
    for _ in range(5):
        out = train(x)
        want = want - 0.5 * (N - 1) / 2
        np.testing.assert_allclose(np.asarray(out.values[0]), want)
    np.testing.assert_allclose(np.asarray(w.read_value()), want)
    generated_programs = [(p, before) for p, fast, before in made if _is_generated(fast)]
    assert generated_programs and all(general_calls[id(p)] == before for p, before in generated_programs)


def test_a_program_without_outputs_keeps_the_general_call():
    from tpustrategy._src.execution.results import ResultPlan

    plan = ResultPlan((), jax.tree_util.tree_structure(None))
    assert specialised.compile_call(
        jitted=None, num_inputs=1, seen=[None], variables=[], written=[], token=0, plan=plan,
        specs=[None], general=None, finish=None) is None
