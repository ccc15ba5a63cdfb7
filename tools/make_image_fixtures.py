"""Records TensorFlow 2.21's ``tf.image`` results into ``tests/image/fixtures/*.npz``.

Run with the TensorFlow environment (TensorFlow is never a dependency of the library or tests):

    /work/tfvenv/bin/python tools/make_image_fixtures.py

Each fixture file holds the inputs it used (``<case>/input``...) next to TensorFlow's outputs, so
the tests feed exactly those inputs to ``tps.image``. Inputs are deterministic (a seeded NumPy
generator); rerunning rewrites the same files.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import tensorflow as tf

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "image" / "fixtures"

RESIZE_METHODS = ["bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
                  "mitchellcubic"]
RESIZE_SIZES = [(3, 4), (11, 9), (2, 13), (1, 1), (5, 7), (16, 3)]


def _images(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "u8": rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8),
        "f32": rng.normal(size=(2, 6, 4, 2)).astype(np.float32),
        "big": rng.integers(0, 256, size=(23, 17, 1), dtype=np.uint8),
    }


def resize_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, image in _images(rng).items():
        out[f"{key}/input"] = image
        for method in RESIZE_METHODS:
            for antialias in (False, True):
                for h, w in RESIZE_SIZES:
                    result = tf.image.resize(image, [h, w], method=method, antialias=antialias)
                    out[f"{key}/{method}/{int(antialias)}/{h}x{w}"] = result.numpy()
        for h, w in [(10, 10), (3, 20)]:
            for method in ("bilinear", "nearest"):
                result = tf.image.resize(image, [h, w], method=method, preserve_aspect_ratio=True)
                out[f"{key}/aspect/{method}/{h}x{w}"] = result.numpy()
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = set(sys.argv[1:])
    for name, make in [("resize", resize_cases)]:
        if wanted and name not in wanted:
            continue
        rng = np.random.default_rng(sum(map(ord, name)))
        np.savez_compressed(OUT / f"{name}.npz", **make(rng))
        print(name, (OUT / f"{name}.npz").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
