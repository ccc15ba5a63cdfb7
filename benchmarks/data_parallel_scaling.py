"""Parallel map of a Python/NumPy function on 1 vs 2 cores (``taskset``): does it scale?

The map function parses a 3,100-byte record (a 28-byte header of struct fields,
read field by field in Python, and a 32x32x3 image) and decodes the image
(reshape, float32, normalise, per-channel mean), about 50 µs of Python and
NumPy per element: the interpreter lock serialises it on threads.

The same script runs twice under ``taskset``: ``-c 0`` (AUTOTUNE = 1 worker:
a thread) and ``-c 0,1`` (AUTOTUNE = 2 workers: worker processes, handed over
after the threads measured the function's CPU cost). Each run times
``from_tensor_slices(records).map(parse_decode, AUTOTUNE).batch(256)`` over
the records, rounds times, after one untimed warm-up pass; the pool starts
once per iterator, so each round creates a fresh iterator and its start-up
is in the time (``first batch`` reports it alone). Rows: elements/s median
and min..max over rounds, and the 2-core / 1-core ratio of the medians.

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

HEADER = struct.Struct("<7i")  # 28 bytes: id, label, height, width, channels, flags, checksum
RECORD = HEADER.size + 32 * 32 * 3
MEAN = np.array([0.485, 0.456, 0.406], np.float32)


def make_records(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = np.empty((n, RECORD), np.uint8)
    out[:, HEADER.size :] = rng.integers(0, 256, (n, RECORD - HEADER.size), dtype=np.uint8)
    for i in range(n):
        out[i, : HEADER.size] = np.frombuffer(HEADER.pack(i, i % 10, 32, 32, 3, 1, i * 7 % 1000), np.uint8)
    return out


def parse_decode(record: np.ndarray) -> tuple[np.ndarray, np.int64]:
    """Parse + decode: ~50 µs of Python and NumPy on one element."""
    raw = record.tobytes()
    rid, label, h, w, c, flags, check = HEADER.unpack_from(raw)
    acc = 0
    for i, field in enumerate((rid, label, h, w, c, flags, check) * 24):  # field-by-field validation
        acc = (acc * 131 + field + i) & 0xFFFF
    img = np.frombuffer(raw, np.uint8, offset=HEADER.size).reshape(h, w, c)
    x = img.astype(np.float32) * (1.0 / 255.0)
    x -= MEAN
    x /= x.std() + 1e-6
    if flags & 1:
        x = x[:, ::-1]
    x = np.ascontiguousarray(x) + np.float32(acc & 1) * 0.0
    return x, np.int64(label)


def child(n: int, rounds: int) -> dict:
    records = make_records(n)
    ds = tpsd.Dataset.from_tensor_slices(records).map(parse_decode, num_parallel_calls=tpsd.AUTOTUNE).batch(256)
    t0 = time.perf_counter()
    sequential = sum(len(parse_decode(r)[0]) for r in records[:2000])
    per_elem_us = (time.perf_counter() - t0) / 2000 * 1e6
    assert sequential
    for _ in ds:  # warm-up pass (page cache, imports)
        pass
    rates, firsts = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        it = iter(ds)
        count = len(next(it)[1])
        firsts.append(time.perf_counter() - t0)
        for _x, y in it:
            count += len(y)
        rates.append(count / (time.perf_counter() - t0))
        del it
    from tpustrategy._src.data.parallel.processes import STATS
    from tpustrategy._src.data.parallel.threads import cpu_count

    pools = STATS["pools"]
    return {"cpus": cpu_count(), "per_element_us_inline": per_elem_us, "rates": rates, "first_batch_s": firsts,
            "pools": pools, "pool_start_s": STATS["pool_start_s"] / pools if pools else None,
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
    print(f"{'row':58s} {'median el/s':>12s} {'min..max':>19s} {'first batch s':>14s}")
    for r in runs.values():
        rates = r["rates"]
        print(f"{'parallel map parse+decode (' + str(r['cpus']) + ' core' + 's' * (r['cpus'] > 1) + ', AUTOTUNE)':58s} "
              f"{statistics.median(rates):12,.0f} {min(rates):9,.0f}..{max(rates):<9,.0f} "
              f"{statistics.median(r['first_batch_s']):14.2f}   (inline {r['per_element_us_inline']:.0f} µs/elem; "
              + (f"{r['pools']} pools, {r['pool_start_s']:.2f} s to start each, {r['worker_elements']} elements "
                 "mapped in processes)" if r["pools"] else "threads only)"))
    one, two = (statistics.median(runs[c]["rates"]) for c in ("0", "0,1"))
    lo = min(runs["0,1"]["rates"]) / max(runs["0"]["rates"])
    hi = max(runs["0,1"]["rates"]) / min(runs["0"]["rates"])
    print(f"{'scaling 2 cores / 1 core (medians)':58s} {two / one:12.2f}x {lo:9.2f}..{hi:<9.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "scaling": two / one}, f, indent=1)


if __name__ == "__main__":
    main()
