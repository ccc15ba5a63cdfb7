"""TensorFlow's decode_image_op_test / decode_png_op_test / decode_jpeg_op_test, ported.

TensorFlow reads test images from tensorflow/core/lib/*/testdata; here images of the same
kind (and for scan.gif the same pixels: a white bar stepping 5 pixels per frame) are made
with Pillow or by hand, and TensorFlow's assertions are kept.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("simplejpeg")

import tpustrategy as tps  # noqa: E402
from tpustrategy._src.errors import InvalidArgumentError  # noqa: E402


def _pil(array: np.ndarray, fmt: str, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, fmt, **kwargs)
    return buf.getvalue()


def _picture(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 255 // (w - 1), y * 255 // (h - 1), (x * y) % 256], -1).astype(np.uint8)


def _scan_frames(width: int = 20, height: int = 40, stride: int = 5, n: int = 12) -> np.ndarray:
    """scan.gif's frames as decode_image_op_test describes them (its ground truth)."""
    frames = np.zeros((n, height, width, 3), np.uint8)
    for i in range(n):
        start, end = i * stride, (i + 1) * stride
        if end <= width:
            frames[i, :, start:end] = 255
        else:
            frames[i, start - width:end - width, :] = 255
    return frames


def test_bmp_decode_image_equals_decode_bmp():
    data = _pil(_picture(32, 40), "BMP")
    assert len(data) == 54 + 32 * 40 * 3  # header + rows (120 bytes: already 4-aligned)
    np.testing.assert_array_equal(tps.io.decode_image(data), tps.io.decode_bmp(data))
    np.testing.assert_array_equal(tps.io.decode_bmp(data), _picture(32, 40))


def test_gif_frames_are_the_scan_pattern_and_one_channel_is_refused():
    truth = _scan_frames()
    images = [Image.fromarray(f).convert("P") for f in truth]
    buf = io.BytesIO()
    images[0].save(buf, "GIF", save_all=True, append_images=images[1:], duration=10, loop=0)
    gif = buf.getvalue()
    image0 = tps.io.decode_image(gif)
    image1 = tps.io.decode_gif(gif)
    assert image0.shape == (12, 40, 20, 3)
    np.testing.assert_array_equal(image0, image1)
    np.testing.assert_array_equal(image0, truth)
    with pytest.raises(InvalidArgumentError):
        tps.io.decode_image(gif, channels=1)


def test_jpeg_decode_image_equals_decode_jpeg_and_four_channels_are_refused():
    jpeg = _pil(_picture(256, 128), "JPEG", quality=90)
    image0 = tps.io.decode_image(jpeg)
    assert image0.shape == (256, 128, 3)
    np.testing.assert_array_equal(image0, tps.io.decode_jpeg(jpeg))
    with pytest.raises(InvalidArgumentError):
        tps.io.decode_image(jpeg, channels=4)


@pytest.mark.parametrize("channels", [0, 1, 3, 4])
def test_gray_png_in_every_channel_count(channels):
    gray = _picture(26, 51)[..., 0]
    png = _pil(gray, "PNG")
    image0 = tps.io.decode_image(png, channels=channels)
    image1 = tps.io.decode_png(png, channels=channels)
    assert image0.shape == (26, 51, channels or 1)
    np.testing.assert_array_equal(image0, image1)
    for c in range(min(channels or 1, 3)):  # gray is copied into R, G and B
        np.testing.assert_array_equal(image0[..., c], gray)
    if channels == 4:
        assert (image0[..., 3] == 255).all()


def test_invalid_bytes_raise_invalid_argument():
    with pytest.raises(InvalidArgumentError):
        tps.io.decode_image(b"ThisIsNotAnImage!")


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def test_16bit_png_written_by_another_encoder():
    # decode_png_op_test's image, a 2x2 16-bit grayscale PNG, written here chunk by chunk
    # (TensorFlow's test uses bytes from Go's encoder).
    pixels = np.array([[0, 255], [1024, 1024 + 255]], ">u2")
    header = struct.pack(">IIBBBBB", 2, 2, 16, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + row.tobytes() for row in pixels)
    png = (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
           + _chunk(b"IDAT", zlib.compress(rows, 9)) + _chunk(b"IEND", b""))
    decoded = tps.io.decode_png(png, dtype=np.uint16)
    assert decoded.shape == (2, 2, 1) and decoded.dtype == np.uint16
    np.testing.assert_array_equal(np.squeeze(decoded), [[0, 255], [1024, 1279]])


def test_decode_and_crop_equals_decode_then_crop_on_a_tiled_image():
    # decode_jpeg_op_test's benchmark: a 4x4 tiling of an image, crop window [10, 10, 50, 50],
    # fused decode-and-crop vs decode then crop_to_bounding_box (identical for 4:4:4 chroma).
    single = tps.io.decode_jpeg(_pil(_picture(48, 40), "JPEG", quality=90), channels=3)
    tiled = np.tile(single, (4, 4, 1))
    image = tps.io.encode_jpeg(tiled, chroma_downsampling=False)
    window = [10, 10, 50, 50]
    fused = tps.io.decode_and_crop_jpeg(image, window, channels=3)
    full = tps.io.decode_jpeg(image, channels=3)
    np.testing.assert_array_equal(fused, full[10:60, 10:60])
