"""``tpsd.parse_example`` against ``tf.io.parse_example`` on the same serialized records.

Both sides parse the very same batches of serialized ``tf.train.Example``
records (built here, written to a temporary ``.npz``); the TensorFlow side runs
in its own interpreter (``--tf-python``, a venv with TensorFlow 2.21), as a
long-lived subprocess that imports only TensorFlow and NumPy. Rounds alternate
which side goes first, so both see the same machine load; each round times
``--reps`` parses of every batch on each side. The TensorFlow side calls a
``tf.function`` (graph mode: no eager dispatch per call) and leaves the results
as tensors; our side returns NumPy arrays (object arrays of ``bytes`` for
strings). Rates are records/s; ratio = ours / TensorFlow's (the median of the
per-round ratios, with min..max). Run it on one core for the per-core rate:

  taskset -c 0 python benchmarks/parse_vs_tfdata.py --tf-python /path/to/tf/python

Cases (batch of 256 records unless said):
  image_3kb     a 3,072-byte bytes feature + an int64 label (FixedLen [] each)
  numeric_1kb   256 float32 values (FixedLen [256])
  small_100b    int64 [4], float32 [4], an 8-byte string and a VarLen int64 (~100 B)
  bytes_100kb   one 100,000-byte bytes feature (batch of 64)
  varlen_int64  VarLen int64 lists of 0..64 values, mixed widths and negatives
  varlen_bytes  VarLen string lists of 0..16 values of 0..40 bytes
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

CASES = ("image_3kb", "numeric_1kb", "small_100b", "bytes_100kb", "varlen_int64", "varlen_bytes")

# name -> {feature: (kind, "fixed"|"var", shape)}
SPECS = {
    "image_3kb": {"image": ("string", "fixed", []), "label": ("int64", "fixed", [])},
    "numeric_1kb": {"x": ("float32", "fixed", [256])},
    "small_100b": {"a": ("int64", "fixed", [4]), "b": ("float32", "fixed", [4]),
                   "s": ("string", "fixed", []), "v": ("int64", "var", [])},
    "bytes_100kb": {"data": ("string", "fixed", [])},
    "varlen_int64": {"ids": ("int64", "var", [])},
    "varlen_bytes": {"tokens": ("string", "var", [])},
}


def _worker() -> None:
    """The TensorFlow side: reads ``{"case", "reps"}`` lines, answers ``{"seconds"}``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    data = np.load(sys.argv[2], allow_pickle=True)
    fns = {}
    for case in CASES:
        spec = {}
        for key, (kind, how, shape) in SPECS[case].items():
            dtype = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}[kind]
            spec[key] = tf.io.FixedLenFeature(shape, dtype) if how == "fixed" else tf.io.VarLenFeature(dtype)
        batch = tf.constant(list(data[case]), dtype=tf.string)
        fn = tf.function(lambda b, spec=spec: tf.io.parse_example(b, spec))
        fn(batch)  # trace
        fns[case] = (fn, batch)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["case"] == "quit":
            return
        fn, batch = fns[cmd["case"]]
        start = time.process_time()
        for _ in range(cmd["reps"]):
            fn(batch)
        print(json.dumps({"seconds": time.process_time() - start}), flush=True)


def make_records(case: str, rng: np.random.Generator) -> list[bytes]:
    from tpustrategy._src.data.parsing.example_proto import bytes_feature, int64_feature, make_example

    def ser(feats: dict) -> bytes:
        return make_example(feats).SerializeToString()

    n = 64 if case == "bytes_100kb" else 256
    out = []
    for _ in range(n):
        if case == "image_3kb":
            out.append(ser({"image": rng.bytes(3072), "label": int(rng.integers(0, 1000))}))
        elif case == "numeric_1kb":
            out.append(ser({"x": rng.standard_normal(256).astype(np.float32)}))
        elif case == "small_100b":
            out.append(ser({"a": rng.integers(-1000, 1000, 4), "b": rng.standard_normal(4).astype(np.float32),
                            "s": rng.bytes(8), "v": int64_feature(rng.integers(0, 300, int(rng.integers(0, 6))))}))
        elif case == "bytes_100kb":
            out.append(ser({"data": rng.bytes(100_000)}))
        elif case == "varlen_int64":
            k = int(rng.integers(0, 65))
            vals = rng.integers(-(2**40), 2**40, k) >> rng.integers(0, 40, k)
            out.append(ser({"ids": int64_feature(vals)}))
        elif case == "varlen_bytes":
            k = int(rng.integers(0, 17))
            out.append(ser({"tokens": bytes_feature([rng.bytes(int(rng.integers(0, 41))) for _ in range(k)])}))
    return out


def our_parser(case: str):
    import tpustrategy.data as tpsd

    spec = {}
    for key, (kind, how, shape) in SPECS[case].items():
        spec[key] = tpsd.FixedLenFeature(shape, kind) if how == "fixed" else tpsd.VarLenFeature(kind)
    return lambda batch: tpsd.parse_example(batch, spec)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker()
        return
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tf-python", required=True, help="a Python with TensorFlow 2.21")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.3, help="target time per side per round")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    cases = args.cases.split(",")
    rng = np.random.default_rng(0)
    batches = {case: make_records(case, rng) for case in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records.npz")
        np.savez(path, **{c: np.array(b, dtype=object) for c, b in batches.items()})
        proc = subprocess.Popen([args.tf_python, os.path.abspath(__file__), "--worker", path],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert json.loads(proc.stdout.readline())["ready"]

            def tf_time(case: str, reps: int) -> float:
                proc.stdin.write(json.dumps({"case": case, "reps": reps}) + "\n")
                proc.stdin.flush()
                return json.loads(proc.stdout.readline())["seconds"]

            rows = []
            for case in cases:
                parse, batch = our_parser(case), batches[case]
                parse(batch)
                t0 = time.process_time()
                parse(batch)
                reps = max(1, int(args.seconds / max(time.process_time() - t0, 1e-6)))
                ours, theirs, ratios = [], [], []
                for r in range(args.rounds):
                    def mine() -> float:
                        start = time.process_time()
                        for _ in range(reps):
                            parse(batch)
                        return time.process_time() - start
                    if r % 2:
                        t_tf, t_us = tf_time(case, reps), mine()
                    else:
                        t_us, t_tf = mine(), tf_time(case, reps)
                    n = reps * len(batch)
                    ours.append(n / t_us)
                    theirs.append(n / t_tf)
                    ratios.append(t_tf / t_us)
                size = statistics.mean(map(len, batch))
                row = {"case": case, "record_bytes": round(size), "batch": len(batch),
                       "ours_per_s": statistics.median(ours), "tf_per_s": statistics.median(theirs),
                       "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
                rows.append(row)
                print(f"{case:14s} {row['record_bytes']:7d} B  ours {row['ours_per_s']:11,.0f}/s  "
                      f"tf {row['tf_per_s']:11,.0f}/s  ratio {row['ratio']:.2f}x "
                      f"({row['ratio_min']:.2f}..{row['ratio_max']:.2f})", flush=True)
        finally:
            if proc.stdin:
                proc.stdin.write(json.dumps({"case": "quit"}) + "\n")
                proc.stdin.close()
            proc.wait(timeout=60)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
