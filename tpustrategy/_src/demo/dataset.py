"""The demo's data: scikit-learn's handwritten digits written once as TFRecords.

1,797 8x8 images (values 0..16) ship inside scikit-learn. They are split into
train and test with a fixed seed, scaled to [0, 1], and written with our
``TFRecordWriter`` as sharded files of ``tf.train.Example`` protos
(``image``: 64 floats, ``label``: int64) into a cache folder. A marker file
records the split so later runs reuse the files.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

import tpustrategy.data as tpsd

FEATURES = {
    "image": tpsd.FixedLenFeature([64], "float32"),
    "label": tpsd.FixedLenFeature([], "int64"),
}
NUM_SHARDS = {"train": 8, "test": 2}
_MARKER = "digits.json"


def write_tfrecords(cache_dir: str, seed: int = 0) -> dict[str, Any]:
    """Writes ``train-*-of-*.tfrecord`` / ``test-*`` into ``cache_dir`` unless present."""
    marker = os.path.join(cache_dir, _MARKER)
    if os.path.exists(marker):
        with open(marker) as f:
            return json.load(f)
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = len(labels) // 5
    splits = {"test": order[:n_test], "train": order[n_test:]}
    os.makedirs(cache_dir, exist_ok=True)
    info: dict[str, Any] = {"num_classes": 10}
    for name, idx in splits.items():
        shards = NUM_SHARDS[name]
        for s in range(shards):
            path = os.path.join(cache_dir, f"{name}-{s:05d}-of-{shards:05d}.tfrecord")
            with tpsd.TFRecordWriter(path) as writer:
                for i in idx[s::shards]:
                    example = tpsd.make_example({"image": images[i], "label": int(labels[i])})
                    writer.write(example.SerializeToString())
        info[name] = int(len(idx))
    with open(marker, "w") as f:
        json.dump(info, f)
    return info


def parse(record: bytes) -> tuple[np.ndarray, np.ndarray]:
    parsed = tpsd.parse_single_example(record, FEATURES)
    return parsed["image"], parsed["label"].astype(np.int32)


def train_dataset(cache_dir: str, global_batch: int, seed: int) -> tpsd.Dataset:
    """The seed's pipeline: list_files -> interleave(TFRecordDataset) -> map(parse) -> shuffle -> batch."""
    files = tpsd.Dataset.list_files(os.path.join(cache_dir, "train-*.tfrecord"), shuffle=True, seed=seed)
    return (
        files.interleave(tpsd.TFRecordDataset, cycle_length=4, block_length=16)
        .map(parse)
        .shuffle(1024, seed=seed)
        .batch(global_batch, drop_remainder=True)
    )


def test_dataset(cache_dir: str, global_batch: int) -> tpsd.Dataset:
    files = tpsd.Dataset.list_files(os.path.join(cache_dir, "test-*.tfrecord"), shuffle=False)
    return files.interleave(tpsd.TFRecordDataset, cycle_length=1).map(parse).batch(global_batch)
