"""engine/grouped_positions: a mask made from positions grouped by floor division or a remainder (chunks, blocks,
strides) is not checked by any name, so the verdict is ``?`` with the note ``positions-grouped``, never ``✓``.

The transformers Llama 4 chunked-attention left-padding report (tests/corpus/reports15/llama4_chunked_left_pad.py):
chunk ids read from the padded column, ``kv_idx // C`` without the row's offset, keep every name and shape."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import shapetrace


def _attention(x, mask_of):
    B, T, D = x.shape
    q = k = v = x.view(B, T, 4, D // 4).transpose(1, 2)                         # (B, H, T, d_k)
    q_idx, kv_idx = torch.arange(T)[:, None], torch.arange(T)[None, :]           # (T, 1), (1, T)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask_of(q_idx, kv_idx))
    return out.transpose(1, 2).reshape(B, T, D)                                  # (B, T, D)


def _traced(mask_of):
    x = torch.randn(2, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32 H=4") as t:
        shapetrace.name(x, "B T D")
        _attention(x, mask_of)
    return t


def test_a_chunked_mask_leaves_its_chunks_unchecked():
    """Fails on 6527aa1: ``✓ checked all 7 ops``, the chunks taken on trust."""
    t = _traced(lambda q, k: (q // 3 == k // 3) & (k <= q))
    assert [d.kind for d in t.diagnostics] == ["positions-grouped"]
    assert t.report().verdict.line.startswith(
        "? checked 7 of 7 ops that could carry a layout bug; not proven: which positions a chunked, blocked or "
        "strided mask groups together")


def test_a_strided_mask_by_a_remainder_is_unchecked_too():
    t = _traced(lambda q, k: ((q - k) % 2 == 0) & (k <= q))
    assert [d.kind for d in t.diagnostics] == ["positions-grouped"]


def test_a_causal_mask_from_the_same_positions_groups_nothing():
    """The control: ``k <= q`` compares positions without grouping them: no note, ``✓`` as on 6527aa1."""
    t = _traced(lambda q, k: k <= q)
    assert t.diagnostics == []
    assert t.report().verdict.mark == "✓"
