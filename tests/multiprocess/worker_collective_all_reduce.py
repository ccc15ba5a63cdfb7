"""Worker of test_collective_all_reduce_port.py: TensorFlow's CollectiveAllReduceStrategy tests.

TensorFlow's ``collective_all_reduce_strategy_test.py`` runs its cases on in-process
clusters of 3 workers (graph mode) and on one worker with 2 GPUs; the cases with a
meaning on JAX — replica count, cluster resolver, minimising a loss with ``reduce_to`` and
``extended.update``, variable initialisation agreed across workers, a dataset function
read per worker with its input context, and ``strategy_test_lib``'s all-reduce sum / mean
with their gradients (tape, eager and inside ``tps.function``) — run here on a job of
``W`` processes x ``L`` devices. Expected values are TensorFlow's, written for ``R = W * L``
replicas (TensorFlow's literal numbers when ``R == 2``).

Prints one line ``RESULT <json>``: ``{case: "ok" | "<Error>: <message>"}``.
"""

from __future__ import annotations

import tpustrategy as tps
from tests.multiprocess.case_runner import run_and_report

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10, collective_timeout=30)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

strategy = tps.MultiWorkerMirroredStrategy()
PID = jax.process_index()
W = jax.process_count()
L = len(jax.local_devices())
R = strategy.num_replicas_in_sync
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def local(value):
    return [np.asarray(v) for v in strategy.experimental_local_results(value)]


@case
def test_num_replicas_in_sync():
    assert R == W * L, (R, W, L)


@case
def test_cluster_resolver_task():
    resolver = strategy.cluster_resolver
    assert resolver is not None
    assert resolver.task_type in ("chief", "worker"), resolver.task_type
    assert resolver.task_id == PID, resolver.task_id


@case
def test_minimize_loss_with_reduce_to_and_update():
    with strategy.scope():
        # Keras's GlorotUniform for (1, 1) draws from U(-sqrt(3), sqrt(3)); a fixed draw.
        kernel = tps.Variable(jnp.full((1, 1), -0.8), name="kernel")
    one = jnp.asarray([[1.0]])

    def grad_fn(x):
        with tps.GradientTape() as tape:
            y = jnp.reshape(x @ kernel, []) - 1.0
            loss = y * y
        return tape.gradient(loss, kernel)

    def update(v, g):
        return v.assign_sub(0.05 * g)

    before = after = None
    for i in range(10):
        fetched = float(np.asarray(kernel.numpy()).reshape(()))
        if i == 0:
            before = fetched
        g = strategy.run(grad_fn, args=(one,))
        g = strategy.extended.reduce_to(tps.ReduceOp.SUM, g, destinations=kernel)
        strategy.extended.update(kernel, update, args=(g,), group=False)
        after = float(np.asarray(kernel.numpy()).reshape(()))
    assert abs(after - 1) < abs(before - 1), (before, after)
    # Every replica's gradient is 2(x k - 1) and R of them are summed: the same exact value on
    # every replica and process.
    expected = -0.8
    for _ in range(10):
        expected -= 0.05 * R * 2 * (expected - 1)
    np.testing.assert_allclose(after, expected, rtol=1e-5)
    for component in local(kernel):
        np.testing.assert_allclose(component.reshape(()), expected, rtol=1e-5)


@case
def test_variable_initialization_is_agreed_across_workers():
    seed = 1000 + PID  # each worker draws another initial value, as TF's random initializer would
    with strategy.scope():
        def model_fn():
            init = np.random.default_rng(seed).uniform(1.0, 10.0, size=(2, 3)).astype(np.float32)
            x = tps.Variable(init, name="x")
            return x.read_value()

        x = strategy.run(model_fn)
    reduced = np.asarray(strategy.reduce(tps.ReduceOp.MEAN, x, axis=None))
    first = local(x)[0]
    np.testing.assert_allclose(first, reduced, atol=1e-5)


@case
def test_dataset_function_sees_its_input_context_and_reads_every_element():
    def input_fn(ctx):
        assert ctx is not None
        assert ctx.num_replicas_in_sync == R, ctx.num_replicas_in_sync
        assert ctx.num_input_pipelines == W, ctx.num_input_pipelines
        assert ctx.input_pipeline_id == PID, ctx.input_pipeline_id
        return tpsd.Dataset.range(20)

    dist = strategy.distribute_datasets_from_function(input_fn)
    expected_values = [[i + j for j in range(L)] for i in range(0, 20, L)]
    for _ in range(2):  # a second iterator starts again ("reinitialize")
        iterator = iter(dist)
        for expected in expected_values:
            got = [int(v) for v in local(next(iterator))]
            assert got == expected, (got, expected)
        try:
            next(iterator)
        except tps.errors.OutOfRangeError:
            pass
        else:
            raise AssertionError("expected OutOfRangeError after the last element")


def _sliced(inputs):
    """One element per replica: replica r (of this pipeline's L) gets element r of its shard."""
    def dataset_fn(ctx):
        return tpsd.Dataset.from_tensor_slices(inputs).shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
    return next(iter(strategy.distribute_datasets_from_function(dataset_fn)))


def _all_sum(value):
    return tps.get_replica_context().all_reduce(tps.ReduceOp.SUM, value)


def _all_mean(value):
    return tps.get_replica_context().all_reduce(tps.ReduceOp.MEAN, value)


def _maybe_in_function(fn, in_function):
    if not in_function:
        return lambda *a: strategy.run(fn, args=a)
    return tps.function(lambda *a: strategy.run(fn, args=a))


# R replicas get the elements 1, 3, 5, ... (TF's [1., 3.] when R == 2) and matching vectors.
FIRST = [1.0 + 2 * r for r in range(R)]
SECOND = [[39.0 + 3 * r, 2.0 + 39 * r] for r in range(R)]


def _collective(comm_fn, expected, in_function):
    out = _maybe_in_function(comm_fn, in_function)(_sliced((np.asarray(FIRST), np.asarray(SECOND))))
    for component in local(out[0]):
        np.testing.assert_allclose(component, expected[0])
    for component in local(out[1]):
        np.testing.assert_allclose(component, expected[1])


def _gradient_tape(comm_fn, expected_grad, in_function):
    def step(c):
        x = jnp.asarray(42.0)
        with tps.GradientTape() as tape:
            tape.watch(x)
            y = comm_fn(x) * c
        return tape.gradient(y, x)

    out = _maybe_in_function(step, in_function)(_sliced(np.asarray(FIRST)))
    for component in local(out):
        np.testing.assert_allclose(component, expected_grad)


def _grads(comm_fn, expected_grad, in_function):
    def step(c):
        return jax.grad(lambda x: comm_fn(x) * c)(jnp.asarray(42.0))

    out = _maybe_in_function(step, in_function)(_sliced(np.asarray(FIRST)))
    for component in local(out):
        np.testing.assert_allclose(component, expected_grad)


SUM = (sum(FIRST), np.sum(SECOND, axis=0))
MEAN = (sum(FIRST) / R, np.mean(SECOND, axis=0))
for _mode in ("eager", "tf_function"):
    _in_fn = _mode == "tf_function"
    CASES[f"test_all_reduce_sum_{_mode}"] = lambda f=_in_fn: _collective(_all_sum, SUM, f)
    CASES[f"test_all_reduce_mean_{_mode}"] = lambda f=_in_fn: _collective(_all_mean, MEAN, f)
    CASES[f"test_all_reduce_sum_gradient_tape_{_mode}"] = lambda f=_in_fn: _gradient_tape(_all_sum, sum(FIRST), f)
    CASES[f"test_all_reduce_mean_gradient_tape_{_mode}"] = lambda f=_in_fn: _gradient_tape(_all_mean, sum(FIRST) / R, f)
    CASES[f"test_all_reduce_sum_gradients_{_mode}"] = lambda f=_in_fn: _grads(_all_sum, sum(FIRST), f)
    CASES[f"test_all_reduce_mean_gradients_{_mode}"] = lambda f=_in_fn: _grads(_all_mean, sum(FIRST) / R, f)


run_and_report(CASES)
