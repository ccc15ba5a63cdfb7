"""The on-disk layout of a checkpoint and its atomic commit.

A checkpoint is a folder (``ckpt-3``)::

    ckpt-3/
      manifest.json                    written last: objects, files, sizes, CRC32C
      arrays/...                       orbax-checkpoint data (absent without arrays)
      iterators/process-00000-of-00002.json   each process's input positions

It is written under ``<path>.tps-tmp`` and renamed to ``<path>`` only when
every process has written its part and the manifest is complete, so a crash
at any moment leaves either the previous checkpoints alone or a
``.tps-tmp`` folder that nothing lists. ``restore`` checks every file named
in the manifest (present, same size, same CRC32C) before reading anything, and
names the first damaged file. Old checkpoints are deleted by renaming them
out of sight first, so a half-deleted one is never listed either.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from typing import Any

from tpustrategy._src.errors import DataLossError, NotFoundError

MANIFEST = "manifest.json"
ARRAYS = "arrays"
ITERATORS = "iterators"
TMP_SUFFIX = ".tps-tmp"
_OLD_SUFFIX = ".tps-old"
_DELETING_SUFFIX = ".tps-deleting"
FORMAT = "tpustrategy-checkpoint"
VERSION = 1
_NUMBERED = re.compile(r"^(?P<name>.+)-(?P<number>\d+)$")


def tmp_path(path: str) -> str:
    return path + TMP_SUFFIX


def iterator_file(index: int, count: int) -> str:
    """The relative path of process ``index``'s iterator states."""
    return f"{ITERATORS}/process-{index:05d}-of-{count:05d}.json"


def start(path: str) -> str:
    """Creates an empty ``<path>.tps-tmp`` (removing one left by a crash); returns it."""
    tmp = tmp_path(path)
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    os.makedirs(os.path.join(tmp, ITERATORS))
    return tmp


def write_json(path: str, value: Any) -> None:
    """Writes ``value`` as JSON and flushes it to disk before returning."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f, allow_nan=True)
        f.flush()
        os.fsync(f.fileno())


def read_json(path: str, api: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise DataLossError(f"{api}: {path} is unreadable or not valid JSON ({e}).", filename=path) from None


def _crc32c(path: str) -> str:
    import google_crc32c

    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = google_crc32c.extend(crc, chunk)
    return f"{crc:08x}"


def inventory(root: str) -> dict[str, dict[str, Any]]:
    """Every file under ``root`` but the manifest: relative path -> size and CRC32C."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel != MANIFEST:
                found[rel] = {"size": os.path.getsize(full), "crc32c": _crc32c(full)}
    return dict(sorted(found.items()))


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp: str, path: str, manifest: dict[str, Any]) -> None:
    """Writes the manifest into ``tmp`` and renames it to ``path`` (the commit point)."""
    manifest = {**manifest, "format": FORMAT, "version": VERSION, "time_ns": time.time_ns(),
                "files": inventory(tmp)}
    write_json(os.path.join(tmp, MANIFEST), manifest)
    _fsync_dir(tmp)
    if os.path.exists(path):  # overwriting a checkpoint of the same name
        old = path + _OLD_SUFFIX
        if os.path.exists(old):
            shutil.rmtree(old)
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old)
    else:
        os.rename(tmp, path)
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


def remove(path: str) -> None:
    """Deletes a committed checkpoint; it stops being listed before any file goes."""
    if not os.path.exists(path):
        return
    doomed = path + _DELETING_SUFFIX
    if os.path.exists(doomed):
        shutil.rmtree(doomed)
    os.rename(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def _neighbours(path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        names = [n for n in sorted(os.listdir(directory)) if os.path.isdir(os.path.join(directory, n))]
    except OSError:
        return f" The folder {directory} does not exist."
    if not names:
        return f" The folder {directory} holds no checkpoints."
    return f" The folder {directory} holds: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}."


def read_manifest(path: str, api: str) -> dict[str, Any]:
    """The manifest of the committed checkpoint at ``path``.

    Raises:
      tps.errors.NotFoundError: nothing is at ``path`` (also a ``FileNotFoundError``).
      DataLossError: ``path`` is not a complete checkpoint (no manifest: an
        interrupted save) or the manifest is damaged.
    """
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.isdir(path):
        raise NotFoundError(
            f"{api}: there is no checkpoint at {path!r}.{_neighbours(path)}\nFix: pass a path "
            "returned by save() or write(), manager.latest_checkpoint, or "
            "tps.train.latest_checkpoint(directory)."
        )
    if not os.path.exists(manifest_path) and committed(path):
        raise NotFoundError(
            f"{api}: {path!r} is a folder of checkpoints, not a checkpoint (it holds "
            f"{', '.join(os.path.basename(p) for p, _ in committed(path)[-5:])}).\nFix: pass one of "
            f"them, e.g. the newest: tps.train.latest_checkpoint({path!r})."
        )
    if not os.path.exists(manifest_path):
        interrupted = path.endswith(TMP_SUFFIX)
        raise DataLossError(
            f"{api}: {path!r} is not a complete checkpoint: its manifest {manifest_path} is missing"
            + (" (the folder name ends in '.tps-tmp': a save that was interrupted before it "
               "committed)" if interrupted else "")
            + ". Nothing was restored.\nFix: restore the last complete checkpoint, "
            "tps.train.latest_checkpoint(directory), which never returns an interrupted save.",
            filename=manifest_path,
        )
    manifest = read_json(manifest_path, api)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataLossError(f"{api}: {manifest_path} is not a tpustrategy checkpoint manifest.",
                            filename=manifest_path)
    if manifest.get("version", 0) > VERSION:
        raise ValueError(
            f"{api}: {path!r} was written by a newer tpustrategy (checkpoint format version "
            f"{manifest['version']}; this one reads up to {VERSION}).\nFix: upgrade tpustrategy."
        )
    return manifest


def verify(path: str, manifest: dict[str, Any], api: str) -> None:
    """Checks every file the manifest names: present, same size, same CRC32C.

    Raises:
      DataLossError: naming each missing, truncated or corrupted file (its
        ``filename`` is the first one).
    """
    problems: list[tuple[str, str]] = []
    for rel, meta in manifest["files"].items():
        full = os.path.join(path, *rel.split("/"))
        if not os.path.isfile(full):
            problems.append((full, "is missing"))
            continue
        size = os.path.getsize(full)
        if size != meta["size"]:
            problems.append((full, f"has {size} bytes, but {meta['size']} were written"))
        elif _crc32c(full) != meta["crc32c"]:
            problems.append((full, f"is corrupted (CRC32C {_crc32c(full)}, written as {meta['crc32c']})"))
    if problems:
        listing = "\n".join(f"  {f} {what}" for f, what in problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise DataLossError(
            f"{api}: checkpoint {path!r} is damaged; nothing was restored:\n{listing}{more}\n"
            "Fix: restore an earlier checkpoint (manager.checkpoints lists them), or save again.",
            filename=problems[0][0],
        )


def committed(directory: str, name: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The numbered committed checkpoints in ``directory``, oldest first.

    Args:
      directory: the folder to look in (missing: none).
      name: only ``<name>-<N>`` checkpoints (a manager's ``checkpoint_name``).

    Returns:
      ``(path, manifest)`` pairs sorted by commit time.
    """
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    found = []
    for entry in entries:
        match = _NUMBERED.match(entry)
        if match is None or (name is not None and match["name"] != name):
            continue
        path = os.path.join(directory, entry)
        manifest_path = os.path.join(path, MANIFEST)
        try:
            with open(manifest_path) as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and manifest.get("format") == FORMAT and manifest.get("numbered"):
            found.append((path, manifest))
    found.sort(key=lambda pm: (pm[1].get("time_ns", 0), pm[1].get("number") or 0))
    return found


def latest(directory: str) -> str | None:
    """The most recently committed numbered checkpoint in ``directory``, or None."""
    found = committed(os.fspath(directory))
    return found[-1][0] if found else None
