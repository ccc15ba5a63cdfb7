"""Which checkpoints a folder holds, which is the latest, and what a crash left behind.

The latest checkpoint is the one the folder's ``checkpoint`` state file names
(``state_file``, written atomically after each save, as TensorFlow does) — or,
when a crash came between a commit and the state file's update, a complete
checkpoint of the same name with a higher number than it, not listed yet.
Without a state file, checkpoints are ordered by their number. The clock is
never consulted, and a damaged checkpoint is still listed, so restoring it
raises instead of silently going back to an older one.

Leftovers of interrupted operations are resolved by the next save of the same
path and when a ``CheckpointManager`` starts (process 0 only):

- ``ckpt-N.tps-tmp``: a save that never committed; removed (unless a save of
  this process is still writing it, asynchronously). One whose manifest was
  written (committed, the rename not done) is renamed to ``ckpt-N`` when
  that is not complete.
- ``ckpt-N.tps-old``: an overwrite interrupted between its two renames. If
  ``ckpt-N`` is complete the old copy is stale and removed; otherwise it is
  the only complete copy and is renamed back to ``ckpt-N``.

Reads change nothing: ``restore``, ``load_checkpoint`` and ``latest_checkpoint``
find the complete copy where it is (`files.resolve`).
- ``ckpt-N.tps-deleting``: a deletion that was interrupted; removed.
- ``checkpoint.tps-tmp``: a state file that was being written; removed.
- ``ckpt-N.data-00000-of-00001`` without ``ckpt-N.index``: a TensorFlow-format
  save or deletion that was interrupted (the index is written last and
  deleted first); removed.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import re
import shutil
import threading
import time
from typing import Any

from tpustrategy._src.checkpoint import files, state_file
from tpustrategy._src.errors import NotFoundError

_log = logging.getLogger("tpustrategy.checkpoint")
_IN_FLIGHT: set[str] = set()  # tmp folders an asynchronous save of this process is writing
_LOCK = threading.Lock()
_TF_DATA = re.compile(r"^(?P<prefix>.+)\.(data-\d{5}-of-\d{5}(\.tps-tmp)?|index\.tps-tmp)$")


def begin(tmp: str) -> None:
    with _LOCK:
        _IN_FLIGHT.add(os.path.abspath(tmp))


def end(tmp: str) -> None:
    with _LOCK:
        _IN_FLIGHT.discard(os.path.abspath(tmp))


def _busy(tmp: str) -> bool:
    with _LOCK:
        return os.path.abspath(tmp) in _IN_FLIGHT


def recover(path: str) -> None:
    """Resolves the leftovers of ``path`` (see the module docstring; `files.settle`)."""
    files.settle(path, busy=_busy)


def clean_leftovers(directory: str, name: str | None = None) -> None:
    """Resolves every leftover in ``directory`` (of checkpoints ``<name>-N`` when given)."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    bases = set()
    for entry in entries:
        for suffix in files.LEFTOVER_SUFFIXES:
            if entry.endswith(suffix):
                base = entry[: -len(suffix)]
                match = files.NUMBERED.match(base)
                if match is not None and (name is None or match["name"] == name):
                    bases.add(base)
    for base in sorted(bases):
        recover(os.path.join(directory, base))
    for entry in entries:  # a TensorFlow checkpoint's data without its index: an interrupted save or deletion
        match = _TF_DATA.match(entry)
        if match is not None and files.NUMBERED.match(match["prefix"]) is not None \
                and (name is None or files.NUMBERED.match(match["prefix"])["name"] == name) \
                and not os.path.exists(os.path.join(directory, match["prefix"] + ".index")):
            try:
                os.remove(os.path.join(directory, entry))
            except OSError:
                pass
    state_tmp = state_file.state_path(directory) + files.TMP_SUFFIX  # a crash mid state-file write
    if os.path.isfile(state_tmp):
        os.remove(state_tmp)


def exists(path: str) -> bool:
    """Whether ``restore(path)`` finds something (complete, damaged, mid-overwrite, TF's format)."""
    return (os.path.isdir(path) or files.complete(files.resolve(path))
            or os.path.isfile(path + ".index"))


def _unnumbered(path: str) -> bool:
    """A folder written by ``Checkpoint.write`` (not listed), judged by a readable manifest."""
    try:
        with open(os.path.join(files.resolve(path), files.MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("numbered") is False


def numbered(directory: str, name: str | None = None) -> list[tuple[int, str]]:
    """``(number, path)`` of the numbered checkpoints in ``directory``, by number.

    Damaged ones are included (restoring them raises); interrupted saves and
    folders written by ``Checkpoint.write`` are not.
    """
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    found = set()
    for entry in entries:
        base = entry[: -len(".index")] if entry.endswith(".index") else entry
        for suffix in (files.OLD_SUFFIX, files.TMP_SUFFIX):
            base = base[: -len(suffix)] if base.endswith(suffix) else base
        match = files.NUMBERED.match(base)
        if match is None or (name is not None and match["name"] != name):
            continue
        path = os.path.join(directory, base)
        if entry.endswith(".index") or files.complete(files.resolve(path)):
            if not _unnumbered(path):
                found.add((int(match["number"]), path))
    return sorted(found)


def read_state(directory: str, latest_filename: str | None = None) -> state_file.CheckpointState | None:
    """The state file, or None (absent, or unreadable: then with a warning, as TensorFlow)."""
    try:
        return state_file.read(directory, latest_filename)
    except (OSError, state_file.StateFileError) as e:
        _log.warning("%s: the checkpoint state file is unreadable (%s); checkpoints are ordered by "
                     "their number instead.", state_file.state_path(directory, latest_filename), e)
        return None


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _newer_unlisted(state: state_file.CheckpointState, scanned: list[tuple[int, str]],
                    latest: str) -> list[tuple[int, str]]:
    """Checkpoints committed after the state file was last written (a crash in between)."""
    match = files.NUMBERED.match(os.path.basename(latest))
    if match is None:
        return []
    listed = [*state.all_model_checkpoint_paths, state.model_checkpoint_path]
    return [(n, p) for n, p in scanned
            if n > int(match["number"]) and files.NUMBERED.match(os.path.basename(p))["name"] == match["name"]
            and not any(_same(p, q) for q in listed)]


def latest(directory: str, latest_filename: str | None = None) -> str | None:
    """The latest checkpoint of ``directory`` (module docstring), or None."""
    state = read_state(directory, latest_filename)
    scanned = numbered(directory)
    if state is not None and state.model_checkpoint_path and exists(state.model_checkpoint_path):
        newer = _newer_unlisted(state, scanned, state.model_checkpoint_path)
        return newer[-1][1] if newer else state.model_checkpoint_path
    return scanned[-1][1] if scanned else None


def resolve_checkpoint(ckpt_dir_or_file: Any, api: str) -> str:
    """The checkpoint ``ckpt_dir_or_file`` names: itself, or a folder's latest (``load_checkpoint``).

    Raises:
      TypeError: not a non-empty path.
      ValueError: a folder without complete numbered checkpoints.
      tps.errors.NotFoundError: nothing at the path (no folder, checkpoint or TF ``.index``).
    """
    if not isinstance(ckpt_dir_or_file, (str, os.PathLike)) or not os.fspath(ckpt_dir_or_file):
        raise TypeError(
            f"{api}: ckpt_dir_or_file must be a checkpoint path or a folder of checkpoints (str or "
            f"os.PathLike); received {type(ckpt_dir_or_file).__name__}: {ckpt_dir_or_file!r}.\n"
            f"Fix: e.g. {api}('/tmp/ckpts') or {api}(manager.latest_checkpoint).")
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, files.MANIFEST)):
        found = latest(path)
        if found is None:
            raise ValueError(
                f"{api}: couldn't find a checkpoint in the folder {path!r} (it holds no complete "
                "numbered checkpoint).\nFix: pass the path save() returned, or the folder a "
                "CheckpointManager saves into.")
        return found
    if not exists(path):
        raise NotFoundError(
            f"{api}: there is no checkpoint or folder at {path!r}.\nFix: pass the path save() "
            "returned, manager.latest_checkpoint, or the folder of the checkpoints.")
    return path


def _saved_time(path: str) -> float:
    try:
        with open(os.path.join(files.resolve(path), files.MANIFEST)) as f:
            return float(json.load(f)["time_ns"]) / 1e9
    except (OSError, ValueError, KeyError, TypeError):
        return time.time()


def tracked(directory: str, name: str) -> tuple[list[tuple[str, float]], str | None, float | None]:
    """What a manager finds at start: ``([(path, timestamp)], latest, last_preserved_timestamp)``.

    The state file's list (those still there, of checkpoints ``<name>-N``),
    then any newer unlisted ones; without a state file, all ``<name>-N`` by
    number. Timestamps only serve ``keep_checkpoint_every_n_hours``.
    """
    state = read_state(directory)
    scanned = numbered(directory, name)
    if state is None or not state.all_model_checkpoint_paths:
        return [(p, _saved_time(p)) for _, p in scanned], (scanned[-1][1] if scanned else None), None
    stamps = state.all_model_checkpoint_timestamps
    if len(stamps) != len(state.all_model_checkpoint_paths):
        stamps = [_saved_time(p) for p in state.all_model_checkpoint_paths]
    kept: list[tuple[str, float]] = []
    for path, stamp in zip(state.all_model_checkpoint_paths, stamps, strict=True):
        match = files.NUMBERED.match(os.path.basename(path))
        if match and match["name"] == name and _same(os.path.dirname(path), directory) and exists(path):
            kept.append((os.path.join(directory, os.path.basename(path)), stamp))
    newest = state.model_checkpoint_path if exists(state.model_checkpoint_path) else (kept[-1][0] if kept else None)
    if newest is not None:
        for _, path in _newer_unlisted(state, scanned, newest):
            kept.append((path, _saved_time(path)))
            newest = path
    elif scanned:
        kept, newest = [(p, _saved_time(p)) for _, p in scanned], scanned[-1][1]
    if newest is not None and not any(_same(newest, p) for p, _ in kept):
        newest = kept[-1][0] if kept else None
    return kept, newest, state.last_preserved_timestamp


def write_state(directory: str, kept: list[tuple[str, float]], latest_path: str,
                last_preserved: float | None) -> None:
    """Records the kept checkpoints and the latest one (``state_file.write``)."""
    state_file.write(directory, latest_path, [p for p, _ in kept], [t for _, t in kept], last_preserved)


def _tf_data_files(prefix: str) -> list[str]:
    return glob.glob(glob.escape(prefix) + ".data-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]")


def hide_all(paths: list[str]) -> list[str]:
    """Puts checkpoints out of sight before the state file stops naming them.

    A checkpoint folder is renamed to ``.tps-deleting``; a TensorFlow
    checkpoint loses its ``.index`` (what makes it a checkpoint: TensorFlow
    deletes it first too), its data files going in `purge`.
    """
    hidden = []
    for path in paths:
        if os.path.isfile(path + ".index"):
            os.remove(path + ".index")
            hidden.append(path)
        doomed = files.hide(path)
        if doomed is not None:
            hidden.append(doomed)
    return hidden


def purge(hidden: list[str]) -> None:
    for doomed in hidden:
        if os.path.isdir(doomed):
            shutil.rmtree(doomed, ignore_errors=True)
        for data in _tf_data_files(doomed):
            try:
                os.remove(data)
            except OSError:
                pass

