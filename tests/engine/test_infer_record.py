"""shapetrace/engine/infer/record.py (with propagate.first_broadcast): an in-place fill names what its own axes
leave unnamed.

``nn.MultiheadAttention(..., batch_first=True)`` given a ``key_padding_mask`` turns it into a float mask with
torch's ``_canonical_mask``: ``zeros_like(mask, dtype=float).masked_fill_(mask, -inf)``. The zeros carry no name
(``zeros_like`` makes no row) and the in-place fill kept its node's own unnamed axes, so the mask's ``(B, T)`` was
lost and "#19 view" joined the unchecked ops (``? checked 26 of 30``) on 14a2e35 (branch r11's first commit).
The mask lines up with what it fills by broadcasting, so an axis the filled tensor leaves unnamed takes the
mask's name there. What stays unchecked: ``expand(-1, num_heads, -1, -1)`` grows the heads from a plain int,
which proves no name, and the fold ``B*H`` after it."""

from __future__ import annotations

import torch
from torch import nn

import shapetrace

DIMS = "B=2 T=6 D=64 H=4"


def test_a_padding_mask_filled_in_place_keeps_its_names():
    torch.manual_seed(0)
    attn = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 6, 64)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        attn(x, x, x, key_padding_mask=pad, need_weights=False)
    fill = next(e for e in t.events if e.op == "masked_fill_")
    # (the filled tensor is zeros_like(mask): it carries the mask's B and T since 07aacdd gave zeros_like its entry)
    assert [i.dims for i in fill.inputs] == [("B", "T"), ("B", "T")] and fill.outputs[0].dims == ("B", "T")
    view = next(e for e in t.events if e.op == "view" and e.inputs[0].shape == (2, 6))
    assert view.inputs[0].dims == ("B", "T") and view.outputs[0].dims == ("B", None, None, "T")
    assert t.report().verdict.unchecked == ((view.index + 1, "expand"), (view.index + 2, "reshape"),
                                            (view.index + 3, "view"))


def test_a_named_tensor_filled_in_place_keeps_its_own_names():
    scores, mask = torch.randn(2, 6, 6), torch.ones(6, 6, dtype=torch.bool).triu(1)
    with torch.no_grad(), shapetrace.trace(dims=DIMS) as t:
        shapetrace.name(scores, "B T S")
        shapetrace.name(mask, "S T")
        scores.masked_fill_(mask, float("-inf"))
    assert t.events[-1].outputs[0].dims == ("B", "T", "S")



def test_a_pinned_mask_join_takes_the_count_its_latents_were_given():
    """Idefics2's resampler (tests/corpus/public17/idefics2_resampler.py): the context's padding mask extended
    with ``ones(B, latents.size(1))`` for the latents, ``cat([mask, ones], -1)``, is unnamed on the first walk (the
    latents are counted, ``3``, only once their join with the context names the keys ``T+3``); walked again with
    the pins, the mask's pin kept the first walk's unknown there on af0e286 (main): now the join is ``T+3``, as the
    keys'."""
    from tests.corpus.helpers import traced_build
    from tests.corpus.public17 import idefics2_resampler

    t = traced_build(idefics2_resampler, "", "B=2 T=6 N=3 D=32 H=4 H_kv=2")
    joins = [e.outputs[0].dims for e in t.events if e.op == "cat"]
    assert joins[:2] == [("B", "T+3"), ("B", "T+3", "D")]


# -- a tensordot by a parameter matrix (on 0131a52, main, ``torch.tensordot`` was no op of the registry and made no
# row: tests/corpus/public43/autoint_interacting.py, DeepCTR-Torch's AutoInt ``InteractingLayer``, projects its
# fields by ``tensordot(inputs, W_Query, dims=([-1], [0]))``: ``? nothing was checked``, and its heads merged by a
# reshape across the batch were not seen) ---------------------------------------------------------------------------

def _autoint(merge_by_reshape: bool):
    torch.manual_seed(0)
    w_q, w_k, w_v = (nn.Parameter(torch.randn(16, 16)) for _ in range(3))
    x = torch.randn(2, 3, 16)
    with torch.no_grad(), shapetrace.trace(dims="B=2 T=3 D=16 H=4") as t:
        shapetrace.name(x, "B T D")
        q, k, v = (torch.stack(torch.split(torch.tensordot(x, w, dims=([-1], [0])), 4, dim=2))   # (H, B, T, d)
                   for w in (w_q, w_k, w_v))
        y = torch.einsum("bnik,bnjk->bnij", q, k).softmax(dim=-1) @ v                       # (H, B, T, d)
        if merge_by_reshape:
            y.reshape(2, 3, -1)                                                             # (B, T, D) mixed
        else:
            torch.cat(torch.split(y, 1), dim=-1).squeeze(0)                                 # (B, T, D)
    return t


def test_a_tensordot_by_a_parameter_matrix_is_a_projection():
    t = _autoint(merge_by_reshape=False)
    projection = next(e for e in t.events if e.op == "tensordot")
    assert projection.outputs[0].dims[:2] == ("B", "T")
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == []
    t = _autoint(merge_by_reshape=True)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["mixed-axis"]
