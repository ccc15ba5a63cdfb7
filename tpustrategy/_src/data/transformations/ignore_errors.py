"""`Dataset.ignore_errors`: drops the elements whose production raises.

An error raised while producing an element (a failing ``map`` function, a
corrupt record) is swallowed and the next element is read; with
``log_warning=True`` each swallowed error is reported with a `UserWarning`
(TensorFlow logs it). ``StopIteration`` still ends the stream, and
``KeyboardInterrupt`` / ``SystemExit`` are never swallowed. An input that
keeps failing (`MAX_CONSECUTIVE_ERRORS` errors without an element between
them) gets a `RuntimeError` naming the last error, instead of a loop that never
ends. The cardinality is unknown.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.args import as_bool
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state

MAX_CONSECUTIVE_ERRORS = 100_000


class IgnoreErrorsDataset(Dataset):
    """The input without the elements whose production failed.

    Attributes:
      log_warning: whether each ignored error is reported as a `UserWarning`.
    """

    autoshard_pass_through = True
    _params = ("log_warning",)

    def __init__(self, input_dataset: Dataset, log_warning: Any = False):
        super().__init__((input_dataset,))
        self.log_warning = as_bool(log_warning, "Dataset.ignore_errors", "log_warning")

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _IgnoreErrorsIterator(self.inputs[0]._make_iterator(ctx), self.log_warning)


class _IgnoreErrorsIterator(NodeIterator):
    def __init__(self, it: NodeIterator, log_warning: bool):
        self._it, self._log = it, log_warning
        self._done = False

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        it = self._it
        errors = 0
        while True:
            try:
                return it.__next__()
            except StopIteration:
                self._done = True
                raise
            except Exception as e:
                if self._log:
                    warnings.warn(
                        f"Dataset.ignore_errors: ignoring an error in the input: {type(e).__name__}: {e}",
                        UserWarning,
                        stacklevel=2,
                    )
                errors += 1
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    self._done = True
                    raise RuntimeError(
                        f"Dataset.ignore_errors: the input raised {errors} errors in a row without producing "
                        f"an element; the last: {type(e).__name__}: {e}.\nFix: the input cannot make "
                        "progress past this error (e.g. a source that fails at the same place); fix the "
                        "source, or filter the failing elements out before the failing step."
                    ) from e

    def get_state(self) -> dict[str, Any]:
        return {"input": None if self._done else self._it.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "ignore_errors")
        self._done = bool(state["done"])
        if not self._done:
            self._it.set_state(state["input"])

    def close(self) -> None:
        self._it.close()
