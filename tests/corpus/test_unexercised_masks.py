"""A mask that hid nothing on the traced input earns no check mark unless its layout proves it (issue 33 item 1).

A key padding mask laid on the queries instead of the keys hides whole query rows; on an input where
nothing is padded (one sequence, or every sequence full) it hides nothing, and its output is the right
one's. Before, fairseq's ``key_padding_mask.unsqueeze(1).unsqueeze(3)`` at B = 1 ended ``✓``: the view
``(B, H, T, S)`` of the scores lost their query and key roles (the batch's one entry sat beside the tokens,
``T·B``), so the mask rule never read it, and the values could not show it. Now a view keeps the roles of
an axis whatever entries of one it drops (:func:`.axis_reshape._carried_role`), and, for every mask kind
the engine reads on the values (``masked_fill``, ``torch.where`` with a large negative, a mask added to the
scores, SDPA's ``attn_mask``, a table multiplied onto them), a mask whose every value passed counts as
checked only where its layout proves it lines up with the keys (broadcast over the queries, not over the
keys) or, a table over both, its names do; else a ``mask-unexercised`` note and ``?``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import shapetrace
from tests.corpus.helpers import traced_build
from tests.corpus.public7 import fairseq_mha


def _outcome(t) -> tuple[str, tuple[str, ...]]:
    return t.report().verdict.mark, tuple(d.kind for d in t.diagnostics if d.severity != "note")


def _notes(t) -> list[str]:
    return [d.kind for d in t.diagnostics if d.severity == "note"]


# facebookresearch/fairseq fairseq/modules/multihead_attention.py (tests/corpus/public7/fairseq_mha.py):
# at B = 1 the one sequence is full, so its key padding mask hides nothing.
@pytest.mark.parametrize("bug,want", [("", ("✓", ())), ("pad-on-queries", ("✗", ("mask-wrong-axis",)))])
def test_fairseq_padding_on_the_queries_at_a_batch_of_one(bug, want):
    t = traced_build(fairseq_mha, bug, "B=1 T=6 D=32 H=4")
    assert _outcome(t) == want
    masked = next(e for e in t.events if e.op == "masked_fill")
    assert [a.role for a in masked.inputs[0].axes] == [None, None, "query", "key"]
    assert masked.inputs[0].dims == ("B", "H", "T", "T")


class ExtendedMaskAttention(nn.Module):
    """transformers' BERT: ``get_extended_attention_mask`` turns ``attention_mask [B, S]`` (1 keep, 0 pad) into
    ``(1.0 - attention_mask[:, None, None, :]) * torch.finfo(dtype).min`` and ``BertSelfAttention`` adds it to
    ``attention_scores``; ``on_queries``: ``attention_mask[:, None, :, None]``, the padding on the queries."""

    def __init__(self, dim: int, heads: int, on_queries: bool = False):
        super().__init__()
        self.heads, self.hd, self.on_queries = heads, dim // heads, on_queries
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.hd).permute(0, 2, 1, 3)       # (B, H, T, d_k)

    def forward(self, x, attention_mask):
        B, T, D = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.hd)               # (B, H, T, S)
        mask = attention_mask[:, None, :, None] if self.on_queries else attention_mask[:, None, None, :]
        scores = scores + (1.0 - mask) * torch.finfo(scores.dtype).min       # (B, H, T, S)
        out = scores.softmax(dim=-1) @ v                                    # (B, H, T, d_k)
        return out.permute(0, 2, 1, 3).reshape(B, T, D)                     # (B, T, D)


class SdpaBoolMask(nn.Module):
    """torch's ``F.scaled_dot_product_attention`` with a boolean ``attn_mask`` (True: attend), built as
    transformers' SDPA path does from a padding mask ``[B, S]``: ``mask[:, None, None, :]``; ``on_queries``:
    ``mask[:, None, :, None]``."""

    def __init__(self, dim: int, heads: int, on_queries: bool = False):
        super().__init__()
        self.heads, self.on_queries = heads, on_queries
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x, keep):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d_k)
        mask = keep[:, None, :, None] if self.on_queries else keep[:, None, None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)       # (B, H, T, d_k)
        return self.proj(out.transpose(1, 2).reshape(B, T, D))              # (B, T, D)


SIZES = ["B=1 T=6 D=32 H=4", "B=2 T=6 D=32 H=4", "B=3 T=5 D=24 H=2", "B=4 T=4 D=16 H=4"]


def _trace_padded(model_cls, on_queries: bool, dims: str, padded: bool, dtype=torch.float32):
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    B, T, D, H = (sizes[k] for k in "BTDH")
    torch.manual_seed(0)
    model, x = model_cls(D, H, on_queries).eval(), torch.randn(B, T, D)
    mask = torch.ones(B, T, dtype=dtype)
    if padded:
        mask[0, -2:] = 0
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(mask, "B T")
        model(x, mask)
    return t


@pytest.mark.parametrize("dims", SIZES)
def test_an_additive_mask_on_the_queries_that_hides_nothing_is_not_checked(dims):
    """Every sequence full: the extended mask is all zeros. On the queries ``[B, 1, T, 1]``: ``?`` (it was
    ``✓``); on the keys ``[B, 1, 1, T]`` its layout proves it: ``✓``, no note."""
    t = _trace_padded(ExtendedMaskAttention, True, dims, padded=False)
    assert _outcome(t) == ("?", ())
    assert _notes(t) == ["mask-unexercised"]
    note = next(d for d in t.diagnostics if d.kind == "mask-unexercised")
    B, T = (int(kv.split("=")[1]) for kv in dims.split()[:2])
    assert note.message.startswith(f"add #{note.event} puts the mask [B={B}, 1, T={T}, 1] onto the scores "
                                   f"[B={B}, H=")
    assert "not proven: a mask hid nothing on this input, and neither its layout nor its names prove that it lines " \
        "up with the keys; no errors" in t.report().verdict.line
    twin = _trace_padded(ExtendedMaskAttention, False, dims, padded=False)
    assert _outcome(twin) == ("✓", ()) and _notes(twin) == []


@pytest.mark.parametrize("dims", SIZES[1:])
def test_an_additive_mask_that_hides_a_key_is_read_as_before(dims):
    """With a padded key the same mask hides something: on the queries it is an error, on the keys ``✓``."""
    assert _outcome(_trace_padded(ExtendedMaskAttention, True, dims, padded=True))[0] == "✗"
    t = _trace_padded(ExtendedMaskAttention, False, dims, padded=True)
    assert _outcome(t) == ("✓", ()) and _notes(t) == []


@pytest.mark.parametrize("dims", SIZES)
def test_an_sdpa_mask_that_attends_everywhere(dims):
    """SDPA's boolean ``attn_mask`` all True: on the keys ``[B, 1, 1, T]`` its layout proves it (``✓``, no note); on
    the queries ``[B, 1, T, 1]`` its position proves it wrong, as before (``✗``)."""
    twin = _trace_padded(SdpaBoolMask, False, dims, padded=False, dtype=torch.bool)
    assert _outcome(twin) == ("✓", ()) and _notes(twin) == []
    t = _trace_padded(SdpaBoolMask, True, dims, padded=False, dtype=torch.bool)
    assert _outcome(t) == ("✗", ("mask-wrong-axis",))


class SdpaLiteralMask(nn.Module):
    """A square boolean ``attn_mask`` of literal sizes (``torch.ones(L, S, dtype=torch.bool)``, as
    transformers' ``AttentionMaskConverter`` makes before it cuts the padding in) given to SDPA where
    nothing is padded: all True, of unnamed axes; ``transposed``: the same mask ``.mT``, which on this input
    is the same tensor. Neither names nor values can tell them apart: ``?`` both."""

    def __init__(self, dim: int, heads: int, transposed: bool = False):
        super().__init__()
        self.heads, self.transposed = heads, transposed
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d_k)
        keep = torch.ones(5, 5, dtype=torch.bool)                                               # (T, S): literal
        keep = keep.mT if self.transposed else keep
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)                          # (B, H, T, d_k)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dims", ["B=1 T=5 D=24 H=3", "B=2 T=5 D=24 H=3", "B=5 T=5 D=20 H=5"])
def test_an_sdpa_mask_of_literal_sizes_that_attends_everywhere_is_not_checked(dims, transposed):
    """Before: ``✓`` (its ops' outputs are named by SDPA's rule, and nothing read the mask)."""
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in dims.split())}
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        SdpaLiteralMask(sizes["D"], sizes["H"], transposed).eval()(torch.randn(sizes["B"], 5, sizes["D"]))
    assert _outcome(t) == ("?", ())
    assert "mask-unexercised" in _notes(t)


class LiteralPadding(nn.Module):
    """A padding mask made inside the model from literal lengths (fairseq's ``key_padding_mask`` built
    with ``torch.zeros(bsz, src_len, dtype=torch.bool)`` where the batch has no padding): it hides nothing."""

    def __init__(self, dim: int, heads: int, on_queries: bool = False):
        super().__init__()
        self.heads, self.on_queries = heads, on_queries
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)  # (3, B, H, T, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // self.heads)                       # (B, H, T, S)
        pad = torch.zeros(3, 6, dtype=torch.bool)                                           # (B, S): literal
        pad = pad[:, None, :, None] if self.on_queries else pad[:, None, None, :]
        scores = scores.masked_fill(pad, float("-inf"))                                     # (B, H, T, S)
        return scores.softmax(-1) @ v                                                       # (B, H, T, d_k)


@pytest.mark.parametrize("on_queries,want", [(False, ("✓", ())), (True, ("✗", ("mask-wrong-axis",)))])
def test_a_mask_of_literal_sizes_that_hides_nothing(on_queries, want):
    """On the keys ``[B, 1, 1, S]`` its layout proves it (broadcast over the queries); on the queries its
    layout (broadcast over the keys) proves it wrong whatever its values, as before: checked either way, no note."""
    with torch.no_grad(), shapetrace.trace(dims="B=3 T=6 D=32 H=4") as t:
        LiteralPadding(32, 4, on_queries).eval()(torch.randn(3, 6, 32))
    assert _outcome(t) == want
    assert _notes(t) == []


def test_zeroing_padded_rows_is_no_mask_on_the_scores():
    """transformers' T5 and Longformer zero the padded positions of hidden states (``hidden_states.masked_fill(
    ~mask, 0)``-style fills with 0): a fill that hides no score is no mask, so nothing padded says nothing (no note)."""
    x, pad = torch.randn(2, 6, 32), torch.zeros(2, 6, dtype=torch.bool)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=6 D=32") as t:
        shapetrace.name(x, "B T D")
        shapetrace.name(pad, "B T")
        x.masked_fill(pad[..., None], 0.0).sum(1)                       # (B, D)
    assert [d.kind for d in t.diagnostics] == [] and t.report().verdict.mark == "✓"
