"""tps.image.combined_non_max_suppression against TensorFlow 2.21 (tools/make_surface_io_fixtures.py)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy as tps

CASES = json.loads((pathlib.Path(__file__).parents[1] / "io" / "fixtures" / "surface_ops.json").read_text())


@pytest.mark.parametrize("case", CASES["combined_nms"], ids=lambda c: json.dumps(c["kwargs"]))
def test_matches_tensorflow(case):
    boxes, scores, classes, valid = tps.image.combined_non_max_suppression(
        np.array(case["boxes"], np.float32), np.array(case["scores"], np.float32), **case["kwargs"])
    want_boxes, want_scores, want_classes, want_valid = case["result"]
    assert boxes.dtype == scores.dtype == classes.dtype == np.float32 and valid.dtype == np.int32
    np.testing.assert_array_equal(valid, want_valid)
    np.testing.assert_array_equal(scores, np.array(want_scores, np.float32))
    np.testing.assert_array_equal(classes, np.array(want_classes, np.float32))
    np.testing.assert_array_equal(boxes, np.array(want_boxes, np.float32))


def test_hand_computed_case():
    # Two overlapping boxes of class 0, one far box; class 1 prefers the far box.
    boxes = np.array([[[[0, 0, 1, 1]], [[0, 0, 0.9, 1]], [[0.5, 0.5, 2, 2]]]], np.float32)
    scores = np.array([[[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]]], np.float32)
    b, s, c, v = tps.image.combined_non_max_suppression(boxes, scores, 2, 5)
    assert v.tolist() == [4]
    np.testing.assert_allclose(s[0], [0.9, 0.7, 0.3, 0.2, 0.0])  # IoU 0.9 drops box 1 in class 0
    assert c[0].tolist() == [0, 1, 0, 1, 0]
    np.testing.assert_array_equal(b[0, 1], [0.5, 0.5, 1, 1])  # clipped to [0, 1]


@pytest.mark.parametrize("name, error", CASES["combined_nms_errors"])
def test_errors_match_tensorflow(name, error):
    b = np.zeros((1, 2, 1, 4), np.float32)
    s = np.zeros((1, 2, 2), np.float32)
    args = {"per_class 0": (b, s, 0, 3), "total 0": (b, s, 2, 0),
            "q mismatch": (np.zeros((1, 2, 3, 4), np.float32), s, 2, 3),
            "boxes rank": (np.zeros((2, 1, 4), np.float32), s, 2, 3), "iou": (b, s, 2, 3, 1.5)}[name]
    with pytest.raises(tps.errors.InvalidArgumentError) as info:
        tps.image.combined_non_max_suppression(*args)
    if name != "boxes rank":  # TensorFlow's Python shape check speaks first there
        assert str(info.value).startswith(error[1].split("}} ", 1)[1].split(" [Op:", 1)[0])
