"""Writing a checkpoint: every process's part, then one atomic commit.

Steps (each process, in the same order): flatten the objects; check that
values held by every process separately (NumPy arrays, plain variables,
Python numbers) are the same everywhere, since one copy is stored; process 0
creates ``<path>.tps-tmp``; orbax writes the arrays (a replicated array once,
a sharded one shard by shard); each process writes its iterators' states to
its own JSON file; process 0 writes the manifest and renames the folder into
place. Between the steps the processes wait for each other, and a failure on
any process stops all of them before the commit; the partly written folder is
removed, and a full disk or an unwritable folder is reported as
``ResourceExhaustedError`` / ``PermissionDeniedError`` naming the path. Each
array's content fingerprint (``fingerprint``) goes into the manifest.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.checkpoint import (
    adapter,
    arrays,
    asynchronous,
    files,
    fingerprint,
    multihost,
    recovery,
)
from tpustrategy._src.checkpoint.graph import Graph


def _array_meta(value: Any) -> dict[str, Any]:
    kind = "jax" if isinstance(value, jax.Array) else "numpy_scalar" if isinstance(value, np.generic) else "numpy"
    return {"kind": "array", "type": kind, "shape": list(np.shape(value)), "dtype": str(np.dtype(value.dtype))}


def _collect(graph: Graph, api: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(objects, arrays, iterator_states)``: the manifest records, the data, the positions."""
    objects: dict[str, Any] = {}
    data: dict[str, Any] = {}
    states: dict[str, Any] = {}

    def add_array(value: Any) -> str:
        name = f"a{len(data)}"
        data[name] = value
        return name

    for key, entry in graph.entries.items():
        obj = entry.obj
        if entry.kind == "variable":
            meta = adapter.describe_variable(obj)
            meta["parts"] = {part: add_array(v) for part, v in adapter.variable_arrays(obj).items()}
        elif entry.kind == "array":
            if isinstance(obj, jax.ShapeDtypeStruct):
                raise TypeError(
                    f"{api}: {key!r} is a jax.ShapeDtypeStruct, which has no data to save (it "
                    "can only describe what to read, in Checkpoint.read(path, like=...)).\nFix: "
                    "pass the array itself."
                )
            if isinstance(obj, np.ndarray) and obj.dtype == object:
                raise TypeError(
                    f"{api}: {key!r} is a NumPy array of Python objects, which cannot be saved "
                    "without pickle.\nFix: convert it to a numeric or bool array."
                )
            meta = _array_meta(obj)
            meta["parts"] = {"value": add_array(obj)}
        elif entry.kind == "value":
            meta = {"kind": "value", "type": type(obj).__name__, "value": obj}
        else:
            meta = adapter.describe_iterator(obj)
            state = obj.get_state()
            try:
                states[key] = json.loads(json.dumps(state))
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"{api}: iterator {key!r} returned a state that is not JSON ({e}).\nFix: "
                    "get_state() must return dicts/lists of numbers, strings, bools and None."
                ) from None
        if key in graph.aliases:
            meta["aliases"] = list(graph.aliases[key])
        objects[key] = meta
    return objects, data, states


def _check_same_on_every_process(objects: dict[str, Any], data: dict[str, Any], api: str) -> None:
    """Arrays a process holds alone (and Python values) are stored once: they must agree."""
    import google_crc32c

    keys, crcs = [], []
    owner = {name: key for key, meta in objects.items() for name in meta.get("parts", {}).values()}
    for name, value in data.items():
        if isinstance(value, jax.Array) and not value.is_fully_addressable:
            continue
        host = np.ascontiguousarray(np.asarray(value))
        data[name] = host
        keys.append(owner[name])
        crcs.append(google_crc32c.value(host.tobytes()))
    for key, meta in objects.items():
        if meta["kind"] == "value":
            keys.append(key)
            crcs.append(google_crc32c.value(json.dumps(meta["value"]).encode()))
    if not keys:
        return
    gathered = multihost.allgather(crcs)
    differ = [k for j, k in enumerate(keys) if len(set(gathered[:, j].tolist())) > 1]
    if differ:
        raise ValueError(
            f"{api}: {', '.join(repr(k) for k in differ[:10])} differ between the processes of "
            "this job, but a checkpoint stores one copy of each value that every process holds on "
            "its own (NumPy arrays, arrays on this process's devices only, variables made "
            "outside a strategy scope, Python numbers).\nFix: keep per-process state in "
            "tps.Variables created under strategy.scope() or in global jax.Arrays, or make the "
            "value the same everywhere."
        )


@dataclasses.dataclass
class Written:
    """The outcome of `write` on this process.

    Attributes:
      path: the path this process asked for (and returns to its caller).
      owner: whether this process keeps the folder ``path`` is in (process
        0, or a process that saved into a folder of its own: the chief-and-
        workers pattern of TensorFlow's multi-worker tutorial).
      pending: the background part of an asynchronous save, or None.
    """

    path: str
    owner: bool
    pending: asynchronous.PendingSave | None = None


def _where(path: str, api: str) -> str:
    """The folder all processes write into: process 0's path (the chief's).

    Processes may save into different folders (TensorFlow's multi-worker
    pattern: workers write a temporary copy of their own), but must agree on
    the checkpoint's name in them.
    """
    if multihost.process_count() == 1:
        return path
    multihost.agree(api, "the checkpoint's name (the last part of its path)",
                    multihost.text_fingerprint(os.path.basename(os.path.abspath(path))))
    return multihost.broadcast_text(os.path.abspath(path))


def _fail(api: str, doing: str, path: str, error: BaseException) -> BaseException:
    return files.io_error(api, doing, path, error) if isinstance(error, (OSError, ValueError)) else error


def write(graph: Graph, path: str, *, numbered: bool, number: int | None, save_counter: int,
          api: str, asynchronous_save: bool = False, then: Callable[[], None] | None = None) -> Written:
    """Writes the checkpoint at ``path`` on every process.

    Args:
      graph, path, numbered, number, save_counter, api: what to save and where.
      asynchronous_save: return once the arrays are copied to host memory;
        the files are written and committed in the background (see
        ``asynchronous``). A job whose processes save into different folders
        saves synchronously.
      then: run by the owner of the folder right after the commit (in the
        background when asynchronous): a manager's state file and deletions.
    """
    count, index = multihost.process_count(), multihost.process_index()
    error: BaseException | None = None
    objects: dict[str, Any] = {}
    data: dict[str, Any] = {}
    states: dict[str, Any] = {}
    try:
        objects, data, states = _collect(graph, api)
    except BaseException as e:  # every process must learn of it before anyone goes on
        error = e
    multihost.sync(api, "collecting the objects to save", error)
    target = _where(path, api)
    own_copy = os.path.abspath(path) != target
    if count > 1:  # collectives that fail alike on every process
        _check_same_on_every_process(objects, data, api)
        asynchronous_save = asynchronous_save and not multihost.allgather([int(own_copy)]).any()
    fingerprints = fingerprint.compute(data)
    tmp = files.tmp_path(target)
    try:
        if index == 0:
            recovery.recover(target)
            files.start(target)
    except BaseException as e:
        error = _fail(api, "creating the checkpoint folder", tmp, e)
    multihost.sync(api, "preparing the checkpoint folder", error)
    manifest = {"numbered": numbered, "number": number, "save_counter": save_counter,
                "process_count": count, "objects": objects, "fingerprints": fingerprints,
                "versions": dict(_versions())}
    try:
        try:
            files.write_json(os.path.join(tmp, files.iterator_file(index, count)),
                             {"process_index": index, "process_count": count, "states": states})
            wait = None
            if data and asynchronous_save:  # NumPy arrays are mutable: the training loop may change them
                snapshot = {k: np.array(v, copy=True) if isinstance(v, (np.ndarray, np.generic)) else v
                            for k, v in data.items()}
                wait = arrays.save_async(os.path.join(tmp, files.ARRAYS), snapshot, api)
            elif data:
                arrays.save(os.path.join(tmp, files.ARRAYS), data, api)
        except BaseException as e:
            error = _fail(api, "writing", tmp, e)
        multihost.sync(api, "writing its part of the checkpoint", error)
        if asynchronous_save:
            recovery.begin(tmp)
            return Written(path, index == 0, asynchronous.PendingSave(
                path, lambda: _finish_async(wait, tmp, target, manifest, index, then, api)))
        try:
            if index == 0:
                files.commit(tmp, target, manifest)
                if then is not None:
                    then()
        except BaseException as e:
            error = _fail(api, "committing", target, e)
        multihost.sync(api, "committing the checkpoint", error)
    except BaseException:
        if index == 0:
            files.discard(tmp)
        raise
    if own_copy:
        _copy_for(target, path, api)
        if then is not None:
            then()
    return Written(path, index == 0 or own_copy)


def _finish_async(wait: Callable[[], None] | None, tmp: str, target: str, manifest: dict[str, Any],
                  index: int, then: Callable[[], None] | None, api: str) -> None:
    """The background part: the array files, then (process 0) the commit."""
    try:
        try:
            if wait is not None:
                wait()
            if index == 0:
                files.commit(tmp, target, manifest)
        except (OSError, ValueError) as e:
            raise _fail(api, "writing (asynchronously)", tmp, e) from e
    except BaseException:
        if index == 0:
            files.discard(tmp)
        raise
    finally:
        recovery.end(tmp)
    if index == 0 and then is not None:
        then()


def _copy_for(source: str, path: str, api: str) -> None:
    """This process's own copy of the chief's checkpoint ``source`` at ``path``."""
    tmp = files.tmp_path(path)
    try:
        recovery.recover(path)
        if os.path.lexists(tmp):
            files.delete_tree(tmp)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        shutil.copytree(files.resolve(source), tmp)
        files.put_in_place(tmp, path)
    except BaseException as e:
        files.discard(tmp)
        raise _fail(api, "copying the chief's checkpoint to", path, e) from e


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, str | None]:
    from importlib import metadata

    found: dict[str, str | None] = {"jax": jax.__version__}
    for package in ("tpustrategy", "orbax-checkpoint"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found
