"""``tps.image`` is NumPy only: it starts no JAX and reads nothing of the dataset machinery."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

SRC = pathlib.Path(__file__).resolve().parents[2] / "tpustrategy" / "_src" / "image"


def test_using_tps_image_does_not_import_jax_or_the_data_package():
    code = ("import sys, numpy as np, tpustrategy as tps; "
            "tps.image.resize(np.zeros([4, 4, 3], np.uint8), [2, 2], antialias=True); "
            "tps.image.stateless_random_flip_left_right(np.zeros([2, 2, 1]), seed=(1, 2)); "
            "print('jax' in sys.modules, 'tpustrategy._src.data' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_image_modules_import_only_numpy_the_standard_library_and_errors():
    # tps.io: the JPEG codec that the jpeg-quality ops share (no dataset machinery, no JAX either).
    allowed_ours = {"tpustrategy._src.errors", "tpustrategy._src.image", "tpustrategy._src.io"}
    for path in SRC.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith("tpustrategy"):
                    assert any(name == a or name.startswith(a + ".") for a in allowed_ours), (path.name, name)
                else:
                    assert name.split(".")[0] in {"numpy", "__future__", *sys.stdlib_module_names}, (path.name, name)
