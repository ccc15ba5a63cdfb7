"""Replica-invariance of outputs: unknown primitives count as varying; the examples use only known ones."""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jcore

import tpustrategy as tps
from tpustrategy._src.execution import invariance, jaxpr_tools, trace

_EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _jaxpr(fn, *avals):
    return jax.make_jaxpr(fn, axis_env=[("replica", 4)])(*avals).jaxpr


def test_psum_results_are_invariant_and_axis_index_varies():
    jaxpr = _jaxpr(lambda x, w: (jax.lax.psum(x, "replica") * w, x + jax.lax.axis_index("replica")),
                   jnp.float32(0), jnp.float32(0))
    assert invariance.varying_outputs(jaxpr, [True, False]) == [False, True]


def test_an_unknown_primitive_makes_its_outputs_varying_even_from_invariant_inputs():
    mystery = jcore.Primitive("tps_test_mystery")
    mystery.def_impl(lambda x: x)
    mystery.def_abstract_eval(lambda x: x)
    jaxpr = _jaxpr(lambda w: (mystery.bind(w), w * 2), jnp.float32(0))
    assert not invariance.is_known("tps_test_mystery")
    assert invariance.varying_outputs(jaxpr, [False]) == [True, False]


def test_a_reduction_within_axis_index_groups_varies_and_one_over_the_whole_axis_does_not():
    def fn(x):
        return (jax.lax.psum(x, "replica", axis_index_groups=[[0, 1], [2, 3]]), jax.lax.psum(x, "replica"),
                jax.lax.pmax(x, "replica"))

    assert invariance.varying_outputs(_jaxpr(fn, jnp.float32(0)), [True]) == [True, False, False]


def test_a_loop_around_an_all_reduce_of_per_replica_values_is_invariant_only_when_its_carry_is():
    def fn(x, w):
        total = jax.lax.fori_loop(0, 3, lambda i, c: c + jax.lax.psum(x, "replica"), jnp.float32(0))
        mixed = jax.lax.fori_loop(0, 3, lambda i, c: c + x, w)
        return total, mixed

    assert invariance.varying_outputs(_jaxpr(fn, jnp.float32(0), jnp.float32(0)), [True, False]) == [False, True]


def test_callbacks_are_varying():
    def fn(w):
        return jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct((), jnp.float32), w)

    assert invariance.varying_outputs(_jaxpr(fn, jnp.float32(0)), [False]) == [True]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"tps_example_{name}", _EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def traced_primitives(monkeypatch):
    seen: set[str] = set()
    real = trace.trace

    def recording(fn, inputs, view, *args, **kwargs):
        traced = real(fn, inputs, view, *args, **kwargs)
        if isinstance(view, trace.ReplicaView):  # replica functions are what the analysis reads
            seen.update(jaxpr_tools.primitives_in(traced.closed.jaxpr))
        return traced

    monkeypatch.setattr(trace, "trace", recording)
    return seen


def test_every_primitive_of_the_examples_and_the_demo_is_known(traced_primitives, tmp_path):
    from tpustrategy._src.demo.main import main as demo

    _load("tf_style_loop").main(steps=2)
    _load("functional_loop").main(steps=2)
    demo(["--epochs", "1", "--global-batch", "64", "--steps-per-execution", "2",
          "--cache-dir", str(tmp_path / "digits")])
    unknown = sorted(p for p in traced_primitives if not invariance.is_known(p))
    assert unknown == [], f"primitives the invariance analysis does not know: {unknown}"
    assert {"dot_general", "psum", "axis_index"} <= traced_primitives


@pytest.mark.devices(4)
def test_a_replicated_input_updated_with_an_all_reduce_comes_back_mirrored():
    s = tps.MirroredStrategy(devices=jax.devices()[:4])
    x = tps.PerReplica([np.full(3, float(i)) for i in range(4)])

    def step(w, x):
        g = tps.get_replica_context().all_reduce("MEAN", x)
        return w - 0.1 * g, x * w

    new_w, y = s.run(step, (jnp.ones(3), x))
    assert isinstance(new_w, tps.Mirrored) and isinstance(y, tps.PerReplica)


def test_a_scan_carry_that_takes_a_per_replica_value_on_a_later_iteration_varies():
    def fn(x):
        def body(carry, _):
            a, b = carry
            return (b, x), None

        (a, b), _ = jax.lax.scan(body, (jnp.float32(0), jnp.float32(0)), None, length=3)
        return a, b

    assert invariance.varying_outputs(_jaxpr(fn, jnp.float32(0)), [True]) == [True, True]
