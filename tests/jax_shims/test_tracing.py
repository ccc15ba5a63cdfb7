"""The tracing shim: the JAX internals ``tps.GradientTape`` reads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from tpustrategy._src.jax_shims import tracing


def test_the_jax_internals_the_tape_uses_are_there():
    tracing.check()  # fails loudly, naming the internal, when a JAX release moves one


def test_check_names_a_missing_internal(monkeypatch):
    monkeypatch.delattr(tracing.partial_eval, "TracingEqn")
    with pytest.raises(ImportError, match="partial_eval.TracingEqn"):
        tracing.check()


def test_a_trace_records_its_equations_where_the_tape_reads_them():
    def f(x):
        trace = tracing.core.trace_ctx.trace
        assert isinstance(trace, tracing.partial_eval.DynamicJaxprTrace)
        before = len(trace.frame.tracing_eqns)
        y = jnp.sin(x)
        assert len(trace.frame.tracing_eqns) == before + 1
        assert isinstance(y, tracing.partial_eval.DynamicJaxprTracer)
        return y

    jax.make_jaxpr(f)(1.0)
