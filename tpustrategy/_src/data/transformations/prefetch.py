"""`Dataset.prefetch`: produce elements ahead in a background thread.

The worker hands over chunks (see `parallel.BackgroundIterator`), keeping at
most about ``buffer_size`` elements ready; ``AUTOTUNE`` sizes the buffer from
how fast elements come and how large they are. ``buffer_size=0`` passes the
input through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.parallel.threads import BackgroundIterator


class PrefetchDataset(Dataset):
    """Prefetches up to ``buffer_size`` elements.

    Attributes:
      buffer_size: elements kept ready (AUTOTUNE: adaptive; 0: no prefetching).
    """

    _params = ("buffer_size",)

    def __init__(self, input_dataset: Dataset, buffer_size: int):
        super().__init__((input_dataset,))
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
            raise TypeError(
                f"Dataset.prefetch: buffer_size must be an int or AUTOTUNE; received "
                f"{type(buffer_size).__name__}: {buffer_size!r}.\nFix: e.g. prefetch(AUTOTUNE) or prefetch(2)."
            )
        if buffer_size < 0 and buffer_size != AUTOTUNE:
            raise ValueError(
                f"Dataset.prefetch: buffer_size must be >= 0 or AUTOTUNE (-1); received {buffer_size}.\n"
                "Fix: e.g. prefetch(AUTOTUNE) or prefetch(2)."
            )
        self.buffer_size = buffer_size

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        it = self.inputs[0]._make_iterator(ctx)
        if self.buffer_size == 0:
            return it
        opts = ctx.options
        capacity: int | None = self.buffer_size
        if capacity == AUTOTUNE:  # adaptive within autotune's RAM budget; fixed with autotune off
            capacity = 2 if opts.autotune.enabled is False else None
        out = BackgroundIterator(it, capacity, ram_budget=opts.autotune.ram_budget)
        if opts.experimental_warm_start:
            out.start()
        return out
