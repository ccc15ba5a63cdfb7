"""`Dataset.from_generator`: elements yielded by a Python generator.

The generator function is called once per pass. With an ``output_signature``
(or the older ``output_types``/``output_shapes``), every yielded value is
converted to the declared dtypes and checked against the declared shapes, with
TensorFlow's messages. A checkpoint records how many elements were taken; a
restored iterator calls the generator again and skips that many, so it resumes
exactly when the generator is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.structure import (
    OBJECT,
    TensorSpec,
    as_dtype,
    element_to_numpy,
    flatten,
    is_structure,
    map_structure,
    to_numpy,
    unflatten_as,
)


class _Check:
    """The declared dtype and shape (None: unknown rank) of one leaf."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: np.dtype, shape: tuple[int | None, ...] | None):
        self.dtype, self.shape = dtype, shape

    def spec(self) -> TensorSpec | None:
        return None if self.shape is None else TensorSpec(self.shape, self.dtype)


def _checks_from_types(types: Any, shapes: Any) -> Any:
    """Walks ``output_types`` with ``output_shapes`` (shapes are tuples themselves)."""
    if isinstance(types, tuple):
        subs = [_checks_from_types(t, None if shapes is None else shapes[i]) for i, t in enumerate(types)]
        return type(types)(*subs) if hasattr(type(types), "_fields") else tuple(subs)
    if isinstance(types, dict):
        return {k: _checks_from_types(t, None if shapes is None else shapes[k]) for k, t in types.items()}
    shape = None if shapes is None else tuple(None if d is None or d < 0 else int(d) for d in shapes)
    return _Check(as_dtype(types), shape)


class GeneratorDataset(Dataset):
    """Elements of ``generator(*args)``.

    Attributes:
      generator: the generator function.
      args: arguments passed to it.
      output_signature: the declared nest of `TensorSpec` (or None).
    """

    _params = ("generator", "args")

    def __init__(
        self,
        generator: Callable[..., Any],
        output_types: Any = None,
        output_shapes: Any = None,
        args: tuple[Any, ...] | None = None,
        output_signature: Any = None,
    ):
        super().__init__(())
        if not callable(generator):
            raise TypeError(
                f"Dataset.from_generator: `generator` must be a Python callable; received "
                f"{type(generator).__name__}: {generator!r}.\n"
                "Fix: pass the generator function itself (e.g. `gen`, not `gen()`)."
            )
        if output_signature is not None and (output_types is not None or output_shapes is not None):
            raise TypeError(
                "Dataset.from_generator: `output_types` and `output_shapes` can not be used "
                "together with `output_signature`.\nFix: pass only output_signature."
            )
        if output_shapes is not None and output_types is None:
            raise TypeError(
                "Dataset.from_generator: `output_shapes` needs `output_types`.\n"
                "Fix: pass output_signature=TensorSpec(shape, dtype) instead."
            )
        self.generator = generator
        self.args = tuple(element_to_numpy(a) for a in (args or ()))
        self.output_signature = output_signature
        self._checks: Any = None
        if output_signature is not None:
            for leaf in flatten(output_signature):
                if not isinstance(leaf, TensorSpec):
                    raise TypeError(
                        "Dataset.from_generator: every leaf of `output_signature` must be a "
                        f"TensorSpec; received {type(leaf).__name__}: {leaf!r}.\n"
                        "Fix: e.g. output_signature=(TensorSpec((), np.int64), TensorSpec((None,), np.float32))."
                    )
            self._checks = map_structure(lambda s: _Check(s.dtype, s.shape), output_signature)
        elif output_types is not None:
            self._checks = _checks_from_types(output_types, output_shapes)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        if self._checks is None or any(c.shape is None for c in flatten(self._checks)):
            return None
        return map_structure(lambda c: c.spec(), self._checks)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _GeneratorIterator(self.generator, self.args, self._checks)


def _convert_leaf(value: Any, dtype: np.dtype, shape: Any) -> Any:
    if dtype == OBJECT:
        out = to_numpy(value)
        if isinstance(out, np.ndarray) and out.dtype != OBJECT:
            raise TypeError(
                "`generator` yielded an element that could not be converted to the expected "
                f"type. The expected type was string, but the yielded element was {value!r}."
            )
    else:
        try:
            out = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError):
            raise TypeError(
                "`generator` yielded an element that could not be converted to the expected "
                f"type. The expected type was {dtype.name}, but the yielded element was {value!r}."
            ) from None
    got = () if isinstance(out, bytes) else out.shape
    if shape is not None and (
        len(got) != len(shape) or any(d is not None and d != g for d, g in zip(shape, got))
    ):
        raise ValueError(
            f"`generator` yielded an element of shape {got} where an element of shape "
            f"{tuple(shape)} was expected.\n"
            "Fix: yield values of the declared shape, or declare unknown dimensions as None."
        )
    if isinstance(out, np.ndarray) and out.ndim == 0:
        return out[()]
    return out


def _convert_free(value: Any) -> Any:
    if isinstance(value, (np.ndarray, np.generic, bytes)):
        return value
    if is_structure(value):
        return map_structure(_convert_free, value)
    return to_numpy(value)


def _is_sequence_value(value: Any, check: _Check) -> bool:
    """Whether a yielded tuple is one tensor's value (``(i,)`` for a shape ``(1,)`` leaf), as TF converts it."""
    return type(value) is tuple and check.shape is not None and len(check.shape) > 0


def _flatten_up_to(checks: Any, value: Any) -> list[Any] | None:
    """The values at the leaves of ``checks`` (a leaf may receive a tuple), or None on a mismatch."""
    if isinstance(checks, _Check):
        if is_structure(value) and not _is_sequence_value(value, checks):
            return None
        return [value]
    if isinstance(checks, tuple):
        if isinstance(value, list):
            value = tuple(value)
        if not isinstance(value, tuple) or isinstance(value, dict) or len(value) != len(checks):
            return None
        out: list[Any] = []
        for c, v in zip(checks, value):
            sub = _flatten_up_to(c, v)
            if sub is None:
                return None
            out.extend(sub)
        return out
    if not isinstance(value, dict) or sorted(value) != sorted(checks):
        return None
    out = []
    for k in sorted(checks):
        sub = _flatten_up_to(checks[k], value[k])
        if sub is None:
            return None
        out.extend(sub)
    return out


class _GeneratorIterator(NodeIterator):
    def __init__(self, generator: Callable[..., Any], args: tuple[Any, ...], checks: Any):
        self._fn, self._args, self._checks = generator, args, checks
        self._gen: Any = None
        self._count = 0
        self._flat = flatten(checks) if checks is not None else None

    def _convert(self, value: Any) -> Any:
        checks = self._checks
        if checks is None:
            return _convert_free(value)
        if isinstance(checks, _Check):
            if is_structure(value) and not _is_sequence_value(value, checks):
                self._raise_structure(value)
            return _convert_leaf(value, checks.dtype, checks.shape)
        if isinstance(value, list):
            value = tuple(value)
        leaves = _flatten_up_to(checks, value)
        if leaves is None:
            self._raise_structure(value)
        return unflatten_as(checks, [_convert_leaf(v, c.dtype, c.shape) for v, c in zip(leaves, self._flat)])

    def _raise_structure(self, value: Any) -> None:
        expected = map_structure(lambda c: TensorSpec(c.shape or (), c.dtype), self._checks)
        raise TypeError(
            "`generator` yielded an element that did not match the expected structure. "
            f"The expected structure was {expected}, but the yielded element was {value!r}.\n"
            "Fix: make the generator yield values nested like output_signature."
        )

    def __next__(self) -> Any:
        if self._gen is None:
            self._gen = iter(self._fn(*self._args))
        value = next(self._gen)
        self._count += 1
        return self._convert(value)

    def get_state(self) -> dict[str, Any]:
        return {"count": self._count}

    def set_state(self, state: dict[str, Any]) -> None:
        count = int(check_state(state, ("count",), "from_generator")["count"])
        self.close()
        self._gen = iter(self._fn(*self._args))
        self._count = 0
        for _ in range(count):
            try:
                next(self._gen)
            except StopIteration:
                break
            self._count += 1

    def close(self) -> None:
        gen, self._gen = self._gen, None
        if gen is not None and hasattr(gen, "close"):
            gen.close()
