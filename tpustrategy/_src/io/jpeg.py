"""JPEG decoding with TensorFlow's libjpeg settings (``tf.io.decode_jpeg`` and friends).

TensorFlow decodes with libjpeg-turbo; its default ``dct_method=""`` selects the *fast*
integer IDCT (``JDCT_IFAST``), ``"INTEGER_ACCURATE"`` the slow one, and fancy upsampling
is on unless ``fancy_upscaling=False``. simplejpeg drives the same library with the
same two switches, so the pixels are TensorFlow's bit for bit. CMYK/YCCK JPEGs are turned
into RGB by TensorFlow's own formula (which depends on the Adobe marker).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io import _backends

UNCOMPRESS_FAILED = "jpeg::Uncompress failed. Invalid JPEG data or crop window."
_DCT_METHODS = ("", "INTEGER_FAST", "INTEGER_ACCURATE")


def check_flags(ratio: Any, dct_method: Any) -> tuple[int, bool]:
    """Validates ``ratio`` and ``dct_method``; returns (ratio, fast_dct)."""
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"ratio must be 1, 2, 4, or 8, got {ratio}")
    if isinstance(dct_method, bytes):
        dct_method = dct_method.decode()
    if dct_method not in _DCT_METHODS:
        raise InvalidArgumentError("dct_method must be one of {'', 'INTEGER_FAST', "
                                   "'INTEGER_ACCURATE'}")
    return int(ratio), dct_method != "INTEGER_ACCURATE"


def _has_adobe_marker(data: bytes) -> bool:
    """Whether the JPEG has an APP14 "Adobe" segment before its first scan (libjpeg's rule)."""
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return False
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker == 0xDA:  # start of scan: markers after it do not count
            return False
        length = int.from_bytes(data[pos + 2: pos + 4], "big")
        if marker == 0xEE and data[pos + 4: pos + 9] == b"Adobe":
            return True
        pos += 2 + length
    return False


def header(data: bytes) -> tuple[int, int, str] | None:
    """(height, width, colorspace) from the JPEG header, or None when it cannot be read."""
    sj = _backends.simplejpeg()
    try:
        height, width, colorspace, _ = sj.decode_jpeg_header(data, strict=False)
    except (ValueError, RuntimeError):
        return None
    return int(height), int(width), str(colorspace)


def decode(data: bytes, *, channels: int, ratio: int = 1, fancy_upscaling: bool = True,
           try_recover_truncated: bool = False, acceptable_fraction: float = 1.0,
           fast_dct: bool = True, crop: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """Decodes JPEG bytes to a ``[height, width, channels]`` uint8 array as TensorFlow does.

    Raises InvalidArgumentError with TensorFlow's message when libjpeg fails (corrupt or
    truncated data without ``try_recover_truncated``, an invalid crop window).
    """
    sj = _backends.simplejpeg()
    info = header(data)
    if info is None:
        raise InvalidArgumentError(UNCOMPRESS_FAILED)
    height, width, colorspace = info
    cmyk = colorspace in ("CMYK", "YCCK")
    components = channels or (1 if colorspace == "Gray" else 3)
    if components == 1 and cmyk:
        raise InvalidArgumentError(UNCOMPRESS_FAILED)  # libjpeg: no CMYK -> grayscale
    out_h, out_w = math.ceil(height / ratio), math.ceil(width / ratio)
    if crop is not None:
        y, x, h, w = crop
        if not (w > 0 and h > 0 and x >= 0 and y >= 0 and y + h <= out_h and x + w <= out_w):
            raise InvalidArgumentError(UNCOMPRESS_FAILED)
    colorspace_out = "CMYK" if cmyk else ("GRAY" if components == 1 else "RGB")
    # A truncated file: libjpeg (TensorFlow's source manager with try_recover_truncated, and
    # TurboJPEG's memory source when not strict) ends the data with a fake EOI marker.
    strict = not try_recover_truncated
    try:
        pixels = sj.decode_jpeg(data, colorspace=colorspace_out, fastdct=fast_dct,
                                fastupsample=not fancy_upscaling, min_height=out_h,
                                min_width=out_w, strict=strict)
    except (ValueError, RuntimeError) as e:
        if acceptable_fraction < 1.0 and not try_recover_truncated:
            raise InvalidArgumentError(
                f"{UNCOMPRESS_FAILED}\ntps.io: acceptable_fraction < 1 without "
                "try_recover_truncated is not supported (the partial rows libjpeg read are not "
                "reported by the decoder); pass try_recover_truncated=True.") from e
        raise InvalidArgumentError(UNCOMPRESS_FAILED) from e
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.shape[:2] != (out_h, out_w):  # the library picked another scale: never silently
        raise InvalidArgumentError(
            f"{UNCOMPRESS_FAILED}\ntps.io: the JPEG library returned {pixels.shape[:2]} for "
            f"ratio={ratio}, expected {(out_h, out_w)}.")
    if cmyk:
        pixels = _cmyk_to_rgb(pixels, adobe=_has_adobe_marker(data))
    if components == 3 and pixels.shape[-1] == 1:
        pixels = np.repeat(pixels, 3, axis=-1)
    if crop is not None:
        y, x, h, w = crop
        pixels = pixels[y: y + h, x: x + w]
    return np.ascontiguousarray(pixels)


def _cmyk_to_rgb(cmyk: np.ndarray, *, adobe: bool) -> np.ndarray:
    """TensorFlow's CMYK -> RGB on libjpeg's CMYK output (the values as stored).

    Adobe's CMYK JPEGs store inverted values: r = k * c / 255; otherwise
    r = (255 - k) * (255 - c) / 255 (integer division, as TensorFlow's kernel).
    """
    v = cmyk.astype(np.int32)
    if not adobe:
        v = 255 - v
    c, m, y, k = v[..., 0], v[..., 1], v[..., 2], v[..., 3]
    rgb = np.stack([k * c // 255, k * m // 255, k * y // 255], axis=-1)
    return rgb.astype(np.uint8)


def shape(data: bytes) -> tuple[int, int, int] | None:
    """(height, width, components) as libjpeg reports after jpeg_start_decompress, or None."""
    info = header(data)
    if info is None:
        return None
    height, width, colorspace = info
    try:  # jpeg_start_decompress reads the tables too: a header-only check is not enough
        _backends.simplejpeg().decode_jpeg_header(data, strict=True)
    except (ValueError, RuntimeError):
        return None
    components = {"Gray": 1, "CMYK": 4, "YCCK": 4}.get(colorspace, 3)
    return height, width, components


def encode(image: np.ndarray, *, components: int, quality: int, progressive: bool,
           optimize_size: bool, chroma_downsampling: bool, density_unit: str, x_density: int,
           y_density: int, xmp_metadata: bytes) -> bytes:
    """JPEG bytes with TensorFlow's libjpeg settings, through Pillow's libjpeg-turbo."""
    import io

    image_mod = _backends.pil_image()
    mode = "L" if components == 1 else "RGB"
    pixels = image[:, :, 0] if components == 1 else image[:, :, :3]
    im = image_mod.fromarray(np.ascontiguousarray(pixels), mode=mode)
    buf = io.BytesIO()
    options: dict[str, Any] = {
        "quality": quality, "progressive": progressive, "optimize": optimize_size,
        "subsampling": 2 if chroma_downsampling else 0,
        "dpi": (x_density, y_density),
    }
    if xmp_metadata:
        options["xmp"] = xmp_metadata
    im.save(buf, "JPEG", **options)
    data = buf.getvalue()
    if density_unit == "cm":  # JFIF APP0 density unit byte: 1 = inch, 2 = cm
        at = data.find(b"JFIF\0")
        if at >= 0:
            data = data[: at + 7] + b"\x02" + data[at + 8:]
    return data
