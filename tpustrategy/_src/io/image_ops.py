"""The public image ops of ``tps.io``: TensorFlow's names, arguments, defaults and errors.

Each takes one encoded image (``bytes``, a ``tpsd`` string scalar, or a 0-d object array)
and returns a NumPy array, so it can run inside ``Dataset.map``.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io import _backends, images, jpeg
from tpustrategy._src.io._tensors import as_dtype, as_int, scalar_string


def _jpeg_flags(ratio: Any, fancy_upscaling: bool, try_recover_truncated: bool,
                acceptable_fraction: float, dct_method: Any) -> images.JpegFlags:
    ratio, fast = jpeg.check_flags(as_int(ratio, api="tps.io.decode_jpeg", arg="ratio"), dct_method)
    return images.JpegFlags(ratio=ratio, fancy_upscaling=bool(fancy_upscaling),
                            try_recover_truncated=bool(try_recover_truncated),
                            acceptable_fraction=float(acceptable_fraction), fast_dct=fast)


def decode_jpeg(contents: Any, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1,
                dct_method: str = "", name: str | None = None) -> np.ndarray:
    """Decodes a JPEG image to a uint8 ``[height, width, channels]`` array (``tf.io.decode_jpeg``).

    As TensorFlow's op, it also decodes PNG and single-frame GIF data.

    Args:
      contents: the JPEG bytes (a scalar string).
      channels: 0 (as stored: 1 for grayscale, 3 for colour and CMYK), 1 or 3.
      ratio: downscaling while decoding: 1, 2, 4 or 8 (output size ``ceil(size / ratio)``).
      fancy_upscaling: libjpeg's smooth chroma upsampling (on by default).
      try_recover_truncated: decode a truncated file as far as it goes.
      acceptable_fraction: with truncated data, the fraction of lines required.
      dct_method: ``""`` (TensorFlow's default: libjpeg's fast integer IDCT),
        ``"INTEGER_FAST"`` or ``"INTEGER_ACCURATE"``.
      name: unused (TensorFlow's op name).

    Returns:
      A uint8 array ``[height, width, channels]``, equal to TensorFlow's pixels.

    Raises:
      tps.errors.InvalidArgumentError: corrupt data, bad ``ratio`` / ``dct_method`` /
        ``channels`` (TensorFlow's messages).
      ImportError: the ``images`` extra is not installed.
    """
    del name
    flags = _jpeg_flags(ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction,
                        dct_method)
    return images.decode_any("DecodeJpeg", contents, channels=images.check_channels(channels),
                             flags=flags)


def decode_and_crop_jpeg(contents: Any, crop_window: Any, channels: int = 0, ratio: int = 1,
                         fancy_upscaling: bool = True, try_recover_truncated: bool = False,
                         acceptable_fraction: float = 1, dct_method: str = "",
                         name: str | None = None) -> np.ndarray:
    """Decodes the ``crop_window`` of a JPEG (``tf.io.decode_and_crop_jpeg``).

    Args:
      contents: the JPEG bytes.
      crop_window: ``[crop_y, crop_x, crop_height, crop_width]`` (int32), inside the image.
      channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction,
        dct_method, name: as in `decode_jpeg`.

    Returns:
      A uint8 array ``[crop_height, crop_width, channels]``.

    Raises:
      tps.errors.InvalidArgumentError: a window outside the image, non-JPEG data.
    """
    del name
    window = np.asarray(crop_window)
    if window.ndim != 1:
        raise InvalidArgumentError(f"crop_window must be 1-D, got shape {list(window.shape)}")
    if window.shape[0] != 4:
        raise InvalidArgumentError(f"crop_size must have four elements {list(window.shape)}")
    flags = _jpeg_flags(ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction,
                        dct_method)
    y, x, h, w = (int(v) for v in window)
    return images.decode_any("DecodeAndCropJpeg", contents,
                             channels=images.check_channels(channels), flags=flags,
                             crop=(y, x, h, w))


def extract_jpeg_shape(contents: Any, output_type: Any = np.int32,
                       name: str | None = None) -> np.ndarray:
    """The ``[height, width, channels]`` of a JPEG without decoding it (``tf.io.extract_jpeg_shape``).

    Args:
      contents: the JPEG bytes.
      output_type: int32 (default) or int64.
      name: unused.

    Returns:
      A 1-D array of 3 values; channels is 1 (grayscale), 3 (colour) or 4 (CMYK).

    Raises:
      tps.errors.InvalidArgumentError: ``Invalid JPEG data, size N`` for other data.
    """
    del name
    dtype = as_dtype(output_type, api="tps.io.extract_jpeg_shape", arg="output_type")
    if dtype not in (np.int32, np.int64):
        raise TypeError(f"tps.io.extract_jpeg_shape: output_type must be int32 or int64. "
                        f"Received: output_type={output_type!r}.")
    data = scalar_string(contents, api="tps.io.extract_jpeg_shape", arg="contents")
    shape = jpeg.shape(data) if data.startswith(b"\xff\xd8") else None
    if shape is None:
        raise InvalidArgumentError(f"Invalid JPEG data, size {len(data)}")
    return np.array(shape, dtype)


def decode_png(contents: Any, channels: int = 0, dtype: Any = np.uint8,
               name: str | None = None) -> np.ndarray:
    """Decodes a PNG image (``tf.io.decode_png``); also JPEG and single-frame GIF data.

    Args:
      contents: the PNG bytes.
      channels: 0 (as stored), 1 (grayscale), 3 (RGB) or 4 (RGBA).
      dtype: uint8 (default) or uint16.
      name: unused.

    Returns:
      An array ``[height, width, channels]`` of ``dtype``.
    """
    del name
    out = images.image_dtype(dtype, api="DecodePng", allowed=("uint8", "uint16"))
    return images.decode_any("DecodePng", contents, channels=images.check_channels(channels),
                             dtype=out)


def decode_gif(contents: Any, name: str | None = None) -> np.ndarray:
    """Decodes every frame of a GIF to a uint8 ``[frames, height, width, 3]`` array (``tf.io.decode_gif``)."""
    del name
    return images.decode_any("DecodeGif", contents, channels=0)


def decode_bmp(contents: Any, channels: int = 0, name: str | None = None) -> np.ndarray:
    """Decodes an uncompressed 8/24/32-bit BMP (``tf.io.decode_bmp``).

    Args:
      contents: the BMP bytes.
      channels: 0 (as stored), 3 (RGB) or 4 (RGBA).
      name: unused.
    """
    del name
    return images.decode_any("DecodeBmp", contents, channels=images.check_channels(channels))


def decode_image(contents: Any, channels: int | None = None, dtype: Any = np.uint8,
                 name: str | None = None, expand_animations: bool = True) -> np.ndarray:
    """Decodes BMP, GIF, JPEG or PNG by their magic bytes (``tf.io.decode_image``).

    Args:
      contents: the encoded image bytes.
      channels: None/0 (as stored), 1, 3 or 4.
      dtype: uint8, uint16 or float32 (scaled to [0, 1]); another float dtype goes through
        uint16 as TensorFlow's ``convert_image_dtype`` does.
      name: unused.
      expand_animations: when True a GIF gives ``[frames, height, width, 3]``; when False
        its first frame ``[height, width, 3]``.

    Returns:
      ``[height, width, channels]`` (or 4-D for an animated GIF with ``expand_animations``).
    """
    del name
    out = as_dtype(dtype, api="tps.io.decode_image", arg="dtype")
    channels = images.check_channels(0 if channels is None else channels)
    if out.name in ("uint8", "uint16", "float32"):
        return images.decode_any("DecodeImage", contents, channels=channels, dtype=out,
                                 expand_animations=bool(expand_animations))
    wide = images.decode_any("DecodeImage", contents, channels=channels,
                             dtype=np.dtype(np.uint16), expand_animations=bool(expand_animations))
    return images._convert_from_uint16(wide, out)


_JPEG_FORMATS = {"": None, "grayscale": 1, "rgb": 3}


def encode_jpeg(image: Any, format: str = "", quality: int = 95, progressive: bool = False,  # noqa: A002
                optimize_size: bool = False, chroma_downsampling: bool = True,
                density_unit: str = "in", x_density: int = 300, y_density: int = 300,
                xmp_metadata: str = "", name: str | None = None) -> bytes:
    """Encodes a uint8 ``[height, width, 1 or 3]`` image as JPEG (``tf.io.encode_jpeg``).

    Returns:
      The JPEG ``bytes`` (libjpeg-turbo through Pillow, with TensorFlow's settings: quality,
      4:2:0 chroma unless ``chroma_downsampling=False``, JFIF density).
    """
    del name
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise TypeError(f"tps.io.encode_jpeg: image must be uint8. Received dtype {arr.dtype}."
                        "\nFix: convert first, e.g. np.clip(x * 255, 0, 255).astype(np.uint8).")
    if arr.ndim != 3:
        raise InvalidArgumentError(f"image must be 3-dimensional{list(arr.shape)}".replace(", ", ","))
    if format not in _JPEG_FORMATS:
        raise ValueError(f"tps.io.encode_jpeg: format must be '', 'grayscale' or 'rgb'. "
                         f"Received: format={format!r}.")
    components = _JPEG_FORMATS[format] or arr.shape[-1]
    if arr.shape[-1] != components or components not in (1, 3):
        if format:
            raise InvalidArgumentError(f"format {format} expects {components} channels, got "
                                       f"{list(arr.shape)}".replace(", ", ","))
        raise InvalidArgumentError(f"image must have 1 or 3 channels, got {list(arr.shape)}"
                                   .replace(", ", ","))
    if not 0 <= int(quality) <= 100:
        raise InvalidArgumentError(f"quality must be in [0,100], got {quality}")
    if density_unit not in ("in", "cm"):
        raise InvalidArgumentError(f"density_unit must be 'in' or 'cm', got {density_unit}")
    xmp = xmp_metadata.encode() if isinstance(xmp_metadata, str) else bytes(xmp_metadata)
    return jpeg.encode(arr, components=components, quality=int(quality),
                       progressive=bool(progressive), optimize_size=bool(optimize_size),
                       chroma_downsampling=bool(chroma_downsampling), density_unit=density_unit,
                       x_density=int(x_density), y_density=int(y_density), xmp_metadata=xmp)


def encode_png(image: Any, compression: int = -1, name: str | None = None) -> bytes:
    """Encodes a uint8/uint16 ``[height, width, 1..4]`` image as PNG (``tf.io.encode_png``).

    Args:
      image: the pixels; 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA) channels.
      compression: zlib level 0-9, or -1 for the default.
      name: unused.

    Returns:
      PNG ``bytes`` (lossless: decoding gives the pixels back; the compressed bytes need not
      equal TensorFlow's).
    """
    del name
    arr = np.asarray(image)
    if arr.dtype not in (np.uint8, np.uint16):
        raise TypeError(f"tps.io.encode_png: image must be uint8 or uint16. Received dtype "
                        f"{arr.dtype}.")
    if arr.ndim != 3:
        raise InvalidArgumentError(f"image must be 3-dimensional{list(arr.shape)}".replace(", ", ","))
    channels = arr.shape[-1]
    if channels not in (1, 2, 3, 4):
        raise InvalidArgumentError(f"image must have 1, 2, 3, or 4 channels, got {channels}")
    if not -1 <= int(compression) <= 9:
        raise InvalidArgumentError(f"compression should be in [-1,9], got {compression}")
    level = 6 if int(compression) == -1 else int(compression)
    if arr.dtype == np.uint16 and channels != 1:
        return _encode_png_16(arr, level)
    image_mod = _backends.pil_image()
    if arr.dtype == np.uint16:
        im = image_mod.fromarray(np.ascontiguousarray(arr[:, :, 0]).astype("<u2"), mode="I;16")
    else:
        mode = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
        im = image_mod.fromarray(np.ascontiguousarray(arr if channels > 1 else arr[:, :, 0]),
                                 mode=mode)
    buf = io.BytesIO()
    im.save(buf, "PNG", compress_level=level)
    return buf.getvalue()


def _encode_png_16(arr: np.ndarray, level: int) -> bytes:
    """A 16-bit colour PNG written directly (Pillow has no 16-bit colour mode)."""
    import struct
    import zlib

    height, width, channels = arr.shape
    color_type = {2: 4, 3: 2, 4: 6}[channels]
    rows = arr.astype(">u2").reshape(height, width * channels).view(np.uint8)
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", width, height, 16, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(raw, level)) + chunk(b"IEND", b""))


__all__ = ["decode_and_crop_jpeg", "decode_bmp", "decode_gif", "decode_image", "decode_jpeg",
           "decode_png", "encode_jpeg", "encode_png", "extract_jpeg_shape"]
