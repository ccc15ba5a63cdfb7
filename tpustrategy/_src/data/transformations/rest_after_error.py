"""Input elements left over when a function fails in the middle of a chunk (``map``, ``filter``).

The bulk path reads a chunk of input elements and applies the function to each.
When it fails at element ``k``, the elements after ``k`` were read from the
input but not yet used. TensorFlow's error belongs to element ``k`` alone and
the stream may go on (``ignore_errors``), so those elements are kept here and
used before the input is read again. A checkpoint taken while some are kept
stores them (encoded with `state_codec`; at most one chunk, and only after an
error) next to the input state; otherwise the state is the input's own.
"""

from __future__ import annotations

import collections
from typing import Any

from tpustrategy._src.data.core.iterator import NodeIterator
from tpustrategy._src.data.core.state_codec import decode, encode

_KEY = "rest_after_error"


class RestAfterError:
    """Mixin: ``_it`` is the input; the subclass reads through `_read_one` / `_read_many`."""

    _it: NodeIterator
    _pending: BaseException | None = None
    _failed: Any = None  # the input element whose error is pending
    _rest: collections.deque[Any] | None = None

    def _raise_pending(self) -> None:
        err, self._pending, self._failed = self._pending, None, None
        raise err  # type: ignore[misc]

    def _read_one(self) -> Any:
        rest = self._rest
        if rest:
            return rest.popleft()
        return self._it.__next__()

    def _read_many(self, n: int) -> list[Any]:
        rest = self._rest
        if rest:
            return [rest.popleft() for _ in range(min(n, len(rest)))]
        return self._it._next_many(n)

    def _keep_rest(self, xs: list[Any], k: int, error: BaseException, produced: bool) -> None:
        """Element ``k`` of ``xs`` failed: keep the ones after it; pend the error if output was produced."""
        after = collections.deque(xs[k + 1 :])
        if self._rest:
            after.extend(self._rest)
        self._rest = after
        if produced:
            self._pending, self._failed = error, xs[k]

    def _skip_rest(self, n: int) -> int:
        done = 0
        if self._pending is not None and n > 0:
            self._pending, self._failed = None, None
            done = 1
        while self._rest and done < n:
            self._rest.popleft()
            done += 1
        return done + (self._it._skip(n - done) if done < n else 0)

    def _rest_state(self) -> dict[str, Any]:
        inner = self._it.get_state()
        if self._pending is None and not self._rest:
            return inner
        kept = ([self._failed] if self._pending is not None else []) + list(self._rest or ())
        return {_KEY: {"input": inner, "elements": [encode(x) for x in kept]}}

    def _restore_rest(self, state: Any) -> None:
        self._pending, self._failed, self._rest = None, None, None
        if isinstance(state, dict) and _KEY in state and len(state) == 1:
            self._it.set_state(state[_KEY]["input"])
            self._rest = collections.deque(decode(x) for x in state[_KEY]["elements"])
            return
        self._it.set_state(state)
