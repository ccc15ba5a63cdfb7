"""The Keras patch table: every replaced attribute's signature matches this Keras; uninstall restores Keras."""

import dataclasses
import inspect

import keras  # noqa: F401 - the table patches Keras
import pytest

import tpustrategy as tps
from tpustrategy._src.keras import patches


@pytest.fixture
def installed():
    with tps.MirroredStrategy().scope():   # the first scope installs the table
        pass
    assert patches.installed()
    yield
    patches.install()


def test_every_patched_attribute_has_the_signature_it_was_written_against(installed):
    assert len(patches.table()) == len({(p.module, p.owner, p.name) for p in patches.table()})
    for patch in patches.table():
        original = patches.original(patch.owner, patch.name)
        assert str(inspect.signature(original)) == patch.signature, patch.where
    patches.check_signatures()


def test_uninstall_restores_keras_exactly_and_install_replaces_every_attribute_again(installed):
    originals = {p: patches.original(p.owner, p.name) for p in patches.table()}
    wrappers = {p: vars(p.resolve())[p.name] for p in patches.table()}
    assert all(wrappers[p] is not originals[p] for p in patches.table())
    patches.uninstall()
    assert not patches.installed()
    for patch in patches.table():
        assert vars(patch.resolve())[patch.name] is originals[patch], patch.where
    patches.install()
    for patch in patches.table():
        now = vars(patch.resolve())[patch.name]
        assert now is not originals[patch] and patches.original(patch.owner, patch.name) is originals[patch]


def test_a_changed_keras_signature_is_refused_before_anything_is_replaced(installed, monkeypatch):
    patches.uninstall()
    first = patches.table()[0]
    wrong = dataclasses.replace(first, signature="(self, grads)")
    monkeypatch.setattr(patches, "_TABLE", (wrong, *patches.table()[1:]))
    with pytest.raises(ImportError, match=r"BaseOptimizer\.apply, written against the signature \(self, grads\)"):
        patches.install()
    assert not patches.installed()
    assert all(vars(p.resolve())[p.name] is patches.original(p.owner, p.name) for p in patches.table())
    monkeypatch.undo()
    patches.install()
    assert patches.installed()
