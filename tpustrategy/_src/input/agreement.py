"""Multi-host input: how the processes agree on each step, at a cost that does not grow with P.

Every step of a distributed iterator needs two facts that may differ between
processes: whether the step exists anywhere (the epoch ends only when no process
has data) and every replica's piece size (so ragged steps get one program
everywhere). Which of them must be exchanged depends on what the pipelines prove:

- **Static** (no request at all, TensorFlow's rule for infinite datasets): this
  process's pipeline is infinite, or it is auto-sharded with DATA (every process
  reads the whole dataset) and has a known cardinality; and every element is a
  full global batch (``batch(..., drop_remainder=True)``, a batch of an infinite
  input such as ``repeat().batch(n)``, or ``partial_batch="pad"`` / ``"drop"``).
  Every process then has the same number of steps and every replica the full
  piece. Each step checks its own sizes against that claim.
- **Counted** (otherwise): two requests per process per step. Each process adds
  a small code to the step's counter (``key_value_increment``: one arrival, and
  whether it has data now and at the next step, looked up one element ahead so the
  epoch ends without an extra exchange); the process whose increment completes the
  count writes the step's result, which the others read with one blocking get.
  Piece sizes travel only when a process's sizes change (a short batch, an
  exhausted pipeline under FILE sharding, ``distribute_datasets_from_function``'s
  first step): that process writes a row first and the last arriver reads them
  in one directory read. Under DATA sharding every process reads the same global
  batch, so every replica's size follows from its own; a process whose data ends
  at another step than the others' turns the iterator to rows for the rest.

The coordinator thus serves about 2·P small requests per step instead of
P·(P + 2). Keys live under ``tps/input/<iterator>/<restart>/<block>/``; the last
arriver of a block's first step deletes the previous block (one request per 256
steps). A process that waits longer than ``_MARK_AFTER_S`` says so under the
step's key, so when the deadline passes the missing processes can be named.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from tpustrategy._src.errors import CancelledError, DeadlineExceededError

_iterators = itertools.count()
DEFAULT_TIMEOUT_S = 300.0
BLOCK = 256
_MARK_AFTER_S = 10.0
_SLICE_S = 2.0  # a cancellable wait's longest single request (``StepAgreement._get``)
INFINITE = -1


@dataclasses.dataclass(frozen=True)
class Rule:
    """What this process's pipeline proves about every process's steps.

    Attributes:
      static: every process has the same steps, each a full batch (no exchange).
      full_sizes: every replica's piece size of a full global batch (None: unknown).
      derived: DATA sharding: every replica's size follows from this process's global batch.
      reason: why, in words (for messages).
      infinite: the pipeline never ends (static stays static after a restore).
    """

    static: bool
    full_sizes: tuple[int, ...] | None
    derived: bool
    reason: str
    infinite: bool = False


@dataclasses.dataclass(frozen=True)
class Step:
    """The job's view of one step: whether it exists, every replica's size if ragged, if it is the last."""

    exists: bool
    sizes: list[int] | None
    last: bool


def _client() -> Any:
    from tpustrategy._src.jax_shims import coordination

    return coordination.client()


class StepAgreement:
    """One iterator's per-step agreement between the processes.

    Args:
      rule: what the pipeline proves (``Rule``).
      num_local: this process's replicas.
      global_sizes: ``f(b)`` -> every replica's size of a global batch ``b`` (DATA sharding).
      timeout_s: how long a process waits for the others at one step.
      process, num_processes, client: this process, the job's size and the coordination
        client (default: JAX's; given by tests and the simulated-pod benchmark).
    """

    def __init__(self, rule: Rule, num_local: int, global_sizes: Any = None,
                 timeout_s: float | None = None, *, process: int | None = None,
                 num_processes: int | None = None, client: Any = None,
                 iterator_id: int | None = None):
        import jax

        self.rule = rule
        self._id = next(_iterators) if iterator_id is None else iterator_id
        self._process = jax.process_index() if process is None else process
        self._count = jax.process_count() if num_processes is None else num_processes
        self._client = client
        self._local = num_local
        self._global_sizes = global_sizes
        self._timeout_s = float(timeout_s or DEFAULT_TIMEOUT_S)
        self._width = max(1, self._count.bit_length())
        self._restart = -1
        # Set by an owner that runs the exchange on a background thread: true once that
        # thread should give up its wait (``_get``).
        self.cancelled: Callable[[], bool] | None = None
        self.restart(first=True)

    # -- state ------------------------------------------------------------------------------

    @property
    def static(self) -> bool:
        return self._static

    @property
    def looks_ahead(self) -> bool:
        """Whether ``exchange`` wants to know if this process has data at the next step."""
        return not self._static

    @property
    def ended(self) -> bool:
        """The previous exchange agreed that no process has data any more."""
        return self._ended

    def restart(self, first: bool = False) -> None:
        """Every process restarts its iterator at the same point (``set_state``): new key space."""
        self._restart += 1
        self._step = 0
        self._ended = False
        # After a restore only an infinite pipeline still proves its step count.
        self._static = self.rule.static and (first or self.rule.infinite)
        self._derived = self.rule.derived
        full = self.rule.full_sizes
        self._rows: dict[int, list[int] | None] = {
            q: ([1, *full[q * self._local:(q + 1) * self._local]] if full is not None else None)
            for q in range(self._count)}
        self.requests = 0  # this iterator's requests to the coordination service (for tests)

    # -- the exchange ---------------------------------------------------------------------------

    def exchange(self, sizes: list[int] | None, has_next: bool = True,
                 batch: int | None = None) -> Step:
        """This process's step (``sizes`` of its replicas, None without data) -> the job's step.

        Args:
          sizes: this process's replicas' piece sizes, or None when it has no data.
          has_next: whether this process has data at the next step (``looks_ahead``).
          batch: the global batch this process read (DATA sharding).
        """
        if self._static:
            return self._static_step(sizes)
        step = self._step
        self._step += 1
        if self._derived:
            row = None
        else:
            row = [1] + list(sizes) if sizes is not None else [0] * (self._local + 1)
            if row == self._known(self._process):
                row = None
        code = self._code(sizes is None, not has_next, row is not None)
        name = f"{step // BLOCK}/{step}"
        totals, rows = self._round(name, code, row, cleanup=step % BLOCK == 0 and step >= BLOCK)
        arrived, no_now, no_next, _ = totals
        for q, r in rows.items():
            self._rows[q] = r
        exists = no_now < self._count
        if self._derived and 0 < no_now < self._count:
            # DATA sharding, but the streams differ in length: rows from now on.
            self._derived = False
            self._rows = dict.fromkeys(range(self._count))
            row = [1] + list(sizes) if sizes is not None else [0] * (self._local + 1)
            _, rows = self._round(f"{name}x", self._code(False, False, True), row)
            self._rows.update(rows)
        self._ended = no_next == self._count
        if not exists:
            self._ended = True
            return Step(False, None, True)
        every = self._every_size(sizes, batch)
        if self._derived and 0 < no_next < self._count:
            # DATA sharding, but some stream ends before the others: rows from the next step on.
            self._derived = False
            self._rows = dict.fromkeys(range(self._count))
        return Step(True, every, self._ended)

    def _static_step(self, sizes: list[int] | None) -> Step:
        if sizes is None:
            self._ended = True
            return Step(False, None, True)
        full = self.rule.full_sizes
        mine = list(full[self._process * self._local:(self._process + 1) * self._local]) if full else None
        if mine is not None and list(sizes) != mine:
            raise RuntimeError(
                f"distributed input: step {self._step} of process {self._process} has pieces of sizes "
                f"{list(sizes)}, but its pipeline proves full batches ({self.rule.reason}: pieces {mine}); a "
                "transformation after batch() changed the batch size.\nFix: change the batch size only with "
                "batch(); or end the pipeline with batch(...) and map before it.")
        self._step += 1
        return Step(True, list(full) if full and len(set(full)) > 1 else None, False)

    def _known(self, q: int) -> list[int] | None:
        return self._rows.get(q)

    def _every_size(self, sizes: list[int] | None, batch: int | None) -> list[int] | None:
        if self._derived:
            every = list(self._global_sizes(batch)) if batch is not None else [0] * (self._local * self._count)
        else:
            every = []
            for q in range(self._count):
                row = self._rows[q] if q != self._process or sizes is None else [1] + list(sizes)
                if row is None:  # pragma: no cover - every unknown row is published
                    raise RuntimeError(f"distributed input: no piece sizes of process {q}.")
                every.extend(row[1:] if row[0] else [0] * self._local)
        return every if len(set(every)) > 1 else None

    def _code(self, no_now: bool, no_next: bool, changed: bool) -> int:
        w = self._width
        return 1 + (int(no_now) << w) + (int(no_next) << 2 * w) + (int(changed) << 3 * w)

    def _decode(self, total: int) -> tuple[int, int, int, int]:
        w, mask = self._width, (1 << self._width) - 1
        return tuple((total >> (k * w)) & mask for k in range(4))  # type: ignore[return-value]

    def _ns(self) -> str:
        return f"tps/input/{self._id}/{self._restart}"

    def _round(self, name: str, code: int, row: list[int] | None,
               cleanup: bool = False) -> tuple[tuple[int, int, int, int], dict[int, list[int]]]:
        """One counted exchange: [row] + increment + (blocking get | [dir read] + result)."""
        client = self._client if self._client is not None else _client()
        base = f"{self._ns()}/{name}"
        if row is not None:
            self.requests += 1
            client.key_value_set(f"{base}/r/{self._process}", json.dumps(row))
        self.requests += 1
        total = int(client.key_value_increment(f"{base}/c", code))
        totals = self._decode(total)
        if totals[0] == self._count:  # this process completed the count
            rows: dict[int, list[int]] = {}
            if totals[3]:
                self.requests += 1
                for key, value in client.key_value_dir_get(f"{base}/r/"):
                    rows[int(key.rsplit("/", 1)[1])] = json.loads(value)
            self.requests += 1
            client.key_value_set(f"{base}/d", json.dumps({"t": total, "r": rows}))
            if cleanup:
                self.requests += 1
                block = int(name.split("/")[0])
                try:
                    client.key_value_delete(f"{self._ns()}/{block - 1}")
                except Exception:  # noqa: BLE001 - a best-effort clean-up; the job goes on without it
                    pass
            return totals, rows
        result = json.loads(self._wait(client, base, name))
        return self._decode(int(result["t"])), {int(q): r for q, r in result["r"].items()}

    def _wait(self, client: Any, base: str, name: str) -> str:
        first = min(_MARK_AFTER_S, self._timeout_s)
        try:
            return self._get(client, f"{base}/d", first)
        except CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - the service's deadline (a JaxRuntimeError)
            self._raise_unless_timeout(err)
        # A slow step: say that this process is here, so a deadline can name the absent ones.
        self.requests += 1
        client.key_value_set(f"{base}/w/{self._process}", "1")
        try:
            return self._get(client, f"{base}/d", max(1.0, self._timeout_s - first))
        except CancelledError:
            raise
        except Exception as err:  # noqa: BLE001
            self._raise_unless_timeout(err)
            here = {int(k.rsplit("/", 1)[1]) for k, _ in client.key_value_dir_get(f"{base}/w/")}
            missing = tuple(q for q in range(self._count) if q not in here and q != self._process)
            who = ", ".join(map(str, missing)) or "(unknown)"
            raise DeadlineExceededError(
                f"distributed input: process(es) {who} did not reach step {name.split('/')[1]} of a "
                f"distributed iterator within {self._timeout_s:g} s (process {self._process} of {self._count} "
                "waited); they may have died, be stuck, or have created their distributed iterators in another "
                f"order.\nFix: check the log of process(es) {who}; every process must iterate its distributed "
                "datasets in the same order.", missing=missing) from err

    def _get(self, client: Any, key: str, seconds: float) -> str:
        """A blocking get of ``key`` within ``seconds``; in slices when the owner can cancel the wait.

        A wait on a background thread (the prefetcher's) must end soon after the
        thread is let go: one still inside the service's C++ call when the
        interpreter finalizes aborts the process. So it waits ``_SLICE_S`` at a
        time and raises ``CancelledError`` between slices once ``cancelled()`` is true
        (one more request per slice, only on steps slower than a slice).
        """
        if self.cancelled is None:
            self.requests += 1
            return client.blocking_key_value_get(key, int(seconds * 1000))
        from tpustrategy._src.cluster import faults

        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            self.requests += 1
            try:
                return client.blocking_key_value_get(key, max(1, int(min(_SLICE_S, left) * 1000)))
            except Exception as err:  # noqa: BLE001 - a slice's deadline, or a real failure
                if faults.classify(err) != faults.TIMEOUT or time.monotonic() >= deadline:
                    raise
            if self.cancelled():
                raise CancelledError(f"distributed input: the wait for {key} was cancelled")

    @staticmethod
    def _raise_unless_timeout(err: BaseException) -> None:
        from tpustrategy._src.cluster import faults, health

        monitor = health.current()
        if monitor is not None and monitor.fault is not None:
            raise monitor.fault.exception() from err
        if faults.classify(err) != faults.TIMEOUT:
            raise err


def rule_for(plan: Any, num_replicas: int, partial_batch: str) -> Rule:
    """The ``Rule`` of an ``experimental_distribute_dataset`` pipeline (its auto-shard ``plan``)."""
    from tpustrategy._src.input import autoshard, split

    g = plan.global_batch
    card = plan.dataset.cardinality()
    derived = plan.mode == "global"
    if g is None:
        return Rule(False, None, derived, "no batch() found: sizes are exchanged")
    if partial_batch == "pad":
        static_size = -(-g // num_replicas)
        full: tuple[int, ...] = (static_size,) * num_replicas
        full_batches, why = True, "partial batches are padded"
    else:
        full = tuple(split.piece_sizes(g, num_replicas))
        node = autoshard.find_batch(plan.dataset)
        drop = node is not None and (node.drop_remainder or node.inputs[0].cardinality() == INFINITE)
        full_batches = partial_batch == "drop" or drop
        why = "every batch is full" if drop else "partial batches are dropped"
    if full_batches and card == INFINITE:
        return Rule(True, full, derived, f"an infinite pipeline and {why}", infinite=True)
    if full_batches and card >= 0 and derived:
        return Rule(True, full, derived, f"DATA sharding with {card} steps on every process and {why}")
    return Rule(False, full, derived,
                "the step count or the last batch may differ between processes: counted exchange")
