"""tps.strings against TensorFlow 2.21's recorded results (tests/strings/fixtures, tools/make_strings_fixtures.py)."""

from __future__ import annotations

import pathlib

import pytest
from strings_golden_codec import load, run_case

import tpustrategy.strings as tps_strings

CASES = load(pathlib.Path(__file__).parent / "fixtures" / "strings_cases.json")
# TensorFlow names we do not provide (placeholders with a reason), so their cases cannot run.
NOT_PROVIDED = {"unicode_script"}


@pytest.mark.parametrize("case", [c for c in CASES if c["op"] not in NOT_PROVIDED], ids=lambda c: c["name"])
def test_strings_op_matches_tensorflow(case):
    run_case(tps_strings, case)


def test_fixtures_cover_every_provided_op():
    ops = {c["op"] for c in CASES}
    public = {n for n in dir(tps_strings) if not n.startswith("_") and callable(getattr(tps_strings, n))}
    assert public - ops - {"RaggedRows"} == set()
