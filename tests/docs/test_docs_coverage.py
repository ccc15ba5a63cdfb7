"""Nothing was lost when the README became a docs site.

Every public name has an entry in the API reference, with TensorFlow's name beside it where
TensorFlow has one; every rename row the README had is a row of the porting guide; every page
the site promises exists. The public names are found here independently of the generator: from
the package directories on disk and each module's ``dir()``.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import tps_apigen  # noqa: E402 - docs/_ext is not a package


def public_names_on_disk() -> list[str]:
    """``tpustrategy.<...>.<name>`` for every public package under tpustrategy/ (not ``_src``)."""
    names = []
    for init in sorted((ROOT / "tpustrategy").rglob("__init__.py")):
        parts = init.parent.relative_to(ROOT).parts
        if any(p.startswith("_") for p in parts):
            continue
        module_name = ".".join(parts)
        module = importlib.import_module(module_name)
        for name in dir(module):
            if not name.startswith("_") and not isinstance(getattr(module, name), types.ModuleType):
                names.append(f"{module_name}.{name}")
    return names


@pytest.fixture(scope="module")
def api_pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    tps_apigen.write_pages(out)
    return {p.stem: p.read_text() for p in out.glob("*.md")}


def test_every_public_module_has_a_page(api_pages):
    modules = {n.rsplit(".", 1)[0] for n in public_names_on_disk()}
    assert modules <= set(api_pages), f"modules without an API page: {sorted(modules - set(api_pages))}"
    for module in ("tpustrategy", "tpustrategy.data", "tpustrategy.train", "tpustrategy.experimental",
                   "tpustrategy.config", "tpustrategy.metrics", "tpustrategy.optimizers", "tpustrategy.lookup",
                   "tpustrategy.nn", "tpustrategy.tpu", "tpustrategy.cluster_resolver", "tpustrategy.errors",
                   "tpustrategy.testing"):
        assert module in api_pages


def test_every_public_name_has_an_entry(api_pages):
    names = public_names_on_disk()
    assert len(names) > 250, len(names)
    missing = []
    for full in names:
        page = api_pages[full.rsplit(".", 1)[0]]
        name = re.escape(full.rsplit(".", 1)[1])  # hand-written entries name it within the page's module
        if not re.search(rf"^\.\. [\w:]+:: ({re.escape(full)}|{name})$", page, re.M):
            missing.append(full)
    assert not missing, f"{len(missing)} public names without an API entry: {missing}"


@pytest.mark.parametrize("ours, theirs", [
    ("tps.TPUStrategy", "tf.distribute.TPUStrategy"),
    ("tps.Variable", "tf.Variable"),
    ("tps.function", "tf.function"),
    ("tpsd.Dataset", "tf.data.Dataset"),
    ("tpsd.experimental.AutoShardPolicy", "tf.data.experimental.AutoShardPolicy"),
    ("tps.train.CheckpointManager", "tf.train.CheckpointManager"),
    ("tps.metrics.SparseCategoricalAccuracy", "tf.keras.metrics.SparseCategoricalAccuracy"),
    ("tps.optimizers.Adam", "tf.keras.optimizers.Adam"),
    ("tps.nn.compute_average_loss", "tf.nn.compute_average_loss"),
    ("tps.errors.OutOfRangeError", "tf.errors.OutOfRangeError"),
    ("tps.cluster_resolver.TPUClusterResolver", "tf.distribute.cluster_resolver.TPUClusterResolver"),
    ("tps.tpu.experimental.DeviceAssignment", "tf.tpu.experimental.DeviceAssignment"),
])
def test_tensorflow_names_stand_beside_ours(api_pages, ours, theirs):
    module = ours.rsplit(".", 1)[0].replace("tpsd", "tpustrategy.data").replace("tps", "tpustrategy")
    row = [line for line in api_pages[module].splitlines() if f"`{ours} <" in line]
    assert row and f"| `{theirs}` |" in row[0], row


def test_names_without_a_tensorflow_counterpart_say_so(api_pages):
    row = [line for line in api_pages["tpustrategy"].splitlines() if "`tps.initialize <" in line]
    assert row and "| — |" in row[0], row


def test_every_readme_rename_row_is_in_the_porting_guide():
    before = (pathlib.Path(__file__).parent / "fixtures" / "readme_rename_rows.md").read_text()
    rows = [line for line in before.splitlines() if line.startswith("| ")]
    assert len(rows) == 51, len(rows)
    guide = (DOCS / "porting.md").read_text().splitlines()
    missing = [row for row in rows if row not in guide]
    assert not missing, f"rename rows missing from docs/porting.md: {missing}"


def test_the_site_has_the_pages_it_promises():
    index = (DOCS / "index.md").read_text()
    for page in ("getting_started", "porting", "concepts/index", "differences", "performance", "api/index",
                 "architecture", "about"):
        assert re.search(rf"^{re.escape(page)}$", index, re.M), f"{page} is not in the index's table of contents"
        if page != "api/index":
            assert (DOCS / f"{page}.md").exists(), page
    concepts = (DOCS / "concepts" / "index.md").read_text()
    for page in ("strategy", "compilation", "distributed_values", "variables", "input", "checkpoints",
                 "multi_host", "model_parallelism", "keras"):
        assert re.search(rf"^{page}$", concepts, re.M) and (DOCS / "concepts" / f"{page}.md").exists(), page
