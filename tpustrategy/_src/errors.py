"""Exception classes of tpustrategy beyond Python's built-in ones.

Most errors are ordinary ``ValueError``/``RuntimeError``/``TypeError`` with
messages in TensorFlow's wording; these two name situations Python has no
class for. This module imports neither JAX nor NumPy, so ``tpustrategy.data``
can use it.
"""

from __future__ import annotations


class DataLossError(RuntimeError):
    """Input data is corrupt or truncated (TensorFlow's ``tf.errors.DataLossError``).

    Attributes:
      filename: the file in which the corruption was found (or None).
      offset: the byte offset of the bad record in the (uncompressed) stream.
    """

    def __init__(self, message: str, *, filename: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.filename = filename
        self.offset = offset


class DeadlineExceededError(RuntimeError):
    """A peer process did not arrive within the allowed time.

    Attributes:
      missing: the process ids that did not answer.
      addresses: their addresses, in the same order, where known (else ``None``).
    """

    def __init__(self, message: str, *, missing: tuple[int, ...] = (),
                 addresses: tuple[str | None, ...] = ()):
        super().__init__(message)
        self.missing = tuple(missing)
        self.addresses = tuple(addresses) or (None,) * len(self.missing)


class UnavailableError(RuntimeError):
    """A peer process was lost (TensorFlow's ``tf.errors.UnavailableError``).

    Attributes:
      task: the index of the lost process (or None when unknown).
      address: its address, when known.
      peer_error: ``"ValueError: ..."`` when the lost process ended because its
        own code raised that exception (else None).
    """

    def __init__(self, message: str, *, task: int | None = None, address: str | None = None,
                 peer_error: str | None = None):
        super().__init__(message)
        self.task = task
        self.address = address
        self.peer_error = peer_error


class OutOfRangeError(StopIteration):
    """The end of the input was reached (TensorFlow's ``tf.errors.OutOfRangeError``).

    A subclass of ``StopIteration`` on purpose: ``next(iterator)`` past the end
    raises it both outside and inside ``tps.function``, so plain ``for`` loops
    over an iterator end normally, ``except StopIteration`` keeps working, and
    TensorFlow code that catches ``tf.errors.OutOfRangeError`` ports by renaming.
    """
