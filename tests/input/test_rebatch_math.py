"""Rebatch arithmetic: our one split algorithm against TensorFlow's tables (rebatch_math)."""

from __future__ import annotations

import pytest

from tests.golden.cases import case
from tpustrategy._src.input.split import piece_sizes, pipeline_share


@pytest.mark.parametrize("row", case("batch_sizes_for_worker_table")["output"], ids=lambda r: f"G{r['G']}W{r['W']}R{r['R']}w{r['worker']}")
def test_each_pipelines_pieces_of_a_global_batch_equal_tensorflows_first_chunks(row):
    g, w, r, i = row["G"], row["W"], row["R"], row["worker"]
    ours = piece_sizes(g, w * r)[i * r:(i + 1) * r]
    # TF's worker list is the global slot list rotated by i·R: its first R entries are
    # exactly this worker's replicas' pieces of one global batch.
    assert ours == row["batch_sizes"][:r]
    assert pipeline_share(g, w * r, w, i) == sum(row["batch_sizes"][:r])


def test_pieces_always_cover_the_batch_contiguously_and_differ_by_at_most_one():
    for b in range(0, 40):
        for r in range(1, 9):
            sizes = piece_sizes(b, r)
            assert sum(sizes) == b and max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_legacy_rebatch_agrees_with_ours_exactly_when_the_batch_divides():
    out = case("legacy_rebatch_dataset_examples")["output"]
    # range(8).batch(4), R=3 -> TF legacy [2,2,0] per batch; ours [2,1,1] (DESIGN §5).
    assert [len(p) for p in out["range(8).batch(4),R=3"][:3]] == [2, 2, 0]
    assert piece_sizes(4, 3) == [2, 1, 1]
    # range(14).batch(6), R=4: legacy [2,2,2,0]; ours [2,2,1,1]; the final batch of 2 agrees.
    legacy = [len(p) for p in out["range(14).batch(6),R=4"]]
    assert legacy[8:] == piece_sizes(2, 4) == [1, 1, 0, 0]
