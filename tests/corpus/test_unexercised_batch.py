"""A view that puts the batch's one entry against memory order (issue 33: no check mark a run cannot back).

At B = 1 the batch axis has one entry, and a view may place it anywhere among the other axes and hold the
same elements: BART's scores ``[bsz·H, T, S]`` (a batch-major fold) viewed ``(H, bsz, T, S)`` compute the
right thing at a batch of one and mix sequences at two. The size the code passes says where it puts the
batch (``bsz`` read from the input, :class:`~shapetrace.engine.sizes.SizeOf`); the fold's pieces say where
memory holds it (``[B, H, T, d]`` viewed ``(B * H, T, d)`` keeps the batch's entry ahead of the heads). A
view whose read size lands on the other side of another axis's elements is a ``batch-unexercised`` note and
``?``; the same code in memory order stays ``✓``.

A size may also be read back from a fold: Bloom's ``batch_size_and_num_heads // num_heads`` is the fold's
piece that grows with it (:class:`~shapetrace.engine.sizes.SizeQuot`), the batch.

Sources: transformers' BART (tests/corpus/public9/bart.py), fairseq's ``MultiheadAttention``
(tests/corpus/public7/fairseq_mha.py), transformers' BLOOM (``_merge_heads``), and
jadore801120/attention-is-all-you-need-pytorch's first ``MultiHeadAttention`` (transformer/SubLayers.py,
2018: ``q.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k) # (n*b) x lq x dk`` and
``output.view(n_head, sz_b, len_q, d_v).permute(1, 2, 0, 3)``).
"""

from __future__ import annotations

import importlib
import sys

import pytest
import torch
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.public7 import fairseq_mha
from tests.corpus.public9 import bart

ONE = "B=1 T=6 D=32 H=4"
TWO = "B=2 T=6 D=32 H=4"


class HeadsMajorAttention(nn.Module):
    """jadore801120's ``MultiHeadAttention`` (2018): heads folded ahead of the batch, ``(n*b) x lq x dk``,
    and unfolded ``view(n_head, sz_b, len_q, d_v)``. ``bug``: unfolded batch-first, ``view(sz_b, n_head,
    len_q, d_v).permute(0, 2, 1, 3)``, the order of a batch-major fold (each "sequence" a run of heads)."""

    def __init__(self, d_model: int, n_head: int, bug: str = ""):
        super().__init__()
        self.n_head, self.d_k, self.bug = n_head, d_model // n_head, bug
        self.w_qs, self.w_ks, self.w_vs = (nn.Linear(d_model, d_model) for _ in range(3))
        self.fc = nn.Linear(d_model, d_model)

    def forward(self, x):
        n_head, d_k = self.n_head, self.d_k
        sz_b, len_q, _ = x.size()
        q = self.w_qs(x).view(sz_b, len_q, n_head, d_k)  # (B, T, H, d_k)
        k = self.w_ks(x).view(sz_b, len_q, n_head, d_k)  # (B, T, H, d_k)
        v = self.w_vs(x).view(sz_b, len_q, n_head, d_k)  # (B, T, H, d_k)
        q = q.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k)  # (H·B, T, d_k)
        k = k.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k)  # (H·B, T, d_k)
        v = v.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k)  # (H·B, T, d_k)
        attn = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / d_k**0.5, dim=2)  # (H·B, T, T)
        output = torch.bmm(attn, v)  # (H·B, T, d_k)
        if self.bug == "unfold-batch-first":
            output = output.view(sz_b, n_head, len_q, d_k).permute(0, 2, 1, 3)  # bug: the fold is heads-major
        else:
            output = output.view(n_head, sz_b, len_q, d_k).permute(1, 2, 0, 3)  # (B, T, H, d_k)
        return self.fc(output.contiguous().view(sz_b, len_q, -1))  # (B, T, D)


class BloomMergeAttention(nn.Module):
    """transformers' BLOOM (models/bloom/modeling_bloom.py, ``BloomAttention``) without its ALiBi: heads folded
    batch-major, ``transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)``, and
    ``_merge_heads`` reading the batch back as ``batch_size_and_num_heads // self.num_heads``. ``bug``:
    ``_merge_heads`` unfolds heads-first, ``view(num_heads, batch_size, T, d).permute(1, 2, 0, 3)``."""

    def __init__(self, hidden_size: int, n_head: int, bug: str = ""):
        super().__init__()
        self.num_heads, self.head_dim, self.bug = n_head, hidden_size // n_head, bug
        self.query_key_value = nn.Linear(hidden_size, 3 * hidden_size)
        self.dense = nn.Linear(hidden_size, hidden_size)

    def _merge_heads(self, x):
        batch_size_and_num_heads, seq_length, _ = x.shape
        batch_size = batch_size_and_num_heads // self.num_heads
        if self.bug == "merge-heads-first":
            x = x.view(self.num_heads, batch_size, seq_length, self.head_dim).permute(1, 2, 0, 3)  # bug
        else:
            x = x.view(batch_size, self.num_heads, seq_length, self.head_dim).permute(0, 2, 1, 3)  # (B, T, H, d_k)
        return x.reshape(batch_size, seq_length, self.num_heads * self.head_dim)  # (B, T, D)

    def forward(self, hidden_states):
        batch_size, q_length, _ = hidden_states.shape
        fused = self.query_key_value(hidden_states).view(batch_size, q_length, self.num_heads, 3, self.head_dim)
        q, k, v = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]  # (B, T, H, d_k) x3
        q = q.transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)  # (B·H, T, d_k)
        k = k.permute(0, 2, 3, 1).reshape(batch_size * self.num_heads, self.head_dim, q_length)  # (B·H, d_k, T)
        v = v.transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)  # (B·H, T, d_k)
        probs = torch.softmax(torch.bmm(q, k) / self.head_dim**0.5, dim=-1)  # (B·H, T, T)
        return self.dense(self._merge_heads(torch.bmm(probs, v)))  # (B, T, D)


def _bloom(bug: str, dims: str) -> shapetrace.Trace:
    B = int(dims.split()[0].split("=")[1])
    torch.manual_seed(0)
    model, x = BloomMergeAttention(32, 4, bug), torch.randn(B, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    return t


def _heads_major(bug: str, dims: str) -> shapetrace.Trace:
    B = int(dims.split()[0].split("=")[1])
    torch.manual_seed(0)
    model, x = HeadsMajorAttention(32, 4, bug), torch.randn(B, 6, 32)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        model(x)
    return t


def _notes(t: shapetrace.Trace) -> list[tuple[str, int]]:
    return [(d.kind, d.event) for d in t.diagnostics if d.severity == "note"]


def _verdict(t: shapetrace.Trace) -> tuple[str, list[str]]:
    return t.report().verdict.line[0], [d.kind for d in t.diagnostics if d.severity in ("error", "warning")]


def test_bart_in_memory_order_at_a_batch_of_one_keeps_its_check_mark():
    t = traced_build(bart, "", ONE)
    assert (t.report().verdict.line[0], _notes(t)) == ("✓", [])


def test_fairseq_scores_viewed_heads_first_at_a_batch_of_one_say_the_batch_was_not_exercised():
    # fairseq folds [T, B, D] batch-major (view(tgt_len, bsz * H, d)); the bug views the scores (H, bsz, T, S):
    # it raises unless B = H, and at B = 1 it runs and was `✓`.
    t = traced_build(fairseq_mha, "scores-heads-first", ONE)
    assert _verdict(t) == ("?", [])
    assert _notes(t) == [("batch-unexercised", 14)]
    note = next(d for d in t.diagnostics if d.kind == "batch-unexercised")
    assert note.message.startswith("view #14 is given a size read from B, which has one entry here, and places it "
                                   "on the other side of H than memory holds it: with one entry both orders hold "
                                   "the same elements, with more this view would regroup them (B and H "
                                   "interleaved), so this run could not check it.")


def test_fairseq_in_memory_order_at_a_batch_of_one_keeps_its_check_mark():
    t = traced_build(fairseq_mha, "", ONE)
    assert (t.report().verdict.line[0], _notes(t)) == ("✓", [])


@pytest.mark.parametrize("dims", [ONE, TWO])
def test_a_heads_major_fold_unfolded_in_its_own_order_keeps_its_check_mark(dims):
    t = _heads_major("", dims)
    assert (_verdict(t), _notes(t)) == (("✓", []), [])


def test_a_heads_major_fold_unfolded_batch_first_at_a_batch_of_one_is_not_proven():
    t = _heads_major("unfold-batch-first", ONE)
    assert (_verdict(t), _notes(t)) == (("?", []), [("batch-unexercised", 19)])
    assert "not proven: a view places an axis of one entry (the batch) against memory order, which only a run " \
        "with more entries can check" in t.report().verdict.line


def test_a_heads_major_fold_unfolded_batch_first_is_an_error_where_the_batch_has_two_entries():
    # the twin run the note asks for: at B = 2 the names show the bug
    t = _heads_major("unfold-batch-first", TWO)
    assert (_verdict(t), _notes(t)) == (("✗", ["projection-over-tokens"]), [])


@pytest.mark.parametrize("dims", [ONE, TWO])
def test_bloom_merging_heads_in_memory_order_keeps_its_check_mark(dims):
    t = _bloom("", dims)
    assert (_verdict(t), _notes(t)) == (("✓", []), [])


def test_bloom_merging_heads_first_at_a_batch_of_one_is_not_proven():
    # the batch read back as batch_size_and_num_heads // num_heads (a SizeQuot of the fold's size): at B = 1 the
    # fold's one batch entry, held ahead of the heads, placed after them
    t = _bloom("merge-heads-first", ONE)
    assert (_verdict(t), _notes(t)) == (("?", []), [("batch-unexercised", 14)])
    assert next(d for d in t.diagnostics if d.kind == "batch-unexercised").message.startswith(
        "view #14 is given a size read from B, which has one entry here, and places it on the other side of H")


def test_bloom_merging_heads_first_is_an_error_where_the_batch_has_two_entries():
    assert _verdict(_bloom("merge-heads-first", TWO)) == ("✗", ["projection-over-tokens"])


#: tests/styles whose correct code is `✓` at B = 1 (nanoGPT, minGPT, GPT-NeoX, T5, lucidrains, torch's own
#: nn.MultiheadAttention seq-first...): a batch of one placed in memory order is no finding
STYLES_CHECKED_AT_ONE = ["alibi", "cross_attention", "linear_attention", "lucidrains", "mha_seq_first", "mingpt",
                         "mqa", "nanogpt", "neox", "rope", "sdpa_gqa", "seq_first", "t5"]


@pytest.mark.parametrize("name", STYLES_CHECKED_AT_ONE)
def test_correct_styles_at_a_batch_of_one_keep_their_check_mark(name):
    module = importlib.import_module(f"tests.styles.{name}")
    sizes = {**module.SIZES[0], "B": 1}
    model, inputs = module.build(dict(sizes))
    with torch.no_grad(), shapetrace.trace(dims=sizes) as t:
        for x, names in zip(inputs, getattr(module, "NAMES", ()) or ()):
            shapetrace.name(x, names)   # (the seq-first styles name their [T, B, D] input)
        model(*inputs)
    assert (t.report().verdict.line[0], _notes(t)) == ("✓", [])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
