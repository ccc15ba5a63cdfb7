"""`DatasetSpec` and `IteratorSpec`: type specs of a dataset and of an iterator (``tf.data``)."""

from __future__ import annotations

from typing import Any


class DatasetSpec:
    """The type of a dataset: the spec of its elements (``tf.data.DatasetSpec``).

    Args:
      element_spec: a nest of `TensorSpec`.
      dataset_shape: the shape of the dataset value itself (``()`` for one dataset).
    """

    def __init__(self, element_spec: Any, dataset_shape: Any = ()):
        self._element_spec = element_spec
        self._dataset_shape = tuple(dataset_shape)

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    @property
    def shape(self) -> tuple[int, ...]:
        return self._dataset_shape

    @property
    def value_type(self) -> type:
        from tpustrategy._src.data.core.dataset import Dataset

        return Dataset

    @staticmethod
    def from_value(value: Any) -> DatasetSpec:
        """The spec of the dataset ``value``."""
        return DatasetSpec(value.element_spec)

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        other = spec_or_value if isinstance(spec_or_value, DatasetSpec) else DatasetSpec.from_value(spec_or_value)
        return other._element_spec == self._element_spec and other._dataset_shape == self._dataset_shape

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, DatasetSpec) and other._element_spec == self._element_spec
                and other._dataset_shape == self._dataset_shape)

    def __hash__(self) -> int:
        return hash((repr(self._element_spec), self._dataset_shape))

    def __repr__(self) -> str:
        return f"DatasetSpec({self._element_spec!r}, TensorShape({list(self._dataset_shape)}))"


class IteratorSpec:
    """The type of an iterator over elements of ``element_spec`` (``tf.data.IteratorSpec``)."""

    def __init__(self, element_spec: Any):
        self._element_spec = element_spec

    @property
    def element_spec(self) -> Any:
        return self._element_spec

    @property
    def value_type(self) -> type:
        from tpustrategy._src.data.core.iterator import DatasetIterator

        return DatasetIterator

    @staticmethod
    def from_value(value: Any) -> IteratorSpec:
        return IteratorSpec(value.element_spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IteratorSpec) and other._element_spec == self._element_spec

    def __hash__(self) -> int:
        return hash(repr(self._element_spec))

    def __repr__(self) -> str:
        return f"IteratorSpec({self._element_spec!r})"
