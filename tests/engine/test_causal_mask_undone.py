"""A causal triangle the code built, undone where it was combined with another mask (shapetrace/engine/mask_parts.py
``from_triangles``, mask_patterns.py ``open_slices``, rules/masks.py ``causal_mask_undone``).

The Annotated Transformer's ``Batch.make_std_mask`` (harvardnlp/annotated-transformer) keeps a key where the padding
keep-mask *and* ``subsequent_mask`` keep it; written with ``|`` (tests/corpus/public54/annotated_decoder.py,
``std-mask-or``), an unpadded batch entry keeps every key and sees its future, while a padded one still hides the
padded keys after each query. On 9abc521 that bug was ``✓``. A prefix-LM's ``causal | prefix`` (T5's and UniLM's
prefix masks, tests/corpus/*/prefix_lm.py) opens only the prefix's square: no entry is left with nothing hidden."""

from __future__ import annotations

import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.public54 import annotated_decoder


class _Decoder(nn.Module):
    """One self-attention over ``[B, H, T, d_k]`` under a keep-mask made from the padding and a triangle:
    ``join`` is ``&`` (right), ``|`` (the slip) or ``prefix`` (a prefix-LM: the first ``prefix`` keys of each
    entry open to every query, joined with ``|`` on purpose)."""

    def __init__(self, join: str, prefix: int = 3):
        super().__init__()
        self.join, self.prefix = join, prefix

    def forward(self, q, k, v, keep_pad):                                            # (B, H, T, d_k), (B, T)
        t = q.shape[-2]
        causal = torch.triu(torch.ones(t, t), diagonal=1) == 0                         # (T, T): keep the past
        pad = keep_pad[:, None, None, :]                                               # (B, 1, 1, T)
        if self.join == "&":
            keep = pad & causal
        elif self.join == "|":
            keep = pad | causal
        else:
            keep = (causal | (torch.arange(t) < self.prefix)[None, :]) & pad          # (B, 1, T, T)
        scores = (q @ k.transpose(-2, -1)).masked_fill(keep == 0, -1e9)                # (B, H, T, T)
        return scores.softmax(-1) @ v                                                  # (B, H, T, d_k)


def _kinds(join: str) -> list[str]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    keep_pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])                   # entry 1 padded
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        for x in (q, k, v):
            shapetrace.name(x, "B H T d_k")
        _Decoder(join)(q, k, v, keep_pad)
    return [d.kind for d in t.diagnostics]


def test_a_triangle_joined_to_the_padding_with_or_is_undone_where_nothing_is_padded():
    assert _kinds("|") == ["causal-mask-undone"]


def test_the_triangle_joined_with_and_or_opened_for_a_prefix_is_no_finding():
    assert "causal-mask-undone" not in _kinds("&")
    assert "causal-mask-undone" not in _kinds("prefix")


def test_the_annotated_transformers_std_mask_written_with_or():
    dims = annotated_decoder.DIMS[0]
    bug = traced_build(annotated_decoder, "std-mask-or", dims, dependencies=True)
    found = [d for d in bug.diagnostics if d.kind == "causal-mask-undone"]
    assert [d.severity for d in found] == ["warning"]
    assert "in 1 batch entry it hides no key at all, while another entry's hidden keys change from query to " \
           "query" in found[0].message
    assert bug.report().verdict.line.startswith("! no errors, 1 warning")
    correct = traced_build(annotated_decoder, "", dims, dependencies=True)
    assert "causal-mask-undone" not in [d.kind for d in correct.diagnostics]
