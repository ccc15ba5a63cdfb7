"""tps.io inside a tpsd pipeline: TFRecord of JPEG bytes -> parse + decode -> batch = TF's pixels."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

pytest.importorskip("simplejpeg")

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
IMAGES = ["big420", "rgb444", "progressive", "restart"]


def test_tfrecord_of_jpegs_decodes_to_tensorflows_pixels_in_map(tmp_path):
    path = str(tmp_path / "images.tfrecord")
    with tpsd.TFRecordWriter(path) as writer:
        for label, stem in enumerate(IMAGES):
            data = (FIXTURES / "inputs" / f"{stem}.jpg").read_bytes()
            writer.write(tpsd.make_example({"image": data, "label": label}).SerializeToString())
    features = {"image": tpsd.FixedLenFeature([], "string"), "label": tpsd.FixedLenFeature([], "int64")}

    def parse(record):
        ex = tpsd.parse_single_example(record, features)
        image = tps.io.decode_jpeg(ex["image"], channels=3)
        return image[:20, :20], ex["label"]

    batches = list(tpsd.TFRecordDataset(path).map(parse).batch(4).as_numpy_iterator())
    assert len(batches) == 1
    images, labels = batches[0]
    expected = np.load(FIXTURES / "outputs.npz")
    want = np.stack([expected[f"decode_jpeg/{stem}/channels3"][:20, :20] for stem in IMAGES])
    assert images.dtype == np.uint8 and images.shape == (4, 20, 20, 3)
    np.testing.assert_array_equal(images, want)
    np.testing.assert_array_equal(labels, [0, 1, 2, 3])
