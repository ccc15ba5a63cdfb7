"""TensorFlow's error classes (``tf.errors``): ``OpError`` and one subclass per status code.

In TensorFlow every runtime failure is an ``OpError`` carrying a canonical
status code (``INVALID_ARGUMENT``, ``RESOURCE_EXHAUSTED``, ...), and programs
catch the subclass (``except tf.errors.OutOfRangeError``). Here each class is
both an ``OpError`` *and* the Python built-in exception tpustrategy raised
before it had these classes, so old and ported code catch the same errors:

* ``InvalidArgumentError`` is a ``ValueError``; ``UnimplementedError`` a
  ``NotImplementedError``; ``NotFoundError`` a ``FileNotFoundError`` and a
  ``LookupError``;
  ``OutOfRangeError`` a ``StopIteration`` (``for`` loops over iterators end
  normally, inside ``tps.function`` too); the rest are ``RuntimeError``.

Both of TensorFlow's constructor forms work: ``InvalidArgumentError(None, None,
"message")`` (``node_def, op, message``, as TensorFlow code writes it) and
``InvalidArgumentError("message")``. This module imports neither JAX nor NumPy,
so ``tpustrategy.data`` can use it.
"""

from __future__ import annotations

import sys
from typing import Any

# TensorFlow's canonical status codes (tensorflow/core/protobuf/error_codes.proto).
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base of TensorFlow's runtime errors (``tf.errors.OpError``).

    Args (either form):
      node_def, op, message: TensorFlow's three positional arguments; ``node_def``
        and ``op`` are kept as attributes (tpustrategy has no graph ops, so its own
        errors pass ``None``).
      message: alone, the message.
      error_code: the status code; each subclass supplies its own.

    Attributes:
      message: the error message.
      op: the ``op`` argument (``None`` for tpustrategy's own errors).
      node_def: the ``node_def`` argument.
      error_code: the canonical status code (``tps.errors.INVALID_ARGUMENT`` ...).
      experimental_payloads: a dict, empty unless given.
    """

    _code: int = UNKNOWN

    def __init__(self, *args: Any, message: str | None = None, error_code: int | None = None,
                 experimental_payloads: dict[str, bytes] | None = None) -> None:
        node_def = op = None
        if message is not None and args:
            raise TypeError(
                f"{type(self).__name__}: message= was given together with positional arguments "
                f"{args!r}.\nFix: pass either {type(self).__name__}(node_def, op, message) or "
                f"{type(self).__name__}(message).")
        if message is None:
            if len(args) == 1:
                (message,) = args
            elif len(args) >= 3:
                node_def, op, message = args[:3]
                if len(args) > 3 and error_code is None:
                    error_code = args[3]
            else:
                raise TypeError(
                    f"{type(self).__name__}: expected (node_def, op, message) or (message), "
                    f"received {len(args)} positional arguments {args!r}.\n"
                    f"Fix: pass {type(self).__name__}(None, None, 'what went wrong') or "
                    f"{type(self).__name__}('what went wrong').")
        self.message = str(message)
        self.node_def = node_def
        self.op = op
        self.error_code = self._code if error_code is None else int(error_code)
        self.experimental_payloads = dict(experimental_payloads or {})
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep every attribute (also a subclass's keyword-only ones) across pickling,
        # which child processes use to hand an error to their parent.
        return (_rebuild, (type(self), self.message), dict(self.__dict__))


def _rebuild(cls: type[OpError], message: str) -> OpError:
    error = cls.__new__(cls)
    super(OpError, error).__init__(message)  # the built-in base (StopIteration sets .value)
    return error


class CancelledError(OpError, RuntimeError):
    """An operation or step was cancelled (``tf.errors.CancelledError``)."""

    _code = CANCELLED


class UnknownError(OpError, RuntimeError):
    """An error of no other class (``tf.errors.UnknownError``)."""

    _code = UNKNOWN


class InvalidArgumentError(OpError, ValueError):
    """An argument has a wrong value or shape (``tf.errors.InvalidArgumentError``).

    Also a ``ValueError``, which tpustrategy raised for these cases before.
    """

    _code = INVALID_ARGUMENT


class DeadlineExceededError(OpError, RuntimeError):
    """A peer process did not arrive within the allowed time (``tf.errors.DeadlineExceededError``).

    Attributes:
      missing: the process ids that did not answer.
      addresses: their addresses, in the same order, where known (else ``None``).
    """

    _code = DEADLINE_EXCEEDED

    def __init__(self, *args: Any, missing: tuple[int, ...] = (),
                 addresses: tuple[str | None, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.missing = tuple(missing)
        self.addresses = tuple(addresses) or (None,) * len(self.missing)


class NotFoundError(OpError, FileNotFoundError, LookupError):
    """A requested file or entity does not exist (``tf.errors.NotFoundError``).

    Also a ``FileNotFoundError`` (what a missing checkpoint raised before) and a
    ``LookupError`` (a missing key or name).
    """

    _code = NOT_FOUND


class AlreadyExistsError(OpError, RuntimeError):
    """An entity to create already exists (``tf.errors.AlreadyExistsError``)."""

    _code = ALREADY_EXISTS


class PermissionDeniedError(OpError, RuntimeError):
    """The caller may not run the operation (``tf.errors.PermissionDeniedError``)."""

    _code = PERMISSION_DENIED


class UnauthenticatedError(OpError, RuntimeError):
    """The request lacks valid credentials (``tf.errors.UnauthenticatedError``)."""

    _code = UNAUTHENTICATED


class ResourceExhaustedError(OpError, RuntimeError):
    """Memory or another resource ran out (``tf.errors.ResourceExhaustedError``)."""

    _code = RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError, RuntimeError):
    """The system is not in a state the operation needs (``tf.errors.FailedPreconditionError``),
    e.g. reading a variable that holds no value yet."""

    _code = FAILED_PRECONDITION


class AbortedError(OpError, RuntimeError):
    """The operation was aborted, often by a concurrent one (``tf.errors.AbortedError``)."""

    _code = ABORTED


class OutOfRangeError(OpError, StopIteration):
    """The end of the input was reached (``tf.errors.OutOfRangeError``).

    A subclass of ``StopIteration`` on purpose: ``next(iterator)`` past the end
    raises it both outside and inside ``tps.function``, so plain ``for`` loops
    over an iterator end normally, ``except StopIteration`` keeps working, and
    TensorFlow code that catches ``tf.errors.OutOfRangeError`` ports by renaming.
    """

    _code = OUT_OF_RANGE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not args and "message" not in kwargs:
            args = ("End of sequence",)
        super().__init__(*args, **kwargs)


class UnimplementedError(OpError, NotImplementedError):
    """The operation is not supported (``tf.errors.UnimplementedError``); a ``NotImplementedError``."""

    _code = UNIMPLEMENTED


class InternalError(OpError, RuntimeError):
    """An invariant of the runtime broke (``tf.errors.InternalError``)."""

    _code = INTERNAL


class UnavailableError(OpError, RuntimeError):
    """A peer process was lost (``tf.errors.UnavailableError``).

    Attributes:
      task: the index of the lost process (or None when unknown).
      address: its address, when known.
      peer_error: ``"ValueError: ..."`` when the lost process ended because its
        own code raised that exception (else None).
    """

    _code = UNAVAILABLE

    def __init__(self, *args: Any, task: int | None = None, address: str | None = None,
                 peer_error: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task = task
        self.address = address
        self.peer_error = peer_error


class DataLossError(OpError, RuntimeError):
    """Input data is corrupt or truncated (``tf.errors.DataLossError``).

    Attributes:
      filename: the file in which the corruption was found (or None).
      offset: the byte offset of the bad record in the (uncompressed) stream.
    """

    _code = DATA_LOSS

    def __init__(self, *args: Any, filename: str | None = None, offset: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filename = filename
        self.offset = offset


_BY_CODE: dict[int, type[OpError]] = {
    cls._code: cls for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
        AlreadyExistsError, PermissionDeniedError, UnauthenticatedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError, InternalError,
        UnavailableError, DataLossError)
}


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """The error class of a status code (``tf.errors.exception_type_from_error_code``).

    Raises:
      KeyError: for a code that is not one of TensorFlow's (``OK`` included).
    """
    try:
        return _BY_CODE[error_code]
    except KeyError:
        raise KeyError(
            f"exception_type_from_error_code: received error_code={error_code!r}, which names no "
            f"error class; the codes are {sorted(_BY_CODE)} (tps.errors.CANCELLED ... "
            "tps.errors.UNAUTHENTICATED).\nFix: pass one of those codes, e.g. "
            "tps.errors.INVALID_ARGUMENT, or an error's .error_code.") from None


def error_code_from_exception_type(cls: type[BaseException]) -> int:
    """The status code of an error class (``tf.errors.error_code_from_exception_type``).

    Raises:
      KeyError: for a class that is not one of the ``OpError`` subclasses above.
    """
    for code, known in _BY_CODE.items():
        if cls is known:
            return code
    raise KeyError(
        f"error_code_from_exception_type: received {cls!r}, which is not one of TensorFlow's "
        "error classes (tps.errors.CancelledError ... tps.errors.UnauthenticatedError).\nFix: pass "
        "the class itself, e.g. tps.errors.InvalidArgumentError, or type(error) of a caught one.")


class _GraphOperatorMeta(type):
    """Makes JAX's tracer-conversion errors count as ``OperatorNotAllowedInGraphError``.

    TensorFlow raises ``OperatorNotAllowedInGraphError`` when a program uses a
    symbolic tensor as a Python ``bool`` (``if x > 0:``) or index inside a
    ``tf.function``; JAX raises ``TracerBoolConversionError`` /
    ``TracerIntegerConversionError`` for the same code inside ``tps.function``.
    ``except OperatorNotAllowedInGraphError`` catches those (``except`` honours
    ``__subclasscheck__``). JAX is looked up only if already imported: before
    that, no such error can exist, and this module must not start JAX.
    """

    def __subclasscheck__(cls, subclass: type) -> bool:
        if type.__subclasscheck__(cls, subclass):
            return True
        jax = sys.modules.get("jax")
        errors = getattr(jax, "errors", None)
        jax_classes = tuple(getattr(errors, name) for name in _JAX_GRAPH_ERRORS if hasattr(errors, name))
        return bool(jax_classes) and issubclass(subclass, jax_classes)

    def __instancecheck__(cls, instance: object) -> bool:
        return cls.__subclasscheck__(type(instance))


_JAX_GRAPH_ERRORS = ("TracerBoolConversionError", "TracerIntegerConversionError")


class OperatorNotAllowedInGraphError(TypeError, metaclass=_GraphOperatorMeta):
    """A Python operator used on a traced value (``tf.errors.OperatorNotAllowedInGraphError``).

    A ``TypeError``, as in TensorFlow. JAX's ``TracerBoolConversionError`` and
    ``TracerIntegerConversionError`` (``bool(x)`` / ``int(x)`` / indexing with a
    traced value inside ``tps.function``) are instances of it, so
    ``except tps.errors.OperatorNotAllowedInGraphError`` catches them.
    """


class ReplicaStructureError(ValueError, AssertionError):
    """Replicas of one ``strategy.run`` returned different structures.

    TensorFlow raises ``AssertionError`` here; this is both that and the
    ``ValueError`` tpustrategy raised before, so code catching either works.
    """
