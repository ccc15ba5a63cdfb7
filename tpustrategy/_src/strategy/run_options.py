"""``tps.RunOptions``: what ``strategy.run(..., options=)`` takes (``tf.distribute.RunOptions``)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Options of one ``strategy.run`` call.

    Args:
      experimental_enable_dynamic_batch_size: TensorFlow lets TPU programs take
        batches of changing size; here ragged and changing batch sizes always
        work (a new size traces a new program), so True and False behave alike.
      experimental_bucketizing_dynamic_shape: accepted (no effect: XLA on JAX
        compiles each shape).
      experimental_xla_options: accepted (XLA options come from JAX's flags).
    """

    experimental_enable_dynamic_batch_size: bool = True
    experimental_bucketizing_dynamic_shape: bool = False
    experimental_xla_options: Any = None

    def __post_init__(self) -> None:
        for name in ("experimental_enable_dynamic_batch_size", "experimental_bucketizing_dynamic_shape"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"RunOptions: `{name}` must be a bool. Received: {name}={value!r}.\n"
                                f"Fix: pass {name}=True or False.")


def check_run_options(options: Any) -> None:
    if options is not None and not isinstance(options, RunOptions):
        raise TypeError(
            "strategy.run: `options` must be a tps.RunOptions or None. "
            f"Received: options={options!r} ({type(options).__name__})."
        )
