"""The on-disk layout of a checkpoint and its atomic commit.

A checkpoint is a folder (``ckpt-3``)::

    ckpt-3/
      manifest.json                    written last: objects, files, sizes, CRC32C
      arrays/...                       orbax-checkpoint data (absent without arrays)
      iterators/process-00000-of-00002.json   each process's input positions

It is written under ``<path>.tps-tmp`` and renamed to ``<path>`` only when
every process has written its part and the manifest is complete, so a crash
at any moment leaves either the previous checkpoints alone or a
``.tps-tmp`` folder that nothing lists. Overwriting ``<path>`` moves the old
copy to ``<path>.tps-old`` first; until the new copy is in place, ``restore``
and ``latest_checkpoint`` read the old one (`resolve`), and the next save or
manager start puts it back or removes it (``recovery``). The manifest carries
a CRC32C of its own content; ``restore`` checks it and every file named in it
(present, same size, same CRC32C) before reading anything, and names the
first damaged file; each array's content is checked after reading
(``fingerprint``). Old checkpoints are deleted by renaming them out of sight
first, so a half-deleted one is never listed either.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import time
from typing import Any

from tpustrategy._src.errors import (
    DataLossError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
)

MANIFEST = "manifest.json"
ARRAYS = "arrays"
ITERATORS = "iterators"
TMP_SUFFIX = ".tps-tmp"
OLD_SUFFIX = ".tps-old"
DELETING_SUFFIX = ".tps-deleting"
LEFTOVER_SUFFIXES = (TMP_SUFFIX, OLD_SUFFIX, DELETING_SUFFIX)
FORMAT = "tpustrategy-checkpoint"
VERSION = 2  # 2: the manifest's own checksum, array fingerprints
NUMBERED = re.compile(r"^(?P<name>.+)-(?P<number>\d+)$")
_SEAL = "manifest_crc32c"


def tmp_path(path: str) -> str:
    return path + TMP_SUFFIX


def old_path(path: str) -> str:
    return path + OLD_SUFFIX


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)


def io_error(api: str, doing: str, path: str, error: BaseException) -> BaseException:
    """``error`` as TensorFlow's error for a full disk or an unwritable folder, else itself.

    Recognises ``OSError`` numbers and tensorstore's ``ValueError``s
    (``RESOURCE_EXHAUSTED: ...``, ``PERMISSION_DENIED: ...``).
    """
    code = getattr(error, "errno", None)
    text = str(error)
    if code in _NO_SPACE or (code is None and "RESOURCE_EXHAUSTED" in text) or "No space left" in text:
        return ResourceExhaustedError(
            f"{api}: the disk is full (or over quota) while {doing} {path!r} ({type(error).__name__}: "
            f"{text}). The checkpoint was not written; earlier checkpoints are intact and the "
            "partly written folder was removed.\nFix: free space on that disk (e.g. a smaller "
            "CheckpointManager max_to_keep) or save to another folder."
        )
    if code in _NO_PERMISSION or (code is None and "PERMISSION_DENIED" in text) or "Permission denied" in text \
            or "Read-only file system" in text:
        return PermissionDeniedError(
            f"{api}: no permission to write while {doing} {path!r} ({type(error).__name__}: {text}). "
            "The checkpoint was not written; earlier checkpoints are intact.\nFix: save to a "
            "folder this process may write (check its owner, mode and whether the file system "
            "is mounted read-only)."
        )
    return error


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


def discard(tmp: str) -> None:
    """Removes a failed save's folder (best effort: the disk may be failing)."""
    shutil.rmtree(tmp, ignore_errors=True)


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


def _seal_of(manifest: dict[str, Any]) -> str:
    import google_crc32c

    body = {k: v for k, v in manifest.items() if k != _SEAL}
    text = json.dumps(body, sort_keys=True, allow_nan=True, separators=(",", ":"))
    return f"{google_crc32c.value(text.encode()):08x}"


def commit(tmp: str, path: str, manifest: dict[str, Any]) -> None:
    """Writes the manifest into ``tmp`` and renames it to ``path`` (the commit point).

    Overwriting: ``path`` becomes ``path.tps-old`` before ``tmp`` becomes
    ``path``, so one complete copy is reachable at every moment (`resolve`).
    """
    manifest = {**manifest, "format": FORMAT, "version": VERSION, "time_ns": time.time_ns(),
                "files": inventory(tmp)}
    manifest[_SEAL] = _seal_of(manifest)
    write_json(os.path.join(tmp, MANIFEST), manifest)
    _fsync_dir(tmp)
    put_in_place(tmp, path)


def put_in_place(tmp: str, path: str) -> None:
    """Renames the complete folder ``tmp`` to ``path``, replacing what is there.

    At every moment a complete copy is reachable from ``path`` (`resolve`):
    ``path`` itself, or -- between the two renames -- ``path.tps-old`` (the
    previous copy) or ``tmp`` (the new one). What an earlier interruption
    left is settled first (`settle`), never deleting the only complete copy.
    """
    parent = os.path.dirname(os.path.abspath(path))
    settle(path, tmp_too=False)
    if os.path.lexists(path):  # overwriting a checkpoint of the same name (complete: `settle`)
        old = old_path(path)
        os.rename(path, old)
        _fsync_dir(parent)
        os.rename(tmp, path)
        _fsync_dir(parent)
        delete_tree(old)
    else:
        os.rename(tmp, path)
    _fsync_dir(parent)


def delete_tree(path: str) -> None:
    """Deletes a checkpoint folder, its manifest first: a half-deleted one is never `complete`."""
    try:
        os.unlink(os.path.join(path, MANIFEST))
    except FileNotFoundError:
        pass
    except NotADirectoryError:
        pass
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def settle(path: str, *, tmp_too: bool = True, busy: Any = None) -> None:
    """Resolves what an interrupted commit or deletion of ``path`` left, keeping a complete copy.

    - ``path`` complete: ``path.tps-old`` is stale and deleted (and, with
      ``tmp_too``, an unfinished ``path.tps-tmp``).
    - else ``path.tps-old`` complete (an overwrite stopped between its two
      renames): it is renamed back to ``path``.
    - else a complete ``path.tps-tmp`` (its manifest written, the rename not
      done; with ``tmp_too``): it is renamed to ``path``.
    - incomplete leftovers are deleted; ``busy(tmp)`` true keeps a ``tmp`` an
      asynchronous save of this process is still writing.
    ``path.tps-deleting`` (a deletion that was interrupted) is deleted.
    """
    old, tmp = old_path(path), tmp_path(path)
    keep_tmp = not tmp_too or (busy is not None and busy(tmp))
    if not complete(path):
        source = old if complete(old) else tmp if not keep_tmp and complete(tmp) else None
        if source is not None:
            if os.path.lexists(path):
                delete_tree(path)  # an incomplete folder; the complete copy is `source`
            os.rename(source, path)
            _fsync_dir(os.path.dirname(os.path.abspath(path)))
    if os.path.lexists(old):
        delete_tree(old)
    if not keep_tmp and os.path.lexists(tmp):
        delete_tree(tmp)
    doomed = path + DELETING_SUFFIX
    if os.path.lexists(doomed):
        delete_tree(doomed)


def hide(path: str) -> str | None:
    """Renames a checkpoint to ``path.tps-deleting`` (no longer listed); returns that, or None."""
    if not os.path.exists(path):
        return None
    doomed = path + DELETING_SUFFIX
    if os.path.lexists(doomed):
        delete_tree(doomed)
    os.rename(path, doomed)
    return doomed


def remove(path: str) -> None:
    """Deletes a committed checkpoint; it stops being listed before any file goes."""
    doomed = hide(path)
    if doomed is not None:
        try:
            delete_tree(doomed)
        except OSError:
            pass


def complete(path: str) -> bool:
    """Whether ``path`` is a committed checkpoint folder (it has a manifest, maybe damaged)."""
    return os.path.isfile(os.path.join(path, MANIFEST))


def resolve(path: str) -> str:
    """The folder that holds checkpoint ``path``, read without changing anything.

    Itself when complete; else, mid-overwrite, the previous copy
    ``path.tps-old``; else a committed-but-not-renamed ``path.tps-tmp`` (its
    manifest written); else ``path`` (whose reading then reports what is
    missing).
    """
    if complete(path):
        return path
    if complete(old_path(path)):
        return old_path(path)
    if complete(tmp_path(path)):
        return tmp_path(path)
    return path


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
    path = resolve(path)
    manifest_path = os.path.join(path, MANIFEST)
    if not os.path.isdir(path):
        raise NotFoundError(
            f"{api}: there is no checkpoint at {path!r}.{_neighbours(path)}\nFix: pass a path "
            "returned by save() or write(), manager.latest_checkpoint, or "
            "tps.train.latest_checkpoint(directory)."
        )
    inside = _checkpoints_in(path)
    if not os.path.exists(manifest_path) and inside:
        raise NotFoundError(
            f"{api}: {path!r} is a folder of checkpoints, not a checkpoint (it holds "
            f"{', '.join(inside[-5:])}).\nFix: pass one of "
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
        raise DataLossError(f"{api}: {manifest_path} is not a tpustrategy checkpoint manifest "
                            "(damaged, or not written by tpustrategy); nothing was restored.",
                            filename=manifest_path)
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise DataLossError(f"{api}: {manifest_path} is damaged (its format version is "
                            f"{version!r}); nothing was restored.", filename=manifest_path)
    if version > VERSION:
        raise ValueError(
            f"{api}: {path!r} was written by a newer tpustrategy (checkpoint format version "
            f"{manifest['version']}; this one reads up to {VERSION}).\nFix: upgrade tpustrategy."
        )
    if version >= 2 and manifest.get(_SEAL) != _seal_of(manifest):
        raise DataLossError(
            f"{api}: {manifest_path} is damaged: its content does not match its checksum "
            f"(CRC32C {_seal_of(manifest)}, written as {manifest.get(_SEAL)!r}); nothing was "
            "restored.", filename=manifest_path)
    if not _well_formed(manifest):
        raise DataLossError(f"{api}: {manifest_path} is damaged (a required entry is missing or "
                            "of the wrong type); nothing was restored.", filename=manifest_path)
    return manifest


def _well_formed(manifest: dict[str, Any]) -> bool:
    files, objects = manifest.get("files"), manifest.get("objects")
    if not isinstance(files, dict) or not isinstance(objects, dict):
        return False
    if not isinstance(manifest.get("process_count"), int):
        return False
    for meta in files.values():
        if not isinstance(meta, dict) or not isinstance(meta.get("size"), int) or not isinstance(meta.get("crc32c"), str):
            return False
    for meta in objects.values():
        if not isinstance(meta, dict) or meta.get("kind") not in ("variable", "array", "value", "iterator"):
            return False
        if meta["kind"] in ("variable", "array") and not (
                isinstance(meta.get("parts"), dict) and isinstance(meta.get("shape"), list)
                and isinstance(meta.get("dtype"), str)):
            return False
        if meta["kind"] == "value" and "value" not in meta:
            return False
    return True


def _checkpoints_in(directory: str) -> list[str]:
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return []
    return [e for e in entries if NUMBERED.match(e) and complete(os.path.join(directory, e))]


def verify(path: str, manifest: dict[str, Any], api: str) -> None:
    """Checks every file the manifest names: present, same size, same CRC32C.

    Raises:
      DataLossError: naming each missing, truncated or corrupted file (its
        ``filename`` is the first one).
    """
    path = resolve(path)
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
            f"{previous_hint(path)}",
            filename=problems[0][0],
        )




def previous_hint(path: str) -> str:
    """The fix for a damaged checkpoint: restore the previous complete one, named."""
    path = path[: -len(OLD_SUFFIX)] if path.endswith(OLD_SUFFIX) else path
    match = NUMBERED.match(os.path.basename(path))
    if match is not None:
        directory = os.path.dirname(path)
        earlier = []
        for entry in _checkpoints_in(directory):
            other = NUMBERED.match(entry)
            if other and other["name"] == match["name"] and int(other["number"]) < int(match["number"]):
                earlier.append((int(other["number"]), os.path.join(directory, entry)))
        if earlier:
            previous = max(earlier)[1]
            return ("Fix: restore the previous checkpoint explicitly, "
                    f"checkpoint.restore({previous!r}), or save again.")
    return "Fix: restore an earlier checkpoint (manager.checkpoints lists them), or save again."
