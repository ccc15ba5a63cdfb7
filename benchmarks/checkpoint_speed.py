"""Checkpoint save and restore speed: ``tps.train.Checkpoint`` vs orbax and vs ``np.save``.

The same arrays (``--mib`` MiB of float32 in 16 equal weights, on one device
or sharded along their first axis over ``--devices`` devices) are saved and
restored by each side, interleaved round by round (best-of-N and spread are
the rows' min..max):

  save        ``Checkpoint(params=...).write(path)`` vs orbax's
              ``StandardCheckpointer().save(path, tree)`` + ``wait_until_finished()``
              (zstd-compressed, orbax's default) and vs orbax writing
              uncompressed as we do (``PyTreeCheckpointHandler(use_compression=False)``:
              our overhead -- integrity, commit -- over the same writer)
              vs ``np.save`` of the host copies (``np.asarray`` of every
              array, one ``.npy`` per array, fsynced)
  restore     ``Checkpoint.restore(path)`` into arrays of the same sharding
              (every integrity check: manifest CRC, files, per-array
              fingerprints) vs ``StandardCheckpointer().restore(path,
              abstract_tree)`` vs ``np.load`` + ``jax.device_put`` on the sharding
  blocked     time an asynchronous save blocks the caller:
              ``write(path, options=CheckpointOptions(enable_async=True))`` vs
              orbax's ``AsyncCheckpointer(StandardCheckpointHandler()).save``
              (each then waited for outside the clock); vs the device-to-host
              copy alone (``np.asarray`` of every array) as the floor

Every timed call waits for completion (files written, arrays ready). Each save
goes to a fresh folder; folders are removed outside the clock. Rows are seconds
(lower is better); ratio = ours / baseline. Run with ``--devices 1`` and
``--devices 8`` (fake CPU devices without an accelerator); ``--mib 2048`` for
the large rows (needs ~3x that in free memory).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def _args():
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=1, help="devices the arrays are sharded over (default 1)")
    p.add_argument("--mib", type=int, default=256, help="total size of the arrays in MiB (default 256)")
    p.add_argument("--rounds", type=int, default=None, help="rounds (default 5, --quick 2)")
    p.add_argument("--dir", default=None, help="folder to write into (default: a temporary folder)")
    return p.parse_args()


ARGS = _args()
_common.setup_devices(ARGS.devices)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tpustrategy as tps  # noqa: E402

COUNT = 16


def make_arrays(mib: int, devices: int) -> dict[str, jax.Array]:
    rows = mib * 2**20 // (COUNT * 4 * 1024)
    rows -= rows % max(devices, 1)
    mesh = Mesh(np.array(jax.devices()[:devices]), ("d",))
    sharding = NamedSharding(mesh, P("d") if devices > 1 else P())
    key = jax.random.PRNGKey(0)
    out = {}
    for i in range(COUNT):
        out[f"w{i:02d}"] = jax.device_put(
            np.asarray(jax.random.normal(jax.random.fold_in(key, i), (rows, 1024), np.float32)), sharding)
    return jax.block_until_ready(out)


class Folders:
    def __init__(self, root: str):
        self.root, self.n = root, 0

    def fresh(self) -> str:
        self.n += 1
        return os.path.join(self.root, f"c{self.n}")

    @staticmethod
    def drop(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)


def _fsync_tree(path: str) -> None:
    for folder, _, names in os.walk(path):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)


def main() -> None:
    import orbax.checkpoint as ocp

    rounds = ARGS.rounds or (2 if ARGS.quick else 5)
    root = tempfile.mkdtemp(prefix="tps-ckpt-speed-", dir=ARGS.dir)
    folders = Folders(root)
    arrays = make_arrays(ARGS.mib, ARGS.devices)
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), arrays)
    saved = {"ours": folders.fresh(), "orbax": folders.fresh(), "npsave": folders.fresh(),
             "orbax_raw": folders.fresh()}

    # sides ------------------------------------------------------------------------------------
    def save_ours(path: str) -> None:
        tps.train.Checkpoint(params=arrays).write(path)

    def save_orbax(path: str) -> None:
        with ocp.StandardCheckpointer() as c:
            c.save(path, arrays)
            c.wait_until_finished()

    def save_orbax_raw(path: str) -> None:
        with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_compression=False)) as c:
            c.save(path, args=ocp.args.PyTreeSave(arrays))

    def save_np(path: str) -> None:
        os.makedirs(path)
        for name, a in arrays.items():
            np.save(os.path.join(path, name + ".npy"), np.asarray(a))
        _fsync_tree(path)

    def restore_ours(path: str):
        target = tps.train.Checkpoint(params=dict(arrays))
        target.restore(path).assert_consumed()
        return _common.wait(target.params)

    def restore_orbax(path: str):
        with ocp.StandardCheckpointer() as c:
            return _common.wait(c.restore(path, abstract))

    def restore_orbax_raw(path: str):
        args = {k: ocp.ArrayRestoreArgs(sharding=t.sharding, global_shape=t.shape, dtype=t.dtype)
                for k, t in abstract.items()}
        with ocp.Checkpointer(ocp.PyTreeCheckpointHandler()) as c:
            return _common.wait(c.restore(path, args=ocp.args.PyTreeRestore(dict(abstract), restore_args=args)))

    def restore_np(path: str):
        return _common.wait({name: jax.device_put(np.load(os.path.join(path, name + ".npy")), a.sharding)
                             for name, a in arrays.items()})

    opts = tps.train.CheckpointOptions(enable_async=True)

    def blocked_ours() -> float:
        path = folders.fresh()
        ckpt = tps.train.Checkpoint(params=arrays)
        start = time.perf_counter()
        ckpt.write(path, options=opts)
        took = time.perf_counter() - start
        ckpt.sync()
        folders.drop(path)
        return took

    def blocked_orbax() -> float:
        path = folders.fresh()
        c = ocp.AsyncCheckpointer(ocp.StandardCheckpointHandler())
        start = time.perf_counter()
        c.save(path, args=ocp.args.StandardSave(arrays))
        took = time.perf_counter() - start
        c.wait_until_finished()
        c.close()
        folders.drop(path)
        return took

    def device_to_host() -> float:
        start = time.perf_counter()
        host = [np.array(a) for a in arrays.values()]
        took = time.perf_counter() - start
        del host
        return took

    def timed_save(fn):
        def case() -> float:
            path = folders.fresh()
            start = time.perf_counter()
            fn(path)
            took = time.perf_counter() - start
            folders.drop(path)
            return took
        return case

    def timed_restore(fn, path):
        def case() -> float:
            start = time.perf_counter()
            got = fn(path)
            took = time.perf_counter() - start
            del got
            return took
        return case

    # warm up (compiles, imports, file system) and the folders the restores read
    save_ours(saved["ours"])
    save_orbax(saved["orbax"])
    save_np(saved["npsave"])
    save_orbax_raw(saved["orbax_raw"])
    restored = restore_ours(saved["ours"])
    for name, a in arrays.items():  # the round trip is exact
        np.testing.assert_array_equal(np.asarray(restored[name]), np.asarray(a))
    del restored
    restore_orbax(saved["orbax"])
    restore_np(saved["npsave"])
    restore_orbax_raw(saved["orbax_raw"])
    blocked_ours()
    blocked_orbax()

    saves = _common.side_by_side({"ours": timed_save(save_ours), "orbax": timed_save(save_orbax),
                                  "orbax_raw": timed_save(save_orbax_raw), "np": timed_save(save_np)}, rounds)
    restores = _common.side_by_side({"ours": timed_restore(restore_ours, saved["ours"]),
                                     "orbax": timed_restore(restore_orbax, saved["orbax"]),
                                     "orbax_raw": timed_restore(restore_orbax_raw, saved["orbax_raw"]),
                                     "np": timed_restore(restore_np, saved["npsave"])}, rounds)
    blocked = _common.side_by_side({"ours": blocked_ours, "orbax": blocked_orbax, "d2h": device_to_host}, rounds)
    shutil.rmtree(root, ignore_errors=True)

    where = f"{ARGS.mib} MiB, {ARGS.devices} {jax.devices()[0].platform} device(s)"
    rows = [
        _common.row(f"checkpoint save vs orbax StandardCheckpointer ({where})", saves["ours"], saves["orbax"], "s",
                    note="goal: ratio <= 1"),
        _common.row(f"checkpoint save vs orbax uncompressed, no checks ({where})", saves["ours"],
                    saves["orbax_raw"], "s", note="our integrity + commit overhead"),
        _common.row(f"checkpoint save vs np.save of host copies ({where})", saves["ours"], saves["np"], "s"),
        _common.row(f"checkpoint restore vs orbax StandardCheckpointer ({where})", restores["ours"],
                    restores["orbax"], "s", note="goal: ratio <= 1; ours checks every fingerprint"),
        _common.row(f"checkpoint restore vs orbax uncompressed, no checks ({where})", restores["ours"],
                    restores["orbax_raw"], "s", note="our integrity checks' overhead"),
        _common.row(f"checkpoint restore vs np.load + device_put ({where})", restores["ours"], restores["np"], "s"),
        _common.row(f"time blocked by an async save vs orbax AsyncCheckpointer ({where})", blocked["ours"],
                    blocked["orbax"], "s"),
        _common.row(f"time blocked by an async save vs the device-to-host copy ({where})", blocked["ours"],
                    blocked["d2h"], "s", note="goal: ratio close to 1"),
    ]
    _common.finish(rows, ARGS.json)


if __name__ == "__main__":
    main()
