"""Records TensorFlow 2.21's ``tf.image.adjust_jpeg_quality`` / ``stateless_random_jpeg_quality``
results into ``tests/image/fixtures/jpeg_quality.npz`` (run with a Python that has TensorFlow:
``/path/to/tf-venv/bin/python tools/make_jpeg_quality_fixtures.py``)."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "image", "fixtures", "jpeg_quality.npz")


def images() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:37, 0:45]
    smooth = np.stack([(xx * 5) % 256, (yy * 7) % 256, ((xx + yy) * 3) % 256], -1).astype(np.uint8)
    return {
        "rgb_u8": smooth,
        "noise_u8": rng.integers(0, 256, (24, 32, 3), dtype=np.uint8),
        "gray_u8": smooth[..., :1].copy(),
        "rgb_f32": (smooth.astype(np.float32) / 255.0),
    }


def main() -> None:
    out: dict[str, np.ndarray] = {}
    for name, image in images().items():
        out[f"in/{name}"] = image
        for quality in (5, 50, 95):
            out[f"adjust/{name}/{quality}"] = tf.image.adjust_jpeg_quality(image, quality).numpy()
        for seed in ((1, 2), (7, 11)):
            out[f"stateless/{name}/{seed[0]}_{seed[1]}"] = tf.image.stateless_random_jpeg_quality(
                image, 20, 90, seed=seed).numpy()
    np.savez_compressed(OUT, **out)
    print(f"wrote {len(out)} arrays to {OUT}")


if __name__ == "__main__":
    main()
