"""TFRecord reading and Example parsing throughput (host only: no JAX programs).

Writes TFRecord files (1 KB records and, separately, 100 B records) and Example
files (64 floats + an int64 label) into a temp dir, warms the page cache, then
measures each comparison's sides interleaved round by round (``_common.side_by_side``).
Every side returns the number of records/examples it produced; rates are work/s,
higher is better, ratio = ours / baseline.

Rows, for each record size:
  read_tfrecord_chunks vs minimal CRC loop    our framing (CRC-checked) vs a minimal
                                  pure-Python CRC-checked framing loop (records/s)
  read_tfrecord_chunks vs raw read            the same in MB/s vs reading the files
                                  into a reused buffer (the I/O ceiling)
  TFRecordDataset.batch(1024) vs minimal loop ``tpsd.TFRecordDataset(files).batch(1024)``
  vs tf.data rows                 ``tf.data.TFRecordDataset(files).batch(1024)`` as NumPy
                                  (``--tf-python PATH`` or TensorFlow importable here),
                                  measured in a subprocess before ours: not
                                  interleaved, no paired ratio. Without TensorFlow
                                  the rows say "skipped".
and for Examples:
  parse_example alone vs read+batch+parse     the share of parsing in our pipeline
  read + batch(1024) + parse_example vs tf.data
  TFRecordDataset.batch(1024).map(parse_example) vs tf.data

Usage:
  python benchmarks/data_throughput.py [--size-mb 50] [--quick] [--json out.json]
      [--tf-python /tmp/tfvenv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import google_crc32c
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import _common  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402
from tpustrategy._src.data.parsing.example import FixedLenFeature, parse_example  # noqa: E402
from tpustrategy._src.data.parsing.example_proto import make_example  # noqa: E402
from tpustrategy._src.data.sources.record_io import read_tfrecord_chunks  # noqa: E402
from tpustrategy._src.data.sources.writer import TFRecordWriter  # noqa: E402

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


def rate(fn: Callable[[], float]) -> Callable[[], float]:
    """A side for ``side_by_side``: runs ``fn`` (which returns a work count) once; work/s."""
    def run() -> float:
        t = time.perf_counter()
        work = fn()
        return work / (time.perf_counter() - t)
    return run


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


def tf_python(args: argparse.Namespace) -> str | None:
    """A Python with TensorFlow: this one if it imports TensorFlow, else ``--tf-python``."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is not None:
        return sys.executable
    return args.tf_python


def run_tf(python: str, reps: int, reads: dict[str, list[str]], examples: list[str]) -> dict:
    cfg = json.dumps({"reads": reads, "examples": examples, "reps": reps})
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([python, "-c", _TF_SCRIPT, cfg], capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode:
        raise RuntimeError(f"tf.data subprocess ({python}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=50.0, help="total TFRecord MB to read")
    parser.add_argument("--quick", action="store_true", help="a ~20 MB run, 3 rounds")
    parser.add_argument("--reps", type=int, default=7, help="rounds of each comparison")
    parser.add_argument("--json", help="write the result rows to this file")
    parser.add_argument("--tf-python", default=os.environ.get("TPS_BENCH_TF_PYTHON"),
                        help="a Python with TensorFlow, for the tf.data rows")
    args = parser.parse_args()
    size = (20.0 if args.quick else args.size_mb) * 1e6
    reps = 3 if args.quick else args.reps
    rows: list[dict] = []
    tf = tf_python(args)
    no_tf = "no TensorFlow: pass --tf-python PATH"

    def compare(name, ours, baseline, unit, **kw):
        res = _common.side_by_side({"ours": rate(ours), "baseline": rate(baseline)}, reps)
        rows.append(_common.row(name, res["ours"], res["baseline"], unit, higher_is_better=True, **kw))
        return res["ours"]

    def versus_tf(name, ours_rates, tf_rates, unit):
        if tf_rates is None:
            rows.append(_common.skipped_row(name, no_tf, unit))
        else:
            rows.append(_common.row(name, ours_rates, tf_rates, unit, higher_is_better=True, interleaved=False,
                                    note="tf.data in a subprocess before ours"))

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        sets = {rs: write_files(tmp, rs, int(size / 2)) for rs in (1000, 100)}
        n_examples = max(int(size / 2 / 300) // N_FILES * N_FILES, N_FILES * BATCH)
        ex_files = write_examples(tmp, n_examples)
        print(f"wrote {size / 1e6:.0f} MB of records + {n_examples} examples in {time.perf_counter() - t0:.1f}s")
        for paths, _ in sets.values():
            for p in paths:
                raw_read(p)  # warm the page cache
        tf_rates = run_tf(tf, reps, {str(rs): paths for rs, (paths, _) in sets.items()}, ex_files) if tf else None

        for rs, (paths, count) in sets.items():
            nbytes = sum(os.path.getsize(p) for p in paths)
            label = "1 KB" if rs == 1000 else "100 B"

            def ours(paths=paths):
                return sum(map(ours_read, paths))

            def pipe(paths=paths):
                return sum(len(b) for b in tpsd.TFRecordDataset(paths).batch(BATCH))

            def mini(paths=paths):
                return sum(map(minimal_loop, paths))

            pipe()
            ours_rates = compare(f"{label}: read_tfrecord_chunks vs minimal CRC loop", ours, mini, "records/s")
            compare(f"{label}: read_tfrecord_chunks vs raw read of the files",
                    lambda paths=paths, scale=nbytes / count / 1e6: sum(map(ours_read, paths)) * scale,
                    lambda paths=paths: sum(map(raw_read, paths)) / 1e6, "MB/s")
            pipe_rates = compare(f"{label}: tpsd.TFRecordDataset.batch(1024) vs minimal CRC loop", pipe, mini,
                                 "records/s")
            tf_r = tf_rates[str(rs)] if tf_rates else None
            versus_tf(f"{label}: read_tfrecord_chunks vs tf.data batch(1024)", ours_rates, tf_r, "records/s")
            versus_tf(f"{label}: tpsd.TFRecordDataset.batch(1024) vs tf.data batch(1024)", pipe_rates, tf_r,
                      "records/s")

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

        def tpsd_parse():
            ds = tpsd.TFRecordDataset(ex_files).batch(BATCH).map(lambda s: parse_example(s, spec))
            return sum(len(b["label"]) for b in ds)

        batches = [r for p in ex_files for _, r in read_tfrecord_chunks(p)]
        tpsd_parse()
        compare("parse_example alone vs read + batch(1024) + parse_example (ours)",
                lambda: sum(len(parse_example(b, spec)["label"]) for b in batches), parse_ours, "examples/s",
                note="1/ratio = the share of the pipeline's time spent parsing")
        res = _common.side_by_side({"ours": rate(parse_ours), "tpsd": rate(tpsd_parse)}, reps)
        tf_p = tf_rates["parse"] if tf_rates else None
        versus_tf("read + batch(1024) + parse_example vs tf.data", res["ours"], tf_p, "examples/s")
        versus_tf("tpsd TFRecordDataset.batch(1024).map(parse_example) vs tf.data", res["tpsd"], tf_p,
                  "examples/s")
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
