"""tps.strings / tps.sparse functions take TensorFlow 2.21's parameters: names, order, kinds and defaults.

tests/strings/fixtures/signatures.json is TensorFlow's ``inspect.signature`` of each
function (tools/make_strings_fixtures.py); a dtype default is recorded by name.
"""

from __future__ import annotations

import inspect
import json
import pathlib

import numpy as np
import pytest

import tpustrategy.sparse as tps_sparse
import tpustrategy.strings as tps_strings
from tpustrategy._src.not_provided import NotProvided

SIGNATURES = json.loads((pathlib.Path(__file__).parent / "fixtures" / "signatures.json").read_text())
MODULES = {"tf.strings": tps_strings, "tf.sparse": tps_sparse}
CASES = [(m, n) for m in MODULES for n in SIGNATURES[m]]


def _default(value: object) -> object:
    if value is inspect.Parameter.empty:
        return {"required": True}
    if isinstance(value, type) and issubclass(value, np.generic) or isinstance(value, np.dtype):
        return {"dtype": np.dtype(value).name}
    return value


@pytest.mark.parametrize("module, name", CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_parameters_are_tensorflows(module, name):
    ours = getattr(MODULES[module], name)
    if isinstance(ours, NotProvided):
        pytest.skip(f"{module}.{name} is a placeholder (not provided)")
    got = [[p.name, p.kind.name, _default(p.default)] for p in inspect.signature(ours).parameters.values()]
    assert got == SIGNATURES[module][name]
