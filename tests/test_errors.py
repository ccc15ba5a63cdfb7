"""TensorFlow's error classes: OpError base, status codes, both constructor forms, and the
built-in exception each one stays."""

from __future__ import annotations

import pickle

import pytest

import tpustrategy as tps

# (class, TensorFlow's status code, the built-in tpustrategy raised before these classes)
_CLASSES = [
    ("CancelledError", 1, RuntimeError),
    ("UnknownError", 2, RuntimeError),
    ("InvalidArgumentError", 3, ValueError),
    ("DeadlineExceededError", 4, RuntimeError),
    ("NotFoundError", 5, FileNotFoundError),
    ("AlreadyExistsError", 6, RuntimeError),
    ("PermissionDeniedError", 7, RuntimeError),
    ("ResourceExhaustedError", 8, RuntimeError),
    ("FailedPreconditionError", 9, RuntimeError),
    ("AbortedError", 10, RuntimeError),
    ("OutOfRangeError", 11, StopIteration),
    ("UnimplementedError", 12, NotImplementedError),
    ("InternalError", 13, RuntimeError),
    ("UnavailableError", 14, RuntimeError),
    ("DataLossError", 15, RuntimeError),
    ("UnauthenticatedError", 16, RuntimeError),
]


@pytest.mark.parametrize("name,code,builtin", _CLASSES)
def test_every_error_class_is_an_op_error_with_tensorflows_code_and_its_builtin(name, code, builtin):
    cls = getattr(tps.errors, name)
    error = cls(None, None, "it broke")
    assert isinstance(error, tps.errors.OpError)
    assert isinstance(error, builtin)
    assert error.error_code == code
    assert getattr(tps.errors, _constant(name)) == code
    assert error.message == "it broke" and str(error) == "it broke"
    assert error.op is None and error.node_def is None
    assert tps.errors.exception_type_from_error_code(code) is cls
    assert tps.errors.error_code_from_exception_type(cls) == code


def _constant(name: str) -> str:
    # "ResourceExhaustedError" -> "RESOURCE_EXHAUSTED"
    stem = name[: -len("Error")]
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(stem)).upper()
    return out


def test_tensorflow_code_catching_op_error_catches_every_subclass():
    caught = []
    for name, _, _ in _CLASSES:
        try:
            raise getattr(tps.errors, name)("x")
        except tps.errors.OpError as e:
            caught.append(type(e).__name__)
    assert caught == [name for name, _, _ in _CLASSES]


def test_the_message_only_form_and_the_op_form_keep_op_and_node_def():
    assert tps.errors.InvalidArgumentError("bad shape").message == "bad shape"
    error = tps.errors.AbortedError("node", "op", "stopped")
    assert (error.node_def, error.op, error.message) == ("node", "op", "stopped")


def test_a_wrong_constructor_call_names_both_forms():
    with pytest.raises(TypeError, match=r"(?s)InvalidArgumentError.*received 2 positional.*Fix"):
        tps.errors.InvalidArgumentError("a", "b")
    with pytest.raises(TypeError, match="message= was given together"):
        tps.errors.InternalError(None, None, "x", message="y")


def test_invalid_argument_error_is_still_caught_as_value_error():
    with pytest.raises(ValueError, match="bad"):
        raise tps.errors.InvalidArgumentError(None, None, "bad")


def test_out_of_range_error_ends_a_for_loop_over_an_iterator():
    class Counter:
        def __init__(self):
            self.i = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.i += 1
            if self.i > 3:
                raise tps.errors.OutOfRangeError()
            return self.i

    assert list(Counter()) == [1, 2, 3]
    assert str(tps.errors.OutOfRangeError()) == "End of sequence"


def test_errors_keep_their_attributes_across_pickling():
    lost = pickle.loads(pickle.dumps(tps.errors.UnavailableError("lost", task=3, address="h:1")))
    assert (type(lost), str(lost), lost.task, lost.address, lost.error_code) == (
        tps.errors.UnavailableError, "lost", 3, "h:1", 14)
    late = pickle.loads(pickle.dumps(tps.errors.DeadlineExceededError("late", missing=(1, 2))))
    assert late.missing == (1, 2) and late.addresses == (None, None)
    bad = pickle.loads(pickle.dumps(tps.errors.DataLossError("crc", filename="f", offset=8)))
    assert (bad.filename, bad.offset, bad.error_code) == ("f", 8, 15)
    end = pickle.loads(pickle.dumps(tps.errors.OutOfRangeError("end")))
    assert isinstance(end, StopIteration) and end.value == "end"


def test_unknown_codes_and_classes_are_refused_with_the_valid_range():
    with pytest.raises(KeyError, match="error_code=0"):
        tps.errors.exception_type_from_error_code(tps.errors.OK)
    with pytest.raises(KeyError, match="ValueError"):
        tps.errors.error_code_from_exception_type(ValueError)
