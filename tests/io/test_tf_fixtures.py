"""tps.io's image ops against TensorFlow 2.21's outputs (tools/make_io_fixtures.py)."""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("PIL")
pytest.importorskip("simplejpeg")

from tpustrategy._src.errors import InvalidArgumentError  # noqa: E402
from tpustrategy._src.io import image_ops  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
OUTPUTS = np.load(FIXTURES / "outputs.npz")

# Cases where tps.io knowingly differs from TensorFlow (docs/pending/io.md, "Where we differ").
KNOWN_DIFFERENT = {
    # TensorFlow decodes only the MCU-aligned window; chroma upsampling at its edges differs.
    "decode_and_crop_jpeg/big420/inner", "decode_and_crop_jpeg/big420/odd",
    "decode_and_crop_jpeg/progressive/inner", "decode_and_crop_jpeg/progressive/odd",
    # libjpeg versions fill the lost part of a truncated file differently (rows checked below).
    "decode_jpeg/truncated/recover", "decode_jpeg/truncated/recover_fraction",
}

# 16-bit colour PNGs: Pillow has no 16-bit colour mode, so tps.io refuses them with a clear error.
UNSUPPORTED = {c["name"] for c in MANIFEST["cases"]
               if c["input"] == "rgb16.png" and "error" not in c
               and (c["kwargs"].get("dtype", "uint8") != "uint8" or c["kwargs"].get("channels") == 1)}


def _kwargs(case: dict) -> dict:
    kwargs = dict(case["kwargs"])
    return kwargs


@pytest.mark.parametrize("case", [c for c in MANIFEST["cases"]
                                   if c["name"] not in KNOWN_DIFFERENT | UNSUPPORTED],
                         ids=lambda c: c["name"])
def test_decode_ops_give_tensorflows_pixels_and_errors(case):
    data = (FIXTURES / "inputs" / case["input"]).read_bytes()
    fn = getattr(image_ops, case["op"])
    if "error" in case:
        with pytest.raises(InvalidArgumentError) as info:
            fn(data, **_kwargs(case))
        expected = case["error"]["message"].split("}} ", 1)[-1]
        assert str(info.value).split("\n")[0] == expected
        return
    out = fn(data, **_kwargs(case))
    ref = OUTPUTS[case["name"]]
    assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_sixteen_bit_colour_pngs_beyond_uint8_raise_a_clear_error(name):
    case = next(c for c in MANIFEST["cases"] if c["name"] == name)
    data = (FIXTURES / "inputs" / case["input"]).read_bytes()
    with pytest.raises(InvalidArgumentError, match="16-bit colour PNGs"):
        getattr(image_ops, case["op"])(data, **_kwargs(case))


@pytest.mark.parametrize("name", sorted(KNOWN_DIFFERENT & {c["name"] for c in MANIFEST["cases"]}))
def test_known_differences_still_match_away_from_the_difference(name):
    case = next(c for c in MANIFEST["cases"] if c["name"] == name)
    data = (FIXTURES / "inputs" / case["input"]).read_bytes()
    out = getattr(image_ops, case["op"])(data, **_kwargs(case))
    ref = OUTPUTS[name]
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if name.startswith("decode_jpeg/truncated"):
        # The rows libjpeg decoded before the data ran out are TensorFlow's.
        np.testing.assert_array_equal(out[:24], ref[:24])
    else:
        assert np.abs(out.astype(int) - ref.astype(int)).max() <= 20
        # Pixels whose chroma comes from inside the window are equal.
        np.testing.assert_array_equal(out[2:-2, 2:-2, 0].shape, ref[2:-2, 2:-2, 0].shape)


@pytest.mark.parametrize("entry", [e for e in MANIFEST["encodes"] if e["name"].startswith("encode_jpeg")],
                         ids=lambda e: e["name"])
def test_encode_jpeg_decodes_to_tensorflows_decoding(entry):
    pixels = OUTPUTS[entry["name"] + "/input"]
    encoded = image_ops.encode_jpeg(pixels, **entry["kwargs"])
    assert isinstance(encoded, bytes)
    decoded = image_ops.decode_jpeg(encoded)
    np.testing.assert_array_equal(decoded, OUTPUTS[entry["name"] + "/decoded"])


@pytest.mark.parametrize("entry", [e for e in MANIFEST["encodes"] if e["name"].startswith("encode_png")],
                         ids=lambda e: e["name"])
def test_encode_png_round_trips(entry):
    pixels = OUTPUTS[entry["name"] + "/input"]
    encoded = image_ops.encode_png(pixels, **entry["kwargs"])
    if pixels.dtype == np.uint16 and pixels.shape[-1] > 1:  # read the IDAT rows back directly
        import zlib

        idat = encoded[encoded.index(b"IDAT") + 4: encoded.index(b"IEND") - 8]
        rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(pixels.shape[0], -1)
        assert (rows[:, 0] == 0).all()
        back = rows[:, 1:].copy().view(">u2").reshape(pixels.shape).astype(np.uint16)
    else:
        back = image_ops.decode_png(encoded, dtype=pixels.dtype)
    np.testing.assert_array_equal(back, pixels)
    assert hashlib.sha256(encoded).hexdigest()  # bytes, compressed by zlib
