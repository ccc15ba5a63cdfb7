"""The ``checkpoint`` state file: which checkpoints a folder holds, newest last.

The same file TensorFlow writes next to its checkpoints (a ``CheckpointState``
protocol buffer in text format)::

    model_checkpoint_path: "ckpt-3"
    all_model_checkpoint_paths: "ckpt-2"
    all_model_checkpoint_paths: "ckpt-3"
    all_model_checkpoint_timestamps: 1700000000.5
    all_model_checkpoint_timestamps: 1700000100.25
    last_preserved_timestamp: 1699999000.0

``tf.train.Checkpoint.save`` and ``tf.train.CheckpointManager`` write it, and
``tf.train.latest_checkpoint`` reads ``model_checkpoint_path`` from it: the
newest checkpoint is the one *named* there, never the newest by a clock.
Paths inside the folder are written relative to it (TensorFlow's
``save_relative_paths``), so the folder can be moved; relative paths are read
relative to the folder. The file is replaced atomically (written beside it,
flushed, renamed over it), so a crash leaves the old or the new version.

Both our own checkpoints and TensorFlow's use this module.
"""

from __future__ import annotations

import dataclasses
import os
import re

STATE_FILENAME = "checkpoint"
_TMP_SUFFIX = ".tps-tmp"
_FIELD = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^\s#]+)')
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "?": "?"}


@dataclasses.dataclass
class CheckpointState:
    """The content of a ``checkpoint`` state file (TensorFlow's ``CheckpointState``).

    Attributes:
      model_checkpoint_path: the newest checkpoint (as written: maybe relative).
      all_model_checkpoint_paths: the checkpoints kept, oldest first (the
        newest is normally the last).
      all_model_checkpoint_timestamps: when each was saved (seconds since the
        epoch; informational, and for ``keep_checkpoint_every_n_hours``).
      last_preserved_timestamp: when the last checkpoint kept forever by
        ``keep_checkpoint_every_n_hours`` was saved.
    """

    model_checkpoint_path: str = ""
    all_model_checkpoint_paths: list[str] = dataclasses.field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = dataclasses.field(default_factory=list)
    last_preserved_timestamp: float | None = None


class StateFileError(ValueError):
    """A ``checkpoint`` state file that is not valid text format."""


def _unquote(token: str, where: str) -> str:
    body = token[1:-1]
    out: list[str] = []
    raw = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            raw += ch.encode()
            i += 1
            continue
        nxt = body[i + 1]
        octal = re.match(r"[0-7]{1,3}", body[i + 1:])
        if octal:
            raw.append(int(octal.group(), 8) & 0xFF)
            i += 1 + len(octal.group())
        elif nxt == "x" and re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2:]):
            digits = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2:]).group()  # type: ignore[union-attr]
            raw.append(int(digits, 16))
            i += 2 + len(digits)
        elif nxt in _ESCAPES:
            raw += _ESCAPES[nxt].encode()
            i += 2
        else:
            raise StateFileError(f"{where}: unknown escape '\\{nxt}' in {token}")
    out.append(raw.decode("utf-8", errors="surrogateescape"))
    return "".join(out)


def _quote(text: str) -> str:
    out = []
    for byte in text.encode("utf-8", errors="surrogateescape"):
        ch = chr(byte)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif byte < 0x20 or byte >= 0x7F:
            out.append(f"\\{byte:03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def parse(text: str, where: str = "checkpoint state file") -> CheckpointState:
    """Parses the text format of a ``CheckpointState``.

    Raises:
      StateFileError: a line that is not ``field: value`` of a known field.
    """
    state = CheckpointState()
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _FIELD.match(stripped)
        if match is None or stripped[match.end():].strip()[:1] not in ("", "#"):
            raise StateFileError(f"{where}, line {number}: not 'field: value': {line!r}")
        name, token = match.group(1), match.group(2)
        try:
            if name in ("model_checkpoint_path", "all_model_checkpoint_paths"):
                if token[0] not in "\"'":
                    raise StateFileError(f"{where}, line {number}: {name} must be a quoted string")
                value = _unquote(token, where)
                if name == "model_checkpoint_path":
                    state.model_checkpoint_path = value
                else:
                    state.all_model_checkpoint_paths.append(value)
            elif name == "all_model_checkpoint_timestamps":
                state.all_model_checkpoint_timestamps.append(float(token))
            elif name == "last_preserved_timestamp":
                state.last_preserved_timestamp = float(token)
            else:
                raise StateFileError(f"{where}, line {number}: unknown field {name!r}")
        except (ValueError, IndexError) as e:
            if isinstance(e, StateFileError):
                raise
            raise StateFileError(f"{where}, line {number}: bad value {token!r} ({e})") from None
    return state


def _number(value: float) -> str:
    return repr(float(value))


def format_state(state: CheckpointState) -> str:
    """The text format of ``state`` (as TensorFlow's ``text_format.MessageToString``)."""
    lines = [f"model_checkpoint_path: {_quote(state.model_checkpoint_path)}"]
    lines += [f"all_model_checkpoint_paths: {_quote(p)}" for p in state.all_model_checkpoint_paths]
    lines += [f"all_model_checkpoint_timestamps: {_number(t)}" for t in state.all_model_checkpoint_timestamps]
    if state.last_preserved_timestamp is not None:
        lines.append(f"last_preserved_timestamp: {_number(state.last_preserved_timestamp)}")
    return "\n".join(lines) + "\n"


def state_path(directory: str, latest_filename: str | None = None) -> str:
    """The state file's path in ``directory`` (``latest_filename`` defaults to ``"checkpoint"``)."""
    return os.path.join(os.fspath(directory), latest_filename or STATE_FILENAME)


def _absolute(directory: str, path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(directory, path)


def read(directory: str, latest_filename: str | None = None) -> CheckpointState | None:
    """The state file of ``directory`` with every path made absolute, or None.

    Like ``tf.train.get_checkpoint_state``: relative paths are taken relative
    to ``directory``.

    Returns:
      None when the folder has no state file.

    Raises:
      StateFileError: the file exists but is not a valid state file (an
        unreadable file raises its ``OSError``).
    """
    directory = os.fspath(directory)
    path = state_path(directory, latest_filename)
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StateFileError(f"{path} is a folder, not a checkpoint state file") from None
    state = parse(text, path)
    if not state.model_checkpoint_path and not state.all_model_checkpoint_paths:
        raise StateFileError(f"{path} names no checkpoint")
    state.model_checkpoint_path = _absolute(directory, state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [_absolute(directory, p) for p in state.all_model_checkpoint_paths]
    return state


def _relative(directory: str, path: str) -> str:
    absolute_dir = os.path.abspath(directory)
    absolute = os.path.abspath(path)
    if os.path.dirname(absolute) == absolute_dir:
        return os.path.basename(absolute)
    return path


def write(directory: str, model_checkpoint_path: str, all_model_checkpoint_paths: list[str],
          all_model_checkpoint_timestamps: list[float] | None = None,
          last_preserved_timestamp: float | None = None, latest_filename: str | None = None,
          relative: bool = True) -> str:
    """Replaces ``directory``'s state file atomically; returns its path.

    Paths of checkpoints directly inside ``directory`` are written relative
    to it when ``relative`` (as TensorFlow's ``save_relative_paths=True``),
    and ``model_checkpoint_path`` is appended to the list when missing from
    it, as TensorFlow does.
    """
    directory = os.fspath(directory)
    paths = list(all_model_checkpoint_paths)
    if model_checkpoint_path not in paths:
        paths.append(model_checkpoint_path)
    convert = (lambda p: _relative(directory, p)) if relative else (lambda p: p)
    state = CheckpointState(convert(model_checkpoint_path), [convert(p) for p in paths],
                            list(all_model_checkpoint_timestamps or []), last_preserved_timestamp)
    target = state_path(directory, latest_filename)
    tmp = target + _TMP_SUFFIX
    os.makedirs(directory, exist_ok=True)
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(format_state(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fd = os.open(os.path.abspath(directory), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return target
