"""tpsd against tf.data (CPU) on the same data, interleaved round by round.

The tf.data side runs in a long-lived subprocess (``_tf_data_worker.py``,
started with ``--tf-python PATH``, e.g. the ``.venv-tf`` that ``make bench``
creates from the ``bench`` extra): every round runs each case once on our side
and once on tf.data's, alternating which goes first, so both see the same
machine load and the paired ratio is meaningful. Rates are elements/s (the
number of input elements a case consumes or produces, the same count on both
sides), higher is better; ratio = ours / tf.data. Goals (issue 24): >= 1.0x for
the transformations and the many-file interleave, >= 2x for read + batch +
parse_example.

Cases:
  window                     range(N).window(8, shift=1, drop_remainder=True).flat_map(batch(8))
  group_by_window            range(N).group_by_window(x % 8, batch(16), window_size=16)
  bucket_by_sequence_length  variable-length vectors in 4 buckets of 32
  sample_from_datasets       3 datasets, weights [0.5, 0.3, 0.2], take(N)
  scan                       a running sum
  unique                     range(N).map(x % 1000).unique()
  interleave_many_files      64 TFRecord files, interleave(cycle_length=16)
  read_batch_parse_example   TFRecordDataset(4 files).batch(1024).map(parse_example) (64 floats + label)

Usage:
  python benchmarks/data_vs_tfdata.py [--quick] [--json out.json] [--tf-python PATH] [--rounds 5]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import _common  # noqa: E402
from _tf_side import TFSide  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
D = tpsd.Dataset
FEATURES = {"x": tpsd.FixedLenFeature([64], np.float32), "label": tpsd.FixedLenFeature([], np.int64)}
CASES = ("window", "group_by_window", "bucket_by_sequence_length", "sample_from_datasets", "scan", "unique",
         "interleave_many_files", "read_batch_parse_example")
PER_BATCH = {"group_by_window", "bucket_by_sequence_length", "read_batch_parse_example"}


def build(case: str, n: int, data_dir: str) -> tpsd.Dataset:
    """Our side of ``case`` (the same pipeline as ``_tf_data_worker.build``)."""
    if case == "window":
        return D.range(n).window(8, shift=1, drop_remainder=True).flat_map(lambda w: w.batch(8))
    if case == "group_by_window":
        return D.range(n).group_by_window(key_func=lambda x: x % 8, reduce_func=lambda k, d: d.batch(16),
                                          window_size=16)
    if case == "bucket_by_sequence_length":
        seqs = D.range(n).map(lambda x: np.full(int(x) % 20 + 1, x))
        return seqs.bucket_by_sequence_length(lambda s: np.shape(s)[0], bucket_boundaries=[5, 10, 15],
                                              bucket_batch_sizes=[32, 32, 32, 32])
    if case == "sample_from_datasets":
        return D.sample_from_datasets([D.range(n).repeat(), D.range(n).repeat(), D.range(n).repeat()],
                                      weights=[0.5, 0.3, 0.2], seed=1).take(n)
    if case == "scan":
        return D.range(n).scan(np.int64(0), lambda s, x: (s + x, s))
    if case == "unique":
        return D.range(n).map(lambda x: x % 1000).unique()
    if case == "interleave_many_files":
        files = sorted(os.path.join(data_dir, "many", f) for f in os.listdir(os.path.join(data_dir, "many")))
        return D.from_tensor_slices(files).interleave(tpsd.TFRecordDataset, cycle_length=16, block_length=1)
    if case == "read_batch_parse_example":
        files = sorted(os.path.join(data_dir, "examples", f) for f in os.listdir(os.path.join(data_dir, "examples")))
        return tpsd.TFRecordDataset(files).batch(1024).map(lambda s: tpsd.parse_example(s, FEATURES))
    raise ValueError(f"unknown case {case!r}")


def count(ds: tpsd.Dataset, case: str) -> int:
    total = 0
    if case in PER_BATCH:
        for x in ds:
            total += int(np.shape(x["label"] if isinstance(x, dict) else x)[0])
        return total
    it = iter(ds)
    while True:
        got = it._next_many(4096)  # the bulk path a consumer such as batch or a device feed uses
        if not got:
            return total
        total += len(got)


def write_data(root: str, n_many: int, per_file: int, n_examples: int) -> None:
    os.makedirs(os.path.join(root, "many"))
    os.makedirs(os.path.join(root, "examples"))
    rng = np.random.default_rng(0)
    for f in range(n_many):
        with tpsd.TFRecordWriter(os.path.join(root, "many", f"m{f:03d}.tfrecord")) as w:
            for i in range(per_file):
                w.write(rng.bytes(100 + (i % 7) * 10))
    per = n_examples // 4
    for f in range(4):
        with tpsd.TFRecordWriter(os.path.join(root, "examples", f"e{f}.tfrecord")) as w:
            for i in range(per):
                ex = tpsd.make_example({"x": rng.random(64, dtype=np.float32), "label": np.int64(i % 10)})
                w.write(ex.SerializeToString())


def sizes(quick: bool) -> dict[str, int]:
    """Input sizes per case, so that one tf.data run takes about a second on a quiet machine."""
    full = {"window": 20_000, "group_by_window": 50_000, "bucket_by_sequence_length": 30_000,
            "sample_from_datasets": 200_000, "scan": 100_000, "unique": 100_000,
            "interleave_many_files": 0, "read_batch_parse_example": 0}
    return {k: v // 10 for k, v in full.items()} if quick else full


def measure(case: str, n: int, data_dir: str, tf: TFSide, rounds: int) -> dict[str, Any]:
    """One case: a warm-up of each side, then ``rounds`` rounds alternating which side goes first."""
    ours_rates: list[float] = []
    tf_rates: list[float] = []
    counts: list[int] = []

    def ours() -> None:
        ds = build(case, n, data_dir)
        t = time.perf_counter()
        got = count(ds, case)
        ours_rates.append(got / (time.perf_counter() - t))
        counts.append(got)

    def theirs() -> None:
        got, dt = tf.run(case, n, data_dir)
        tf_rates.append(got / dt)
        counts.append(got)

    sides: list[Callable[[], None]] = [ours, theirs]
    ours()  # warm-up of both sides (imports, tracing, page cache)
    theirs()
    ours_rates.clear()
    tf_rates.clear()
    for r in range(rounds):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            side()
    note = "" if len(set(counts)) == 1 else f"element counts differ: {sorted(set(counts))}"
    print(f"{case}: ours {np.median(ours_rates):.0f}/s, tf.data {np.median(tf_rates):.0f}/s")
    return _common.row(f"{case} vs tf.data", ours_rates, tf_rates, "elements/s", higher_is_better=True, note=note)


def main() -> None:
    p = _common.parser(__doc__)
    p.add_argument("--tf-python", default=os.environ.get("TPS_BENCH_TF_PYTHON"),
                   help="a Python with TensorFlow 2.21 (e.g. .venv-tf/bin/python)")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    names = [f"{c} vs tf.data" for c in CASES]
    if not args.tf_python or not os.path.exists(args.tf_python):
        _common.skip_all(names, "no TensorFlow: pass --tf-python PATH (make bench creates .venv-tf)", args.json)
    rounds = 2 if args.quick else args.rounds
    n = sizes(args.quick)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        write_data(tmp, 64, 100 if args.quick else 1000, 8192 if args.quick else 65536)
        print(f"wrote the data in {time.perf_counter() - t0:.1f}s")
        tf = TFSide(args.tf_python)
        try:
            for case in CASES:
                rows.append(measure(case, n[case], tmp, tf, rounds))
        finally:
            tf.close()
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
