"""Writes TensorFlow 2.21's results of ``tf.io`` decode/encode ops to tests/io/fixtures/.

Run with the Python that has TensorFlow (never a dependency of the library or its tests):

    /work/tfvenv/bin/python tools/make_io_fixtures.py

The input images are made here (Pillow for JPEG/GIF/BMP kinds TensorFlow cannot write,
TensorFlow for 16-bit PNGs) and stored under ``fixtures/inputs/``. ``manifest.json`` lists
each case: the op, its input file, its keyword arguments, and either the key of TensorFlow's
output in ``outputs.npz`` or TensorFlow's error (type and message). tests/io/test_fixtures.py
runs the same cases through tpustrategy and compares.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from PIL import Image  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "io", "fixtures")
INPUTS = os.path.join(OUT, "inputs")

RNG = np.random.default_rng(39)


def picture(h: int, w: int, c: int) -> np.ndarray:
    """Smooth gradients plus noise and a sharp square: every DCT band and edge gets used."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)),
                     ((x + y) * 127 // max(w + h - 2, 1))], axis=-1)
    base = base + RNG.integers(-30, 30, size=(h, w, 3))
    base[h // 4: h // 2, w // 4: w // 2] = [250, 10, 40]
    img = np.clip(base, 0, 255).astype(np.uint8)
    if c == 1:
        return img[..., :1]
    if c == 4:
        alpha = np.clip(x * 7 + y * 3, 0, 255).astype(np.uint8)[..., None]
        return np.concatenate([img, alpha], axis=-1)
    return img


def pil_bytes(arr: np.ndarray, fmt: str, mode: str | None = None, **kw: object) -> bytes:
    a = arr[..., 0] if arr.ndim == 3 and arr.shape[-1] == 1 else arr
    im = Image.fromarray(a) if mode is None else Image.fromarray(a).convert(mode)
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def make_inputs() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    rgb = picture(29, 37, 3)
    files["rgb420.jpg"] = pil_bytes(rgb, "JPEG", quality=90, subsampling=2)
    files["rgb444.jpg"] = pil_bytes(picture(24, 40, 3), "JPEG", quality=85, subsampling=0)
    files["rgb422.jpg"] = pil_bytes(picture(31, 18, 3), "JPEG", quality=75, subsampling=1)
    files["gray.jpg"] = pil_bytes(picture(17, 33, 1), "JPEG", quality=90)
    files["progressive.jpg"] = pil_bytes(picture(38, 50, 3), "JPEG", quality=80, progressive=True)
    files["big420.jpg"] = pil_bytes(picture(67, 83, 3), "JPEG", quality=92, subsampling=2)
    files["cmyk.jpg"] = pil_bytes(picture(16, 21, 3), "JPEG", mode="CMYK", quality=90)
    files["restart.jpg"] = pil_bytes(picture(40, 40, 3), "JPEG", quality=70, restart_marker_blocks=2)
    full = files["big420.jpg"]
    files["truncated.jpg"] = full[: int(len(full) * 0.6)]
    files["rgb.png"] = pil_bytes(picture(13, 19, 3), "PNG")
    files["rgba.png"] = pil_bytes(picture(11, 9, 4), "PNG")
    files["gray.png"] = pil_bytes(picture(7, 12, 1), "PNG")
    files["gray_alpha.png"] = pil_bytes(picture(8, 6, 4), "PNG", mode="LA")
    files["palette.png"] = pil_bytes(picture(10, 10, 3), "PNG", mode="P")
    g16 = (np.arange(6 * 5, dtype=np.uint16).reshape(6, 5, 1) * 2111).astype(np.uint16)
    files["gray16.png"] = tf.io.encode_png(g16).numpy()
    rgb16 = (np.arange(4 * 3 * 3, dtype=np.uint16).reshape(4, 3, 3) * 1811 + 7).astype(np.uint16)
    files["rgb16.png"] = tf.io.encode_png(rgb16).numpy()
    frames = [Image.fromarray(picture(9, 11, 3)).convert("P") for _ in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    files["anim.gif"] = buf.getvalue()
    files["still.gif"] = pil_bytes(picture(6, 8, 3), "GIF", mode="P")
    files["rgb24.bmp"] = pil_bytes(picture(5, 7, 3), "BMP")
    files["rgba32.bmp"] = pil_bytes(picture(4, 6, 4), "BMP")
    files["gray8.bmp"] = pil_bytes(picture(3, 5, 1), "BMP")
    files["not_an_image.txt"] = b"hello, this is not an image"
    return files


CASES: list[dict] = []
OUTPUTS: dict[str, np.ndarray] = {}


def case(name: str, op: str, inp: str, **kwargs: object) -> None:
    data = open(os.path.join(INPUTS, inp), "rb").read()
    fn = getattr(tf.io, op)
    assert all(c["name"] != name for c in CASES), f"two cases named {name}"
    entry: dict[str, object] = {"name": name, "op": op, "input": inp, "kwargs": kwargs}
    try:
        tf_kwargs = dict(kwargs)
        if "dtype" in tf_kwargs:
            tf_kwargs["dtype"] = getattr(tf, tf_kwargs["dtype"])
        if "crop_window" in tf_kwargs:
            tf_kwargs["crop_window"] = tf.constant(tf_kwargs["crop_window"], tf.int32)
        out = fn(data, **tf_kwargs).numpy()
        OUTPUTS[name] = out
        entry["dtype"] = str(out.dtype)
        entry["shape"] = list(out.shape)
        entry["sha256"] = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()
    except Exception as e:  # noqa: BLE001 - TF's error is the recorded result
        message = str(e).split("\n")[0].split(" [Op:")[0]
        entry["error"] = {"type": type(e).__name__, "message": message.split("}} ", 1)[-1]}
    CASES.append(entry)


def make_cases() -> None:
    jpegs = ["rgb420.jpg", "rgb444.jpg", "rgb422.jpg", "gray.jpg", "progressive.jpg", "big420.jpg",
             "cmyk.jpg", "restart.jpg"]
    for f in jpegs:
        stem = f.split(".")[0]
        for ch in (0, 1, 3):
            case(f"decode_jpeg/{stem}/channels{ch}", "decode_jpeg", f, channels=ch)
        for ratio in (2, 4, 8):
            case(f"decode_jpeg/{stem}/ratio{ratio}", "decode_jpeg", f, ratio=ratio)
        case(f"decode_jpeg/{stem}/accurate", "decode_jpeg", f, dct_method="INTEGER_ACCURATE")
        case(f"decode_jpeg/{stem}/fast_nofancy", "decode_jpeg", f, dct_method="INTEGER_FAST",
             fancy_upscaling=False)
        case(f"extract_jpeg_shape/{stem}", "extract_jpeg_shape", f)
        case(f"extract_jpeg_shape/{stem}/int64", "extract_jpeg_shape", f, output_type="int64")
        case(f"decode_image/{stem}", "decode_image", f)
        case(f"decode_image/{stem}/float32", "decode_image", f, dtype="float32")
    case("decode_jpeg/big420/ratio2_gray", "decode_jpeg", "big420.jpg", ratio=2, channels=1)
    for name, window in [("full", [0, 0, 67, 83]), ("inner", [5, 9, 20, 31]),
                         ("odd", [3, 1, 1, 1]), ("edge", [60, 70, 7, 13])]:
        for f in ("big420.jpg", "rgb444.jpg", "gray.jpg", "progressive.jpg"):
            if f != "big420.jpg" and name in ("full", "edge"):
                continue
            case(f"decode_and_crop_jpeg/{f.split('.')[0]}/{name}", "decode_and_crop_jpeg", f,
                 crop_window=window)
    case("decode_and_crop_jpeg/big420/outside", "decode_and_crop_jpeg", "big420.jpg",
         crop_window=[60, 70, 8, 14])
    case("decode_and_crop_jpeg/big420/gray", "decode_and_crop_jpeg", "big420.jpg",
         crop_window=[5, 9, 20, 31], channels=1)
    case("decode_jpeg/truncated/default", "decode_jpeg", "truncated.jpg")
    case("decode_jpeg/truncated/recover", "decode_jpeg", "truncated.jpg", try_recover_truncated=True)
    case("decode_jpeg/truncated/recover_fraction", "decode_jpeg", "truncated.jpg",
         try_recover_truncated=True, acceptable_fraction=0.5)
    case("decode_jpeg/png_input", "decode_jpeg", "rgb.png")
    case("decode_jpeg/text_input", "decode_jpeg", "not_an_image.txt")
    case("extract_jpeg_shape/png_input", "extract_jpeg_shape", "rgb.png")
    for f in ("rgb.png", "rgba.png", "gray.png", "gray_alpha.png", "palette.png", "gray16.png",
              "rgb16.png"):
        stem = f.replace(".", "_")
        for ch in (0, 1, 3, 4):
            for dtype in ("uint8", "uint16"):
                case(f"decode_png/{stem}/channels{ch}/{dtype}", "decode_png", f, channels=ch,
                     dtype=dtype)
        case(f"decode_image/{stem}", "decode_image", f)
        case(f"decode_image/{stem}/uint16", "decode_image", f, dtype="uint16")
        case(f"decode_image/{stem}/float32", "decode_image", f, dtype="float32")
    case("decode_png/text_input", "decode_png", "not_an_image.txt")
    for f in ("anim.gif", "still.gif"):
        stem = f.split(".")[0]
        case(f"decode_gif/{stem}", "decode_gif", f)
        case(f"decode_image/{stem}", "decode_image", f)
        case(f"decode_image/{stem}/no_expand", "decode_image", f, expand_animations=False)
        case(f"decode_image/{stem}/channels1", "decode_image", f, channels=1)
    for f in ("rgb24.bmp", "rgba32.bmp", "gray8.bmp"):
        stem = f.split(".")[0]
        case(f"decode_bmp/{stem}", "decode_bmp", f)
        for ch in (1, 3, 4):
            case(f"decode_bmp/{stem}/channels{ch}", "decode_bmp", f, channels=ch)
        case(f"decode_image/{stem}", "decode_image", f)
    case("decode_image/text_input", "decode_image", "not_an_image.txt")
    case("decode_image/rgb420/channels4", "decode_image", "rgb420.jpg", channels=4)
    case("decode_image/rgb/channels2", "decode_image", "rgb.png", channels=2)


def make_encodes() -> list[dict]:
    """encode_jpeg/encode_png of fixed pixels: TF's bytes and TF's decode of them."""
    out = []
    for name, arr, kw in [
        ("rgb_default", picture(21, 30, 3), {}),
        ("rgb_q60_444", picture(21, 30, 3), {"quality": 60, "chroma_downsampling": False}),
        ("rgb_progressive", picture(21, 30, 3), {"progressive": True}),
        ("rgb_optimize", picture(21, 30, 3), {"optimize_size": True}),
        ("gray", picture(17, 9, 1), {}),
        ("rgb_cm", picture(8, 8, 3), {"density_unit": "cm", "x_density": 72, "y_density": 96}),
        ("gray_fmt_rgb", picture(8, 8, 1), {"format": "rgb"}) if False else ("gray_fmt", picture(8, 8, 1), {"format": "grayscale"}),
    ]:
        enc = tf.io.encode_jpeg(arr, **kw).numpy()
        key = f"encode_jpeg/{name}"
        OUTPUTS[key + "/input"] = arr
        OUTPUTS[key + "/decoded"] = tf.io.decode_jpeg(enc).numpy()
        out.append({"name": key, "kwargs": kw, "sha256": hashlib.sha256(enc).hexdigest(),
                    "length": len(enc)})
    for name, arr, kw in [("rgb", picture(9, 7, 3), {}), ("rgba", picture(9, 7, 4), {}),
                          ("gray_c9", picture(9, 7, 1), {"compression": 9}),
                          ("u16", (np.arange(12, dtype=np.uint16).reshape(2, 2, 3) * 5000), {})]:
        enc = tf.io.encode_png(arr, **kw).numpy()
        key = f"encode_png/{name}"
        OUTPUTS[key + "/input"] = arr
        out.append({"name": key, "kwargs": kw, "sha256": hashlib.sha256(enc).hexdigest(),
                    "length": len(enc)})
    return out


def make_tensors() -> list[dict]:
    """serialize_tensor bytes of several dtypes and shapes."""
    out = []
    values = {
        "float32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
        "int64_scalar": np.int64(-7),
        "int32_empty": np.zeros((0, 3), np.int32),
        "uint8_vec": np.arange(5, dtype=np.uint8),
        "bool_vec": np.array([True, False, True]),
        "float64_vec": np.array([1.5, -2.25]),
        "float16_vec": np.array([1.5, -2.25], np.float16),
        "int16_vec": np.array([1, -2, 300], np.int16),
        "uint16_vec": np.array([1, 2, 60000], np.uint16),
        "int8_vec": np.array([1, -2, 100], np.int8),
        "uint32_vec": np.array([1, 2, 4000000000], np.uint32),
        "uint64_vec": np.array([1, 2**63 + 5], np.uint64),
        "complex64_vec": np.array([1 + 2j, -3j], np.complex64),
        "complex128_vec": np.array([1 + 2j], np.complex128),
        "string_vec": np.array([b"a", b"", b"\x00bc"], object),
        "string_scalar": b"hello",
        "int32_big": np.arange(20, dtype=np.int32).reshape(4, 5),
    }
    for name, v in values.items():
        t = tf.constant(v)
        ser = tf.io.serialize_tensor(t).numpy()
        out.append({"name": name, "dtype": t.dtype.name, "shape": t.shape.as_list(),
                    "serialized_hex": ser.hex()})
        OUTPUTS[f"tensor/{name}"] = np.asarray(v) if not isinstance(v, bytes) else np.array(v, object)
    return out


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(INPUTS)
    for name, data in make_inputs().items():
        with open(os.path.join(INPUTS, name), "wb") as f:
            f.write(data)
    make_cases()
    encodes = make_encodes()
    tensors = make_tensors()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": CASES, "encodes": encodes,
                   "tensors": tensors}, f, indent=1)
    np.savez_compressed(os.path.join(OUT, "outputs.npz"),
                        **{k: v for k, v in OUTPUTS.items() if v.dtype != object})
    print(f"{len(CASES)} cases, {len(OUTPUTS)} outputs")


if __name__ == "__main__":
    main()
