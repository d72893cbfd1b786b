"""Scores, masks and packed rows put together from blocks, and a mask written after the softmax has read.

* LUKE's entity-aware attention (huggingface/transformers ``LukeSelfAttention``; tests/corpus/public52/
  luke_entity_aware.py): four query projections, four score blocks joined by ``cat`` into one ``[T+S, T+S]``
  score matrix. The entity-to-word block ``e2w_query(entities) @ key(words)ᵀ`` is ``[..., S, T]`` with the
  entities as its queries: the key projection's output on the columns says so, and the names ``S``, ``T`` do not
  outrank it. Blocks of queries joined are queries, blocks of keys joined are keys, so a padding mask laid on the
  joined scores' query axis is found; the words' mask joined with the entities' (``cat([mask, entity_mask])``)
  is still the words' padding mask, so the padding contract is measured through the join.
* torchtitan's varlen attention (pytorch/torchtitan issue #2223; tests/corpus/reports37/
  torchtitan_varlen_extra_transpose.py): the packed ``B*T`` rows cut into documents and the documents' outputs
  joined back in order are ``B*T`` again, so the view back to ``(bs, seqlen, H, d)`` is ``[B, T, H, d_k]`` (it was
  a join ``B*T[0:6]+B*T[6:12]`` that the view cut into unnamed pieces, and a note called the merge of the heads
  nonstandard). Out of order, the join is a permutation of the rows, not the fold.
* lucidrains/memory-compressed-attention (tests/corpus/public52/memory_compressed.py): ``attn =
  dots.softmax(dim=-1)`` before ``dots.masked_fill_(mask, ...)``: the mask is written into scores the softmax has
  already read and nothing reads after.
"""

from __future__ import annotations

import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import error_kinds, traced_build
from tests.corpus.public52 import luke_entity_aware, memory_compressed
from tests.corpus.reports37 import torchtitan_varlen_extra_transpose as varlen

LUKE_DIMS = "B=2 T=6 D=32 H=4 S=3"


def _kinds(t) -> list[str]:
    return [d.kind for d in t.diagnostics]


def test_the_entity_to_word_block_is_queries_by_keys_whatever_its_names():
    t = traced_build(luke_entity_aware, "", LUKE_DIMS, dependencies=True)
    blocks = [e for e in t.events if e.op == "matmul" and e.projections[1:] == ("k",)]
    assert [e.outputs[0].dims[-2:] for e in blocks] == [("T", "T"), ("T", "S"), ("S", "T"), ("S", "S")]
    assert _kinds(t) == []
    assert t.report().verdict.line.startswith("✓ checked all 43 ops")


def test_joined_blocks_of_queries_and_keys_keep_their_roles():
    t = traced_build(luke_entity_aware, "", LUKE_DIMS)
    joins = [e for e in t.events if e.op == "cat" and len(e.outputs[0].shape) == 4]
    assert [e.outputs[0].dims for e in joins] == [("B", "H", "T", "T+S"), ("B", "H", "S", "T+S"),
                                                  ("B", "H", "T+S", "T+S")]
    assert [[a.role for a in e.outputs[0].axes[-2:]] for e in joins] == [["query", "key"]] * 3


def test_a_padding_mask_on_the_joined_queries_is_found_by_name_and_on_the_values():
    t = traced_build(luke_entity_aware, "mask-on-queries", LUKE_DIMS, dependencies=True)
    assert error_kinds(t) == ["mask-wrong-axis"]
    message = t.diagnostics[0].message
    assert "broadcasts the mask [B=2, 1, T+S=9, 1] against the scores [B=2, H=4, T+S=9, T+S=9]" in message
    assert "the output at real token 0 of batch entry 1 changes when only the padding of that entry changes" in message


def test_the_words_mask_joined_with_the_entities_mask_is_measured_as_padding():
    t = traced_build(luke_entity_aware, "", LUKE_DIMS, dependencies=True)
    line = t.report().verdict.line
    assert "held on the values: batch entries stay apart, each token depends on itself, padding stays unread" in line
    assert "never reaches a mask" not in line


def test_document_cuts_joined_in_order_are_the_packed_rows_again():
    t = traced_build(varlen, "", "B=2 T=6 D=32 H=4", dependencies=True)
    join = next(e for e in t.events if e.op == "cat")
    assert join.outputs[0].dims == ("B*T", "H", "d_k")
    assert [e.outputs[0].dims for e in t.events if e.index > join.index and e.op == "view"] == [
        ("B", "T", "H", "d_k"), ("B", "T", "D")]
    assert _kinds(t) == []
    assert t.report().verdict.line.startswith("✓ checked all 35 ops")


def test_the_extra_transpose_after_the_documents_are_joined_is_found():
    t = traced_build(varlen, "extra-transpose", "B=2 T=6 D=32 H=4", dependencies=True)
    assert error_kinds(t) == ["mixed-axis"]


class _Packed(nn.Module):
    """The packed rows of two documents cut and joined: in order, or the second document first."""

    def __init__(self, swapped: bool):
        super().__init__()
        self.swapped = swapped

    def forward(self, x):                                                             # (B, T, D)
        b, t, d = x.shape
        rows = x.reshape(b * t, d)                                                    # (B*T, D)
        parts = [rows[:t], rows[t:]]
        joined = torch.cat(parts[::-1] if self.swapped else parts, dim=0)             # (B*T, D)
        return joined.view(b, t, d)                                                   # (B, T, D)


def _joined_dims(swapped: bool):
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        _Packed(swapped)(torch.randn(2, 6, 32))
    return next(e for e in t.events if e.op == "cat").outputs[0].dims


def test_cuts_of_a_fold_joined_out_of_order_are_not_the_fold():
    assert _joined_dims(False) == ("B*T", "D")
    assert _joined_dims(True)[0] != "B*T"


def test_a_mask_written_after_the_softmax_read_the_scores_is_found():
    t = traced_build(memory_compressed, "mask-after-softmax", "B=2 T=6 D=32 H=4", dependencies=True)
    assert error_kinds(t) == ["mask-after-softmax"]
    found = t.diagnostics[0]
    assert found.message.startswith("masked_fill_ #29 hides scores [B=2, H=4, T=6, 1+N=3] in place after softmax #21 "
                                    "has read them, and nothing reads them after")
    assert "mask-after-softmax" not in _kinds(traced_build(memory_compressed, "", "B=2 T=6 D=32 H=4"))


class _TwoSoftmaxes(nn.Module):
    """An entropy of the unmasked scores read first, then the masked scores normalised again: no finding."""

    def forward(self, q, k):                                                          # (B, H, T, d)
        scores = q @ k.transpose(-2, -1)                                              # (B, H, T, T)
        entropy = -(scores.softmax(-1) * scores.log_softmax(-1)).sum(-1)              # (B, H, T)
        t = scores.shape[-1]
        scores.masked_fill_(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return scores.softmax(-1) @ k, entropy                                        # (B, H, T, d)


def test_scores_masked_after_one_softmax_and_read_by_another_are_no_finding():
    with torch.no_grad(), shapetrace.trace(dims="B=2 H=4 T=6 d_k=8") as t:
        _TwoSoftmaxes()(torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8))
    assert "mask-after-softmax" not in _kinds(t)


class _CoAttention(nn.Module):
    """ViLBERT's co-attention (facebookresearch/vilbert-multi-task ``BertBiAttention``: the text queries score the
    image keys and the image queries the text keys, ``matmul(query2, key1ᵀ)`` and ``matmul(query1, key2ᵀ)``),
    with projections named per stream as lucidrains/bidirectional-cross-attention names them (``context_to_qk``),
    names no projection vocabulary knows."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.text_to_q, self.text_to_k, self.text_to_v = (nn.Linear(d, d) for _ in range(3))
        self.image_to_q, self.image_to_k, self.image_to_v = (nn.Linear(d, d) for _ in range(3))

    def _split(self, x):
        b, n, d = x.shape
        return x.view(b, n, self.heads, d // self.heads).transpose(1, 2)              # (B, H, n, d_k)

    def _attend(self, scores, v):
        out = scores.softmax(-1) @ v                                                  # (B, H, n, d_k)
        return out.transpose(1, 2).flatten(2)                                         # (B, n, D)

    def forward(self, text, image):                                                   # (B, T, D), (B, S, D)
        tq, tk, tv = (self._split(p(text)) for p in (self.text_to_q, self.text_to_k, self.text_to_v))
        iq, ik, iv = (self._split(p(image)) for p in (self.image_to_q, self.image_to_k, self.image_to_v))
        text_scores = tq @ ik.transpose(-2, -1)                                       # (B, H, T, S)
        image_scores = iq @ tk.transpose(-2, -1)                                      # (B, H, S, T)
        return self._attend(text_scores, iv), self._attend(image_scores, tv)


def test_two_streams_each_scoring_the_other_are_no_swap_by_their_names():
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 S=5 D=32 H=4") as t:
        _CoAttention()(torch.randn(2, 6, 32), torch.randn(2, 5, 32))
    scores = [e.outputs[0].dims[-2:] for e in t.events if e.op == "matmul" and e.outputs[0].dims[-1] != "d_k"]
    assert scores == [("T", "S"), ("S", "T")]
    assert "query-key-swapped" not in _kinds(t)
