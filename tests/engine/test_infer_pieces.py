"""A projection's width split into more pieces than q, k and v, named by what each piece proves
(shapetrace/engine/infer/pieces.py).

``Linear(D, H·d_k + 2·H_kv·d_k + 64)`` cut ``split([H·d_k, H_kv·d_k, H_kv·d_k, 64])`` (Hymba's ``in_proj`` with
the state-space branch's pieces, PaLM's parallel ``q, k, v, ff``): no declared name spells the width (here 192,
which is ``3*D`` by size alone, cut off its parts), so on 190afd4 every piece stayed unnamed and the grouped-query
head order was unchecked (``? checked 0 of 13``, the split's dims ``('B', 'T', None)`` each). The first two tests
fail on 190afd4; the last two guard the rule: a piece that no attention reads as queries, keys or values keeps a
width of its own, also where it is as wide as D or D_kv (equal sizes never decide a name), and one piece alone
(the values, with no queries read from the same projection) names nothing; both pass on 190afd4."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import shapetrace

DIMS = "B=3 T=6 D=64 H=4 H_kv=2"


class _FusedGQA(nn.Module):
    """q, k, v and a fourth piece ``z`` from one projection; grouped-query attention over H_kv = 2 heads."""

    def __init__(self, widths=(64, 32, 32, 64), tiled=False, swapped=False):
        super().__init__()
        self.widths, self.tiled, self.swapped = list(widths), tiled, swapped
        self.proj = nn.Linear(64, sum(widths))

    def forward(self, x):
        B, N, _ = x.shape
        q, k, v, z = self.proj(x).split(self.widths, -1)
        if self.swapped:   # the 2-head piece read as the queries, the 4-head one as the keys
            q, k = k, q
        q = q.reshape(B, N, -1, 16).transpose(1, 2)
        k = k.reshape(B, N, -1, 16).transpose(1, 2)
        v = v.view(B, N, 2, 16).transpose(1, 2)
        if self.tiled:
            k, v = k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1)
        elif not self.swapped:
            k, v = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        else:
            v = v.repeat_interleave(2, 1)
            q = q.repeat_interleave(2, 1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(B, N, -1) * torch.sigmoid(z[..., :64])


def _traced(model):
    torch.manual_seed(0)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        model.eval()(torch.randn(3, 6, 64))
    return t


def _dims(t, op):
    return [o.dims for e in t.events if e.op == op for o in e.outputs]


def test_the_pieces_read_as_queries_keys_and_values_name_the_width_and_the_rest_keeps_its_own():
    t = _traced(_FusedGQA())
    assert _dims(t, "linear") == [("B", "T", "D+D_kv+D_kv+F[128:192]")]
    assert _dims(t, "split") == [("B", "T", "D"), ("B", "T", "D_kv"), ("B", "T", "D_kv"), ("B", "T", "F[128:192]")]
    assert _dims(t, "view") == [("B", "T", "H_kv", "d_k")]
    assert t.report().verdict.line.startswith("✓ checked all 13 ops that could carry a layout bug")


def test_key_value_heads_tiled_in_a_four_way_split_are_a_gqa_head_order_error():
    t = _traced(_FusedGQA(tiled=True))
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["gqa-head-order"]
    assert t.report().verdict.line.startswith("✗ 1 error")


def test_a_split_no_attention_reads_keeps_widths_of_its_own():
    class Gated(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 96)

        def forward(self, x):
            a, b = self.proj(x).split([64, 32], -1)          # as wide as D and D_kv: sizes decide nothing
            return a.view(3, 6, 4, 16) * torch.sigmoid(b).view(3, 6, 2, 16).repeat_interleave(2, 2)

    t = _traced(Gated())
    assert _dims(t, "linear") == [("B", "T", "F")]
    assert _dims(t, "split") == [("B", "T", "F[0:64]"), ("B", "T", "F[64:96]")]


def test_pieces_read_in_each_others_places_name_nothing():
    t = _traced(_FusedGQA(widths=(64, 32, 32, 64), swapped=True))
    assert _dims(t, "split") == [("B", "T", None)] * 4   # (no piece read as the queries: the values prove nothing)
    assert t.report().verdict.line.startswith("? checked 1 of 13")   # (the fused projection itself: its width is
    # the weight's rows, checked since round 49 whatever its name; every piece after it stays unchecked)
