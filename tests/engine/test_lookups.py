"""shapetrace/engine/lookups.py: two tables looked up by one ids tensor and summed (HKU-MedAI/MGCA issue #13,
tests/corpus/reports13/mgca_token_type_positions.py ``token-type-as-positions``, ``✓`` on b2f62da)."""

from __future__ import annotations

import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import verdict_line


class _Embeddings(nn.Module):
    """BERT's three lookups added per token; ``positions``: which ids the position table reads."""

    def __init__(self, positions: str):
        super().__init__()
        self.positions = positions
        self.word, self.types, self.position = nn.Embedding(10, 8), nn.Embedding(2, 8), nn.Embedding(6, 8)

    def forward(self, input_ids, token_type_ids):                                       # (B, T), (B, T)
        if self.positions == "not-summed":   # (each table's rows used apart: T5's per-layer bias tables)
            return self.word(input_ids) + self.types(token_type_ids) * self.position(token_type_ids).sigmoid()
        ids = token_type_ids if self.positions == "token-types" else torch.arange(input_ids.shape[1])[None]
        return self.word(input_ids) + self.types(token_type_ids) + self.position(ids)   # (B, T, D)


def _traced(positions: str):
    ids, types = torch.arange(10).reshape(2, 5), torch.zeros(2, 5, dtype=torch.long)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=5 D=8") as t:
        _Embeddings(positions)(ids, types)
    return t


def test_a_position_table_read_by_the_token_types_is_not_checked():
    t = _traced("token-types")
    assert t.analysis().ids_read_twice == ((1, 2),)
    assert verdict_line(t)[0] == "?"
    assert [(d.kind, d.message) for d in t.diagnostics] == [("ids-read-by-two-tables", (
        "embedding #2 (position) reads the same ids [B=2, T=5] as embedding #1 (types), and the two lookups are "
        "added: two tables read by one ids tensor are one table of their sums, so one of them was likely meant to "
        "read other ids (positions: an arange over the tokens); not checked."))]


def test_tables_read_by_their_own_ids_or_not_summed_are_no_pair():
    for positions in ("arange", "not-summed"):
        t = _traced(positions)
        assert t.analysis().ids_read_twice == (), positions
        assert verdict_line(t)[0] == "✓", positions
