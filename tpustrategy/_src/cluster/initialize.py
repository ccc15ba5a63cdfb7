"""tps.initialize: resolve the job's processes, validate them, start ``jax.distributed`` once.

Each of ``coordinator_address``, ``num_processes`` and ``process_id`` is taken
from the first source that knows it:

1. the explicit argument;
2. the ``cluster_resolver`` argument;
3. the environment: ``TPS_COORDINATOR_ADDRESS`` / ``TPS_NUM_PROCESSES`` /
   ``TPS_PROCESS_ID`` (set by ``python -m tpustrategy.launch``), then ``TF_CONFIG``;
4. JAX's own detection (Cloud TPU, Slurm, Open MPI, Kubernetes), which fills
   whatever is still unknown inside ``jax.distributed.initialize``.

A job of one process with no coordinator needs no distributed runtime, and the
call is skipped. For a loopback coordinator the ``*_proxy`` variables are
removed (gRPC may route loopback traffic through them). The coordinator binds
only the address it was given (``coordinator_bind_address`` overrides; the
service has no authentication: keep it on a private network). The CPU
collective timeout is set so a stuck peer turns into an error instead of a hang.

Faults end every process with a named ``tps.errors`` exception and a
documented exit code instead of JAX's abort; see ``joining`` (start-up) and
``health`` (afterwards).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from tpustrategy._src.cluster import joining, validate
from tpustrategy._src.cluster.base import jax_tasks
from tpustrategy._src.cluster.faults import Peer
from tpustrategy._src.cluster.tf_config import TFConfigClusterResolver, load_tf_config

logger = logging.getLogger("tpustrategy")

ENV_COORDINATOR = "TPS_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "TPS_NUM_PROCESSES"
ENV_PROCESS_ID = "TPS_PROCESS_ID"
# Set by the launcher: every process's address (process 0's is the coordinator's).
ENV_PROCESS_ADDRESSES = "TPS_PROCESS_ADDRESSES"
_FIELDS = ("coordinator_address", "num_processes", "process_id")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """What ``tps.initialize`` resolved and did.

    Attributes:
      coordinator_address: ``host:port`` of process 0 (None: left to JAX).
      num_processes: number of processes (None: left to JAX).
      process_id: this process's id (None: left to JAX).
      sources: where each of the three came from (``"argument"``, ``"resolver"``,
        an environment variable name, ``"TF_CONFIG"``, or ``"jax"``).
      jax_kwargs: the keyword arguments given to ``jax.distributed.initialize``
        (empty when it was not called: a single process).
    """

    coordinator_address: str | None
    num_processes: int | None
    process_id: int | None
    sources: dict[str, str]
    jax_kwargs: dict[str, Any]

    @property
    def distributed(self) -> bool:
        """Whether ``jax.distributed.initialize`` was called."""
        return bool(self.jax_kwargs)


_lock = threading.Lock()
_done: ClusterConfig | None = None


def _resolver_values(resolver: Any) -> dict[str, Any]:
    missing = [f for f in _FIELDS if not hasattr(type(resolver), f) and not hasattr(resolver, f)]
    if missing:
        raise TypeError(
            f"tps.initialize: cluster_resolver must be a tps.cluster_resolver resolver (with "
            f"{', '.join(_FIELDS)}). Received: {resolver!r}, which lacks {', '.join(missing)}.\n"
            "Fix: pass tps.cluster_resolver.TFConfigClusterResolver(), SimpleClusterResolver"
            "(...), SlurmClusterResolver() or TPUClusterResolver(...)."
        )
    return {f: getattr(resolver, f) for f in _FIELDS}


def _env_values() -> list[tuple[str, dict[str, Any]]]:
    tps_env: dict[str, Any] = {}
    raw = os.environ.get(ENV_COORDINATOR, "").strip()
    if raw:
        tps_env["coordinator_address"] = (raw, ENV_COORDINATOR)
    for field, name in (("num_processes", ENV_NUM_PROCESSES), ("process_id", ENV_PROCESS_ID)):
        raw = os.environ.get(name, "").strip()
        if raw:
            tps_env[field] = (validate.parse_env_int(name, raw), name)
    tf_env: dict[str, Any] = {}
    if load_tf_config().get("cluster"):
        values = _resolver_values(TFConfigClusterResolver())
        tf_env = {k: (v, "TF_CONFIG") for k, v in values.items() if v is not None}
    return [("env", tps_env), ("TF_CONFIG", tf_env)]


def resolve(cluster_resolver: Any = None, *, coordinator_address: str | None = None,
            num_processes: int | None = None,
            process_id: int | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Merges the sources field by field and validates the result.

    Returns:
      ``(values, sources)``: the three fields (None where unknown) and where
      each known one came from.
    """
    layers: list[dict[str, tuple[Any, str]]] = [
        {k: (v, "argument") for k, v in zip(_FIELDS, (coordinator_address, num_processes,
                                                       process_id)) if v is not None},
    ]
    if cluster_resolver is not None:
        layers.append({k: (v, f"{type(cluster_resolver).__name__}")
                       for k, v in _resolver_values(cluster_resolver).items() if v is not None})
    layers.extend(layer for _, layer in _env_values())
    values: dict[str, Any] = dict.fromkeys(_FIELDS)
    sources: dict[str, str] = {}
    for field in _FIELDS:
        for layer in layers:
            if field in layer:
                values[field], sources[field] = layer[field]
                break
    if values["coordinator_address"] is not None:
        values["coordinator_address"] = validate.check_address(
            values["coordinator_address"], sources["coordinator_address"])
    if values["num_processes"] is not None:
        validate.check_num_processes(values["num_processes"], sources["num_processes"])
    if values["process_id"] is not None:
        validate.check_process_id(values["process_id"], sources["process_id"])
    if values["num_processes"] is not None and values["process_id"] is not None:
        validate.check_process_in_range(values["process_id"], values["num_processes"],
                                        (sources["process_id"], sources["num_processes"]))
    return values, sources


def _unset_proxies() -> None:
    removed = [k for k in list(os.environ) if k.lower().endswith("_proxy")]
    for key in removed:
        del os.environ[key]
    if removed:
        logger.info("tps.initialize: loopback coordinator; unset %s", ", ".join(removed))


def _set_collective_timeout(seconds: int | None) -> None:
    from tpustrategy._src.jax_shims import backend_flags

    # Only on jaxlib versions known to have the flag: an unknown XLA flag aborts the process.
    backend_flags.set_collective_timeout(seconds)


def initialize(cluster_resolver: Any = None, *, coordinator_address: str | None = None,
               num_processes: int | None = None, process_id: int | None = None,
               local_device_ids: int | Sequence[int] | None = None,
               initialization_timeout: int = 300, heartbeat_timeout: int = 30,
               shutdown_timeout: int = 60, collective_timeout: int | None = 300,
               coordinator_bind_address: str | None = None,
               cluster_detection_method: str | None = None) -> ClusterConfig:
    """Starts this process's part of a multi-process job (``jax.distributed.initialize``).

    Call it first, before creating a strategy or touching JAX devices, on every
    process of the job. Precedence for each of ``coordinator_address``,
    ``num_processes`` and ``process_id``: explicit argument > ``cluster_resolver``
    > ``TPS_*`` environment variables > ``TF_CONFIG`` > JAX's detection.

    Args:
      cluster_resolver: a ``tps.cluster_resolver`` resolver.
      coordinator_address: ``host:port`` of process 0, the same on every process.
      num_processes: number of processes of the job.
      process_id: this process's id, in ``0 .. num_processes - 1``.
      local_device_ids: restricts this process to these local devices.
      initialization_timeout: seconds to wait for every process to join; then
        ``DeadlineExceededError`` names the processes that did not.
      heartbeat_timeout: seconds a peer may stay silent before it counts as
        stuck (``DeadlineExceededError``). A killed peer is noticed at once
        (``UnavailableError``). JAX's own heartbeat is set to twice this.
      shutdown_timeout: seconds a finished process waits at the end for the others.
      collective_timeout: seconds a CPU collective waits for a peer before
        failing (``None``: XLA's default). Not applied if ``XLA_FLAGS`` already
        sets it.
      coordinator_bind_address: where process 0's coordinator listens; default
        the coordinator address itself (never every interface unless you pass
        e.g. ``"0.0.0.0:1234"``). The service is unauthenticated: keep it on a
        private network.
      cluster_detection_method: passed to JAX (e.g. ``"mpi4py"``, ``"deactivate"``).

    Returns:
      A ``ClusterConfig`` saying what was resolved and from where.

    Raises:
      TypeError / ValueError: an argument, resolver value or environment
        variable is invalid, or JAX could not detect the values still missing.
      RuntimeError: called again with different arguments, or after JAX
        started its backend.
      tps.errors.DeadlineExceededError: the job did not assemble within
        ``initialization_timeout`` (the process then ends with exit code 76).
      tps.errors.UnavailableError: a peer ended while the job assembled.

    After it returns, a fault of any process ends every process with a
    ``tps.errors`` exception naming the process at fault and an exit code:
    75 when a peer was lost (killed, crashed, or its own code raised) and 76
    when a peer is stuck for ``heartbeat_timeout`` seconds or the others do
    not reach the end within ``shutdown_timeout``. A process whose own code
    raises exits with code 1 after telling the others.

    Example:
      >>> tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2,
      ...                process_id=0)                                  # doctest: +SKIP
      >>> strategy = tps.MultiWorkerMirroredStrategy()                # doctest: +SKIP
    """
    global _done
    timeouts = {
        "initialization_timeout": validate.check_timeout(initialization_timeout,
                                                         "initialization_timeout"),
        "heartbeat_timeout_seconds": validate.check_timeout(heartbeat_timeout,
                                                            "heartbeat_timeout"),
        "shutdown_timeout_seconds": validate.check_timeout(shutdown_timeout, "shutdown_timeout"),
    }
    if collective_timeout is not None:
        collective_timeout = validate.check_timeout(collective_timeout, "collective_timeout")
    device_ids = validate.check_local_device_ids(local_device_ids)
    values, sources = resolve(cluster_resolver, coordinator_address=coordinator_address,
                              num_processes=num_processes, process_id=process_id)
    address = values["coordinator_address"]
    if coordinator_bind_address is not None:
        coordinator_bind_address = validate.check_address(
            coordinator_bind_address, name="coordinator_bind_address")
    elif address is not None:
        coordinator_bind_address = address
    single = values["num_processes"] == 1 and address is None
    kwargs: dict[str, Any] = {} if single else {
        **values,
        "local_device_ids": device_ids,
        "cluster_detection_method": cluster_detection_method,
        "initialization_timeout": joining.jax_initialization_timeout(
            timeouts["initialization_timeout"]),
        "heartbeat_timeout_seconds": joining.jax_heartbeat_timeout(
            timeouts["heartbeat_timeout_seconds"]),
        "shutdown_timeout_seconds": timeouts["shutdown_timeout_seconds"],
        "coordinator_bind_address": coordinator_bind_address,
    }
    config = ClusterConfig(**values, sources=sources, jax_kwargs=kwargs)
    with _lock:
        if _done is not None:
            if _done.jax_kwargs == kwargs and _done.sources == sources:
                return _done
            raise RuntimeError(
                "tps.initialize was already called with different arguments.\n"
                f"First call:  {_describe(_done)}\nThis call:   {_describe(config)}\n"
                "Fix: call tps.initialize once per process, at start-up; a running "
                "process cannot join another job."
            )
        if single:
            logger.info("tps.initialize: a single process; jax.distributed is not needed.")
            _done = config
            return config
        _check_not_started_elsewhere(values)
        if address is not None and validate.is_loopback(address):
            _unset_proxies()
        _set_collective_timeout(collective_timeout)
        _call_jax(kwargs, values, sources, cluster_resolver, timeouts)
        _done = config
        return config


def join_for_strategy(cluster_resolver: Any = None, *,
                      api: str = "MultiWorkerMirroredStrategy") -> None:
    """Joins the job a strategy's cluster describes, as TensorFlow does when it reads TF_CONFIG.

    Does nothing when no job of several processes is configured (no resolver, no
    ``TF_CONFIG`` cluster, no ``TPS_*`` variables) or when this process already
    joined it (``tps.initialize``, ``jax.distributed.initialize``).

    Args:
      cluster_resolver: the strategy's ``cluster_resolver`` argument.
      api: the strategy's name, for messages.

    Raises:
      RuntimeError: the configuration describes several processes but JAX already
        started in this process as a single one (it is too late to join), or this
        process joined a job of another size.
    """
    import jax

    if (cluster_resolver is None and not load_tf_config().get("cluster")
            and not os.environ.get(ENV_NUM_PROCESSES, "").strip()):
        return
    values, sources = resolve(cluster_resolver)
    wanted = values["num_processes"]
    if wanted is None or wanted < 2:
        return
    where = sources["num_processes"]
    with _lock:
        done = _done
    if done is not None or jax.distributed.is_initialized():
        from tpustrategy._src.jax_shims import coordination

        job = coordination.running_job()
        running = job.num_processes if job is not None else 1
        if running != wanted:
            raise RuntimeError(
                f"{api}: {where} describes a job of {wanted} processes, but this process "
                f"joined a job of {running} (tps.initialize or jax.distributed.initialize was "
                "called with other values).\nFix: give tps.initialize() the same cluster as "
                "the strategy, or call it without arguments so that it reads TF_CONFIG.")
        return
    from tpustrategy._src.jax_shims import backend

    if backend.backends_started():
        raise RuntimeError(
            f"{api}: {where} describes a job of {wanted} processes (this is process "
            f"{values['process_id']}), but JAX already started in this process as a single "
            f"process with {jax.device_count()} device(s): something used JAX (jax.devices(), "
            "an array, another strategy) before the strategy was created, and a running "
            "process cannot join a job.\nFix: call tps.initialize() first thing in the program "
            f"on every process, or create the {api} before anything else uses JAX.")
    initialize(cluster_resolver)


def _check_not_started_elsewhere(values: dict[str, Any]) -> None:
    from tpustrategy._src.jax_shims import coordination

    job = coordination.running_job()
    if job is None:
        return
    running = {"coordinator_address": job.coordinator_address,
               "num_processes": job.num_processes, "process_id": job.process_id}
    if all(values[k] in (None, running[k]) for k in _FIELDS):
        return
    raise RuntimeError(
        "tps.initialize: jax.distributed was already initialized (directly through JAX) "
        f"with {running}, which differs from {values}.\n"
        "Fix: call only one of tps.initialize and jax.distributed.initialize."
    )


def _call_jax(kwargs: dict[str, Any], values: dict[str, Any], sources: dict[str, str],
              cluster_resolver: Any, timeouts: dict[str, int]) -> None:
    import jax

    if jax.distributed.is_initialized():
        return
    init_timeout = timeouts["initialization_timeout"]
    monitor = joining.start_monitor(
        values, peers_of(values, sources, cluster_resolver),
        heartbeat_timeout=timeouts["heartbeat_timeout_seconds"],
        shutdown_timeout=timeouts["shutdown_timeout_seconds"])
    try:
        joining.join(kwargs, values, monitor, init_timeout)
    except ValueError as err:
        missing = [f for f in _FIELDS if values[f] is None]
        if not missing:
            raise
        raise ValueError(
            f"tps.initialize: could not find {', '.join(missing)} for this process: no "
            "argument, resolver, TPS_* environment variable or TF_CONFIG gave "
            f"{'it' if len(missing) == 1 else 'them'}, and JAX's detection (Cloud TPU, Slurm, "
            f"Open MPI, Kubernetes) found no cluster ({err}).\n"
            "Fix: pass coordinator_address=..., num_processes=..., process_id=... (or set "
            f"{ENV_COORDINATOR}, {ENV_NUM_PROCESSES}, {ENV_PROCESS_ID}), start the job with "
            "`python -m tpustrategy.launch -n N script.py`, or skip tps.initialize for a "
            "single process."
        ) from err
    except RuntimeError as err:
        if "must be called before" not in str(err):
            raise
        raise RuntimeError(
            "tps.initialize must run before JAX starts its backend, but something already "
            "used JAX devices (a strategy, jax.devices(), a computation).\n"
            "Fix: call tps.initialize() first thing in the program, before creating a "
            "strategy or any array."
        ) from err
    joining.connect_peers(monitor, values,
                          heartbeat_timeout=timeouts["heartbeat_timeout_seconds"],
                          shutdown_timeout=timeouts["shutdown_timeout_seconds"],
                          timeout=init_timeout)


def peers_of(values: dict[str, Any], sources: dict[str, str],
             cluster_resolver: Any = None) -> dict[int, Peer]:
    """What the configuration says about every process: address and TensorFlow task name.

    The launcher's ``TPS_PROCESS_ADDRESSES`` is used when the ``TPS_*`` variables
    gave the process id; a cluster spec (the resolver's, else ``TF_CONFIG``'s) when
    it has one task per process.
    """
    num = values["num_processes"]
    if num is None:
        return {}
    if sources.get("process_id") == ENV_PROCESS_ID:
        listed = [a.strip() for a in os.environ.get(ENV_PROCESS_ADDRESSES, "").split(",")]
        if len(listed) == num and all(listed):
            return {i: Peer(task=i, num_processes=num, address=a) for i, a in enumerate(listed)}
    spec = None
    for source in (cluster_resolver, TFConfigClusterResolver()):
        try:
            spec = source.cluster_spec() if source is not None else None
        except Exception:  # noqa: BLE001 - only for names in messages
            spec = None
        if spec is not None and len(jax_tasks(spec)) == num:
            break
        spec = None
    if spec is None:
        return {}
    return {i: Peer(task=i, num_processes=num, address=address, name=f"{job}:{index}")
            for i, (job, index, address) in enumerate(jax_tasks(spec))}


def _describe(config: ClusterConfig) -> str:
    if not config.jax_kwargs:
        return "single process (jax.distributed not started)"
    return ", ".join(f"{k}={v!r}" for k, v in config.jax_kwargs.items())


def _reset_for_tests() -> None:
    """Forgets an earlier call (unit tests patch jax.distributed.initialize)."""
    global _done
    with _lock:
        _done = None
