"""Errors raised through strategy.run / tps.function: library frames left out, arguments named by path."""

from __future__ import annotations

import os
import traceback

import jax.numpy as jnp
import pytest

import tpustrategy as tps

pytestmark = pytest.mark.devices(2)  # the strategy names /cpu:0 and /cpu:1

SRC = os.path.join(os.path.dirname(tps.__file__), "_src")


def _frames(excinfo):
    return [f.filename for f in traceback.extract_tb(excinfo.value.__traceback__)]


@pytest.fixture
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(2)])


def _users_bug(x):
    return x / {}["missing"]  # KeyError on the user's line


def test_an_error_in_a_replica_function_shows_the_users_frames_not_the_librarys(strategy):
    x = tps.PerReplica([jnp.ones(2), jnp.ones(2)])
    with pytest.raises(KeyError) as excinfo:
        strategy.run(_users_bug, (x,))
    frames = _frames(excinfo)
    assert frames[-1] == __file__  # the user's line is the last one
    library = [f for f in frames if f.startswith(SRC) and not f.endswith("tracebacks.py")]
    assert library == [], library


def test_an_error_in_a_tps_function_shows_the_users_frames_not_the_librarys(strategy):
    @tps.function
    def f(x):
        return strategy.run(_users_bug, (x,))

    with pytest.raises(KeyError) as excinfo:
        f(tps.PerReplica([jnp.ones(2), jnp.ones(2)]))
    frames = _frames(excinfo)
    assert frames[-1] == __file__
    assert [f for f in frames if f.startswith(SRC) and not f.endswith("tracebacks.py")] == []


def test_filtering_off_keeps_every_frame(strategy, monkeypatch):
    monkeypatch.setenv("JAX_TRACEBACK_FILTERING", "off")
    with pytest.raises(KeyError) as excinfo:
        strategy.run(_users_bug, (tps.PerReplica([jnp.ones(2), jnp.ones(2)]),))
    assert any(f.startswith(SRC) for f in _frames(excinfo))


def test_a_per_replica_argument_of_the_wrong_count_is_named_by_its_path(strategy):
    wrong = tps.PerReplica([jnp.ones(2)] * 3)
    with pytest.raises(ValueError, match=r"the PerReplica argument args\[1\]\['x'\] has 3 components, "
                                         r"but the strategy has 2 replicas"):
        strategy.run(lambda a, b: a, (jnp.ones(2), {"x": wrong}))
    with pytest.raises(ValueError, match=r"argument kwargs\['y'\] has 3 components"):
        strategy.run(lambda y: y, kwargs={"y": wrong})
