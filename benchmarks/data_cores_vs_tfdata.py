"""Record pipelines on 1 and 2 cores against tf.data (issue 38): do both sides scale with cores?

Data (written once): 16 TFRecord files of 60,000 ``tf.train.Example``s of a
32x32x3 image (3,072 raw bytes, feature "image") and an int64 "label" (3 KB
records), and 16 files of 60,000 Examples of 240 float32 "x" and an int64
"label" (1 KB numeric records).

Cases (the same pipeline on both sides; tf.data's in ``_tf_data_worker.py``):
  images_per_example   files.interleave(TFRecordDataset, AUTOTUNE) -> map(parse_single_example + decode_raw,
                       AUTOTUNE) -> batch(256) -> prefetch(AUTOTUNE)
  images_batched       TFRecordDataset(files) -> batch(256) -> map(parse_example + decode_raw, AUTOTUNE)
  numeric_per_example  as images_per_example on the 1 KB records (parse_single_example)
  numeric_batched      as images_batched on the 1 KB records (parse_example)

Each CPU set runs in a child under ``taskset -c`` (``0`` and ``0,1``), which
runs the tf.data worker under the same CPU set; every pass is a fresh
iterator over a freshly built dataset (as a training epoch), the two sides
alternate which goes first, and the load average is recorded with each pass.
Rows: records/s (best, median, min) per side, ours/tf.data of the medians, and
the 2-core / 1-core ratio of the medians for each side.

Usage:
  python benchmarks/data_cores_vs_tfdata.py --tf-python /work/tfvenv/bin/python [--passes 5] [--json out.json]
      [--cpus "0;0,1"] [--cases images_per_example,...] [--processes]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402

sys.path.insert(0, HERE)
from _tf_side import TFSide  # noqa: E402

D = tpsd.Dataset
CASES = ("images_per_example", "images_batched", "numeric_per_example", "numeric_batched")
N_FILES, N_RECORDS, BATCH = 16, 60_000, 256
IMAGE_FEATURES = {"image": tpsd.FixedLenFeature([], np.bytes_), "label": tpsd.FixedLenFeature([], np.int64)}
NUMERIC_FEATURES = {"x": tpsd.FixedLenFeature([240], np.float32), "label": tpsd.FixedLenFeature([], np.int64)}


def parse_image(record):
    ex = tpsd.parse_single_example(record, IMAGE_FEATURES)
    return tps.io.decode_raw(ex["image"], np.uint8).reshape(32, 32, 3), ex["label"]


def parse_images(records):
    ex = tpsd.parse_example(records, IMAGE_FEATURES)
    return tps.io.decode_raw(ex["image"], np.uint8).reshape(-1, 32, 32, 3), ex["label"]


def parse_numeric(record):
    ex = tpsd.parse_single_example(record, NUMERIC_FEATURES)
    return ex["x"], ex["label"]


def parse_numerics(records):
    ex = tpsd.parse_example(records, NUMERIC_FEATURES)
    return ex["x"], ex["label"]


def files(root: str, kind: str) -> list[str]:
    d = os.path.join(root, kind)
    return sorted(os.path.join(d, f) for f in os.listdir(d))


def build(case: str, root: str) -> tpsd.Dataset:
    kind, style = case.split("_", 1)
    paths = files(root, kind)
    one, many = (parse_image, parse_images) if kind == "images" else (parse_numeric, parse_numerics)
    if style == "per_example":
        ds = D.from_tensor_slices(paths).interleave(tpsd.TFRecordDataset, num_parallel_calls=tpsd.AUTOTUNE)
        return ds.map(one, num_parallel_calls=tpsd.AUTOTUNE).batch(BATCH).prefetch(tpsd.AUTOTUNE)
    return tpsd.TFRecordDataset(paths).batch(BATCH).map(many, num_parallel_calls=tpsd.AUTOTUNE)


def write_data(root: str) -> None:
    rng = np.random.default_rng(0)
    per = N_RECORDS // N_FILES
    for kind in ("images", "numeric"):
        os.makedirs(os.path.join(root, kind))
        for f in range(N_FILES):
            with tpsd.TFRecordWriter(os.path.join(root, kind, f"{kind}-{f:02d}.tfrecord")) as w:
                for i in range(per):
                    if kind == "images":
                        feats = {"image": rng.integers(0, 256, 3072, dtype=np.uint8).tobytes(), "label": np.int64(i % 10)}
                    else:
                        feats = {"x": rng.random(240, dtype=np.float32), "label": np.int64(i % 10)}
                    w.write(tpsd.make_example(feats).SerializeToString())


def ours(case: str, root: str) -> tuple[int, float]:
    t = time.perf_counter()
    total = 0
    ds = build(case, root)
    if PROCESSES is not None:
        opts = tpsd.Options()
        opts.threading.experimental_worker_processes = PROCESSES
        ds = ds.with_options(opts)
    for _x, label in ds:
        total += len(label)
    return total, time.perf_counter() - t


def child(root: str, tf_python: str, passes: int, cases: list[str]) -> dict:
    tf = TFSide(tf_python)
    out: dict = {"cpus": len(os.sched_getaffinity(0)), "cases": {}}
    try:
        for case in cases:
            rates: dict[str, list[float]] = {"ours": [], "tf": []}
            loads: list[float] = []
            counts = set()
            for side in ("ours", "tf"):  # warm-up: imports, tracing, page cache, the first pool
                counts.add((ours if side == "ours" else lambda c, r: tf.run(c, 0, r))(case, root)[0])
            for p in range(passes):
                order = ("ours", "tf") if p % 2 == 0 else ("tf", "ours")
                for side in order:
                    n, dt = ours(case, root) if side == "ours" else tf.run(case, 0, root)
                    counts.add(n)
                    rates[side].append(n / dt)
                loads.append(os.getloadavg()[0])
            out["cases"][case] = {"ours": rates["ours"], "tf": rates["tf"], "load": loads, "counts": sorted(counts)}
            print(f"[{out['cpus']} cpu] {case}: ours {statistics.median(rates['ours']):.0f}/s "
                  f"tf {statistics.median(rates['tf']):.0f}/s load {loads}", file=sys.stderr, flush=True)
    finally:
        tf.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tf-python", default=os.environ.get("TPS_BENCH_TF_PYTHON", "/work/tfvenv/bin/python"))
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--cpus", default="0;0,1")
    p.add_argument("--json")
    p.add_argument("--processes", action="store_true", help="our side in worker processes (forced)")
    p.add_argument("--child", action="store_true")
    p.add_argument("--dir")
    args = p.parse_args()
    cases = args.cases.split(",")
    global PROCESSES
    PROCESSES = True if args.processes else None
    if args.child:
        print(json.dumps(child(args.dir, args.tf_python, args.passes, cases)))
        return
    results = {}
    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        write_data(root)
        print(f"wrote the data in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        for cpus in args.cpus.split(";"):
            cmd = ["taskset", "-c", cpus, sys.executable, os.path.abspath(__file__), "--child", "--dir", root,
                   "--tf-python", args.tf_python, "--passes", str(args.passes), "--cases", ",".join(cases)]
            cmd += ["--processes"] if args.processes else []
            res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
            results[cpus] = json.loads(res.stdout.strip().splitlines()[-1])
    med = statistics.median
    sets = args.cpus.split(";")
    print(f"{'case':22s} " + " ".join(f"{'ours/tf ' + s:>26s}" for s in sets) + "   scaling ours  scaling tf")
    rows = []
    for case in cases:
        cells, meds = [], {}
        for s in sets:
            c = results[s]["cases"][case]
            o, t = med(c["ours"]), med(c["tf"])
            meds[s] = (o, t)
            cells.append(f"{o:8.0f} ({min(c['ours']):.0f}-{max(c['ours']):.0f}) / {t:8.0f} ({min(c['tf']):.0f}-"
                         f"{max(c['tf']):.0f}) = {o / t:.2f}x load {min(c['load']):.1f}-{max(c['load']):.1f}")
        scale = ""
        if len(sets) == 2:
            (o1, t1), (o2, t2) = meds[sets[0]], meds[sets[1]]
            scale = f"   {o2 / o1:.2f}x  {t2 / t1:.2f}x"
        print(f"{case}: " + " | ".join(cells) + scale)
        rows.append({"case": case, **{s: results[s]["cases"][case] for s in sets}})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
