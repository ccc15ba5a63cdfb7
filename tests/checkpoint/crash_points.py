"""A simulated process death at the n-th file operation, shared by the crash tests."""

from __future__ import annotations

import os
import shutil

import pytest


class Killed(BaseException):
    """The simulated death of the process."""


class Crash:
    """Counts file operations; from call ``at`` on, every one raises `Killed`.
    A test file picks the operations it counts by overriding `OPS`."""

    OPS = [(os, "rename"), (os, "replace"), (os, "makedirs"), (os, "fsync"), (shutil, "rmtree"),
           (shutil, "copytree")]

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int | None):
        self.calls, self.at, self.dead = 0, at, False
        self._undo = monkeypatch
        for module, name in self.OPS:
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name)))

    def _wrap(self, original):
        def op(*args, **kwargs):
            self.calls += 1
            if self.dead or (self.at is not None and self.calls >= self.at):
                self.dead = True
                raise Killed(f"killed at file operation {self.calls}")
            return original(*args, **kwargs)
        return op

    def stop(self) -> None:
        self._undo.undo()
