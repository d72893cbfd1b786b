"""Causal masks built from literal sizes, read on their values, earn the check mark (issue 33 item 1).

transformers' OPT builds its causal mask before the decoder runs (``_make_causal_mask(input_ids_shape,
dtype)``: ``torch.full((tgt_len, tgt_len), min)``, ``mask.masked_fill_(mask_cond < (mask_cond +
1).view(mask.size(-1), 1), 0)``, ``mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)``) from sizes
that no traced tensor gave, so its axes have no names and every correct file ended ``? … not checked
(unnamed axes): #0 view, #2 __getitem__, #3 expand``. Where the mask's values were read on the scores and
it hides exactly the keys after each query, its effect is read whole: the ops that built it are checked
on its values. A reversed mask stays an error; a mask that also hides padding earns nothing.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shapetrace
from shapetrace import NOT_ASKED

#: what a Python trace's verdict adds where nobody asked for the dependency contracts
UNASKED = f"; not measured: {NOT_ASKED}"

DIMS = "B=2 T=5 D=32 H=4"
SQUARE = "B=4 T=4 D=16 H=4"          # B = T = H = d_k = 4


class OPTAttention(nn.Module):
    """huggingface/transformers models/opt/modeling_opt.py (v4.30 ``OPTAttention.forward``): heads folded
    into the batch for ``torch.bmm``, the mask added to ``attn_weights.view(bsz, self.num_heads, tgt_len,
    src_len)``."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.v_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def _shape(self, t, bsz):
        return t.view(bsz, -1, self.heads, self.hd).transpose(1, 2).contiguous()  # (B, H, T, d_k)

    def forward(self, x, attention_mask):
        bsz, tgt_len, _ = x.size()
        q = self._shape(self.q_proj(x) * self.hd ** -0.5, bsz).view(bsz * self.heads, -1, self.hd)  # (B*H, T, d_k)
        k = self._shape(self.k_proj(x), bsz).view(bsz * self.heads, -1, self.hd)   # (B*H, S, d_k)
        v = self._shape(self.v_proj(x), bsz).view(bsz * self.heads, -1, self.hd)   # (B*H, S, d_k)
        w = torch.bmm(q, k.transpose(1, 2))                                        # (B*H, T, S)
        w = w.view(bsz, self.heads, tgt_len, -1) + attention_mask                  # (B, H, T, S) [mask]
        w = w.view(bsz * self.heads, tgt_len, -1).softmax(dim=-1)                  # (B*H, T, S)
        out = torch.bmm(w, v).view(bsz, self.heads, tgt_len, self.hd)              # (B, H, T, d_k)
        return self.out_proj(out.transpose(1, 2).reshape(bsz, tgt_len, -1))        # (B, T, D)


def make_causal_mask(bsz: int, tgt_len: int, reversed_: bool = False, padded: bool = False):
    """transformers' OPT ``_make_causal_mask`` (``reversed_``: ``>`` for ``<``, the slip that hides the
    past; ``padded``: the last key of the first sequence hidden too, as ``_expand_mask`` adds padding)."""
    mask = torch.full((tgt_len, tgt_len), torch.finfo(torch.float32).min)
    cond = torch.arange(mask.size(-1))
    keep = cond > (cond - 1).view(mask.size(-1), 1) if reversed_ else cond < (cond + 1).view(mask.size(-1), 1)
    mask.masked_fill_(keep, 0)                                                     # (T, T)
    mask = mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)                 # (B, 1, T, T)
    if padded:
        pad = torch.zeros(bsz, 1, 1, tgt_len)
        pad[0, ..., -1] = torch.finfo(torch.float32).min
        mask = mask + pad                                                          # (B, 1, T, T)
    return mask


def _traced(dims: str, **kwargs):
    sizes = dict(part.split("=") for part in dims.split())
    B, T, D, H = (int(sizes[k]) for k in "BTDH")
    torch.manual_seed(0)
    model = OPTAttention(D, H).eval()
    x = torch.randn(B, T, D)
    with torch.no_grad(), shapetrace.trace(dims=dims) as t:
        shapetrace.name(x, "B T D")
        model(x, make_causal_mask(B, T, **kwargs))
    return t


@pytest.mark.parametrize(("dims", "by_values"), [(DIMS, 3), (SQUARE, 1)])
def test_a_causal_mask_from_literal_sizes_read_on_the_scores_earns_the_check_mark(dims, by_values):
    """(At T = 4 the mask's ``[T, T]`` fits the scores' last two axes, which name it from there on; the
    values still check every op that built it, and the line counts the ops only the values checked.)"""
    t = _traced(dims)
    assert [d.kind for d in t.diagnostics if d.severity != "note"] == []
    built = [e.op for e in t.events if e.checked_on_values]
    assert built == ["view", "masked_fill_", "__getitem__", "expand"]
    assert t.report().verdict.line == (
        f"✓ checked all 26 ops that could carry a layout bug ({by_values} of them on the values of the rotary tables "
        "or causal masks they build): every axis keeps its meaning from input to output" + UNASKED)


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_reversed_mask_stays_an_error(dims):
    t = _traced(dims, reversed_=True)
    assert [d.kind for d in t.diagnostics if d.severity == "error"] == ["causal-mask-reversed"]
    assert t.report().verdict.mark == "✗"


@pytest.mark.parametrize("dims", [DIMS, SQUARE])
def test_a_mask_that_also_hides_padding_is_not_checked_on_its_values(dims):
    t = _traced(dims, padded=True)
    verdict = t.report().verdict
    assert not any(e.checked_on_values for e in t.events)
    assert verdict.mark == "?" and verdict.on_values == 0
