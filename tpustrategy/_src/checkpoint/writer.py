"""Writing a checkpoint: every process's part, then one atomic commit.

Steps (each process, in the same order): flatten the objects; check that
values held by every process separately (NumPy arrays, plain variables,
Python numbers) are the same everywhere, since one copy is stored; process 0
creates ``<path>.tps-tmp``; orbax writes the arrays (a replicated array once,
a sharded one shard by shard); each process writes its iterators' states to
its own JSON file; process 0 writes the manifest and renames the folder into
place. Between the steps the processes wait for each other, and a failure on
any process stops all of them before the commit.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np

from tpustrategy._src.checkpoint import adapter, arrays, files, multihost
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


def write(graph: Graph, path: str, *, numbered: bool, number: int | None, save_counter: int,
          api: str) -> str:
    """Writes the checkpoint at ``path`` on every process; returns ``path`` once committed."""
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
    if count > 1:  # collectives that fail alike on every process
        multihost.agree(api, "the checkpoint path", multihost.text_fingerprint(os.path.abspath(path)))
        _check_same_on_every_process(objects, data, api)
    try:
        if index == 0:
            files.start(path)
    except BaseException as e:
        error = e
    multihost.sync(api, "preparing the checkpoint folder", error)
    tmp = files.tmp_path(path)
    try:
        if data:
            arrays.save(os.path.join(tmp, files.ARRAYS), data, api)
        files.write_json(os.path.join(tmp, files.iterator_file(index, count)),
                         {"process_index": index, "process_count": count, "states": states})
    except BaseException as e:
        error = e
    multihost.sync(api, "writing its part of the checkpoint", error)
    try:
        if index == 0:
            files.commit(tmp, path, {
                "numbered": numbered,
                "number": number,
                "save_counter": save_counter,
                "process_count": count,
                "objects": objects,
                "versions": _versions(),
            })
    except BaseException as e:
        error = e
    multihost.sync(api, "committing the checkpoint", error)
    return path


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    found: dict[str, str | None] = {"jax": jax.__version__}
    for package in ("tpustrategy", "orbax-checkpoint"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found
