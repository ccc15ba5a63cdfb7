"""What ``Checkpoint.restore`` returns: which saved values found an object (TF's load status)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _listing(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(k) for k in keys[:20])
    return shown + (f" ... ({len(keys)} in all)" if len(keys) > 20 else "")


class CheckpointLoadStatus:
    """The result of a restore (``tf.train.Checkpoint.restore``'s status object).

    Values are restored when ``restore`` returns; these methods only check how
    well the checkpoint and the objects matched.

    Attributes:
      save_path: the checkpoint restored.
      matched: keys restored.
      unused: keys in the checkpoint that no object asked for.
      missing: keys of objects that the checkpoint does not hold (left as they were).
    """

    def __init__(self, save_path: str, matched: list[str], unused: list[str], missing: list[str]):
        self.save_path = save_path
        self.matched = list(matched)
        self._unused = list(unused)
        self.missing = list(missing)
        self._pending: Any = None  # deferred.Pending: values waiting for objects created later

    @property
    def unused(self) -> list[str]:
        """Saved keys no object has claimed yet (objects created after ``restore`` still can)."""
        if self._pending is not None:
            return list(self._pending.remaining)
        return list(self._unused)

    def assert_consumed(self) -> CheckpointLoadStatus:
        """Asserts that every saved value was restored and every object was found."""
        if self.unused:
            raise AssertionError(
                f"Unresolved objects in checkpoint {self.save_path}: {_listing(self.unused)} were "
                "saved but no object of this Checkpoint matches them.\nFix: add those objects, or "
                "call expect_partial() / assert_existing_objects_matched() for a partial restore."
            )
        self.assert_existing_objects_matched()
        return self

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        """Asserts that every object of the Checkpoint found its value."""
        if self.missing:
            raise AssertionError(
                f"Some objects had no value in checkpoint {self.save_path}: {_listing(self.missing)} "
                "(they keep their current values).\nFix: check the names given to "
                "tps.train.Checkpoint(...) match those used when saving."
            )
        return self

    def assert_nontrivial_match(self) -> CheckpointLoadStatus:
        """Asserts that at least one object was restored."""
        if not self.matched:
            raise AssertionError(
                f"Nothing was restored from {self.save_path}: no object of this Checkpoint matches "
                "a saved value.\nFix: use the names given to tps.train.Checkpoint(...) when saving."
            )
        return self

    def expect_partial(self) -> CheckpointLoadStatus:
        """Marks a partial restore as intended: no warning lists the values left unrestored."""
        if self._pending is not None:
            self._pending.expect_partial()
        return self

    def run_restore_ops(self, session: object = None) -> None:
        """Nothing to run: values are restored eagerly (TF1 compatibility)."""

    def initialize_or_restore(self, session: object = None) -> None:
        """Nothing to run: values are restored eagerly (TF1 compatibility)."""

    def __repr__(self) -> str:
        return (f"<CheckpointLoadStatus {self.save_path!r}: {len(self.matched)} restored, "
                f"{len(self.unused)} unused, {len(self.missing)} missing>")


class InitializationOnlyStatus(CheckpointLoadStatus):
    """What ``restore(None)`` returns: nothing is restored, objects keep their initial values."""

    def __init__(self) -> None:
        super().__init__("None", [], [], [])

    def _nothing(self) -> CheckpointLoadStatus:
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    def assert_consumed(self) -> CheckpointLoadStatus:
        return self._nothing()

    def assert_existing_objects_matched(self) -> CheckpointLoadStatus:
        return self._nothing()

    def assert_nontrivial_match(self) -> CheckpointLoadStatus:
        return self._nothing()
