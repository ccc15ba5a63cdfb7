"""The image codec libraries of the ``images`` extra, imported on first use.

JPEG decoding goes through simplejpeg (libjpeg-turbo's TurboJPEG API): it exposes the
two switches TensorFlow's decoder sets, the DCT method (TensorFlow's default is
libjpeg's fast integer DCT) and fancy upsampling, so its pixels are TensorFlow's. PNG,
GIF and BMP decoding and JPEG/PNG encoding go through Pillow (libpng, giflib-compatible
GIF reader, libjpeg-turbo).
"""

from __future__ import annotations

from types import ModuleType

_FIX = "Fix: pip install 'tpustrategy[images]' (installs Pillow and simplejpeg)."


def simplejpeg() -> ModuleType:
    """The ``simplejpeg`` module, or an ImportError naming the extra to install."""
    try:
        import simplejpeg as module
    except ImportError as e:
        raise ImportError(
            f"tps.io JPEG decoding needs the simplejpeg package (libjpeg-turbo), which is not "
            f"installed.\n{_FIX}") from e
    return module


def pil_image() -> ModuleType:
    """Pillow's ``PIL.Image`` module, or an ImportError naming the extra to install."""
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError(
            f"tps.io image decoding/encoding needs Pillow, which is not installed.\n{_FIX}") from e
    return Image
