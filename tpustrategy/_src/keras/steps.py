"""``steps_per_execution=N``: one compiled program per N steps of Keras's own step.

Keras 3.15's JAX trainer loops in Python around its one-step program (N
dispatches). For a model under a strategy the train and test functions are
replaced by one ``jax.jit`` of N unrolled ``train_step``/``test_step`` calls
(state donated, laid out like Keras's), so a TPU-style execution is one
program: the same arithmetic, in the same order, as N single steps. A
shorter run — the end of an epoch or of ``steps_per_epoch``, or a partial
last batch whose shape differs — runs the one-step program for each of its
steps, so no step runs past the epoch. With several processes, ``predict``'s
outputs are gathered onto every device, so each process gets every prediction.
Every step function (Keras's own too) counts its programs against the library's
bound on programs in flight (``execution.dispatch``).
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import tpustrategy._src.keras.replica_steps as replica_steps
from tpustrategy._src.execution import dispatch


class Limited:
    """An iterator that stops after ``count`` items (one execution's share of an epoch)."""

    def __init__(self, iterator: Any, count: int):
        self._it, self._left = iterator, count

    def __iter__(self) -> Limited:
        return self

    def __next__(self) -> Any:
        if self._left <= 0:
            raise StopIteration
        self._left -= 1
        return next(self._it)


def _signature(batch: Any) -> Any:
    leaves, treedef = jax.tree_util.tree_flatten(batch)
    return treedef, tuple([(getattr(x, "shape", None), getattr(x, "dtype", type(x))) for x in leaves])


def _iterator_step(one: Any, many: Any, n: int) -> Any:
    def step(state: Any, iterator: Any) -> Any:
        batches = []
        for _ in range(n):
            try:
                batches.append(next(iterator))
            except StopIteration:
                break
        if not batches:
            raise StopIteration
        if len(batches) == n and len({_signature(b) for b in batches}) == 1:
            logs, state = many(state, batches)
            dispatch.track(logs)
            return logs, state
        logs = None
        for batch in batches:
            logs, state = one(state, batch)
            dispatch.track(logs)
        return logs, state

    return step


def _tracked(fn: Any) -> Any:
    """Keras's own step function, its programs counted against the library's in-flight bound.

    Keras's loops dispatch step after step without waiting; on fake CPU devices (and
    across processes over gloo) dozens of queued programs with collectives can lock
    XLA's collectives up. ``dispatch.track`` waits on the oldest beyond the bound.
    """
    def call(state: Any, iterator: Any) -> Any:
        outputs, state = fn(state, iterator)
        dispatch.track(outputs)
        return outputs, state

    return call


def _unrolled(step_fn: Any) -> Any:
    def many(state: Any, batches: list[Any]) -> Any:
        logs = None
        for batch in batches:
            logs, state = step_fn(state, batch)
        return logs, state

    return many


def _per_replica(model: Any, strategy: Any, step: Any, keras_one: Any, keras_many: Any) -> tuple[Any, Any]:
    """The one- and N-step programs running Keras's step per replica (``replica_steps``); a batch
    that does not split evenly over the replicas, or a model found not to be a mean over them
    while tracing, runs Keras's own program (``keras_one`` / ``keras_many``; for good, in the
    latter case)."""
    replicas = strategy.num_replicas_in_sync
    programs = {"one": replica_steps.program(model, strategy, step),
                "many": replica_steps.program(model, strategy, _unrolled(step))}

    def choose(kind: str, keras_program: Any) -> Any:
        def call(state: Any, data: Any) -> Any:
            per_replica = programs.get(kind)
            if per_replica is None or not replica_steps.splits_evenly(data, replicas):
                return keras_program(state, data)
            try:
                return per_replica(state, data)
            except replica_steps.NotPerReplica:
                programs.clear()   # not a mean over the replicas: Keras's programs from now on
                return keras_program(state, data)
        return call

    return choose("one", keras_one), choose("many", keras_many)


def install_functions(model: Any, strategy: Any) -> None:
    """Gives ``model`` N-step train and test programs when ``steps_per_execution > 1``."""
    if getattr(model, "_tps_steps_installed", False):
        return
    model._tps_steps_installed = True

    def n_step_maker(kind: str, state_shardings: Any) -> Any:
        """``make_{kind}_function``: Keras's own for one step per call, else one program per N steps."""
        attr = f"{kind}_function"

        def make(force: bool = False) -> Any:
            if getattr(model, attr) is not None and not force:
                return None
            n = int(model.steps_per_execution)
            compiled = not model.run_eagerly and model.jit_compile
            per_replica = compiled and kind == "train" and replica_steps.eligible(model, strategy)
            if not compiled or (n <= 1 and not per_replica):
                getattr(type(model), f"make_{attr}")(model, force=force)   # Keras's own function
                setattr(model, attr, _tracked(getattr(model, attr)))
                return None
            shardings, step = (None, state_shardings()), getattr(model, f"{kind}_step")
            one = jax.jit(step, donate_argnums=0, out_shardings=shardings)
            many = jax.jit(_unrolled(step), donate_argnums=0, out_shardings=shardings)
            if per_replica:
                one, many = _per_replica(model, strategy, step, one, many)
            setattr(model, attr, _iterator_step(one, many, n))
            return None

        return make

    def test_state_shardings() -> Any:
        trainable, non_trainable, _, metrics = model._get_state_sharding_spec()
        return trainable, non_trainable, metrics

    make_train_function = n_step_maker("train", model._get_state_sharding_spec)
    make_test_function = n_step_maker("test", test_state_shardings)

    def make_predict_function(force: bool = False) -> Any:
        if model.predict_function is not None and not force:
            return model.predict_function
        if jax.process_count() == 1 or model.run_eagerly or not model.jit_compile:
            type(model).make_predict_function(model, force=force)
            model.predict_function = _tracked(model.predict_function)
            return model.predict_function
        # Several processes: the outputs are gathered onto every device, so each process's
        # predict returns every example's prediction (no array spanning other processes' devices).
        trainable, non_trainable, _, _ = model._get_state_sharding_spec()

        def predict_step(state: Any, data: Any) -> Any:
            outputs, non_trainable_values = model.predict_step(state, data)
            return outputs, (state[0], non_trainable_values)

        replicated = NamedSharding(strategy.mesh, P())
        jitted = jax.jit(predict_step, donate_argnums=0, out_shardings=(replicated, (trainable, non_trainable)))
        model.predict_function = _tracked(model._make_function(jitted, concatenate_outputs=True))
        return model.predict_function

    model.make_train_function = make_train_function
    model.make_test_function = make_test_function
    model.make_predict_function = make_predict_function
