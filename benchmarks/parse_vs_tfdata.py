"""``tpsd.parse_example`` against ``tf.io.parse_example`` on the same serialized records.

Both sides parse the very same batches of serialized ``tf.train.Example``
records (built here, written to a temporary ``.npz``); the TensorFlow side runs
in its own interpreter (``--tf-python``, a venv with TensorFlow 2.21), as a
long-lived subprocess that imports only TensorFlow and NumPy. Rounds alternate
which side goes first, so both see the same machine load; each round times
``--reps`` parses of every batch on each side. The TensorFlow side calls a
``tf.function`` (graph mode: no eager dispatch per call) and leaves the results
as tensors; our side returns NumPy arrays (object arrays of ``bytes`` for
strings). Each side's time is its process's CPU time (``time.process_time``),
so other load on the machine counts less. Rates are records/s; the paired ratio
is the median of the per-round ratios ours / TensorFlow's. Run it on one core
for the per-core rate (the TensorFlow subprocess inherits the core):

  taskset -c 0 python benchmarks/parse_vs_tfdata.py --tf-python /path/to/tf/python [--quick] [--json PATH]

Cases (batch of 256 records unless said):
  image_3kb     a 3,072-byte bytes feature + an int64 label (FixedLen [] each)
  numeric_1kb   256 float32 values (FixedLen [256])
  small_100b    int64 [4], float32 [4], an 8-byte string and a VarLen int64 (~100 B)
  bytes_100kb   one 100,000-byte bytes feature (batch of 64)
  varlen_int64  VarLen int64 lists of 0..64 values, mixed widths and negatives
  varlen_bytes  VarLen string lists of 0..16 values of 0..40 bytes
  fixedseq_int64   FixedLenSequenceFeature([2], int64, allow_missing) of 0..32 rows
  sparse_float     SparseFeature("idx", "val", float32, 1000) of 0..32 entries
  ragged_float     RaggedFeature(float32) of 0..32 values
  ragged_lengths   RaggedFeature(float32, partitions=[RowLengths]) of 0..8 rows of 0..8 values
  seq_dense        SequenceExample: an int64 label (context), 0..40 steps of an int64 token and 4 floats
                   (FixedLenSequenceFeature), parse_sequence_example
  seq_varlen       SequenceExample: 0..20 steps of 0..6 strings of 0..12 bytes (VarLenFeature) and a
                   RaggedFeature(int64) list of 0..20 steps of 0..6 values
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

CASES = ("image_3kb", "numeric_1kb", "small_100b", "bytes_100kb", "varlen_int64", "varlen_bytes",
         "fixedseq_int64", "sparse_float", "ragged_float", "ragged_lengths", "seq_dense", "seq_varlen")

# name -> {feature: (kind, "fixed"|"var", shape)}
SPECS = {
    "image_3kb": {"image": ("string", "fixed", []), "label": ("int64", "fixed", [])},
    "numeric_1kb": {"x": ("float32", "fixed", [256])},
    "small_100b": {"a": ("int64", "fixed", [4]), "b": ("float32", "fixed", [4]),
                   "s": ("string", "fixed", []), "v": ("int64", "var", [])},
    "bytes_100kb": {"data": ("string", "fixed", [])},
    "varlen_int64": {"ids": ("int64", "var", [])},
    "varlen_bytes": {"tokens": ("string", "var", [])},
    "fixedseq_int64": {"pairs": ("int64", "fixedseq", [2])},
    "sparse_float": {"sp": ("float32", "sparse", ("idx", "val", 1000))},
    "ragged_float": {"r": ("float32", "ragged", ())},
    "ragged_lengths": {"r": ("float32", "ragged", ("vals", "lens"))},
}
# SequenceExample cases: (context specs, sequence specs) in the same form.
SEQ_SPECS = {
    "seq_dense": ({"label": ("int64", "fixed", [])},
                  {"token": ("int64", "fixedseq", []), "emb": ("float32", "fixedseq", [4])}),
    "seq_varlen": ({}, {"words": ("string", "var", []), "ids": ("int64", "ragged", ())}),
}


def _specs(m, entries: dict) -> dict:
    """Feature specs from ``entries`` with ``m`` = tf.io or tpsd (the same names and arguments)."""
    spec = {}
    for key, (kind, how, shape) in entries.items():
        if how == "fixed":
            spec[key] = m.FixedLenFeature(shape, kind)
        elif how == "var":
            spec[key] = m.VarLenFeature(kind)
        elif how == "fixedseq":
            spec[key] = m.FixedLenSequenceFeature(shape, kind, allow_missing=True)
        elif how == "sparse":
            spec[key] = m.SparseFeature(shape[0], shape[1], kind, shape[2])
        elif shape:
            spec[key] = m.RaggedFeature(kind, value_key=shape[0], partitions=[m.RaggedFeature.RowLengths(shape[1])])
        else:
            spec[key] = m.RaggedFeature(kind)
    return spec


def _worker() -> None:
    """The TensorFlow side: reads ``{"case", "reps"}`` lines, answers ``{"seconds"}``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # one traced function per case: no retracing warnings

    data = np.load(sys.argv[2], allow_pickle=True)
    fns = {}
    for case in CASES:
        batch = tf.constant(list(data[case]), dtype=tf.string)
        if case in SEQ_SPECS:
            ctx, seq = (_specs(tf.io, e) or None for e in SEQ_SPECS[case])
            fn = tf.function(lambda b, ctx=ctx, seq=seq: tf.io.parse_sequence_example(b, ctx, seq))
        else:
            spec = _specs(tf.io, SPECS[case])
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
    from tpustrategy._src.data.parsing.example_proto import (
        SequenceExample,
        bytes_feature,
        float_feature,
        int64_feature,
        make_example,
    )

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
        elif case == "fixedseq_int64":
            out.append(ser({"pairs": int64_feature(rng.integers(-500, 500, 2 * int(rng.integers(0, 33))))}))
        elif case == "sparse_float":
            k = int(rng.integers(0, 33))
            out.append(ser({"idx": int64_feature(rng.integers(0, 1000, k)),
                            "val": float_feature(rng.standard_normal(k).astype(np.float32))}))
        elif case == "ragged_float":
            out.append(ser({"r": float_feature(rng.standard_normal(int(rng.integers(0, 33))).astype(np.float32))}))
        elif case == "ragged_lengths":
            lens = rng.integers(0, 9, int(rng.integers(0, 9)))
            out.append(ser({"lens": int64_feature(lens),
                            "vals": float_feature(rng.standard_normal(int(lens.sum())).astype(np.float32))}))
        elif case == "seq_dense":
            seq = SequenceExample()
            seq.context.feature["label"].int64_list.value.append(int(rng.integers(0, 1000)))
            steps = int(rng.integers(0, 41))
            tok = seq.feature_lists.feature_list["token"].feature
            emb = seq.feature_lists.feature_list["emb"].feature
            for _ in range(steps):
                tok.add().int64_list.value.append(int(rng.integers(0, 30000)))
                emb.add().float_list.value.extend(rng.standard_normal(4).astype(np.float32).tolist())
            out.append(seq.SerializeToString())
        elif case == "seq_varlen":
            seq = SequenceExample()
            words = seq.feature_lists.feature_list["words"].feature
            for _ in range(int(rng.integers(0, 21))):
                words.add().bytes_list.value.extend(
                    [rng.bytes(int(rng.integers(0, 13))) for _ in range(int(rng.integers(0, 7)))])
            ids = seq.feature_lists.feature_list["ids"].feature
            for _ in range(int(rng.integers(0, 21))):
                ids.add().int64_list.value.extend(rng.integers(0, 5000, int(rng.integers(0, 7))).tolist())
            out.append(seq.SerializeToString())
    return out


def our_parser(case: str):
    import tpustrategy.data as tpsd

    if case in SEQ_SPECS:
        ctx, seq = (_specs(tpsd, e) or None for e in SEQ_SPECS[case])
        return lambda batch: tpsd.parse_sequence_example(batch, ctx, seq)
    spec = _specs(tpsd, SPECS[case])
    return lambda batch: tpsd.parse_example(batch, spec)


def _cpu_time(parse, batch: list[bytes], reps: int) -> float:
    start = time.process_time()
    for _ in range(reps):
        parse(batch)
    return time.process_time() - start


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker()
        return
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    sys.path.insert(0, os.path.join(here, ".."))
    import _common

    p = _common.parser(__doc__.split("\n")[0])
    p.add_argument("--tf-python", default=os.environ.get("TPS_BENCH_TF_PYTHON"),
                   help="a Python with TensorFlow 2.21 (e.g. .venv-tf/bin/python)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=0.25, help="target CPU time per side per round")
    p.add_argument("--cases", default=",".join(CASES))
    args = p.parse_args()
    cases = args.cases.split(",")
    names = [f"parse_sequence_example {case} vs tf.io.parse_sequence_example" if case in SEQ_SPECS
             else f"parse_example {case} vs tf.io.parse_example" for case in cases]
    if not args.tf_python or not os.path.exists(args.tf_python):
        _common.skip_all(names, "no TensorFlow: pass --tf-python PATH (make bench creates .venv-tf)", args.json)
    rounds, seconds = (2, 0.05) if args.quick else (args.rounds, args.seconds)
    rng = np.random.default_rng(0)
    batches = {case: make_records(case, rng) for case in CASES}
    rows = []
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

            for name, case in zip(names, cases):
                parse, batch = our_parser(case), batches[case]
                parse(batch)
                t0 = time.process_time()
                parse(batch)
                reps = max(1, int(seconds / max(time.process_time() - t0, 1e-6)))
                ours, theirs = [], []
                for r in range(rounds):
                    if r % 2:
                        t_tf, t_us = tf_time(case, reps), _cpu_time(parse, batch, reps)
                    else:
                        t_us, t_tf = _cpu_time(parse, batch, reps), tf_time(case, reps)
                    ours.append(reps * len(batch) / t_us)
                    theirs.append(reps * len(batch) / t_tf)
                size = statistics.mean(map(len, batch))
                rows.append(_common.row(name, ours, theirs, "records/s (CPU time)", higher_is_better=True,
                                        note=f"{size:,.0f} B records, batch {len(batch)}"))
        finally:
            if proc.stdin:
                proc.stdin.write(json.dumps({"case": "quit"}) + "\n")
                proc.stdin.close()
            proc.wait(timeout=60)
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
