"""`Dataset.with_options`: attaches `Options` to a pipeline (a pass-through node)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator
from tpustrategy._src.data.core.options import Options


class OptionsDataset(Dataset):
    """The input with ``options`` merged over the pipeline's options.

    Attributes:
      options_: the options set on this node.
    """

    _params = ("options_",)

    def __init__(self, input_dataset: Dataset, options: Options):
        super().__init__((input_dataset,))
        if not isinstance(options, Options):
            raise TypeError(
                f"Dataset.with_options: options must be a tpsd.Options; received "
                f"{type(options).__name__}: {options!r}.\n"
                "Fix: opts = tpsd.Options(); opts.<field> = ...; ds.with_options(opts)."
            )
        self.options_ = options.merge(Options())

    def options(self) -> Options:
        return super().options().merge(self.options_)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return self.inputs[0]._make_iterator(ctx)
