"""``decode_image`` and the per-format decoders (``tf.io.decode_png`` / ``gif`` / ``bmp``).

TensorFlow routes every decode op through one kernel that looks at the magic bytes, so
``decode_jpeg`` also decodes PNG and GIF, ``decode_png`` decodes JPEG, and so on; each
op keeps its own checks (channels, frames, BMP only through ``decode_bmp`` /
``decode_image``). This module is that dispatcher; the JPEG path is :mod:`.jpeg`, PNG
and GIF go through Pillow (libpng / Pillow's GIF reader), BMP is TensorFlow's own simple
reader, written here in NumPy.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io import _backends, jpeg
from tpustrategy._src.io._tensors import as_dtype, as_int, scalar_string

_UNKNOWN = "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required."


def classify(data: bytes) -> str:
    """The format TensorFlow's kernel sees in the leading bytes ("jpeg", "png", ... "unknown")."""
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"GIF8"):
        return "gif"
    if data.startswith(b"BM"):
        return "bmp"
    if data.startswith(b"RIFF") and len(data) > 12 and data[8:12] == b"WEBP":
        return "webp"
    return "unknown"


@dataclass(frozen=True)
class JpegFlags:
    """The libjpeg settings of DecodeJpeg / DecodeAndCropJpeg (DecodeImage uses the defaults)."""

    ratio: int = 1
    fancy_upscaling: bool = True
    try_recover_truncated: bool = False
    acceptable_fraction: float = 1.0
    fast_dct: bool = True


def check_channels(channels: Any) -> int:
    channels = as_int(channels, api="tps.io", arg="channels")
    if channels not in (0, 1, 3, 4):
        raise InvalidArgumentError(f"`channels` must be 0, 1, 3 or 4 but got {channels}")
    return channels


def decode_any(op: str, contents: Any, *, channels: int = 0, dtype: np.dtype | None = None,
               expand_animations: bool = True, flags: JpegFlags = JpegFlags(),
               crop: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """TensorFlow's DecodeImageV2 kernel for op type ``op`` ("DecodeJpeg", "DecodePng", ...)."""
    data = scalar_string(contents, api=f"tps.io ({op})")
    if not data:
        raise InvalidArgumentError("Input is empty.")
    out_dtype = np.dtype(np.uint8) if dtype is None else dtype
    kind = classify(data)
    if kind == "jpeg":
        if channels == 4:
            raise InvalidArgumentError("JPEG does not support 4 channels")
        if op == "DecodeBmp":
            raise InvalidArgumentError("Trying to decode JPEG format using DecodeBmp op. Use "
                                       "`decode_jpeg` or `decode_image` instead.")
        pixels = jpeg.decode(data, channels=channels, ratio=flags.ratio,
                             fancy_upscaling=flags.fancy_upscaling,
                             try_recover_truncated=flags.try_recover_truncated,
                             acceptable_fraction=flags.acceptable_fraction,
                             fast_dct=flags.fast_dct, crop=crop)
        out = _from_uint8(pixels, out_dtype)
        return out[None] if op == "DecodeGif" else out
    if kind == "png":
        if op == "DecodeBmp":
            raise InvalidArgumentError("Trying to decode PNG format using DecodeBmp op. Use "
                                       "`decode_png` or `decode_image` instead.")
        if op == "DecodeAndCropJpeg":
            raise InvalidArgumentError("DecodeAndCropJpeg operation can run on JPEG only, but "
                                       "detected PNG.")
        out = _decode_png(data, channels, out_dtype)
        return out[None] if op == "DecodeGif" else out
    if kind == "gif":
        if channels not in (0, 3):
            raise InvalidArgumentError(f"channels must be 0 or 3 for GIF, got {channels}")
        if op == "DecodeBmp":
            raise InvalidArgumentError("Trying to decode GIF format using DecodeBmp op. Use "
                                       "`decode_gif` or `decode_image` instead.")
        if op == "DecodeAndCropJpeg":
            raise InvalidArgumentError("DecodeAndCropJpeg operation can run on JPEG only, but "
                                       "detected GIF.")
        frames = _decode_gif(data)
        if op in ("DecodePng", "DecodeJpeg"):
            if frames.shape[0] != 1:
                raise InvalidArgumentError(
                    f"Got {frames.shape[0]} frames, but animated gifs can only be decoded by "
                    "tf.io.decode_gif or tf.io.decode_image")
            frames = frames[0]
        elif op == "DecodeImage" and not expand_animations:
            frames = frames[0]
        return _from_uint8(frames, out_dtype)
    if kind == "bmp":
        if channels == 1:
            raise InvalidArgumentError(f"`channels` must be 0, 3 or 4 for BMP, but got {channels}")
        if op == "DecodeAndCropJpeg":
            raise InvalidArgumentError("DecodeAndCropJpeg operation can run on JPEG only, but "
                                       "detected BMP.")
        if op not in ("DecodeBmp", "DecodeImage"):
            raise InvalidArgumentError(
                "Trying to decode BMP format using a wrong op. Use `decode_bmp` or "
                f"`decode_image` instead. Op used: {op}")
        return _from_uint8(_decode_bmp(data, channels), out_dtype)
    if kind == "webp":
        raise InvalidArgumentError(
            "tps.io: WebP images are not supported (TensorFlow 2.21 decodes them).\nFix: "
            "convert the files to PNG or JPEG, or decode them with Pillow in the map function.")
    raise InvalidArgumentError(_UNKNOWN)


def _from_uint8(pixels: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """TensorFlow's widening of 8-bit pixels: uint16 = v * 256, float = v * (1/255)."""
    if dtype == np.uint8:
        return pixels
    if dtype == np.uint16:
        return pixels.astype(np.uint16) * np.uint16(256)
    if dtype == np.float32:
        return pixels.astype(np.float32) * np.float32(1.0 / 255)
    return _convert_from_uint16(pixels.astype(np.uint16) * np.uint16(256), dtype)


def _convert_from_uint16(pixels: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """decode_image's path for other dtypes: uint16 pixels through convert_image_dtype."""
    if dtype.kind == "f":
        return pixels.astype(dtype) * dtype.type(1.0 / 65535)
    raise ValueError(f"tps.io.decode_image: dtype {dtype} is not supported; use uint8, "
                     "uint16 or a floating dtype.")


# PNG ----------------------------------------------------------------------------------------

def _decode_png(data: bytes, channels: int, dtype: np.dtype) -> np.ndarray:
    image_mod = _backends.pil_image()
    try:
        im = image_mod.open(io.BytesIO(data))
        im.load()
    except Exception as e:  # Pillow raises several types for corrupt data
        raise InvalidArgumentError(f"Invalid PNG data, size {len(data)}") from e
    sixteen = len(data) > 24 and data[24] == 16  # IHDR bit depth
    if im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    elif im.mode == "1":
        im = im.convert("L")
    elif im.mode in ("L", "RGB") and "transparency" in im.info:
        im = im.convert("LA" if im.mode == "L" else "RGBA")
    arr = np.asarray(im)
    if im.mode in ("I;16", "I;16B", "I"):
        arr = arr.astype(np.uint16)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.dtype != np.uint16 and sixteen and (dtype != np.uint8 or channels in (1, 2)):
        raise InvalidArgumentError(
            "tps.io.decode_png: 16-bit colour PNGs decode only to uint8 colour here (Pillow keeps "
            "8 bits of colour channels).\nFix: pass dtype=uint8 with channels 0, 3 or 4, or "
            "store 16-bit images as "
            "grayscale PNGs or raw bytes (decode_raw).")
    have = arr.shape[-1]
    want = channels or have
    arr = _png_channels(arr, have, want)
    if dtype == np.uint8:
        return (arr >> 8).astype(np.uint8) if arr.dtype == np.uint16 else arr
    wide = arr if arr.dtype == np.uint16 else arr.astype(np.uint16) * np.uint16(257)
    if dtype == np.uint16:
        return wide
    if dtype == np.float32:
        return wide.astype(np.float32) * np.float32(1.0 / 65535)
    return _convert_from_uint16(wide, dtype)


def _png_channels(arr: np.ndarray, have: int, want: int) -> np.ndarray:
    """libpng's channel transforms as TensorFlow sets them (rgb_to_gray, gray_to_rgb, alpha)."""
    if have == want:
        return arr
    color, alpha = (arr[..., :3], arr[..., 3:]) if have in (3, 4) else (arr[..., :1], arr[..., 1:])
    if want in (1, 2) and have in (3, 4):
        color = _rgb_to_gray(color)
    elif want in (3, 4) and have in (1, 2):
        color = np.repeat(color, 3, axis=-1)
    if want in (2, 4):
        if alpha.shape[-1] == 0:
            alpha = np.full(color.shape[:2] + (1,), np.iinfo(arr.dtype).max, arr.dtype)
        return np.concatenate([color, alpha], axis=-1)
    return color


def _rgb_to_gray(rgb: np.ndarray) -> np.ndarray:
    """libpng's png_set_rgb_to_gray as TensorFlow calls it (0.299, 0.587 -> 15-bit fixed point
    truncated)."""
    v = rgb.astype(np.int64)
    gray = (9797 * v[..., 0] + 19234 * v[..., 1] + 3737 * v[..., 2]) >> 15
    return gray[..., None].astype(rgb.dtype)


# GIF ----------------------------------------------------------------------------------------

def _decode_gif(data: bytes) -> np.ndarray:
    image_mod = _backends.pil_image()
    try:
        im = image_mod.open(io.BytesIO(data))
        frames = []
        for index in range(getattr(im, "n_frames", 1)):
            im.seek(index)
            frames.append(np.asarray(im.convert("RGB")))
    except Exception as e:  # Pillow raises several types for corrupt data
        raise InvalidArgumentError(f"Invalid GIF data (size {len(data)}), {e}") from e
    return np.stack(frames)


# BMP ----------------------------------------------------------------------------------------

def _decode_bmp(data: bytes, channels: int) -> np.ndarray:
    """TensorFlow's BMP reader: uncompressed 8/24/32-bit pixels from the header's offset."""
    if len(data) < 32:
        raise InvalidArgumentError(
            "Incomplete bmp content, requires at least 32 bytes to find the header size, width, "
            f"height, and bpp, got {len(data)} bytes")
    header_size = int.from_bytes(data[10:14], "little", signed=True)
    width = int.from_bytes(data[18:22], "little", signed=True)
    height = int.from_bytes(data[22:26], "little", signed=True)
    bpp = int.from_bytes(data[28:30], "little", signed=True)
    img_channels = int(bpp / 8)
    if img_channels not in (1, 3, 4):
        raise InvalidArgumentError(
            f"Number of channels inherent in the image must be 1, 3 or 4, was {img_channels}")
    want = channels or img_channels
    if width <= 0:
        raise InvalidArgumentError("Width must be positive")
    if height == 0:
        raise InvalidArgumentError("Height must be nonzero")
    if header_size < 0:
        raise InvalidArgumentError("header size must be nonnegative")
    abs_height = abs(height)
    row_size = (img_channels * width + 3) // 4 * 4
    size_diff = len(data) - header_size - row_size * abs_height
    if size_diff != 0:
        raise InvalidArgumentError("Input size should match (header_size + row_size * abs_height) "
                                   f"but they differ by {size_diff}")
    rows = np.frombuffer(data, np.uint8, row_size * abs_height, header_size)
    pixels = rows.reshape(abs_height, row_size)[:, : width * img_channels]
    pixels = pixels.reshape(abs_height, width, img_channels)
    if height > 0:  # bottom-up rows
        pixels = pixels[::-1]
    if img_channels == 1:
        color = np.repeat(pixels, 3, axis=-1) if want in (3, 4) else pixels
        alpha = np.full((abs_height, width, 1), 255, np.uint8)
    else:
        color = pixels[..., 2::-1]  # BGR(A) -> RGB
        alpha = pixels[..., 3:] if img_channels == 4 else np.full((abs_height, width, 1), 255,
                                                                  np.uint8)
    out = np.concatenate([color, alpha], axis=-1) if want == 4 else color
    return np.ascontiguousarray(out)


def image_dtype(dtype: Any, *, api: str, allowed: tuple[str, ...]) -> np.dtype:
    """The output dtype of a decode op, with TensorFlow's check of the allowed ones."""
    out = as_dtype(dtype, api=api, arg="dtype")
    if out.name not in allowed:
        raise InvalidArgumentError(
            f"`dtype` for `{api}` must be {', '.join(allowed)} but got: {out.name}")
    return out
