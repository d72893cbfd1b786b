"""shapetrace/engine/rules/unexercised.py: a mask that hid nothing on this input.

On af0e286 (main) Canine's local attention (tests/corpus/public17/canine_local.py), one line run per chunk of
characters with only the last chunk padded, was ``?`` ("a mask hid nothing on this input") for the chunks
before it, though the same code hid the padding of the last chunk; it is now ``✓``. A shared attention function
given a mask made elsewhere, which hid nothing, keeps its note."""

from __future__ import annotations

import torch

import shapetrace

DIMS = "B=2 T=12 D=32 H=4"


def _attend(x, mask):                                                      # (B, t, D), (B, t, t)
    q = x.view(x.shape[0], x.shape[1], 4, 8).transpose(1, 2)                # (B, H, t, d_k)
    scores = q @ q.transpose(-1, -2)                                       # (B, H, t, t)
    return (scores + (1.0 - mask.unsqueeze(1)) * -1e9).softmax(-1) @ q


def _notes(t):
    return [d.kind for d in t.diagnostics if d.severity == "note" and d.kind == "mask-unexercised"]


def test_chunks_run_by_one_line_are_checked_where_one_chunk_hid_its_padding():
    torch.manual_seed(0)
    x, keep = torch.randn(2, 12, 32), torch.ones(2, 12)
    keep[-1, -3:] = 0.0
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(keep, "B T")
        mask = torch.ones(2, 12, 1) * keep.view(2, 1, 12)                   # (B, T, T)
        outs = [_attend(x[:, s:s + 4], mask[:, s:s + 4, s:s + 4]) for s in range(0, 12, 4)]
        torch.cat(outs, dim=2)
    assert _notes(t) == []


def test_a_shared_function_given_a_full_mask_made_elsewhere_keeps_its_note():
    torch.manual_seed(0)
    x, keep = torch.randn(2, 12, 32), torch.ones(2, 12)
    keep[-1, -3:] = 0.0
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(keep, "B T")
        padded = keep.view(2, 1, 12).expand(2, 12, 12)                       # (B, T, T): hides the padding
        full = torch.ones(2, 12).view(2, 1, 12).expand(2, 12, 12)            # (B, T, T): hides nothing
        _attend(x, padded)
        _attend(x, full)
    assert _notes(t) == ["mask-unexercised"]
