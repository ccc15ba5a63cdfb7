"""Input overlap: a train step fed from a TFRecord pipeline vs from batches already on the devices.

MLP 64 -> 512 -> 512 -> 10, 8 replicas, global batch 1024, optax SGD. The step
is one ``tps.function`` (``strategy.run`` + ``strategy.reduce`` inside, one
dispatch per call) and is measured two ways, interleaved in one process:

  pipeline-fed     ``next(iterator)`` inside the ``tps.function``: the iterator
                   of ``experimental_distribute_dataset(TFRecordDataset(files)
                   .repeat().batch(1024).map(parse_example))``, prepared on the
                   library's background thread (``prefetch_to_device=2``).
  device-resident  the same step body given one fixed, pre-distributed batch.
  in-memory-fed    as pipeline-fed, from the same batches parsed once and kept in
                   memory (``.take(k).cache().repeat()``): a pipeline fast enough
                   that what is left is the hand-off and the transfer (target <= 1.05).

``--devices N`` runs it on N devices (1: what a one-accelerator user has).

Both are timed pipelined (the result from 4 calls back is waited on, as the
library itself bounds the programs in flight), so the input work can overlap the
step. ratio = pipeline-fed / device-resident seconds per step, lower is better
(target <= 1.10).

Further rows say where the extra time goes, per step or batch, measured in the
same rounds: the process CPU time per step on both sides (the host work the
pipeline adds: on a machine whose cores the step already keeps busy it cannot
hide); the host pipeline alone (read + batch + parse, what the prefetch thread
does); the split + ``device_put`` of one parsed batch; and the time the calling
thread spends inside ``next(iterator)`` during the pipeline-fed run (the part of
input work that is not overlapped with the step).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_DEVICES = int(sys.argv[sys.argv.index("--devices") + 1]) if "--devices" in sys.argv else 8
_common.setup_devices(_DEVICES)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _mlp import GLOBAL_BATCH, init_params, loss_fn  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402
from tpustrategy._src.input import to_device  # noqa: E402

LR = 0.01
N_FILES = 4
FEATURES = {"x": tpsd.FixedLenFeature([64], "float32"), "label": tpsd.FixedLenFeature([], "int64")}


def write_records(tmp: str, count: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(count, 64)).astype(np.float32)
    labels = rng.integers(0, 10, size=count)
    paths, per_file = [], count // N_FILES
    for i in range(N_FILES):
        path = os.path.join(tmp, f"train-{i:02d}.tfrecord")
        with tpsd.TFRecordWriter(path) as w:
            for j in range(i * per_file, (i + 1) * per_file):
                w.write(tpsd.make_example({"x": xs[j], "label": int(labels[j])}).SerializeToString())
        paths.append(path)
    return paths, xs, labels


def pipeline(files: list[str]):
    return tpsd.TFRecordDataset(files).repeat().batch(GLOBAL_BATCH).map(lambda s: tpsd.parse_example(s, FEATURES))


ROW_NAMES = ["TFRecord pipeline-fed vs device-resident train step",
             "in-memory pipeline-fed vs device-resident train step",
             "  process CPU time per step, pipeline-fed vs device-resident"] + [
    f"  breakdown: {label} vs resident step" for label in (
        "host pipeline alone (read+batch+parse)", "split + device_put of one parsed batch",
        "calling thread inside next(iterator)")]


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=8, help="fake CPU devices when there is no accelerator")
    args = p.parse_args()
    optax, missing = _common.optional_module("optax")
    if optax is None:
        _common.skip_all(ROW_NAMES, missing, args.json)
    strategy = tps.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    tx = optax.sgd(LR)
    iters, rounds = (15, 3) if args.quick else (15, 11)
    count = (8 if args.quick else 24) * GLOBAL_BATCH  # several files, repeated

    def replica_step(params, opt_state, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(ctx.all_reduce("MEAN", grads), opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def step(params, opt_state, batch):
        params, opt_state, loss = strategy.run(replica_step, (params, opt_state, batch["x"], batch["label"]))
        return params, opt_state, strategy.reduce("MEAN", loss, axis=None)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        files, xs, labels = write_records(tmp, count)
        print(f"wrote {count} Examples into {N_FILES} files in {time.perf_counter() - t0:.1f}s")

        dist = strategy.experimental_distribute_dataset(pipeline(files))
        iterator = iter(dist)

        @tps.function
        def pipeline_step(params, opt_state):
            return step(params, opt_state, next(iterator))

        cached = strategy.experimental_distribute_dataset(
            pipeline(files).take(count // GLOBAL_BATCH).cache().repeat())
        cached_iterator = iter(cached)

        @tps.function
        def cached_step(params, opt_state):
            return step(params, opt_state, next(cached_iterator))

        @tps.function
        def resident_step(params, opt_state, batch):
            return step(params, opt_state, batch)

        # One batch, already distributed and on the devices: the first batch of the files.
        fixed = next(iter(strategy.experimental_distribute_dataset(pipeline(files))))
        got = np.concatenate([np.asarray(v) for v in strategy.experimental_local_results(fixed["x"])])
        np.testing.assert_array_equal(got, xs[:GLOBAL_BATCH])
        _common.wait(fixed)

        p0 = init_params(0)
        st = {"pipe": (p0, tx.init(p0)), "res": (p0, tx.init(p0)), "mem": (p0, tx.init(p0))}

        def pipe_one():
            params, opt_state, loss = pipeline_step(*st["pipe"])
            st["pipe"] = (params, opt_state)
            return loss

        def mem_one():
            params, opt_state, loss = cached_step(*st["mem"])
            st["mem"] = (params, opt_state)
            return loss

        def res_one():
            params, opt_state, loss = resident_step(*st["res"], fixed)
            st["res"] = (params, opt_state)
            return loss

        # Breakdown: each component alone, per batch of 1024.
        host_it = iter(pipeline(files))
        parsed = next(host_it)
        pieces = [{k: v[i * GLOBAL_BATCH // n:(i + 1) * GLOBAL_BATCH // n] for k, v in parsed.items()}
                  for i in range(n)]

        def host_one():
            return next(host_it)

        def put_one():
            return to_device.group(strategy, pieces, True, parsed)

        consumer: list[float] = []  # calling-thread seconds inside next(iterator), per pull
        pull = iterator.tps_pull

        def timed_pull():
            t = time.perf_counter()
            out = pull()
            consumer.append(time.perf_counter() - t)
            return out

        iterator.tps_pull = timed_pull  # what tps.function calls for next(iterator)
        cpu: dict[str, list[float]] = {"pipe": [], "res": []}
        res_consumer: list[float] = []

        def measured(key, fn):
            def run():
                c, k = time.process_time(), len(consumer)
                wall = _common.timed_pipelined(fn, iters)
                cpu[key].append((time.process_time() - c) / iters)
                if key == "pipe":  # this round's pulls by the calling thread
                    res_consumer.append(statistics.median(consumer[k:]))
                return wall
            return run

        for fn in (pipe_one, res_one, mem_one, put_one, host_one):  # compile and warm up
            _common.timed_sync(fn, 5)
        for _ in range(count // GLOBAL_BATCH):  # the in-memory pipeline's first pass fills its cache
            mem_one()
        consumer.clear()
        res = _common.side_by_side({
            "pipe": measured("pipe", pipe_one),
            "res": measured("res", res_one),
            "mem": lambda: _common.timed_pipelined(mem_one, iters),
            "host": lambda: _common.timed_sync(host_one, iters),
            "put": lambda: _common.timed_sync(put_one, iters),
        }, rounds)
        losses = [float(np.asarray(strategy.experimental_local_results(x)[0])) for x in (pipe_one(), res_one())]
        assert all(np.isfinite(v) for v in losses), losses
        iterator.close()
        cached_iterator.close()

    res_median = statistics.median(res["res"])
    rows = [
        _common.row(ROW_NAMES[0], res["pipe"], res["res"],
                    "s/step", note=f"tps.function + next(iterator), pipelined, {n} devices; target <= 1.10"),
        _common.row(ROW_NAMES[1], res["mem"], res["res"],
                    "s/step", note=f"batches parsed once, kept in memory, {n} devices; target <= 1.05"),
    ]
    extra_cpu = statistics.median(cpu["pipe"]) - statistics.median(cpu["res"])
    rows.append(_common.row(ROW_NAMES[2], cpu["pipe"], cpu["res"],
                            "cpu-s/step", note=f"+{extra_cpu * 1e3:.2f} ms CPU/step; {os.cpu_count()} cores"))
    res["consumer"] = res_consumer
    for key, name in zip(("host", "put", "consumer"), ROW_NAMES[3:]):
        rows.append(_common.row(name, res[key], res["res"], "s/batch",
                                note=f"{statistics.median(res[key]) / res_median:.1%} of a step"))
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
