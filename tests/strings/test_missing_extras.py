"""Without the `strings` extra, the ops that need it say which package and extra to install."""

from __future__ import annotations

import sys

import pytest

import tpustrategy.sparse as P
import tpustrategy.strings as S


def test_fast_hash_without_pyfarmhash_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "farmhash", None)  # `import farmhash` raises ImportError
    with pytest.raises(ImportError, match=r"(?s)pyfarmhash.*pip install 'tpustrategy\[strings\]'"):
        S.to_hash_bucket_fast(["a"], 10)
    with pytest.raises(ImportError, match=r"(?s)pyfarmhash.*pip install 'tpustrategy\[strings\]'"):
        P.cross_hashed([[b"a"]], 10)


def test_regex_without_google_re2_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "re2", None)
    with pytest.raises(ImportError, match=r"(?s)google-re2.*pip install 'tpustrategy\[strings\]'"):
        S.regex_full_match(["a"], "a pattern only this test compiles")


def test_the_hashes_that_need_no_extra_still_work_without_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "farmhash", None)
    assert S.to_hash_bucket(["a", "b", "c"], 10).tolist() == [8, 0, 7]
    assert S.to_hash_bucket_strong(["a", "b", "c"], 10, key=[98765, 132]).tolist() == [4, 2, 8]
