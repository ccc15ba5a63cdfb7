"""Per-array fingerprints: CRC32C of the bytes on the host, XLA sums elsewhere; both verified on restore."""

from __future__ import annotations

import json
import os

import google_crc32c
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import tpustrategy as tps
from tpustrategy._src.checkpoint import files, fingerprint
from tpustrategy.errors import DataLossError


def _crc(x: np.ndarray) -> str:
    return f"crc32c:{google_crc32c.value(np.ascontiguousarray(x).tobytes()):08x}"


def _manifest(path: str) -> dict:
    with open(os.path.join(path, files.MANIFEST)) as f:
        return json.load(f)


def _reseal(path: str, manifest: dict) -> None:
    manifest["manifest_crc32c"] = files._seal_of(manifest)
    with open(os.path.join(path, files.MANIFEST), "w") as f:
        json.dump(manifest, f)


def _sharded(x: np.ndarray, spec: P, shape: tuple[int, ...]) -> jax.Array:
    devices = np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape)
    return jax.device_put(x, NamedSharding(Mesh(devices, ("a", "b")[: len(shape)]), spec))


@pytest.mark.parametrize("spec, mesh", [(P(), (1,)), (P("a"), (8,)), (P(None, "a"), (4,)), (P("a", "b"), (4, 2)),
                                        (P(), (8,))])
def test_a_cpu_array_is_fingerprinted_by_the_crc32c_of_its_bytes(tmp_path, spec, mesh):
    if len(jax.devices()) < int(np.prod(mesh)):
        pytest.skip("needs 8 devices")
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) * 0.5
    path = tps.train.Checkpoint(x=_sharded(x, spec, mesh), n=x[3], b=np.array([True, False])).write(str(tmp_path / "c"))
    recorded = _manifest(path)["fingerprints"]
    names = {key: meta["parts"]["value"] for key, meta in _manifest(path)["objects"].items() if "parts" in meta}
    assert recorded[names["x"]] == _crc(x)  # the whole array's bytes in C order, whatever the sharding
    assert recorded[names["n"]] == _crc(x[3]) and recorded[names["b"]] == _crc(np.array([True, False]))


def test_restoring_onto_another_sharding_checks_the_same_crc(tmp_path):
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 devices")
    x = np.random.RandomState(0).standard_normal((32, 8)).astype(np.float32)
    path = tps.train.Checkpoint(x=_sharded(x, P("a"), (8,))).write(str(tmp_path / "c"))
    target = tps.train.Checkpoint(x=_sharded(np.zeros_like(x), P(None, "a"), (4,)))
    target.restore(path).assert_consumed()
    np.testing.assert_array_equal(np.asarray(target.x), x)
    assert target.x.sharding.spec == P(None, "a")


def test_a_checkpoint_with_sum_fingerprints_is_checked_by_sums(tmp_path):
    # what an accelerator, several processes or an earlier version record: XLA's position-weighted sums
    x = np.arange(64, dtype=np.int32)
    path = tps.train.Checkpoint(x=jnp.asarray(x)).write(str(tmp_path / "c"))
    manifest = _manifest(path)
    (name,) = manifest["fingerprints"]
    summed = fingerprint.compute({name: x}, like={name: "0" * 16})[name]
    assert len(summed) == 16 and not summed.startswith("crc32c:")
    manifest["fingerprints"][name] = summed
    _reseal(path, manifest)
    target = tps.train.Checkpoint(x=jnp.zeros(64, jnp.int32))
    target.restore(path).assert_consumed()
    np.testing.assert_array_equal(np.asarray(target.x), x)
    # a sum of other content is caught: the same check, the other kind
    manifest["fingerprints"][name] = fingerprint.compute({name: x + 1}, like={name: "0" * 16})[name]
    _reseal(path, manifest)
    with pytest.raises(DataLossError, match="its content fingerprint differs"):
        tps.train.Checkpoint(x=jnp.zeros(64, jnp.int32)).restore(path)


def test_a_changed_crc_is_caught_and_nothing_changes(tmp_path):
    x = np.arange(10, dtype=np.float64)
    path = tps.train.Checkpoint(x=x, step=4).write(str(tmp_path / "c"))
    manifest = _manifest(path)
    (name,) = manifest["fingerprints"]
    manifest["fingerprints"][name] = _crc(x[::-1])
    _reseal(path, manifest)
    target = tps.train.Checkpoint(x=np.zeros(10), step=0)
    with pytest.raises(DataLossError, match=r"the data read for 'x' \(a0\) is not what was saved"):
        target.restore(path)
    assert not target.x.any() and target.step == 0


def test_arrays_are_stored_uncompressed_as_tensorflow_stores_them(tmp_path):
    zeros = np.zeros((1024, 1024), np.float32)  # 4 MiB that zstd would shrink to almost nothing
    path = tps.train.Checkpoint(z=zeros).write(str(tmp_path / "c"))
    stored = sum(meta["size"] for rel, meta in _manifest(path)["files"].items() if rel.startswith("arrays/"))
    assert stored >= zeros.nbytes
