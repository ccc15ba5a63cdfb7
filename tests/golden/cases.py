"""Access to the TensorFlow 2.21 golden cases (copied from shared/reference)."""

from __future__ import annotations

import functools
import json
import math
import pathlib
from typing import Any

import numpy as np

_PATH = pathlib.Path(__file__).with_name("tf_golden_cases.json")


@functools.cache
def _all() -> dict[str, dict[str, Any]]:
    data = json.loads(_PATH.read_text())
    return {c["id"]: c for c in data["cases"]}


def case(case_id: str) -> dict[str, Any]:
    return _all()[case_id]


def ids(category: str) -> list[str]:
    return [k for k, c in _all().items() if c["category"] == category]


def render(x: Any) -> Any:
    """Renders our values like the golden file: distributed values as dicts, arrays as lists."""
    import tpustrategy as tps

    if isinstance(x, tps.DistributedValues):
        return {"__distributed__": "PerReplica", "values": [render(v) for v in x.values]}
    if isinstance(x, (tuple, list)):
        return [render(v) for v in x]
    if isinstance(x, dict):
        return {k: render(v) for k, v in x.items()}
    if isinstance(x, bytes):
        return x.decode()
    if hasattr(x, "shape") or isinstance(x, (np.generic,)):
        return np.asarray(x).tolist()
    return x


def assert_close(ours: Any, golden: Any, tol: float = 1e-5) -> None:
    """Compares rendered values; floats with a tolerance, "NaN" strings as NaN."""
    if isinstance(golden, dict) and "__distributed__" in golden:
        assert isinstance(ours, dict) and "__distributed__" in ours, (ours, golden)
        assert_close(ours["values"], golden["values"], tol)
        return
    if isinstance(golden, dict):
        assert isinstance(ours, dict) and set(ours) == set(golden), (ours, golden)
        for k in golden:
            assert_close(ours[k], golden[k], tol)
        return
    if isinstance(golden, list):
        assert isinstance(ours, list) and len(ours) == len(golden), (ours, golden)
        for a, b in zip(ours, golden):
            assert_close(a, b, tol)
        return
    if golden == "NaN":
        assert isinstance(ours, float) and math.isnan(ours), ours
        return
    if isinstance(golden, float) or isinstance(ours, float):
        assert abs(float(ours) - float(golden)) <= tol * max(1.0, abs(float(golden))), (ours, golden)
        return
    assert ours == golden, (ours, golden)
