"""TensorFlow's string_format_op_test.py (its inputs and asserted results), run on tps.strings.format."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S


def fmt(*args, **kwargs):
    out = S.format(*args, **kwargs)
    assert isinstance(out, bytes)
    return out.decode("utf-8")


R10 = np.arange(10, dtype=np.int32)
M10 = np.arange(100, dtype=np.int32).reshape(10, 10)
M10_TEXT = ("[[0 1 2 ... 7 8 9]\n [10 11 12 ... 17 18 19]\n [20 21 22 ... 27 28 29]\n ...\n"
            " [70 71 72 ... 77 78 79]\n [80 81 82 ... 87 88 89]\n [90 91 92 ... 97 98 99]]")


def test_one_tensor_one_dim():
    assert fmt("{}", R10) == "[0 1 2 ... 7 8 9]"
    assert fmt("{}", [R10]) == "[0 1 2 ... 7 8 9]"


def test_scalars():
    assert fmt("{}", [np.float32(3.34)]) == "3.34"
    assert fmt("{}, {}", [np.float32(3.14), R10]) == "3.14, [0 1 2 ... 7 8 9]"


def test_one_dim_float():
    x = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], np.float32)
    assert fmt("{}", x) == "[0 0.1 0.2 ... 0.5 0.6 0.7]"


@pytest.mark.parametrize("summarize, expected", [
    (3, "[0 1 2 3 4 5]"), (-1, "[0 1 2 3 4 5]"), (1, "[0 ... 5]"), (2, "[0 1 ... 4 5]"), (10, "[0 1 2 3 4 5]")])
def test_vary_summarize(summarize, expected):
    assert fmt("{}", np.arange(6, dtype=np.int32), summarize=summarize) == expected


def test_almost_summarize_and_small_matrix():
    assert fmt("{}", np.arange(5), summarize=3) == "[0 1 2 3 4]"
    assert fmt("{}", np.arange(4).reshape(2, 2), summarize=3) == "[[0 1]\n [2 3]]"


def test_two_dim():
    assert fmt("{}", M10) == M10_TEXT
    assert fmt("{}", M10, summarize=2) == (
        "[[0 1 ... 8 9]\n [10 11 ... 18 19]\n ...\n [80 81 ... 88 89]\n [90 91 ... 98 99]]")


def test_three_dim():
    blocks = []
    for b in (0, 1, 2, None, 7, 8, 9):
        if b is None:
            blocks.append("...")
            continue
        rows = [f"[{r * 10 + b * 100} {r * 10 + b * 100 + 1} {r * 10 + b * 100 + 2} ... "
                f"{r * 10 + b * 100 + 7} {r * 10 + b * 100 + 8} {r * 10 + b * 100 + 9}]" for r in range(10)]
        rows = rows[:3] + ["..."] + rows[7:]
        blocks.append("[" + "\n  ".join(rows) + "]")
    expected = "[" + "\n\n ".join(blocks) + "]"
    assert fmt("{}", np.arange(1000, dtype=np.int32).reshape(10, 10, 10)) == expected


def test_template_prefix_and_suffix():
    assert fmt("tensor summary: {}", M10) == "tensor summary: " + M10_TEXT
    assert fmt("tensor summary: {}, suffix", M10) == "tensor summary: " + M10_TEXT + ", suffix"
    assert fmt("{}, suffix", M10) == M10_TEXT + ", suffix"


def test_no_tensor():
    assert fmt("No tensor.", ()) == "No tensor."


def test_multi_tensor():
    two = ("[[0 10 20 ... 70 80 90]\n [100 110 120 ... 170 180 190]\n [200 210 220 ... 270 280 290]\n ...\n"
           " [700 710 720 ... 770 780 790]\n [800 810 820 ... 870 880 890]\n [900 910 920 ... 970 980 990]]")
    assert fmt("One: {},\nTwo: {}", (M10, M10 * 10)) == "One: " + M10_TEXT + ",\nTwo: " + two


def test_summarize_one():
    assert fmt("tensor summary: {}", M10, summarize=1) == "tensor summary: [[0 ... 9]\n ...\n [90 ... 99]]"


def test_placeholder():
    assert fmt("tensor summary: %t%", M10, placeholder="%t%") == "tensor summary: " + M10_TEXT


def test_tensor_count_must_match_placeholder_count():
    with pytest.raises(ValueError, match=r"The template expects 2 tensors, but the inputs only has 1\.\s.*"):
        S.format("{} {}", R10)
    with pytest.raises(ValueError, match=r"The template expects 2 tensors, but the inputs only has 1\.\s.*"):
        S.format("{} {}", [R10])
    with pytest.raises(ValueError, match=r"The template expects 1 tensors, but the inputs only has 2\.\s.*"):
        S.format("{}", (R10, R10))


def test_tensor_and_format_unicode():
    assert fmt("😊:{}", "😊".encode()) == '😊:"😊"'
