"""TFRecord reading and Example parsing throughput, side by side in one run.

Writes TFRecord files (1 KB records and, separately, 100 B records) into a temp
dir, warms the page cache, then measures with repetitions (medians):

  (a) raw read of the files (MB/s)
  (b) a minimal CRC-checked pure-Python framing loop (records/s), the ceiling
      of per-record Python work that the reader is compared with
  (c) tpustrategy's read_tfrecord_chunks (records/s and MB/s)
  (d) tpustrategy.data.TFRecordDataset(files).batch(1024), if importable
  (e) tf.data.TFRecordDataset(files).batch(1024) as NumPy, if TensorFlow is
      importable here or through --tf-python (a Python that has TensorFlow)
  (f) batch(1024) then parse_example of a 64-float feature + int64 label:
      ours vs tf.data (examples/s)

Usage:
  python benchmarks/data_throughput.py [--size-mb 200] [--quick] [--json out.json]
      [--tf-python /tmp/tfvenv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import google_crc32c
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tpustrategy._src.data.example_proto import make_example  # noqa: E402
from tpustrategy._src.data.parsing import FixedLenFeature, parse_example  # noqa: E402
from tpustrategy._src.data.record_io import read_tfrecord_chunks  # noqa: E402
from tpustrategy._src.data.writer import TFRecordWriter  # noqa: E402

N_FILES = 4
BATCH = 1024


def minimal_loop(path: str) -> int:
    """The minimal CRC-checked framing loop: one Python step per record."""
    crc = google_crc32c.value
    unpack_from = struct.unpack_from
    with open(path, "rb") as f:
        data = f.read()
    pos, n, count = 0, len(data), 0
    while pos < n:
        length, length_crc = unpack_from("<QI", data, pos)
        c = crc(data[pos : pos + 8])
        if ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF != length_crc:
            raise ValueError("length crc")
        end = pos + 12 + length
        record = data[pos + 12 : end]
        c = crc(record)
        if ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF != unpack_from(
            "<I", data, end
        )[0]:
            raise ValueError("data crc")
        pos = end + 4
        count += 1
    return count


def raw_read(path: str) -> int:
    """Reads the file into one reused 8 MB buffer (no allocation in the loop)."""
    buf = bytearray(8 << 20)
    total = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            total += n
    return total


def ours_read(path: str) -> int:
    return sum(len(records) for _, records in read_tfrecord_chunks(path))


def measure(fn: Callable[[], float], reps: int) -> tuple[float, float]:
    """Runs ``fn`` (which returns a work count) ``reps`` times; median rate and spread."""
    rates = []
    for _ in range(reps):
        t = time.perf_counter()
        work = fn()
        rates.append(work / (time.perf_counter() - t))
    med = statistics.median(rates)
    return med, (max(rates) - min(rates)) / med


def write_files(tmp: str, record_size: int, total_bytes: int) -> tuple[list[str], int]:
    rng = np.random.default_rng(record_size)
    per_file = max(total_bytes // N_FILES // (record_size + 16), 1)
    pool = rng.bytes(record_size + 4096)
    paths = []
    for i in range(N_FILES):
        path = os.path.join(tmp, f"r{record_size}_{i}.tfrecord")
        with TFRecordWriter(path) as w:
            for j in range(per_file):
                k = (j * 61) % 4096
                w.write(pool[k : k + record_size])
        paths.append(path)
    return paths, per_file * N_FILES


def write_examples(tmp: str, count: int) -> list[str]:
    rng = np.random.default_rng(0)
    xs = rng.random((count, 64)).astype(np.float32)
    paths = []
    per_file = count // N_FILES
    for i in range(N_FILES):
        path = os.path.join(tmp, f"examples_{i}.tfrecord")
        with TFRecordWriter(path) as w:
            for j in range(i * per_file, (i + 1) * per_file):
                w.write(make_example({"x": xs[j], "label": j % 10}).SerializeToString())
        paths.append(path)
    return paths


_TF_SCRIPT = r"""
import json, os, sys, time, statistics
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
cfg = json.loads(sys.argv[1])
out = {}
def rates(fn, reps):
    r = []
    for _ in range(reps):
        t = time.perf_counter(); n = fn(); r.append(n / (time.perf_counter() - t))
    return r
for name, files in cfg["reads"].items():
    def run(files=files):
        return sum(len(b) for b in tf.data.TFRecordDataset(files).batch(1024).as_numpy_iterator())
    run()
    out[name] = rates(run, cfg["reps"])
spec = {"x": tf.io.FixedLenFeature([64], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}
def parse():
    ds = tf.data.TFRecordDataset(cfg["examples"]).batch(1024).map(lambda s: tf.io.parse_example(s, spec))
    return sum(len(b["label"]) for b in ds.as_numpy_iterator())
parse()
out["parse"] = rates(parse, cfg["reps"])
print(json.dumps(out))
"""


def run_tf(
    args: argparse.Namespace, reads: dict[str, list[str]], examples: list[str]
) -> dict | None:
    cfg = json.dumps({"reads": reads, "examples": examples, "reps": args.reps})
    try:
        import tensorflow  # noqa: F401

        python = sys.executable
    except ImportError:
        python = args.tf_python
    if not python:
        return None
    proc = subprocess.run(
        [python, "-c", _TF_SCRIPT, cfg], capture_output=True, text=True, timeout=600
    )
    if proc.returncode:
        print(f"tf.data run failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tpsd_pipeline() -> object | None:
    try:
        import tpustrategy.data as tpsd

        return tpsd if hasattr(tpsd, "TFRecordDataset") else None
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=float, default=200.0, help="total TFRecord bytes to read")
    parser.add_argument("--quick", action="store_true", help="a ~20 MB run")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", help="write the result rows to this file")
    parser.add_argument(
        "--tf-python",
        default=os.environ.get("TPS_BENCH_TF_PYTHON"),
        help="a Python with TensorFlow, for the tf.data columns",
    )
    args = parser.parse_args()
    size = (20.0 if args.quick else args.size_mb) * 1e6
    rows: list[dict] = []

    def row(name, ours, baseline, unit, baseline_name):
        r = {
            "name": name,
            "ours": ours[0] if ours else None,
            "baseline": baseline[0] if baseline else None,
            "ratio": (ours[0] / baseline[0]) if ours and baseline else None,
            "unit": unit,
            "median": ours[0] if ours else None,
            "spread": ours[1] if ours else None,
            "baseline_name": baseline_name,
            "baseline_spread": baseline[1] if baseline else None,
        }
        rows.append(r)

    tpsd = tpsd_pipeline()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        sets = {}
        for rs in (1000, 100):
            sets[rs] = write_files(tmp, rs, int(size / 2))
        n_examples = max(int(size / 2 / 300) // N_FILES * N_FILES, N_FILES * BATCH)
        ex_files = write_examples(tmp, n_examples)
        print(
            f"wrote {size / 1e6:.0f} MB of records + {n_examples} examples in {time.perf_counter() - t0:.1f}s"
        )
        for paths, _ in sets.values():
            for p in paths:
                raw_read(p)  # warm the page cache

        tf_rates = run_tf(args, {str(rs): paths for rs, (paths, _) in sets.items()}, ex_files)
        for rs, (paths, count) in sets.items():
            nbytes = sum(os.path.getsize(p) for p in paths)
            label = "1 KB" if rs == 1000 else "100 B"
            raw = measure(lambda paths=paths: sum(map(raw_read, paths)) / 1e6, args.reps)
            mini = measure(lambda paths=paths: sum(map(minimal_loop, paths)), args.reps)
            ours = measure(lambda paths=paths: sum(map(ours_read, paths)), args.reps)
            row(f"{label}: raw read of the files", raw, None, "MB/s", None)
            row(
                f"{label}: read_tfrecord_chunks vs minimal CRC loop",
                ours,
                mini,
                "records/s",
                "minimal loop",
            )
            row(
                f"{label}: read_tfrecord_chunks MB/s vs raw read",
                (ours[0] * nbytes / count / 1e6, ours[1]),
                raw,
                "MB/s",
                "raw read",
            )
            tf_r = None
            if tf_rates:
                rates = tf_rates[str(rs)]
                med = statistics.median(rates)
                tf_r = (med, (max(rates) - min(rates)) / med)
                row(
                    f"{label}: read_tfrecord_chunks vs tf.data batch(1024)",
                    ours,
                    tf_r,
                    "records/s",
                    "tf.data",
                )
            if tpsd is not None:

                def pipe(paths=paths):
                    return sum(len(b) for b in tpsd.TFRecordDataset(paths).batch(BATCH))

                pipe()
                ds = measure(pipe, args.reps)
                row(
                    f"{label}: tpsd.TFRecordDataset.batch(1024) vs minimal loop",
                    ds,
                    mini,
                    "records/s",
                    "minimal loop",
                )
                if tf_r:
                    row(
                        f"{label}: tpsd.TFRecordDataset.batch(1024) vs tf.data",
                        ds,
                        tf_r,
                        "records/s",
                        "tf.data",
                    )
            else:
                row(
                    f"{label}: tpsd.TFRecordDataset.batch(1024) (skipped: tpustrategy.data has no TFRecordDataset yet)",
                    None,
                    None,
                    "records/s",
                    None,
                )

        spec = {"x": FixedLenFeature([64], "float32"), "label": FixedLenFeature([], "int64")}

        def parse_ours():
            n = 0
            for path in ex_files:
                pending: list[bytes] = []
                for _, records in read_tfrecord_chunks(path):
                    pending += records
                    while len(pending) >= BATCH:
                        n += len(parse_example(pending[:BATCH], spec)["label"])
                        del pending[:BATCH]
                if pending:
                    n += len(parse_example(pending, spec)["label"])
            return n

        batches = [r for p in ex_files for _, r in read_tfrecord_chunks(p)]
        parse_only = measure(
            lambda: sum(len(parse_example(b, spec)["label"]) for b in batches), args.reps
        )
        ours_parse = measure(parse_ours, args.reps)
        tf_parse = None
        if tf_rates:
            med = statistics.median(tf_rates["parse"])
            tf_parse = (med, (max(tf_rates["parse"]) - min(tf_rates["parse"])) / med)
        row(
            "parse_example alone, batches of 1024 (64 floats + label)",
            parse_only,
            None,
            "examples/s",
            None,
        )
        row(
            "read + batch(1024) + parse_example vs tf.data",
            ours_parse,
            tf_parse,
            "examples/s",
            "tf.data",
        )
        if tpsd is not None:

            def tpsd_parse():
                ds = (
                    tpsd.TFRecordDataset(ex_files)
                    .batch(BATCH)
                    .map(lambda s: parse_example(s, spec))
                )
                return sum(len(b["label"]) for b in ds)

            tpsd_parse()
            row(
                "tpsd TFRecordDataset.batch(1024).map(parse_example) vs tf.data",
                measure(tpsd_parse, args.reps),
                tf_parse,
                "examples/s",
                "tf.data",
            )

    width = max(len(r["name"]) for r in rows)
    print(
        f"\n{'benchmark':<{width}}  {'ours':>12}  {'baseline':>12}  {'ratio':>6}  unit (spread of ours)"
    )

    def fmt(x):
        return "-" if x is None else (f"{x / 1e6:.2f}M" if x >= 1e5 else f"{x:,.0f}")

    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        spread = "" if r["spread"] is None else f" (±{r['spread'] * 100:.0f}%)"
        base = f" vs {r['baseline_name']}" if r["baseline_name"] and r["baseline"] else ""
        print(
            f"{r['name']:<{width}}  {fmt(r['ours']):>12}  {fmt(r['baseline']):>12}  {ratio:>6}  "
            f"{r['unit']}{spread}{base}"
        )
    if not tf_rates:
        print("tf.data columns skipped: TensorFlow not importable (pass --tf-python).")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
