"""Parallel map of a Python/NumPy function on 1 vs 2 cores (``taskset``): does it scale?

The map function parses a 3,100-byte record (a 28-byte header of struct fields,
read field by field in Python, and a 32x32x3 image) and decodes the image
(reshape, float32, normalise, per-channel mean), about 50 µs of Python and
NumPy per element: the interpreter lock serialises it on threads.

The same script runs twice under ``taskset``: ``-c 0`` (AUTOTUNE = 1 worker:
a thread) and ``-c 0,1`` (AUTOTUNE = 2 workers: worker processes, handed over
after the threads measured the function's CPU cost). Each run times
``from_tensor_slices(records).map(parse_decode, AUTOTUNE).batch(256)``:

* steady state: one iterator over the repeated pipeline (a training loop),
  ``rounds`` windows of ``n`` elements after the hand-over to processes;
* passes: a fresh iterator per pass over the ``n`` records, so the pool's
  start-up (fresh interpreters importing NumPy) is in the time.

Rows: elements/s median and min..max, and the 2-core / 1-core ratio of the
medians (with min/max..max/min).

Usage:
  python benchmarks/data_parallel_scaling.py [--n 20000] [--rounds 5] [--json out.json]
  python benchmarks/data_parallel_scaling.py --child [--n ...]   (one run, this CPU set)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import tpustrategy.data as tpsd  # noqa: E402

HEADER = "<7i"  # 28 bytes: id, label, height, width, channels, flags, checksum
HEADER_SIZE = struct.calcsize(HEADER)
RECORD = HEADER_SIZE + 32 * 32 * 3
MEAN = np.array([0.485, 0.456, 0.406], np.float32)


def make_records(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = np.empty((n, RECORD), np.uint8)
    out[:, HEADER_SIZE:] = rng.integers(0, 256, (n, RECORD - HEADER_SIZE), dtype=np.uint8)
    for i in range(n):
        out[i, :HEADER_SIZE] = np.frombuffer(struct.pack(HEADER, i, i % 10, 32, 32, 3, 1, i * 7 % 1000), np.uint8)
    return out


def parse_decode(record: np.ndarray) -> tuple[np.ndarray, np.int64]:
    """Parse + decode: ~50 µs of Python and NumPy on one element."""
    raw = record.tobytes()
    rid, label, h, w, c, flags, check = struct.unpack_from(HEADER, raw)
    acc = 0
    for i, field in enumerate((rid, label, h, w, c, flags, check) * 24):  # field-by-field validation
        acc = (acc * 131 + field + i) & 0xFFFF
    img = np.frombuffer(raw, np.uint8, offset=HEADER_SIZE).reshape(h, w, c)
    x = img.astype(np.float32) * (1.0 / 255.0)
    x -= MEAN
    x /= x.std() + 1e-6
    if flags & 1:
        x = x[:, ::-1]
    x = np.ascontiguousarray(x) + np.float32(acc & 1) * 0.0
    return x, np.int64(label)


def child(n: int, rounds: int) -> dict:
    from tpustrategy._src.data.parallel.processes import STATS
    from tpustrategy._src.data.parallel.threads import cpu_count

    records = make_records(n)
    ds = tpsd.Dataset.from_tensor_slices(records).map(parse_decode, num_parallel_calls=tpsd.AUTOTUNE).batch(256)
    t0 = time.perf_counter()
    for r in records[:2000]:
        parse_decode(r)
    per_elem_us = (time.perf_counter() - t0) / 2000 * 1e6
    # Steady state: one iterator over the repeated pipeline (as a training loop has it), timed in windows of
    # n elements after the hand-over to worker processes (when there is one: up to 60 s of warm-up).
    it = iter(ds.repeat())
    t_first = time.perf_counter()
    next(it)
    first = time.perf_counter() - t_first
    deadline = time.perf_counter() + 60
    for _ in range(n // 256):
        next(it)
    while cpu_count() > 1 and STATS["worker_elements"] == 0 and time.perf_counter() < deadline:
        next(it)
    steady = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        count = 0
        while count < n:
            count += len(next(it)[1])
        steady.append(count / (time.perf_counter() - t0))
    del it
    # Passes: a fresh iterator per pass over the n records, the pool's start-up included.
    passes = []
    for _ in range(max(1, rounds // 2)):
        t0 = time.perf_counter()
        count = sum(len(y) for _x, y in ds)
        passes.append(count / (time.perf_counter() - t0))
    pools = STATS["pools"]
    return {"cpus": cpu_count(), "per_element_us_inline": per_elem_us, "steady": steady, "passes": passes,
            "first_batch_s": first, "pools": pools, "pool_start_s": STATS["pool_start_s"] / pools if pools else None,
            "worker_elements": STATS["worker_elements"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--child", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    if a.child:
        print(json.dumps(child(a.n, a.rounds)))
        return
    runs = {}
    for cpus in ("0", "0,1"):
        out = subprocess.run(["taskset", "-c", cpus, sys.executable, os.path.abspath(__file__), "--child",
                              "--n", str(a.n), "--rounds", str(a.rounds)], capture_output=True, text=True, check=True)
        runs[cpus] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (the machine is shared: spreads are wide)")
    print(f"{'row':52s} {'median el/s':>12s} {'min..max':>19s}")
    for key, what in (("steady", "one iterator, steady state"), ("passes", "fresh iterator per pass")):
        for r in runs.values():
            rates = r[key]
            cores = f"{r['cpus']} core" + "s" * (r["cpus"] > 1)
            print(f"{'parse+decode map, AUTOTUNE, ' + cores + ', ' + what:52s} {statistics.median(rates):12,.0f} "
                  f"{min(rates):9,.0f}..{max(rates):<9,.0f}")
        one, two = (statistics.median(runs[c][key]) for c in ("0", "0,1"))
        lo = min(runs["0,1"][key]) / max(runs["0"][key])
        hi = max(runs["0,1"][key]) / min(runs["0"][key])
        print(f"{'  scaling 2 cores / 1 core (medians), ' + what:52s} {two / one:11.2f}x {lo:9.2f}..{hi:<9.2f}")
    for r in runs.values():
        print(f"  {r['cpus']} core(s): inline {r['per_element_us_inline']:.0f} µs/element; first batch "
              f"{r['first_batch_s']:.2f} s; " + (f"{r['pools']} pools started, {r['pool_start_s']:.2f} s each, "
              f"{r['worker_elements']} elements mapped in processes" if r["pools"] else "threads only"))
    one, two = (statistics.median(runs[c]["steady"]) for c in ("0", "0,1"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "scaling": two / one}, f, indent=1)


if __name__ == "__main__":
    main()
