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
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tpustrategy._src.checkpoint import multihost
from tpustrategy._src.checkpoint.checkpoint import Checkpoint
from tpustrategy._src.checkpoint.manager import CheckpointManager

PREEMPTION_EXIT_CODE = 42
"""The exit code after a preemption checkpoint (TensorFlow's default): restart the job."""

RUN_CALLS_NAME = "_preemption_handler_run_calls"
_API = "tps.experimental.PreemptionCheckpointHandler"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TerminationConfig:
    """How termination is noticed and how the process exits (``tf.distribute.experimental.TerminationConfig``).

    Attributes:
      termination_watcher_fn: polled every second; returning True is a
        termination notice (default: SIGTERM is the notice).
      exit_fn: called after the checkpoint is saved (default:
        ``sys.exit(PREEMPTION_EXIT_CODE)``).
      grace_period: seconds between the notice and the end (informational).
      save_fn: accepted for compatibility; the handler's manager saves.
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
                                f"{type(value).__name__}.")


def _sync_manager_available() -> bool:
    try:
        from jax._src import distributed
    except ImportError:  # pragma: no cover
        return False
    state = distributed.global_state
    return state.client is not None and state.preemption_sync_manager is not None


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
                            f"{type(config).__name__}.")
        self._cluster_resolver = cluster_resolver
        self._manager = manager
        self._config = config
        checkpoint = manager.checkpoint
        checkpoint._objects.setdefault(RUN_CALLS_NAME, 0)
        manager.restore_or_initialize()
        self._run_counter = int(checkpoint._objects[RUN_CALLS_NAME])
        self._notice = threading.Event()
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
        self._notice.set()

    def _watch(self) -> None:
        watcher = self._config.termination_watcher_fn
        assert watcher is not None
        while not self._notice.wait(1.0):
            if watcher():
                if self._mode == "jax":
                    import os

                    os.kill(os.getpid(), signal.SIGTERM)  # hands the notice to JAX's service
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
        result = distributed_train_function(*args, **kwargs)
        self._count_run()
        return result

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

    def _save_and_exit_if_preempted(self, *args: Any, **kwargs: Any) -> None:
        if not self._must_stop():
            return
        self._manager.checkpoint._objects[RUN_CALLS_NAME] = self._run_counter
        kwargs.setdefault("check_interval", False)
        path = self._manager.save(*args, **kwargs)
        multihost.barrier("preemption-saved")
        print(f"tpustrategy: termination notice: process {multihost.process_index()} saved {path} "
              f"after {self._run_counter} run calls; exiting with code {self.exit_code} (run the "
              "same command again to resume).", file=sys.stderr, flush=True)
        self._exit()

    def _exit(self) -> None:
        if self._config.exit_fn is not None:
            self._config.exit_fn()
        else:
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
