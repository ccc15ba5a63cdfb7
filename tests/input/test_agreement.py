"""The per-step input agreement, over a real coordination service with P clients in one process.

Each "process" is a thread with its own client of one JAX coordination service,
running the same ``StepAgreement`` as a real process would; a counting proxy
around each client gives the requests per process per step.
"""

from __future__ import annotations

import collections
import threading

import pytest

from tpustrategy._src.cluster.launch import free_port
from tpustrategy._src.errors import DeadlineExceededError
from tpustrategy._src.input import split
from tpustrategy._src.input.agreement import Rule, StepAgreement

pytestmark = pytest.mark.timeout(120)


class Counting:
    """Counts every call to the coordination client it wraps, by method."""

    def __init__(self, client):
        self._client, self.calls = client, collections.Counter()

    def __getattr__(self, name):
        method = getattr(self._client, name)

        def call(*args, **kwargs):
            self.calls[name] += 1
            return method(*args, **kwargs)

        return call


@pytest.fixture
def pod():
    from jaxlib import _jax

    from tpustrategy._src.jax_shims import runtime_service

    made = []

    def make(n):
        address = f"127.0.0.1:{free_port()}"
        service = runtime_service.start(address, n)
        clients = [_jax.get_distributed_runtime_client(address, i, init_timeout=30) for i in range(n)]
        _parallel([c.connect for c in clients])
        made.append((service, clients))
        return [Counting(c) for c in clients]

    yield make
    for service, clients in made:
        _parallel([c.shutdown for c in clients])  # together: shutdown is a barrier
        service.shutdown()


def _parallel(calls):
    results, errors = [None] * len(calls), []

    def run(i):
        try:
            results[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


def _agreements(clients, rule, local, sizes_of=None, timeout_s=None):
    return [StepAgreement(rule, local, sizes_of, timeout_s, process=i, num_processes=len(clients),
                          client=c, iterator_id=10_000 + id(clients) % 10_000)
            for i, c in enumerate(clients)]


def _run(agreements, rows):
    """rows[step][p] = (sizes or None, has_next, batch): every process's view; returns each one's Steps."""
    out = [[] for _ in agreements]
    for step in rows:
        results = _parallel([lambda a=a, r=r: a.exchange(*r) for a, r in zip(agreements, step)])
        for p, s in enumerate(results):
            out[p].append(s)
    return out


LOCAL = Rule(False, (2, 2, 2, 2, 2, 2), False, "test: FILE sharding")


def test_uniform_steps_cost_two_requests_per_process_and_agree_on_nothing_ragged(pod):
    clients = pod(3)
    agreements = _agreements(clients, LOCAL, 2)
    steps = _run(agreements, [[([2, 2], True, None)] * 3] * 6)
    assert all(s.exists and s.sizes is None and not s.last for per in steps for s in per)
    for c in clients:
        assert sum(c.calls.values()) == 2 * 6, c.calls
    # exactly one process completes each step's count and writes its result
    assert sum(c.calls["key_value_set"] for c in clients) == 6
    assert all(c.calls["key_value_increment"] == 6 for c in clients)


def test_a_short_batch_on_one_process_gives_everyone_every_size(pod):
    clients = pod(3)
    agreements = _agreements(clients, LOCAL, 2)
    full, short = ([2, 2], True, None), ([1, 0], False, None)
    ended = (None, False, None)
    steps = _run(agreements, [[full] * 3, [full, short, full], [full, ended, ended]])
    for per in steps:
        assert per[0].sizes is None
        assert per[1].sizes == [2, 2, 1, 0, 2, 2]
        assert per[2].sizes == [2, 2, 0, 0, 0, 0]
    assert [s.last for s in steps[0]] == [False, False, False]
    assert not agreements[0].ended


def test_the_epoch_ends_with_the_last_step_and_no_extra_exchange(pod):
    clients = pod(2)
    agreements = _agreements(clients, Rule(False, (2, 2, 2, 2), False, "test: FILE sharding"), 2)
    rows = [[([2, 2], True, None)] * 2, [([2, 2], False, None), ([1, 1], False, None)]]
    steps = _run(agreements, rows)
    assert steps[0][1].last and steps[1][1].last and all(a.ended for a in agreements)
    assert steps[0][1].sizes == [2, 2, 1, 1]
    assert sum(clients[0].calls.values()) + sum(clients[1].calls.values()) <= 2 * 2 * 2 + 3


def test_data_sharding_derives_every_size_from_the_global_batch(pod):
    clients = pod(2)
    rule = Rule(False, tuple(split.piece_sizes(8, 4)), True, "test: DATA")
    agreements = _agreements(clients, rule, 2, lambda b: split.piece_sizes(b, 4))
    steps = _run(agreements, [[([2, 2], True, 8)] * 2, [([2, 1], False, 5), ([1, 1], False, 5)]])
    assert steps[0][0].sizes is None and steps[0][1].sizes == [2, 1, 1, 1]
    assert all(a.ended for a in agreements)
    for c in clients:  # a short last batch and the end cost nothing extra
        assert sum(c.calls.values()) == 4, c.calls


def test_data_sharding_with_streams_of_different_lengths_falls_back_to_rows(pod):
    clients = pod(2)
    rule = Rule(False, tuple(split.piece_sizes(4, 4)), True, "test: DATA")
    agreements = _agreements(clients, rule, 2, lambda b: split.piece_sizes(b, 4))
    rows = [[([1, 1], True, 4), ([1, 1], False, 4)], [([1, 1], False, 4), (None, False, None)]]
    steps = _run(agreements, rows)
    assert steps[0][1].sizes == steps[1][1].sizes == [1, 1, 0, 0]
    assert all(a.ended for a in agreements)


def test_a_user_built_pipeline_publishes_its_sizes_once_then_only_changes(pod):
    clients = pod(2)
    rule = Rule(False, None, False, "from function")
    agreements = _agreements(clients, rule, 2)
    steps = _run(agreements, [[([3, 3], True, None), ([2, 2], True, None)]] * 4)
    assert all(s.sizes == [3, 3, 2, 2] for per in steps for s in per)
    rows_written = [c.calls["key_value_set"] for c in clients]
    assert sum(rows_written) == 2 + 4  # each process's row once, one result per step


def test_a_static_pipeline_makes_no_request_and_checks_its_own_sizes(pod):
    clients = pod(2)
    rule = Rule(True, (3, 3, 2, 2), False, "an infinite pipeline and every batch is full", infinite=True)
    agreements = _agreements(clients, rule, 2)
    steps = _run(agreements, [[([3, 3], True, None), ([2, 2], True, None)]] * 5)
    assert all(s.sizes == [3, 3, 2, 2] for per in steps for s in per)
    assert all(sum(c.calls.values()) == 0 for c in clients)
    with pytest.raises(RuntimeError, match="proves full batches"):
        agreements[0].exchange([3, 1])
    agreements[1].restart()
    assert agreements[1].static  # an infinite pipeline stays static after a restore


def test_a_peer_that_never_arrives_is_named_at_the_deadline(pod, monkeypatch):
    from tpustrategy._src.input import agreement

    monkeypatch.setattr(agreement, "_MARK_AFTER_S", 0.3)
    clients = pod(3)
    agreements = _agreements(clients, LOCAL, 2, timeout_s=1.5)
    errors = []

    def wait(a):
        try:
            a.exchange([2, 2])
        except DeadlineExceededError as e:
            errors.append(e)

    _parallel([lambda: wait(agreements[0]), lambda: wait(agreements[1])])
    assert len(errors) == 2
    for e in errors:
        assert e.missing == (2,)
        assert "process(es) 2 did not reach step 0" in str(e)


def test_a_cancellable_wait_ends_within_a_slice_once_cancelled(pod, monkeypatch):
    # A prefetch thread's wait for an absent peer must end soon after the thread is let go
    # (one inside the service's C++ call at interpreter exit aborts the process).
    import time

    from tpustrategy._src.errors import CancelledError
    from tpustrategy._src.input import agreement

    monkeypatch.setattr(agreement, "_SLICE_S", 0.2)
    clients = pod(2)
    waiting = _agreements(clients, LOCAL, 2, timeout_s=60)[0]
    let_go = threading.Event()
    waiting.cancelled = let_go.is_set
    threading.Timer(0.5, let_go.set).start()
    started = time.monotonic()
    with pytest.raises(CancelledError, match="cancelled"):
        waiting.exchange([2, 2])
    assert time.monotonic() - started < 30  # not the 60 s deadline
    # one increment (its sizes are the known ones: no row), then one request per 0.2 s slice
    assert clients[0].calls["key_value_increment"] == 1
    assert clients[0].calls["blocking_key_value_get"] >= 3


def test_a_cancellable_wait_that_is_not_cancelled_still_meets_its_peer(pod, monkeypatch):
    from tpustrategy._src.input import agreement

    monkeypatch.setattr(agreement, "_SLICE_S", 0.2)
    clients = pod(2)
    agreements = _agreements(clients, LOCAL, 2)
    for a in agreements:
        a.cancelled = lambda: False
    late = [lambda: agreements[0].exchange([2, 2]),
            lambda: (threading.Event().wait(0.7), agreements[1].exchange([2, 2]))[1]]
    first, second = _parallel(late)
    assert first.exists and second.exists and first.sizes is None


def test_the_prefetcher_lets_its_thread_go_and_never_cancels_the_consumer():
    from tpustrategy._src.input.prefetch import Prefetcher

    seen = []
    entered = threading.Event()

    class Source:
        def produce(self):
            if prefetcher.cancelled():
                seen.append("cancelled at start")
            entered.set()
            while not prefetcher.cancelled():  # a long wait that polls, as the agreement's does
                threading.Event().wait(0.01)
            seen.append("let go")
            raise StopIteration

    source = Source()
    prefetcher = Prefetcher(source.produce, depth=1)
    assert not prefetcher.cancelled()  # the consumer's thread
    prefetcher._start()
    assert entered.wait(30)
    prefetcher.stop(timeout=30)
    assert seen == ["let go"]
    assert not prefetcher.cancelled()
