"""Which pattern a mask's hidden keys make, where no side was read (shapetrace/engine/mask_patterns.py): documents
packed side by side are read, and a pattern none of the readers knows leaves the verdict unproven. The corpus sweep
at other sizes (/work/notes/sweep_sizes.py) found public15 blip2_qformer ``mask-query-text-swapped`` (after
salesforce/LAVIS's Q-Former: the block ``mask[:, :, :Q, Q:] = 0`` written ``mask[:, :, Q:, :Q] = 0``, the text kept
from the learnt queries) ``✓`` at D = 64 on ab16b63: its mask hides keys in a pattern no rule reads, and nothing
said it was not checked."""

from __future__ import annotations

import torch

import shapetrace
from shapetrace.engine.mask_patterns import packed_documents, unread_pattern

Q, T = 3, 4
L = Q + T


def _prefix_mask(swapped: bool) -> torch.Tensor:
    """BLIP-2's self-attention mask over [queries; text] (1 sees, 0 hidden): causal text that sees every query,
    queries that see each other and no text; ``swapped``: the reported slip."""
    mask = torch.tril(torch.ones(L, L))                                          # (L, L)
    mask[:, :Q] = 1
    if swapped:
        mask[Q:, :Q] = 0
    else:
        mask[:Q, Q:] = 0
    return mask


def _traced(mask: torch.Tensor):
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, L, 8), torch.randn(2, 4, L, 8)
    with torch.no_grad(), shapetrace.trace(dims=f"B=2 T={L} D=32 H=4") as t:
        shapetrace.name(q, "B H T d_k")
        shapetrace.name(k, "B H T d_k")
        scores = q @ k.transpose(-1, -2)                                         # (B, H, T, T)
        (scores + (1.0 - mask) * -10000.0).softmax(-1)
    return t


def test_a_mask_of_a_pattern_no_reader_knows_leaves_the_verdict_unproven():
    line = _traced(_prefix_mask(swapped=True)).report().verdict.line
    assert line[0] == "?"
    assert "not proven: #2 add's mask hides keys in a pattern that is no causal triangle, window, padding or " \
           "packing of documents, so which keys each query should see was not checked" in line


def test_the_prefix_mask_as_written_is_read_and_says_nothing_of_it():
    line = _traced(_prefix_mask(swapped=False)).report().verdict.line
    assert "in a pattern that is no causal triangle" not in line


def _rows(seen: torch.Tensor) -> torch.Tensor:
    return ~seen.bool()[None]                                                    # (1, n, n): True where hidden


def test_documents_packed_side_by_side_are_read_causal_or_whole():
    doc = torch.tensor([0, 0, 0, 1, 1, 2])                                       # (n,): Megatron's reset_attention_mask
    same = doc[:, None] == doc[None, :]                                          # (n, n)
    assert packed_documents(_rows(same & torch.ones(6, 6).tril().bool())) == {"packed": "causal"}
    assert packed_documents(_rows(same)) == {"packed": "full"}
    assert packed_documents(_rows(torch.ones(6, 6).tril().bool())) == {}         # one document: a causal triangle
    assert unread_pattern({"hides_side": "other"}, _rows(same)) == {}


def test_padding_alone_is_no_unread_pattern():
    keep = torch.ones(6, 6, dtype=torch.bool)
    keep[:, 4:] = False                                                          # two padded keys
    assert unread_pattern({"hides_side": "other"}, _rows(keep)) == {}
    scattered = torch.ones(6, 6, dtype=torch.bool)
    scattered[1, 3] = scattered[4, 0] = False                                    # two holes, no pattern
    assert unread_pattern({"hides_side": "other"}, _rows(scattered)) == {"pattern_unread": True}
    assert unread_pattern({"hides_side": "other", "window": 3}, _rows(scattered)) == {}   # (another reader's)
