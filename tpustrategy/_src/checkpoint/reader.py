"""Restoring a checkpoint: check everything, read everything, then change the objects.

Nothing is modified until the whole checkpoint has been validated and read:
the files are checked against the manifest (sizes and CRC32C), each object is
matched with its saved record (kind, shape, dtype), iterator positions are
chosen for this job's process count, and the arrays are read onto the
devices of the objects they restore. Only then are iterators moved (and moved
back if one of them refuses its state) and variables, arrays and values
replaced. Arrays are placed on the sharding of the object being restored, so
values saved with 8 replicas restore onto 4.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.checkpoint import adapter, arrays, files, fingerprint, multihost
from tpustrategy._src.checkpoint.graph import Entry, Graph
from tpustrategy._src.checkpoint.status import CheckpointLoadStatus
from tpustrategy._src.errors import DataLossError, NotFoundError


def _as_variable_record(meta: dict[str, Any]) -> dict[str, Any]:
    """A saved array seen as a variable record (arrays and variables restore into each other)."""
    if meta["kind"] == "variable":
        return meta
    return {"kind": "variable", "sync": "array", "shape": meta["shape"], "dtype": meta["dtype"],
            "replicas": 1, "aggregation": "NONE", "parts": meta["parts"]}


def _array_target(entry: Entry, meta: dict[str, Any], api: str) -> Any:
    """Where a saved array goes: the current leaf's shape, dtype and sharding."""
    current = entry.obj
    shape, dtype = tuple(np.shape(current)), np.dtype(current.dtype)
    saved_shape = tuple(meta["shape"])
    if "value" not in meta["parts"]:
        raise ValueError(
            f"{api}: {entry.key!r} was saved from a sync-on-read variable with aggregation NONE, "
            "which has no single value to restore into an array.\nFix: restore it into a "
            "sync-on-read tps.Variable with the same replica count."
        )
    if saved_shape != shape or meta["dtype"] != str(dtype):
        raise ValueError(
            f"{api}: {entry.key!r} was saved with shape {saved_shape} and dtype {meta['dtype']}, "
            f"but the object being restored has shape {shape} and dtype {dtype}.\nFix: build it "
            "with the same configuration as when it was saved, or leave it out of the Checkpoint "
            "you restore into."
        )
    if isinstance(current, jax.ShapeDtypeStruct):
        sharding = current.sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
    if isinstance(current, jax.Array):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=current.sharding)
    return np.empty(shape, dtype)


def _finish_array(entry: Entry, value: Any) -> Any:
    if isinstance(entry.obj, np.generic):
        return np.asarray(value).reshape(())[()]
    return value


class _IteratorStates:
    """The saved positions, chosen for this job's process count."""

    def __init__(self, path: str, manifest: dict[str, Any], api: str):
        self._path, self._api = path, api
        self.saved_count = int(manifest["process_count"])
        self.count, self.index = multihost.process_count(), multihost.process_index()
        self._files: dict[int, dict[str, Any]] = {}

    def _file(self, index: int) -> dict[str, Any]:
        if index not in self._files:
            full = os.path.join(self._path, *files.iterator_file(index, self.saved_count).split("/"))
            try:
                self._files[index] = files.read_json(full, self._api)["states"]
            except FileNotFoundError:
                raise DataLossError(
                    f"{self._api}: checkpoint {self._path!r} was saved by {self.saved_count} "
                    f"processes but the input positions of process {index} ({full}) are missing; "
                    "nothing was restored.\nFix: restore an earlier checkpoint.", filename=full,
                ) from None
        return self._files[index]

    def state_for(self, key: str, meta: dict[str, Any], current: Any) -> Any:
        if self.saved_count == self.count:
            return self._file(self.index)[key]
        states = [self._file(i)[key] for i in range(self.saved_count)]
        same = len({json.dumps(s, sort_keys=True) for s in states}) == 1
        now = adapter.describe_iterator(current)
        if same and meta.get("mode") == "global" and now.get("mode") == "global":
            return states[0]
        why = ("each process read its own share of the input (auto-shard FILE, or "
               "distribute_datasets_from_function), so the positions cannot be re-split"
               if not same or meta.get("mode") == "local" else
               "this job reads its input differently (its auto-shard plan changed with the "
               "process count)")
        raise ValueError(
            f"{self._api}: iterator {key!r} was saved by a job of {self.saved_count} process(es), "
            f"and this job has {self.count}: {why}. Nothing was restored.\nFix: restore with "
            f"{self.saved_count} process(es); or use AutoShardPolicy.DATA (every process reads the "
            "same stream, restorable onto any process count); or leave the iterator out of the "
            "Checkpoint you restore into and start its input over."
        )


def _match(graph: Graph, saved: dict[str, Any]) -> dict[str, str]:
    """Current key -> saved key, through the keys and the aliases on both sides."""
    index: dict[str, str] = {}
    for key in saved:
        index.setdefault(key, key)
    for key, meta in saved.items():
        for alias in meta.get("aliases", ()):
            index.setdefault(alias, key)
    found = {}
    for key in graph.entries:
        for candidate in (key, *graph.aliases.get(key, ())):
            if candidate in index:
                found[key] = index[candidate]
                break
    return found


def _check_kinds(entry: Entry, meta: dict[str, Any], api: str) -> None:
    mine = "array" if entry.kind in ("variable", "array") else entry.kind
    theirs = "array" if meta["kind"] in ("variable", "array") else meta["kind"]
    if mine != theirs:
        raise ValueError(
            f"{api}: {entry.key!r} holds a {meta['kind']} in the checkpoint but is a "
            f"{entry.kind} here ({type(entry.obj).__name__}).\nFix: restore into the same kind of "
            "object as was saved under that name."
        )


def _build_optimizers(graph: Graph, saved: dict[str, Any]) -> bool:
    """Creates the state of optimizers not used yet when the checkpoint holds it.

    TensorFlow restores such state when it is created ("delayed restoration");
    here the optimizer is built for the variables it was saved with (found by
    name), so its state is restored now. Returns whether any was built.
    """
    built = False
    current_of = {}
    for key, saved_key in _match(graph, saved).items():
        current_of.setdefault(saved_key, graph.entries[key].obj)
    for key, obj in graph.objects.items():
        if not adapter.unbuilt_optimizer(obj):
            continue
        wanted = adapter.optimizer_variable_keys(key, saved)
        variables = [current_of.get(k) for k in wanted]
        if wanted and all(v is not None and adapter.is_variable(v) for v in variables):
            adapter.build_optimizer(obj, variables)
            built = True
    return built


def _plan(key: str, graph: Graph, saved: dict[str, Any], found: dict[str, str], positions: _IteratorStates,
          targets: dict[str, Any], finishers: list[Any], values: list[Any], iterator_states: list[Any],
          api: str) -> None:
    """Adds what restoring ``key`` needs (arrays to read, how to finish) to the lists."""
    entry, meta = graph.entries[key], saved[found[key]]
    _check_kinds(entry, meta, api)
    if entry.kind == "variable":
        record = _as_variable_record(meta)
        wanted, finish = adapter.variable_plan(entry.obj, record, key, api)
        names = {part: record["parts"][part] for part in wanted}
        targets.update({names[part]: t for part, t in wanted.items()})
        finishers.append((entry, names, finish))
    elif entry.kind == "array":
        name = meta["parts"].get("value")
        targets[name] = _array_target(entry, meta, api)
        finishers.append((entry, {"value": name}, lambda got, e=entry: _finish_array(e, got["value"])))
    elif entry.kind == "value":
        values.append((entry, meta["value"]))
    else:
        iterator_states.append((entry, positions.state_for(found[key], meta, entry.obj)))


def restore(make_graph: Callable[[], Graph], path: str, api: str, *, require_all: bool = False,
            manifest: dict[str, Any] | None = None, saved: dict[str, Any] | None = None,
            skip_slots: bool = False) -> tuple[CheckpointLoadStatus, dict[str, Any], Graph]:
    """Restores every object of the graph ``make_graph()`` found in the checkpoint at ``path``.

    With ``require_all``, an object missing from the checkpoint is an error
    (raised before anything changes). A deferred restore passes the
    ``manifest`` already read and checked, and the ``saved`` records still
    waiting for their objects. With ``skip_slots``
    (``CheckpointOptions.experimental_skip_slot_variables``), optimizer slot
    variables (``.../_slots/N``) keep their values (and count as not restored).

    Returns:
      The load status, the manifest and the graph restored into.
    """
    path = files.resolve(path)  # an overwrite interrupted half-way: its complete old copy
    if manifest is None:
        error: BaseException | None = None
        try:
            manifest = files.read_manifest(path, api)
            files.verify(path, manifest, api)
        except DataLossError as e:
            error = _with_fix(e, path)
        except NotFoundError as e:
            error = e
        multihost.sync(api, "checking the checkpoint files", error)
        assert manifest is not None
    if saved is None:
        saved = manifest["objects"]
    graph = make_graph()
    if _build_optimizers(graph, saved):
        graph = make_graph()
    found = _match(graph, saved)
    if skip_slots:
        found = {k: v for k, v in found.items() if "/_slots/" not in f"/{k}/"}
    matched = list(found)
    missing = [k for k in graph.entries if k not in found]
    if require_all and missing:
        raise ValueError(
            f"{api}: {', '.join(repr(k) for k in missing[:10])} are not in checkpoint {path} "
            f"(it holds {', '.join(repr(k) for k in list(saved)[:10])}{' ...' if len(saved) > 10 else ''}); "
            "nothing was read.\nFix: use the names and pytree structure the objects were saved with."
        )
    targets: dict[str, Any] = {}
    finishers: list[tuple[Entry, dict[str, str], Callable[[dict[str, Any]], Any]]] = []
    iterator_states: list[tuple[Entry, Any]] = []
    values: list[tuple[Entry, Any]] = []
    positions = _IteratorStates(path, manifest, api)
    for key in matched:
        try:
            _plan(key, graph, saved, found, positions, targets, finishers, values, iterator_states, api)
        except ValueError as e:  # a saved value that does not fit: name the checkpoint too
            message = str(e)
            if path not in message:
                head, fix, tail = message.partition("\nFix:")
                message = f"{head} (checkpoint {path!r}){fix}{tail}"
            raise ValueError(message) from None
    try:
        loaded = arrays.load(os.path.join(path, files.ARRAYS), targets, api) if targets else {}
        _check_fingerprints(path, manifest, loaded, found, saved, api)
    except DataLossError as e:
        raise _with_fix(e, path) from None
    results = [(entry, finish({part: loaded[n] for part, n in names.items()}))
               for entry, names, finish in finishers]
    _move_iterators(iterator_states, api)
    for entry, value in results:
        if entry.kind == "variable":
            adapter.set_variable(entry.obj, value)
        elif isinstance(entry.obj, np.ndarray) and entry.obj.flags.writeable:
            np.copyto(entry.obj, value)  # NumPy arrays are mutable: callers may hold them
        else:
            entry.put(value)
    for entry, value in values:
        entry.put(value)
    for rebuild in graph.commits:
        rebuild()
    used = set(found.values())
    status = CheckpointLoadStatus(path, matched, [k for k in saved if k not in used], missing)
    return status, manifest, graph


def _with_fix(error: DataLossError, path: str) -> DataLossError:
    """``error`` with the fix that names the previous complete checkpoint."""
    if "Fix:" in error.message:
        return error
    return DataLossError(f"{error.message}\n{files.previous_hint(path)}", filename=error.filename)


def _check_fingerprints(path: str, manifest: dict[str, Any], loaded: dict[str, Any],
                        found: dict[str, str], saved: dict[str, Any], api: str) -> None:
    """Every array read has the content it was saved with (``fingerprint``)."""
    recorded = manifest.get("fingerprints")
    if recorded is None and manifest.get("version", 1) < 2:
        return  # written before fingerprints existed
    if not isinstance(recorded, dict):
        raise DataLossError(f"{api}: the manifest of {path!r} has no array fingerprints; "
                            "nothing was restored.", filename=os.path.join(path, files.MANIFEST))
    now = fingerprint.compute(loaded, like=recorded)
    owner = {name: key for key, meta in saved.items() for name in meta.get("parts", {}).values()}
    bad = [name for name, value in now.items() if recorded.get(name) != value]
    if bad:
        listing = ", ".join(f"{owner.get(n, n)!r} ({n})" for n in bad[:10])
        raise DataLossError(
            f"{api}: checkpoint {path!r} is damaged: the data read for {listing} is not what was "
            f"saved (its content fingerprint differs; the array files in "
            f"{os.path.join(path, files.ARRAYS)} were changed, swapped or mixed with another "
            "checkpoint's); nothing was restored.", filename=os.path.join(path, files.ARRAYS))


def _move_iterators(states: list[tuple[Entry, Any]], api: str) -> None:
    """Sets every iterator's state, or none: a refused state puts the others back."""
    done: list[tuple[Entry, Any]] = []
    for entry, state in states:
        before = entry.obj.get_state()
        try:
            entry.obj.set_state(state)
        except Exception as e:
            for moved, previous in reversed(done):
                moved.obj.set_state(previous)
            raise ValueError(
                f"{api}: iterator {entry.key!r} refused its saved position ({type(e).__name__}: "
                f"{e}); no object was changed.\nFix: restore into an iterator over the same "
                "input pipeline as the one saved."
            ) from e
        done.append((entry, before))
