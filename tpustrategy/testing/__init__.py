"""Test helpers for code built on tpustrategy."""

from tpustrategy._src.testing import assert_iterator_checkpointing as assert_iterator_checkpointing
