"""The primitives shim: the JAX modules whose primitives the invariance rules classify."""

from __future__ import annotations

import importlib

import pytest
from jax.extend import core as jcore

from tpustrategy._src.jax_shims import primitives


def test_every_module_still_imports_and_defines_primitives():
    primitives.check()  # a moved module fails here, by name
    for name in (*primitives.PURE_MODULES, primitives.PARALLEL_MODULE):
        module = importlib.import_module(name)
        assert primitives.defined_in(name) == {v.name for v in vars(module).values()
                                               if isinstance(v, jcore.Primitive)}


def test_the_tables_hold_what_the_rules_expect():
    assert {"add", "sin", "dot_general", "scan", "cond", "while"} <= primitives.pure()
    assert {"psum", "all_gather", "ppermute", "axis_index"} <= primitives.parallel()
    assert not primitives.pure() & {"psum", "axis_index"}


def test_a_moved_module_gives_none_and_check_names_it(monkeypatch):
    monkeypatch.setattr(primitives, "PURE_MODULES", (*primitives.PURE_MODULES, "jax._src.no_such_module"))
    assert primitives.defined_in("jax._src.no_such_module") is None
    with pytest.raises(RuntimeError, match="jax._src.no_such_module"):
        primitives.check()
