"""Coordinator requests per training step: the input agreement at P = 2, 4 (real) and 64–1,024 (simulated).

Real jobs: ``python -m tpustrategy.launch -n P --devices-per-process 2`` runs this
script with ``--worker``. Each process wraps JAX's coordination-service client in
a counting proxy and runs the README's loop (``next(it)`` inside ``@tps.function``)
over an infinite ``repeat()`` dataset, then an epoch of a finite dataset with a
short last batch (DATA sharding), then an epoch of
``distribute_datasets_from_function`` whose pipelines have different lengths (ragged
last steps). The baseline is the previous protocol (one key-value set, P blocking
gets and one delete per step), run in the same processes through the same proxy.
Row: requests per process per step (lower is better), one value per process.

Simulated pod: P coordination-service clients in one process (one thread each)
and the service in its own helper process (``cluster/coordinator.py``), each
client running ``StepAgreement`` for a counted step (a dataset whose step count
is not provable; an infinite one makes no request at all). Rows: requests per
step (all processes) and the coordinator's CPU time per step (user + system time
of the service's process), P = 64, 256, 1,024; the previous protocol as baseline
where it finishes in reasonable time (P <= 64; P·(P + 2) requests per step).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _common  # noqa: E402

WORKER = "--worker"


class Counting:
    """Counts every call to the coordination-service client it wraps."""

    def __init__(self, client: Any):
        self._client = client
        self.calls: collections.Counter[str] = collections.Counter()

    def total(self) -> int:
        return sum(self.calls.values())

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return call


class Legacy:
    """The previous per-step protocol: set own row, blocking get of every row, delete row n-2."""

    def __init__(self, client: Any, process: int, count: int, tag: str):
        self.client, self.process, self.count, self.tag, self.step = client, process, count, tag, 0

    def exchange(self, row: list[int]) -> list[list[int]]:
        key = f"legacy/{self.tag}/{self.step}"
        self.client.key_value_set(f"{key}/{self.process}", json.dumps(row))
        rows = [json.loads(self.client.blocking_key_value_get(f"{key}/{q}", 60_000)) for q in range(self.count)]
        if self.step >= 2:
            self.client.key_value_delete(f"legacy/{self.tag}/{self.step - 2}/{self.process}")
        self.step += 1
        return rows


# -- real jobs -----------------------------------------------------------------------------------


def worker(steps: int) -> None:
    import tpustrategy as tps

    tps.initialize(initialization_timeout=120, heartbeat_timeout=60)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src import distributed  # noqa: I001 - the proxy goes where jax_shims reads the client

    import tpustrategy.data as tpsd

    strategy = tps.MultiWorkerMirroredStrategy()
    # After the backend started: its gloo collectives take the real client (a C++ type).
    proxy = Counting(distributed.global_state.client)
    distributed.global_state.client = proxy
    n, me, procs = strategy.num_replicas_in_sync, jax.process_index(), jax.process_count()
    with strategy.scope():
        w = tps.Variable(jnp.zeros((8, 1)))

    def step(x, y):
        loss, g = jax.value_and_grad(lambda w_: jnp.mean((x @ w_ - y) ** 2))(w.read_value())
        w.assign_sub(0.1 * tps.get_replica_context().all_reduce("MEAN", g))
        return loss

    @tps.function
    def train(it: Any) -> Any:
        return strategy.reduce("MEAN", strategy.run(step, next(it)), axis=None)

    def counted(loop: Any) -> tuple[float, int, list[float]]:
        before = proxy.total()
        taken, losses = loop()
        return (proxy.total() - before) / max(1, taken), taken, losses

    xs, ys = np.ones((256, 8), np.float32), np.ones((256, 1), np.float32)
    repeat_it = iter(strategy.experimental_distribute_dataset(
        tpsd.Dataset.from_tensor_slices((xs, ys)).repeat().batch(8 * n)))
    float(train(repeat_it))  # compile outside the count

    def repeat_loop() -> tuple[int, list[float]]:
        return steps, [float(train(repeat_it)) for _ in range(steps)]

    def finite_loop() -> tuple[int, list[float]]:
        count = 8 * n * 5 + 3 * n // 2  # five full batches and a short one
        ds = tpsd.Dataset.from_tensor_slices((np.ones((count, 8), np.float32), np.ones((count, 1), np.float32)))
        options = tpsd.Options()
        options.experimental_distribute.auto_shard_policy = tpsd.AutoShardPolicy.DATA
        losses = [float(strategy.reduce("MEAN", strategy.run(step, batch), axis=None))
                  for batch in strategy.experimental_distribute_dataset(ds.batch(8 * n).with_options(options))]
        return len(losses), losses

    def uneven_loop() -> tuple[int, list[float]]:
        def per_process(ctx: Any) -> Any:
            rows = 8 * (6 + 2 * ctx.input_pipeline_id)
            return tpsd.Dataset.from_tensor_slices((np.ones((rows, 8), np.float32),
                                                    np.ones((rows, 1), np.float32))).batch(4)
        losses = [float(strategy.reduce("SUM", strategy.run(step, batch), axis=None))
                  for batch in strategy.distribute_datasets_from_function(per_process)]
        return len(losses), losses

    results = {}
    for name, loop in (("repeat", repeat_loop), ("finite", finite_loop), ("uneven", uneven_loop)):
        per_step, taken, losses = counted(loop)
        results[name] = {"per_step": per_step, "steps": taken, "losses": losses}
    legacy = Legacy(proxy, me, procs, "bench")
    before = proxy.total()
    for _ in range(steps):
        legacy.exchange([1, 2, 2])
    results["legacy"] = {"per_step": (proxy.total() - before) / steps, "steps": steps}
    print("RESULT " + json.dumps({"process": me, "processes": procs, **results}), flush=True)


def run_job(processes: int, steps: int) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "tpustrategy.launch", "-n", str(processes), "--devices-per-process", "2",
           "--timeout", "400", os.path.abspath(__file__), WORKER, str(steps)]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS" and not k.startswith("TPS_")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=460, cwd=ROOT, env=env)
    found = []
    for line in proc.stdout.splitlines():
        _, _, rest = line.partition(" ")
        if rest.startswith("RESULT "):
            found.append(json.loads(rest[len("RESULT "):]))
    if proc.returncode != 0 or len(found) != processes:
        raise RuntimeError(f"coordinator_requests: the {processes}-process job failed "
                           f"(code {proc.returncode}):\n{proc.stderr[-3000:]}")
    return sorted(found, key=lambda r: r["process"])


# -- simulated pod -------------------------------------------------------------------------------


def _parallel(calls: list[Any]) -> None:
    errors: list[BaseException] = []

    def run(call: Any) -> None:
        try:
            call()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def simulate(processes: int, steps: int, legacy: bool) -> dict[str, float]:
    """P clients of one service (in its helper process); per step: requests and coordinator CPU seconds."""
    from jaxlib import _jax

    from tpustrategy._src.cluster import coordinator
    from tpustrategy._src.cluster.launch import free_port
    from tpustrategy._src.input.agreement import Rule, StepAgreement

    address = f"127.0.0.1:{free_port()}"
    service = coordinator.start(address, processes, heartbeat_timeout=600, shutdown_timeout=120)
    clients = [_jax.get_distributed_runtime_client(address, i, init_timeout=300, heartbeat_timeout=600)
               for i in range(processes)]
    try:
        _parallel([c.connect for c in clients])
        proxies = [Counting(c) for c in clients]
        rule = Rule(False, (2,) * (2 * processes), False, "simulated: a counted exchange")
        agreements = [StepAgreement(rule, 2, None, 600, process=i, num_processes=processes, client=p,
                                    iterator_id=1) for i, p in enumerate(proxies)]
        olds = [Legacy(p, i, processes, "sim") for i, p in enumerate(proxies)]
        out: dict[str, float] = {}
        sides = [("ours", lambda i: agreements[i].exchange([2, 2]))]
        if legacy:
            sides.append(("legacy", lambda i: olds[i].exchange([1, 2, 2])))
        for side, one in sides:
            before_requests = sum(p.total() for p in proxies)
            cpu, wall = _cpu_seconds(service.proc.pid), time.perf_counter()

            def run(i: int, one: Any = one) -> None:
                for _ in range(steps):
                    one(i)

            _parallel([lambda i=i: run(i) for i in range(processes)])
            out[f"{side}_wall"] = (time.perf_counter() - wall) / steps
            out[f"{side}_cpu"] = (_cpu_seconds(service.proc.pid) - cpu) / steps
            out[f"{side}_requests"] = (sum(p.total() for p in proxies) - before_requests) / steps
        return out
    finally:
        _parallel([c.shutdown for c in clients])  # together: shutdown is a barrier
        service.shutdown()
        service.proc.wait(30)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == WORKER:
        worker(int(sys.argv[2]))
        return
    p = _common.parser(__doc__.splitlines()[0])
    args = p.parse_args()
    steps = 10 if args.quick else 30
    rows = []
    for processes in (2, 4):
        found = run_job(processes, steps)
        legacy = [r["legacy"]["per_step"] for r in found]
        for case, words in (("repeat", "infinite repeat() dataset"),
                            ("finite", "finite dataset, short last batch (DATA)"),
                            ("uneven", "uneven pipelines, ragged last steps (from_function)")):
            ours = [r[case]["per_step"] for r in found]
            same = len({json.dumps(r[case]["losses"]) for r in found}) == 1
            rows.append(_common.row(
                f"coordinator requests per process per step, {words}, P={processes}", ours, legacy,
                "requests/step", note=f"{found[0][case]['steps']} steps; baseline: previous protocol "
                f"(P + 2); losses equal on every process: {same}"))
    per_request = None  # the service's CPU seconds per request of the previous protocol (measured at P=64)
    for processes in ((64, 256) if args.quick else (64, 256, 1024)):
        sim_steps = max(3, 1024 // processes)
        result = simulate(processes, sim_steps, legacy=processes <= 64)
        if "legacy_requests" in result:
            per_request = result["legacy_cpu"] / result["legacy_requests"]
            legacy_req, legacy_cpu, how = [result["legacy_requests"]], [result["legacy_cpu"] * 1e3], "measured"
        else:
            legacy_req = [float(processes * (processes + 2))]
            legacy_cpu = [per_request * legacy_req[0] * 1e3] if per_request else [float("nan")]
            how = "modelled: P·(P + 2) requests at P=64's CPU time per request"
        rows.append(_common.row(
            f"simulated pod P={processes}: coordinator requests per step (all processes)",
            [result["ours_requests"]], legacy_req, "requests/step", interleaved=False,
            note=f"baseline {how}"))
        rows.append(_common.row(
            f"simulated pod P={processes}: coordinator CPU time per step", [result["ours_cpu"] * 1e3],
            legacy_cpu, "ms/step", interleaved=False,
            note=f"service in its own process; baseline {how}; ours wall {result['ours_wall'] * 1e3:.1f} "
                 f"ms/step over {sim_steps} steps (clients share the machine's cores)"))
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
