"""tps.sparse against TensorFlow 2.21's recorded results (tests/sparse/fixtures, tools/make_strings_fixtures.py)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

import tpustrategy.sparse as tps_sparse

_spec = importlib.util.spec_from_file_location(
    "strings_golden_codec", pathlib.Path(__file__).parents[1] / "strings" / "strings_golden_codec.py")
codec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(codec)

CASES = codec.load(pathlib.Path(__file__).parent / "fixtures" / "sparse_cases.json")
NOT_PROVIDED: set[str] = set()


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] not in NOT_PROVIDED], ids=lambda c: c["name"])
def test_sparse_op_matches_tensorflow(case):
    codec.run_case(tps_sparse, case)
