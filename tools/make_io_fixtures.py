"""Writes TensorFlow 2.21's results of ``tf.io`` decode/encode ops to tests/io/fixtures/.

Run with the Python that has TensorFlow (never a dependency of the library or its tests):

    /work/tfvenv/bin/python tools/make_io_fixtures.py [images] [csv] [proto]

(no argument: all three; ``csv`` writes csv_cases.json, ``proto`` proto_cases.json:
serialize_tensor / parse_tensor / decode_json_example).

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
import sys

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


def tf_error(e: Exception) -> dict:
    """TensorFlow's error as recorded: type and first line, without the op-name decorations."""
    message = str(e).split("\n")[0].split(" [Op:")[0]
    return {"type": type(e).__name__, "message": message.split("}} ", 1)[-1]}


def encode_values(arr: np.ndarray) -> dict:
    """A result array as JSON: dtype, shape and values (strings as hex)."""
    if arr.dtype.kind in "OS":
        values = [bytes(v).hex() for v in arr.reshape(-1)]
        return {"dtype": "string", "shape": list(arr.shape), "values": values}
    elif arr.dtype.kind == "c":  # complex as [real, imag] pairs
        values = [[v.real, v.imag] for v in arr.reshape(-1).tolist()]
    else:
        values = arr.reshape(-1).tolist()
    return {"dtype": tf.as_dtype(arr.dtype).name, "shape": list(arr.shape), "values": values}


def csv_default(spec: object) -> object:
    """A record default from its JSON form: plain values as given, {"np": dtype, "value": v} as
    np.array(v, dtype) (``value`` [] is an empty, i.e. required, default), {"npscalar": ...} as
    a NumPy scalar, {"list_of_npscalar": ...} as a list holding one NumPy scalar."""
    if isinstance(spec, dict):
        if "np" in spec:
            return np.array(spec["value"], dtype=spec["np"])
        if "npscalar" in spec:
            return np.dtype(spec["npscalar"]).type(spec["value"])
        if "list_of_npscalar" in spec:
            return [np.dtype(spec["list_of_npscalar"]).type(spec["value"])]
    return spec


CSV_CASES: list[tuple[str, dict]] = [
    # tensorflow/python/kernel_tests/io_ops/decode_csv_op_test.py, inputs and arguments.
    ("simple", {"records": ["1", "2", '"3"'], "record_defaults": [[1]]}),
    ("simple_scalar_defaults", {"records": ["1,4", "2,5", "3,6"], "record_defaults": [1, 2]}),
    ("simple_2d_defaults", {"records": ["1", "2", "3"], "record_defaults": [[[0]]]}),
    ("simple_no_quote_delim", {"records": ["1", "2", '"3"'], "record_defaults": [[""]],
                               "use_quote_delim": False}),
    ("scalar", {"records": '1,""', "record_defaults": [[3], [4]]}),
    ("2d", {"records": [["1", "2"], ['""', "4"]], "record_defaults": [[5]]}),
    ("2d_no_quote_delim", {"records": [["1", "2"], ['""', '"']], "record_defaults": [[""]],
                           "use_quote_delim": False}),
    ("double", {"records": ["1.0", "-1.79e+308", '"1.79e+308"'],
                "record_defaults": [{"np": "float64", "value": []}]}),
    ("int64", {"records": ["1", "2", '"2147483648"'],
               "record_defaults": [{"np": "int64", "value": []}]}),
    ("complex_string", {"records": ['"1.0"', '"ab , c"', '"a\nbc"', '"ab""c"', " abc "],
                        "record_defaults": [["1"]]}),
    ("multi_records", {"records": ["1.0,4,aa", "0.2,5,bb", "3,6,cc"],
                       "record_defaults": [[1.0], [1], ["aa"]]}),
    ("na", {"records": ["2.0,NA,aa", "NA,5,bb", "3,6,NA"], "record_defaults": [[0.0], [0], [""]],
            "na_value": "NA"}),
    ("with_defaults", {"records": [",1,", "0.2,3,bcd", "3.0,,"],
                       "record_defaults": [[1.0], [0], ["a"]]}),
    ("with_defaults_no_quote_delim", {"records": [",1,", "0.2,3,bcd", '3.0,,"'],
                                      "record_defaults": [[1.0], [0], ["a"]],
                                      "use_quote_delim": False}),
    ("tab_delim", {"records": ["1\t1", "0.2\t3", "3.0\t"], "record_defaults": [[1.0], [0]],
                   "field_delim": "\t"}),
    ("without_defaults_error", {"records": [",1", "0.2,3", "3.0,"],
                                "record_defaults": [[1.0], {"np": "int32", "value": []}]}),
    ("wrong_field_int_error", {"records": [",1", "0.2,234a", "3.0,2"],
                               "record_defaults": [[1.0], {"np": "int32", "value": []}]}),
    ("out_of_range_error", {"records": ["1", "9999999999999999999999999", "3"],
                            "record_defaults": [[1]]}),
    ("wrong_field_float_error", {"records": [",1", "0.2,2", "3.0adf,3"],
                                 "record_defaults": [[1.0], {"np": "int32", "value": []}]}),
    ("wrong_field_string_error", {"records": ['"1,a,"', "0.22", 'a"bc'], "record_defaults": [["a"]]}),
    ("wrong_defaults", {"records": [",1", "0.2,2", "3.0adf,3"], "record_defaults": [[1.0]]}),
    ("short_quoted_string", {"records": ['"'], "record_defaults": [["default"]]}),
    ("select_cols", {"records": [",,", "4,5,6"], "record_defaults": [[1], [2]], "select_cols": [0, 1]}),
    ("select_cols_incl_last", {"records": [",,", "4,5,6"], "record_defaults": [[0], [1], [2]],
                               "select_cols": [0, 1, 2]}),
    ("wrong_select_cols_incl_last", {"records": [",,", "4,5,6"], "record_defaults": [[0], [1], [2]],
                                     "select_cols": [0, 1, 3]}),
    ("wrong_select_cols_len", {"records": ["1,2,3", "4,5,6"], "record_defaults": [[0], [0], [0]],
                               "select_cols": [0]}),
    ("wrong_select_cols_sorting", {"records": ["1,2,3"], "record_defaults": [[0], [1]],
                                   "select_cols": [1, 0]}),
    ("wrong_select_cols_negative", {"records": ["1,2,3"], "record_defaults": [[0], [1]],
                                    "select_cols": [-1, 0]}),
    ("wrong_select_cols_too_high", {"records": ["1,2,3"], "record_defaults": [[0], [1]],
                                    "select_cols": [0, 3]}),
    ("numpy_attribute", {"records": "1,2,3,4,5", "record_defaults": {"np": "float64", "value": [0] * 5}}),
    # Beyond TensorFlow's test file: number syntax, quoting corners, select_cols, dtypes.
    *[(f"int32_token/{i}", {"records": [tok], "record_defaults": [[0]]}) for i, tok in enumerate(
        ["+3", " 3 ", "3\t", "\v3\f", "1e3", "2147483647", "2147483648", "-2147483648",
         "-2147483649", "00012", "1_0", "\u00a03", "0x10", "- 3", "3.0", "٣"])],
    *[(f"int64_token/{i}", {"records": [tok], "record_defaults": [[2 ** 40]]}) for i, tok in enumerate(
        ["9223372036854775807", "9223372036854775808", "-9223372036854775808", " -5 "])],
    *[(f"float_token/{i}", {"records": [tok], "record_defaults": [[0.0]]}) for i, tok in enumerate(
        ["+3", " 3 ", "inf", "Infinity", "-inf", "NaN", "nan", "-nan", "INF", "0x1p3", "0x1.8p1",
         "1e39", "-1e39", "1e-50", "1e-40", "0X1A", "-0x10", ".", "1.", ".5", "e5", "1e", "++1",
         "1.5f", "0.1", "3.4028235677973366e38", "1.00000005960464477539", "1_0", "infinit",
         "nan(1)", "0x", "1e+5", "1E-2", "- 1", "16777217"])],
    *[(f"double_token/{i}", {"records": [tok], "record_defaults": [{"npscalar": "float64", "value": 0}]})
      for i, tok in enumerate(["0.1", "1e309", "-1e309", "1e-400", "0x1.fffffffffffffp1023", " 2 ",
                               "4.9e-324", "2.5e-324", "nan", "1.5x"])],
    ("default_list_of_np_uint8", {"records": ["9"], "record_defaults": [{"list_of_npscalar": "uint8", "value": 0}]}),
    ("default_list_of_np_float64", {"records": ["9"], "record_defaults": [{"list_of_npscalar": "float64", "value": 0.5}]}),
    ("default_list_of_np_int64", {"records": ["9"], "record_defaults": [{"list_of_npscalar": "int64", "value": 1}]}),
    ("default_list_of_np_float16", {"records": ["9"], "record_defaults": [{"list_of_npscalar": "float16", "value": 1}]}),
    ("default_np_uint8", {"records": ["9"], "record_defaults": [{"npscalar": "uint8", "value": 3}]}),
    ("default_np_array_uint8", {"records": ["9"], "record_defaults": [{"np": "uint8", "value": [1]}]}),
    ("default_np_float32_scalar", {"records": ["9"], "record_defaults": [{"np": "float32", "value": 1.5}]}),
    ("default_np_str", {"records": ["9"], "record_defaults": [{"np": "str", "value": ["a"]}]}),
    ("default_bool", {"records": ["1"], "record_defaults": [True]}),
    ("default_big_int", {"records": ["9"], "record_defaults": [[2 ** 31]]}),
    ("default_negative_big_int", {"records": ["9"], "record_defaults": [[-2 ** 31 - 1]]}),
    ("default_two_values", {"records": ["1", "2"], "record_defaults": [[1, 2]]}),
    ("default_mixed_int_float", {"records": ["1"], "record_defaults": [[1.5], [2]]}),
    ("default_string_scalar", {"records": ["x,", ","], "record_defaults": ["a", "b"]}),
    ("default_float_scalar", {"records": ["", "2.5"], "record_defaults": [1.5]}),
    ("no_defaults", {"records": ["1"], "record_defaults": []}),
    ("empty_records", {"records": [], "record_defaults": [[0], [""]]}),
    ("empty_record", {"records": [""], "record_defaults": [[0]]}),
    ("empty_record_two_fields", {"records": [","], "record_defaults": [[7], [8]]}),
    ("quote_inside_quoted", {"records": ['"a"b'], "record_defaults": [[""]]}),
    ("escaped_quote", {"records": ['"a""b",c'], "record_defaults": [[""], [""]]}),
    ("quote_then_junk", {"records": ['"a"x,c'], "record_defaults": [[""], [""]]}),
    ("crlf_at_end", {"records": ["a\r\n"], "record_defaults": [[""]]}),
    ("newline_first", {"records": ["\n1,2"], "record_defaults": [[5], [6]]}),
    ("newline_after_delim", {"records": ["1,\n2"], "record_defaults": [[5], [6]]}),
    ("crlf_between_quoted", {"records": ['"1"\r\n'], "record_defaults": [[5]]}),
    ("quoted_comma", {"records": ['"a,b"'], "record_defaults": [[""]]}),
    ("quoted_newline", {"records": ['"a\nb"'], "record_defaults": [[""]]}),
    ("lone_quote", {"records": ['"'], "record_defaults": [[""]]}),
    ("empty_quoted", {"records": ['""'], "record_defaults": [["d"]]}),
    ("empty_quoted_then_empty", {"records": ['"",'], "record_defaults": [["d"], ["e"]]}),
    ("quoted_number_with_spaces", {"records": ['" 7 "'], "record_defaults": [[0]]}),
    ("quoted_trailing_quote_pair", {"records": ['"ab"""'], "record_defaults": [[""]]}),
    ("quote_in_middle_no_quote_delim", {"records": ['a"b,"c'], "record_defaults": [[""], [""]],
                                        "use_quote_delim": False}),
    ("na_value_matches_string", {"records": ["1"], "record_defaults": [["a"]], "na_value": "1"}),
    ("na_value_quoted", {"records": ['"1"'], "record_defaults": [[5]], "na_value": "1"}),
    ("na_value_required", {"records": ["NA"], "record_defaults": [{"np": "int32", "value": []}],
                           "na_value": "NA"}),
    ("na_value_empty_still_default", {"records": [",NA"], "record_defaults": [[1], [2]], "na_value": "NA"}),
    ("field_delim_two_chars", {"records": ["1"], "record_defaults": [[0]], "field_delim": ";;"}),
    ("field_delim_empty", {"records": ["1"], "record_defaults": [[0]], "field_delim": ""}),
    ("field_delim_semicolon_quoted", {"records": ['"a;b";2'], "record_defaults": [[""], [0]],
                                      "field_delim": ";"}),
    ("select_cols_skips_bad_quotes_after", {"records": ['1,"x'], "record_defaults": [[0]], "select_cols": [0]}),
    ("select_cols_middle", {"records": ["1,2,3"], "record_defaults": [[0]], "select_cols": [1]}),
    ("select_cols_stops_before_bad", {"records": ['1,2,"bad'], "record_defaults": [[0], [0]],
                                      "select_cols": [0, 1]}),
    ("select_cols_skips_unparsable", {"records": ["1,a,3"], "record_defaults": [[0], [0]],
                                      "select_cols": [0, 2]}),
    ("select_cols_checks_quotes_before", {"records": ['"x"y,1'], "record_defaults": [[0]], "select_cols": [1]}),
    ("select_cols_empty", {"records": ["1"], "record_defaults": [[0]], "select_cols": []}),
    ("select_cols_duplicate", {"records": ["1,2"], "record_defaults": [[0], [0]], "select_cols": [0, 0]}),
    ("select_cols_trailing_empty", {"records": ["1,"], "record_defaults": [[0], [9]], "select_cols": [0, 1]}),
    ("select_cols_trailing_empty_unselected", {"records": ["1,2,"], "record_defaults": [[0], [9]],
                                               "select_cols": [0, 1]}),
    ("select_cols_too_few_fields_in_second", {"records": ["1,2,3", "1"], "record_defaults": [[0], [9]],
                                              "select_cols": [0, 2]}),
    ("three_d_records", {"records": [[["1,a"], ["2,b"]]], "record_defaults": [[0], [""]]}),
    ("int64_and_string_columns", {"records": ["5,x", "-7,"], "record_defaults": [
        {"np": "int64", "value": [0]}, {"np": "object", "value": ["dflt"]}]}),
]


def make_csv() -> list[dict]:
    """decode_csv: TF's outputs (dtype, shape, values) or its error, per case."""
    out = []
    for name, kwargs in CSV_CASES:
        tf_kwargs = dict(kwargs)
        defaults = kwargs["record_defaults"]
        tf_kwargs["record_defaults"] = (csv_default(defaults) if isinstance(defaults, dict)
                                        else [csv_default(d) for d in defaults])
        entry: dict[str, object] = {"name": name, "kwargs": kwargs}
        try:
            result = tf.io.decode_csv(**tf_kwargs)
            entry["outputs"] = [encode_values(t.numpy()) for t in result]
        except Exception as e:  # noqa: BLE001 - TF's error is the recorded result
            entry["error"] = tf_error(e)
        out.append(entry)
    return out


TENSOR_VALUES: list[tuple[str, object]] = [
    ("py_int_list", [1, -2, 3]),
    ("py_float", 1.5),
    ("py_bool_list", [True, False]),
    ("py_str", "héllo"),
    ("py_nested", [[1.5, 2.0], [3.0, 4.25]]),
    ("py_big_int_list", [2 ** 40, 1]),
    ("bool_scalar", np.bool_(True)),
    ("float32_3d", np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5),
    ("string_2d", np.array([[b"ab", b"c"], [b"", b"\xff" * 130]], object)),
    ("string_empty", np.zeros((0,), object)),
    ("float64_zero_dims", np.zeros((2, 0, 1), np.float64)),
    ("int8_scalar", np.int8(-128)),
    ("bfloat16_vec", "bfloat16"),
    ("float32_specials", np.array([np.inf, -np.inf, -0.0, np.nan], np.float32)),
    ("string_long", np.array([b"x" * 300], object)),
    ("int64_big_shape", np.zeros((200, 1), np.int64)),
]

JSON_CASES: list[tuple[str, object]] = [
    ("basic", '{"features": {"feature": {"a": {"floatList": {"value": [1.5, -2]}}, '
              '"b": {"int64List": {"value": [1, "-9223372036854775808", 7]}}, '
              '"c": {"bytesList": {"value": ["aGVsbG8=", ""]}}}}}'),
    ("key_order_kept", '{"features": {"feature": {"z": {"int64List": {"value": [1]}}, '
                       '"a": {"int64List": {"value": [2]}}, "m": {"floatList": {"value": []}}}}}'),
    ("snake_case_names", '{"features": {"feature": {"x": {"float_list": {"value": [0.25]}}, '
                         '"y": {"int64_list": {"value": [3]}}, "s": {"bytes_list": {"value": ["AA=="]}}}}}'),
    ("empty_object", "{}"),
    ("empty_features", '{"features": {}}'),
    ("empty_feature_map", '{"features": {"feature": {}}}'),
    ("empty_feature", '{"features": {"feature": {"e": {}}}}'),
    ("float_specials", '{"features": {"feature": {"f": {"floatList": {"value": ["NaN", "Infinity", '
                       '"-Infinity", 1e-46, 3.5e38, "2.5"]}}}}}'),
    ("urlsafe_base64", '{"features": {"feature": {"b": {"bytesList": {"value": ["-_8="]}}}}}'),
    ("unpadded_base64", '{"features": {"feature": {"b": {"bytesList": {"value": ["YWI"]}}}}}'),
    ("unicode_key", '{"features": {"feature": {"ключ": {"int64List": {"value": [1]}}}}}'),
    ("whitespace", ' \n { "features" : { "feature" : { "k" : { "int64List" : { "value" : [ 5 ] } } } } } '),
    ("int_as_float_text", '{"features": {"feature": {"i": {"int64List": {"value": [3.0]}}}}}'),
    ("null_value", '{"features": null}'),
    ("batch", ['{"features": {"feature": {"a": {"int64List": {"value": [1]}}}}}', "{}"]),
    ("batch_2d", [['{}', '{"features": {"feature": {"a": {"floatList": {"value": [1]}}}}}']]),
    ("invalid_json", '{"features": '),
    ("not_an_object", "[1, 2]"),
    ("unknown_field", '{"featurez": {}}'),
    ("unknown_list_kind", '{"features": {"feature": {"a": {"stringList": {"value": ["x"]}}}}}'),
    ("two_kinds", '{"features": {"feature": {"a": {"floatList": {"value": [1]}, '
                  '"int64List": {"value": [1]}}}}}'),
    ("int64_out_of_range", '{"features": {"feature": {"a": {"int64List": {"value": ["9223372036854775808"]}}}}}'),
    ("int64_fraction", '{"features": {"feature": {"a": {"int64List": {"value": [1.5]}}}}}'),
    ("float_string_garbage", '{"features": {"feature": {"a": {"floatList": {"value": ["abc"]}}}}}'),
    ("bad_base64", '{"features": {"feature": {"a": {"bytesList": {"value": ["@@@"]}}}}}'),
    ("value_not_list", '{"features": {"feature": {"a": {"int64List": {"value": 5}}}}}'),
    ("duplicate_key", '{"features": {"feature": {"a": {"int64List": {"value": [1]}}, '
                      '"a": {"int64List": {"value": [2]}}}}}'),
    ("sequence_example_fields", '{"context": {}}'),
    ("trailing_garbage", "{} x"),
]


def make_proto() -> dict:
    """serialize_tensor bytes of more inputs, parse_tensor errors, decode_json_example bytes."""
    tensors = []
    for name, value in TENSOR_VALUES:
        if isinstance(value, str) and value == "bfloat16":
            t = tf.constant([1.5, -2.0, 3.0e38], tf.bfloat16)
            spec: object = {"bfloat16": [1.5, -2.0, 3.0e38]}
        else:
            t = tf.constant(value)
            spec = value
        if isinstance(spec, np.ndarray) and spec.dtype == object:
            spec = {"np": "object_hex", "shape": list(spec.shape),
                    "value": [v.hex() for v in spec.reshape(-1)]}
        elif isinstance(spec, np.ndarray | np.generic):
            spec = {"np": spec.dtype.name, "shape": list(np.shape(spec)),
                    "value": np.asarray(spec).reshape(-1).tolist()}
        tensors.append({"name": name, "input": spec, "dtype": t.dtype.name,
                        "shape": t.shape.as_list(),
                        "serialized_hex": tf.io.serialize_tensor(t).numpy().hex()})
    parse_errors = []
    f32 = tf.io.serialize_tensor(tf.constant([1.0, 2.0])).numpy()
    for name, data, out_type in [
        ("dtype_mismatch", f32, "int32"),
        ("dtype_mismatch_string", tf.io.serialize_tensor(tf.constant("x")).numpy(), "float32"),
        ("garbage", b"\xff\xff\xff", "float32"),
        ("truncated", f32[:-3], "float32"),
        ("content_size_wrong", bytes.fromhex("0801120412020803220400000000"), "float32"),
    ]:
        entry: dict[str, object] = {"name": name, "serialized_hex": data.hex(), "out_type": out_type}
        try:
            out = tf.io.parse_tensor(data, getattr(tf, out_type)).numpy()
            entry["output"] = encode_values(np.asarray(out))
        except Exception as e:  # noqa: BLE001
            entry["error"] = tf_error(e)
        parse_errors.append(entry)
    # TensorProtos that TensorFlow writes with typed *_val fields (tf.make_tensor_proto of scalars
    # and splats): parse_tensor reads them too.
    typed = []
    for name, value, dtype, shape in [
        ("float_splat", 2.5, tf.float32, [2, 2]), ("int32_scalar", 7, tf.int32, None),
        ("int64_vec", [1, 2, 3], tf.int64, None), ("half_scalar", 1.5, tf.float16, None),
        ("bool_splat", True, tf.bool, [3]), ("double_scalar", -0.5, tf.float64, None),
        ("string_scalar", b"ab", tf.string, None), ("uint8_splat", 200, tf.uint8, [2]),
        ("complex64_scalar", 1 + 2j, tf.complex64, None), ("uint64_scalar", 2 ** 63, tf.uint64, None),
        ("int16_splat", -3, tf.int16, [2, 1]), ("bfloat16_scalar", 1.5, tf.bfloat16, None),
    ]:
        proto = tf.make_tensor_proto(value, dtype=dtype, shape=shape)
        data = proto.SerializeToString()
        out = tf.io.parse_tensor(data, dtype).numpy()
        typed.append({"name": name, "serialized_hex": data.hex(), "out_type": dtype.name,
                      "output": encode_values(np.asarray(out).astype(np.float32)
                                              if dtype == tf.bfloat16 else np.asarray(out))})
    json_cases = []
    for name, text in JSON_CASES:
        entry = {"name": name, "json": text}
        try:
            out = np.asarray(tf.io.decode_json_example(text).numpy(), dtype=object)
            entry["output"] = encode_values(out)
        except Exception as e:  # noqa: BLE001
            entry["error"] = tf_error(e)
        json_cases.append(entry)
    return {"serialize": tensors, "parse_errors": parse_errors, "parse_typed": typed,
            "decode_json_example": json_cases}


def write_json(name: str, payload: object) -> None:
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump({"tensorflow": tf.__version__, **payload}, f, indent=1, ensure_ascii=False)
        f.write("\n")


def main() -> None:
    parts = set(sys.argv[1:]) or {"images", "csv", "proto"}
    if "images" in parts:
        main_images()
    if "csv" in parts:
        write_json("csv_cases.json", {"cases": make_csv()})
    if "proto" in parts:
        write_json("proto_cases.json", make_proto())


def main_images() -> None:
    shutil.rmtree(INPUTS, ignore_errors=True)  # csv_cases.json / proto_cases.json stay
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
