"""The README's example runs as written."""

from __future__ import annotations

import pathlib
import re

import numpy as np


def test_readme_example_trains():
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert float(scope["loss"]) < 1e-3
    np.testing.assert_allclose(scope["w"].numpy(), np.full((8, 1), 1 / 8), atol=1e-3)


def test_readme_model_parallel_example_trains_with_a_split_weight():
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    section = text.split("## Bigger models: several cores per replica", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    losses = scope["losses"]
    assert losses[0] == 1.0 and losses[-1] < losses[0]
    shards = scope["w"]._value.addressable_shards
    assert {s.data.shape for s in shards} == {(512, 512)}
