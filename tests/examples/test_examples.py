"""The examples train: a few steps of each lower the loss."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

_EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"tps_example_{name}", _EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["tf_style_loop", "functional_loop"])
def test_a_few_steps_of_the_example_lower_the_loss(name):
    result = _load(name).main(steps=30)
    assert result["final_loss"] < 0.5 * result["first_loss"], result
    assert result["accuracy"] > 0.8, result
