"""``tps.experimental.PreemptionCheckpointHandler``: save on preemption, exit, resume on restart.

The counterpart of ``tf.distribute.experimental.PreemptionCheckpointHandler``.
Created once before the training loop, it restores the latest checkpoint of
its ``CheckpointManager`` (so ``total_run_calls`` continues where the job
stopped) and starts watching for a termination notice: SIGTERM to any process
of the job, or a ``TerminationConfig.termination_watcher_fn`` returning True.
Each ``run(train_step, ...)`` first checks whether every process has to stop;
if so, all processes save the same checkpoint at the same run call and exit
with ``PREEMPTION_EXIT_CODE`` (42, TensorFlow's default), which tells the
scheduler (or a wrapper script) to restart the same command.

How the processes agree on the step: in a multi-process job JAX's
coordination service does it (``jax.experimental.multihost_utils.
reached_preemption_sync_point``: its preemption service catches SIGTERM on
any process and picks the next step every process reaches); with one process
a Python SIGTERM handler sets a flag; if JAX's preemption service is off, the
processes all-gather their flags at each ``run``.

``TerminationConfig`` options, as TensorFlow documents them: ``save_fn``
replaces the manager's save; ``exit_fn`` replaces ``sys.exit(42)`` (when it
returns, training goes on and the handler stops watching); with
``grace_period > 0`` the handler saves at once, keeps training, and saves a
second time just before the deadline (notice time + grace period, less a
margin of six estimated step times and one save time) before it exits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import numbers
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tpustrategy._src.checkpoint import multihost
from tpustrategy._src.checkpoint.checkpoint import Checkpoint
from tpustrategy._src.checkpoint.manager import CheckpointManager

PREEMPTION_EXIT_CODE = 42
"""The exit code after a preemption checkpoint (TensorFlow's default): restart the job."""

RUN_CALLS_NAME = "_preemption_handler_run_calls"
_API = "tps.experimental.PreemptionCheckpointHandler"


_LOG = logging.getLogger("tpustrategy")
_STEP_MARGIN = 6  # TensorFlow's buffer: 3 x twice the estimated step time


@dataclasses.dataclass(frozen=True)
class TerminationConfig:
    """How termination is noticed and handled (``tf.distribute.experimental.TerminationConfig``).

    Attributes:
      termination_watcher_fn: polled every second; returning True is a
        termination notice (SIGTERM is one too).
      exit_fn: called after the preemption checkpoint is saved, instead of
        ``sys.exit(PREEMPTION_EXIT_CODE)``. If it returns, training continues
        and the handler no longer watches for notices.
      grace_period: seconds between the notice and the forced end. With a
        positive value the handler saves at once, keeps training, and saves
        again shortly before the deadline, then exits (None or 0: save once
        and exit).
      save_fn: called instead of the checkpoint manager's save when a
        checkpoint is due (``handler.total_run_calls`` says at which step).
    """

    termination_watcher_fn: Callable[[], bool] | None = None
    exit_fn: Callable[[], Any] | None = None
    grace_period: float | None = None
    save_fn: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        for name in ("termination_watcher_fn", "exit_fn", "save_fn"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"TerminationConfig: {name} must be callable or None; received "
                                f"{type(value).__name__}: {value!r}.\nFix: pass a function, e.g. "
                                f"TerminationConfig({name}=lambda: ...).")
        grace = self.grace_period
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, numbers.Real)
                                  or not grace >= 0):
            raise ValueError(f"TerminationConfig: grace_period must be a number of seconds >= 0 or "
                             f"None; received {type(grace).__name__}: {grace!r}.\nFix: e.g. "
                             "TerminationConfig(grace_period=30).")


def _sync_manager_available() -> bool:
    from tpustrategy._src.jax_shims import coordination

    return coordination.preemption_sync_available()


class PreemptionCheckpointHandler:
    """Saves a checkpoint on every process at the same step when any is preempted, then exits.

    Args:
      cluster_resolver: the job's cluster resolver (accepted for TF
        compatibility; the processes are those of ``tps.initialize``).
      checkpoint_or_checkpoint_manager: a ``tps.train.Checkpoint`` (then
        ``checkpoint_dir`` is required and a manager keeping one checkpoint is
        made) or a ``tps.train.CheckpointManager``.
      checkpoint_dir: where to keep the preemption checkpoint.
      termination_config: a ``TerminationConfig`` (watcher, exit function).

    Example:
      >>> ckpt = tps.train.Checkpoint(model=model, optimizer=opt, iterator=iterator)
      >>> handler = tps.experimental.PreemptionCheckpointHandler(
      ...     strategy.cluster_resolver, ckpt, "/ckpts/preemption")
      >>> while handler.total_run_calls < num_steps:
      ...     loss = handler.run(train_step, iterator)
      # SIGTERM to any process: every process saves at the same run call and exits
      # with code 42; running the same command again resumes from there.
    """

    exit_code = PREEMPTION_EXIT_CODE

    def __init__(self, cluster_resolver: Any = None, checkpoint_or_checkpoint_manager: Any = None,
                 checkpoint_dir: str | None = None, termination_config: TerminationConfig | None = None):
        target = checkpoint_or_checkpoint_manager
        if isinstance(target, CheckpointManager):
            manager = target
        elif isinstance(target, Checkpoint):
            if checkpoint_dir is None:
                raise ValueError(
                    f"{_API}: a Checkpoint was passed, so checkpoint_dir is needed to know where "
                    "to save it.\nFix: PreemptionCheckpointHandler(resolver, checkpoint, "
                    "checkpoint_dir='/path/to/preemption_checkpoints'), or pass a "
                    "tps.train.CheckpointManager instead of the Checkpoint."
                )
            manager = CheckpointManager(target, checkpoint_dir, max_to_keep=1)
        else:
            raise TypeError(
                f"{_API}: checkpoint_or_checkpoint_manager must be a tps.train.Checkpoint or "
                f"tps.train.CheckpointManager; received {type(target).__name__}.\nFix: "
                "PreemptionCheckpointHandler(None, tps.train.Checkpoint(model=..., "
                "iterator=...), checkpoint_dir)."
            )
        config = termination_config or TerminationConfig()
        if not isinstance(config, TerminationConfig):
            raise TypeError(f"{_API}: termination_config must be a TerminationConfig; received "
                            f"{type(config).__name__}: {config!r}.\nFix: pass "
                            "tps.experimental.TerminationConfig(grace_period=..., exit_fn=...).")
        self._cluster_resolver = cluster_resolver
        self._manager = manager
        self._config = config
        checkpoint = manager.checkpoint
        checkpoint._objects.setdefault(RUN_CALLS_NAME, 0)
        manager.restore_or_initialize()
        self._run_counter = int(checkpoint._objects[RUN_CALLS_NAME])
        self._notice = threading.Event()
        self._notice_time: float | None = None
        self._countdown_until: float | None = None  # grace period: when the final save is due
        self._step_time: float | None = None  # running estimate of one run call
        self._save_time = 0.0
        self._done = False  # exit_fn returned: training goes on, nothing more is watched
        self._previous_handler: Any = None
        if _sync_manager_available():
            self._mode = "jax"  # JAX's preemption service catches SIGTERM and agrees on the step
        else:
            self._mode = "gather" if multihost.process_count() > 1 else "local"
            self._install_sigterm_handler()
        self._watcher: threading.Thread | None = None
        if config.termination_watcher_fn is not None:
            self._watcher = threading.Thread(target=self._watch, name="tps-termination-watcher", daemon=True)
            self._watcher.start()

    # Noticing ---------------------------------------------------------------------------------
    def _install_sigterm_handler(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; the watcher still works
        self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        if self._notice_time is None:
            self._notice_time = time.monotonic()
        self._notice.set()

    def _watch(self) -> None:
        watcher = self._config.termination_watcher_fn
        assert watcher is not None
        while not self._notice.wait(1.0):
            if watcher():
                if self._mode == "jax":
                    import os

                    os.kill(os.getpid(), signal.SIGTERM)  # hands the notice to JAX's service
                if self._notice_time is None:
                    self._notice_time = time.monotonic()
                self._notice.set()
                return

    def _must_stop(self) -> bool:
        if self._mode == "jax":
            from jax.experimental import multihost_utils

            return bool(multihost_utils.reached_preemption_sync_point(self._run_counter))
        if self._mode == "gather":
            return bool(multihost.allgather([int(self._notice.is_set())]).any())
        return self._notice.is_set()

    # Public surface ---------------------------------------------------------------------------
    @property
    def total_run_calls(self) -> int:
        """How many ``run`` calls completed, counting those before a restart."""
        return self._run_counter

    @property
    def checkpoint_manager(self) -> CheckpointManager:
        return self._manager

    def run(self, distributed_train_function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Calls ``distributed_train_function(*args, **kwargs)``, first saving and exiting if preempted.

        Returns:
          What the function returns.
        """
        self._save_and_exit_if_preempted()
        started = time.monotonic()
        result = distributed_train_function(*args, **kwargs)
        self._time_step(time.monotonic() - started)
        self._count_run()
        return result

    def _time_step(self, seconds: float) -> None:
        self._step_time = seconds if self._step_time is None else 0.8 * self._step_time + 0.2 * seconds

    def save_checkpoint_if_preempted(self, *args: Any, **kwargs: Any) -> None:
        """Counts one step, saving and exiting first if preempted (for loops that do not use ``run``).

        Arguments are passed on to ``CheckpointManager.save``.
        """
        self._save_and_exit_if_preempted(*args, **kwargs)
        self._count_run()

    def _count_run(self) -> None:
        # Kept in the checkpoint at every call, so the user's own saves record it too.
        self._run_counter += 1
        self._manager.checkpoint._objects[RUN_CALLS_NAME] = self._run_counter
    @contextlib.contextmanager
    def watch_preemption_scope(self) -> Iterator[None]:
        """Turns the loss of a peer during a preemption into the restart exit code.

        When a process of the job disappears (``tps.errors.UnavailableError``
        or ``DeadlineExceededError`` inside the scope), the survivors cannot
        save a consistent checkpoint; they exit with ``PREEMPTION_EXIT_CODE``
        so the job restarts from the last checkpoint.
        """
        from tpustrategy._src.errors import DeadlineExceededError, UnavailableError

        try:
            yield
        except (UnavailableError, DeadlineExceededError) as e:
            print(f"tpustrategy: lost a peer process ({type(e).__name__}: {e}); exiting with code "
                  f"{self.exit_code} so the job restarts from {self._manager.latest_checkpoint}.",
                  file=sys.stderr, flush=True)
            self._exit()

    def _deadline_reached(self) -> bool:
        assert self._countdown_until is not None
        due = time.monotonic() >= self._countdown_until
        if multihost.process_count() > 1:  # every process saves the final checkpoint at one step
            return bool(multihost.allgather([int(due)]).any())
        return due

    def _save_and_exit_if_preempted(self, *args: Any, **kwargs: Any) -> None:
        if self._done:
            return
        if self._countdown_until is not None:
            if not self._deadline_reached():
                return
            self._save(args, kwargs, "final checkpoint of the grace period")
            self._exit()
            return
        if not self._must_stop():
            return
        grace = float(self._config.grace_period or 0)
        notice = self._notice_time if self._notice_time is not None else time.monotonic()
        self._save(args, kwargs, "termination notice")
        if grace > 0:
            margin = _STEP_MARGIN * (self._step_time or 0.0) + self._save_time
            self._countdown_until = notice + grace - margin
            _LOG.info("%s: checkpoint saved; training continues for the grace period of %ss "
                      "(final save in %.1fs).", _API, grace, self._countdown_until - time.monotonic())
            return
        self._exit()

    def _save(self, args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> None:
        self._manager.checkpoint._objects[RUN_CALLS_NAME] = self._run_counter
        started = time.monotonic()
        if self._config.save_fn is not None:
            self._config.save_fn()
            where = "by save_fn"
        else:
            kwargs.setdefault("check_interval", False)
            where = self._manager.save(*args, **kwargs)
        self._save_time = time.monotonic() - started
        multihost.barrier("preemption-saved")
        print(f"tpustrategy: {why}: process {multihost.process_index()} saved {where} after "
              f"{self._run_counter} run calls.", file=sys.stderr, flush=True)

    def _exit(self) -> None:
        self._done = True
        self._countdown_until = None
        self._notice.set()  # stops the watcher thread
        if self._config.exit_fn is not None:
            self._config.exit_fn()
        else:
            print(f"tpustrategy: exiting with code {self.exit_code} (run the same command again to "
                  "resume).", file=sys.stderr, flush=True)
            self._close_iterators()
            sys.exit(self.exit_code)

    def _close_iterators(self) -> None:
        """Stops the checkpoint's input threads so the process exits cleanly."""
        try:
            entries = self._manager.checkpoint._graph(_API).entries.values()
        except Exception:  # exiting anyway
            return
        for entry in entries:
            close = getattr(entry.obj, "close", None) if entry.kind == "iterator" else None
            if callable(close):
                try:
                    close()
                except Exception:
                    pass
