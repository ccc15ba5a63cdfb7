"""``tf.io.gfile`` on the local file system: TensorFlow's file API, errors and return types.

Paths are ``str`` or ``bytes``, plain or ``file://``. Other schemes (``gs://``, ``s3://``,
``hdfs://`` ...) raise TensorFlow's ``UnimplementedError`` with a fix: tpustrategy has no
cloud file systems (mount the bucket, e.g. with gcsfuse, or copy the files locally).
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tpustrategy._src.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    NotFoundError,
    PermissionDeniedError,
    UnimplementedError,
)


def local_path(path: Any) -> str:
    """The local path of ``path`` (str, bytes or os.PathLike; ``file://`` stripped)."""
    if isinstance(path, bytes):
        path = path.decode()
    path = os.fspath(path)
    if "://" in path:
        scheme, rest = path.split("://", 1)
        if scheme != "file":
            raise UnimplementedError(
                f"File system scheme '{scheme}' not implemented (file: '{path}')\n"
                "Fix: tps.io.gfile reads local paths only; mount the bucket (gcsfuse, s3fs) or "
                "copy the files to a local directory and pass that path.")
        return rest
    return path


def get_registered_schemes() -> list[str]:
    """The URL schemes ``tps.io.gfile`` can open (``tf.io.gfile.get_registered_schemes``).

    ``'file'`` (``file://`` URLs) and ``''`` (plain local paths). TensorFlow 2.21 also lists
    ``'ram'`` and ``'gs'``, which need its own file systems; here they raise UnimplementedError.
    """
    return ["file", ""]


def _not_found(path: str) -> NotFoundError:
    return NotFoundError(f"{path}; No such file or directory")


def exists(path: Any) -> bool:
    """Whether ``path`` exists (``tf.io.gfile.exists``)."""
    return os.path.exists(local_path(path))


def isdir(path: Any) -> bool:
    """Whether ``path`` is a directory (``tf.io.gfile.isdir``)."""
    return os.path.isdir(local_path(path))


def listdir(path: Any) -> list[str]:
    """The names in a directory, without ``.``/``..`` (``tf.io.gfile.listdir``)."""
    p = local_path(path)
    if not os.path.isdir(p):
        raise _not_found(p) if not os.path.exists(p) else FailedPreconditionError(
            f"{p} is not a directory")
    return sorted(os.listdir(p))


def makedirs(path: Any) -> None:
    """Creates a directory and its parents; no error if it exists (``tf.io.gfile.makedirs``)."""
    os.makedirs(local_path(path), exist_ok=True)


def mkdir(path: Any) -> None:
    """Creates one directory (``tf.io.gfile.mkdir``); AlreadyExistsError if it exists."""
    p = local_path(path)
    try:
        os.mkdir(p)
    except FileExistsError:
        raise AlreadyExistsError(f"{p}; File exists") from None
    except FileNotFoundError:
        raise _not_found(p) from None


def remove(path: Any) -> None:
    """Deletes a file (``tf.io.gfile.remove``); NotFoundError if it does not exist."""
    p = local_path(path)
    try:
        os.remove(p)
    except FileNotFoundError:
        raise _not_found(p) from None


def rmtree(path: Any) -> None:
    """Deletes a directory and everything in it (``tf.io.gfile.rmtree``)."""
    p = local_path(path)
    if not os.path.exists(p):
        raise _not_found(p)
    shutil.rmtree(p)


def rename(src: Any, dst: Any, overwrite: bool = False) -> None:
    """Renames ``src`` to ``dst`` (``tf.io.gfile.rename``).

    Raises:
      tps.errors.AlreadyExistsError: ``dst`` exists and ``overwrite`` is False.
      tps.errors.NotFoundError: ``src`` does not exist.
    """
    s, d = local_path(src), local_path(dst)
    if not overwrite and os.path.exists(d):
        raise AlreadyExistsError("file already exists")
    if not os.path.exists(s):
        raise _not_found(s)
    os.replace(s, d)


def copy(src: Any, dst: Any, overwrite: bool = False) -> None:
    """Copies a file (``tf.io.gfile.copy``); AlreadyExistsError if ``dst`` exists."""
    s, d = local_path(src), local_path(dst)
    if not overwrite and os.path.exists(d):
        raise AlreadyExistsError("file already exists")
    if not os.path.exists(s):
        raise _not_found(s)
    shutil.copyfile(s, d)


def glob(pattern: Any) -> list[str]:
    """The paths matching a glob pattern, or each of a list of patterns (``tf.io.gfile.glob``)."""
    patterns = [pattern] if isinstance(pattern, str | bytes | os.PathLike) else list(pattern)
    found: list[str] = []
    for p in patterns:
        text = p.decode() if isinstance(p, bytes) else os.fspath(p)
        prefix = "file://" if text.startswith("file://") else ""
        found.extend(prefix + m for m in _glob.glob(local_path(text)))
    return found


def walk(top: Any, topdown: bool = True,
         onerror: Any = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """Walks a directory tree, yielding ``(dirname, subdirs, files)`` (``tf.io.gfile.walk``)."""
    top = local_path(top)
    try:
        names = listdir(top)
    except (NotFoundError, FailedPreconditionError) as e:
        if onerror is not None:
            onerror(e)
        return
    dirs = [n for n in names if os.path.isdir(os.path.join(top, n))]
    files = [n for n in names if n not in dirs]
    if topdown:
        yield top, dirs, files
    for d in dirs:
        yield from walk(os.path.join(top, d), topdown, onerror)
    if not topdown:
        yield top, dirs, files


@dataclass(frozen=True)
class FileStatistics:
    """What ``stat`` reports (``tf.io.gfile.stat``'s FileStatistics)."""

    length: int
    mtime_nsec: int
    is_directory: bool


def stat(path: Any) -> FileStatistics:
    """Length, modification time (ns) and kind of ``path`` (``tf.io.gfile.stat``)."""
    p = local_path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise _not_found(p) from None
    return FileStatistics(length=int(st.st_size), mtime_nsec=int(st.st_mtime_ns),
                          is_directory=os.path.isdir(p))


def join(path: Any, *paths: Any) -> str:
    """``os.path.join`` that keeps a URL scheme (``tf.io.gfile.join``)."""
    return os.path.join(os.fspath(path), *(os.fspath(p) for p in paths))


_MODES = ("r", "rb", "w", "wb", "a", "ab", "r+", "rb+", "w+", "wb+", "a+", "ab+")


class GFile:
    """A file object with TensorFlow's ``tf.io.gfile.GFile`` API (also ``FastGFile``).

    Text modes (``"r"``, ``"w"``, ``"a"``) read and write ``str``; binary modes (``"rb"``,
    ``"wb"``, ``"ab"``) ``bytes``. The file opens on first use, as TensorFlow's does, so
    ``GFile(missing)`` succeeds and the first ``read`` raises ``NotFoundError``.

    Example:
      >>> with tps.io.gfile.GFile("/tmp/x.txt", "w") as f:
      ...     f.write("hello\\n")
      >>> tps.io.gfile.GFile("/tmp/x.txt").readlines()   # ['hello\\n']
    """

    def __init__(self, name: Any, mode: str = "r") -> None:
        if mode not in _MODES:
            raise NotFoundError(f"Unknown mode: {mode!r}.\nFix: use one of {', '.join(_MODES)}.")
        self.__name = name if isinstance(name, str) else os.fsdecode(name)
        self.__path = local_path(name)
        self.__mode = mode
        self.__file: Any = None
        self.__closed = False

    @property
    def name(self) -> str:
        """The path given."""
        return self.__name

    @property
    def mode(self) -> str:
        """The mode given."""
        return self.__mode

    def _f(self) -> Any:
        if self.__closed:
            raise ValueError("I/O operation on closed file.")
        if self.__file is None:
            mode = self.__mode if "b" in self.__mode else self.__mode + "b"
            try:
                self.__file = open(self.__path, mode)  # noqa: SIM115 - closed by close()
            except FileNotFoundError:
                raise _not_found(self.__path) from None
            except IsADirectoryError:
                raise FailedPreconditionError(f"{self.__path}; Is a directory") from None
            except PermissionError:
                raise PermissionDeniedError(f"{self.__path}; Permission denied") from None
        return self.__file

    def _out(self, data: bytes) -> Any:
        return data if "b" in self.__mode else data.decode("utf-8")

    def _check_read(self) -> None:
        if self.__mode[0] in "wa" and "+" not in self.__mode:
            raise PermissionDeniedError("File isn't open for reading")

    def _check_write(self) -> None:
        if self.__mode[0] == "r" and "+" not in self.__mode:
            raise PermissionDeniedError("File isn't open for writing")

    def size(self) -> int:
        """The file's length in bytes."""
        f = self._f()
        f.flush()
        return os.fstat(f.fileno()).st_size

    def read(self, n: int = -1) -> Any:
        """Reads ``n`` bytes (all when -1): ``str`` in text mode, ``bytes`` in binary mode."""
        self._check_read()
        return self._out(self._f().read(None if n is None or n < 0 else n))

    def readline(self) -> Any:
        """The next line, with its newline ('' / b'' at the end)."""
        self._check_read()
        return self._out(self._f().readline())

    def readlines(self) -> list[Any]:
        """All remaining lines."""
        self._check_read()
        return [self._out(line) for line in self._f().readlines()]

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def write(self, file_content: Any) -> None:
        """Writes ``str`` (UTF-8) or ``bytes``."""
        self._check_write()
        data = file_content.encode("utf-8") if isinstance(file_content, str) else bytes(file_content)
        self._f().write(data)

    def seek(self, offset: int | None = None, whence: int = 0, position: int | None = None) -> int:
        """Moves to ``offset`` relative to ``whence`` (0 start, 1 current, 2 end)."""
        if position is not None:
            if offset is not None:
                raise TypeError("position is deprecated in favor of the offset argument.")
            offset = position
        return int(self._f().seek(0 if offset is None else offset, whence))

    def tell(self) -> int:
        """The current position in bytes."""
        return int(self._f().tell())

    def seekable(self) -> bool:
        """True: local files can seek."""
        return True

    def flush(self) -> None:
        """Writes buffered data to the file."""
        if self.__file is not None:
            self.__file.flush()

    def close(self) -> None:
        """Closes the file (flushing writes); later calls do nothing."""
        if self.__file is None and self.__mode[0] in "wa" and not self.__closed:
            self._f()  # TensorFlow creates the file even when nothing was written
        if self.__file is not None:
            self.__file.close()
            self.__file = None
        self.__closed = True

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self.__file is not None:
            self.__file.close()
