"""``map(num_parallel_calls=AUTOTUNE)`` on threads: the trial of the worker threads against mapping
in the consumer's own thread (`parallel_map._Tuner`).

The trial's windows and margins are set so that its outcome does not depend on timing: a window
of 0 s ends at the next chunk; a margin of 0 makes the consumer's thread win, an infinite one
the threads. What is checked is what the trial must never change -- the elements, their order,
errors in their place, checkpoints -- and that the choice is taken, kept and remembered.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.transformations import parallel_map

Dataset = tpsd.Dataset
pytestmark = pytest.mark.timeout(120)
N = 6000


def tagged(x):
    """The element and the thread that mapped it (a few µs of Python: chunks of a few hundred)."""
    sum(range(100))
    return x, np.int64(threading.get_ident())


def failing_at_4000(x):
    if int(x) == 4000:
        raise ValueError("element 4000 failed")
    return tagged(x)


def options():
    opts = tpsd.Options()
    opts.threading.experimental_worker_processes = False  # threads on any machine
    opts.autotune.cpu_budget = 3  # AUTOTUNE -> 3 worker threads
    return opts


def dataset(fn=tagged):
    return Dataset.range(N).map(fn, num_parallel_calls=tpsd.AUTOTUNE).with_options(options())


@pytest.fixture
def trial(monkeypatch):
    """Sets the trial's outcome: trial("inline") or trial("threads"); no choice is remembered before."""
    monkeypatch.setattr(parallel_map, "_CHOICES", type(parallel_map._CHOICES)())
    monkeypatch.setattr(parallel_map, "TUNE_WINDOW_S", 0.0)
    monkeypatch.setattr(parallel_map, "TUNE_WAIT_SHARE", 0.0)

    def choose(winner):
        monkeypatch.setattr(parallel_map, "TUNE_INLINE_MARGIN", 0.0 if winner == "inline" else float("inf"))

    return choose


def run(it):
    values, threads = [], []
    for x, t in it:
        values.append(int(x))
        threads.append(int(t))
    return values, threads


def test_the_consumers_thread_wins_after_the_threads_were_measured_and_is_remembered(trial):
    trial("inline")
    main = threading.get_ident()
    values, threads = run(iter(dataset()))
    assert values == list(range(N))
    assert threads[0] != main  # the trial starts on the worker threads
    assert threads[-1] == main  # and ends in the consumer's thread
    assert parallel_map._CHOICES[tagged.__code__] is True
    # The next iterator, even over a dataset built again, starts where the trial ended.
    values, threads = run(iter(dataset()))
    assert values == list(range(N)) and set(threads) == {main}


def test_the_threads_win_and_map_again_after_the_trial(trial):
    trial("threads")
    main = threading.get_ident()
    values, threads = run(iter(dataset()))
    assert values == list(range(N))
    assert threads[-1] != main
    assert parallel_map._CHOICES[tagged.__code__] is False
    values, threads = run(iter(dataset()))
    assert values == list(range(N)) and main not in threads


def test_no_choice_while_the_consumer_sets_the_pace(trial, monkeypatch):
    trial("inline")
    monkeypatch.setattr(parallel_map, "TUNE_WAIT_SHARE", 2.0)  # the consumer never waits that long
    main = threading.get_ident()
    values, threads = run(iter(dataset()))
    assert values == list(range(N)) and main not in threads
    assert tagged.__code__ not in parallel_map._CHOICES


@pytest.mark.parametrize("winner", ["inline", "threads"])
@pytest.mark.parametrize("stop", [1, 3, 700, 5000])  # in the warm chunk, the trial, after the choice
def test_checkpoints_restore_exactly_at_any_phase(trial, winner, stop):
    trial(winner)
    ds = dataset()
    it = iter(ds)
    head = [int(next(it)[0]) for _ in range(stop)]
    state = it.get_state()
    rest_here = [int(x) for x, _ in it]
    fresh = iter(dataset())
    fresh.set_state(state)
    rest_there = [int(x) for x, _ in fresh]
    assert head == list(range(stop))
    assert rest_here == rest_there == list(range(stop, N))


@pytest.mark.parametrize("winner", ["inline", "threads"])
def test_an_element_error_comes_in_its_place_on_either_side(trial, winner):
    trial(winner)
    it = iter(Dataset.range(N).map(failing_at_4000, num_parallel_calls=tpsd.AUTOTUNE).with_options(options()))
    got = [int(next(it)[0]) for _ in range(4000)]
    assert got == list(range(4000))
    with pytest.raises(ValueError, match="element 4000 failed"):
        next(it)
    it.close()
    kept = Dataset.range(N).map(failing_at_4000, num_parallel_calls=tpsd.AUTOTUNE).ignore_errors()
    values = [int(x) for x, _ in kept.with_options(options())]
    assert values == [x for x in range(N) if x != 4000]


class _Clock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


def test_the_threads_rate_counts_only_what_they_mapped_in_the_window(monkeypatch):
    """Elements the threads had mapped before the window opened (waiting for the consumer) are not
    counted; elements mapped in the window and still waiting at its end are."""
    clock = _Clock()
    monkeypatch.setattr(parallel_map, "time", clock)
    monkeypatch.setattr(parallel_map, "_CHOICES", type(parallel_map._CHOICES)())
    sh = parallel_map._MapShared.__new__(parallel_map._MapShared)
    sh.cond, sh.active = threading.Condition(), 2
    sh.results = {7: (None, [0] * 5, None)}  # 5 mapped before the window, not yet taken
    tune = parallel_map._Tuner(tagged)
    tune.tick(sh, 3, 0.0, 2)  # the warm chunk: the window opens
    clock.now += 1.0
    sh.results = {9: (None, [0] * 2, None)}  # the 5 were taken; 2 mapped since, still waiting
    tune.tick(sh, 5 + 4, 1.0, 2)  # delivered in the window: the 5 and 4 more
    assert tune.phase == "draining"
    assert tune.threads_rate == pytest.approx(4 + 2)  # per second: 4 delivered + 2 waiting
