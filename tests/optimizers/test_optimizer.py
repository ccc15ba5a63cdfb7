"""tps.optimizers.Optimizer: state on first use, iterations, aggregation choices, minimize, errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import tpustrategy as tps


def _setup(make=lambda: tps.optimizers.Adam(0.1), n=8):
    """A strategy over up to ``n`` devices (one replica on --devices 1), two variables, an optimizer."""
    strategy = tps.MirroredStrategy(jax.devices()[:n])
    with strategy.scope():
        w = tps.Variable(np.ones((2, 2), np.float32), name="kernel")
        b = tps.Variable(np.zeros((2,), np.float32), name="bias")
        optimizer = make()
    return strategy, [w, b], optimizer


def _ones_step(variables, optimizer, **kwargs):
    def step():
        return optimizer.apply_gradients([(jnp.ones(v.shape), v) for v in variables], **kwargs)

    return step


def test_state_is_created_on_first_use_as_mirrored_variables_of_the_strategy(path):
    strategy, variables, optimizer = _setup()
    n = strategy.num_replicas_in_sync
    assert [v.name for v in optimizer.variables] == ["Adam/iteration:0"]
    strategy.run(_ones_step(variables, optimizer))
    assert [v.name for v in optimizer.variables] == [
        "Adam/iteration:0", "Adam/count:0", "Adam/mu/kernel:0", "Adam/mu/bias:0",
        "Adam/nu/kernel:0", "Adam/nu/bias:0"]
    for slot in optimizer.variables:
        assert slot.strategy is strategy and not slot.trainable
        assert slot.synchronization is tps.VariableSynchronization.ON_WRITE
        components = strategy.experimental_local_results(slot)
        assert len(components) == n and len({np.asarray(c).tobytes() for c in components}) == 1
    # mu after one step of the gradients of ones summed over n replicas: (1 - 0.9) * n
    np.testing.assert_allclose(np.asarray(optimizer.variables[2].read_value()), np.full((2, 2), 0.1 * n), rtol=1e-6)


def test_iterations_counts_updates_in_every_context():
    strategy, variables, optimizer = _setup()
    step = _ones_step(variables, optimizer)
    strategy.run(step)

    @tps.function
    def compiled():
        strategy.run(step)

    compiled()
    compiled()
    with strategy.scope():
        step()
    assert int(optimizer.iterations) == 4
    assert optimizer.iterations.aggregation is tps.VariableAggregation.ONLY_FIRST_REPLICA


@pytest.mark.parametrize("kwargs", [{"skip_gradients_aggregation": True},
                                    {"experimental_aggregate_gradients": False}])
def test_skipping_aggregation_applies_gradients_the_step_already_all_reduced(kwargs, path):
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.SGD(0.5))
    with strategy.scope():
        w_ref, reference = tps.Variable(np.ones((2, 2), np.float32)), tps.optimizers.SGD(0.5)
    n = strategy.num_replicas_in_sync
    grads = tps.PerReplica([np.full((2, 2), r + 1.0, np.float32) for r in range(n)])

    def already_reduced(g):
        g = tps.get_replica_context().all_reduce("SUM", g)
        optimizer.apply_gradients([(g, w)], **kwargs)

    strategy.run(already_reduced, args=(grads,))
    strategy.run(lambda g: reference.apply_gradients([(g, w_ref)]), args=(grads,))
    np.testing.assert_array_equal(np.asarray(w.read_value()), np.asarray(w_ref.read_value()))
    np.testing.assert_array_equal(np.asarray(w.read_value()), np.full((2, 2), 1.0 - 0.5 * n * (n + 1) / 2))


@pytest.mark.devices(2)
def test_skipping_aggregation_of_differing_gradients_raises_instead_of_diverging(path):
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.SGD(0.5))
    grads = tps.PerReplica([np.full((2, 2), float(r), np.float32) for r in range(strategy.num_replicas_in_sync)])
    with pytest.raises(ValueError, match="aggregation"):
        strategy.run(lambda g: optimizer.apply_gradients([(g, w)], skip_gradients_aggregation=True),
                     args=(grads,))


def test_gradients_may_come_in_any_order_of_the_variables():
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.SGD(1.0))
    strategy.run(lambda: optimizer.apply_gradients([(jnp.ones((2, 2)), w), (jnp.ones(2), b)]))
    strategy.run(lambda: optimizer.apply_gradients([(jnp.ones(2), b), (jnp.ones((2, 2)), w)]))
    n = strategy.num_replicas_in_sync  # two steps of ones summed over n replicas
    np.testing.assert_array_equal(np.asarray(b.read_value()), np.full(2, -2.0 * n))
    np.testing.assert_array_equal(np.asarray(w.read_value()), np.full((2, 2), 1.0 - 2.0 * n))


def test_cross_replica_updates_inside_tps_function_build_the_state_and_apply_as_given():
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.SGD(0.5, momentum=0.5))

    @tps.function
    def step(g):
        optimizer.apply_gradients([(g, b)])

    step(jnp.ones(2))
    step(jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(b.read_value()), np.full(2, -0.5 - 0.75))
    assert int(optimizer.iterations) == 2 and optimizer.variables[1].strategy is strategy


def test_a_mirrored_gradient_is_accepted_in_cross_replica_context():
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.SGD(1.0))
    g = strategy.run(lambda: tps.get_replica_context().all_reduce("SUM", jnp.ones(2)))
    n = strategy.num_replicas_in_sync
    if n == 1:  # TensorFlow's `run` gives one replica's result as a plain tensor
        assert not isinstance(g, tps.DistributedValues)
    else:
        assert isinstance(g, tps.Mirrored)
    optimizer.apply_gradients([(g, b)])
    np.testing.assert_array_equal(np.asarray(b.read_value()), np.full(2, -1.0 * n))


def test_applying_no_gradients_is_a_no_op_as_in_keras():
    strategy, variables, optimizer = _setup()
    assert optimizer.apply_gradients([]) is optimizer.iterations
    assert int(optimizer.iterations) == 0


def test_minimize_takes_the_gradient_of_a_function_of_the_values(path):
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.SGD(0.1))
    n = strategy.num_replicas_in_sync
    x = tps.PerReplica([np.full((1, 2), r + 1.0, np.float32) for r in range(n)])

    def step(x):
        optimizer.minimize(lambda values: tps.nn.compute_average_loss(
            jnp.sum(x @ values[0] + values[1], axis=-1)), [w, b])

    strategy.run(step, args=(x,))
    # d/db of mean_r sum(x_r @ w + b) = [1, 1]; d/dw = mean_r x_r^T [1, 1] = mean(1..n) = (n + 1) / 2.
    np.testing.assert_allclose(np.asarray(b.read_value()), np.full(2, -0.1), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(w.read_value()), np.full((2, 2), 1.0 - 0.1 * (n + 1) / 2), rtol=1e-6)
    assert int(optimizer.iterations) == 1


def test_minimize_accepts_a_callable_var_list_as_keras_does():
    w = tps.Variable(2.0)
    optimizer = tps.optimizers.SGD(0.25)
    optimizer.minimize(lambda values: values[0] ** 2, lambda: [w])
    assert float(w.read_value()) == 1.0


class _Anchor(optax.GradientTransformation):
    """A transformation whose state starts as a copy of the parameters."""

    def __new__(cls):
        def init(params):
            return {"anchor": [jnp.asarray(p) for p in params]}

        def update(updates, state, params=None):
            return [u + 0.0 * a for u, a in zip(updates, state["anchor"])], state

        return optax.GradientTransformation(init, update)


def test_a_state_that_depends_on_the_values_is_built_from_them():
    strategy, (w, b), optimizer = _setup(lambda: tps.optimizers.Optimizer(_Anchor()))
    w.assign(np.full((2, 2), 7.0, np.float32))
    optimizer.build([w, b])
    strategy.run(_ones_step([w, b], optimizer))
    np.testing.assert_array_equal(np.asarray(optimizer.variables[1].read_value()), np.full((2, 2), 7.0))


def test_a_value_dependent_state_first_built_inside_a_compiled_step_asks_for_build():
    strategy, variables, optimizer = _setup(lambda: tps.optimizers.Optimizer(_Anchor()))
    with pytest.raises(ValueError, match=r"(?s)depends on the variables' values.*optimizer.build\(variables\)"):
        strategy.run(_ones_step(variables, optimizer))


def test_optimizer_names_prefix_its_state():
    strategy, variables, optimizer = _setup(lambda: tps.optimizers.SGD(0.1, momentum=0.9, name="opt"))
    strategy.run(_ones_step(variables, optimizer))
    assert [v.name for v in optimizer.variables] == ["opt/iteration:0", "opt/trace/kernel:0", "opt/trace/bias:0"]
    assert optimizer.name == "opt" and isinstance(optimizer.transformation, optax.GradientTransformation)


# Errors ------------------------------------------------------------------------------------------


def test_a_transformation_that_is_not_optax_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"(?s)must be an optax.GradientTransformation.*Received: function.*Fix"):
        tps.optimizers.Optimizer(lambda g: g)


def test_reversed_pairs_are_named_as_reversed():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(TypeError, match=r"(?s)pairs are reversed.*zip\(grads, variables\)"):
        optimizer.apply_gradients([(w, jnp.ones((2, 2)))])


def test_something_other_than_pairs_is_refused():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(TypeError, match=r"element 0 of `grads_and_vars` is tps.Variable 'kernel:0'"):
        optimizer.apply_gradients([w])
    with pytest.raises(TypeError, match="must be an iterable of"):
        optimizer.apply_gradients(3)


def test_a_parameter_that_is_not_a_variable_is_refused():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(TypeError, match=r"(?s)variable 0 is a ndarray, not a tps.Variable.*Fix"):
        optimizer.apply_gradients([(jnp.ones(2), np.zeros(2))])


def test_missing_gradients_are_named_like_keras():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(ValueError, match=r"No gradients provided for any variable"):
        optimizer.apply_gradients([(None, w), (None, b)])
    with pytest.raises(ValueError, match=r"(?s)No gradients provided for variables \['bias:0'\].*zeros_like"):
        optimizer.apply_gradients([(jnp.ones((2, 2)), w), (None, b)])


def test_a_gradient_of_the_wrong_shape_names_the_variable_and_both_shapes():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(ValueError, match=r"gradient of 'bias:0' has shape \(3,\) but the variable has shape \(2,\)"):
        optimizer.apply_gradients([(jnp.ones(3), b)])


def test_per_replica_gradients_in_cross_replica_context_ask_for_run_or_reduce():
    strategy, (w, b), optimizer = _setup()
    grads = tps.PerReplica([np.ones(2, np.float32)] * 8)
    with pytest.raises(TypeError, match=r"(?s)'bias:0' is a PerReplica.*strategy.run.*strategy.reduce"):
        optimizer.apply_gradients([(grads, b)])


def test_a_different_set_of_variables_after_the_first_call_is_named():
    strategy, (w, b), optimizer = _setup()
    strategy.run(lambda: optimizer.apply_gradients([(jnp.ones((2, 2)), w)]))
    with pytest.raises(ValueError, match=r"(?s)new variables \['bias:0'\] and lacks \['kernel:0'\].*Fix"):
        strategy.run(lambda: optimizer.apply_gradients([(jnp.ones(2), b)]))


def test_the_same_variable_twice_is_refused():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(ValueError, match="'kernel:0' appears more than once"):
        optimizer.apply_gradients([(jnp.ones((2, 2)), w), (jnp.ones((2, 2)), w)])


def test_an_optimizer_made_outside_the_variables_scope_asks_to_create_it_there():
    strategy, (w, b), _ = _setup()
    optimizer = tps.optimizers.SGD()
    with pytest.raises(ValueError, match=r"(?s)created outside any strategy scope, but variable 'kernel:0'.*Fix"):
        strategy.run(lambda: optimizer.apply_gradients([(jnp.ones((2, 2)), w)]))


def test_a_sync_on_read_variable_is_refused():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        v = tps.Variable(0.0, synchronization="ON_READ", aggregation="SUM")
        optimizer = tps.optimizers.SGD()
    with pytest.raises(ValueError, match="sync-on-read variable"):
        optimizer.apply_gradients([(1.0, v)])


def test_an_integer_variable_is_refused():
    optimizer, v = tps.optimizers.SGD(), tps.Variable(3)
    with pytest.raises(TypeError, match=r"(?s)has dtype int32; optimizers update floating-point.*Fix"):
        optimizer.apply_gradients([(1.0, v)])


def test_unknown_keyword_arguments_are_refused():
    strategy, (w, b), optimizer = _setup()
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['clip'\]"):
        optimizer.apply_gradients([(jnp.ones(2), b)], clip=True)


def test_minimize_with_a_loss_of_no_arguments_explains_the_jax_form():
    optimizer, w = tps.optimizers.SGD(), tps.Variable(1.0)
    with pytest.raises(TypeError, match=r"(?s)`loss` takes no arguments.*loss\(values\)"):
        optimizer.minimize(lambda: w * w, [w])
    with pytest.raises(TypeError, match="GradientTape"):
        optimizer.minimize(lambda vs: vs[0], [w], tape=object())
    with pytest.raises(TypeError, match="must be a function of the variables' values"):
        optimizer.minimize(jnp.asarray(1.0), [w])
